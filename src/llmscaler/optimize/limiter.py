"""The GPU limiter stage of `decide()`: every model's scale-ups, fair-shared within GPU budgets.

Why: `decide()` settles one model at a time (analysis, optimizer, enforcer, bounds), but GPUs are
shared: with `enableLimiter: true` the models' scale-ups together must fit what the nodes and quotas
allow, the most starved model served first. This stage runs once per cycle after every model was
decided, for the V1 and V2 paths alike (WVA v0.9.0 runs its limiter,
internal/engines/pipeline/default_limiter.go, after V1's decisions, and its greedy-by-score
optimizer, greedy_score_optimizer.go, in V2).

What it computes (`limit`):

- Budgets: the providers `limiters:` names in the global default entry
  (`llmscaler.config.quota`; without the key, the inventory alone): the snapshot's
  `gpu_limits` of provider `inventory` when the inventory is named, plus the quota's limits;
  charged with the GPUs of every variant's current replicas and merged
  (`optimize.constraints`). With no limits at all, nothing is limited (WVA falls back to the
  unlimited optimizer when no provider can answer, upstream #1298): the decisions of limited
  models say so in `Decision.limiter`.
- Models without `enableLimiter` keep their decisions; their scale-ups are charged to the
  budgets first (those replicas will be asked for whatever the limiter says).
- For the models with `enableLimiter`, each decision becomes part of a `ScalingRequest`: a
  variant's floor is what the limiter cannot take away — min(target, max(current,
  minReplicas)) — and its ceiling the target decided without limits; one live signal per model
  asks, per role, for the capacity between floors and ceilings, with the model's `priority`.
  Units: when every variant has a per-replica capacity (the token path), capacities relative
  to the model's smallest, and a variant the optimizer left alone may grow up to maxReplicas in
  place of one whose GPU type is full (WVA's pick: the cheapest by cost per capacity whose type
  still has room); otherwise (V1) replicas, and only the decided scale-ups are trimmed.
  `optimize.limited` then fair-shares the budgets between the models, most starved first.
- Each decision of a limited model gets the target granted, `limited` = replicas held back,
  a reason that ends `; limited by GPU budget: -N` when N > 0, and `limiter`, a one-line
  verdict on its model (granted / wanted replicas and the free GPUs of its types).

Why replicas (of the model's smallest variant) rather than the analyzers' own units: models'
analyzers may differ (V1 has no capacities) and one model's tokens are not another's, so the
fair share compares models in replicas. Scale-downs are never changed, and the GPUs they free
count next cycle (`used` is computed from current replicas, as WVA does).

Guarantees: for every accelerator type and scope with a budget, the GPUs of all replicas
granted above the floors never exceed what the budgets had free; a target never drops below its
floor nor rises above maxReplicas (nor above the unlimited decision when it grew), so
[minReplicas, maxReplicas] still holds.
Deterministic; nothing raises.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace

from llmscaler.config.quota import Limiters
from llmscaler.config.resolved import Config
from llmscaler.domain.basics import Action, Role
from llmscaler.domain.signals import AnalyzerSignal, RoleSignal, ScalingRequest, VariantCapacity
from llmscaler.domain.snapshot import (
    DEFAULT_COST,
    Decision,
    GpuLimit,
    Snapshot,
    Variant,
    action_for,
)
from llmscaler.optimize.constraints import (
    Budgets,
    Ledger,
    charge_variants,
    free_by_type,
    merge_constraints,
)
from llmscaler.optimize.limited import optimize_limited

SIGNAL = 'limiter'
INVENTORY_PROVIDER = 'inventory'
"""`GpuLimit.provider` of the nodes' (or the simulated fleet's) GPUs."""
NO_LIMITS = 'no GPU inventory or quota known: targets not limited'


def limit(*, decisions: Sequence[Decision], snapshot: Snapshot, config: Config) -> list[Decision]:
    """The decisions with every `enableLimiter` model's scale-ups fitted to the GPU budgets."""
    groups: dict[tuple[str, str], list[Decision]] = {}
    for decision in decisions:
        groups.setdefault((decision.namespace, decision.model_id), []).append(decision)
    limited_groups = sorted(
        key
        for key in groups
        if config.model(model_id=key[1], namespace=key[0]).saturation.enable_limiter
    )
    if not limited_groups:
        return list(decisions)
    chosen = set(limited_groups)
    gpu_limits = _limits(snapshot=snapshot, config=config)
    if not gpu_limits:
        return [
            replace(d, limiter=NO_LIMITS) if (d.namespace, d.model_id) in chosen else d
            for d in decisions
        ]
    variants = {v.key: v for v in snapshot.variants}
    budgets = merge_constraints(
        limits=charge_variants(limits=gpu_limits, variants=snapshot.variants)
    )
    others = [d for key, ds in sorted(groups.items()) if key not in chosen for d in ds]
    budgets = _charge_unlimited(budgets=budgets, decisions=others, variants=variants)
    # A model that asks for no replica needs no allocation, only its verdict.
    asking = [
        key
        for key in limited_groups
        if any(d.target > _floor(d, variants.get(d.key)) for d in groups[key])
    ]
    requests = [_request(decisions=groups[key], variants=variants, config=config) for key in asking]
    outcome = optimize_limited(requests=requests, budgets=budgets)
    granted = {
        (model.namespace, target.variant): target.target
        for model in outcome.models
        for target in model.targets
    }
    unmet = {(model.namespace, model.model_id): model.limited for model in outcome.models}
    verdicts = {
        key: _verdict(
            decisions=groups[key],
            granted=granted,
            variants=variants,
            left=outcome.left,
            unmet=unmet.get(key, False),
        )
        for key in limited_groups
    }
    out = []
    for decision in decisions:
        key = (decision.namespace, decision.model_id)
        if key not in verdicts:
            out.append(decision)
            continue
        target = granted.get((decision.namespace, decision.variant), decision.target)
        held_back = max(0, decision.target - target)
        reason = decision.reason
        if held_back:
            reason = f'{reason}; limited by GPU budget: -{held_back}'
        elif target > decision.target:
            extra = target - decision.target
            reason = f'{reason}; +{extra} in place of replicas a full GPU type holds back'
        out.append(
            limited_decision(
                decision,
                target=target,
                action=(
                    decision.action
                    if target == decision.target
                    else action_for(current=decision.current, target=target)
                ),
                reason=reason,
                limited=held_back,
                limiter=verdicts[key],
            )
        )
    return out


