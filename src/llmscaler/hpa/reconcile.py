"""One HPA's full reconcile, from its spec, the target's `/scale`, its pods and its metrics.

Why: this is `reconcileAutoscaler` of upstream's `horizontal.go` as a pure function, so the
simulator can run an exact HPA (the `keda-queue` and `hpa-kv` peers) and Kubernetes' own
controller test cases (`full-Test…`) can be replayed against it. The memory upstream keeps per
HPA (the recommendation log and the scale-up/down event histories) is the `HpaState` passed in
and returned.

Order, as upstream:
1. seed the recommendation log with `spec.replicas` on the first reconcile;
2. `spec.replicas == 0` with `minReplicas != 0`: scaling disabled, nothing changes;
   above max → max, below min → min, without reading metrics;
3. otherwise one proposal per metric (`compute_replicas_for_metric`), their maximum; if every
   metric failed, or one failed and the maximum is below `spec.replicas`, nothing changes
   (a failing metric can block a scale-down, never a scale-up);
4. normalize: without `behavior` the legacy window (max over 300 s) and the ×2-or-4 limit;
   with `behavior` its windows, then its rate policies and the [min, max] clamp;
5. a rescale is recorded in the event history (only with `behavior`), assuming the write of
   `/scale` succeeds.

Inputs: metric values in milli-units (`Quantity.MilliValue()`), a Utilization target in
percent; times in seconds on the caller's clock. Per-HPA tolerances
(`behavior.scale{Up,Down}.tolerance`) are honoured as with the `HPAConfigurableTolerance` gate
on (beta and on by default since 1.35).

What fails: `HpaSpec` and `MetricSpec` raise `ValueError` on what the API server rejects
(max < 1, min > max, a target ≤ 0, a target type the metric type does not allow). Metric
failures are values: a `None` input or a `CalcError` from the calculator makes that metric
invalid, reported in `Reconciled.error`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from llmscaler.hpa.behavior import (
    DEFAULT_DOWNSCALE_STABILIZATION,
    Behavior,
    NormalizationArg,
    ScaleEvent,
    convert_desired_replicas_with_behavior_rate,
    convert_desired_replicas_with_rules,
    generate_scale_down_rules,
    generate_scale_up_rules,
    store_scale_event,
)
from llmscaler.hpa.pods import (
    CPU_INITIALIZATION_PERIOD,
    DELAY_OF_INITIAL_READINESS_STATUS,
    Pod,
    PodMetric,
)
from llmscaler.hpa.replica_calculator import (
    DEFAULT_TOLERANCE,
    CalcError,
    Proposal,
    Tolerances,
    external_metric_replicas,
    external_per_pod_metric_replicas,
    object_metric_replicas,
    object_per_pod_metric_replicas,
    plain_metric_replicas,
    resource_replicas,
)
from llmscaler.hpa.stabilization import (
    Recommendation,
    record_initial_recommendation,
    stabilize_recommendation,
    stabilize_recommendation_with_behaviors,
)

MetricType = Literal['Resource', 'Pods', 'Object', 'External']
TargetType = Literal['Utilization', 'AverageValue', 'Value']
MetricInput = Mapping[str, PodMetric] | Sequence[int] | int | None
"""Per metric: pod samples (Resource, Pods), the series of an External metric, the value of an
Object metric; None when the metric could not be fetched."""

_ALLOWED_TARGETS: dict[str, tuple[str, ...]] = {
    'Resource': ('Utilization', 'AverageValue'),
    'Pods': ('AverageValue',),
    'Object': ('Value', 'AverageValue'),
    'External': ('Value', 'AverageValue'),
}


@dataclass(frozen=True, slots=True)
class MetricSpec:
    """One entry of `spec.metrics`: `name` is the resource (`cpu`, `memory`) or metric name;
    `target` is a percent for `Utilization`, else a milli-value."""

    type: MetricType
    name: str
    target_type: TargetType
    target: int

    def __post_init__(self) -> None:
        allowed = _ALLOWED_TARGETS.get(self.type)
        if allowed is None:
            raise ValueError(f'metric type must be Resource, Pods, Object or External: {self.type}')
        if self.target_type not in allowed:
            raise ValueError(
                f'{self.type} metric {self.name}: target type must be one of {allowed}'
            )
        if self.target <= 0:
            raise ValueError(f'{self.type} metric {self.name}: target must be > 0')


@dataclass(frozen=True, slots=True)
class HpaSpec:
    """`HorizontalPodAutoscalerSpec` (the scale target aside). `min_replicas` None is 1."""

    max_replicas: int
    metrics: tuple[MetricSpec, ...]
    min_replicas: int | None = None
    behavior: Behavior | None = None

    def __post_init__(self) -> None:
        lower = 1 if self.min_replicas is None else self.min_replicas
        if self.max_replicas < 1:
            raise ValueError(f'maxReplicas must be >= 1, got {self.max_replicas}')
        if lower < 0 or lower > self.max_replicas:
            raise ValueError(f'minReplicas must be in 0..maxReplicas, got {lower}')
        if lower == 0 and not any(m.type in ('Object', 'External') for m in self.metrics):
            raise ValueError('minReplicas 0 needs an Object or External metric (HPAScaleToZero)')
        if not self.metrics:
            raise ValueError('at least one metric is required')


@dataclass(frozen=True, slots=True)
class Scale:
    """What the reconcile reads of the target: `spec.replicas`, `status.replicas` and the pods
    its `status.selector` selects."""

    spec_replicas: int
    status_replicas: int
    pods: tuple[Pod, ...] = ()


@dataclass(frozen=True, slots=True)
class ControllerSettings:
    """The kube-controller-manager flags the reconcile depends on (upstream defaults)."""

    tolerance: float = DEFAULT_TOLERANCE
    downscale_stabilization: float = DEFAULT_DOWNSCALE_STABILIZATION
    cpu_initialization_period: float = CPU_INITIALIZATION_PERIOD
    delay_of_initial_readiness_status: float = DELAY_OF_INITIAL_READINESS_STATUS


@dataclass(frozen=True, slots=True)
class HpaState:
    """What upstream's controller remembers per HPA between reconciles (`recommendations` None:
    never reconciled, the log gets seeded)."""

    recommendations: tuple[Recommendation, ...] | None = None
    scale_up_events: tuple[ScaleEvent, ...] = ()
    scale_down_events: tuple[ScaleEvent, ...] = ()


@dataclass(frozen=True, slots=True)
class Reconciled:
    """One reconcile's outcome. `desired_replicas` is what the HPA status reports (current when
    it did not rescale); `rescale` says whether `/scale` is written; `metric_replicas` is the
    max over the metrics' proposals (None when metrics were not read or all failed);
    `reason` the rescale reason, `limited` the `ScalingLimited` reason, `error` the first
    metric error."""

    desired_replicas: int
    rescale: bool
    metric_replicas: int | None
    reason: str
    limited: str
    error: str | None
    state: HpaState


def tolerances_for_hpa(*, spec: HpaSpec, settings: ControllerSettings) -> Tolerances:
    """`tolerancesForHpa`: the controller's tolerance unless `behavior` sets one per direction."""
    down = up = settings.tolerance
    if spec.behavior is not None:
        if spec.behavior.scale_down is not None and spec.behavior.scale_down.tolerance is not None:
            down = spec.behavior.scale_down.tolerance
        if spec.behavior.scale_up is not None and spec.behavior.scale_up.tolerance is not None:
            up = spec.behavior.scale_up.tolerance
    return Tolerances(scale_down=down, scale_up=up)


