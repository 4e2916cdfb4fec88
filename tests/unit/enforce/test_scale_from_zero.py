"""Scale from zero: one wake per idle model with queued requests, on its cheapest variant.

| case | expectation |
|---|---|
| model at zero, queue 3 | cheapest variant to max(1, min) |
| cost tie | alphabetically first |
| cost not finite and positive | priced at 10, as scale-to-zero keeps one replica |
| model with a replica (even pending) | nothing |
| queue 0, NaN, Inf, negative, no pool | nothing |
| variant with max 0 | never chosen |
| two models, order of input shuffled | one wake each, sorted, same result |
"""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from llmscaler.config.resolved import CoreSettings, ModelConfig, ScaleToZeroConfig
from llmscaler.domain.snapshot import PoolMetrics, Variant
from llmscaler.enforce.scale_from_zero import wake
from llmscaler.enforce.scale_to_zero import enforce


def variant(name: str, *, model: str = 'm', **kw: object) -> Variant:
    fields: dict[str, object] = {
        'name': name,
        'namespace': 'ns',
        'model_id': model,
        'min_replicas': 0,
        'max_replicas': 4,
    }
    fields.update(kw)
    return Variant(**fields)  # type: ignore[arg-type]


def pool(queue: float, *, model: str = 'm') -> PoolMetrics:
    return PoolMetrics(model_id=model, namespace='ns', observed_at=0.0, queue_size=queue)


def test_wakes_the_cheapest_variant_of_an_idle_model() -> None:
    variants = [variant('h100', cost=3.9), variant('l40s', cost=1.9, min_replicas=0)]
    (woken,) = wake(variants=variants, pools=[pool(3.0)])
    assert (woken.variant, woken.target, woken.queue_size) == ('l40s', 1, 3.0)


def test_min_replicas_above_one_is_honoured_and_ties_go_by_name() -> None:
    variants = [variant('b', cost=2.0), variant('a', cost=2.0, min_replicas=2)]
    (woken,) = wake(variants=variants, pools=[pool(1.0)])
    assert (woken.variant, woken.target) == ('a', 2)


def test_an_unreadable_cost_is_priced_at_ten_not_last() -> None:
    # 0 and NaN read as 10 (the one cost rule): cheaper than 12, dearer than 9.
    for odd in (0.0, math.nan, math.inf, -1.0):
        woken = wake(variants=[variant('a', cost=odd), variant('b', cost=12.0)], pools=[pool(1.0)])
        assert woken[0].variant == 'a'
        woken = wake(variants=[variant('a', cost=odd), variant('b', cost=9.0)], pools=[pool(1.0)])
        assert woken[0].variant == 'b'


@given(
    costs=st.lists(st.sampled_from([0.0, math.nan, 1.9, 3.9, 10.0, 12.0]), min_size=1, max_size=4)
)
def test_the_variant_woken_is_the_one_kept_when_the_model_idles(costs: list[float]) -> None:
    variants = [variant(f'v{i}', cost=c) for i, c in enumerate(costs)]
    (woken,) = wake(variants=variants, pools=[pool(1.0)])
    kept = enforce(
        variants=variants,
        targets=dict.fromkeys((v.name for v in variants), 0),
        config=ModelConfig(scale_to_zero=ScaleToZeroConfig(enabled=False)),
        settings=CoreSettings(),
        request_count=0.0,
        in_flight=0.0,
        metrics_complete=True,
    )
    assert kept.modified == (woken.variant,)


def test_a_model_with_any_replica_is_left_to_the_main_cycle() -> None:
    variants = [variant('a', cost=1.0), variant('b', cost=2.0, current_replicas=1)]
    assert wake(variants=variants, pools=[pool(5.0)]) == ()


def test_empty_or_bad_queues_wake_nothing() -> None:
    variants = [variant('a')]
    for queue in (0.0, -1.0, math.nan, math.inf):
        assert wake(variants=variants, pools=[pool(queue)]) == ()
    assert wake(variants=variants, pools=[]) == ()


def test_a_variant_that_may_not_run_is_never_woken() -> None:
    variants = [variant('cheap', cost=1.0, max_replicas=0), variant('dear', cost=9.0)]
    (woken,) = wake(variants=variants, pools=[pool(1.0)])
    assert woken.variant == 'dear'
    assert wake(variants=[variant('x', max_replicas=0)], pools=[pool(1.0)]) == ()


@given(st.permutations([0, 1, 2, 3]))
def test_one_wake_per_model_whatever_the_order(order: list[int]) -> None:
    variants = [
        variant('m1-a', model='m1', cost=2.0),
        variant('m1-b', model='m1', cost=1.0),
        variant('m2-a', model='m2', cost=1.0),
        variant('m2-b', model='m2', cost=1.0),
    ]
    pools = [pool(1.0, model='m1'), pool(2.0, model='m2')]
    woken = wake(variants=[variants[i] for i in order], pools=pools[::-1])
    assert [w.variant for w in woken] == ['m1-b', 'm2-a']
