"""The token-based saturation analyzer: WVA's "V2".

Source: llm-d workload-variant-autoscaler v0.9.0, internal/engines/analyzers/saturation_v2/.

Why: capacity and demand in absolute KV-cache tokens can be compared across variants (a variant
on bigger GPUs simply has more tokens), which percentages cannot. This module turns one model's
replica metrics into per-variant capacities and the model's linear totals (supply, anticipated
supply, demand), per P/D role where variants have roles; the universal threshold post-step turns
those into required/spare capacity (`policies.wva.thresholds`, not here).

What it computes, per engine instance with `cache_config_info` (KV tokens > 0), WVA's
per-instance step:
- k1 = ⌊KV tokens × kvCacheThreshold⌋; k2 from the first that applies of P1 observed (queue >=
  int(queueLengthThreshold) and tokens in use > 0; also recorded in the k2 history), P2 historical
  (⌊mean of the unexpired history⌋ when > 0), P3 derived from the engine parameters
  (`capacity_knowledge.capacity_from_params`), P4 k1; k_eff = min(k1, k2);
- demand = tokens in use + queue × (I for prefill, I + O otherwise), the product rejected (→ 0)
  when not > 0, >= 2^63, NaN or Inf (`waiting_queue_demand`);
- without `cache_config_info`: k_eff = ⌊stored capacity × threshold⌋ and demand = ⌊KV usage ×
  k_eff⌋ + queue demand (label `P4-k1`), or, when nothing is stored, no capacity: the instance
  is listed in `TokenAnalysis.unsized` (its load is unknown, so the engine holds the model). This
  path does not write the store: its k_eff is already thresholded, and storing it would shrink
  the capacity by the threshold again every cycle;
- every other computed instance writes a live capacity record (built once per variant: each
  instance's record replaces the one before, so only the last is built, see `_Sizing`).
Tokens in use are `ReplicaMetrics.tokens_in_use` (round(KV usage clamped to [0, 1] × KV tokens)).
The engine parameters are the variant's, else the stored record's (`_engine_of`).
Per variant: integer median of k_eff (even count: truncated mean of the two middle values), the k2
label of the lower-median instance, summed demand; without live instances the stored knowledge
("P0-store"), or `no-data` with capacity 0. Model totals add the scheduler (EPP) queue demand and
the model-level workload means from `scheduler_queue`; each role present gets its share
(`QueueDemand.for_role`), and a role without variants gets nothing.

Deliberate departures from WVA, each an upstream defect fix:
- UNITS (WVA #1476): capacities and counts are in scale-target replicas. When a replica
  hosts several engine instances (EngineParams `data_parallel_size` > 1, otherwise ⌊#instances /
  readyCount⌋ > 1), per-replica capacity = median instance k_eff × instances per replica and
  replica count = ⌈#instances / instances per replica⌉; pending stays in replicas. Stored
  knowledge is per instance and is scaled the same way.
- Zero-replica variants (which WVA never lists for analysis) are analysed like any other: they get
  their capacity from the knowledge, so the optimizer can choose them.
- The k2 history and the knowledge expire (`CoreSettings.k2_history_ttl`, `capacity_ttl`): the
  caller expires both once per cycle (the engine does, before the first model); the history
  average here still ignores samples older than the TTL.
- Ties are broken by name/pod, never by input order; an instance of a variant not in `variants`
  is skipped (its hardware is unknown); an unknown accelerator never borrows another record.

Memory: `analyze` reads the caller's history and knowledge through an overlay of its own writes
(`memory_overlay`) and returns only those writes (`history_updates`, `knowledge_updates`: the
keys written for this model), never a copy of the whole memory, so a cycle over many models
stays linear.

What fails: nothing raises. The engine hands over only replicas whose figures are present and in
range (`analyze.validity`); called directly, NaN, Inf and negative metrics count as absent (0)
and a KV usage outside [0, 1] is clamped. A NaN/Inf queue threshold disables P1; a
kvCacheThreshold that is not a positive finite number falls back to the default 0.80.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from llmscaler.analyze import finite_sums
from llmscaler.analyze.learning import capacity_knowledge as ck
from llmscaler.analyze.saturation import k2_history as kh
from llmscaler.analyze.saturation import scheduler_queue as sq
from llmscaler.analyze.saturation.memory_overlay import AnalysisMemory, analysis_memory
from llmscaler.config.resolved import CoreSettings, SaturationConfig
from llmscaler.domain.basics import ROLES, Role, finite, positive_or_zero
from llmscaler.domain.signals import AnalyzerResult, Totals, VariantCapacity
from llmscaler.domain.snapshot import (
    EngineParams,
    PoolMetrics,
    ReplicaMetrics,
    Variant,
    tokens_in_use_of,
)
from llmscaler.domain.state import CapacityRecord, K2Sample

ANALYZER_NAME = 'saturation-token'

_INT64_LIMIT = float(2**63)
_DEFAULT_KV_THRESHOLD = SaturationConfig().kv_cache_threshold


class ReplicaCapacity(NamedTuple):
    """The capacity of one engine instance as computed this cycle (for figures and tests).

    A named tuple, not a frozen dataclass: one is built per replica per cycle, and a frozen
    dataclass's initialiser took three times as long (about a twentieth of the token path)."""

    pod: str
    variant: str
    k1: int
    k2: int
    k_eff: int
    demand: int
    source: str
    """`P1-obs`, `P2-hist`, `P3-k2` or `P4-k1`."""
    saturated: bool