def limited_decision(
    decision: Decision, *, target: int, action: Action, reason: str, limited: int, limiter: str
) -> Decision:
    """`decision` with the limiter's target, action, reason and verdict. Built whole, every
    field named: `dataclasses.replace` reads the fields again for each of thousands of
    decisions, and took a fifth of the stage (tests/unit/test_engine_limiter.py checks that every
    other field is carried over)."""
    return Decision(
        variant=decision.variant,
        namespace=decision.namespace,
        model_id=decision.model_id,
        accelerator=decision.accelerator,
        current=decision.current,
        target=target,
        action=action,
        reason=reason,
        analyzer=decision.analyzer,
        figures=decision.figures,
        metrics_available=decision.metrics_available,
        metrics_reason=decision.metrics_reason,
        message=decision.message,
        limited=limited,
        limiter=limiter,
    )


def _limits(*, snapshot: Snapshot, config: Config) -> tuple[GpuLimit, ...]:
    limiters = config.default.saturation.limiters or Limiters()
    inventory = tuple(
        limit
        for limit in snapshot.gpu_limits
        if limiters.inventory or limit.provider != INVENTORY_PROVIDER
    )
    namespaces = sorted({v.namespace for v in snapshot.variants})
    return inventory + limiters.quota_limits(namespaces=namespaces)


def _floor(decision: Decision, variant: Variant | None) -> int:
    minimum = variant.min_replicas if variant is not None else 0
    return min(decision.target, max(decision.current, minimum))


def _charge_unlimited(
    *, budgets: Budgets, decisions: Sequence[Decision], variants: Mapping[str, Variant]
) -> Budgets:
    ledger = Ledger(budgets=budgets)
    for decision in decisions:
        variant = variants.get(decision.key)
        if variant is None or decision.target <= decision.current:
            continue
        ledger.charge(
            accelerator=variant.accelerator,
            namespace=variant.namespace,
            gpus=(decision.target - decision.current) * variant.gpus_per_replica,
        )
    return ledger.snapshot()


