"""HPA rate limits: `behavior` policies (Pods/Percent per period, `selectPolicy`), the scale-event
history they read, and the legacy limit of an HPA without `behavior`.

Why: the rate limits decide how fast a peer can follow a burst (scale-up 4 pods or 100 % per
15 s by default) and how fast it gives capacity back; matching them exactly is what makes a
simulated KEDA/HPA comparable. Each function names its upstream counterpart in
`pkg/controller/podautoscaler/horizontal.go` (and `pkg/apis/autoscaling/v2/defaults.go` for the
defaults).

The history is passed in and returned (tuples of `ScaleEvent`), never kept here: the caller
(`reconcile.HpaState`) owns it. An event counts in a period if it is younger than the period
(`timestamp > now − period`, as upstream's `After(cutoff)`).

What fails: `ScalingPolicy`/`ScalingRules` raise `ValueError` on values the API server rejects
(value ≤ 0, period outside 1..1800 s, window outside 0..3600 s, an unknown type or policy).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

PolicyType = Literal['Pods', 'Percent']
SelectPolicy = Literal['Max', 'Min', 'Disabled']

SCALE_UP_LIMIT_FACTOR = 2.0
"""`scaleUpLimitFactor`: the legacy (no `behavior`) scale-up limit is ×2 ..."""
SCALE_UP_LIMIT_MINIMUM = 4.0
"""`scaleUpLimitMinimum`: ... or 4 replicas, whichever is larger."""
DEFAULT_DOWNSCALE_STABILIZATION = 300
"""`--horizontal-pod-autoscaler-downscale-stabilization` in seconds."""
MAX_PERIOD_SECONDS = 1800
MAX_STABILIZATION_WINDOW_SECONDS = 3600


@dataclass(frozen=True, slots=True)
class ScalingPolicy:
    """`HPAScalingPolicy`: at most `value` pods (or percent) per `period_seconds`."""

    type: PolicyType
    value: int
    period_seconds: int

    def __post_init__(self) -> None:
        if self.type not in ('Pods', 'Percent'):
            raise ValueError(f'policy type must be Pods or Percent, got {self.type!r}')
        if self.value <= 0:
            raise ValueError(f'policy value must be > 0, got {self.value}')
        if not 0 < self.period_seconds <= MAX_PERIOD_SECONDS:
            raise ValueError(f'periodSeconds must be in 1..1800, got {self.period_seconds}')


@dataclass(frozen=True, slots=True)
class ScalingRules:
    """`HPAScalingRules`. `stabilization_window_seconds` None means "the controller's default"
    (0 s up; the downscale-stabilization flag down). `tolerance` None is the controller's 0.1."""

    policies: tuple[ScalingPolicy, ...] = ()
    select_policy: SelectPolicy = 'Max'
    stabilization_window_seconds: int | None = None
    tolerance: float | None = None

    def __post_init__(self) -> None:
        if self.select_policy not in ('Max', 'Min', 'Disabled'):
            raise ValueError(f'selectPolicy must be Max, Min or Disabled, got {self.select_policy}')
        window = self.stabilization_window_seconds
        if window is not None and not 0 <= window <= MAX_STABILIZATION_WINDOW_SECONDS:
            raise ValueError(f'stabilizationWindowSeconds must be in 0..3600, got {window}')
        if self.tolerance is not None and not (
            math.isfinite(self.tolerance) and self.tolerance >= 0
        ):
            raise ValueError(f'tolerance must be a finite number >= 0, got {self.tolerance}')


DEFAULT_SCALE_UP = ScalingRules(
    policies=(ScalingPolicy('Pods', 4, 15), ScalingPolicy('Percent', 100, 15)),
    select_policy='Max',
    stabilization_window_seconds=0,
)
DEFAULT_SCALE_DOWN = ScalingRules(
    policies=(ScalingPolicy('Percent', 100, 15),),
    select_policy='Max',
    stabilization_window_seconds=None,
)


@dataclass(frozen=True, slots=True)
class Behavior:
    """`HorizontalPodAutoscalerBehavior`; a None side takes upstream's defaults."""

    scale_up: ScalingRules | None = None
    scale_down: ScalingRules | None = None


def generate_scale_up_rules(rules: ScalingRules | None) -> ScalingRules:
    """`GenerateHPAScaleUpRules`: fill the unset fields of scale-up rules with the defaults."""
    return _fill(rules, DEFAULT_SCALE_UP)


def generate_scale_down_rules(rules: ScalingRules | None) -> ScalingRules:
    """`GenerateHPAScaleDownRules`: fill the unset fields of scale-down rules with the defaults
    (the window stays None: the controller fills it, `maybeInitScaleDownStabilizationWindow`)."""
    return _fill(rules, DEFAULT_SCALE_DOWN)