def compute_replicas_for_metric(
    *,
    metric: MetricSpec,
    value: MetricInput,
    scale: Scale,
    tolerances: Tolerances,
    now: float,
    settings: ControllerSettings,
) -> Proposal | CalcError:
    """`computeReplicasForMetric`: dispatch on the metric and target type to the calculator."""
    if value is None:
        return CalcError(f'unable to get {metric.type} metric {metric.name}')
    current = scale.spec_replicas
    if metric.type in ('Resource', 'Pods'):
        if not isinstance(value, Mapping):
            return CalcError(f'{metric.type} metric {metric.name} needs per-pod samples')
        resource = metric.name if metric.type == 'Resource' else ''
        common = {
            'current_replicas': current,
            'resource': resource,
            'pods': scale.pods,
            'metrics': value,
            'now': now,
            'tolerances': tolerances,
            'cpu_initialization_period': settings.cpu_initialization_period,
            'delay_of_initial_readiness_status': settings.delay_of_initial_readiness_status,
        }
        if metric.target_type == 'Utilization':
            return resource_replicas(target_utilization=metric.target, **common)  # type: ignore[arg-type]
        return plain_metric_replicas(target_usage=metric.target, **common)  # type: ignore[arg-type]
    if metric.type == 'Object':
        if not isinstance(value, int):
            return CalcError(f'Object metric {metric.name} needs one value')
        if metric.target_type == 'Value':
            return object_metric_replicas(
                current_replicas=current,
                target_usage=metric.target,
                usage=value,
                pods=scale.pods,
                tolerances=tolerances,
            )
        return object_per_pod_metric_replicas(
            status_replicas=scale.status_replicas,
            target_average_usage=metric.target,
            usage=value,
            tolerances=tolerances,
        )
    if isinstance(value, (int, Mapping)):
        return CalcError(f'External metric {metric.name} needs a list of series values')
    if metric.target_type == 'Value':
        return external_metric_replicas(
            current_replicas=current,
            target_usage=metric.target,
            values=value,
            pods=scale.pods,
            tolerances=tolerances,
        )
    return external_per_pod_metric_replicas(
        status_replicas=scale.status_replicas,
        target_usage_per_pod=metric.target,
        values=value,
        tolerances=tolerances,
    )


