"""Domain types shared by every stage of the decision core.

Why: the analyzers, the optimizer, the enforcer and `engine.decide()` must agree on one vocabulary,
and the adapters (Prometheus, pod scraping, the simulator, the kube watcher) must build exactly this
vocabulary and nothing else. Everything here is an immutable dataclass with no I/O and no clock.

Units that must not drift (design.md §4):

- A *replica* is a scale-target replica: a pod of a Deployment/StatefulSet, or a leader+workers
  group of a LeaderWorkerSet. `ReplicaMetrics` describes one *engine instance*; with data
  parallelism (DP > 1) a replica hosts several instances; the analyzers convert to replicas.
- Token capacities are KV-cache tokens. Times are seconds (float) on the clock of the caller; the
  core only compares them with the `now` it is handed.
- Every collection is a tuple in a stable order; code that needs a lookup builds its own dict and
  iterates in sorted order, so no result depends on dict or set order.

What fails: nothing here raises on odd values; validation of external input happens in the
adapters (`llmscaler.io` for the JSON face), and the analyzers treat NaN, Inf and negatives as
absent.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import Literal, TypeVar

_V = TypeVar('_V')

# Read by the JSON face (llmscaler.io) when it validates input: unknown keys are errors, so a
# misspelt field is reported instead of silently ignored. A plain dict keeps the core free of
# any validation library.
_STRICT_KEYS = {'extra': 'forbid'}

Role = Literal['both', 'prefill', 'decode']
"""P/D role of a variant: the `llm-d.ai/role` pod-template label; anything else is `both`."""

ROLES: tuple[Role, ...] = ('both', 'decode', 'prefill')
"""All roles in the order WVA processes them (sorted by name)."""

EngineKind = Literal['vllm', 'sglang', 'unknown']


def group_key(*, model_id: str, namespace: str) -> str:
    """The key that groups variants into one model: `modelID|namespace` as in WVA."""
    return f'{model_id}|{namespace}'


def variant_key(*, namespace: str, name: str) -> str:
    """The key of one variant across the whole snapshot: `namespace/name`."""
    return f'{namespace}/{name}'


def finite(value: float | None) -> float | None:
    """Return `value` when it is a finite number, otherwise None (NaN and ±Inf count as absent)."""
    if value is None or not math.isfinite(value):
        return None
    return value


class Freshness(enum.StrEnum):
    """Age class of a metric sample, as WVA's collector has it (fresh < 1 m, stale < 2 m, ...)."""

    FRESH = 'fresh'
    STALE = 'stale'
    UNAVAILABLE = 'unavailable'


class Action(enum.StrEnum):
    """What a decision does to a variant's replica count."""

    SCALE_UP = 'scale_up'
    SCALE_DOWN = 'scale_down'
    NO_CHANGE = 'no_change'
    HOLD = 'hold'
    """No decision could be made safely (missing/stale metrics, bad config); target = current."""


@dataclass(frozen=True, slots=True)
class EngineParams:
    """Serving parameters parsed from a variant's pod template (vLLM or SGLang arguments).

    `max_num_batched_tokens` is the *effective* per-step token budget after the chunked-prefill
    defaults were applied (see `llmscaler.vllm_args`).
    """

    __pydantic_config__ = _STRICT_KEYS

    engine: EngineKind = 'vllm'
    max_num_seqs: int = 256
    max_num_batched_tokens: int = 8192
    max_model_len: int | None = None
    tensor_parallel_size: int = 1
    data_parallel_size: int = 1
    block_size: int = 16
    gpu_memory_utilization: float = 0.9
    kv_cache_dtype: str = 'auto'
    num_gpu_blocks_override: int | None = None
    enable_chunked_prefill: bool = True


@dataclass(frozen=True, slots=True)
class Variant:
    """One scale target serving one model on one hardware/serving configuration.

    `current_replicas` is the scale target's `spec.replicas` (group units for LWS);
    `ready_replicas` and `pending_replicas` come from its status
    (pending = `status.replicas - status.readyReplicas`, clamped at 0, computed by the adapter).
    `desired_replicas` is the last desired count the autoscaler published (VA status), used to
    seed the decision memory after a restart; None when unknown.
    """

    __pydantic_config__ = _STRICT_KEYS

    name: str
    namespace: str
    model_id: str
    cost: float = 10.0
    accelerator: str = 'unknown'
    gpus_per_replica: int = 1
    role: Role = 'both'
    min_replicas: int = 1
    max_replicas: int = 2
    current_replicas: int = 0
    ready_replicas: int = 0
    pending_replicas: int = 0
    desired_replicas: int | None = None
    engine: EngineParams | None = None

    @property
    def key(self) -> str:
        return variant_key(namespace=self.namespace, name=self.name)

    @property
    def group(self) -> str:
        return group_key(model_id=self.model_id, namespace=self.namespace)


