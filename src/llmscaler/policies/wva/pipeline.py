"""From a token-based analysis to targets: the threshold post-step, the ballot and the optimizer.

Why: the token-based analyzer (WVA V2) yields capacities, not targets. The steps after it — analyzer
overrides from the `analyzers:` list, liveness, the ballot, the threshold post-step and the
cost-aware optimizer (docs/decision-core.md; WVA v0.9.0, internal/engines/saturation/engine_v2.go
and internal/engines/pipeline/cost_aware_optimizer.go) — are one path that `engine.decide()` runs
per model; kept here, the engine only wires stages.

What it computes (`token_targets`), for one model:

- the saturation entry of `analyzers:` (first enabled one whose name starts with `saturation`)
  overrides the result's `scaleUpThreshold`, `scaleDownBoundary` and score;
- liveness: the analyzer is live when its last informative result (this one, when informative)
  is at most three intervals old (`ballot.is_live`);
- the ballot names the analyzer to trust; without one every variant holds at
  max(current, last desired) (a hold never lowers a target), with the ballot's reason;
- otherwise the cost-aware optimizer turns the required/spare capacities into targets.

The figures (`required_<role>`, `spare_<role>`) are returned in either case. It is pure: the
caller keeps the memory and passes `last_informative`; `TokenTargets.informative_at` says what
to remember.

What fails: nothing raises for finite inputs; targets are not yet bounded (the engine clamps).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from llmscaler.config.resolved import ModelConfig
from llmscaler.domain.signals import AnalyzerResult, ScalingRequest, VariantTarget
from llmscaler.domain.snapshot import Variant
from llmscaler.optimize import cost_aware
from llmscaler.policies.wva import ballot, thresholds


@dataclass(frozen=True, slots=True)
class TokenTargets:
    """The targets of one model, its figures, and the time to remember as its last informative
    result (None: keep what was remembered)."""

    targets: tuple[VariantTarget, ...]
    figures: tuple[tuple[str, float], ...]
    informative_at: float | None


def token_targets(
    *,
    result: AnalyzerResult,
    variants: Sequence[Variant],
    model_config: ModelConfig,
    last_informative: float | None,
    interval: float,
    desired: Mapping[str, int],
    now: float,
) -> TokenTargets:
    """Threshold post-step, ballot and cost-aware optimizer for one token-based analysis."""
    saturation = model_config.saturation
    result = _with_analyzer_overrides(result=result, model_config=model_config)
    informative_at = now if result.informative else None
    live = ballot.is_live(
        last_informative=informative_at if informative_at is not None else last_informative,
        now=now,
        interval=interval,
    )
    variant = variants[0]
    verdict = ballot.cast(
        model_id=variant.model_id,
        namespace=variant.namespace,
        votes=[ballot.Vote(result=result, voting=_saturation_votes(model_config), live=live)],
        priority=saturation.priority,
    )
    # One vote: when it counted, the request carries its signal already.
    signal = (
        verdict.signals[0]
        if isinstance(verdict, ScalingRequest) and verdict.signals
        else thresholds.signal(result=result, live=live)
    )
    figures = tuple(
        (f'{name}_{s.role}', value)
        for s in signal.roles
        for name, value in (('required', s.required), ('spare', s.spare))
    )
    if isinstance(verdict, ballot.Hold):
        held = tuple(
            VariantTarget(
                variant=v.name,
                target=max(v.current_replicas, desired.get(v.name, 0)),
                reason=f'hold: {verdict.reason}: {verdict.message}',
            )
            for v in variants
        )
        return TokenTargets(targets=held, figures=figures, informative_at=informative_at)
    return TokenTargets(
        targets=cost_aware.optimize(request=verdict),
        figures=figures,
        informative_at=informative_at,
    )


def _saturation_votes(model_config: ModelConfig) -> bool:
    """As in WVA's ballot: saturation votes when `analyzers:` is empty or lists it without
    `enabled: false`."""
    specs = model_config.saturation.analyzers
    if not specs:
        return True
    return any(s.name.startswith('saturation') and s.enabled for s in specs)


def _with_analyzer_overrides(
    *, result: AnalyzerResult, model_config: ModelConfig
) -> AnalyzerResult:
    """Apply `analyzers[].scaleUpThreshold/scaleDownBoundary/score` of the saturation entry."""
    for spec in model_config.saturation.analyzers:
        if spec.name.startswith('saturation') and spec.enabled:
            return dataclasses.replace(
                result,
                scale_up_threshold=spec.scale_up_threshold or result.scale_up_threshold,
                scale_down_boundary=spec.scale_down_boundary or result.scale_down_boundary,
                score=spec.score,
            )
    return result
