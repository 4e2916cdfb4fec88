"""The cost-aware optimizer: WVA's unlimited-mode variant picker.

Source: llm-d workload-variant-autoscaler v0.9.0, internal/engines/pipeline/cost_aware_optimizer.go.

Why: analyzers say how much capacity a model needs or can give back, per P/D role, in their own
units; somebody has to turn that into replica counts per variant, preferring cheap capacity on
the way up and shedding expensive capacity on the way down. This module does that for one model.

What it computes (`optimize`), starting from every variant's `current_replicas`:

- Only *live* signals take part. Mode per model: if any role still has required capacity
  (RC > 0 on any live signal) the model only scales up this cycle; otherwise it only scales
  down. P/D roles therefore never move in opposite directions in one cycle.
- Scale-up, joint commit across roles, repeated while any role has demand:
  1. per role with demand, pick the variant with the lowest cost / PRC (anchor PRC); variants
     with PRC <= 0 or at `max_replicas` are skipped, pending replicas are not a reason to skip
     (RC already nets anticipated supply); if a role with demand has no eligible variant, stop;
  2. `n_role = min(max_i ⌈rem_i / PRC_i⌉, max_replicas − target)` over live signals that carry
     the role and can price the pick (PRC_i > 0);
  3. `util_role = n_role · PRC / demand_role` (1 for a role without demand), `Δ = min util`,
     stop when Δ <= 0;
  4. `k_role = max(⌊Δ · demand_role / PRC⌋, min(1, n_role))` (0 without demand), add it to the
     target and subtract `k · PRC_i` from every signal's remaining demand for the role.
  `demand_role` and `PRC` in steps 3-4 are those of the signal that set the maximum in step 2,
  so demand and capacity are always in one analyzer's unit (WVA refreshes its anchor sizing to
  that same signal). A model without roles reduces to: add ⌈RC/PRC⌉ replicas to the most
  efficient variant, spill to the next one at `max_replicas`, until RC is covered.
- Scale-down, per role, only when every live signal that carries the role reports spare > 0
  (and at least one does): variants by cost descending, then score-weighted PRC ascending
  (Σ over live signals of score_i · PRC_i; a score that is not a positive number counts as 1),
  then name. For each variant with PRC > 0: `removable = target − min_replicas`,
  `n = min(min_i ⌊spare_i / PRC_i⌋, removable)`; the last (cheapest) variant holding replicas
  is kept at 1 when no more expensive variant of the role still holds replicas (variants at
  zero do not count: WVA never sees them, see defect fix 1); commit and subtract `n · PRC_i`
  from every signal's spare. Only whole replicas go, so a spare smaller than one expensive
  replica can remove a cheaper one instead (case ca-09). A role no live signal carries is never
  touched (case ca-14).

Known weakness kept on purpose (it is WVA's behaviour): picking by efficiency can
overpay. With RC = 100, A (cost 10, PRC 200) beats B (cost 6, PRC 100) on cost per unit, so
one A (10) is bought although one B (6) would do (upstream issue #1251).

Upstream defects fixed here:
1. Zero-replica variants are not invisible. A variant with `current_replicas == 0` is eligible
   for scale-up like any other as long as its PRC is positive (it then comes from the capacity
   knowledge kept for idle variants), so a cheaper sibling at zero is woken instead of growing a
   dearer running variant.
2. Orderings are total. Upstream sorts with the unstable `sort.Slice` and no final tie-break,
   so equal cost/PRC picked a variant by input order. Here scale-up orders by cost/PRC, then
   absolute cost, then name; scale-down by cost desc, weighted PRC, then name; signals are
   processed sorted by analyzer name. Shuffling the request gives the same answer.

Choices where WVA's behaviour leaves room: a role without demand needs no eligible variant (WVA
also requires one, which lets a capped decode role block a prefill scale-up that adds no decode
replicas); a live signal without an entry for a role abstains on it, neither constraining nor
vetoing. Rounding tolerates 1e-9 replica of floating-point noise, so 300.00000000000006 / 100
is 3 replicas, not 4.

Bad input: a cost that is not a finite positive number is taken as 10 (the CRD default: the one
cost rule, `domain.snapshot.effective_cost`); a NaN, infinite or non-positive PRC makes a
variant (or a signal's view of it) unpriceable; a NaN, infinite or negative RC is no demand; a
NaN or negative spare is no spare (a veto); an infinite spare vetoes nothing and sets no count
(alone, it removes nothing). A capacity ratio too large to round is capped by the headroom or
the removable count. Negative replica counts are taken as 0; a `max_replicas` below the target
blocks scale-up only. Variant names are assumed unique within a request (one namespace, one
model). Nothing raises.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from llmscaler.analyze import finite_sums
from llmscaler.domain.basics import Role, positive_or_zero
from llmscaler.domain.signals import AnalyzerSignal, ScalingRequest, VariantCapacity, VariantTarget

REASON = 'V2'
_EPSILON = 1e-9
"""Replicas of floating-point noise ignored when rounding a capacity ratio."""
_HUGE = 2**31
"""Stand-in for a replica ratio too large to round; always capped by headroom or removable."""


@dataclass(slots=True)
class _Signal:
    """One live signal's working balances, per role it carries (mutated during one call)."""

    source: AnalyzerSignal
    required: dict[Role, float]
    spare: dict[Role, float]
    prcs: dict[str, float]
    """`positive_or_zero(source.capacity_of(name))` by variant name, read once: loops ask often."""

    def prc(self, variant: str) -> float:
        return self.prcs.get(variant, 0.0)


