"""Kubernetes' HPA replica calculator: one metric's replica proposal, as the upstream controller.

Why: every peer this project is compared with (KEDA, Kaito's KEDA path, KServe, WVA's HPA
actuation) ends in an HPA, so a comparison is only fair if the HPA arithmetic is exact. Each
function here matches one function of upstream's `pkg/controller/podautoscaler`
(`replica_calculator.go`, `metrics/utilization.go`); the upstream name is in each docstring so a
reader can check them side by side, and Kubernetes' own test cases can be replayed against them.

Units follow upstream: metric values are integer milli-units (`Quantity.MilliValue()`: 1.5
requests waiting is 1500), resource requests are milli-units too (CPU millicores), utilization is
an integer percentage. Times are seconds on the caller's clock (`now`), never read here.

What fails: where upstream returns an error the functions here return a `CalcError` value (the
caller, `reconcile`, turns it into an invalid metric); nothing raises on bad metric data.
Proposals above int32 are capped at `MAX_INT32`, as upstream's int32 arithmetic saturates there
in practice.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from llmscaler.hpa.pods import (
    CPU_INITIALIZATION_PERIOD,
    DELAY_OF_INITIAL_READINESS_STATUS,
    Pod,
    PodMetric,
    group_pods,
)

MAX_INT32 = 2**31 - 1
DEFAULT_TOLERANCE = 0.1
"""`--horizontal-pod-autoscaler-tolerance`."""


@dataclass(frozen=True, slots=True)
class Tolerances:
    """Upstream's `Tolerances`: the dead band around ratio 1, per direction (0.1 each by default;
    per-HPA values come from `behavior.scaleUp/scaleDown.tolerance`)."""

    scale_down: float = DEFAULT_TOLERANCE
    scale_up: float = DEFAULT_TOLERANCE

    def is_within(self, ratio: float) -> bool:
        """`isWithin`: 1 − down ≤ ratio ≤ 1 + up, both bounds inclusive (NaN is never within)."""
        return (1.0 - self.scale_down) <= ratio <= (1.0 + self.scale_up)


@dataclass(frozen=True, slots=True)
class CalcError:
    """A metric the calculator could not turn into a proposal (upstream's returned `error`)."""

    message: str


@dataclass(frozen=True, slots=True)
class Proposal:
    """One metric's proposal: `replicas`, and the usage the HPA reports in its status
    (utilization %, average milli-value or total milli-value by metric type). `raw_usage` is the
    average milli-value of a utilization metric (upstream's `rawUtilization`), else `usage`."""

    replicas: int
    usage: int
    raw_usage: int


def _cap(replicas: float) -> int:
    return int(min(replicas, MAX_INT32))


def resource_utilization_ratio(
    *, metrics: Mapping[str, PodMetric], requests: Mapping[str, int], target_utilization: int
) -> tuple[float, int, int] | CalcError:
    """`GetResourceUtilizationRatio`: (ratio, utilization %, average raw milli-value).

    utilization = ⌊100·Σusage / Σrequest⌋ over the pods that have a metric, truncated before the
    ratio is taken (so 62.375 % is 62). A sample of a pod without a request is extraneous and
    skipped (requests are checked by `pod_requests`); error when the requests sum to 0.
    """
    metrics_total = 0
    requests_total = 0
    entries = 0
    for name in sorted(metrics):
        request = requests.get(name)
        if request is None:
            continue
        metrics_total += metrics[name].value
        requests_total += request
        entries += 1
    if requests_total == 0:
        return CalcError('no metrics returned matched known pods')
    utilization = (metrics_total * 100) // requests_total
    return utilization / target_utilization, utilization, metrics_total // entries


def metric_usage_ratio(*, metrics: Mapping[str, PodMetric], target_usage: int) -> tuple[float, int]:
    """`GetMetricUsageRatio`: (ratio, average) with average = ⌊Σvalue / n⌋ in milli-units."""
    total = sum(m.value for m in metrics.values())
    average = total // len(metrics)
    return average / target_usage, average


def pod_requests(*, pods: Sequence[Pod], resource: str) -> dict[str, int] | CalcError:
    """`calculatePodRequests`: each pod's request of `resource`; error when a pod has none."""
    requests: dict[str, int] = {}
    for pod in pods:
        if pod.request is None:
            return CalcError(f'missing request for {resource} in pod {pod.name}')
        requests[pod.name] = pod.request
    return requests


def _plain_or_resource(
    *,
    current_replicas: int,
    pods: Sequence[Pod],
    metrics: Mapping[str, PodMetric],
    resource: str,
    tolerances: Tolerances,
    now: float,
    target_utilization: int | None,
    target_usage: int,
    cpu_initialization_period: float,
    delay_of_initial_readiness_status: float,
) -> Proposal | CalcError:
    """The shared body of `GetResourceReplicas` (utilization) and `calcPlainMetricReplicas`."""
    if not metrics:
        return CalcError('did not receive metrics for targeted pods (pods might be unready)')
    if not pods:
        return CalcError('no pods returned by selector while calculating replica count')
    groups = group_pods(
        pods=pods,
        metrics=metrics,
        resource=resource,
        now=now,
        cpu_initialization_period=cpu_initialization_period,
        delay_of_initial_readiness_status=delay_of_initial_readiness_status,
    )
    kept = {n: m for n, m in metrics.items() if n not in groups.ignored | groups.unready}
    requests: dict[str, int] = {}
    if target_utilization is not None:
        found = pod_requests(pods=pods, resource=resource)
        if isinstance(found, CalcError):
            return found
        requests = found
    if not kept:
        return CalcError('did not receive metrics for targeted pods (pods might be unready)')

    def ratio_of(values: Mapping[str, PodMetric]) -> tuple[float, int, int] | CalcError:
        if target_utilization is None:
            ratio, average = metric_usage_ratio(metrics=values, target_usage=target_usage)
            return ratio, average, average
        return resource_utilization_ratio(
            metrics=values, requests=requests, target_utilization=target_utilization
        )

    first = ratio_of(kept)
    if isinstance(first, CalcError):
        return first
    ratio, usage, raw = first
    scale_up_with_unready = bool(groups.unready) and ratio > 1.0
    if not scale_up_with_unready and not groups.missing:
        if tolerances.is_within(ratio):
            return Proposal(replicas=current_replicas, usage=usage, raw_usage=raw)
        return Proposal(
            replicas=_cap(math.ceil(ratio * groups.ready_count)), usage=usage, raw_usage=raw
        )
    filled = dict(kept)
    if groups.missing:
        if ratio < 1.0:
            # Scale-down: a pod without a sample is assumed at the target (for utilization at
            # max(100 %, target) of its request), so it brakes the scale-down.
            for name in sorted(groups.missing):
                if target_utilization is None:
                    filled[name] = PodMetric(value=target_usage)
                else:
                    fallback = max(100, target_utilization)
                    filled[name] = PodMetric(value=requests.get(name, 0) * fallback // 100)
        elif ratio > 1.0:
            for name in sorted(groups.missing):
                filled[name] = PodMetric(value=0)
    if scale_up_with_unready:
        for name in sorted(groups.unready):
            filled[name] = PodMetric(value=0)
    second = ratio_of(filled)
    if isinstance(second, CalcError):
        return second
    new_ratio = second[0]
    if (
        tolerances.is_within(new_ratio)
        or (ratio < 1.0 and new_ratio > 1.0)
        or (ratio > 1.0 and new_ratio < 1.0)
    ):
        return Proposal(replicas=current_replicas, usage=usage, raw_usage=raw)
    new_replicas = _cap(math.ceil(new_ratio * len(filled)))
    if (new_ratio < 1.0 and new_replicas > current_replicas) or (
        new_ratio > 1.0 and new_replicas < current_replicas
    ):
        return Proposal(replicas=current_replicas, usage=usage, raw_usage=raw)
    return Proposal(replicas=new_replicas, usage=usage, raw_usage=raw)


def resource_replicas(
    *,
    current_replicas: int,
    target_utilization: int,
    resource: str,
    pods: Sequence[Pod],
    metrics: Mapping[str, PodMetric],
    now: float,
    tolerances: Tolerances = Tolerances(),
    cpu_initialization_period: float = CPU_INITIALIZATION_PERIOD,
    delay_of_initial_readiness_status: float = DELAY_OF_INITIAL_READINESS_STATUS,
) -> Proposal | CalcError:
    """`GetResourceReplicas`: a Resource metric with a `Utilization` target (percent of request).

    `usage` is the utilization %, `raw_usage` the average milli-value over the pods counted.
    """
    return _plain_or_resource(
        current_replicas=current_replicas,
        pods=pods,
        metrics=metrics,
        resource=resource,
        tolerances=tolerances,
        now=now,
        target_utilization=target_utilization,
        target_usage=0,
        cpu_initialization_period=cpu_initialization_period,
        delay_of_initial_readiness_status=delay_of_initial_readiness_status,
    )


def plain_metric_replicas(
    *,
    current_replicas: int,
    target_usage: int,
    resource: str,
    pods: Sequence[Pod],
    metrics: Mapping[str, PodMetric],
    now: float,
    tolerances: Tolerances = Tolerances(),
    cpu_initialization_period: float = CPU_INITIALIZATION_PERIOD,
    delay_of_initial_readiness_status: float = DELAY_OF_INITIAL_READINESS_STATUS,
) -> Proposal | CalcError:
    """`calcPlainMetricReplicas`, behind `GetRawResourceReplicas` (a Resource metric with an
    `AverageValue` target: `resource` names it) and `GetMetricReplicas` (a Pods metric:
    `resource=''`). `target_usage` and `usage` are per-pod averages in milli-units."""
    return _plain_or_resource(
        current_replicas=current_replicas,
        pods=pods,
        metrics=metrics,
        resource=resource,
        tolerances=tolerances,
        now=now,
        target_utilization=None,
        target_usage=target_usage,
        cpu_initialization_period=cpu_initialization_period,
        delay_of_initial_readiness_status=delay_of_initial_readiness_status,
    )


def ready_pods_count(*, pods: Sequence[Pod]) -> int | CalcError:
    """`getReadyPodsCount`: pods that are Running and Ready (error when the selector found none)."""
    if not pods:
        return CalcError('no pods returned by selector while calculating replica count')
    return sum(1 for p in pods if p.phase == 'Running' and p.ready is True)


def usage_ratio_replica_count(
    *, current_replicas: int, usage_ratio: float, pods: Sequence[Pod], tolerances: Tolerances
) -> int | CalcError:
    """`getUsageRatioReplicaCount`: ⌈ratio · ready pods⌉ outside tolerance, current within; from
    zero replicas the tolerance is skipped and the proposal is ⌈ratio⌉."""
    if current_replicas == 0:
        return _cap(math.ceil(usage_ratio))
    if tolerances.is_within(usage_ratio):
        return current_replicas
    ready = ready_pods_count(pods=pods)
    if isinstance(ready, CalcError):
        return ready
    return _cap(math.ceil(usage_ratio * ready))


def object_metric_replicas(
    *,
    current_replicas: int,
    target_usage: int,
    usage: int,
    pods: Sequence[Pod],
    tolerances: Tolerances = Tolerances(),
) -> Proposal | CalcError:
    """`GetObjectMetricReplicas`: an Object metric with a `Value` target."""
    replicas = usage_ratio_replica_count(
        current_replicas=current_replicas,
        usage_ratio=usage / target_usage,
        pods=pods,
        tolerances=tolerances,
    )
    if isinstance(replicas, CalcError):
        return replicas
    return Proposal(replicas=replicas, usage=usage, raw_usage=usage)


def _per_pod(*, status_replicas: int, target: int, usage: int, tolerances: Tolerances) -> Proposal:
    replicas = status_replicas
    # status.replicas = 0 gives +Inf (or NaN for 0/0): never within, so ⌈usage/target⌉.
    denominator = target * status_replicas
    ratio = usage / denominator if denominator else math.inf
    if not tolerances.is_within(ratio):
        replicas = _cap(math.ceil(usage / target))
    # The status reports usage per pod; with no pods upstream's value is undefined: the total.
    per_pod = math.ceil(usage / status_replicas) if status_replicas else usage
    return Proposal(replicas=replicas, usage=per_pod, raw_usage=per_pod)


def object_per_pod_metric_replicas(
    *,
    status_replicas: int,
    target_average_usage: int,
    usage: int,
    tolerances: Tolerances = Tolerances(),
) -> Proposal:
    """`GetObjectPerPodMetricReplicas`: an Object metric with an `AverageValue` target:
    ratio = usage / (target · status.replicas); outside tolerance ⌈usage / target⌉."""
    return _per_pod(
        status_replicas=status_replicas,
        target=target_average_usage,
        usage=usage,
        tolerances=tolerances,
    )


def external_metric_replicas(
    *,
    current_replicas: int,
    target_usage: int,
    values: Sequence[int],
    pods: Sequence[Pod],
    tolerances: Tolerances = Tolerances(),
) -> Proposal | CalcError:
    """`GetExternalMetricReplicas`: an External metric with a `Value` target (Σ of the series)."""
    usage = sum(values)
    replicas = usage_ratio_replica_count(
        current_replicas=current_replicas,
        usage_ratio=usage / target_usage,
        pods=pods,
        tolerances=tolerances,
    )
    if isinstance(replicas, CalcError):
        return replicas
    return Proposal(replicas=replicas, usage=usage, raw_usage=usage)


def external_per_pod_metric_replicas(
    *,
    status_replicas: int,
    target_usage_per_pod: int,
    values: Sequence[int],
    tolerances: Tolerances = Tolerances(),
) -> Proposal:
    """`GetExternalPerPodMetricReplicas`: an External metric with an `AverageValue` target
    (KEDA's default): ratio = Σ / (target · status.replicas); outside tolerance ⌈Σ / target⌉,
    independent of the replica count. `usage` is ⌈Σ / status.replicas⌉, as upstream reports."""
    return _per_pod(
        status_replicas=status_replicas,
        target=target_usage_per_pod,
        usage=sum(values),
        tolerances=tolerances,
    )
