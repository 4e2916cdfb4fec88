"""The token-based analyzer's part per engine instance: k1, k2, k_eff and demand in KV tokens.

Why: `saturation_tokens` sizes a model from its engine instances; what one instance can hold and
what it needs is a part of its own, with its own priorities and its own writes to the analyzer
memory, while the medians per variant, the replica units and the model totals stay there. This
is WVA's per-instance step (reference/wva.md §4.1-§4.2).

What it computes, per engine instance with `cache_config_info` (KV tokens > 0):
- k1 = ⌊KV tokens × kvCacheThreshold⌋; k2 from the first that applies of P1 observed (queue >=
  int(queueLengthThreshold) and tokens in use > 0; also recorded in the k2 history), P2 historical
  (⌊mean of the unexpired history⌋ when > 0), P3 derived from the engine parameters
  (`capacity_knowledge.capacity_from_params`), P4 k1; k_eff = min(k1, k2);
- demand = tokens in use + queue × (I for prefill, I + O otherwise), the product rejected (→ 0)
  when not > 0, >= 2^63, NaN or Inf (`waiting_queue_demand`);
- without `cache_config_info`: k_eff = ⌊stored capacity × threshold⌋ and demand = ⌊KV usage ×
  k_eff⌋ + queue demand (label `P4-k1`), or no capacity (None) when nothing is stored. This path
  does not write the store: its k_eff is already thresholded, and storing it would shrink the
  capacity by the threshold again every cycle;
- every other computed instance writes a live capacity record (built once per variant: each
  instance's record replaces the one before, so only the last is built, see `Sizing`).
Tokens in use are `ReplicaMetrics.tokens_in_use` (round(KV usage clamped to [0, 1] × KV tokens)).
The engine parameters are the variant's, else the stored record's (`_engine_of`).

What fails: nothing raises. NaN, Inf and negative metrics count as absent (0), a KV usage
outside [0, 1] is clamped, a NaN/Inf queue threshold disables P1, and a kvCacheThreshold that
is not a positive finite number falls back to the default 0.80.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

from llmscaler.analyze.learning import capacity_knowledge as ck
from llmscaler.analyze.saturation import k2_history as kh
from llmscaler.analyze.saturation.memory_overlay import AnalysisMemory
from llmscaler.config.resolved import CoreSettings, SaturationConfig
from llmscaler.domain.basics import ROLES, Role, finite, positive_or_zero
from llmscaler.domain.snapshot import EngineParams, ReplicaMetrics, Variant, tokens_in_use_of
from llmscaler.domain.state import CapacityRecord

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
class Sizing:
    """What `_replica` needs that is the same for every instance of one model's analysis: read
    once per call instead of once per instance (a model has tens of them).

    `averages` remembers the k2 history mean by history key for this call; a P1 observation
    recorded under a key forgets its mean, so a later instance reads the history as it is then.
    `unwritten` holds, by knowledge key, the live record the last instance of a variant would
    write: each instance replaces its predecessor's record, so only the last one is built, when
    the key is next read (`_read`) or at the end of the instances (`write_records`).
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


def sizing(
    *,
    model_id: str,
    namespace: str,
    config: SaturationConfig,
    settings: CoreSettings,
    memory: AnalysisMemory,
    now: float,
) -> Sizing:
    """The shared part of one model's instances, with nothing yet remembered or unwritten."""
    return Sizing(
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


def write_records(sizing: Sizing) -> None:
    """Write the live records still unwritten to `sizing.memory` (before reading it again)."""
    for key in list(sizing.unwritten):
        _write(sizing=sizing, key=key)


def _write(*, sizing: Sizing, key: str) -> None:
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


def _read(*, sizing: Sizing, key: str) -> CapacityRecord | None:
    if key in sizing.unwritten:
        _write(sizing=sizing, key=key)
    return sizing.memory.knowledge.get(key)


def _replica(*, rm: ReplicaMetrics, variant: Variant, sizing: Sizing) -> ReplicaCapacity | None:
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


def _history_mean(*, sizing: Sizing, key: str) -> float | None:
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
