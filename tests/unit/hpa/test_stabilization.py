"""HPA stabilization: the legacy window's max (age = window still counts), the behaviour
windows (age = window no longer counts), slot reuse, and properties of both."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from llmscaler.hpa.behavior import (
    DEFAULT_SCALE_UP,
    NormalizationArg,
    ScalingPolicy,
    ScalingRules,
)
from llmscaler.hpa.stabilization import (
    Recommendation,
    record_initial_recommendation,
    stabilize_recommendation,
    stabilize_recommendation_with_behaviors,
)


def args(*, current: int, desired: int, up: int = 0, down: int = 300) -> NormalizationArg:
    policies = (ScalingPolicy('Percent', 100, 15),)
    return NormalizationArg(
        scale_up=ScalingRules(policies=policies, stabilization_window_seconds=up),
        scale_down=ScalingRules(policies=policies, stabilization_window_seconds=down),
        min_replicas=1,
        max_replicas=100,
        current_replicas=current,
        desired_replicas=desired,
    )


def test_initial_recommendation_seeds_only_a_missing_log() -> None:
    seeded = record_initial_recommendation(recommendations=None, current_replicas=5, now=10.0)
    assert seeded == (Recommendation(5, 10.0),)
    again = record_initial_recommendation(recommendations=seeded, current_replicas=9, now=20.0)
    assert again == seeded
    # An empty log exists (upstream's empty non-nil slice): no seed.
    assert record_initial_recommendation(recommendations=(), current_replicas=5, now=1.0) == ()


def test_legacy_window_includes_its_edge_and_reuses_a_slot() -> None:
    log = (Recommendation(8, 0.0), Recommendation(6, 100.0))
    at_edge = stabilize_recommendation(
        recommendations=log, desired_replicas=2, now=300.0, window=300
    )
    assert (at_edge.replicas, at_edge.reason) == (8, 'ScaleDownStabilized')
    past = stabilize_recommendation(recommendations=log, desired_replicas=2, now=300.5, window=300)
    assert past.replicas == 6
    assert past.recommendations == (Recommendation(2, 300.5), Recommendation(6, 100.0))


def test_behavior_window_excludes_its_edge() -> None:
    log = (Recommendation(8, 0.0),)
    at_edge = stabilize_recommendation_with_behaviors(
        recommendations=log, args=args(current=8, desired=2), now=300.0
    )
    assert at_edge.replicas == 2
    inside = stabilize_recommendation_with_behaviors(
        recommendations=log, args=args(current=8, desired=2), now=299.0
    )
    assert (inside.replicas, inside.reason) == (8, 'ScaleDownStabilized')


def test_scale_up_window_takes_the_lowest_recent_recommendation() -> None:
    log = (Recommendation(4, 90.0), Recommendation(7, 100.0))
    result = stabilize_recommendation_with_behaviors(
        recommendations=log, args=args(current=3, desired=9, up=60, down=0), now=120.0
    )
    assert (result.replicas, result.reason) == (4, 'ScaleUpStabilized')


def test_default_up_window_is_zero() -> None:
    assert DEFAULT_SCALE_UP.stabilization_window_seconds == 0


recs = st.lists(
    st.builds(Recommendation, st.integers(0, 50), st.floats(0, 1000, allow_nan=False)),
    max_size=12,
)


@given(log=recs, desired=st.integers(0, 50), window=st.integers(0, 600))
def test_legacy_result_is_the_max_over_the_window(
    log: list[Recommendation], desired: int, window: int
) -> None:
    now = 1000.0
    result = stabilize_recommendation(
        recommendations=log, desired_replicas=desired, now=now, window=window
    )
    in_window = [r.recommendation for r in log if r.timestamp >= now - window]
    assert result.replicas == max([desired, *in_window])
    assert Recommendation(desired, now) in result.recommendations
    assert len(result.recommendations) <= len(log) + 1


@given(
    log=recs,
    current=st.integers(0, 50),
    desired=st.integers(0, 50),
    up=st.integers(0, 600),
    down=st.integers(0, 600),
)
def test_behavior_result_moves_only_towards_the_proposal(
    log: list[Recommendation], current: int, desired: int, up: int, down: int
) -> None:
    result = stabilize_recommendation_with_behaviors(
        recommendations=log, args=args(current=current, desired=desired, up=up, down=down), now=1e3
    )
    low, high = sorted((current, desired))
    assert low <= result.replicas <= high
