"""The percentage-based saturation analyzer (WVA V1), llmscaler's default analysis path.

Why: `saturation-percentage-based` was WVA's default analyzer until v0.9.0 (llm-d
workload-variant-autoscaler, internal/saturationv1/analyzer.go), and it stays the default here;
users coming from WVA expect its exact ±1-replica-per-cycle behaviour. This module reproduces it:

- `analyze` classifies each engine instance as saturated (`kv >= T_kv` or `int(queue) >= T_q`),
  averages the spare KV and spare queue over the non-saturated instances only (0 when there are
  none), fires scale-up when either average is strictly below its trigger, and approves a
  scale-down when an N/(N-1) redistribution of the non-saturated load (N >= 2) still leaves both
  spares at or above their triggers.
- `calculate_targets` turns one role group's analysis into targets: the whole group is frozen
  while any variant is in transition; otherwise the cheapest variant gets +1 on scale-up, or the
  most expensive variant above 1 replica gets -1 when scale-down is safe, then bounds apply.
- `decide_percentage` runs both per P/D role group (`both` < `decode` < `prefill`).

Deliberate deviation from upstream (a defect fix): WVA never sees a variant at 0 replicas
(its engine lists only "active" scale targets), so a cheaper sibling at 0 can never be chosen for
scale-up. Here every variant of the role group is a candidate, including one at 0 replicas.
As a consequence the bounds also apply to such a variant (a variant at 0 with `min_replicas` 1
is raised to 1), which keeps every target inside [min, max] as the safety rules require.

A second defect fix: upstream gives the +1 to the cheapest variant and only then clamps, so once
the cheapest variant is at its `maxReplicas` a saturated model never grows again. Here a variant
at its maximum is not a candidate, and the +1 goes to the next cheapest.

Bad input:
- The engine hands over only replicas whose figures are present and in range (`analyze.validity`:
  any other replica makes the model hold). Called directly, a replica whose `kv_usage` or
  `queue_length` is None, NaN, ±Inf or negative is treated as absent and excluded from the
  analysis altogether (it is neither saturated nor spare, and it does not count
  in the per-variant KV mean); `PercentageAnalysis.excluded_count` says how many were dropped.
  Upstream reads a missing series as 0, which looks like an idle replica and could approve an
  unsafe scale-down; dropping it cannot.
- A role group with no usable replica at all gets no decision: every target holds at the last
  desired value when it is positive, else at the current count (the WVA engine's safety net),
  with reason `no-metrics`.
- Negative `current_replicas`/`pending_replicas` read as 0; a negative desired count reads as
  "not set"; a NaN or infinite cost sorts as the most expensive (never picked for scale-up
  ahead of a finite cost, picked first for scale-down).
- Thresholds come from the validated configuration and are used as they are.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from llmscaler.analyze import finite_sums
from llmscaler.config.resolved import SaturationConfig
from llmscaler.domain.basics import ROLES, Role
from llmscaler.domain.signals import VariantTarget
from llmscaler.domain.snapshot import ReplicaMetrics, Variant

MIN_NON_SATURATED_FOR_SCALE_DOWN = 2
"""WVA's `MinNonSaturatedReplicasForScaleDown`: with fewer, no redistribution is simulated."""

REASON_NORMAL = 'saturation-only mode'
REASON_TRANSITION = 'in-transition'
REASON_NO_METRICS = 'no-metrics'


@dataclass(frozen=True, slots=True)
class PercentageAnalysis:
    """The V1 analysis of one role group of one model.

    `avg_kv_usage` is the mean KV usage of every usable replica of a variant, saturated ones
    included (it feeds the utilisation gauge), as `(variant name, mean)` sorted by name.
    """

    non_saturated_count: int
    saturated_count: int
    avg_spare_kv: float
    avg_spare_queue: float
    scale_up: bool
    scale_down_safe: bool
    avg_kv_usage: tuple[tuple[str, float], ...] = ()
    excluded_count: int = 0

    @property
    def analyzed_count(self) -> int:
        """Replicas that entered the analysis (saturated or not)."""
        return self.non_saturated_count + self.saturated_count