def _spare(value: float) -> float:
    # NaN or negative proves no spare (a veto); +Inf is kept and vetoes nothing.
    if math.isnan(value) or value < 0:
        return 0.0
    return value


def _score(signal: AnalyzerSignal) -> float:
    score = signal.score
    return score if math.isfinite(score) and score > 0 else 1.0


def replica_ceil(value: float) -> int:
    """⌈value⌉ for a replica count; a ratio that overflowed reads as `_HUGE` (callers cap it)."""
    if math.isnan(value):
        return 0
    if value >= _HUGE:
        return _HUGE
    return max(0, math.ceil(value - _EPSILON))


def replica_floor(value: float) -> int:
    """⌊value⌋ for a replica count; a ratio that overflowed reads as `_HUGE` (callers cap it)."""
    if math.isnan(value):
        return 0
    if value >= _HUGE:
        return _HUGE
    return max(0, math.floor(value + _EPSILON))


def joint_sizes(
    *,
    picks: Mapping[Role, tuple[VariantCapacity, int]],
    binders: Mapping[Role, tuple[float, float]],
    roles: int,
) -> tuple[dict[Role, tuple[int, float, float]], float]:
    """One round of the joint scale-up (WVA's joint P/D commit): each picked variant's count
    n = min(⌈demand / PRC⌉, headroom) for its role's binding (demand, PRC), and δ, the smallest
    share of its demand any role's count covers (1 when some of the `roles` has no pick)."""
    sizes: dict[Role, tuple[int, float, float]] = {}
    delta = 1.0 if len(picks) < roles else math.inf
    for role, (_, headroom) in picks.items():
        demand, prc = binders[role]
        n = min(replica_ceil(demand / prc), headroom) if demand > 0 and prc > 0 else 0
        util = n * prc / demand if demand > 0 else 1.0
        if n > 0 and not util > 0:
            # n·PRC/demand underflowed: still a positive fraction, so the commit happens.
            util = math.ulp(0.0)
        sizes[role] = (n, demand, prc)
        delta = min(delta, util)
    return sizes, delta


def joint_commit(*, n: int, demand: float, prc: float, delta: float) -> int:
    """Replicas a role commits in a round: ⌊δ · demand / PRC⌋, at least one of its n, at most n."""
    return min(max(replica_floor(delta * demand / prc), min(1, n)), n)


def _live_signals(signals: Sequence[AnalyzerSignal]) -> list[_Signal]:
    out: list[_Signal] = []
    for signal in sorted(signals, key=lambda s: s.analyzer):
        if not signal.live:
            continue
        required: dict[Role, float] = {}
        spare: dict[Role, float] = {}
        for scope in signal.roles:
            required[scope.role] = positive_or_zero(scope.required)
            spare[scope.role] = _spare(scope.spare)
        prcs: dict[str, float] = {}
        for name, value in signal.capacity:
            # The first entry of a name is the one `capacity_of` answers with.
            prcs.setdefault(name, positive_or_zero(value))
        out.append(_Signal(source=signal, required=required, spare=spare, prcs=prcs))
    return out