def _fill(rules: ScalingRules | None, default: ScalingRules) -> ScalingRules:
    if rules is None:
        return default
    return replace(
        rules,
        policies=rules.policies or default.policies,
        stabilization_window_seconds=(
            default.stabilization_window_seconds
            if rules.stabilization_window_seconds is None
            else rules.stabilization_window_seconds
        ),
    )


@dataclass(frozen=True, slots=True)
class ScaleEvent:
    """`timestampedScaleEvent`: |Δreplicas| of one rescale, when, and whether its slot is free."""

    replica_change: int
    timestamp: float
    outdated: bool = False


@dataclass(frozen=True, slots=True)
class Limited:
    """A normalized count with the `ScalingLimited` condition's reason and message."""

    replicas: int
    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class NormalizationArg:
    """Upstream's `NormalizationArg` without the key (the history is passed separately)."""

    scale_up: ScalingRules
    scale_down: ScalingRules
    min_replicas: int
    max_replicas: int
    current_replicas: int
    desired_replicas: int


def replicas_change_per_period(
    *, period_seconds: int, events: Sequence[ScaleEvent], now: float
) -> int:
    """`getReplicasChangePerPeriod`: Σ changes of the events younger than the period."""
    cutoff = now - period_seconds
    return sum(e.replica_change for e in events if e.timestamp > cutoff)


def _period_start(
    *,
    policy: ScalingPolicy,
    current_replicas: int,
    up_events: Sequence[ScaleEvent],
    down_events: Sequence[ScaleEvent],
    now: float,
) -> int:
    added = replicas_change_per_period(
        period_seconds=policy.period_seconds, events=up_events, now=now
    )
    deleted = replicas_change_per_period(
        period_seconds=policy.period_seconds, events=down_events, now=now
    )
    return current_replicas - added + deleted


def scale_up_limit_with_rules(
    *,
    current_replicas: int,
    up_events: Sequence[ScaleEvent],
    down_events: Sequence[ScaleEvent],
    rules: ScalingRules,
    now: float,
) -> int:
    """`calculateScaleUpLimitWithScalingRules`: per policy, the replicas at the period's start
    plus `value` pods or ×(1 + value %) rounded up; `Max` takes the largest, `Min` the smallest;
    `Disabled` gives current."""
    if rules.select_policy == 'Disabled':
        return current_replicas
    proposals = []
    for policy in rules.policies:
        start = _period_start(
            policy=policy,
            current_replicas=current_replicas,
            up_events=up_events,
            down_events=down_events,
            now=now,
        )
        if policy.type == 'Pods':
            proposals.append(start + policy.value)
        else:
            proposals.append(math.ceil(start * (1 + policy.value / 100)))
    if not proposals:
        return -(2**31) if rules.select_policy == 'Max' else 2**31 - 1
    return max(proposals) if rules.select_policy == 'Max' else min(proposals)


def scale_down_limit_with_behaviors(
    *,
    current_replicas: int,
    up_events: Sequence[ScaleEvent],
    down_events: Sequence[ScaleEvent],
    rules: ScalingRules,
    now: float,
) -> int:
    """`calculateScaleDownLimitWithBehaviors`: per policy, the replicas at the period's start
    minus `value` pods or ×(1 − value %) truncated (Go's int conversion); `Max` (the largest
    change) takes the smallest count, `Min` the largest; `Disabled` gives current."""
    if rules.select_policy == 'Disabled':
        return current_replicas
    proposals = []
    for policy in rules.policies:
        start = _period_start(
            policy=policy,
            current_replicas=current_replicas,
            up_events=up_events,
            down_events=down_events,
            now=now,
        )
        if policy.type == 'Pods':
            proposals.append(start - policy.value)
        else:
            proposals.append(math.trunc(start * (1 - policy.value / 100)))
    if not proposals:
        return 2**31 - 1 if rules.select_policy == 'Max' else -(2**31)
    return min(proposals) if rules.select_policy == 'Max' else max(proposals)