def _reading(value: float | None) -> float | None:
    if value is None or not math.isfinite(value) or value < 0:
        return None
    return value


def analyze(*, replicas: Sequence[ReplicaMetrics], config: SaturationConfig) -> PercentageAnalysis:
    """Classify the replicas of one role group and derive the scale-up / scale-down signals."""
    t_kv = config.kv_cache_threshold
    t_q = config.queue_length_threshold
    spare_kv: list[float] = []
    spare_queue: list[float] = []
    saturated = 0
    excluded = 0
    kv_by_variant: dict[str, list[float]] = {}
    for replica in replicas:
        kv = _reading(replica.kv_usage)
        raw_queue = _reading(replica.queue_length)
        if kv is None or raw_queue is None:
            excluded += 1
            continue
        # WVA carries the queue length as an integer; a fractional peak is truncated.
        queue = int(raw_queue)
        kv_by_variant.setdefault(replica.variant, []).append(kv)
        if kv >= t_kv or queue >= t_q:
            saturated += 1
        else:
            spare_kv.append(t_kv - kv)
            spare_queue.append(t_q - queue)

    count = len(spare_kv)
    # One plain mean over all non-saturated replicas: equal to WVA's per-variant weighted mean,
    # exact (fsum), so independent of replica order down to the last bit, and never overflowing
    # (a queue threshold near the float maximum would overflow a plain sum of spares).
    avg_spare_kv = finite_sums.mean(spare_kv)
    avg_spare_queue = finite_sums.mean(spare_queue)
    if count + saturated == 0:
        scale_up = False
    else:
        scale_up = (
            avg_spare_kv < config.kv_spare_trigger or avg_spare_queue < config.queue_spare_trigger
        )
    return PercentageAnalysis(
        non_saturated_count=count,
        saturated_count=saturated,
        avg_spare_kv=avg_spare_kv,
        avg_spare_queue=avg_spare_queue,
        scale_up=scale_up,
        scale_down_safe=_scale_down_safe(
            count=count, avg_spare_kv=avg_spare_kv, avg_spare_queue=avg_spare_queue, config=config
        ),
        avg_kv_usage=tuple(
            (name, finite_sums.mean(values)) for name, values in sorted(kv_by_variant.items())
        ),
        excluded_count=excluded,
    )


def _scale_down_safe(
    *, count: int, avg_spare_kv: float, avg_spare_queue: float, config: SaturationConfig
) -> bool:
    # Saturated replicas take no part: V1 only asks whether the non-saturated ones could absorb
    # one replica's share. The operation order follows WVA so the float results match.
    if count < MIN_NON_SATURATED_FOR_SCALE_DOWN:
        return False
    load_kv = config.kv_cache_threshold - avg_spare_kv
    load_queue = config.queue_length_threshold - avg_spare_queue
    factor = count / (count - 1)
    remaining_kv = config.kv_cache_threshold - load_kv * factor
    remaining_queue = config.queue_length_threshold - load_queue * factor
    return remaining_kv >= config.kv_spare_trigger and remaining_queue >= config.queue_spare_trigger


def _cost_key(cost: float) -> float:
    return cost if math.isfinite(cost) else math.inf


def _desired_of(variant: Variant, desired: Mapping[str, int]) -> int | None:
    value = desired.get(variant.name)
    if value is None or value < 0:
        return None
    return value


def _transitioning(variant: Variant, desired: Mapping[str, int]) -> bool:
    wanted = _desired_of(variant, desired)
    current = max(0, variant.current_replicas)
    return (wanted is not None and wanted != 0 and wanted != current) or (
        variant.pending_replicas > 0
    )


def _clamp(*, target: int, variant: Variant) -> int:
    # WVA's quirk, kept: the max check compares the target as it was *before* the min check.
    # With min <= max the order is irrelevant. With inverted bounds (min > max) a target below
    # min ends at min, i.e. above max, while a target between max and min ends at max.
    # A max_replicas <= 0 means "no upper bound", as WVA drops a non-positive maxReplicas.
    result = target
    if target < variant.min_replicas:
        result = variant.min_replicas
    if variant.max_replicas > 0 and target > variant.max_replicas:
        result = variant.max_replicas
    return result