def _roles_of(live: Sequence[_Signal]) -> list[Role]:
    return sorted({role for signal in live for role in signal.required})


def _has_demand(live: Sequence[_Signal], role: Role) -> bool:
    return any(signal.required.get(role, 0.0) > 0 for signal in live)


# ----------------------------------------------------------------------------- scale-up


def _pick(
    candidates: Sequence[VariantCapacity], targets: dict[str, int]
) -> tuple[VariantCapacity, int] | None:
    """The most cost-efficient eligible variant and its headroom, or None."""
    eligible = [
        v
        for v in candidates
        if positive_or_zero(v.per_replica_capacity) > 0 and v.max_replicas - targets[v.variant] > 0
    ]
    if not eligible:
        return None
    best = min(
        eligible,
        key=lambda v: (
            v.effective_cost / positive_or_zero(v.per_replica_capacity),
            v.effective_cost,
            v.variant,
        ),
    )
    return best, best.max_replicas - targets[best.variant]


def _binder(live: Sequence[_Signal], role: Role, variant: str) -> tuple[float, float] | None:
    """(remaining demand, PRC) of the live signal needing the most replicas of `variant`.

    Ties keep the first signal by analyzer name; None when no signal carrying `role` can price
    the variant."""
    best: tuple[float, float] | None = None
    best_ratio = -1.0
    for signal in live:
        if role not in signal.required:
            continue
        prc = signal.prc(variant)
        if prc <= 0:
            continue
        ratio = signal.required[role] / prc
        if ratio > best_ratio:
            best, best_ratio = (signal.required[role], prc), ratio
    return best


def _scale_up(
    *,
    live: list[_Signal],
    by_role: dict[Role, list[VariantCapacity]],
    targets: dict[str, int],
) -> None:
    roles = _roles_of(live)
    while any(_has_demand(live, role) for role in roles):
        picks: dict[Role, tuple[VariantCapacity, int]] = {}
        for role in roles:
            if not _has_demand(live, role):
                continue
            pick = _pick(by_role.get(role, []), targets)
            if pick is None:
                return
            picks[role] = pick

        # A role without demand has utilization 1 by definition (as in WVA's joint commit).
        sizes, delta = joint_sizes(
            picks=picks,
            binders={
                role: _binder(live, role, variant.variant) or (0.0, 0.0)
                for role, (variant, _) in picks.items()
            },
            roles=len(roles),
        )
        if delta <= 0:
            return

        committed = False
        for role, (variant, _) in picks.items():
            n, demand, prc = sizes[role]
            if demand <= 0 or prc <= 0:
                continue
            k = joint_commit(n=n, demand=demand, prc=prc, delta=delta)
            if k <= 0:
                continue
            committed = True
            targets[variant.variant] += k
            for signal in live:
                prc_i = signal.prc(variant.variant)
                if role in signal.required and prc_i > 0:
                    signal.required[role] = max(0.0, signal.required[role] - k * prc_i)
        if not committed:
            return


# --------------------------------------------------------------------------- scale-down


def _down_allowed(live: Sequence[_Signal], role: Role) -> bool:
    """All-down: some live signal carries the role and none of those reports spare <= 0."""
    carrying = [signal.spare[role] for signal in live if role in signal.spare]
    return bool(carrying) and all(spare > 0 for spare in carrying)


def _removable(live: Sequence[_Signal], role: Role, variant: str) -> int:
    """min_i ⌊spare_i / PRC_i⌋ over live signals carrying `role` that can price `variant`."""
    if not _down_allowed(live, role):
        return 0
    counts = [
        replica_floor(signal.spare[role] / signal.prc(variant))
        for signal in live
        if role in signal.spare and signal.prc(variant) > 0 and not math.isinf(signal.spare[role])
    ]
    return min(counts) if counts else 0


