"""HPA stabilization: the recommendation log, the legacy downscale window and the `behavior`
windows.

Why: stabilization is what makes an HPA slow to give capacity back (300 s by default) and, with
a scale-up window, slow to add it; it is also where upstream's boundary rules bite in a
simulation whose control instants fall exactly on window edges. So the two upstream functions
are kept apart, each with its own boundary:

- legacy (`stabilizeRecommendation`, no `behavior`): a recommendation counts unless it is
  *older* than the window (`timestamp < now − window` is dropped), so age = window still counts;
- `behavior` (`stabilizeRecommendationWithBehaviors`): a recommendation counts only if it is
  *younger* than the window (`timestamp > now − window`), so age = window no longer counts.

Both replace one expired entry (the last one found) instead of appending, as upstream does, so
the log stays bounded. The log is passed in and returned, never kept here; the first reconcile
seeds it with the current replica count (`recordInitialRecommendation`, when there is no log at
all: None), which is why the first scale-down after an HPA is created, or its controller
restarts, waits for the whole window.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from llmscaler.hpa.behavior import NormalizationArg


@dataclass(frozen=True, slots=True)
class Recommendation:
    """`timestampedRecommendation`: one raw (pre-normalization) proposal and when it was made."""

    recommendation: int
    timestamp: float


@dataclass(frozen=True, slots=True)
class Stabilized:
    """A stabilized count, the `AbleToScale` reason/message upstream sets, and the new log."""

    replicas: int
    reason: str
    message: str
    recommendations: tuple[Recommendation, ...]


def record_initial_recommendation(
    *, recommendations: Sequence[Recommendation] | None, current_replicas: int, now: float
) -> tuple[Recommendation, ...]:
    """`recordInitialRecommendation`: a log that does not exist yet (None, upstream's nil slice)
    is seeded with the current replica count; an existing one, even empty, is kept (upstream's
    tests pass an empty non-nil log to skip the seeding)."""
    if recommendations is not None:
        return tuple(recommendations)
    return (Recommendation(recommendation=current_replicas, timestamp=now),)


def _record(
    log: Sequence[Recommendation], *, old_index: int | None, desired: int, now: float
) -> tuple[Recommendation, ...]:
    entry = Recommendation(recommendation=desired, timestamp=now)
    if old_index is None:
        return (*log, entry)
    updated = list(log)
    updated[old_index] = entry
    return tuple(updated)


def stabilize_recommendation(
    *,
    recommendations: Sequence[Recommendation],
    desired_replicas: int,
    now: float,
    window: float,
) -> Stabilized:
    """`stabilizeRecommendation` (no `behavior`): the max of the proposal and every logged
    recommendation not older than `window` (`--horizontal-pod-autoscaler-downscale-
    stabilization`, 300 s)."""
    cutoff = now - window
    best = desired_replicas
    old_index: int | None = None
    for i, rec in enumerate(recommendations):
        if rec.timestamp < cutoff:
            old_index = i
        elif rec.recommendation > best:
            best = rec.recommendation
    log = _record(recommendations, old_index=old_index, desired=desired_replicas, now=now)
    if best != desired_replicas:
        return Stabilized(
            replicas=best,
            reason='ScaleDownStabilized',
            message='recent recommendations were higher than current one, '
            'applying the highest recent recommendation',
            recommendations=log,
        )
    return Stabilized(
        replicas=best,
        reason='ReadyForNewScale',
        message='recommended size matches current size',
        recommendations=log,
    )


def stabilize_recommendation_with_behaviors(
    *, recommendations: Sequence[Recommendation], args: NormalizationArg, now: float
) -> Stabilized:
    """`stabilizeRecommendationWithBehaviors`: up = min(proposal, recommendations younger than
    the up window), down = max(proposal, those younger than the down window); the result is
    current brought into [up, down], i.e. min(max(current, up), down). Both windows must be
    set (`reconcile` fills the down window from the controller's default)."""
    up_window = args.scale_up.stabilization_window_seconds or 0
    down_window = args.scale_down.stabilization_window_seconds or 0
    up_cutoff, down_cutoff = now - up_window, now - down_window
    up = down = args.desired_replicas
    old_index: int | None = None
    for i, rec in enumerate(recommendations):
        if rec.timestamp > up_cutoff:
            up = min(rec.recommendation, up)
        if rec.timestamp > down_cutoff:
            down = max(rec.recommendation, down)
        if rec.timestamp < up_cutoff and rec.timestamp < down_cutoff:
            old_index = i
    recommendation = args.current_replicas
    recommendation = max(recommendation, up)
    recommendation = min(recommendation, down)
    log = _record(recommendations, old_index=old_index, desired=args.desired_replicas, now=now)
    if recommendation == args.desired_replicas:
        return Stabilized(
            replicas=recommendation,
            reason='ReadyForNewScale',
            message='recommended size matches current size',
            recommendations=log,
        )
    if args.desired_replicas >= args.current_replicas:
        reason = 'ScaleUpStabilized'
        message = (
            'recent recommendations were lower than current one, '
            'applying the lowest recent recommendation'
        )
    else:
        reason = 'ScaleDownStabilized'
        message = (
            'recent recommendations were higher than current one, '
            'applying the highest recent recommendation'
        )
    return Stabilized(replicas=recommendation, reason=reason, message=message, recommendations=log)