_ROLES: dict[str, Role] = {role: role for role in ROLES}


def _role(value: str) -> Role:
    return _ROLES.get(value, 'both')


def waiting_queue_demand(
    *, queue_length: float, avg_input: float | None, avg_output: float | None, role: Role
) -> int:
    """Tokens the local engine queue will need: queue × I (prefill) or queue × (I + O), in float,
    truncated; 0 when the product is not > 0, >= 2^63, NaN or Inf."""
    per_request = positive_or_zero(avg_input)
    if role != 'prefill':
        per_request += positive_or_zero(avg_output)
    product = float(queue_length) * per_request
    if not product > 0 or product >= _INT64_LIMIT:
        return 0
    return int(product)


def _kv_threshold(config: SaturationConfig) -> float:
    value = finite(config.kv_cache_threshold)
    return value if value is not None and value > 0 else _DEFAULT_KV_THRESHOLD


@dataclass(slots=True)
class _Sizing:
    """What `_replica` needs that is the same for every instance of one model's analysis: read
    once per call instead of once per instance (a model has tens of them).

    `averages` remembers the k2 history mean by history key for this call; a P1 observation
    recorded under a key forgets its mean, so a later instance reads the history as it is then.
    `unwritten` holds, by knowledge key, the live record the last instance of a variant would
    write: each instance replaces its predecessor's record, so only the last one is built, when
    the key is next read (`_read`) or at the end of the instances (`_write_records`).
    """

    model_id: str
    namespace: str
    config: SaturationConfig
    settings: CoreSettings
    memory: AnalysisMemory
    now: float
    threshold: float
    queue_threshold: float | None
    averages: dict[str, float | None]
    unwritten: dict[str, tuple[Variant, int, int, EngineParams | None]]
    keys: dict[str, str]
    """Knowledge key by variant name: the same for every instance of a variant."""
    history_keys: dict[tuple[str, str], str]
    """k2 history key by (variant name, output bucket)."""


def _sizing(
    *,
    model_id: str,
    namespace: str,
    config: SaturationConfig,
    settings: CoreSettings,
    memory: AnalysisMemory,
    now: float,
) -> _Sizing:
    """The shared part of one model's instances, with nothing yet remembered or unwritten."""
    return _Sizing(
        model_id=model_id,
        namespace=namespace,
        config=config,
        settings=settings,
        memory=memory,
        now=now,
        threshold=_kv_threshold(config),
        queue_threshold=finite(config.queue_length_threshold),
        averages={},
        unwritten={},
        keys={},
        history_keys={},
    )


def _write_records(sizing: _Sizing) -> None:
    """Write the live records still unwritten to `sizing.memory` (before reading it again)."""
    for key in list(sizing.unwritten):
        _write(sizing=sizing, key=key)


def _write(*, sizing: _Sizing, key: str) -> None:
    variant, k_eff, total, engine = sizing.unwritten.pop(key)
    written = ck.record_live(
        knowledge=sizing.memory.knowledge,
        namespace=sizing.namespace,
        model_id=sizing.model_id,
        variant=variant.name,
        accelerator=variant.accelerator,
        gpus_per_replica=variant.gpus_per_replica,
        effective_capacity=float(k_eff),
        total_kv_capacity_tokens=total,
        now=sizing.now,
        engine=engine,
    )
    if written is not None:
        sizing.memory.knowledge_updates[key] = written


def _read(*, sizing: _Sizing, key: str) -> CapacityRecord | None:
    if key in sizing.unwritten:
        _write(sizing=sizing, key=key)
    return sizing.memory.knowledge.get(key)


