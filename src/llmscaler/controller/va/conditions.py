"""What a VariantAutoscaling's status says after a cycle: its three conditions, from facts.

Why: users read `kubectl get va` and `kubectl describe va` to learn why a variant did or did not
scale. The conditions (WVA v0.8.0's, api/v1alpha1/variantautoscaling_types.go) must name the real
cause with WVA's reasons, the same way every cycle, so that a condition flips only when the cause
changes (lastTransitionTime then tells how long it has held). This module is that mapping and
nothing else: pure, no I/O.

What it computes, per VA:

- `TargetResolved`: True/`TargetFound` when the scale target was read, else
  False/`TargetNotFound` with the resolver's one-line problem;
- `MetricsAvailable`: True/`MetricsFound` when every ready replica had fresh metrics (the core's
  message when it has one: a variant without ready replicas says so, rather than claiming fresh
  metrics it does not have); otherwise False with `PrometheusError` when the metric source
  itself failed this cycle (its first error in the message), else the core's reason
  (`MetricsMissing` / `MetricsStale` / `MetricsInvalid`: a replica reports a figure that is
  NaN, infinite or out of range; any other reason on an unavailable decision counts as
  `MetricsMissing`) and message;
- `OptimizationReady`: True/`OptimizationSucceeded` with the decision (action, target, reason);
  False/`MetricsUnavailable` when the decision held for lack of metrics;
  False/`OptimizationFailed` when the model's analysis failed and its targets were kept
  (`engine.ANALYSIS_FAILED`);
  False/`InvalidConfiguration` for a VA whose spec does not validate;
  False/`SkippedProcessing` when the target is unresolved or no decision was made for it.

What fails: nothing raises. Messages are single lines (newlines folded) and cut to the API's
32768-character limit by the status writer.
"""

from __future__ import annotations

from collections.abc import Sequence

from llmscaler.collect.readings import SourceError
from llmscaler.domain.snapshot import Decision
from llmscaler.engine import ANALYSIS_FAILED
from llmscaler.kube import crd
from llmscaler.kube.nextstatus import ConditionUpdate
from llmscaler.optimize.limiter import NO_LIMITS

_UNAVAILABLE_REASONS = frozenset(
    {crd.REASON_METRICS_MISSING, crd.REASON_METRICS_STALE, crd.REASON_METRICS_INVALID}
)
_ALL_FRESH = 'every ready replica has fresh metrics'


def _line(text: str) -> str:
    return ' '.join(text.split())


def target_resolved(*, kind: str, name: str, problem: str) -> ConditionUpdate:
    """TargetResolved from the resolver's verdict ('' = resolved)."""
    if problem:
        return ConditionUpdate(
            type=crd.CONDITION_TARGET_RESOLVED,
            status='False',
            reason=crd.REASON_TARGET_NOT_FOUND,
            message=_line(problem),
        )
    return ConditionUpdate(
        type=crd.CONDITION_TARGET_RESOLVED,
        status='True',
        reason=crd.REASON_TARGET_FOUND,
        message=_line(f'{kind} {name} found'),
    )


def metrics_available(
    *, decision: Decision, source_errors: Sequence[SourceError], source: str
) -> ConditionUpdate:
    """MetricsAvailable from the core's judgement, blaming the source when it failed."""
    if decision.metrics_available:
        return ConditionUpdate(
            type=crd.CONDITION_METRICS_AVAILABLE,
            status='True',
            reason=crd.REASON_METRICS_FOUND,
            message=_line(decision.message or _ALL_FRESH),
        )
    # Only the core's unavailable reasons are valid here: anything else (the default
    # MetricsFound left on an unavailable decision, or a text of no condition) means missing.
    reason = decision.metrics_reason
    if reason not in _UNAVAILABLE_REASONS:
        reason = crd.REASON_METRICS_MISSING
    message = decision.message or 'metrics unavailable'
    if source_errors:
        first = sorted(source_errors, key=lambda e: (e.target, e.reason, e.message))[0]
        more = f' (and {len(source_errors) - 1} more)' if len(source_errors) > 1 else ''
        detail = f'{first.target}: {first.reason}: {first.message}{more}'
        if source == 'prometheus':
            reason = crd.REASON_PROMETHEUS_ERROR
        message = f'{message}; {source} failed: {detail}'
    return ConditionUpdate(
        type=crd.CONDITION_METRICS_AVAILABLE,
        status='False',
        reason=reason,
        message=_line(message),
    )


