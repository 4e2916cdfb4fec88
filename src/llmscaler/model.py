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

Ranges are declared once, on the fields, as `annotated_types` metadata (pure metadata, no
validation library): the JSON face (`llmscaler.io`) validates and publishes them through pydantic,
and `replica_problems` / `pool_problems` read the same metadata to judge the metrics the adapters
hand to `engine.decide()`.

What fails: nothing here raises on odd values; construction does not validate. A metric that is
missing, non-finite or outside its declared range makes its model hold (`engine`), and the
analyzers still treat NaN, Inf and negatives as absent.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import Annotated, Final, Literal, TypeVar

from annotated_types import Ge, Gt, Le

_V = TypeVar('_V')

# Read by the JSON face (llmscaler.io) when it validates input: unknown keys are errors, so a
# misspelt field is reported instead of silently ignored; types are strict (no "3" for 3, no true
# for 1, no 3.0 for an int); NaN and ±Inf are refused. A plain dict keeps the core free of any
# validation library.
_STRICT_KEYS = {'extra': 'forbid', 'strict': True, 'allow_inf_nan': False}

COUNT_MAX: Final = 2**31 - 1
"""Upper bound of every count (replicas, blocks, tokens per step): Kubernetes' int32."""

Count = Annotated[int, Ge(0), Le(COUNT_MAX)]
"""A count of replicas or GPUs: 0 to 2^31 - 1."""
PositiveCount = Annotated[int, Ge(1), Le(COUNT_MAX)]
"""A size that cannot be 0 (maximum replicas, KV blocks, block size, parallel sizes)."""
Fraction = Annotated[float, Ge(0.0), Le(1.0)]
"""A share in [0, 1] (KV-cache usage, prefix-cache hit rate)."""
NonNegative = Annotated[float, Ge(0.0)]
"""A finite figure that cannot be negative (queue lengths, token lengths, rates, latencies)."""

REQUIRED_REPLICA_FIGURES: Final = ('kv_usage', 'queue_length')
"""The figures every analyzer needs from every replica: without one, the replica is not reporting.
The token analyzer also needs the KV-cache size (`num_gpu_blocks` × `block_size`) or a stored
capacity for the variant; it names the replicas it cannot size (`TokenAnalysis.unsized`)."""

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
    max_num_seqs: PositiveCount = 256
    max_num_batched_tokens: PositiveCount = 8192
    max_model_len: PositiveCount | None = None
    tensor_parallel_size: PositiveCount = 1
    data_parallel_size: PositiveCount = 1
    block_size: PositiveCount = 16
    gpu_memory_utilization: Annotated[float, Gt(0.0), Le(1.0)] = 0.9
    kv_cache_dtype: str = 'auto'
    num_gpu_blocks_override: PositiveCount | None = None
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
    cost: NonNegative = 10.0
    accelerator: str = 'unknown'
    gpus_per_replica: Count = 1
    role: Role = 'both'
    min_replicas: Count = 1
    max_replicas: PositiveCount = 2
    current_replicas: Count = 0
    ready_replicas: Count = 0
    pending_replicas: Count = 0
    desired_replicas: Count | None = None
    engine: EngineParams | None = None

    @property
    def key(self) -> str:
        return variant_key(namespace=self.namespace, name=self.name)

    @property
    def group(self) -> str:
        return group_key(model_id=self.model_id, namespace=self.namespace)


@dataclass(frozen=True, slots=True)
class LatencyHistogram:
    """Requests that finished in the window, by latency (a Prometheus histogram's increase).

    `counts[i]` is the number whose latency was at most `bounds[i]` seconds (cumulative, as the
    `_bucket{le=...}` series are); `total` is all of them (the `+Inf` bucket). Valid: bounds
    finite, > 0 and strictly ascending; as many counts as bounds, finite, non-decreasing, within
    [0, total] (`analyze.validity` reports anything else, and the replica is not reporting).
    """

    __pydantic_config__ = _STRICT_KEYS

    bounds: tuple[float, ...]
    counts: tuple[float, ...]
    total: NonNegative


