"""The greedy-by-score optimizer: WVA's limited mode, fair share of GPU budgets between models.

Why: with `enableLimiter: true` the GPUs are finite — a cluster's nodes, a quota — and several
models want more of them at once. Serving them in list order starves whoever comes last; WVA serves
the most starved model first, down toward the mean, then the next (v0.9.0,
internal/engines/pipeline/greedy_score_optimizer.go). This module is that allocation, over every
model's `ScalingRequest` at once, pure.

What it computes (`optimize_limited`), starting from every variant's `current_replicas`:

- Live signals only, as in `cost_aware`. A model whose live signals carry any required
  capacity (RC > 0 on any role) enters the scale-up set; the others go through the cost-aware
  scale-down unchanged (`cost_aware.optimize`; scale-down needs no GPUs).
- Fair-share value of a model: `fsv = priority × Σ_i score_i × Σ_role rem_i[role]` over its
  live signals (priority and score: a value that is not a finite number >= 0 counts as 1); when
  that is 0 (priority or every score 0), the largest remaining demand of any signal and role.
- Iterative mean-based fair share, while some model is active (rem > 0):
  1. `mean` = mean rem over the active models; the top model w has the largest rem (ties: the
     first by namespace, then model id);
  2. `allocMean` = 0 when w is the only active model; `mean − rem_w/|active|` when rem_w <=
     mean; else `mean`;
  3. w's remaining demand per signal and role is capped at `rem_w − allocMean`, and the joint
     commit of `cost_aware` runs on the capped demand, picking per role the cheapest variant by
     cost / PRC (then cost, then name) whose accelerator type still has room for one replica
     (`Ledger.fits`); its count is capped at min(⌈demand / PRC⌉, replicas that fit the budget,
     maxReplicas − target). Committed GPUs are charged to the cluster and namespace budgets;
     every signal's remaining demand drops by k · PRC_i;
  4. w's rem is recomputed; when it did not decrease, or is still above the mean, w leaves the
     active set (at most one round above the mean per model).
  In effect the starved model is served first, down toward the mean (case gs-03: demands
  50k/10k, PRC 15k, room for 4 replicas → +3/+1).
- Each model's result says how much required capacity is left unmet per role (the largest over
  its live signals, in their units): a model with unmet demand was limited.

Units: demands and capacities in each analyzer's own unit (one model's signals share a unit;
models are compared by their rem, as WVA does); budgets in GPUs; targets in scale-target
replicas.

Deterministic: models are taken in (namespace, model_id) order, every tie ends with a name.
Bad input is treated as `cost_aware` treats it (NaN / negative RC is no demand, a PRC that is
not a finite positive number makes a variant unpriceable, a cost that is not a finite positive
number is 10, `domain.snapshot.effective_cost`). Nothing raises.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass

from llmscaler.domain.basics import Role, positive_or_zero
from llmscaler.domain.signals import ScalingRequest, VariantCapacity, VariantTarget
from llmscaler.optimize import cost_aware
from llmscaler.optimize.constraints import Budgets, Ledger

REASON = 'limited'


@dataclass(frozen=True, slots=True)
class LimitedModel:
    """One model's targets after the limited allocation, and the demand left unmet."""

    model_id: str
    namespace: str
    targets: tuple[VariantTarget, ...]
    unmet: tuple[tuple[Role, float], ...]
    """Required capacity per role the allocation could not cover (0 when none was wanted)."""

    @property
    def limited(self) -> bool:
        return any(value > 0 for _, value in self.unmet)


@dataclass(frozen=True, slots=True)
class LimitedOutcome:
    """Every model's result, sorted by (namespace, model_id), and the budgets left."""

    models: tuple[LimitedModel, ...]
    left: Budgets


def _weight(value: float) -> float:
    return value if math.isfinite(value) and value >= 0 else 1.0