def convert_desired_replicas_with_behavior_rate(
    *,
    args: NormalizationArg,
    up_events: Sequence[ScaleEvent],
    down_events: Sequence[ScaleEvent],
    now: float,
) -> Limited:
    """`convertDesiredReplicasWithBehaviorRate`: limit a stabilized count by the rate policies
    and clamp it to [min, max] (the clamp lives here, as upstream)."""
    current, desired = args.current_replicas, args.desired_replicas
    if desired > current:
        limit = scale_up_limit_with_rules(
            current_replicas=current,
            up_events=up_events,
            down_events=down_events,
            rules=args.scale_up,
            now=now,
        )
        # No further scale-up until the events of the period age out.
        limit = max(limit, current)
        if args.max_replicas > limit:
            allowed, reason = limit, 'ScaleUpLimit'
            message = 'the desired replica count is increasing faster than the maximum scale rate'
        else:
            allowed, reason = args.max_replicas, 'TooManyReplicas'
            message = 'the desired replica count is more than the maximum replica count'
        if desired > allowed:
            return Limited(replicas=allowed, reason=reason, message=message)
    elif desired < current:
        limit = scale_down_limit_with_behaviors(
            current_replicas=current,
            up_events=up_events,
            down_events=down_events,
            rules=args.scale_down,
            now=now,
        )
        limit = min(limit, current)
        if args.min_replicas < limit:
            allowed, reason = limit, 'ScaleDownLimit'
            message = 'the desired replica count is decreasing faster than the maximum scale rate'
        else:
            allowed, reason = args.min_replicas, 'TooFewReplicas'
            message = 'the desired replica count is less than the minimum replica count'
        if desired < allowed:
            return Limited(replicas=allowed, reason=reason, message=message)
    return Limited(
        replicas=desired,
        reason='DesiredWithinRange',
        message='the desired count is within the acceptable range',
    )


def calculate_scale_up_limit(current_replicas: int) -> int:
    """`calculateScaleUpLimit` (no `behavior`): max(2 · current, 4)."""
    return int(max(SCALE_UP_LIMIT_FACTOR * current_replicas, SCALE_UP_LIMIT_MINIMUM))


def convert_desired_replicas_with_rules(
    *, current_replicas: int, desired_replicas: int, min_replicas: int, max_replicas: int
) -> Limited:
    """`convertDesiredReplicasWithRules` (no `behavior`): clamp to
    [min, min(max, max(2 · current, 4))]."""
    scale_up_limit = calculate_scale_up_limit(current_replicas)
    if max_replicas > scale_up_limit:
        maximum, reason = scale_up_limit, 'ScaleUpLimit'
        message = 'the desired replica count is increasing faster than the maximum scale rate'
    else:
        maximum, reason = max_replicas, 'TooManyReplicas'
        message = 'the desired replica count is more than the maximum replica count'
    if desired_replicas < min_replicas:
        return Limited(
            replicas=min_replicas,
            reason='TooFewReplicas',
            message='the desired replica count is less than the minimum replica count',
        )
    if desired_replicas > maximum:
        return Limited(replicas=maximum, reason=reason, message=message)
    return Limited(
        replicas=desired_replicas,
        reason='DesiredWithinRange',
        message='the desired count is within the acceptable range',
    )


def longest_policy_period(rules: ScalingRules) -> int:
    """`getLongestPolicyPeriod`."""
    return max((p.period_seconds for p in rules.policies), default=0)


def mark_scale_events_outdated(
    *, events: Sequence[ScaleEvent], longest_period: int, now: float
) -> tuple[ScaleEvent, ...]:
    """`markScaleEventsOutdated`: events older than the longest period free their slot."""
    cutoff = now - longest_period
    return tuple(replace(e, outdated=True) if e.timestamp < cutoff else e for e in events)


def _store(
    events: Sequence[ScaleEvent], *, rules: ScalingRules, change: int, now: float
) -> tuple[ScaleEvent, ...]:
    marked = list(
        mark_scale_events_outdated(
            events=events, longest_period=longest_policy_period(rules), now=now
        )
    )
    event = ScaleEvent(replica_change=change, timestamp=now)
    outdated = [i for i, e in enumerate(marked) if e.outdated]
    if outdated:
        # Upstream reuses the last outdated slot.
        marked[outdated[-1]] = event
    else:
        marked.append(event)
    return tuple(marked)


def store_scale_event(
    *,
    behavior: Behavior | None,
    up_events: Sequence[ScaleEvent],
    down_events: Sequence[ScaleEvent],
    prev_replicas: int,
    new_replicas: int,
    now: float,
) -> tuple[tuple[ScaleEvent, ...], tuple[ScaleEvent, ...]]:
    """`storeScaleEvent`: record one rescale in the up or down history, (up, down) returned.
    Without `behavior` nothing is stored (the legacy path reads no history)."""
    if behavior is None:
        return tuple(up_events), tuple(down_events)
    if new_replicas > prev_replicas:
        rules = generate_scale_up_rules(behavior.scale_up)
        up = _store(up_events, rules=rules, change=new_replicas - prev_replicas, now=now)
        return up, tuple(down_events)
    rules = generate_scale_down_rules(behavior.scale_down)
    down = _store(down_events, rules=rules, change=prev_replicas - new_replicas, now=now)
    return tuple(up_events), down
