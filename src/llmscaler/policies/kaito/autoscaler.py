"""One decision of a Kaito `LLMAutoScaler`: its realtime and cron scalers, combined and clamped.

Why: the controller (for `LLMAutoScaler` objects) and the simulator (policies `kaito-realtime`
and `kaito-cron`) must run the same code. `engine.decide` serves VariantAutoscalings, whose
decision is per model across variants; an `LLMAutoScaler` scales one target on its own, so it has
this small pure entry point instead, beside the analyzers it wires (`policies.kaito.realtime`,
`policies.kaito.cron`).

How the two scalers combine (Kaito's LLMAutoScaler proposal, kaito-project/kaito,
docs/proposals/20250602-auto-scaler-for-inference-workloads.md, allows either or both on one
object):
- in a minute where a cron policy fires, the cron scaler's answer wins: the schedule says what the
  count must be then (scaling down at night included, which the realtime scaler's "highest of the
  metrics" would otherwise hold back);
- otherwise the realtime scaler's answer; with neither, the current count;
- the result is clamped to [minReplicas, maxReplicas] (a current count outside the bounds, after a
  user changed them, is brought inside, as an HPA does).
The realtime scaler's history is updated every call, whichever scaler decided, so its windows
always hold the recent readings.

Safety (missing metrics never cause a scale-down, docs/decision-core.md): the proposal's own rule
counts a pod without a value as 0 up and High down (`kaito_realtime.average`), which brakes a
scale-down but does not stop one when the other pods are idle enough. So when the adapter says a pod
did not report every metric (`metrics_complete=False`), a realtime scale-down is refused and the
count holds; a scale-up (missing pods at 0) and the cron scaler (no metrics involved) still act. A
metric no pod reported can neither scale up nor down. The adapter reports missing metrics on the
object (`ScalingActive=False`).

Pure: `now` (Unix seconds) and the memory are arguments; nothing raises except ValueError for a
`now` that is not finite.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from llmscaler.policies.kaito.cron import CronRule, calculate_desired_replicas_cron
from llmscaler.policies.kaito.realtime import (
    DEFAULT_SCALE_DOWN,
    DEFAULT_SCALE_UP,
    SCRAPE_INTERVAL_SECONDS,
    History,
    MetricReading,
    Sample,
    ScalerRule,
    calculate_desired_replicas,
)

Scaler = Literal['realtime', 'cron', 'none']


@dataclass(frozen=True, slots=True)
class RealtimeSpec:
    scale_up: ScalerRule = DEFAULT_SCALE_UP
    scale_down: ScalerRule = DEFAULT_SCALE_DOWN


@dataclass(frozen=True, slots=True)
class AutoscalerSpec:
    """What the core needs of an `LLMAutoScaler` spec (the metrics' thresholds come with their
    readings)."""

    min_replicas: int
    max_replicas: int
    realtime: RealtimeSpec | None = None
    cron: tuple[CronRule, ...] | None = None


@dataclass(frozen=True, slots=True)
class AutoscalerDecision:
    desired: int
    scaler: Scaler
    """Which scaler gave `desired` ('none': neither acted, the current count clamped)."""
    reason: str
    history: tuple[tuple[str, tuple[Sample, ...]], ...]
    limited: Literal['', 'min', 'max'] = ''
    """Which bound the answer was clamped to ('' when it was within them)."""


def decide_llmautoscaler(
    *,
    spec: AutoscalerSpec,
    current_replicas: int,
    readings: Sequence[MetricReading],
    history: History,
    last_scale_time: float | None,
    now: float,
    metrics_complete: bool = True,
    interval: float = SCRAPE_INTERVAL_SECONDS,
) -> AutoscalerDecision:
    """The desired replicas of one `LLMAutoScaler` at `now` (see the module docstring)."""
    if not math.isfinite(now):
        raise ValueError(f'now must be a finite number of seconds, got {now!r}')
    scaler: Scaler = 'none'
    desired = current_replicas
    reasons: list[str] = []
    kept = tuple(sorted(history.items()))
    if spec.realtime is not None:
        realtime = calculate_desired_replicas(
            current_replicas=current_replicas,
            metrics=readings,
            min_replicas=spec.min_replicas,
            max_replicas=spec.max_replicas,
            scale_up=spec.realtime.scale_up,
            scale_down=spec.realtime.scale_down,
            last_scale_time=last_scale_time,
            history=history,
            now=now,
            interval=interval,
        )
        kept = realtime.history
        reasons.extend(realtime.reasons)
        if realtime.desired < current_replicas and not metrics_complete:
            reasons.append('a pod did not report every metric: no scale-down')
        elif realtime.desired != current_replicas:
            scaler, desired = 'realtime', realtime.desired
    if spec.cron:
        cron = calculate_desired_replicas_cron(
            current_replicas=current_replicas,
            policies=spec.cron,
            min_replicas=spec.min_replicas,
            max_replicas=spec.max_replicas,
            now=now,
        )
        if cron.matching:
            scaler, desired = 'cron', cron.desired
            reasons = [f'cron {", ".join(cron.matching)}: {cron.desired}']
    clamped = min(max(desired, spec.min_replicas), spec.max_replicas)
    limited: Literal['', 'min', 'max'] = ''
    if clamped != desired:
        reasons.append(f'clamped to [{spec.min_replicas}, {spec.max_replicas}]')
        limited = 'max' if clamped < desired else 'min'
    return AutoscalerDecision(
        desired=clamped, scaler=scaler, reason='; '.join(reasons), history=kept, limited=limited
    )
