"""Tests of the local Prometheus windows, with numbers worked by hand from extrapolatedRate.

The cases marked "promtool 2.42" were also evaluated with `promtool test rules` (series at 15 s
steps) and gave the same figures, except where a comment says the 2.x and 3.x rules differ.
"""

from __future__ import annotations

import gc
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmscaler.collect.windows import SeriesWindow, ratio_of_rates


def window(samples: list[tuple[float, float]], *, horizon: float = 600.0) -> SeriesWindow:
    series = SeriesWindow(horizon=horizon)
    for t, value in samples:
        series.add(t=t, value=value)
    return series


def counter_every_15s(*, until: float) -> SeriesWindow:
    """The counter 0, 15, 30, ... sampled every 15 s: it grows by exactly 1 per second."""
    return window([(t, t) for t in range(0, int(until) + 1, 15)])


# --- rate / increase ---------------------------------------------------------------------------


def test_steady_counter_rate_is_one_per_second() -> None:
    # promtool 2.42: rate(a[1m]) at 60 s = 1.
    # At now=60 the range is (0, 60]: samples t=15..60, values 15..60 (t=0 is on the open edge).
    # raw = 60 − 15 = 45, sampled = 45, step = 15, threshold = 16.5
    # to_start = 15 − 0 = 15 < 16.5 → 15; zero cap 45 × 15/45 = 15, not below; to_end = 0
    # increase = 45 × (45 + 15 + 0) / 45 = 60, rate = 60 / 60 = 1.0
    series = counter_every_15s(until=60)
    assert series.increase(now=60, seconds=60) == pytest.approx(60.0)
    assert series.rate(now=60, seconds=60) == pytest.approx(1.0)


def test_steady_counter_later_in_time() -> None:
    # promtool 2.42: rate(a[1m]) at 300 s = 1. Samples 255..300 in (240, 300]: same arithmetic.
    series = counter_every_15s(until=600)
    assert series.rate(now=300, seconds=60) == pytest.approx(1.0)
    # Over 5 minutes at 600 s: samples 315..600 (20), raw 285, sampled 285, to_start 15 → 300.
    assert series.increase(now=600, seconds=300) == pytest.approx(300.0)


def test_counter_reset_adds_the_value_before_the_drop() -> None:
    # promtool 2.42: increase(b[1m]) at 60 s = 33.33 for values 10, 20, 5, 15 at t = 15..60.
    # raw = 15 − 10 = 5, plus 20 (the counter restarted after 20) = 25
    # sampled = 45, step = 15; to_start = 15 < 16.5; zero cap 45 × 10/25 = 18 > 15; to_end = 0
    # increase = 25 × (45 + 15) / 45 = 33.333...
    series = window([(15, 10), (30, 20), (45, 5), (60, 15)])
    assert series.increase(now=60, seconds=60) == pytest.approx(100 / 3)
    assert series.rate(now=60, seconds=60) == pytest.approx(100 / 3 / 60)


def test_series_that_starts_inside_the_range_extrapolates_half_a_step() -> None:
    # promtool 2.42: increase(c[2m]) at 120 s = 67.5.
    # Samples t = 60, 75, 90, 105 with values 100, 115, 130, 145; range (0, 120].
    # raw = 45, sampled = 45, step = 15, threshold 16.5
    # to_start = 60 ≥ 16.5 → 7.5 (half a step); zero cap 45 × 100/45 = 100 is larger
    # to_end = 120 − 105 = 15 < 16.5 → 15
    # increase = 45 × (45 + 7.5 + 15) / 45 = 67.5
    series = window([(60, 100), (75, 115), (90, 130), (105, 145)])
    assert series.increase(now=120, seconds=120) == pytest.approx(67.5)


def test_counter_is_not_extrapolated_below_zero() -> None:
    # promtool 2.42: increase(d[1m]) at 60 s = 32. Samples t = 30, 45, 60 with 2, 17, 32.
    # raw = 30, sampled = 30, step = 15; to_start = 30 ≥ 16.5 → 7.5,
    # zero point: 30 × 2/30 = 2 s before the first sample < 7.5 → to_start = 2
    # increase = 30 × (30 + 2 + 0) / 30 = 32
    series = window([(30, 2), (45, 17), (60, 32)])
    assert series.increase(now=60, seconds=60) == pytest.approx(32.0)


def test_zero_cap_applies_after_the_half_step_rule() -> None:
    # Samples t = 60, 75, 90 with 20, 50, 80; range (0, 120].
    # raw = 60, sampled = 30, step = 15; to_start = 60 ≥ 16.5 → 7.5; zero point 30 × 20/60 = 10,
    # not below 7.5 → 7.5; to_end = 30 ≥ 16.5 → 7.5
    # increase = 60 × (30 + 7.5 + 7.5) / 30 = 90 (Prometheus 3.x). Prometheus 2.42 caps before
    # the half-step rule and gives 60 × (30 + 10 + 7.5) / 30 = 95 (checked with promtool).
    series = window([(60, 20), (75, 50), (90, 80)])
    assert series.increase(now=120, seconds=120) == pytest.approx(90.0)