def _figures(*, analysis: PercentageAnalysis, variant: str) -> tuple[tuple[str, float], ...]:
    figures: list[tuple[str, float]] = [
        ('avg_spare_kv', analysis.avg_spare_kv),
        ('avg_spare_queue', analysis.avg_spare_queue),
        ('non_saturated', float(analysis.non_saturated_count)),
        ('saturated', float(analysis.saturated_count)),
    ]
    for name, usage in analysis.avg_kv_usage:
        if name == variant:
            figures.append(('avg_kv_usage', usage))
    return tuple(sorted(figures))


def calculate_targets(
    *, variants: Sequence[Variant], analysis: PercentageAnalysis, desired: Mapping[str, int]
) -> tuple[VariantTarget, ...]:
    """Targets of one role group from its analysis (WVA's `CalculateSaturationTargets`).

    `desired` maps variant name to the last desired count; a missing name means none.
    """
    ordered = sorted(variants, key=lambda v: v.name)

    def make(variant: Variant, target: int, reason: str) -> VariantTarget:
        return VariantTarget(
            variant=variant.name,
            target=target,
            reason=reason,
            figures=_figures(analysis=analysis, variant=variant.name),
        )

    if analysis.analyzed_count == 0:
        held = []
        for variant in ordered:
            wanted = _desired_of(variant, desired)
            hold = wanted if wanted else max(0, variant.current_replicas)
            held.append(make(variant, hold, REASON_NO_METRICS))
        return tuple(held)

    if any(_transitioning(v, desired) for v in ordered):
        # The whole group freezes (no bounds either, as in WVA's early return): while pods
        # start or a previous decision is still being applied, the metrics describe a fleet
        # that is about to change.
        frozen = []
        for variant in ordered:
            wanted = _desired_of(variant, desired)
            current = max(0, variant.current_replicas)
            target = wanted if wanted and wanted != current else current
            frozen.append(make(variant, target, REASON_TRANSITION))
        return tuple(frozen)

    targets = {v.name: max(0, v.current_replicas) for v in ordered}
    if analysis.scale_up:
        # Upstream skips pending variants here too; unreachable after the transition check,
        # kept so the rule reads as WVA's.
        # A variant already at its maximum cannot take the +1 (the clamp would undo it, and the
        # model would stay saturated for good): the next cheapest one gets it.
        candidates = [
            v for v in ordered if v.pending_replicas <= 0 and not _at_max(targets[v.name], v)
        ]
        if candidates:
            cheapest = min(candidates, key=lambda v: (_cost_key(v.cost), v.name))
            targets[cheapest.name] += 1
    elif analysis.scale_down_safe:
        candidates = [v for v in ordered if targets[v.name] > 1]
        if candidates:
            priciest = max(candidates, key=lambda v: (_cost_key(v.cost), v.name))
            targets[priciest.name] -= 1

    return tuple(make(v, _clamp(target=targets[v.name], variant=v), REASON_NORMAL) for v in ordered)


def _at_max(target: int, variant: Variant) -> bool:
    return variant.max_replicas > 0 and target >= variant.max_replicas


def _role_of(variant: Variant) -> Role:
    return variant.role if variant.role in ROLES else 'both'


def decide_percentage(
    *,
    variants: Sequence[Variant],
    replicas: Sequence[ReplicaMetrics],
    config: SaturationConfig,
    desired: Mapping[str, int],
) -> tuple[VariantTarget, ...]:
    """Run V1 separately for each P/D role group of one model; targets sorted by variant name.

    Replicas are attributed to a role group by their `variant` name; replicas of variants not
    listed are ignored. An unknown role counts as `both`, as WVA's role label parsing does.
    """
    results: list[VariantTarget] = []
    for role in ROLES:
        group = [v for v in variants if _role_of(v) == role]
        if not group:
            continue
        names = {v.name for v in group}
        analysis = analyze(replicas=[r for r in replicas if r.variant in names], config=config)
        results.extend(calculate_targets(variants=group, analysis=analysis, desired=desired))
    return tuple(sorted(results, key=lambda t: t.variant))