def _replica(*, rm: ReplicaMetrics, variant: Variant, sizing: _Sizing) -> ReplicaCapacity | None:
    """One instance's capacity; writes its k2 observation and live record to `sizing.memory`."""
    memory, now, threshold = sizing.memory, sizing.now, sizing.threshold
    model_id, namespace = sizing.model_id, sizing.namespace
    queue = int(positive_or_zero(rm.queue_length))  # WVA's collector hands over an integer queue
    role = _role(variant.role)
    queue_demand = waiting_queue_demand(
        queue_length=queue,
        avg_input=rm.avg_input_tokens,
        avg_output=rm.avg_output_tokens,
        role=role,
    )
    key = sizing.keys.get(variant.name)
    if key is None:
        key = ck.knowledge_key(namespace=namespace, model_id=model_id, variant=variant.name)
        sizing.keys[variant.name] = key
    total = rm.kv_capacity_tokens
    if total <= 0:
        stored = _read(sizing=sizing, key=key)
        capacity = positive_or_zero(stored.effective_capacity) if stored is not None else 0.0
        k_eff = math.floor(capacity * threshold) if capacity * threshold < _INT64_LIMIT else 0
        if k_eff <= 0:
            return None
        usage = min(1.0, positive_or_zero(rm.kv_usage))
        demand = math.floor(usage * k_eff) + queue_demand
        fallback = ReplicaCapacity(
            pod=rm.pod,
            variant=variant.name,
            k1=k_eff,
            k2=k_eff,
            k_eff=k_eff,
            demand=demand,
            source='P4-k1',
            saturated=demand >= k_eff,
        )
        return fallback

    k1 = math.floor(total * threshold)
    tokens = tokens_in_use_of(total=total, usage=rm.kv_usage)  # `rm.tokens_in_use`, `total` known
    bucket = kh.output_bucket(avg_output_tokens=rm.avg_output_tokens)
    hkey = sizing.history_keys.get((variant.name, bucket))
    if hkey is None:
        hkey = kh.history_key(
            model_id=model_id,
            accelerator=variant.accelerator,
            gpus_per_replica=variant.gpus_per_replica,
            bucket=bucket,
        )
        sizing.history_keys[(variant.name, bucket)] = hkey
    queue_threshold = sizing.queue_threshold
    # The stored record only lends its engine when the variant names none (`_engine_of`).
    engine = variant.engine
    if engine is None:
        engine = _engine_of(variant=variant, record=_read(sizing=sizing, key=key))
    # Each priority is computed only when the ones before it do not apply (all are pure).
    if queue_threshold is not None and queue >= int(queue_threshold) and tokens > 0:
        k2, source = tokens, 'P1-obs'
        samples = kh.record(
            history=memory.history,
            key=hkey,
            value=float(tokens),
            now=now,
            window=sizing.settings.k2_window,
        )
        if samples is not None:
            memory.history_updates[hkey] = samples
            sizing.averages.pop(hkey, None)
    elif (mean := _history_mean(sizing=sizing, key=hkey)) is not None and mean > 0:
        k2, source = math.floor(mean), 'P2-hist'
    elif (
        derived := ck.capacity_from_params(
            engine=engine, avg_input=rm.avg_input_tokens, avg_output=rm.avg_output_tokens
        )
    ) > 0:
        k2, source = derived, 'P3-k2'
    else:
        k2, source = k1, 'P4-k1'
    k_eff = min(k1, k2)
    demand = tokens + queue_demand
    # A capacity that is not positive writes nothing (`record_live`): the record before stays.
    if k_eff > 0:
        sizing.unwritten[key] = (variant, k_eff, total, engine)
        if engine is None:
            # Without an engine the record keeps the stored one's: read it now, not later.
            _write(sizing=sizing, key=key)
    # Positional (pod, variant, k1, k2, k_eff, demand, source, saturated): one per replica per
    # cycle, and a named tuple takes keywords at about twice the cost.
    return ReplicaCapacity(rm.pod, variant.name, k1, k2, k_eff, demand, source, demand >= k_eff)


def _history_mean(*, sizing: _Sizing, key: str) -> float | None:
    averages = sizing.averages
    if key in averages:
        return averages[key]
    mean = kh.average(
        history=sizing.memory.history, key=key, now=sizing.now, ttl=sizing.settings.k2_history_ttl
    )
    averages[key] = mean
    return mean


def _engine_of(*, variant: Variant, record: CapacityRecord | None) -> EngineParams | None:
    # The scale target's arguments are current; a record only remembers them.
    if variant.engine is not None:
        return variant.engine
    return record.engine if record is not None else None


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
    shared = _sizing(
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
    _write_records(shared)

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