@dataclass(frozen=True, slots=True)
class ReplicaMetrics:
    """Metrics of one engine instance (a vLLM server; the leader pod of an LWS group).

    `observed_at` is the time of the newest sample behind these figures, on the caller's clock;
    the core classifies it as fresh/stale/unavailable against `now`. Optional figures are None
    when the series was absent; analyzers treat None, NaN and Inf alike.
    """

    __pydantic_config__ = _STRICT_KEYS

    pod: str
    variant: str
    namespace: str
    observed_at: float
    kv_usage: float = 0.0
    queue_length: float = 0.0
    num_gpu_blocks: int | None = None
    block_size: int | None = None
    avg_input_tokens: float | None = None
    avg_output_tokens: float | None = None
    prefix_cache_hit_rate: float | None = None
    arrival_rate: float | None = None
    avg_ttft: float | None = None
    avg_itl: float | None = None
    running_requests: float | None = None

    @property
    def variant_key(self) -> str:
        return variant_key(namespace=self.namespace, name=self.variant)

    @property
    def kv_capacity_tokens(self) -> int:
        """`num_gpu_blocks × block_size`, or 0 when `cache_config_info` was absent."""
        if not self.num_gpu_blocks or not self.block_size:
            return 0
        if self.num_gpu_blocks <= 0 or self.block_size <= 0:
            return 0
        return self.num_gpu_blocks * self.block_size

    @property
    def tokens_in_use(self) -> int:
        """`round(kv_usage × capacity)`, clamped to [0, capacity] (WVA collector rule)."""
        total = self.kv_capacity_tokens
        usage = finite(self.kv_usage)
        if total == 0 or usage is None:
            return 0
        # Clamp the fraction first: an absurd finite usage (1e305) must not overflow the product.
        return round(min(1.0, max(0.0, usage)) * total)


@dataclass(frozen=True, slots=True)
class PoolMetrics:
    """Model-level metrics from the inference gateway (EPP) and the request counter.

    `queue_size`/`queue_bytes` are the EPP flow-control queue (requests not yet dispatched to any
    pod). `request_count` is `sum(increase(vllm:request_success_total[retention]))`; None means
    the query failed or was not made, which forbids scale-to-zero.
    """

    __pydantic_config__ = _STRICT_KEYS

    model_id: str
    namespace: str
    observed_at: float
    queue_size: float = 0.0
    queue_bytes: float = 0.0
    request_count: float | None = None
    arrival_rate: float | None = None

    @property
    def group(self) -> str:
        return group_key(model_id=self.model_id, namespace=self.namespace)


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Everything `decide()` may know about the world at one instant."""

    __pydantic_config__ = _STRICT_KEYS

    variants: tuple[Variant, ...] = ()
    replicas: tuple[ReplicaMetrics, ...] = ()
    pools: tuple[PoolMetrics, ...] = ()


@dataclass(frozen=True, slots=True)
class Decision:
    """The target of one variant for this cycle, with the figures behind it.

    `figures` holds the analyzer numbers (required/spare capacity, per-replica capacity,
    utilization, ...) under stable names, for status, metrics and the JSON face.
    `metrics_available`/`metrics_reason` feed the `MetricsAvailable` condition.
    """

    variant: str
    namespace: str
    model_id: str
    accelerator: str
    current: int
    target: int
    action: Action
    reason: str
    analyzer: str = ''
    figures: tuple[tuple[str, float], ...] = ()
    metrics_available: bool = True
    metrics_reason: str = 'MetricsFound'
    message: str = ''

    @property
    def key(self) -> str:
        return variant_key(namespace=self.namespace, name=self.variant)


def action_for(*, current: int, target: int) -> Action:
    """Classify a target against the current replica count."""
    if target > current:
        return Action.SCALE_UP
    if target < current:
        return Action.SCALE_DOWN
    return Action.NO_CHANGE


@dataclass(frozen=True, slots=True)
class K2Sample:
    """One observed compute-bound capacity (tokens in use at a saturated queue), with its time."""

    __pydantic_config__ = _STRICT_KEYS

    value: float
    at: float


@dataclass(frozen=True, slots=True)
class CapacityRecord:
    """What is known of one variant's per-replica capacity, kept for when it has no replicas.

    `source` is `live` (measured from running replicas) or `deployment` (derived from the engine
    arguments of the scale target). The memory bound k1 follows from `total_kv_capacity_tokens`
    (0 when unknown) and the KV-cache threshold.
    """

    __pydantic_config__ = _STRICT_KEYS

    namespace: str
    model_id: str
    variant: str
    accelerator: str
    gpus_per_replica: int
    effective_capacity: float
    total_kv_capacity_tokens: int
    source: Literal['live', 'deployment']
    updated_at: float
    engine: EngineParams | None = None


@dataclass(frozen=True, slots=True)
class State:
    """The decision core's memory between cycles (design.md §1), explicit so it can be persisted.

    - `k2_history`: rolling windows of observed compute-bound capacity, keyed
      `modelID|accelerator|gpusPerReplica|outputBucket`; samples expire (default 24 h).
    - `capacity`: capacity knowledge per variant, keyed `namespace|modelID|variant`; records expire
      (default 7 days).
    - `last_desired`: the last target decided per variant key (`namespace/name`).
    - `last_informative`: per `group|analyzer`, the time of the last informative result (liveness).
    """

    __pydantic_config__ = _STRICT_KEYS

    k2_history: tuple[tuple[str, tuple[K2Sample, ...]], ...] = ()
    capacity: tuple[tuple[str, CapacityRecord], ...] = ()
    last_desired: tuple[tuple[str, int], ...] = ()
    last_informative: tuple[tuple[str, float], ...] = ()

    def k2_history_map(self) -> dict[str, tuple[K2Sample, ...]]:
        return dict(self.k2_history)

    def capacity_map(self) -> dict[str, CapacityRecord]:
        return dict(self.capacity)

    def last_desired_map(self) -> dict[str, int]:
        return dict(self.last_desired)

    def last_informative_map(self) -> dict[str, float]:
        return dict(self.last_informative)


def sorted_items(mapping: dict[str, _V]) -> tuple[tuple[str, _V], ...]:
    """Freeze a mapping into a tuple of pairs sorted by key, the form `State` stores."""
    return tuple(sorted(mapping.items(), key=lambda item: item[0]))


EMPTY_STATE = State()
