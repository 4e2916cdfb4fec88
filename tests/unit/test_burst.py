"""`burst`: the burst rate the gateway's counts prove, and the fast path's raises through `decide`
(up only, one model alone, within its GPU budget, holding on missing readings, quiet after a
raise, only for a policy that asks for it)."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest

from llmscaler import burst
from llmscaler.burst import Count
from llmscaler.config.resolved import Config, ModelConfig
from llmscaler.domain.snapshot import GpuLimit, PoolMetrics, Snapshot
from llmscaler.domain.state import EMPTY_STATE, State
from llmscaler.engine import decide
from tests.support.engine_fixtures import MODEL, NS, replica, variant
from tests.support.predictive_fixtures import CONFIG, NOW, SETTINGS, fleet, observed

GROUP = f'{MODEL}|{NS}'


def counts(*, rate: float, seconds: float, before: float = 0.0, step: float = 0.5) -> list[Count]:
    """Polls every `step` s over the last 10 s: `before` req/s, then `rate` for `seconds`."""
    out: list[Count] = []
    arrived = 0.0
    t = NOW - 10.0
    while t <= NOW + 1e-9:
        out.append(Count(at=t, arrived=arrived))
        arrived += step * (rate if t >= NOW - seconds else before)
        t += step
    return out


def settled(snapshot: Snapshot) -> State:
    """The memory of two cycles on `snapshot`, as the fast path finds it between cycles."""
    state = EMPTY_STATE
    for at in (NOW - 60, NOW - 30):
        state = decide(snapshot=observed(snapshot, at=at), config=CONFIG, state=state, now=at).state
    return state


def raise_on(snapshot: Snapshot, *, rate: float, **poll_args: Any) -> tuple[burst.Raise, ...]:
    """The raises of one poll (`poll`'s arguments)."""
    return poll(snapshot, rate=rate, **poll_args).raises


def poll(
    snapshot: Snapshot,
    *,
    rate: float,
    state: State | None = None,
    config: Config = CONFIG,
    raised: dict[str, float] | None = None,
    checked: dict[str, float] | None = None,
) -> burst.Outcome:
    return burst.burst(
        snapshot=observed(snapshot, at=NOW),
        config=config,
        state=settled(snapshot) if state is None else state,
        counts={GROUP: counts(rate=rate, seconds=5.0, before=snapshot.pools[0].arrival_rate or 0)},
        raised=raised or {},
        now=NOW,
        checked=checked,
    )


def test_steady_arrivals_prove_no_burst() -> None:
    assert burst.burst_rate(counts=counts(rate=10.0, seconds=10.0), cycle_rate=10.0) is None


def test_a_burst_is_counted_for_what_the_counts_prove() -> None:
    rate = burst.burst_rate(counts=counts(rate=30.0, seconds=5.0, before=5.0), cycle_rate=5.0)
    assert rate is not None
    # A lower bound of the burst's rate, above the cycle's, below the truth.
    assert 10.0 < rate < 30.0


def test_the_evidence_grows_with_the_burst() -> None:
    early = burst.burst_rate(counts=counts(rate=30.0, seconds=2.0), cycle_rate=0.0)
    later = burst.burst_rate(counts=counts(rate=30.0, seconds=5.0), cycle_rate=0.0)
    assert early is not None
    assert later is not None
    assert later > early


def test_a_rise_smaller_than_doubling_is_no_burst() -> None:
    assert burst.burst_rate(counts=counts(rate=18.0, seconds=10.0), cycle_rate=10.0) is None


def test_a_handful_of_requests_after_silence_is_no_burst() -> None:
    few = [
        Count(at=NOW - 10, arrived=0.0),
        Count(at=NOW - 1, arrived=0.0),
        Count(at=NOW, arrived=3.0),
    ]
    assert burst.burst_rate(counts=few, cycle_rate=0.0) is None


def test_record_keeps_the_longest_span_and_restarts_on_a_reset() -> None:
    kept: tuple[Count, ...] = ()
    for second in range(30):
        kept = burst.record(counts=kept, count=Count(at=NOW + second, arrived=10.0 * second))
    assert kept[0].at <= kept[-1].at - max(burst.SPANS) < kept[1].at
    restarted = burst.record(counts=kept, count=Count(at=NOW + 30, arrived=4.0))
    assert restarted == (Count(at=NOW + 30, arrived=4.0),)
    assert burst.record(counts=kept, count=Count(at=math.nan, arrived=1.0)) == kept


def test_a_burst_raises_the_model_at_once_and_says_why() -> None:
    snapshot = fleet(h100=1, l40s=0, rate=2.0)
    (raised,) = raise_on(snapshot, rate=40.0)
    assert raised.group == GROUP
    assert raised.cycle_rate == 2.0
    assert sum(d.target - d.current for d in raised.decisions) >= 1
    assert all(d.target > d.current for d in raised.decisions)
    assert all(d.reason.startswith('burst: ') for d in raised.decisions)
    assert 'the cycle sized for 2' in raised.decisions[0].reason


def test_the_fast_path_never_lowers_a_target() -> None:
    # A fleet far larger than the burst needs: decided alone it would trim; nothing comes back.
    snapshot = fleet(h100=8, l40s=8, rate=1.0)
    assert raise_on(snapshot, rate=6.0) == ()


def test_a_model_raised_moments_ago_is_quiet() -> None:
    snapshot = fleet(h100=1, l40s=0, rate=2.0)
    assert raise_on(snapshot, rate=40.0, raised={GROUP: NOW - 1.0}) == ()
    assert raise_on(snapshot, rate=40.0, raised={GROUP: NOW - burst.QUIET}) != ()


def test_a_model_decided_moments_ago_is_not_decided_again() -> None:
    # A burst the fleet already serves: decided, nothing raised, and not decided on the next
    # polls; a burst it does not serve waits at most RECHECK for its raise.
    served = fleet(h100=8, l40s=8, rate=1.0)
    first = poll(served, rate=20.0)
    assert first.raises == ()
    assert first.decided == (GROUP,)
    assert poll(served, rate=20.0, checked={GROUP: NOW - 0.1}).decided == ()
    short = fleet(h100=1, l40s=0, rate=2.0)
    assert raise_on(short, rate=40.0, checked={GROUP: NOW - 0.1}) == ()
    assert raise_on(short, rate=40.0, checked={GROUP: NOW - burst.RECHECK}) != ()
    # Steady load proves no burst, so nothing is decided.
    assert poll(short, rate=2.0).decided == ()


def test_a_model_at_zero_is_left_to_scale_from_zero() -> None:
    snapshot = fleet(h100=0, l40s=0, rate=0.0)
    assert raise_on(snapshot, rate=40.0, state=EMPTY_STATE) == ()


def test_a_policy_that_does_not_ask_for_it_is_not_raised() -> None:
    snapshot = fleet(h100=1, l40s=0, rate=2.0)
    off = Config(default=ModelConfig(predictive=dataclasses.replace(SETTINGS, fast_path=False)))
    assert raise_on(snapshot, rate=40.0, config=off) == ()
    wva = Config(default=ModelConfig())
    assert raise_on(snapshot, rate=40.0, config=wva, state=EMPTY_STATE) == ()


def test_a_replica_without_its_readings_holds_the_burst() -> None:
    snapshot = fleet(h100=1, l40s=0, rate=2.0)
    state = settled(snapshot)
    broken = dataclasses.replace(
        snapshot, replicas=(dataclasses.replace(snapshot.replicas[0], avg_itl=None),)
    )
    assert raise_on(broken, rate=40.0, state=state) == ()


def test_the_gpu_budget_left_by_the_other_models_bounds_the_raise() -> None:
    snapshot = fleet(h100=1, l40s=0, rate=2.0)
    other = variant(
        'other-h100',
        model_id='other/model',
        accelerator='H100',
        current_replicas=3,
        ready_replicas=3,
    )
    limited = Config(
        default=ModelConfig(
            predictive=SETTINGS,
            saturation=dataclasses.replace(ModelConfig().saturation, enable_limiter=True),
        )
    )
    crowded = dataclasses.replace(
        snapshot,
        variants=(*snapshot.variants, other),
        gpu_limits=(GpuLimit(provider='inventory', accelerator='H100', limit=5),),
    )
    raised = raise_on(crowded, rate=60.0, config=limited)
    h100 = [d for r in raised for d in r.decisions if d.variant == 'h100']
    # 5 H100s, 3 held by the other model: at most one more for this one.
    assert all(d.target <= 2 for d in h100)


def test_a_burst_after_a_lull_is_sized_on_the_mix_the_model_last_showed() -> None:
    busy = fleet(h100=1, l40s=0, rate=2.0)
    state = settled(busy)
    # A lull longer than the windows: the replica has served nothing in them, no token mix.
    idle = dataclasses.replace(
        busy,
        replicas=(
            replica(
                'h100',
                0,
                arrival_rate=0.0,
                avg_input_tokens=None,
                avg_output_tokens=None,
                running_requests=0.0,
            ),
        ),
        pools=(PoolMetrics(model_id=MODEL, namespace=NS, observed_at=NOW - 5, arrival_rate=0.0),),
    )
    for at in (NOW - 20, NOW - 10):
        state = decide(snapshot=observed(idle, at=at), config=CONFIG, state=state, now=at).state
    (raised,) = raise_on(idle, rate=40.0, state=state)
    assert sum(d.target - d.current for d in raised.decisions) >= 1
    # Without the remembered mix the same burst holds: nothing to size on.
    assert raise_on(idle, rate=40.0, state=EMPTY_STATE) == ()


@pytest.mark.parametrize('rate', [0.0, 5.0])
def test_raises_are_deterministic(rate: float) -> None:
    snapshot = fleet(h100=1, l40s=1, rate=rate)
    assert raise_on(snapshot, rate=50.0) == raise_on(snapshot, rate=50.0)


def test_a_replica_ready_since_the_last_cycle_counts_as_starting() -> None:
    snapshot = fleet(h100=1, l40s=0, rate=2.0)
    state = settled(snapshot)
    # The cycle read one H100; a second one has become ready since, with no reading yet.
    grown = dataclasses.replace(
        snapshot,
        variants=tuple(
            dataclasses.replace(v, current_replicas=2, ready_replicas=2) if v.name == 'h100' else v
            for v in snapshot.variants
        ),
    )
    (raised,) = raise_on(grown, rate=60.0, state=state)
    assert all(d.metrics_available for d in raised.decisions)
    assert sum(d.target - d.current for d in raised.decisions) >= 1