def test_reaches_start_is_prometheus_full_extrapolation_test() -> None:
    series = window([(t, t) for t in range(15, 91, 15)])  # scraped from 15 on
    # (−45, 15]: one sample; (−15, 45]: the first 30 s after the start, over 1.1 steps.
    assert not series.reaches_start(now=15.0, seconds=60.0)
    assert not series.reaches_start(now=45.0, seconds=60.0)
    # (0, 60]: the first sample 15 s after the start, within 1.1 × 15 s: extrapolated in full.
    assert series.reaches_start(now=60.0, seconds=60.0)
    assert series.rate(now=60.0, seconds=60.0) == pytest.approx(1.0)
    assert not SeriesWindow(horizon=600.0).reaches_start(now=0.0, seconds=60.0)
    # A gap of a minute and more: samples before it do not make the range reach its start.
    gap = window([(0.0, 0.0), (15.0, 15.0), (150.0, 150.0), (165.0, 165.0)])
    assert not gap.reaches_start(now=165.0, seconds=60.0)


def test_fewer_than_two_samples_give_none() -> None:
    assert SeriesWindow(horizon=60).increase(now=10, seconds=60) is None
    one = window([(5, 3.0)])
    assert one.increase(now=10, seconds=60) is None
    assert one.rate(now=10, seconds=60) is None
    # Two samples but only one in range (the other is on the open left edge).
    two = window([(0, 1.0), (30, 2.0)])
    assert two.increase(now=60, seconds=60) is None


def test_flat_counter_increase_is_zero() -> None:
    series = window([(15, 7.0), (30, 7.0), (45, 7.0)])
    assert series.increase(now=45, seconds=60) == 0.0


def test_bad_query_arguments_give_none() -> None:
    series = counter_every_15s(until=60)
    assert series.increase(now=60, seconds=0) is None
    assert series.increase(now=60, seconds=-5) is None
    assert series.max_over(now=math.nan, seconds=60) is None
    assert series.latest(now=60, seconds=math.inf) is None


# --- max_over / latest ------------------------------------------------------------------------


def test_max_over_ignores_samples_just_outside_the_range() -> None:
    # Range (40, 100]: t = 40 is on the open edge and t = 101 is after now; only 50..100 count.
    series = window([(40, 9.0), (50, 1.0), (70, 4.0), (100, 2.0), (101, 8.0)])
    assert series.max_over(now=100, seconds=60) == 4.0
    assert series.latest(now=100, seconds=60) == (100, 2.0)
    # Widening by a hair brings t = 40 in.
    assert series.max_over(now=100, seconds=60.001) == 9.0


def test_max_over_empty_range_is_none() -> None:
    series = window([(10, 1.0)])
    assert series.max_over(now=100, seconds=60) is None
    assert series.latest(now=100, seconds=60) is None


def test_nan_and_inf_are_ignored() -> None:
    # promtool gives max_over_time of 0, 1, NaN, 3 = 3 as well.
    series = window([(0, 0.0), (15, 1.0), (30, math.nan), (45, 3.0), (60, math.inf)])
    assert len(series) == 3
    assert series.max_over(now=60, seconds=61) == 3.0
    assert series.latest(now=60, seconds=60) == (45, 3.0)


def test_time_going_backwards_is_ignored() -> None:
    series = window([(10, 1.0), (20, 2.0), (15, 50.0), (20, 60.0)])
    assert len(series) == 2
    assert series.max_over(now=20, seconds=30) == 2.0


def test_horizon_drops_old_samples() -> None:
    series = window([(0, 1.0), (30, 2.0), (60, 3.0), (90, 4.0)], horizon=60)
    # The newest is 90; samples at t ≤ 30 are older than the horizon.
    assert len(series) == 2
    assert series.max_over(now=90, seconds=600) == 4.0


def test_max_samples_bounds_memory() -> None:
    series = SeriesWindow(horizon=1e9, max_samples=3)
    for t in range(10):
        series.add(t=float(t), value=float(t))
    assert len(series) == 3
    assert series.latest(now=9, seconds=100) == (9, 9.0)


# --- ratio_of_rates ---------------------------------------------------------------------------


def test_ratio_of_rates_is_the_average_per_event() -> None:
    # 2 requests per 15 s with 300 prompt tokens each: sum grows 600 per 15 s, count 2 per 15 s.
    # Same sample times, so the extrapolation factors cancel: 600 / 2 = 300 tokens per request.
    times = [0, 15, 30, 45, 60, 75]
    total = window([(t, 40.0 * t) for t in times])
    count = window([(t, t / 7.5) for t in times])
    assert ratio_of_rates(numerator=total, denominator=count, now=75, seconds=60) == (
        pytest.approx(300.0)
    )