@dataclass(frozen=True, slots=True)
class ReplicaMetrics:
    """Metrics of one engine instance (a vLLM server; the leader pod of an LWS group).

    `observed_at` is the time of the newest sample behind these figures, on the caller's clock;
    the core classifies it as fresh/stale/unavailable against `now`. A figure is None when its
    series was absent. `kv_usage` and `queue_length` are required (`REQUIRED_REPLICA_FIGURES`):
    without them, or with any figure non-finite or outside its range (`replica_problems`), the
    replica is not reporting and its model holds. A missing figure is never read as 0.
    """

    __pydantic_config__ = _STRICT_KEYS

    pod: str
    variant: str
    namespace: str
    observed_at: float
    kv_usage: Fraction | None = None
    queue_length: NonNegative | None = None
    num_gpu_blocks: PositiveCount | None = None
    block_size: PositiveCount | None = None
    avg_input_tokens: NonNegative | None = None
    avg_output_tokens: NonNegative | None = None
    prefix_cache_hit_rate: Fraction | None = None
    arrival_rate: NonNegative | None = None
    avg_ttft: NonNegative | None = None
    avg_itl: NonNegative | None = None
    running_requests: NonNegative | None = None
    ttft_histogram: LatencyHistogram | None = None
    """Finished requests of the 1-minute window by TTFT (`vllm:time_to_first_token_seconds`)."""
    tpot_histogram: LatencyHistogram | None = None
    """Finished requests of the 1-minute window by their own mean time per output token
    (`vllm:request_time_per_output_token_seconds`: decode time / (output tokens − 1), 0 for one
    token). Optional, as is `ttft_histogram`: absent on older vLLM; the predictive analyzer
    then learns from the mean latencies only."""

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
    queue_size: NonNegative = 0.0
    queue_bytes: NonNegative = 0.0
    request_count: NonNegative | None = None
    arrival_rate: NonNegative | None = None

    @property
    def group(self) -> str:
        return group_key(model_id=self.model_id, namespace=self.namespace)


UNLIMITED_GPUS: Final = -1
"""A `GpuLimit.limit` that does not limit (WVA's -1)."""


@dataclass(frozen=True, slots=True)
class GpuLimit:
    """GPUs of one accelerator type that one provider allows, cluster-wide or in one namespace.

    `provider` names where the figure comes from (`inventory`: the nodes' allocatable GPUs;
    `quota`: a per-namespace or cluster quota; the simulator's scenario). `limit` is a count of
    GPUs, or -1 for unlimited. `used` counts GPUs held by pods that are *not* replicas of the
    snapshot's variants (other workloads on the same nodes, or in the same namespace); the core
    adds the GPUs of the variants' current replicas itself (`optimize.constraints`).
    `namespace` '' is the cluster scope; a namespace makes it a per-namespace pool.
    """

    __pydantic_config__ = _STRICT_KEYS

    provider: str
    accelerator: str
    limit: Annotated[int, Ge(UNLIMITED_GPUS), Le(COUNT_MAX)]
    used: Count = 0
    namespace: str = ''


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Everything `decide()` may know about the world at one instant.

    `gpu_limits` feeds the GPU limiter (`enableLimiter`); empty means no provider could say,
    and the limiter then leaves the decisions as the unlimited optimizer made them.
    """

    __pydantic_config__ = _STRICT_KEYS

    variants: tuple[Variant, ...] = ()
    replicas: tuple[ReplicaMetrics, ...] = ()
    pools: tuple[PoolMetrics, ...] = ()
    gpu_limits: tuple[GpuLimit, ...] = ()


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
    limited: int = 0
    """Replicas the GPU limiter held back from this variant's target this cycle."""
    limiter: str = ''
    """The GPU limiter's one-line verdict on the variant's model; '' when it did not run."""

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

    value: NonNegative
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
    gpus_per_replica: Count
    effective_capacity: NonNegative
    total_kv_capacity_tokens: Annotated[int, Ge(0), Le(2**63 - 1)]
    source: Literal['live', 'deployment']
    updated_at: float
    engine: EngineParams | None = None