def optimization_ready(*, decision: Decision) -> ConditionUpdate:
    """OptimizationReady from the decision of this cycle."""
    if not decision.metrics_available:
        return ConditionUpdate(
            type=crd.CONDITION_OPTIMIZATION_READY,
            status='False',
            reason=crd.REASON_METRICS_UNAVAILABLE,
            message=_line(
                f'holding at {decision.target} (never down on missing, invalid or stale '
                f'metrics): {decision.reason}'
            ),
        )
    if decision.reason.startswith(ANALYSIS_FAILED):
        return ConditionUpdate(
            type=crd.CONDITION_OPTIMIZATION_READY,
            status='False',
            reason=crd.REASON_OPTIMIZATION_FAILED,
            message=_line(f'holding at {decision.target}: {decision.reason}'),
        )
    return ConditionUpdate(
        type=crd.CONDITION_OPTIMIZATION_READY,
        status='True',
        reason=crd.REASON_OPTIMIZATION_SUCCEEDED,
        message=_line(
            f'{decision.action.value} {decision.current} -> {decision.target} '
            f'({decision.analyzer}: {decision.reason or "no change"})'
        ),
    )


CONDITION_POOL_RESOLVED = 'PoolResolved'
REASON_POOL_FOUND = 'PoolFound'
REASON_POOL_NOT_USABLE = 'PoolNotUsable'


def pool_resolved(*, pool: str, problem: str) -> ConditionUpdate:
    """PoolResolved: the variant's InferencePool (`namespace/name`), or why it has none usable."""
    if problem:
        return ConditionUpdate(
            type=CONDITION_POOL_RESOLVED,
            status='False',
            reason=REASON_POOL_NOT_USABLE,
            message=_line(problem),
        )
    return ConditionUpdate(
        type=CONDITION_POOL_RESOLVED,
        status='True',
        reason=REASON_POOL_FOUND,
        message=_line(f'InferencePool {pool}'),
    )


def skipped(*, why: str) -> ConditionUpdate:
    """OptimizationReady=False when the VA could not take part in the cycle."""
    return ConditionUpdate(
        type=crd.CONDITION_OPTIMIZATION_READY,
        status='False',
        reason=crd.REASON_SKIPPED_PROCESSING,
        message=_line(why),
    )


def invalid_spec(*, message: str) -> ConditionUpdate:
    """OptimizationReady=False for a VA whose spec does not validate."""
    return ConditionUpdate(
        type=crd.CONDITION_OPTIMIZATION_READY,
        status='False',
        reason=crd.REASON_INVALID_CONFIGURATION,
        message=_line(message),
    )


def for_decision(
    *,
    kind: str,
    name: str,
    decision: Decision | None,
    source_errors: Sequence[SourceError],
    source: str,
) -> tuple[ConditionUpdate, ...]:
    """The three conditions of a resolved VA."""
    resolved = target_resolved(kind=kind, name=name, problem='')
    if decision is None:
        return (resolved, skipped(why='no decision was made for this variant this cycle'))
    return (
        resolved,
        metrics_available(decision=decision, source_errors=source_errors, source=source),
        optimization_ready(decision=decision),
    )


CONDITION_RESOURCES_AVAILABLE = 'ResourcesAvailable'
REASON_RESOURCES_SUFFICIENT = 'ResourcesSufficient'
REASON_RESOURCE_CONSTRAINED = 'ResourceConstrained'
REASON_NO_GPU_LIMITS = 'NoGpuLimits'


def resources_available(*, decision: Decision) -> ConditionUpdate | None:
    """ResourcesAvailable from the GPU limiter's verdict; None when the limiter did not run.

    False/`ResourceConstrained` when the budget held replicas back (how many, and the model's
    verdict); Unknown/`NoGpuLimits` when no inventory or quota was known (targets not limited);
    otherwise True/`ResourcesSufficient`.
    """
    if not decision.limiter:
        return None
    if decision.limited > 0:
        return ConditionUpdate(
            type=CONDITION_RESOURCES_AVAILABLE,
            status='False',
            reason=REASON_RESOURCE_CONSTRAINED,
            message=_line(
                f'{decision.limited} replica(s) held back: target {decision.target}; '
                f'{decision.limiter}'
            ),
        )
    if decision.limiter == NO_LIMITS:
        return ConditionUpdate(
            type=CONDITION_RESOURCES_AVAILABLE,
            status='Unknown',
            reason=REASON_NO_GPU_LIMITS,
            message=_line(decision.limiter),
        )
    return ConditionUpdate(
        type=CONDITION_RESOURCES_AVAILABLE,
        status='True',
        reason=REASON_RESOURCES_SUFFICIENT,
        message=_line(decision.limiter),
    )