@dataclass(slots=True)
class _Model:
    """One scale-up model's working balances (mutated during one call)."""

    request: ScalingRequest
    signals: list[tuple[float, dict[Role, float], dict[str, float]]]
    """Per live signal: (score, remaining demand per role, PRC per variant)."""
    by_role: dict[Role, list[VariantCapacity]]
    targets: dict[str, int]

    def fsv(self) -> float:
        priority = _weight(self.request.priority)
        value = priority * sum(
            score * sum(rem.values()) for score, rem, _ in self.signals if score > 0
        )
        if value > 0 and math.isfinite(value):
            return value
        return max((v for _, rem, _ in self.signals for v in rem.values()), default=0.0)

    def demand(self, role: Role) -> float:
        return max((rem.get(role, 0.0) for _, rem, _ in self.signals), default=0.0)


def _working(request: ScalingRequest) -> _Model:
    signals = []
    for signal in sorted(request.signals, key=lambda s: s.analyzer):
        if not signal.live:
            continue
        rem: dict[Role, float] = {}
        for scope in signal.roles:
            rem[scope.role] = positive_or_zero(scope.required)
        prc = {name: positive_or_zero(value) for name, value in signal.capacity}
        signals.append((_weight(signal.score), rem, prc))
    by_role: dict[Role, list[VariantCapacity]] = {}
    for variant in sorted(request.variants, key=lambda v: v.variant):
        by_role.setdefault(variant.role, []).append(variant)
    return _Model(
        request=request,
        signals=signals,
        by_role=by_role,
        targets={v.variant: max(0, v.current_replicas) for v in request.variants},
    )


def _pick(*, model: _Model, role: Role, ledger: Ledger) -> tuple[VariantCapacity, int] | None:
    """The cheapest-by-efficiency variant of `role` that still fits, and its replica cap."""
    best: tuple[tuple[float, float, str], VariantCapacity, int] | None = None
    for variant in model.by_role.get(role, []):
        prc = positive_or_zero(variant.per_replica_capacity)
        headroom = variant.max_replicas - model.targets[variant.variant]
        if prc <= 0 or headroom <= 0:
            continue
        fit = ledger.fits(
            accelerator=variant.accelerator,
            namespace=variant.namespace,
            gpus=variant.gpus_per_replica,
        )
        cap = headroom if fit is None else min(headroom, fit)
        if cap <= 0:
            continue
        key = (variant.effective_cost / prc, variant.effective_cost, variant.variant)
        if best is None or key < best[0]:
            best = (key, variant, cap)
    return None if best is None else (best[1], best[2])


def _binder(
    *, model: _Model, capped: list[dict[Role, float]], role: Role, variant: str
) -> tuple[float, float]:
    """The (capped demand, PRC) of the signal that needs the most replicas of `variant` for
    `role` (the first of equals), (0, 0) when no signal prices it."""
    demand, prc, ratio = 0.0, 0.0, -1.0
    for index, (_, _, prcs) in enumerate(model.signals):
        if role not in capped[index]:
            continue
        price = prcs.get(variant, 0.0)
        if price <= 0:
            continue
        if capped[index][role] / price > ratio:
            demand, prc, ratio = capped[index][role], price, capped[index][role] / price
    return demand, prc