def test_ratio_of_rates_none_when_nothing_happened_or_missing() -> None:
    flat = window([(15, 4.0), (30, 4.0), (45, 4.0)])
    moving = window([(15, 4.0), (30, 8.0), (45, 12.0)])
    assert ratio_of_rates(numerator=moving, denominator=flat, now=45, seconds=60) is None
    empty = SeriesWindow(horizon=600)
    assert ratio_of_rates(numerator=empty, denominator=moving, now=45, seconds=60) is None
    assert ratio_of_rates(numerator=moving, denominator=empty, now=45, seconds=60) is None
    # 0 / positive is a real zero average, not a missing one.
    assert ratio_of_rates(numerator=flat, denominator=moving, now=45, seconds=60) == 0.0


# --- properties --------------------------------------------------------------------------------

values = st.floats(min_value=0, max_value=1e9, allow_nan=False, allow_infinity=False)


@given(
    steps=st.lists(st.tuples(st.floats(min_value=0.1, max_value=60), values), max_size=40),
    seconds=st.floats(min_value=1, max_value=600),
)
def test_increase_of_a_counter_is_never_negative(
    steps: list[tuple[float, float]], seconds: float
) -> None:
    series = SeriesWindow(horizon=600)
    t = 0.0
    for gap, value in steps:
        t += gap
        series.add(t=t, value=value)
    increase = series.increase(now=t, seconds=seconds)
    assert increase is None or increase >= 0


@given(samples=st.lists(st.tuples(st.floats(0, 1000), values), max_size=40))
def test_max_over_is_the_largest_value_in_range(samples: list[tuple[float, float]]) -> None:
    series = SeriesWindow(horizon=2000)
    accepted: list[tuple[float, float]] = []
    for t, value in samples:
        if not accepted or t > accepted[-1][0]:
            accepted.append((t, value))
        series.add(t=t, value=value)
    now, seconds = 1000.0, 300.0
    expected = [v for t, v in accepted if now - seconds < t <= now]
    assert series.max_over(now=now, seconds=seconds) == (max(expected) if expected else None)


@given(
    adds=st.lists(
        st.tuples(st.floats(0, 500), st.floats(-10, 10) | st.just(math.nan)), max_size=300
    ),
    horizon=st.floats(1, 200),
    max_samples=st.integers(2, 80),
)
def test_the_samples_kept_are_those_a_bounded_queue_would_keep(
    adds: list[tuple[float, float]], horizon: float, max_samples: int
) -> None:
    # Long enough for the arrays to be compacted many times over.
    adds = sorted(adds) + [(500 + t, v) for t, v in sorted(adds)]
    series = SeriesWindow(horizon=horizon, max_samples=max_samples)
    kept: list[tuple[float, float]] = []
    for t, value in adds:
        series.add(t=t, value=value)
        if math.isfinite(value) and (not kept or t > kept[-1][0]):
            kept = [*kept, (t, value)][-max_samples:]
            kept = [(s, v) for s, v in kept if s > t - horizon]
    assert len(series) == len(kept)
    assert series.in_range(now=2000.0, seconds=5000.0) == kept
    if kept:
        assert series.latest(now=2000.0, seconds=5000.0) == kept[-1]
        assert series.max_over(now=2000.0, seconds=5000.0) == max(v for _, v in kept)


def test_the_garbage_collector_walks_no_window_kept_by_its_record() -> None:
    series = SeriesWindow(horizon=1e9)
    for t in range(1000):
        series.add(t=float(t), value=1.0)
    # A record is no container to the collector, nor is a dict of records under keys of
    # strings: a thousand pods' windows add nothing to its full passes.
    kept = {('vllm:num_requests_waiting', (('pod', 'a'),)): series.record}
    gc.collect()
    assert not gc.is_tracked(series.record)
    assert not gc.is_tracked(kept)
    assert SeriesWindow.of(kept[next(iter(kept))]).latest(now=999.0, seconds=1.0) == (999.0, 1.0)


def test_a_view_reads_and_grows_the_record_it_was_made_of() -> None:
    made = SeriesWindow(horizon=60.0, max_samples=5)
    view = SeriesWindow.of(made.record)
    for t in range(40):
        view.add(t=float(t), value=float(t % 7))
    # Both see the same samples: the record is the window's only state.
    assert made.in_range(now=39.0, seconds=100.0) == [
        (float(t), float(t % 7)) for t in range(35, 40)
    ]
    assert (made.horizon, made.last_seen, len(made)) == (60.0, 39.0, 5)
    view.add(t=41.0, value=math.nan)
    assert (made.last_seen, len(made)) == (41.0, 5)
