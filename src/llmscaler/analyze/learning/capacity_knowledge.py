"""Capacity knowledge: what is known of each variant's per-instance capacity between cycles.

Why: the token-based analyzer (WVA v0.9.0, internal/engines/analyzers/saturation_v2/) needs a
capacity figure for variants that have no live replicas, so the optimizer can price them before
scaling them up; WVA caches capacity knowledge for that reason. Its CapacityKnowledgeStore keeps one
`CapacityRecord` per `namespace|modelID|variant`:

- a `live` record, written by every replica whose capacity was computed from its metrics
  (effective capacity k_eff = min(k1, k2) and the KV-cache size);
- a `deployment` record, seeded from the engine arguments of the scale target: effective
  capacity = the per-step token budget `max_num_batched_tokens`, KV size known only when
  `num_gpu_blocks_override` is set. Seeding never overwrites a live record.

Capacities here are per *engine instance* (one vLLM server), as measured; the analyzer converts
to scale-target replicas (DP > 1) when it reports them.

`estimate_stored_capacity` is WVA's `estimateStoredCapacity` ("P0-store"): a live record gives its
effective capacity; a deployment record with engine parameters and a positive model-level average
output length gives the steady-state batching estimate (`capacity_from_params`, the P3 formula)
bounded by the record's own k1 and by a compatible variant's live capacity; anything else gives
the stored effective capacity. `compatible` finds a record of another variant of the same model
(any namespace) on the same hardware with the same memory-relevant engine parameters, live
records first, ties broken by key.

UPSTREAM DEFECT FIX: WVA never expires the store (its eviction functions have no caller); `expire`
drops records older than the TTL (`CoreSettings.capacity_ttl`, default 7 days). The engine expires
the store once per cycle; the lookups here trust what they are given.

All functions are pure over plain mappings and never mutate them. `record_live` and
`seed_from_deployment` return only the record to write (None: nothing to write), so writing one
record costs O(1) whatever the size of the store. Bad input: a NaN, infinite,
zero or negative capacity is never recorded and never returned as capacity (0 instead); missing,
NaN, infinite or negative average lengths count as 0 (no output length → no P3 estimate); an
unknown or empty accelerator never matches another record, since it says nothing about the GPU.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from llmscaler.domain.basics import finite
from llmscaler.domain.snapshot import EngineParams
from llmscaler.domain.state import CapacityRecord

Knowledge = dict[str, CapacityRecord]

_INT64_LIMIT = float(2**63)
_UNKNOWN_ACCELERATORS = frozenset({'', 'unknown'})


def knowledge_key(*, namespace: str, model_id: str, variant: str) -> str:
    """The WVA store key `namespace|modelID|variant`."""
    return f'{namespace}|{model_id}|{variant}'


def _non_negative(value: float | None) -> float:
    clean = finite(value)
    return clean if clean is not None and clean > 0 else 0.0


def capacity_from_params(
    *, engine: EngineParams | None, avg_input: float | None, avg_output: float | None
) -> int:
    """The steady-state batching estimate of KV tokens held (WVA's P3 "derived" k2), or 0.

    B = max_num_batched_tokens, S = max_num_seqs, I/O = average input/output tokens:
    `N = min(B·O/(I+O), S)`, `k2 = ⌊N × (I + O/2)⌋`. Needs O > 0 and B > 0.
    """
    if engine is None or engine.max_num_batched_tokens <= 0:
        return 0
    inp = _non_negative(avg_input)
    out = _non_negative(avg_output)
    if out <= 0:
        return 0
    steady = min(engine.max_num_batched_tokens * out / (inp + out), float(engine.max_num_seqs))
    estimate = steady * (inp + out / 2)
    if not math.isfinite(estimate) or estimate <= 0 or estimate >= _INT64_LIMIT:
        return 0
    return int(estimate)


def record_live(
    *,
    knowledge: Mapping[str, CapacityRecord],
    namespace: str,
    model_id: str,
    variant: str,
    accelerator: str,
    gpus_per_replica: int,
    effective_capacity: float,
    total_kv_capacity_tokens: int,
    now: float,
    engine: EngineParams | None = None,
) -> CapacityRecord | None:
    """The live record to store under `knowledge_key(...)` for the variant.

    `engine` is kept on the record; when None, the engine parameters of the record already in
    `knowledge` are preserved (they are what `compatible` matches on). A capacity that is not a
    positive finite number gives None (nothing to write): it would only hide a useful
    deployment record.
    """
    capacity = finite(effective_capacity)
    if capacity is None or capacity <= 0:
        return None
    if engine is None:
        existing = knowledge.get(
            knowledge_key(namespace=namespace, model_id=model_id, variant=variant)
        )
        engine = existing.engine if existing is not None else None
    return CapacityRecord(
        namespace=namespace,
        model_id=model_id,
        variant=variant,
        accelerator=accelerator,
        gpus_per_replica=gpus_per_replica,
        effective_capacity=capacity,
        total_kv_capacity_tokens=max(0, total_kv_capacity_tokens),
        source='live',
        updated_at=now,
        engine=engine,
    )


def seed_from_deployment(
    *,
    knowledge: Mapping[str, CapacityRecord],
    namespace: str,
    model_id: str,
    variant: str,
    accelerator: str,
    gpus_per_replica: int,
    engine: EngineParams | None,
    now: float,
) -> CapacityRecord | None:
    """The deployment record to store under `knowledge_key(...)`, derived from the variant's
    engine parameters (WVA `LoadFromScaleTarget`), or None (nothing to write).

    Effective capacity = `max_num_batched_tokens`; KV size = `num_gpu_blocks_override ×
    block_size` when the override is set, else 0 (unknown). A live record in `knowledge` is
    never overwritten (None); no engine parameters → nothing to seed (None).
    """
    if engine is None:
        return None
    existing = knowledge.get(knowledge_key(namespace=namespace, model_id=model_id, variant=variant))
    if existing is not None and existing.source == 'live':
        return None
    blocks = engine.num_gpu_blocks_override
    total = blocks * engine.block_size if blocks and blocks > 0 and engine.block_size > 0 else 0
    return CapacityRecord(
        namespace=namespace,
        model_id=model_id,
        variant=variant,
        accelerator=accelerator,
        gpus_per_replica=gpus_per_replica,
        effective_capacity=float(max(0, engine.max_num_batched_tokens)),
        total_kv_capacity_tokens=total,
        source='deployment',
        updated_at=now,
        engine=engine,
    )


def expire(*, knowledge: Mapping[str, CapacityRecord], now: float, ttl: float) -> Knowledge:
    """A copy of `knowledge` without records last updated more than `ttl` seconds before `now`."""
    return {
        key: knowledge[key]
        for key in sorted(knowledge)
        if not now - knowledge[key].updated_at > ttl
    }


def _same_engine(a: EngineParams, b: EngineParams) -> bool:
    # The fields WVA's FindCompatible compares: what sets KV memory and the per-step budget.
    return (
        a.engine == b.engine
        and a.gpu_memory_utilization == b.gpu_memory_utilization
        and a.block_size == b.block_size
        and a.kv_cache_dtype == b.kv_cache_dtype
        and a.tensor_parallel_size == b.tensor_parallel_size
        and a.num_gpu_blocks_override == b.num_gpu_blocks_override
        and a.max_num_batched_tokens == b.max_num_batched_tokens
    )


def compatible(
    *,
    knowledge: Mapping[str, CapacityRecord],
    model_id: str,
    accelerator: str,
    gpus_per_replica: int,
    engine: EngineParams | None,
) -> CapacityRecord | None:
    """A record of the same model (any namespace, any variant) on the same accelerator and GPU
    count with equal engine, memory utilization, block size, KV dtype, TP, GPU-block override and
    batched-token budget, and a positive capacity. Live records are preferred, then the first by
    key. None when there is none, when `engine` is None or the accelerator is unknown."""
    if engine is None or accelerator in _UNKNOWN_ACCELERATORS:
        return None
    matches = [
        (record.source != 'live', key, record)
        for key, record in knowledge.items()
        if record.model_id == model_id
        and record.accelerator == accelerator
        and record.gpus_per_replica == gpus_per_replica
        and record.engine is not None
        and _same_engine(record.engine, engine)
        and _non_negative(record.effective_capacity) > 0
    ]
    if not matches:
        return None
    return min(matches, key=lambda item: (item[0], item[1]))[2]


def estimate_stored_capacity(
    *,
    knowledge: Mapping[str, CapacityRecord],
    record: CapacityRecord,
    kv_cache_threshold: float,
    avg_input: float | None,
    avg_output: float | None,
) -> float:
    """Per-instance capacity of a variant without live replicas, from its own record (P0-store).

    - live record → its effective capacity;
    - deployment record with engine parameters and model-level O > 0 → `capacity_from_params`
      with the model-level I and O, bounded by the record's k1 = ⌊KV tokens × threshold⌋ when
      its KV size is known and by a compatible variant's live capacity;
    - otherwise → the stored effective capacity.
    """
    stored = _non_negative(record.effective_capacity)
    if record.source == 'live':
        return stored
    if record.engine is None or _non_negative(avg_output) <= 0:
        return stored
    derived = capacity_from_params(engine=record.engine, avg_input=avg_input, avg_output=avg_output)
    if derived <= 0:
        return stored
    bounded = float(derived)
    threshold = finite(kv_cache_threshold)
    if record.total_kv_capacity_tokens > 0 and threshold is not None and threshold > 0:
        k1 = math.floor(record.total_kv_capacity_tokens * threshold)
        if 0 < k1 < bounded:
            bounded = float(k1)
    other = compatible(
        knowledge=knowledge,
        model_id=record.model_id,
        accelerator=record.accelerator,
        gpus_per_replica=record.gpus_per_replica,
        engine=record.engine,
    )
    if other is not None and other.source == 'live' and other.effective_capacity < bounded:
        bounded = other.effective_capacity
    return bounded