def _weighted_prc(live: Sequence[_Signal], variant: str) -> float:
    return finite_sums.total(_score(signal.source) * signal.prc(variant) for signal in live)


def _scale_down(
    *,
    live: list[_Signal],
    by_role: dict[Role, list[VariantCapacity]],
    targets: dict[str, int],
) -> None:
    for role in sorted(by_role):
        if not _down_allowed(live, role):
            continue
        ordered = sorted(
            by_role[role],
            key=lambda v: (-v.effective_cost, _weighted_prc(live, v.variant), v.variant),
        )
        for index, variant in enumerate(ordered):
            if positive_or_zero(variant.per_replica_capacity) <= 0:
                continue
            current = targets[variant.variant]
            removable = current - max(0, variant.min_replicas)
            if removable <= 0:
                continue
            n = min(_removable(live, role, variant.variant), removable)
            # WVA's "last variant" is the cheapest one holding replicas: it never sees a variant
            # at zero. Counting those would let the only running variant go while the
            # minimum-one rule starts a cheaper one: a swap, with no replica in between.
            others_hold = any(targets[v.variant] > 0 for i, v in enumerate(ordered) if i != index)
            if current - n < 1 and not others_hold:
                n = current - 1
            if n <= 0:
                continue
            targets[variant.variant] = current - n
            for signal in live:
                prc_i = signal.prc(variant.variant)
                if role in signal.spare and prc_i > 0:
                    signal.spare[role] = max(0.0, signal.spare[role] - n * prc_i)


# ------------------------------------------------------------------------------ figures


def _reporting_scope(
    ordered: Sequence[AnalyzerSignal], variant: VariantCapacity
) -> tuple[float, float]:
    """(RC, SC) for the variant's role as the anchor saw them, for status and metrics.

    The anchor is the signal that prices the variant at exactly its `per_replica_capacity`;
    failing that the first live signal carrying the role, then any signal carrying it.
    `ordered`: the signals live first, then by analyzer name (`_reporting_order`)."""
    carrying = [s for s in ordered if s.role(variant.role) is not None]
    matching = [
        s for s in carrying if s.capacity_of(variant.variant) == variant.per_replica_capacity
    ]
    for signal in matching + carrying:
        scope = signal.role(variant.role)
        if scope is not None:
            return positive_or_zero(scope.required), _spare(scope.spare)
    return 0.0, 0.0


def _reporting_order(signals: Sequence[AnalyzerSignal]) -> list[AnalyzerSignal]:
    return sorted(signals, key=lambda s: (not s.live, s.analyzer))


def _target(
    *, variant: VariantCapacity, target: int, signals: Sequence[AnalyzerSignal]
) -> VariantTarget:
    """`signals` in `_reporting_order`."""
    current = max(0, variant.current_replicas)
    if target > current:
        reason = f'{REASON} scale-up'
    elif target < current:
        reason = f'{REASON} scale-down'
    else:
        reason = REASON
    required, spare = _reporting_scope(signals, variant)
    utilization = variant.utilization
    figures = (
        ('per_replica_capacity', positive_or_zero(variant.per_replica_capacity)),
        ('required', required if math.isfinite(required) else 0.0),
        ('spare', spare if math.isfinite(spare) else 0.0),
        ('utilization', utilization if math.isfinite(utilization) else 0.0),
    )
    return VariantTarget(variant=variant.variant, target=target, reason=reason, figures=figures)


def optimize(*, request: ScalingRequest) -> tuple[VariantTarget, ...]:
    """One target per variant of the request, sorted by variant name."""
    variants = sorted(request.variants, key=lambda v: v.variant)
    targets = {v.variant: max(0, v.current_replicas) for v in variants}
    by_role: dict[Role, list[VariantCapacity]] = {}
    for variant in variants:
        by_role.setdefault(variant.role, []).append(variant)

    live = _live_signals(request.signals)
    if any(_has_demand(live, role) for role in _roles_of(live)):
        _scale_up(live=live, by_role=by_role, targets=targets)
    else:
        _scale_down(live=live, by_role=by_role, targets=targets)

    ordered = _reporting_order(request.signals)
    return tuple(_target(variant=v, target=targets[v.variant], signals=ordered) for v in variants)
