"""The HPA peers in the simulator: `keda-queue` (the common KEDA configuration on vLLM's queue) and
`hpa-kv` (an HPA on KV usage), both on the exact HPA of `llmscaler.hpa`.

| case | expectation |
|---|---|
| KEDA queue trigger Σ21 / 5 | ceil(4.2) = 5 |
| KEDA KV trigger Σ2.7 / 0.8 | ceil(3.375) = 4 |
| KEDA tolerance r = 1.05 | hold |
| KEDA stabilization | a drop applies only once every higher proposal is 300 s old |
| KEDA scale-up limit | max(2·current, current + 4) per 15 s sync, two syncs per 30 s cycle |
| KEDA floor | never below 1 (nor the variant's min), 0 → 1, max wins |
| KEDA min 0 | to 0 once idle for the cooldown (at once if never active), woken to 1 by load |
| KEDA NaN / Inf / negative gauges | count as 0 |
| hpa-kv | ⌈avg/0.7 · ready⌉; pending pods at 0 on scale-up; a silent ready pod at target on |
| | scale-down; the legacy limit max(2·current, 4) |
| properties | within bounds, one sync never past max(2·current, current + 4) |
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmscaler.domain.snapshot import ReplicaMetrics
from llmscaler.sim.policies.peers import HpaKvPolicy, KedaQueuePolicy
from tests.support.engine_fixtures import variant
from tests.support.sim_fixtures import replica, running, view
from tests.support.strategies import NOW


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
    # t = 300: the t = 0 entries are 300 s old (the behaviour window counts age < 300 s only),
    # max = 0, the rate limit allows -100 % → floor 1.
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
    # t = 300 (an idle replica reports 0): 6 @ 0 expired, 3 @ 100 is 200 s old: max(0, 3) = 3.
    idle = [replica('h100', 0)]
    assert policy.targets(view=view(fleet, idle, now=300.0)) == {'h100': 3}
    # t = 400: 3 @ 100 expired, only 0 @ 300 and now: 1 (floor).
    assert policy.targets(view=view(fleet, idle, now=400.0)) == {'h100': 1}


def test_keda_scale_up_is_limited_per_sync() -> None:
    # current 1: Q = 100 → ceil(20) = 20; limit max(2 · 1, 1 + 4) = 5 (one sync on a first call).
    policy = KedaQueuePolicy()
    hot = [replica('h100', 0, queue=100.0)]
    assert policy.targets(view=view([running('h100', 1, max_replicas=30)], hot)) == {'h100': 5}
    # 15 s later, current 6 (the +4 has left its period): limit max(12, 10) = 12.
    hot6 = [replica('h100', i, queue=100.0 / 6) for i in range(6)]
    later = view([running('h100', 6, max_replicas=30)], hot6, now=NOW + 15)
    assert policy.targets(view=later) == {'h100': 12}
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
    idle = [replica('f', 0)]
    assert zero.targets(view=view([running('f', 1)], idle, now=0.0)) == {'f': 1}
    assert zero.targets(view=view([running('f', 1)], idle, now=300.0)) == {'f': 0}


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


def test_keda_syncs_every_15_seconds_between_cycles() -> None:
    # t = 0: 1 → 5 (+4). t = 30: a sync at 15 s (the +4 is 15 s old, out of the period: start 5,
    # limit max(5 + 4, 10) = 10) and one at 30 s (limit max(14, 20) = 20): 20.
    policy = KedaQueuePolicy()
    hot = [replica('h100', 0, queue=100.0)]
    first = view([running('h100', 1, max_replicas=30)], hot, now=0.0)
    assert policy.targets(view=first) == {'h100': 5}
    second = view([running('h100', 5, max_replicas=30)], hot, now=30.0)
    assert policy.targets(view=second) == {'h100': 20}


def test_keda_min_zero_parks_an_idle_variant_after_the_cooldown() -> None:
    policy = KedaQueuePolicy(min_replicas=0)
    busy = [replica('v', 0, queue=3.0)]
    idle = [replica('v', 0)]
    assert policy.targets(view=view([running('v', 1)], busy, now=0.0)) == {'v': 1}
    # Idle since t = 0: held until lastActiveTime + cooldown (300 s) < now.
    assert policy.targets(view=view([running('v', 1)], idle, now=300.0)) == {'v': 1}
    assert policy.targets(view=view([running('v', 1)], idle, now=330.0)) == {'v': 0}
    # At 0 the HPA is disabled; KEDA wakes the variant to 1 on an active trigger.
    assert policy.targets(view=view([variant('v')], now=360.0)) == {'v': 0}
    assert policy.targets(view=view([variant('v')], busy, now=390.0)) == {'v': 1}


def kv_replica(pod: int, kv: float | None) -> ReplicaMetrics:
    base = replica('v', pod)
    return ReplicaMetrics(
        pod=base.pod,
        variant=base.variant,
        namespace=base.namespace,
        observed_at=base.observed_at,
        kv_usage=kv,
        queue_length=0.0,
    )


def test_hpa_kv_scales_on_the_average_kv_usage() -> None:
    # avg 900 m / 700 m = 1.286 → ⌈1.286 · 2⌉ = 3.
    policy = HpaKvPolicy()
    replicas = [kv_replica(0, 0.9), kv_replica(1, 0.9)]
    assert policy.targets(view=view([running('v', 2)], replicas)) == {'v': 3}
    assert policy.name == 'hpa-kv'
    assert policy.wake(view=view([running('v', 2)], replicas)) == {}


def test_hpa_kv_counts_pending_pods_at_zero_on_scale_up() -> None:
    # 2 ready at 0.9 and 2 pending: re-added at 0, avg 450 m → r = 0.64, the direction flips:
    # hold 4 (the HPA's guard against piling up replicas that are still starting).
    policy = HpaKvPolicy()
    fleet = [variant('v', current_replicas=4, ready_replicas=2, pending_replicas=2)]
    replicas = [kv_replica(0, 0.9), kv_replica(1, 0.9)]
    assert policy.targets(view=view(fleet, replicas)) == {'v': 4}


def test_hpa_kv_assumes_a_silent_pod_at_target_on_scale_down() -> None:
    # 4 ready, one without a sample. Samples 0.1 · 3: r = 0.14; with the silent pod at 700 m:
    # avg (300 + 700) / 4 = 250 → r = 0.357 → ⌈1.43⌉ = 2 (instead of ⌈0.43 · 3⌉ = 1), after the
    # 300 s window (the first reconcile seeds the log with 4).
    policy = HpaKvPolicy()
    replicas = [kv_replica(0, 0.1), kv_replica(1, 0.1), kv_replica(2, 0.1), kv_replica(3, None)]
    fleet = [running('v', 4)]
    assert policy.targets(view=view(fleet, replicas, now=0.0)) == {'v': 4}
    assert policy.targets(view=view(fleet, replicas, now=330.0)) == {'v': 2}


def test_hpa_kv_legacy_scale_up_limit() -> None:
    # No behavior: the limit is max(2 · current, 4): r = 5 wants 5, 1 → 4.
    policy = HpaKvPolicy(kv_target=0.1)
    replicas = [kv_replica(0, 0.5)]
    assert policy.targets(view=view([running('v', 1, max_replicas=20)], replicas)) == {'v': 4}


def test_hpa_kv_rejects_bad_settings() -> None:
    with pytest.raises(ValueError, match='kv_target'):
        HpaKvPolicy(kv_target=0.0)
    with pytest.raises(ValueError, match='sync_period'):
        HpaKvPolicy(sync_period=math.inf)


def test_keda_missing_metrics_never_park_nor_scale_down() -> None:
    # No series at all: both triggers in error. The HPA's failing metrics block the scale-down
    # and KEDA parks nothing, however long it lasts.
    policy = KedaQueuePolicy(min_replicas=0)
    fleet = [running('v', 3)]
    for t in range(0, 900, 30):
        assert policy.targets(view=view(fleet, now=float(t))) == {'v': 3}, t
