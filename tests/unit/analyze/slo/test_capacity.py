"""`analyze.slo.capacity`: prefill interference, the learnt capacity scale, demonstrated
rates."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmscaler.analyze.queueing.perf_model import PerfParams
from llmscaler.analyze.slo import capacity
from llmscaler.analyze.slo.attainment import Attainment
from llmscaler.analyze.slo.capacity import VariantLearning
from llmscaler.analyze.slo.workload import Workload
from llmscaler.domain.snapshot import PoolMetrics, ReplicaMetrics

# Prompt-heavy traffic on a fast GPU: 2,000-token prompts, 23-token answers.
CODE = PerfParams(5.4, 2.3, 122.0, 0.0018)


def stretched(params: PerfParams, rate: float, in_tokens: float, out_tokens: float) -> float:
    alpha, beta, gamma, delta = params.as_tuple()
    busy = rate * (gamma + delta * in_tokens) / 1000
    t0, t1 = gamma + out_tokens * alpha, delta * in_tokens + out_tokens * beta
    batch = rate * t0 / (1000 - rate * t1)
    return (alpha + beta * batch) / (1 - busy)


def test_interference_caps_prompt_heavy_traffic_where_itl_reaches_its_target() -> None:
    rate = capacity.interference_rate(
        params=CODE, in_tokens=2000, out_tokens=23, itl=50.0, ceiling=16.0
    )
    assert 4.0 < rate < 8.0  # the queue model alone says 16
    assert stretched(CODE, rate, 2000, 23) == pytest.approx(50.0, rel=1e-6)


def test_interference_leaves_a_rate_that_meets_the_target_alone() -> None:
    assert (
        capacity.interference_rate(
            params=CODE, in_tokens=2000, out_tokens=23, itl=50.0, ceiling=2.0
        )
        == 2.0
    )


def test_an_idle_replica_missing_the_target_sustains_nothing() -> None:
    assert (
        capacity.interference_rate(
            params=CODE, in_tokens=2000, out_tokens=23, itl=5.0, ceiling=10.0
        )
        == 0.0
    )


@given(itl=st.floats(min_value=6, max_value=500), ceiling=st.floats(min_value=0.01, max_value=100))
def test_interference_rate_is_within_ceiling_and_grows_with_the_target(
    itl: float, ceiling: float
) -> None:
    low = capacity.interference_rate(
        params=CODE, in_tokens=2000, out_tokens=23, itl=itl, ceiling=ceiling
    )
    high = capacity.interference_rate(
        params=CODE, in_tokens=2000, out_tokens=23, itl=itl * 1.5, ceiling=ceiling
    )
    assert 0.0 <= low <= high <= ceiling
    assert math.isfinite(low)


def test_a_rate_met_already_holds_its_stretch_only_the_growth_beyond_counts() -> None:
    whole = capacity.interference_rate(
        params=CODE, in_tokens=2000, out_tokens=23, itl=50.0, ceiling=16.0
    )
    lean = capacity.interference_rate(
        params=CODE, in_tokens=2000, out_tokens=23, itl=50.0, ceiling=16.0, met_at=whole
    )
    assert lean > whole
    # There the line alone, times the growth of the stretch from the rate met, is the target.
    alpha, beta, gamma, delta = CODE.as_tuple()
    prefill = gamma + delta * 2000
    t0, t1 = gamma + 23 * alpha, delta * 2000 + 23 * beta
    line = alpha + beta * lean * t0 / (1000 - lean * t1)
    growth = (1 - whole * prefill / 1000) / (1 - lean * prefill / 1000)
    assert line * growth == pytest.approx(50.0, rel=1e-6)


@given(
    itl=st.floats(min_value=6, max_value=500),
    ceiling=st.floats(min_value=0.01, max_value=100),
    low=st.floats(min_value=0, max_value=100),
    high=st.floats(min_value=0, max_value=100),
)
def test_the_rate_grows_with_the_rate_met_and_stays_within_the_ceiling(
    itl: float, ceiling: float, low: float, high: float
) -> None:
    low, high = min(low, high), max(low, high)
    rates = [
        capacity.interference_rate(
            params=CODE, in_tokens=2000, out_tokens=23, itl=itl, ceiling=ceiling, met_at=met
        )
        for met in (0.0, low, high)
    ]
    assert rates == sorted(rates)
    assert rates[0] >= 0.0
    assert rates[-1] <= ceiling


def load(*, rate: float, ttft: float, itl: float, busy: int = 2) -> Workload:
    return Workload(
        arrival_rate=rate,
        busy=busy,
        avg_input_tokens=2000.0,
        avg_output_tokens=23.0,
        ttft_ms=ttft,
        itl_ms=itl,
    )


def scale_after(
    seen: Workload, *, previous: float = 1.0, ttft_target: float = 4000.0, itl_target: float = 80.0
) -> float:
    """κ after one cycle of the CODE model (6 req/s modelled) showing `seen`."""
    return capacity.learnt_scale(
        previous=previous,
        load=seen,
        params=CODE,
        batch=256,
        modelled=6.0,
        ttft_target=ttft_target,
        itl_target=itl_target,
    )


def test_a_slower_than_modelled_variant_lowers_its_scale() -> None:
    scale = scale_after(load(rate=8.0, ttft=3000.0, itl=60.0))
    assert capacity.SCALE_MIN <= scale < 1.0


def test_a_reading_far_below_its_target_moves_the_scale_less() -> None:
    """The same latencies read against targets fifteen times higher: the curve is flat there,
    and the reading moves κ a tenth as far in log space (weight 0.1 of `SCALE_WEIGHT`)."""
    seen = load(rate=8.0, ttft=3000.0, itl=60.0)
    near = scale_after(seen)
    far = scale_after(seen, ttft_target=60_000.0, itl_target=1200.0)
    assert near < far < 1.0
    # Whichever latency gave the reading, it was at a twentieth of its target, 0.1 of the share.
    assert math.log(far) == pytest.approx(
        math.log(near) * (3000.0 / 60_000.0) / capacity.READING_SHARE
    )


def test_a_lightly_loaded_variant_is_no_reading() -> None:
    assert scale_after(load(rate=0.2, ttft=900.0, itl=40.0), previous=0.7) == 0.7


def test_demonstrated_rises_only_with_targets_met() -> None:
    met = load(rate=6.0, ttft=200.0, itl=20.0)
    missed = load(rate=10.0, ttft=200.0, itl=80.0)
    assert capacity.demonstrated(previous=1.0, load=met, ttft=500.0, itl=50.0) == 3.0
    assert capacity.demonstrated(previous=1.0, load=missed, ttft=500.0, itl=50.0) == 1.0
    idle = load(rate=0.0, ttft=200.0, itl=20.0, busy=0)
    assert capacity.demonstrated(previous=2.5, load=idle, ttft=500.0, itl=50.0) == 2.5


def replica(queue: float) -> ReplicaMetrics:
    return ReplicaMetrics(pod='p', variant='v', namespace='n', observed_at=0.0, queue_length=queue)


def test_draining_is_a_gateway_queue_or_many_waiting_per_replica() -> None:
    pool = PoolMetrics(model_id='m', namespace='n', observed_at=0.0, queue_size=3.0)
    assert capacity.draining(replicas=[replica(0.0)], pool=pool)
    assert capacity.draining(replicas=[replica(12.0), replica(0.0)], pool=None)
    assert not capacity.draining(replicas=[replica(2.0), replica(3.0)], pool=None)
    assert not capacity.draining(replicas=[], pool=None)


TWO_PER_REPLICA = Workload(
    arrival_rate=4.0, busy=2, avg_input_tokens=2000, avg_output_tokens=20, ttft_ms=300, itl_ms=10
)
MISSING = Attainment(finished=400, missed=0.16)
"""Missed at 2 req/s per replica: a reading of half of it, 1 req/s."""


def missed(
    *, scale: float, demonstrated: float, modelled: float, seen: Attainment = MISSING
) -> VariantLearning | None:
    return capacity.missed_targets(
        previous=VariantLearning(scale=scale, demonstrated=demonstrated),
        seen=seen,
        load=TWO_PER_REPLICA,
        modelled=modelled,
        budget=0.01,
    )


def test_missed_targets_only_ever_lower_what_a_variant_is_worth() -> None:
    low = missed(scale=0.05, demonstrated=3.0, modelled=10.0)
    assert low is not None
    assert low.scale == 0.05
    assert low.demonstrated == pytest.approx(1.0)
    high = missed(scale=1.0, demonstrated=0.0, modelled=10.0)
    assert high is not None
    assert high.scale == pytest.approx(math.exp(0.7 * math.log(1.0) + 0.3 * math.log(0.1)))
    assert high.demonstrated == 0.0
    within = Attainment(finished=400, missed=0.002)
    assert missed(scale=1.0, demonstrated=0.0, modelled=10.0, seen=within) is None


def test_misses_of_an_overloaded_variant_lower_nothing_but_what_it_showed() -> None:
    # 2 req/s per replica against 1.5 it is counted for (κ 0.5 × 3): the misses say it
    # sustains less than 2, not less than 1.5.
    over = missed(scale=0.5, demonstrated=3.0, modelled=3.0)
    assert over is not None
    assert over.scale == 0.5
    assert over.demonstrated == pytest.approx(1.0)
    # Counted for 2.4 (κ 0.8 × 3) and missing at 2: the variant is worth less than believed.
    under = missed(scale=0.8, demonstrated=3.0, modelled=3.0)
    assert under is not None
    assert under.scale < 0.8