@dataclass(frozen=True, slots=True)
class KalmanRecord:
    """One variant's performance-model tuner (`analyze.kalman`): state, covariance and origin.

    `x` is [α, β, γ, δ] in ms (seed 002's ITL = α + β·b, prefill = γ + δ·n_in·b); `p` its 4×4
    covariance, row-major; `seed` the values the filter started from (its bounds are
    [seed/100, seed×100]); `engine` the fingerprint of the serving arguments and accelerator it
    learnt on (a change restarts from the seed); `nis` the last normalised innovation;
    `rejected` the count of rejected steps in a row; `updated_at` the last accepted step.
    """

    __pydantic_config__ = _STRICT_KEYS

    x: tuple[float, float, float, float]
    p: tuple[float, ...]
    seed: tuple[float, float, float, float]
    engine: str
    nis: float = 0.0
    rejected: Count = 0
    updated_at: float = 0.0


@dataclass(frozen=True, slots=True)
class RateSample:
    """One cycle of a model's predictive analysis: the arrival rate observed (req/s) and the
    capacity sized for then (`need`, req/s: forecast upper bound plus backlog), at `at`."""

    __pydantic_config__ = _STRICT_KEYS

    at: float
    rate: NonNegative
    need: NonNegative = 0.0
    draining: bool = False
    """A backlog was being drained then: requests that missed their targets in the minute after
    it were late for want of replicas, and say nothing of what a replica sustains."""


@dataclass(frozen=True, slots=True)
class VariantLearning:
    """What the predictive analyzer has learnt of one variant from the latencies it showed.

    `scale` is the factor κ applied to the modelled capacity at the SLO; `demonstrated` the
    highest rate per replica (req/s) at which the variant was seen meeting its targets, the
    most a scale-down may count on it for beyond `analyze.predictive.TRUST` (0: never seen)."""

    __pydantic_config__ = _STRICT_KEYS

    scale: Annotated[float, Gt(0.0)] = 1.0
    demonstrated: NonNegative = 0.0


@dataclass(frozen=True, slots=True)
class State:
    """The decision core's memory between cycles (design.md §1), explicit so it can be persisted.

    - `k2_history`: rolling windows of observed compute-bound capacity, keyed
      `modelID|accelerator|gpusPerReplica|outputBucket`; samples expire (default 24 h).
    - `capacity`: capacity knowledge per variant, keyed `namespace|modelID|variant`; records expire
      (default 7 days).
    - `last_desired`: the last target decided per variant key (`namespace/name`).
    - `last_informative`: per `group|analyzer`, the time of the last informative result (liveness).
    - `kalman`: the SLO analyzer's tuner per variant key (`namespace/name`); variants gone from
      the snapshot are dropped, and a restart (an empty state) seeds each variant again from
      its first observation.
    - `forecast`: the predictive analyzer's recent samples per group (`modelID|namespace`),
      kept for its `historySeconds`.
    - `learning`: per variant key, what the predictive analyzer learnt from the latencies the
      variant showed (`VariantLearning`; absent: nothing yet).
    """

    __pydantic_config__ = _STRICT_KEYS

    k2_history: tuple[tuple[str, tuple[K2Sample, ...]], ...] = ()
    capacity: tuple[tuple[str, CapacityRecord], ...] = ()
    last_desired: tuple[tuple[str, Count], ...] = ()
    last_informative: tuple[tuple[str, float], ...] = ()
    kalman: tuple[tuple[str, KalmanRecord], ...] = ()
    forecast: tuple[tuple[str, tuple[RateSample, ...]], ...] = ()
    learning: tuple[tuple[str, VariantLearning], ...] = ()

    def k2_history_map(self) -> dict[str, tuple[K2Sample, ...]]:
        return dict(self.k2_history)

    def capacity_map(self) -> dict[str, CapacityRecord]:
        return dict(self.capacity)

    def last_desired_map(self) -> dict[str, int]:
        return dict(self.last_desired)

    def last_informative_map(self) -> dict[str, float]:
        return dict(self.last_informative)

    def kalman_map(self) -> dict[str, KalmanRecord]:
        return dict(self.kalman)

    def forecast_map(self) -> dict[str, tuple[RateSample, ...]]:
        return dict(self.forecast)

    def learning_map(self) -> dict[str, VariantLearning]:
        return dict(self.learning)


def sorted_items(mapping: dict[str, _V]) -> tuple[tuple[str, _V], ...]:
    """Freeze a mapping into a tuple of pairs sorted by key, the form `State` stores."""
    return tuple(sorted(mapping.items(), key=lambda item: item[0]))


EMPTY_STATE = State()
