"""HPA rate limits: the policies' arithmetic, selectPolicy, the event history, the legacy limit,
and the property that a sequence of rescales never exceeds a Pods policy within its period."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmscaler.hpa.behavior import (
    DEFAULT_SCALE_UP,
    Behavior,
    NormalizationArg,
    ScaleEvent,
    ScalingPolicy,
    ScalingRules,
    convert_desired_replicas_with_behavior_rate,
    convert_desired_replicas_with_rules,
    generate_scale_down_rules,
    replicas_change_per_period,
    scale_down_limit_with_behaviors,
    scale_up_limit_with_rules,
    store_scale_event,
)


def up_limit(rules: ScalingRules, current: int) -> int:
    """The scale-up limit from `current` replicas with no earlier scale event."""
    return scale_up_limit_with_rules(
        current_replicas=current, up_events=(), down_events=(), rules=rules, now=0
    )


def down_limit(rules: ScalingRules, current: int) -> int:
    """The scale-down limit from `current` replicas with no earlier scale event."""
    return scale_down_limit_with_behaviors(
        current_replicas=current, up_events=(), down_events=(), rules=rules, now=0
    )


def test_default_scale_up_is_four_pods_or_double() -> None:
    limit = {current: up_limit(DEFAULT_SCALE_UP, current) for current in (1, 3, 4, 10)}
    assert limit == {1: 5, 3: 7, 4: 8, 10: 20}


def test_select_policy_min_and_disabled() -> None:
    policies = (ScalingPolicy('Pods', 4, 60), ScalingPolicy('Percent', 50, 60))
    up_min = ScalingRules(policies=policies, select_policy='Min')
    assert up_limit(up_min, 10) == 14
    # Percent rounds up on scale-up (50 % of 3 adds 2) and truncates on scale-down.
    assert up_limit(up_min, 3) == 5
    down_max = ScalingRules(policies=policies, select_policy='Max')
    assert down_limit(down_max, 5) == 1
    down_min = ScalingRules(policies=policies, select_policy='Min')
    assert down_limit(down_min, 5) == 2
    disabled = ScalingRules(policies=policies, select_policy='Disabled')
    assert up_limit(disabled, 5) == 5


def test_events_count_within_their_period_only() -> None:
    events = (ScaleEvent(2, 100.0), ScaleEvent(3, 140.0))
    assert replicas_change_per_period(period_seconds=60, events=events, now=159.0) == 5
    # Age equal to the period no longer counts (upstream's After(cutoff)).
    assert replicas_change_per_period(period_seconds=60, events=events, now=160.0) == 3
    assert replicas_change_per_period(period_seconds=60, events=events, now=200.0) == 0
    assert replicas_change_per_period(period_seconds=60, events=events, now=199.0) == 3


def test_rate_limit_reads_the_period_start() -> None:
    # 4 pods per 60 s: after +3 at t=100, only one more until t=160.
    rules = ScalingRules(policies=(ScalingPolicy('Pods', 4, 60),))
    args = NormalizationArg(
        scale_up=rules,
        scale_down=generate_scale_down_rules(None),
        min_replicas=1,
        max_replicas=50,
        current_replicas=5,
        desired_replicas=20,
    )
    held = convert_desired_replicas_with_behavior_rate(
        args=args, up_events=(ScaleEvent(3, 100.0),), down_events=(), now=130.0
    )
    assert (held.replicas, held.reason) == (6, 'ScaleUpLimit')
    free = convert_desired_replicas_with_behavior_rate(
        args=args, up_events=(ScaleEvent(3, 100.0),), down_events=(), now=160.0
    )
    assert free.replicas == 9


def test_clamp_reasons() -> None:
    args = NormalizationArg(
        scale_up=DEFAULT_SCALE_UP,
        scale_down=generate_scale_down_rules(None),
        min_replicas=2,
        max_replicas=6,
        current_replicas=5,
        desired_replicas=40,
    )
    top = convert_desired_replicas_with_behavior_rate(
        args=args, up_events=(), down_events=(), now=0
    )
    assert (top.replicas, top.reason) == (6, 'TooManyReplicas')
    low = convert_desired_replicas_with_behavior_rate(
        args=replace(args, desired_replicas=0),
        up_events=(),
        down_events=(),
        now=0,
    )
    assert (low.replicas, low.reason) == (2, 'TooFewReplicas')


def test_legacy_limit() -> None:
    assert (
        convert_desired_replicas_with_rules(
            current_replicas=1, desired_replicas=10, min_replicas=1, max_replicas=20
        ).replicas
        == 4
    )
    assert (
        convert_desired_replicas_with_rules(
            current_replicas=6, desired_replicas=30, min_replicas=1, max_replicas=20
        ).replicas
        == 12
    )
    assert (
        convert_desired_replicas_with_rules(
            current_replicas=6, desired_replicas=0, min_replicas=2, max_replicas=20
        ).reason
        == 'TooFewReplicas'
    )


def test_store_reuses_outdated_slots_and_skips_without_behavior() -> None:
    behavior = Behavior(scale_up=ScalingRules(policies=(ScalingPolicy('Pods', 1, 60),)))
    up, down = store_scale_event(
        behavior=behavior,
        up_events=(ScaleEvent(1, 0.0),),
        down_events=(),
        prev_replicas=2,
        new_replicas=3,
        now=100.0,
    )
    assert (up, down) == ((ScaleEvent(1, 100.0),), ())
    assert store_scale_event(
        behavior=None, up_events=(), down_events=(), prev_replicas=2, new_replicas=3, now=1.0
    ) == ((), ())


@pytest.mark.parametrize(
    'kwargs',
    [
        {'type': 'Pods', 'value': 0, 'period_seconds': 15},
        {'type': 'Pods', 'value': 1, 'period_seconds': 0},
        {'type': 'Pods', 'value': 1, 'period_seconds': 1801},
        {'type': 'Replicas', 'value': 1, 'period_seconds': 15},
    ],
)
def test_invalid_policies_are_refused(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError, match='must be'):
        ScalingPolicy(**kwargs)  # type: ignore[arg-type]


@given(
    value=st.integers(1, 6),
    period=st.sampled_from([15, 30, 60, 120]),
    desired=st.lists(st.integers(0, 60), min_size=1, max_size=40),
)
def test_rate_limits_never_exceeded(value: int, period: int, desired: list[int]) -> None:
    """Pods policies up and down: a rescale never moves the count more than `value` away from
    the count at the start of its period (the last count set at or before now − period)."""
    policy = ScalingRules(policies=(ScalingPolicy('Pods', value, period),))
    behavior = Behavior(scale_up=policy, scale_down=policy)
    current = 10
    up: tuple[ScaleEvent, ...] = ()
    down: tuple[ScaleEvent, ...] = ()
    history: list[tuple[float, int]] = [(-1e9, current)]
    for step, want in enumerate(desired):
        now = 15.0 * step
        args = NormalizationArg(
            scale_up=policy,
            scale_down=policy,
            min_replicas=0,
            max_replicas=60,
            current_replicas=current,
            desired_replicas=want,
        )
        new = convert_desired_replicas_with_behavior_rate(
            args=args, up_events=up, down_events=down, now=now
        ).replicas
        if new != current:
            up, down = store_scale_event(
                behavior=behavior,
                up_events=up,
                down_events=down,
                prev_replicas=current,
                new_replicas=new,
                now=now,
            )
        start = [n for at, n in history if at <= now - period][-1]
        if new > current:
            assert new - start <= value
        elif new < current:
            assert start - new <= value
        current = new
        history.append((now, current))