def _commit_round(*, model: _Model, cap_at: float, ledger: Ledger) -> None:
    """The joint commit of `cost_aware` on demand capped at `cap_at`, within the budgets."""
    capped = [
        {role: min(value, cap_at) for role, value in rem.items()} for _, rem, _ in model.signals
    ]
    roles = sorted({role for rem in capped for role in rem})
    while True:
        wanting = [r for r in roles if any(c.get(r, 0.0) > 0 for c in capped)]
        if not wanting:
            return
        picks: dict[Role, tuple[VariantCapacity, int]] = {}
        for role in wanting:
            pick = _pick(model=model, role=role, ledger=ledger)
            if pick is None:
                return
            picks[role] = pick
        sizes, delta = cost_aware.joint_sizes(
            picks=picks,
            binders={
                role: _binder(model=model, capped=capped, role=role, variant=variant.variant)
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
            k = cost_aware.joint_commit(n=n, demand=demand, prc=prc, delta=delta)
            # Roles were sized before any committed: another role may have taken the GPUs.
            fit = ledger.fits(
                accelerator=variant.accelerator,
                namespace=variant.namespace,
                gpus=variant.gpus_per_replica,
            )
            if fit is not None:
                k = min(k, fit)
            if k <= 0:
                continue
            committed = True
            model.targets[variant.variant] += k
            ledger.charge(
                accelerator=variant.accelerator,
                namespace=variant.namespace,
                gpus=k * max(0, variant.gpus_per_replica),
            )
            for index, (_, rem, prcs) in enumerate(model.signals):
                price = prcs.get(variant.variant, 0.0)
                if role in rem and price > 0:
                    rem[role] = max(0.0, rem[role] - k * price)
                    capped[index][role] = max(0.0, capped[index][role] - k * price)
        if not committed:
            return


def _fair_share(*, models: list[_Model], ledger: Ledger) -> None:
    rem = [model.fsv() for model in models]
    active = {index for index, value in enumerate(rem) if value > 0}
    total = math.fsum(rem[index] for index in active)
    # Largest rem first; ties by input order, which is (namespace, model_id).
    heap = [(-rem[index], index) for index in sorted(active)]
    heapq.heapify(heap)
    while active and heap:
        negative, top = heapq.heappop(heap)
        if top not in active or -negative != rem[top]:
            continue  # a stale entry: the model was served or dropped since
        count = len(active)
        mean = total / count
        rem_w = rem[top]
        if count == 1:
            alloc_mean = 0.0
        elif rem_w <= mean:
            alloc_mean = mean - rem_w / count
        else:
            alloc_mean = mean
        _commit_round(model=models[top], cap_at=rem_w - alloc_mean, ledger=ledger)
        after = models[top].fsv()
        total -= rem_w
        rem[top] = after
        if not after < rem_w or after > mean or after <= 0:
            active.discard(top)
            continue
        total += after
        heapq.heappush(heap, (-after, top))


def _unmet(model: _Model) -> tuple[tuple[Role, float], ...]:
    roles = sorted({role for _, rem, _ in model.signals for role in rem})
    return tuple((role, model.demand(role)) for role in roles)


def _targets(*, model: _Model) -> tuple[VariantTarget, ...]:
    out = []
    for variant in sorted(model.request.variants, key=lambda v: v.variant):
        target = model.targets[variant.variant]
        current = max(0, variant.current_replicas)
        reason = f'{REASON} scale-up' if target > current else REASON
        out.append(
            VariantTarget(
                variant=variant.variant,
                target=target,
                reason=reason,
                figures=(('per_replica_capacity', positive_or_zero(variant.per_replica_capacity)),),
            )
        )
    return tuple(out)


def optimize_limited(*, requests: Sequence[ScalingRequest], budgets: Budgets) -> LimitedOutcome:
    """One target per variant of every request, within `budgets`."""
    ledger = Ledger(budgets=budgets)
    # Sorted and indexed by position: two requests for one model (a caller's error) are both
    # answered, in a fixed order, rather than one silently replacing the other.
    ordered = sorted(requests, key=lambda r: (r.namespace, r.model_id))
    results: list[LimitedModel | None] = [None] * len(ordered)
    up: list[tuple[int, _Model]] = []
    for index, request in enumerate(ordered):
        model = _working(request)
        if any(v > 0 for _, rem, _ in model.signals for v in rem.values()):
            up.append((index, model))
        else:
            results[index] = LimitedModel(
                model_id=request.model_id,
                namespace=request.namespace,
                targets=cost_aware.optimize(request=request),
                unmet=(),
            )
    _fair_share(models=[model for _, model in up], ledger=ledger)
    for index, model in up:
        results[index] = LimitedModel(
            model_id=model.request.model_id,
            namespace=model.request.namespace,
            targets=_targets(model=model),
            unmet=_unmet(model),
        )
    return LimitedOutcome(
        models=tuple(result for result in results if result is not None), left=ledger.snapshot()
    )
