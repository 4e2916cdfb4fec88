"""`analyze.learning.rate_forecast`: the upper quantile of the arrival rate over a horizon."""

from __future__ import annotations

import math
from statistics import NormalDist

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmscaler.analyze.learning.rate_forecast import RATE_WINDOW, RateSample, forecast

NOW = 10_000.0


def series(rates: list[float], *, step: float = 30.0) -> list[RateSample]:
    """`rates` at `step` seconds apart, the last at NOW."""
    n = len(rates)
    return [RateSample(at=NOW - (n - 1 - i) * step, rate=r) for i, r in enumerate(rates)]


def test_no_samples_forecasts_nothing() -> None:
    got = forecast(samples=[], now=NOW, horizon=150, quantile=0.95)
    assert (got.upper, got.level, got.trend, got.sigma) == (0.0, 0.0, 0.0, 0.0)


def test_flat_load_bound_is_poisson_noise_above_the_level() -> None:
    got = forecast(samples=series([10.0] * 10), now=NOW, horizon=150, quantile=0.95)
    assert got.trend == pytest.approx(0.0, abs=1e-12)
    assert got.level == pytest.approx(10.0)
    assert got.sigma == pytest.approx(math.sqrt(10.0 / RATE_WINDOW))
    assert got.upper == pytest.approx(10.0 + 1.6448536 * math.sqrt(10.0 / RATE_WINDOW), rel=1e-6)


def test_rising_load_is_extrapolated_over_the_horizon() -> None:
    # +1 req/s every 30 s: the trend is 1/30 req/s per second.
    got = forecast(
        samples=series([float(r) for r in range(1, 11)]), now=NOW, horizon=150, quantile=0.95
    )
    assert got.trend == pytest.approx(1 / 30)
    assert got.level == pytest.approx(10.0)
    assert got.upper > 10.0 + 150 / 30


def test_a_trend_is_followed_no_further_ahead_than_it_was_seen() -> None:
    """Samples over 90 s (a run's or a restart's first minutes) show a trend for 90 s: it is
    followed for 90 s of the 150-s horizon. Over 150 s or more, for the whole horizon."""
    rising = [float(r) for r in range(1, 11)]
    z = NormalDist().inv_cdf(0.95)
    short = forecast(samples=series(rising[-4:]), now=NOW, horizon=150, quantile=0.95)
    assert short.trend == pytest.approx(1 / 30)
    assert short.upper == pytest.approx(short.level + 90 / 30 + z * short.sigma)
    full = forecast(samples=series(rising[-6:]), now=NOW, horizon=150, quantile=0.95)
    assert full.upper == pytest.approx(full.level + 150 / 30 + z * full.sigma)


def test_a_trend_seen_only_in_the_confirming_window_is_followed_only_as_far() -> None:
    """A rise that slows: the line through the last 90 s is the shallower, and it is the one
    followed; it was seen over 90 s, so it is followed 90 s ahead, not the whole horizon (the
    window's older samples showed another, steeper line)."""
    slowing = [0.0, 2.0, 4.0, 6.0, 8.0, 10.0, 12.0, 14.0, 15.0, 16.0]
    z = NormalDist().inv_cdf(0.95)
    got = forecast(samples=series(slowing), now=NOW, horizon=150, quantile=0.95)
    assert got.trend == pytest.approx(195 / 4500)  # the least-squares slope of 12, 14, 15, 16
    assert got.upper == pytest.approx(got.level + 90 * got.trend + z * got.sigma)


def test_falling_load_never_lowers_the_bound_below_the_newest_rate() -> None:
    got = forecast(
        samples=series([float(r) for r in range(20, 10, -1)]), now=NOW, horizon=150, quantile=0.95
    )
    assert got.trend == 0.0
    assert got.level >= 11.0
    assert got.upper >= got.newest


def test_a_step_up_is_seen_at_once() -> None:
    got = forecast(samples=series([5.0] * 9 + [20.0]), now=NOW, horizon=150, quantile=0.95)
    assert got.level == 20.0
    assert got.upper > 20.0


def test_a_plateau_after_a_step_is_not_extrapolated_as_a_rise() -> None:
    # 1 req/s for five minutes, then 15 for two: the line through the whole window is steep
    # (about +3/min), the line through its last two minutes is flat; a trend must show in both.
    samples = series([1.0] * 6 + [15.0] * 5)
    got = forecast(samples=samples, now=NOW, horizon=150, quantile=0.95)
    assert got.trend == pytest.approx(0.0, abs=1e-9)
    assert got.level == pytest.approx(15.0)
    assert got.upper == pytest.approx(15.0 + 1.6448536 * math.sqrt(15.0 / RATE_WINDOW), rel=1e-6)
    # The same step with the whole window as the confirming one: the long line's rise and
    # scatter nearly double the bound.
    unconfirmed = forecast(
        samples=samples, now=NOW, horizon=150, quantile=0.95, confirm_window=300.0
    )
    assert unconfirmed.upper > 1.5 * got.upper


def test_old_and_future_samples_are_ignored() -> None:
    old = [RateSample(at=NOW - 5000, rate=1000.0), RateSample(at=NOW + 10, rate=1000.0)]
    got = forecast(samples=[*old, *series([4.0] * 5)], now=NOW, horizon=60, quantile=0.9)
    assert got.level == pytest.approx(4.0)


def test_higher_quantile_gives_a_higher_bound() -> None:
    samples = series([10.0, 12.0, 9.0, 11.0, 13.0, 10.0])
    low = forecast(samples=samples, now=NOW, horizon=60, quantile=0.6)
    high = forecast(samples=samples, now=NOW, horizon=60, quantile=0.99)
    assert high.upper > low.upper


@pytest.mark.parametrize(
    ('quantile', 'horizon'), [(0.5, 10.0), (1.0, 10.0), (0.9, -1.0), (0.9, math.inf)]
)
def test_bad_arguments_raise(quantile: float, horizon: float) -> None:
    with pytest.raises(ValueError, match=r'quantile|horizon'):
        forecast(samples=[], now=NOW, horizon=horizon, quantile=quantile)


@given(
    rates=st.lists(st.floats(min_value=0, max_value=1e4), min_size=1, max_size=40),
    horizon=st.floats(min_value=0, max_value=3600),
)
def test_bound_is_finite_and_at_least_the_newest_rate(rates: list[float], horizon: float) -> None:
    got = forecast(samples=series(rates), now=NOW, horizon=horizon, quantile=0.95)
    assert math.isfinite(got.upper)
    assert got.upper >= rates[-1] - 1e-6
    # Order of the samples does not matter.
    again = forecast(samples=list(reversed(series(rates))), now=NOW, horizon=horizon, quantile=0.95)
    assert again == got