def compute_replicas_for_metrics(
    *,
    spec: HpaSpec,
    scale: Scale,
    values: Sequence[MetricInput],
    now: float,
    settings: ControllerSettings,
) -> tuple[int, str | None]:
    """`computeReplicasForMetrics`: (max proposal, first error). The proposal is -1 when every
    metric failed, or one failed and the maximum is below `spec.replicas`."""
    tolerances = tolerances_for_hpa(spec=spec, settings=settings)
    replicas = 0
    invalid = 0
    first_error: str | None = None
    for metric, value in zip(spec.metrics, values, strict=True):
        proposal = compute_replicas_for_metric(
            metric=metric,
            value=value,
            scale=scale,
            tolerances=tolerances,
            now=now,
            settings=settings,
        )
        if isinstance(proposal, CalcError):
            if invalid == 0:
                first_error = proposal.message
            invalid += 1
            continue
        replicas = max(replicas, proposal.replicas)
    if invalid >= len(spec.metrics) or (invalid > 0 and replicas < scale.spec_replicas):
        return -1, first_error
    return replicas, first_error


def reconcile(
    *,
    spec: HpaSpec,
    scale: Scale,
    values: Sequence[MetricInput],
    state: HpaState,
    now: float,
    settings: ControllerSettings = ControllerSettings(),
) -> Reconciled:
    """`reconcileAutoscaler` for one HPA; `values` holds one input per `spec.metrics` entry."""
    if len(values) != len(spec.metrics):
        raise ValueError(f'{len(spec.metrics)} metrics but {len(values)} metric values')
    current = scale.spec_replicas
    state = replace(
        state,
        recommendations=record_initial_recommendation(
            recommendations=state.recommendations, current_replicas=current, now=now
        ),
    )
    lower = 1 if spec.min_replicas is None else spec.min_replicas
    metric_replicas: int | None = None
    error: str | None = None
    limited = 'DesiredWithinRange'
    if current == 0 and lower != 0:
        return Reconciled(
            desired_replicas=0,
            rescale=False,
            metric_replicas=None,
            reason='ScalingDisabled',
            limited=limited,
            error=None,
            state=state,
        )
    if current > spec.max_replicas:
        desired, reason = spec.max_replicas, 'Current number of replicas above Spec.MaxReplicas'
    elif current < lower:
        desired, reason = lower, 'Current number of replicas below Spec.MinReplicas'
    else:
        proposal, error = compute_replicas_for_metrics(
            spec=spec, scale=scale, values=values, now=now, settings=settings
        )
        if proposal == -1:
            return Reconciled(
                desired_replicas=current,
                rescale=False,
                metric_replicas=None,
                reason='FailedComputeMetricsReplicas',
                limited=limited,
                error=error,
                state=state,
            )
        metric_replicas = proposal
        reason = ''
        if proposal > current:
            reason = 'metric above target'
        elif proposal < current:
            reason = 'All metrics below target'
        desired, limited, state = _normalize(
            spec=spec,
            state=state,
            current=current,
            desired=proposal,
            lower=lower,
            now=now,
            settings=settings,
        )
    rescale = desired != current
    if rescale:
        up, down = store_scale_event(
            behavior=spec.behavior,
            up_events=state.scale_up_events,
            down_events=state.scale_down_events,
            prev_replicas=current,
            new_replicas=desired,
            now=now,
        )
        state = replace(state, scale_up_events=up, scale_down_events=down)
    return Reconciled(
        desired_replicas=desired,
        rescale=rescale,
        metric_replicas=metric_replicas,
        reason=reason,
        limited=limited,
        error=error,
        state=state,
    )


def _normalize(
    *,
    spec: HpaSpec,
    state: HpaState,
    current: int,
    desired: int,
    lower: int,
    now: float,
    settings: ControllerSettings,
) -> tuple[int, str, HpaState]:
    """`normalizeDesiredReplicas` / `normalizeDesiredReplicasWithBehaviors`."""
    if spec.behavior is None:
        stabilized = stabilize_recommendation(
            recommendations=state.recommendations or (),
            desired_replicas=desired,
            now=now,
            window=settings.downscale_stabilization,
        )
        limited = convert_desired_replicas_with_rules(
            current_replicas=current,
            desired_replicas=stabilized.replicas,
            min_replicas=lower,
            max_replicas=spec.max_replicas,
        )
        return (
            limited.replicas,
            limited.reason,
            replace(state, recommendations=stabilized.recommendations),
        )
    down_rules = generate_scale_down_rules(spec.behavior.scale_down)
    if down_rules.stabilization_window_seconds is None:
        # maybeInitScaleDownStabilizationWindow: the controller's flag fills an unset window.
        down_rules = replace(
            down_rules, stabilization_window_seconds=int(settings.downscale_stabilization)
        )
    args = NormalizationArg(
        scale_up=generate_scale_up_rules(spec.behavior.scale_up),
        scale_down=down_rules,
        min_replicas=lower,
        max_replicas=spec.max_replicas,
        current_replicas=current,
        desired_replicas=desired,
    )
    stabilized = stabilize_recommendation_with_behaviors(
        recommendations=state.recommendations or (), args=args, now=now
    )
    limited = convert_desired_replicas_with_behavior_rate(
        args=replace(args, desired_replicas=stabilized.replicas),
        up_events=state.scale_up_events,
        down_events=state.scale_down_events,
        now=now,
    )
    return (
        limited.replicas,
        limited.reason,
        replace(state, recommendations=stabilized.recommendations),
    )
