"""Kaito's realtime scaler step by step, as the "Realtime Scaler Pseudocode" of its LLMAutoScaler
proposal writes it (kaito-project/kaito,
docs/proposals/20250602-auto-scaler-for-inference-workloads.md).

Readings come every 15 s, the proposal's scrape interval; the defaults are the proposal's (step 1,
cooldowns 600 s up / 1,800 s down, windows 30 s / 300 s = 2 and 20 consecutive periods).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmscaler.policies.kaito.realtime import (
    DEFAULT_SCALE_DOWN,
    DEFAULT_SCALE_UP,
    SCRAPE_INTERVAL_SECONDS,
    MetricReading,
    RealtimeResult,
    Sample,
    ScalerRule,
    average,
    calculate_desired_replicas,
)

WAITING = 'vllm:num_requests_waiting'


def reading(value: float, *, key: str = WAITING, high: float = 10, low: float = 2) -> MetricReading:
    return MetricReading(key=key, high=high, low=low, up_value=value, down_value=value)


def run(
    values: Sequence[float],
    *,
    current: int = 2,
    last_scale_time: float | None = None,
    start: float = 1_000_000.0,
    period: float = 15.0,
    min_replicas: int = 1,
    max_replicas: int = 10,
) -> list[RealtimeResult]:
    """The scaler fed one reading per period; the count never changes (we look at its answers)."""
    history: dict[str, tuple[Sample, ...]] = {}
    results = []
    for index, value in enumerate(values):
        result = calculate_desired_replicas(
            current_replicas=current,
            metrics=[reading(value)],
            min_replicas=min_replicas,
            max_replicas=max_replicas,
            last_scale_time=last_scale_time,
            history=history,
            now=start + index * period,
        )
        history = dict(result.history)
        results.append(result)
    return results


def first_answer(
    *metrics: MetricReading,
    current: int = 2,
    min_replicas: int = 1,
    max_replicas: int = 10,
    scale_up: ScalerRule = DEFAULT_SCALE_UP,
    scale_down: ScalerRule = DEFAULT_SCALE_DOWN,
    interval: float = SCRAPE_INTERVAL_SECONDS,
) -> RealtimeResult:
    """The scaler's answer to its first reading: no earlier scale, an empty history, at t=0."""
    return calculate_desired_replicas(
        current_replicas=current,
        metrics=metrics,
        min_replicas=min_replicas,
        max_replicas=max_replicas,
        scale_up=scale_up,
        scale_down=scale_down,
        last_scale_time=None,
        history={},
        now=0.0,
        interval=interval,
    )


def test_seed_defaults() -> None:
    up, down = DEFAULT_SCALE_UP, DEFAULT_SCALE_DOWN
    assert (up.step, up.cooldown_seconds, up.stabilization_window_seconds) == (1, 600, 30)
    assert (down.step, down.cooldown_seconds, down.stabilization_window_seconds) == (1, 1800, 300)


def test_scale_up_needs_two_consecutive_periods_above_high() -> None:
    first, second = run([12, 12])
    assert first.desired == 2  # one period seen: the window is empty
    assert second.desired == 3


def test_a_dip_in_the_up_window_holds() -> None:
    results = run([12, 10, 12, 12])
    # 10 is not above High (10): the reading after it still sees it in the 30 s window.
    assert [r.desired for r in results] == [2, 2, 2, 3]


def test_scale_down_needs_twenty_consecutive_periods_below_low() -> None:
    results = run([1] * 20)
    # The 20th reading below Low, with the 19 before it in the 300 s window, scales down.
    assert [r.desired for r in results] == [2] * 19 + [1]


def test_twenty_periods_exactly() -> None:
    # 20 readings below Low, the first 285 s before the last: the window (now-300, now] holds
    # the 19 earlier ones.
    results = run([5] + [1] * 20)
    assert [r.desired for r in results] == [2] * 20 + [1]


def test_one_reading_at_low_in_the_down_window_holds() -> None:
    results = run([1] * 10 + [2] + [1] * 19)
    assert all(r.desired == 2 for r in results)


def test_up_cooldown_counts_from_last_scale_time() -> None:
    start = 1_000_000.0
    held = run([12, 12], last_scale_time=start + 15 - 600, start=start)
    assert held[1].desired == 2  # exactly 600 s: the proposal scales only when strictly more
    assert 'cooldown' in held[1].reasons[0]
    allowed = run([12, 12], last_scale_time=start + 15 - 600.5, start=start)
    assert allowed[1].desired == 3


def test_down_cooldown_counts_from_last_scale_time() -> None:
    start = 1_000_000.0
    last = start + 20 * 15
    held = run([1] * 21, last_scale_time=last - 1800, start=start)
    assert held[-1].desired == 2
    allowed = run([1] * 21, last_scale_time=last - 1801, start=start)
    assert allowed[-1].desired == 1