def _capacities(decisions: Sequence[Decision]) -> dict[str, float] | None:
    """Each variant's per-replica capacity relative to the model's smallest, when every variant
    has one (the token path's `per_replica_capacity` figure); None otherwise (V1)."""
    found: dict[str, float] = {}
    for decision in decisions:
        value = dict(decision.figures).get('per_replica_capacity', 0.0)
        if not (math.isfinite(value) and value > 0):
            return None
        found[decision.variant] = value
    smallest = min(found.values(), default=0.0)
    return {name: value / smallest for name, value in found.items()} if smallest > 0 else None


def _request(
    *, decisions: Sequence[Decision], variants: Mapping[str, Variant], config: Config
) -> ScalingRequest:
    first = decisions[0]
    relative = _capacities(decisions)
    capacities: list[VariantCapacity] = []
    wanted: dict[Role, float] = {}
    for decision in sorted(decisions, key=lambda d: d.variant):
        variant = variants.get(decision.key)
        floor = _floor(decision, variant)
        role: Role = variant.role if variant is not None else 'both'
        prc = relative[decision.variant] if relative is not None else 1.0
        wanted[role] = wanted.get(role, 0.0) + max(0, decision.target - floor) * prc
        # With capacities known, a variant the optimizer did not grow may take the replicas a
        # full GPU type cannot (WVA picks the cheapest variant whose type still has room);
        # without them (V1) a replica of one variant is no measure of another's, so only the
        # scale-ups decided are trimmed.
        ceiling = decision.target
        if relative is not None and variant is not None and decision.target == floor:
            ceiling = max(floor, variant.max_replicas)
        capacities.append(
            VariantCapacity(
                variant=decision.variant,
                namespace=decision.namespace,
                role=role,
                cost=variant.cost if variant is not None else DEFAULT_COST,
                accelerator=decision.accelerator,
                gpus_per_replica=variant.gpus_per_replica if variant is not None else 0,
                min_replicas=floor,
                max_replicas=ceiling,
                current_replicas=floor,
                per_replica_capacity=prc,
                replica_count=floor,
                pending=variant.pending_replicas if variant is not None else 0,
                total_demand=0.0,
                reason=SIGNAL,
            )
        )
    signal = AnalyzerSignal(
        analyzer=SIGNAL,
        live=True,
        score=1.0,
        roles=tuple(
            RoleSignal(role=role, required=count, spare=0.0)
            for role, count in sorted(wanted.items())
        ),
        capacity=tuple((c.variant, c.per_replica_capacity) for c in capacities),
    )
    priority = config.model(model_id=first.model_id, namespace=first.namespace).saturation.priority
    return ScalingRequest(
        model_id=first.model_id,
        namespace=first.namespace,
        variants=tuple(capacities),
        signals=(signal,),
        priority=priority,
    )


def _verdict(
    *,
    decisions: Sequence[Decision],
    granted: Mapping[tuple[str, str], int],
    variants: Mapping[str, Variant],
    left: Budgets,
    unmet: bool,
) -> str:
    wanted = got = 0
    moved = False
    types: set[str] = set()
    for decision in decisions:
        floor = _floor(decision, variants.get(decision.key))
        target = granted.get((decision.namespace, decision.variant), decision.target)
        wanted += max(0, decision.target - floor)
        got += max(0, target - floor)
        moved = moved or target != decision.target
        types.add(decision.accelerator)
    free = free_by_type(budgets=left)
    room = ', '.join(f'{acc} {free[acc]} GPUs free' for acc in sorted(types) if acc in free)
    room = f' ({room})' if room else ''
    if wanted == 0:
        return f'no scale-up asked; within GPU budget{room}'
    if unmet:
        return f'limited by GPU budget: +{got} of +{wanted} replicas granted{room}'
    if moved:
        return (
            f'capacity asked for met on other GPU types: +{got} replicas in place of +{wanted}'
            f'{room}'
        )
    return f'+{got} replicas granted, within GPU budget{room}'
