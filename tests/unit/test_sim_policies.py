"""Simulator policies: the core as the controller runs it, the KEDA/HPA baseline, a fixed fleet.

| case | expectation |
|---|---|
| CorePolicy on a snapshot | the targets of a direct `engine.decide` call; state carried on |
| CorePolicy wake, idle model with a queue | cheapest variant to 1 |
| KEDA queue trigger Σ21 / 5 | ceil(4.2) = 5 |
| KEDA KV trigger Σ2.7 / 0.8 | ceil(3.375) = 4 |
| KEDA tolerance r = 1.05, r = 1.1 (inclusive), r = 1.1005 | hold, hold, scale |
| KEDA stabilization | a drop applies only once every higher proposal is 300 s old |
| KEDA scale-up limit | max(2·current, current + 4) per cycle |
| KEDA floor | never below 1 (nor the variant's min), 0 → 1, max wins |
| KEDA NaN / Inf / negative gauges | count as 0 |
| Static parsing | static:N on the first variant, explicit lists, every error |
| properties | KEDA within bounds; CorePolicy = decide on any snapshot |
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmscaler.config.types import Config
from llmscaler.engine import decide
from llmscaler.model import EMPTY_STATE, PoolMetrics, ReplicaMetrics, Snapshot, Variant
from llmscaler.sim.policies import (
    CorePolicy,
    KedaQueuePolicy,
    StaticPolicy,
    external_average_value,
    parse_static,
)
from llmscaler.sim.types import ControlView
from tests.unit.configs import TOKEN
from tests.unit.strategies import NOW, snapshots
from tests.unit.test_engine import MODEL, NS, variant


def running(name: str, count: int, **kw: object) -> Variant:
    """A variant with `count` replicas, all ready."""
    return variant(name, current_replicas=count, ready_replicas=count, **kw)


def replica(name: str, pod: int, *, queue: float = 0.0, kv: float = 0.0) -> ReplicaMetrics:
    return ReplicaMetrics(
        pod=f'{name}-{pod}',
        variant=name,
        namespace=NS,
        observed_at=NOW - 5.0,
        kv_usage=kv,
        queue_length=queue,
        num_gpu_blocks=1000,
        block_size=16,
        avg_input_tokens=1000.0,
        avg_output_tokens=200.0,
    )


def view(
    variants: list[Variant],
    replicas: list[ReplicaMetrics] = (),  # type: ignore[assignment]
    pools: list[PoolMetrics] = (),  # type: ignore[assignment]
    *,
    now: float = NOW,
) -> ControlView:
    return ControlView(
        now=now,
        snapshot=Snapshot(variants=tuple(variants), replicas=tuple(replicas), pools=tuple(pools)),
        replicas={v.name: v.current_replicas for v in variants},
        ready={v.name: v.ready_replicas for v in variants},
    )


# ---- CorePolicy ------------------------------------------------------------------------------


def test_core_policy_returns_the_engine_decisions_and_carries_the_state() -> None:
    variants = [running('h100', 2, cost=3.9), running('l40s', 1, cost=1.9)]
    replicas = [
        replica('h100', 0, queue=8.0, kv=0.9),
        replica('h100', 1, queue=6.0, kv=0.85),
        replica('l40s', 0, queue=0.0, kv=0.2),
    ]
    first = view(variants, replicas)
    policy = CorePolicy(name='default', config=Config())
    assert policy.name == 'default'
    assert policy.state == EMPTY_STATE
    direct = decide(snapshot=first.snapshot, config=Config(), state=EMPTY_STATE, now=NOW)
    assert policy.targets(view=first) == {d.variant: d.target for d in direct.decisions}
    assert policy.last_decisions == direct.decisions
    assert policy.state == direct.state
    # The second cycle runs on the state the first one returned.
    second = view(variants, replicas, now=NOW + 30.0)
    again = decide(snapshot=second.snapshot, config=Config(), state=direct.state, now=NOW + 30.0)
    assert policy.targets(view=second) == {d.variant: d.target for d in again.decisions}
    assert policy.state == again.state


def test_core_policy_token_analyzer_keeps_its_memory() -> None:
    variants = [running('h100', 1, cost=3.9)]
    replicas = [replica('h100', 0, queue=12.0, kv=0.95)]
    policy = CorePolicy(name='saturation-token', config=TOKEN)
    policy.targets(view=view(variants, replicas))
    expected = decide(
        snapshot=view(variants, replicas).snapshot, config=TOKEN, state=EMPTY_STATE, now=NOW
    )
    assert policy.state == expected.state
    assert policy.state.last_desired == (('llm/h100', expected.decisions[0].target),)


def test_core_policy_wakes_the_cheapest_variant_of_an_idle_model_with_a_queue() -> None:
    variants = [variant('h100', cost=3.9), variant('l40s', cost=1.9)]
    queued = PoolMetrics(model_id=MODEL, namespace=NS, observed_at=NOW, queue_size=2.0)
    policy = CorePolicy(name='default', config=Config())
    assert policy.wake(view=view(variants, pools=[queued])) == {'l40s': 1}
    empty = PoolMetrics(model_id=MODEL, namespace=NS, observed_at=NOW, queue_size=0.0)
    assert policy.wake(view=view(variants, pools=[empty])) == {}
    # A model with a replica is the main cycle's business.
    awake = [running('h100', 1, cost=3.9), variant('l40s', cost=1.9)]
    assert policy.wake(view=view(awake, pools=[queued])) == {}


@settings(max_examples=40, deadline=None)
@given(snapshot=snapshots())
def test_core_policy_equals_decide_on_any_snapshot(snapshot: Snapshot) -> None:
    policy = CorePolicy(name='token', config=TOKEN)
    control = ControlView(now=NOW, snapshot=snapshot, replicas={}, ready={})
    direct = decide(snapshot=snapshot, config=TOKEN, state=EMPTY_STATE, now=NOW)
    assert policy.targets(view=control) == {d.variant: d.target for d in direct.decisions}


# ---- KEDA / HPA ------------------------------------------------------------------------------


def test_external_average_value_worked_numbers() -> None:
    # r = 21 / (5 · 2) = 2.1 → outside → ceil(21 / 5) = ceil(4.2) = 5
    assert external_average_value(total=21.0, target=5.0, status_replicas=2, tolerance=0.1) == 5
    # r = 10.5 / 10 = 1.05 → within → status.replicas = 2 (not ceil(2.1) = 3)
    assert external_average_value(total=10.5, target=5.0, status_replicas=2, tolerance=0.1) == 2
    # r = 11 / 10 = 1.1 exactly → within (inclusive bound)
    assert external_average_value(total=11.0, target=5.0, status_replicas=2, tolerance=0.1) == 2
    # r = 9 / 10 = 0.9 exactly → within
    assert external_average_value(total=9.0, target=5.0, status_replicas=2, tolerance=0.1) == 2
    # r = 8.5 / 10 = 0.85 → outside → ceil(8.5 / 5) = ceil(1.7) = 2 (by the formula)
    assert external_average_value(total=8.5, target=5.0, status_replicas=2, tolerance=0.1) == 2
    # r = 11.005 / 10 = 1.1005 → outside → ceil(2.201) = 3
    assert external_average_value(total=11.005, target=5.0, status_replicas=2, tolerance=0.1) == 3
    # status 0: no ratio; ceil(0.9 / 0.8) = ceil(1.125) = 2
    assert external_average_value(total=0.9, target=0.8, status_replicas=0, tolerance=0.1) == 2
    # 1.6 / 0.8 in milli-units: 1600 / 800 = 2 exactly, not 2.0000000000000004 → 3
    assert external_average_value(total=1.6, target=0.8, status_replicas=0, tolerance=0.1) == 2
    # nothing: 0
    assert external_average_value(total=0.0, target=5.0, status_replicas=3, tolerance=0.1) == 0


def test_keda_queue_trigger() -> None:
    # Q = 12 + 9 = 21, r = 21 / (5 · 2) = 2.1 → ceil(21 / 5) = 5
    # K = 0.5 + 0.4 = 0.9, r = 0.9 / (0.8 · 2) = 0.5625 → ceil(0.9 / 0.8) = 2
    # max(5, 2) = 5 ≤ limit max(2 · 2, 2 + 4) = 6
    policy = KedaQueuePolicy()
    replicas = [replica('h100', 0, queue=12.0, kv=0.5), replica('h100', 1, queue=9.0, kv=0.4)]
    assert policy.targets(view=view([running('h100', 2)], replicas)) == {'h100': 5}


def test_keda_kv_trigger() -> None:
    # Q = 0 → 0; K = 0.9 + 0.95 + 0.85 = 2.7, r = 2.7 / (0.8 · 3) = 1.125 → ceil(3.375) = 4
    policy = KedaQueuePolicy()
    replicas = [
        replica('h100', 0, kv=0.9),
        replica('h100', 1, kv=0.95),
        replica('h100', 2, kv=0.85),
    ]
    assert policy.targets(view=view([running('h100', 3)], replicas)) == {'h100': 4}


def test_keda_tolerance_band_holds_the_current_count() -> None:
    # Q = 10.5: r = 10.5 / 10 = 1.05 → 2; K = 1.7: r = 1.7 / 1.6 = 1.0625 → 2; max = 2
    policy = KedaQueuePolicy()
    replicas = [replica('h100', 0, queue=5.5, kv=0.9), replica('h100', 1, queue=5.0, kv=0.8)]
    assert policy.targets(view=view([running('h100', 2)], replicas)) == {'h100': 2}
    # Without tolerance the same load asks ceil(10.5 / 5) = 3.
    strict = KedaQueuePolicy(tolerance=0.0)
    assert strict.targets(view=view([running('h100', 2)], replicas)) == {'h100': 3}


def test_keda_tolerance_applies_per_trigger_then_max() -> None:
    # Q = 10.5 within → 2; K = 3.2: r = 3.2 / 1.6 = 2 → ceil(3.2 / 0.8) = 4; max = 4
    policy = KedaQueuePolicy()
    replicas = [replica('h100', 0, queue=5.5, kv=1.6), replica('h100', 1, queue=5.0, kv=1.6)]
    assert policy.targets(view=view([running('h100', 2)], replicas)) == {'h100': 4}


def test_keda_scale_down_waits_for_the_stabilization_window() -> None:
    policy = KedaQueuePolicy()
    busy = [replica('h100', i, queue=5.0, kv=0.8) for i in range(4)]
    idle = [replica('h100', i) for i in range(4)]
    fleet = [running('h100', 4)]
    # t = 0: Q = 20, r = 20 / 20 = 1 → 4 (the log is also seeded with current = 4 at t = 0).
    assert policy.targets(view=view(fleet, busy, now=0.0)) == {'h100': 4}
    # t = 30 .. 270: proposal 0 (Q = K = 0), but max(0, 4 @ t = 0) = 4.
    for t in range(30, 300, 30):
        assert policy.targets(view=view(fleet, idle, now=float(t))) == {'h100': 4}, t
    # t = 300: the t = 0 entries are 300 s old (age < 300 s counts), max = 0 → floor 1.
    assert policy.targets(view=view(fleet, idle, now=300.0)) == {'h100': 1}


def test_keda_stabilization_takes_the_max_of_the_window() -> None:
    policy = KedaQueuePolicy()
    fleet = [running('h100', 6)]
    # t = 0: Q = 30 → r = 30 / 30 = 1 → 6; t = 100: Q = 15 → r = 0.5 → ceil(3) = 3, held at 6.
    assert policy.targets(view=view(fleet, [replica('h100', 0, queue=30.0)], now=0.0)) == {
        'h100': 6
    }
    mid = [replica('h100', 0, queue=15.0)]
    assert policy.targets(view=view(fleet, mid, now=100.0)) == {'h100': 6}
    # t = 300: 6 @ 0 expired, 3 @ 100 is 200 s old: max(0, 3) = 3.
    assert policy.targets(view=view(fleet, [], now=300.0)) == {'h100': 3}
    # t = 400: 3 @ 100 expired, only 0 @ 300 and now: 1 (floor).
    assert policy.targets(view=view(fleet, [], now=400.0)) == {'h100': 1}


def test_keda_scale_up_is_limited_per_cycle() -> None:
    # current 1: Q = 100 → ceil(20) = 20; limit max(2 · 1, 1 + 4) = 5.
    policy = KedaQueuePolicy()
    hot = [replica('h100', 0, queue=100.0)]
    assert policy.targets(view=view([running('h100', 1, max_replicas=30)], hot)) == {'h100': 5}
    # current 6: limit max(12, 10) = 12 (the proposal 20 stays in the log).
    hot6 = [replica('h100', i, queue=100.0 / 6) for i in range(6)]
    assert policy.targets(view=view([running('h100', 6, max_replicas=30)], hot6)) == {'h100': 12}
    # max_replicas 8 binds before the limit.
    capped = KedaQueuePolicy()
    assert capped.targets(view=view([running('h100', 6, max_replicas=8)], hot6)) == {'h100': 8}


def test_keda_never_goes_below_one_and_respects_the_variant_bounds() -> None:
    policy = KedaQueuePolicy()
    # current 0 (min 0): the HPA floor is max(1, 0) = 1, no metrics read.
    assert policy.targets(view=view([variant('a')])) == {'a': 1}
    # current 1, no load: proposal 0 → floor 1 (KEDA without the HTTP add-on stays at 1).
    assert policy.targets(view=view([running('b', 1)])) == {'b': 1}
    # the variant's own min 3 is the floor.
    assert policy.targets(view=view([running('c', 3, min_replicas=3)])) == {'c': 3}
    # current above max: max.
    assert policy.targets(view=view([running('d', 5, max_replicas=2)])) == {'d': 2}
    # a variant allowed no replica stays at 0.
    assert policy.targets(view=view([variant('e', max_replicas=0)])) == {'e': 0}
    # min_replicas=0 lets an idle variant go to 0 (after the window: the seed is at `now`).
    zero = KedaQueuePolicy(min_replicas=0)
    assert zero.targets(view=view([running('f', 1)], now=0.0)) == {'f': 1}
    assert zero.targets(view=view([running('f', 1)], now=300.0)) == {'f': 0}


def test_keda_bad_gauges_count_as_zero() -> None:
    policy = KedaQueuePolicy()
    replicas = [
        replica('h100', 0, queue=math.nan, kv=math.inf),
        replica('h100', 1, queue=-4.0, kv=-1.0),
        replica('h100', 2, queue=15.0, kv=0.0),
    ]
    # Q = 0 + 0 + 15 = 15: r = 15 / 15 = 1 → 3; K = 0 → 0. max = 3.
    assert policy.targets(view=view([running('h100', 3)], replicas)) == {'h100': 3}


def test_keda_variants_scale_independently() -> None:
    policy = KedaQueuePolicy()
    fleet = [running('h100', 1, cost=3.9), running('l40s', 1, cost=1.9)]
    # h100: Q = 12 → r = 2.4 → ceil(2.4) = 3; l40s: nothing → 1.
    replicas = [replica('h100', 0, queue=12.0), replica('l40s', 0)]
    assert policy.targets(view=view(fleet, replicas)) == {'h100': 3, 'l40s': 1}
    assert policy.wake(view=view(fleet, replicas)) == {}
    assert policy.name == 'keda-queue'


def test_keda_status_counts_pending_pods() -> None:
    # current 4, 2 ready + 2 pending: status = 4. Q = 20: r = 20 / 20 = 1 → 4 (not 2·...).
    policy = KedaQueuePolicy()
    fleet = [variant('h100', current_replicas=4, ready_replicas=2, pending_replicas=2)]
    replicas = [replica('h100', i, queue=10.0) for i in range(2)]
    assert policy.targets(view=view(fleet, replicas)) == {'h100': 4}


@pytest.mark.parametrize(
    'kw',
    [
        {'queue_per_replica': 0.0},
        {'kv_target': math.nan},
        {'tolerance': -0.1},
        {'down_stabilization': math.inf},
        {'min_replicas': -1},
    ],
)
def test_keda_rejects_bad_settings(kw: dict[str, float]) -> None:
    with pytest.raises(ValueError, match=next(iter(kw))):
        KedaQueuePolicy(**kw)  # type: ignore[arg-type]


@settings(max_examples=60, deadline=None)
@given(
    current=st.integers(min_value=0, max_value=12),
    low=st.integers(min_value=0, max_value=3),
    high=st.integers(min_value=0, max_value=12),
    queues=st.lists(st.floats(min_value=0, max_value=200), max_size=6),
    kvs=st.lists(st.floats(min_value=0, max_value=1), max_size=6),
)
def test_keda_target_stays_in_bounds(
    current: int, low: int, high: int, queues: list[float], kvs: list[float]
) -> None:
    high = max(high, low)
    fleet = [running('v', current, min_replicas=low, max_replicas=high)]
    replicas = [replica('v', i, queue=q) for i, q in enumerate(queues)]
    replicas += [replica('v', 10 + i, kv=k) for i, k in enumerate(kvs)]
    target = KedaQueuePolicy().targets(view=view(fleet, replicas))['v']
    assert min(max(1, low), high) <= target <= high
    if current >= 1:
        assert target <= max(2 * current, current + 4)


# ---- StaticPolicy ----------------------------------------------------------------------------


def test_parse_static_count_goes_on_the_first_variant() -> None:
    policy = parse_static(text='static:3', variants=['l40s', 'h100'])
    assert policy.name == 'static:3'
    assert policy.fixed == {'h100': 0, 'l40s': 3}
    assert policy.targets(view=view([running('l40s', 1)])) == {'h100': 0, 'l40s': 3}
    assert policy.wake(view=view([variant('l40s')])) == {}


def test_parse_static_explicit_list() -> None:
    policy = parse_static(text='static:h100=2, l40s=1', variants=['h100', 'l40s', 'a100'])
    assert policy.fixed == {'a100': 0, 'h100': 2, 'l40s': 1}
    # The same targets every cycle.
    assert policy.targets(view=view([])) == policy.targets(view=view([], now=NOW + 30))


@pytest.mark.parametrize(
    ('text', 'message'),
    [
        ('static:a100=1', r'unknown variant .*a100.*valid: h100, l40s'),
        ('static:', 'empty'),
        ('static:-1', 'integer >= 0'),
        ('static:1.5', 'integer >= 0'),
        ('static:h100=x', 'integer >= 0'),
        ('static:h100=1,h100=2', 'twice'),
        ('static:h100=1,', 'VARIANT=N'),
        ('static:=2', 'VARIANT=N'),
        ('fixed:2', 'not a static policy'),
    ],
)
def test_parse_static_errors(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_static(text=text, variants=['h100', 'l40s'])


def test_parse_static_without_variants() -> None:
    with pytest.raises(ValueError, match='no variants'):
        parse_static(text='static:2', variants=[])


def test_static_policy_rejects_negative_targets() -> None:
    with pytest.raises(ValueError, match='>= 0'):
        StaticPolicy(targets={'h100': -1}, name='bad')
    assert StaticPolicy(targets={'b': 1, 'a': 2}, name='s').fixed == {'a': 2, 'b': 1}