def test_steps_and_bounds() -> None:
    up = ScalerRule(step=3, cooldown_seconds=0, stabilization_window_seconds=0)
    result = first_answer(reading(50), current=4, max_replicas=6, scale_up=up)
    assert result.desired == 6  # 4 + 3 clamped to max
    down = ScalerRule(step=5, cooldown_seconds=0, stabilization_window_seconds=0)
    result = first_answer(reading(0), current=4, min_replicas=2, max_replicas=6, scale_down=down)
    assert result.desired == 2  # 4 - 5 clamped to min


NO_WINDOW = ScalerRule(step=1, cooldown_seconds=0, stabilization_window_seconds=0)


def test_the_highest_metric_wins() -> None:
    def desired(*metrics: MetricReading) -> int:
        return first_answer(*metrics, current=3, scale_up=NO_WINDOW, scale_down=NO_WINDOW).desired

    assert desired(reading(50, key='a'), reading(0, key='b')) == 4
    assert desired(reading(0, key='a'), reading(5, key='b')) == 3  # one down, one holds: hold
    assert desired(reading(0, key='a'), reading(0, key='b')) == 2  # both down: down
    assert desired() == 3


def test_missing_pods_count_zero_up_and_high_down() -> None:
    assert average(values=[20, None], high=10) == (10, 15)
    assert average(values=[None, None], high=10) == (0, 10)
    assert average(values=[], high=10) == (0, 10)
    assert average(values=[4, 6], high=10) == (5, 5)


def test_a_reading_of_per_pod_values_carries_both_averages() -> None:
    reading = MetricReading.of(key='kv', high=10, low=2, values=[20, None])
    assert reading == MetricReading(key='kv', high=10, low=2, up_value=10, down_value=15)


@pytest.mark.parametrize(
    'values',
    [
        # Two pods, one pending: the one that reports is far above High, but the average that
        # counts the pending pod at 0 is 10, not above High; and the down average is 15.
        pytest.param([20, None], id='no-scale-up-past-a-pending-pod'),
        # Idle pods and one missing: down average (0 + 10) / 2 = 5 is not below Low 2.
        pytest.param([0, None], id='no-scale-down-past-a-pending-pod'),
    ],
)
def test_a_missing_pod_brakes_both_directions(values: list[float | None]) -> None:
    up, down = average(values=values, high=10)
    result = first_answer(
        MetricReading(key=WAITING, high=10, low=2, up_value=up, down_value=down),
        scale_up=NO_WINDOW,
        scale_down=NO_WINDOW,
    )
    assert result.desired == 2


def test_non_finite_readings_take_no_part() -> None:
    result = first_answer(
        reading(math.nan), reading(math.inf, key='b'), scale_up=NO_WINDOW, scale_down=NO_WINDOW
    )
    assert result.desired == 2
    assert result.history == ()
    with pytest.raises(ValueError, match='finite'):
        calculate_desired_replicas(
            current_replicas=2,
            metrics=[],
            min_replicas=1,
            max_replicas=3,
            last_scale_time=None,
            history={},
            now=math.nan,
        )


def test_history_reuses_stale_slots() -> None:
    results = run([5.0] * 200)
    (key, samples), *_ = results[-1].history
    assert key == WAITING
    # The longer window is 300 s, 20 readings; a slot is reused once older than both windows.
    assert len(samples) <= 22
    assert max(s.t for s in samples) == 1_000_000.0 + 199 * 15


@given(
    values=st.lists(st.floats(min_value=0, max_value=40), min_size=1, max_size=60),
    current=st.integers(min_value=1, max_value=10),
    gaps=st.lists(st.floats(min_value=1, max_value=120), min_size=60, max_size=60),
)
def test_every_answer_is_one_step_or_a_hold(
    values: list[float], current: int, gaps: list[float]
) -> None:
    history: dict[str, tuple[Sample, ...]] = {}
    now = 0.0
    previous: list[Sample] = []
    for value, gap in zip(values, gaps, strict=False):
        now += gap
        result = calculate_desired_replicas(
            current_replicas=current,
            metrics=[reading(value)],
            min_replicas=1,
            max_replicas=10,
            last_scale_time=None,
            history=history,
            now=now,
        )
        assert result.desired in {current, min(current + 1, 10), max(current - 1, 1)}
        if result.desired > current:
            # Scaled up: this reading and every earlier one within 30 s were above High.
            assert value > 10
            recent = [s for s in previous if s.t > now - 30]
            assert recent
            assert all(s.up > 10 for s in recent)
        if result.desired < current:
            assert value < 2
            recent = [s for s in previous if s.t > now - 300]
            assert recent
            assert all(s.down < 2 for s in recent)
        history = dict(result.history)
        previous.append(Sample(t=now, up=value, down=value))


def test_a_window_no_longer_than_the_interval_needs_no_earlier_reading() -> None:
    rule = ScalerRule(step=1, cooldown_seconds=0, stabilization_window_seconds=15)
    assert first_answer(reading(50), scale_up=rule).desired == 3
    # The same window with readings every 5 s holds two earlier readings.
    assert first_answer(reading(50), scale_up=rule, interval=5.0).desired == 2
