"""`decide_llmautoscaler`: the realtime and cron scalers of one LLMAutoScaler, combined."""

from __future__ import annotations

import datetime as dt

from hypothesis import given
from hypothesis import strategies as st

from llmscaler.config.cron import Schedule, parse_schedule
from llmscaler.policies.kaito.autoscaler import AutoscalerSpec, RealtimeSpec, decide_llmautoscaler
from llmscaler.policies.kaito.cron import CronRule
from llmscaler.policies.kaito.realtime import MetricReading, ScalerRule

EIGHT_UTC = dt.datetime(2026, 1, 14, 8, tzinfo=dt.UTC).timestamp()
FAST = ScalerRule(step=1, cooldown_seconds=0, stabilization_window_seconds=0)


def policy(expression: str, replicas: int) -> CronRule:
    sched = parse_schedule(expression=expression)
    assert isinstance(sched, Schedule)
    return CronRule(name=expression, schedule=sched, target_replicas=replicas)


def reading(value: float) -> MetricReading:
    return MetricReading(key='q', high=10, low=2, up_value=value, down_value=value)


def test_cron_wins_in_its_minute_realtime_otherwise() -> None:
    spec = AutoscalerSpec(
        min_replicas=1,
        max_replicas=8,
        realtime=RealtimeSpec(scale_up=FAST, scale_down=FAST),
        cron=(policy('0 8 * * *', 6),),
    )
    at_eight = decide_llmautoscaler(
        spec=spec,
        current_replicas=2,
        readings=[reading(0)],
        history={},
        last_scale_time=None,
        now=EIGHT_UTC,
    )
    assert (at_eight.desired, at_eight.scaler) == (6, 'cron')
    # The realtime history was still updated with the reading.
    assert [key for key, _ in at_eight.history] == ['q']
    later = decide_llmautoscaler(
        spec=spec,
        current_replicas=6,
        readings=[reading(0)],
        history=dict(at_eight.history),
        last_scale_time=EIGHT_UTC,
        now=EIGHT_UTC + 120,
    )
    assert (later.desired, later.scaler) == (5, 'realtime')


def test_neither_scaler_acts_but_bounds_hold() -> None:
    spec = AutoscalerSpec(min_replicas=2, max_replicas=4, cron=(policy('0 9 * * *', 3),))
    result = decide_llmautoscaler(
        spec=spec,
        current_replicas=7,
        readings=[],
        history={},
        last_scale_time=None,
        now=EIGHT_UTC,
    )
    assert (result.desired, result.scaler) == (4, 'none')
    assert 'clamped' in result.reason


@given(
    current=st.integers(min_value=0, max_value=20),
    low=st.integers(min_value=1, max_value=5),
    span=st.integers(min_value=0, max_value=10),
    value=st.floats(min_value=0, max_value=100),
    target=st.integers(min_value=0, max_value=30),
    at_eight=st.booleans(),
)
def test_always_within_bounds(
    current: int, low: int, span: int, value: float, target: int, at_eight: bool
) -> None:
    spec = AutoscalerSpec(
        min_replicas=low,
        max_replicas=low + span,
        realtime=RealtimeSpec(scale_up=FAST, scale_down=FAST),
        cron=(policy('0 8 * * *', target),),
    )
    result = decide_llmautoscaler(
        spec=spec,
        current_replicas=current,
        readings=[reading(value)],
        history={},
        last_scale_time=None,
        now=EIGHT_UTC + (0 if at_eight else 3600),
    )
    assert low <= result.desired <= low + span
    if at_eight:
        assert result.desired == min(max(target, low), low + span)


def test_missing_metrics_forbid_a_realtime_scale_down_only() -> None:
    spec = AutoscalerSpec(
        min_replicas=1,
        max_replicas=8,
        realtime=RealtimeSpec(scale_up=FAST, scale_down=FAST),
        cron=(policy('0 8 * * *', 1),),
    )

    def desired(value: float, *, now: float) -> int:
        return decide_llmautoscaler(
            spec=spec,
            current_replicas=4,
            readings=[reading(value)],
            history={},
            last_scale_time=None,
            now=now,
            metrics_complete=False,
        ).desired

    later = EIGHT_UTC + 3600
    assert desired(0, now=later) == 4  # idle, but a pod did not report: hold
    assert desired(50, now=later) == 5  # a scale-up still happens
    assert desired(0, now=EIGHT_UTC) == 1  # the cron scaler needs no metrics
