"""Hybrid arbitration between the capacity (saturation) target and the model-based target.

Why: the WVA design paper (*Workload Variant Autoscaler: A Performance-Model-Based Approach to AI
Inference Autoscaling*, §4.3 "Hybrid Decision Architecture") and WVA v0.4.2
(`EXPERIMENTAL_HYBRID_OPTIMIZATION=on`, `internal/capacity/analyzer.go`) combine the reactive
saturation analyzer with the queueing-model analyzer so that a model that looks cheap to shrink on
paper is never shrunk while the live metrics say it is saturated. Per variant, with the actions read
against the current replica count, the first matching row wins:

- capacity up, model down: no change, *capacity veto* (safety_override, capacity_based,
  model_based);
- model down while the capacity analysis says scale-down is unsafe: no change, *safety block*
  (the same three flags);
- capacity up, model no change: the capacity target (capacity_based);
- model up, or (safe) down: the model target (model_based);
- otherwise no change (no flag).

Units: replica counts (scale-target replicas). `scale_down_safe` is the capacity analysis'
verdict for the model (V1's N/(N−1) redistribution test); None means there was no capacity
analysis (WVA's nil analysis), which does not block.

What fails: nothing; every input combination maps to one row.
"""

from __future__ import annotations

from dataclasses import dataclass

from llmscaler.domain.basics import Action
from llmscaler.domain.snapshot import action_for


@dataclass(frozen=True, slots=True)
class Arbitrated:
    """WVA's `VariantDecision` fields the arbitration sets."""

    target: int
    action: Action
    reason: str
    safety_override: bool
    capacity_based: bool
    model_based: bool


def arbitrate(
    *, current: int, capacity_target: int, model_target: int, scale_down_safe: bool | None
) -> Arbitrated:
    """One variant's hybrid decision (WVA `arbitrateVariant`)."""
    capacity = action_for(current=current, target=capacity_target)
    model = action_for(current=current, target=model_target)
    if capacity is Action.SCALE_UP and model is Action.SCALE_DOWN:
        return Arbitrated(
            target=current,
            action=Action.NO_CHANGE,
            reason=(
                f'capacity veto: capacity needs scale-up '
                f'(capacity={capacity_target}, model-based={model_target})'
            ),
            safety_override=True,
            capacity_based=True,
            model_based=True,
        )
    if model is Action.SCALE_DOWN and scale_down_safe is False:
        return Arbitrated(
            target=current,
            action=Action.NO_CHANGE,
            reason=f'capacity safety block: scale-down unsafe (model-based wants {model_target})',
            safety_override=True,
            capacity_based=True,
            model_based=True,
        )
    if capacity is Action.SCALE_UP and model is Action.NO_CHANGE:
        return Arbitrated(
            target=capacity_target,
            action=Action.SCALE_UP,
            reason=f'capacity-driven scale-up to {capacity_target}',
            safety_override=False,
            capacity_based=True,
            model_based=False,
        )
    if model in (Action.SCALE_UP, Action.SCALE_DOWN):
        return Arbitrated(
            target=model_target,
            action=model,
            reason=(
                f'model-based recommendation: {model.value} to {model_target} (capacity allows)'
            ),
            safety_override=False,
            capacity_based=False,
            model_based=True,
        )
    return Arbitrated(
        target=current,
        action=Action.NO_CHANGE,
        reason='no action needed',
        safety_override=False,
        capacity_based=False,
        model_based=False,
    )
