"""The multi-analyzer ballot: liveness, the binding anchor, and the any-up / all-down helpers.

Why: several analyzers may look at one model (token saturation, throughput, the SLO model, ...) in
different units. WVA combines them per model in a ballot (llm-d workload-variant-autoscaler v0.9.0,
internal/engines/saturation/engine_v2.go):

- An analyzer is *live* when its last informative result is no older than 3 × the cycle
  interval (`is_live`); a non-positive interval is taken as 30 s, as WVA does.
- The *anchor* supplies the variants and their per-replica capacities: the saturation analyzer
  (name starting with `saturation`) when it votes, is live and informative; otherwise the single
  voting, live, informative non-saturation analyzer. With none, or with two candidates of equal
  standing, the model is held (`Hold`), never guessed.
- Every voting analyzer contributes an `AnalyzerSignal` (thresholds post-step applied), live or
  not, so its figures stay visible. The optimizer combines them per role:
  scale-up is any-up, `max_i ⌈RC_i / PRC_i⌉` (`needed_replicas`); scale-down is all-down,
  every live analyzer must report SC > 0 and the count removed is `min_i ⌊SC_i / PRC_i⌋`
  (`removable_replicas`).

Choices where WVA's behaviour leaves room:
- Non-live analyzers take no part in scale-up either: their RC was computed from stale data.
  (WVA's own pipeline drops non-live entries from the voting set for the same reason.)
- An analyzer that cannot price a variant (PRC <= 0) abstains on that variant's magnitude;
  but a live analyzer that reports SC <= 0 for the role vetoes scale-down of the whole role
  whether or not it can price the variant, since its objection is about the role, not the
  variant. A live analyzer without an entry for the role abstains.
- Scores are not used as weights here: with WVA's uniform default scores its weighted combine
  reduces to the plain max / min used below.

Bad input: a NaN or infinite RC or PRC, or a ratio that overflows, is skipped like a missing
figure; a NaN SC is a veto (it proves no spare) and an infinite SC abstains on the magnitude.
A NaN or infinite `now`/`last_informative` is not live. A NaN or infinite priority becomes 1.0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from llmscaler.domain.basics import Role
from llmscaler.domain.signals import AnalyzerResult, AnalyzerSignal, ScalingRequest
from llmscaler.policies.wva import thresholds

LIVENESS_INTERVALS = 3
"""An analyzer stays live for this many cycle intervals after its last informative result."""

DEFAULT_INTERVAL = 30.0
"""The interval WVA assumes when the configured one is not positive."""

SATURATION_PREFIX = 'saturation'

HOLD_NO_LIVE = 'NoLiveAnalyzer'
HOLD_AMBIGUOUS = 'AmbiguousAnchor'


def is_live(*, last_informative: float | None, now: float, interval: float) -> bool:
    """True when the last informative result is at most `LIVENESS_INTERVALS × interval` old."""
    if last_informative is None or not math.isfinite(last_informative):
        return False
    if not math.isfinite(now):
        return False
    if not math.isfinite(interval) or interval <= 0:
        interval = DEFAULT_INTERVAL
    return now - last_informative <= LIVENESS_INTERVALS * interval


@dataclass(frozen=True, slots=True)
class Vote:
    """One analyzer's result for one model, with whether it votes and whether it is live."""

    result: AnalyzerResult
    voting: bool
    live: bool


@dataclass(frozen=True, slots=True)
class Hold:
    """No scaling request for this model this cycle; `reason` is a CamelCase condition reason."""

    reason: str
    message: str


def _is_saturation(name: str) -> bool:
    return name.startswith(SATURATION_PREFIX)


def _qualifies(vote: Vote) -> bool:
    return vote.voting and vote.live and vote.result.informative


def _names(votes: Sequence[Vote]) -> str:
    return ', '.join(sorted(v.result.analyzer for v in votes))


def _anchor(*, model: str, votes: Sequence[Vote]) -> Vote | Hold:
    saturation = [v for v in votes if _is_saturation(v.result.analyzer) and _qualifies(v)]
    if len(saturation) == 1:
        return saturation[0]
    if len(saturation) > 1:
        return Hold(
            reason=HOLD_AMBIGUOUS,
            message=f'{model}: several saturation analyzers could anchor ({_names(saturation)})',
        )
    others = [v for v in votes if not _is_saturation(v.result.analyzer) and _qualifies(v)]
    if len(others) == 1:
        return others[0]
    if len(others) > 1:
        return Hold(
            reason=HOLD_AMBIGUOUS,
            message=f'{model}: several non-saturation analyzers could anchor ({_names(others)})',
        )
    return Hold(
        reason=HOLD_NO_LIVE,
        message=f'{model}: no voting analyzer is live with an informative result',
    )


def cast(
    *, model_id: str, namespace: str, votes: Sequence[Vote], priority: float
) -> ScalingRequest | Hold:
    """Build the optimizer's request for one model from its analyzers' votes, or hold it."""
    anchor = _anchor(model=f'{namespace}/{model_id}', votes=votes)
    if isinstance(anchor, Hold):
        return anchor
    voting = sorted((v for v in votes if v.voting), key=lambda v: v.result.analyzer)
    return ScalingRequest(
        model_id=model_id,
        namespace=namespace,
        variants=tuple(sorted(anchor.result.variants, key=lambda v: v.variant)),
        signals=tuple(thresholds.signal(result=v.result, live=v.live) for v in voting),
        priority=priority if math.isfinite(priority) else 1.0,
    )


def _ratio(numerator: float, denominator: float) -> float | None:
    if not math.isfinite(numerator) or not math.isfinite(denominator) or denominator <= 0:
        return None
    value = numerator / denominator
    return value if math.isfinite(value) else None


def needed_replicas(*, signals: Sequence[AnalyzerSignal], role: Role, variant: str) -> int:
    """Any-up: the largest ⌈RC_i / PRC_i⌉ over live signals that can price `variant`; 0 if none."""
    needed = 0
    for entry in signals:
        scope = entry.role(role)
        if not entry.live or scope is None:
            continue
        ratio = _ratio(scope.required, entry.capacity_of(variant))
        if ratio is None:
            continue
        needed = max(needed, math.ceil(ratio))
    return needed


def removable_replicas(*, signals: Sequence[AnalyzerSignal], role: Role, variant: str) -> int:
    """All-down: min ⌊SC_i / PRC_i⌋ over live signals; 0 on any live veto or with none."""
    counts: list[int] = []
    for entry in signals:
        scope = entry.role(role)
        if not entry.live or scope is None:
            continue
        if not scope.spare > 0:
            # A live objection to the role blocks removal even if this analyzer cannot price
            # the variant (NaN spare counts as an objection: no proof of spare).
            return 0
        ratio = _ratio(scope.spare, entry.capacity_of(variant))
        if ratio is None:
            continue
        counts.append(math.floor(ratio))
    if not counts:
        return 0
    return max(0, min(counts))
