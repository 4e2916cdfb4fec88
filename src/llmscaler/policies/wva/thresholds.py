"""The universal threshold post-step: required and spare capacity of every analyzer result.

Why: WVA applies one rule after *every* analyzer, whatever its unit (llm-d
workload-variant-autoscaler v0.9.0, internal/engines/saturation/), so that analyzers only report
supply and demand and never decide on their own when to scale:

    RC = max(0, demand / scaleUpThreshold − anticipatedSupply)
    SC = max(0, supply − demand / scaleDownBoundary)

Pending replicas are part of the anticipated supply, so they count against RC (no double
scale-up while pods start) but not in SC (a pod that is not ready cannot be removed as spare).
With 0.85 / 0.70 a utilisation in [0.70, 0.85] gives RC = SC = 0: the hysteresis band.

`signal` applies both formulas with the result's own thresholds, at model scope for a model
without P/D roles (one `both` entry from the model totals) and per role otherwise.

Bad input: a non-positive or NaN threshold makes the formula return 0, as WVA's does (main at
b08b1c7, internal/engines/analyzers/saturation_v2/analyzer.go: RC and SC start at 0 and are
computed only for a threshold > 0). An infinite threshold also gives 0 here, where WVA's
formula gives RC = 0 and SC = the whole supply (demand / ∞ = 0): a deviation
(docs/decision-core.md), not reachable from a ConfigMap, which keeps both in (0, 1].
A NaN, infinite or negative demand or supply, or a result that overflows to infinity, also
gives 0: bad data never asks for capacity and never frees any. A per-replica capacity that is
NaN, infinite or negative is reported as 0, which the optimizer reads as "cannot price".
"""

from __future__ import annotations

import math

from llmscaler.domain.basics import Role, positive_or_zero
from llmscaler.domain.signals import AnalyzerResult, AnalyzerSignal, RoleSignal, Totals


def _usable(*values: float) -> bool:
    return all(math.isfinite(value) and value >= 0 for value in values)


def _threshold_ok(threshold: float) -> bool:
    return math.isfinite(threshold) and threshold > 0


def _bounded(value: float) -> float:
    if not math.isfinite(value):
        return 0.0
    return max(0.0, value)


def required_capacity(
    *, demand: float, anticipated_supply: float, scale_up_threshold: float
) -> float:
    """RC = max(0, demand / scale_up_threshold − anticipated_supply); 0 on bad input."""
    if not _threshold_ok(scale_up_threshold) or not _usable(demand, anticipated_supply):
        return 0.0
    return _bounded(demand / scale_up_threshold - anticipated_supply)


def spare_capacity(*, demand: float, supply: float, scale_down_boundary: float) -> float:
    """SC = max(0, supply − demand / scale_down_boundary); 0 on bad input."""
    if not _threshold_ok(scale_down_boundary) or not _usable(demand, supply):
        return 0.0
    return _bounded(supply - demand / scale_down_boundary)


def _role_signal(*, role: Role, totals: Totals, result: AnalyzerResult) -> RoleSignal:
    return RoleSignal(
        role=role,
        required=required_capacity(
            demand=totals.demand,
            anticipated_supply=totals.anticipated_supply,
            scale_up_threshold=result.scale_up_threshold,
        ),
        spare=spare_capacity(
            demand=totals.demand,
            supply=totals.supply,
            scale_down_boundary=result.scale_down_boundary,
        ),
    )


def signal(*, result: AnalyzerResult, live: bool) -> AnalyzerSignal:
    """The analyzer's demand on the optimizer: RC/SC per scope and per-replica capacities."""
    if result.roles:
        roles = tuple(
            _role_signal(role=role, totals=totals, result=result)
            for role, totals in sorted(result.roles, key=lambda item: item[0])
        )
    else:
        roles = (_role_signal(role='both', totals=result.totals, result=result),)
    capacity = tuple(
        sorted(
            ((v.variant, positive_or_zero(v.per_replica_capacity)) for v in result.variants),
            key=lambda item: (item[0], item[1]),
        )
    )
    return AnalyzerSignal(
        analyzer=result.analyzer,
        live=live,
        score=result.score,
        roles=roles,
        capacity=capacity,
    )
