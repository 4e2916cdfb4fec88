"""The token-based saturation analyzer (WVA's experimental "V2", reference/wva.md §4.1-§4.4).

Why: capacity and demand in absolute KV-cache tokens can be compared across variants (a variant
on bigger GPUs simply has more tokens), which percentages cannot. This module turns one model's
replica metrics into per-variant capacities and the model's linear totals (supply, anticipated
supply, demand), per P/D role where variants have roles; the universal threshold post-step turns
those into required/spare capacity (§4.5, not here).

What it computes: per engine instance, k1, k2 (priorities P1 observed, P2 historical, P3 derived,
P4 k1), k_eff = min(k1, k2) and the demand in tokens, each computed instance writing a live
capacity record (`saturation_tokens_instance`); an instance without `cache_config_info` and with
no stored capacity is skipped (listed in `TokenAnalysis.unsized`: its load is unknown, so the
engine holds the model).
Per variant: integer median of k_eff (even count: truncated mean of the two middle values), the
k2 label of the lower-median instance, summed demand; without live instances the stored knowledge
("P0-store"), or `no-data` with capacity 0. Model totals add the scheduler (EPP) queue demand and
the model-level workload means from `scheduler_queue` (wva.md §4.3); each role present gets its
share (`QueueDemand.for_role`), and a role without variants gets nothing.

Deliberate departures from WVA, each an upstream defect fix:
- UNITS (#1476, design.md §4): capacities and counts are in scale-target replicas. When a replica
  hosts several engine instances (EngineParams `data_parallel_size` > 1, otherwise ⌊#instances /
  readyCount⌋ > 1), per-replica capacity = median instance k_eff × instances per replica and
  replica count = ⌈#instances / instances per replica⌉; pending stays in replicas. Stored
  knowledge is per instance and is scaled the same way.
- Zero-replica variants (§10) are analysed like any other: they get their capacity from the
  knowledge, so the optimizer can choose them.
- The k2 history and the knowledge expire (`CoreSettings.k2_history_ttl`, `capacity_ttl`): the
  caller expires both once per cycle (the engine does, before the first model); the history
  average here still ignores samples older than the TTL.
- Ties are broken by name/pod, never by input order; an instance of a variant not in `variants`
  is skipped (its hardware is unknown); an unknown accelerator never borrows another record.

Memory: `analyze` reads the caller's history and knowledge through an overlay of its own writes
(`memory_overlay`) and returns only those writes (`history_updates`, `knowledge_updates`: the
keys written for this model), never a copy of the whole memory, so a cycle over many models
stays linear.

Bad input: the engine hands over only replicas whose figures are present and in range
(`analyze.validity`); called directly, NaN, Inf and negative metrics count as absent (0) and a
KV usage outside [0, 1] is clamped. A NaN/Inf queue threshold disables P1; a kvCacheThreshold
that is not a positive finite number falls back to the default 0.80. Nothing raises.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from llmscaler.analyze import finite_sums
from llmscaler.analyze.learning import capacity_knowledge as ck
from llmscaler.analyze.saturation import scheduler_queue as sq
from llmscaler.analyze.saturation.memory_overlay import analysis_memory
from llmscaler.analyze.saturation.tokens_instance import ReplicaCapacity as ReplicaCapacity
from llmscaler.analyze.saturation.tokens_instance import (
    _engine_of,
    _kv_threshold,
    _replica,
    _role,
    sizing,
    write_records,
)
from llmscaler.analyze.saturation.tokens_instance import (
    waiting_queue_demand as waiting_queue_demand,
)
from llmscaler.config.resolved import CoreSettings, SaturationConfig
from llmscaler.domain.basics import ROLES, Role, positive_or_zero
from llmscaler.domain.signals import AnalyzerResult, Totals, VariantCapacity
from llmscaler.domain.snapshot import PoolMetrics, ReplicaMetrics, Variant
from llmscaler.domain.state import CapacityRecord, K2Sample

ANALYZER_NAME = 'saturation-token'


@dataclass(frozen=True, slots=True)
class TokenAnalysis:
    """The analyzer result and what it wrote to the analyzer memory this cycle.

    `history_updates` and `knowledge_updates` hold only the keys this call wrote (each value
    replaces the caller's value under that key); merging them into the memory with `dict.update`
    gives the memory for the next model and the next cycle.
    """

    result: AnalyzerResult
    history_updates: dict[str, tuple[K2Sample, ...]]
    knowledge_updates: dict[str, CapacityRecord]
    replicas: tuple[ReplicaCapacity, ...]
    unsized: tuple[ReplicaMetrics, ...] = ()
    """Instances left out because their capacity is unknown: no `cache_config_info` and no
    stored capacity. Their load is not in the demand, so the caller must not scale down on it."""


def integer_median(*, values: Sequence[int]) -> int:
    """WVA's integer median: the middle value, or for an even count the mean of the two middle
    values truncated toward zero; 0 for no values."""
    ordered = sorted(values)
    n = len(ordered)
    if n == 0:
        return 0
    if n % 2 == 1:
        return ordered[n // 2]
    pair = ordered[n // 2 - 1] + ordered[n // 2]
    return pair // 2 if pair >= 0 else -((-pair) // 2)


def _instances_per_replica(
    *, variant: Variant, instances: int, record: CapacityRecord | None
) -> int:
    engine = _engine_of(variant=variant, record=record)
    if engine is not None and engine.data_parallel_size > 1:
        return engine.data_parallel_size
    ready = max(0, variant.current_replicas - max(0, variant.pending_replicas))
    if ready > 0 and instances // ready > 1:
        return instances // ready
    return 1


def _variant(
    *,
    variant: Variant,
    instances: Sequence[ReplicaCapacity],
    record: CapacityRecord | None,
    knowledge: Mapping[str, CapacityRecord],
    threshold: float,
    averages: sq.WorkloadAverages,
) -> VariantCapacity:
    count = len(instances)
    per_unit = _instances_per_replica(variant=variant, instances=count, record=record)
    if instances:
        capacity = float(integer_median(values=[r.k_eff for r in instances]))
        ordered = sorted(instances, key=lambda r: (r.k_eff, r.pod))
        reason = ordered[(count - 1) // 2].source
        live = -(-count // per_unit)
        demand = finite_sums.total(float(r.demand) for r in instances)
    else:
        capacity, reason, live, demand = 0.0, 'no-data', 0, 0.0
        if record is not None and positive_or_zero(record.effective_capacity) > 0:
            capacity = ck.estimate_stored_capacity(
                knowledge=knowledge,
                record=record,
                kv_cache_threshold=threshold,
                avg_input=averages.avg_input,
                avg_output=averages.avg_output,
            )
        elif variant.engine is not None:
            other = ck.compatible(
                knowledge=knowledge,
                model_id=variant.model_id,
                accelerator=variant.accelerator,
                gpus_per_replica=variant.gpus_per_replica,
                engine=variant.engine,
            )
            capacity = other.effective_capacity if other is not None else 0.0
        if capacity > 0:
            reason = 'P0-store'
        else:
            capacity = 0.0
    return VariantCapacity(
        variant=variant.name,
        namespace=variant.namespace,
        role=_role(variant.role),
        cost=variant.cost,
        accelerator=variant.accelerator,
        gpus_per_replica=variant.gpus_per_replica,
        min_replicas=variant.min_replicas,
        max_replicas=variant.max_replicas,
        current_replicas=variant.current_replicas,
        per_replica_capacity=capacity * per_unit,
        replica_count=live,
        pending=max(0, variant.pending_replicas),
        total_demand=demand,
        reason=reason,
    )


def _totals(*, variants: Sequence[VariantCapacity], queue: float) -> Totals:
    return Totals(
        supply=finite_sums.total(v.replica_count * v.per_replica_capacity for v in variants),
        anticipated_supply=finite_sums.total(
            (v.replica_count + v.pending) * v.per_replica_capacity for v in variants
        ),
        # Two steps, as the plain `fsum(...) + queue` rounds: the same bits, without overflow.
        demand=finite_sums.total([finite_sums.total(v.total_demand for v in variants), queue]),
    )


def analyze(
    *,
    model_id: str,
    namespace: str,
    variants: Sequence[Variant],
    replicas: Sequence[ReplicaMetrics],
    pool: PoolMetrics | None,
    config: SaturationConfig,
    settings: CoreSettings,
    history: Mapping[str, tuple[K2Sample, ...]],
    knowledge: Mapping[str, CapacityRecord],
    now: float,
) -> TokenAnalysis:
    """Analyze one model (`replicas` already filtered to fresh metrics of its variants).

    `history` and `knowledge` are the memory as the caller has it, already expired (nothing here
    drops an old record; the history average still skips samples older than the TTL). They are
    never mutated; the result carries only the keys written for this model.
    """
    ordered_variants = sorted(variants, key=lambda v: (v.name, v.namespace))
    by_name: dict[str, Variant] = {}
    for v in ordered_variants:
        by_name.setdefault(v.name, v)

    memory = analysis_memory(history=history, knowledge=knowledge)
    for v in by_name.values():
        seeded = ck.seed_from_deployment(
            knowledge=memory.knowledge,
            namespace=namespace,
            model_id=model_id,
            variant=v.name,
            accelerator=v.accelerator,
            gpus_per_replica=v.gpus_per_replica,
            engine=v.engine,
            now=now,
        )
        if seeded is not None:
            memory.knowledge_updates[
                ck.knowledge_key(namespace=namespace, model_id=model_id, variant=v.name)
            ] = seeded

    computed: list[ReplicaCapacity] = []
    unsized: list[ReplicaMetrics] = []
    shared = sizing(
        model_id=model_id,
        namespace=namespace,
        config=config,
        settings=settings,
        memory=memory,
        now=now,
    )
    for rm in sorted(replicas, key=lambda r: (r.pod, r.variant, r.namespace)):
        owner = by_name.get(rm.variant)
        if owner is None:
            continue
        instance = _replica(rm=rm, variant=owner, sizing=shared)
        if instance is not None:
            computed.append(instance)
        else:
            unsized.append(rm)
    write_records(shared)

    averages = sq.workload_averages(replicas=replicas)
    threshold = _kv_threshold(config)
    capacities = tuple(
        _variant(
            variant=v,
            instances=[r for r in computed if r.variant == v.name],
            record=memory.knowledge.get(
                ck.knowledge_key(namespace=namespace, model_id=model_id, variant=v.name)
            ),
            knowledge=memory.knowledge,
            threshold=threshold,
            averages=averages,
        )
        for v in by_name.values()
    )

    queue = sq.scheduler_queue_demand(pool=pool, averages=averages)
    present = {c.role for c in capacities}
    roles: tuple[tuple[Role, Totals], ...] = ()
    if any(role != 'both' for role in present):
        roles = tuple(
            (
                role,
                _totals(
                    variants=[c for c in capacities if c.role == role],
                    queue=queue.for_role(role),
                ),
            )
            for role in ROLES
            if role in present
        )
    result = AnalyzerResult(
        analyzer=ANALYZER_NAME,
        variants=capacities,
        totals=_totals(variants=capacities, queue=queue.total),
        roles=roles,
        scale_up_threshold=config.scale_up_threshold,
        scale_down_boundary=config.scale_down_boundary,
        score=1.0,
    )
    return TokenAnalysis(
        result=result,
        history_updates=memory.history_updates,
        knowledge_updates=memory.knowledge_updates,
        replicas=tuple(computed),
        unsized=tuple(unsized),
    )
