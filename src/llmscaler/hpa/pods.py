"""Which pods the HPA counts: `groupPods` and the pod and sample types the calculator reads.

Why: the ready / unready / missing / ignored split decides how an HPA treats pods that are
starting (re-added at 0 on a scale-up, so a pending pod brakes a runaway) and pods without a
sample (at the target on a scale-down, so a silent pod brakes a drop). It is upstream's
`groupPods` of `pkg/controller/podautoscaler/replica_calculator.go`, with the pod and sample types
that the reconcile (`hpa.reconcile`) builds and the calculator (`hpa.replica_calculator`) reads.
Times are seconds on the caller's clock; sample values are milli-units.

What fails: nothing; it classifies whatever it is given.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

CPU_INITIALIZATION_PERIOD = 300.0
"""`--horizontal-pod-autoscaler-cpu-initialization-period` (5 min)."""
DELAY_OF_INITIAL_READINESS_STATUS = 30.0
"""`--horizontal-pod-autoscaler-initial-readiness-delay` (30 s)."""

PodPhase = Literal['Pending', 'Running', 'Succeeded', 'Failed', 'Unknown']


@dataclass(frozen=True, slots=True)
class Pod:
    """What the calculator reads of one pod selected by the scale target's `status.selector`.

    `ready` is the status of the pod's Ready condition (None: the pod has no Ready condition) and
    `ready_transition` its `lastTransitionTime`; `start_time` is `status.startTime` (None when not
    set); `deleting` is "deletionTimestamp is set"; `request` is the pod's request of the metric's
    resource in milli-units, summed over the containers (None: a container has no request).
    """

    name: str
    phase: PodPhase = 'Running'
    ready: bool | None = True
    ready_transition: float = 0.0
    start_time: float | None = 0.0
    deleting: bool = False
    request: int | None = None


@dataclass(frozen=True, slots=True)
class PodMetric:
    """Upstream's `PodMetric`: one pod's sample, value in milli-units, taken at `timestamp`
    over `window` seconds (metrics-server's resource window; custom metrics carry one too)."""

    value: int
    timestamp: float = 0.0
    window: float = 30.0


@dataclass(frozen=True, slots=True)
class PodGroups:
    """`groupPods`' result: the count of ready pods with a metric and the names of the others."""

    ready_count: int
    unready: frozenset[str]
    missing: frozenset[str]
    ignored: frozenset[str]


def group_pods(
    *,
    pods: Sequence[Pod],
    metrics: Mapping[str, PodMetric],
    resource: str,
    now: float,
    cpu_initialization_period: float = CPU_INITIALIZATION_PERIOD,
    delay_of_initial_readiness_status: float = DELAY_OF_INITIAL_READINESS_STATUS,
) -> PodGroups:
    """`groupPods`: ignored (deleting or Failed), unready (Pending; for `cpu` also the readiness
    rules below), missing (no sample), else ready.

    CPU only: a pod with no Ready condition or no start time is unready; within the CPU
    initialization period after its start, it is unready if not Ready or if its sample was
    taken before one metric window had passed since the Ready transition; after that period, it
    is unready only if not Ready and it turned unready within the initial readiness delay of its
    start (it has never been ready). Other metrics count a Running pod with a sample as ready
    whatever its Ready condition (upstream's `rc-pods-unready-not-excluded` cases).
    """
    ready_count = 0
    unready: set[str] = set()
    missing: set[str] = set()
    ignored: set[str] = set()
    for pod in pods:
        if pod.deleting or pod.phase == 'Failed':
            ignored.add(pod.name)
            continue
        if pod.phase == 'Pending':
            unready.add(pod.name)
            continue
        metric = metrics.get(pod.name)
        if metric is None:
            missing.add(pod.name)
            continue
        if resource == 'cpu':
            if pod.ready is None or pod.start_time is None:
                is_unready = True
            elif pod.start_time + cpu_initialization_period > now:
                is_unready = (
                    not pod.ready or metric.timestamp < pod.ready_transition + metric.window
                )
            else:
                is_unready = (
                    not pod.ready
                    and pod.start_time + delay_of_initial_readiness_status > pod.ready_transition
                )
            if is_unready:
                unready.add(pod.name)
                continue
        ready_count += 1
    return PodGroups(
        ready_count=ready_count,
        unready=frozenset(unready),
        missing=frozenset(missing),
        ignored=frozenset(ignored),
    )
