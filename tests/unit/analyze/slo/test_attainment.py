"""`analyze.slo.attainment`: the share of requests above their targets, from vLLM's
histograms."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmscaler.analyze import validity
from llmscaler.analyze.slo.attainment import (
    SHRINK_MAX,
    Attainment,
    attainment,
    capacity_reading,
    missing_beyond_doubt,
    share_above,
)
from llmscaler.domain.snapshot import LatencyHistogram, ReplicaMetrics

BUDGET = 0.01  # sloAttainment 0.99

# vLLM's ITL buckets up to 0.1 s; 100 requests, 5 of them beyond 0.1 s.
TPOT = LatencyHistogram(
    bounds=(0.01, 0.025, 0.05, 0.075, 0.1), counts=(10, 50, 80, 90, 95), total=100
)


def replica(
    name: str,
    *,
    tpot_histogram: LatencyHistogram | None = None,
    ttft_histogram: LatencyHistogram | None = None,
) -> ReplicaMetrics:
    return ReplicaMetrics(
        pod=name, variant='v', namespace='ns', observed_at=0.0, kv_usage=0.1, queue_length=0.0,
        tpot_histogram=tpot_histogram, ttft_histogram=ttft_histogram,
    )  # fmt: skip


def test_a_threshold_inside_a_bucket_takes_its_share_linearly() -> None:
    # (0.05, 0.075] holds 10 requests; 0.071 is 84 % of the way through it.
    assert share_above(histogram=TPOT, threshold=0.071) == pytest.approx((100 - 88.4) / 100)


def test_a_threshold_on_a_bound_counts_that_bucket_within() -> None:
    assert share_above(histogram=TPOT, threshold=0.05) == pytest.approx(0.20)


def test_requests_beyond_the_last_bound_count_above_any_larger_threshold() -> None:
    assert share_above(histogram=TPOT, threshold=3.0) == pytest.approx(0.05)


def test_below_the_first_bound_the_share_starts_at_zero() -> None:
    assert share_above(histogram=TPOT, threshold=0.005) == pytest.approx(0.95)


def test_no_finished_request_is_no_evidence() -> None:
    empty = LatencyHistogram(bounds=(0.01, 0.1), counts=(0, 0), total=0)
    assert share_above(histogram=empty, threshold=0.05) is None
    assert attainment(replicas=[replica('a', tpot_histogram=empty)], ttft=1, itl=0.05) is None
    assert attainment(replicas=[replica('a')], ttft=1, itl=0.05) is None


def test_attainment_pools_replicas_and_adds_the_two_shares() -> None:
    slow = LatencyHistogram(bounds=(0.05, 0.1), counts=(10, 20), total=20)  # half above 0.05
    fast = LatencyHistogram(bounds=(0.02, 0.05), counts=(20, 20), total=20)  # none above
    late = LatencyHistogram(bounds=(1.0, 2.0), counts=(36, 38), total=40)  # 4 of 40 above 1 s
    both = [
        replica('a', tpot_histogram=slow, ttft_histogram=late),
        replica('b', tpot_histogram=fast),
    ]
    seen = attainment(replicas=both, ttft=1.0, itl=0.05)
    assert seen is not None
    assert seen.finished == 40
    assert seen.missed == pytest.approx(10 / 40 + 4 / 40)


def test_the_sum_of_the_shares_is_at_most_one() -> None:
    late = LatencyHistogram(bounds=(0.5,), counts=(0,), total=30)
    seen = attainment(
        replicas=[replica('a', tpot_histogram=late, ttft_histogram=late)], ttft=0.1, itl=0.1
    )
    assert seen is not None
    assert seen.missed == 1.0


@pytest.mark.parametrize(
    ('finished', 'missed', 'beyond'),
    [
        (100, 0.05, True),  # 5 of 100: the 95 % bound is 1.4 %, above 1 %
        (1000, 0.012, False),  # 1.2 % of 1,000: could be 1 % by chance
        (10, 0.5, False),  # too few to say
        (5000, 0.005, False),  # within the budget
    ],
)
def test_misses_count_only_beyond_doubt(finished: float, missed: float, beyond: bool) -> None:
    assert (
        missing_beyond_doubt(seen=Attainment(finished=finished, missed=missed), budget=BUDGET)
        is beyond
    )


def test_a_looser_attainment_target_tolerates_more_misses() -> None:
    seen = Attainment(finished=2000, missed=0.04)
    assert capacity_reading(seen=seen, rate=2.0, budget=BUDGET) is not None
    assert capacity_reading(seen=seen, rate=2.0, budget=0.05) is None  # sloAttainment 0.95


def test_the_reading_shrinks_the_rate_more_the_more_is_missed() -> None:
    assert capacity_reading(
        seen=Attainment(finished=500, missed=0.16), rate=2.0, budget=BUDGET
    ) == (pytest.approx(1.0))
    assert capacity_reading(
        seen=Attainment(finished=2000, missed=0.02), rate=2.0, budget=BUDGET
    ) == (pytest.approx(2.0 * 0.5**0.25))
    # Just beyond the budget: at most SHRINK_MAX of the rate.
    near = capacity_reading(
        seen=Attainment(finished=100_000, missed=BUDGET * 1.1), rate=2.0, budget=BUDGET
    )
    assert near == pytest.approx(2.0 * SHRINK_MAX)
    assert (
        capacity_reading(seen=Attainment(finished=500, missed=0.001), rate=2.0, budget=BUDGET)
        is None
    )
    assert (
        capacity_reading(seen=Attainment(finished=500, missed=0.5), rate=0.0, budget=BUDGET) is None
    )


@st.composite
def histograms(draw: st.DrawFn) -> LatencyHistogram:
    bounds = sorted(set(draw(st.lists(st.floats(0.001, 100.0), min_size=1, max_size=8))))
    steps = draw(st.lists(st.integers(0, 50), min_size=len(bounds) + 1, max_size=len(bounds) + 1))
    cumulative = list(itertools.accumulate(float(s) for s in steps))
    return LatencyHistogram(
        bounds=tuple(bounds), counts=tuple(cumulative[:-1]), total=cumulative[-1]
    )


@settings(max_examples=200, deadline=None)
@given(histogram=histograms(), low=st.floats(0.0, 200.0), high=st.floats(0.0, 200.0))
def test_the_share_is_a_fraction_falling_with_the_threshold(
    histogram: LatencyHistogram, low: float, high: float
) -> None:
    assert validity.histogram_violation(histogram) == ''
    low, high = min(low, high), max(low, high)
    a = share_above(histogram=histogram, threshold=low)
    b = share_above(histogram=histogram, threshold=high)
    if histogram.total == 0:
        assert (a, b) == (None, None)
        return
    assert a is not None
    assert b is not None
    assert 0.0 <= b <= a + 1e-12 <= 1.0 + 1e-12
