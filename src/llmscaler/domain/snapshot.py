"""What the adapters hand the core each cycle (`Snapshot`) and what it decides (`Decision`).

Why: the snapshot is the one input of `engine.decide()`, built alike by the Prometheus source,
the pod scraper and the simulator; its ranges are declared on its fields (`domain.basics`) and
checked by `analyze.validity` before any analysis.

What fails: nothing raises; construction does not validate.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import inf, isfinite
from typing import Annotated, Final

from annotated_types import Ge, Gt, Le

from llmscaler.domain.basics import (
    COUNT_MAX,
    STRICT_KEYS,
    Action,
    Count,
    EngineKind,
    Fraction,
    NonNegative,
    PositiveCount,
    Role,
    group_key,
    variant_key,
)


@dataclass(frozen=True, slots=True)
class EngineParams:
    """Serving parameters parsed from a variant's pod template (vLLM or SGLang arguments).

    `max_num_batched_tokens` is the *effective* per-step token budget after the chunked-prefill
    defaults were applied (see `llmscaler.kube.engine_args.template`).
    """

    __pydantic_config__ = STRICT_KEYS

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


DEFAULT_COST: Final = 10.0
"""The cost of one replica of a variant whose cost is unknown: WVA's default `variantCost`."""


def effective_cost(cost: float | None) -> float:
    """The cost every choice between variants prices one replica at: `cost` when it is a finite
    number above 0, otherwise `DEFAULT_COST` (None, NaN, ±Inf, 0 and negatives alike).

    One rule for every such choice: the optimizers' cheapest capacity (`optimize.cost_aware`,
    `optimize.limited`), the exact cheapest cover (`optimize.cover`), the variant kept at one
    replica (`enforce.scale_to_zero`) and the variant woken from zero
    (`enforce.scale_from_zero`). With one rule they pick the same variant: the one woken from
    zero is the one kept when the model idles and the one the optimizer grows. A cost that
    cannot be read is neither free nor a reason to skip the variant (its capacity still
    serves): it is priced as WVA prices a VariantAutoscaling without `variantCost`. A cost of 0
    counts as unknown too: priced at 0, every such variant would tie on cost per unit of
    capacity whatever its capacity, and WVA reads it so.
    """
    # One chained comparison: NaN and ±Inf fail it.
    return cost if cost is not None and 0.0 < cost < inf else DEFAULT_COST


@dataclass(frozen=True, slots=True)
class Variant:
    """One scale target serving one model on one hardware/serving configuration.

    `current_replicas` is the scale target's `spec.replicas` (group units for LWS);
    `ready_replicas` and `pending_replicas` come from its status
    (pending = `status.replicas - status.readyReplicas`, clamped at 0, computed by the adapter).
    `desired_replicas` is the last desired count the autoscaler published (VA status), used to
    seed the decision memory after a restart; None when unknown.
    """

    __pydantic_config__ = STRICT_KEYS

    name: str
    namespace: str
    model_id: str
    cost: NonNegative = DEFAULT_COST
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

    @property
    def effective_cost(self) -> float:
        """`cost` under the one cost rule (`effective_cost`)."""
        return effective_cost(self.cost)


@dataclass(frozen=True, slots=True)
class LatencyHistogram:
    """Requests that finished in the window, by latency (a Prometheus histogram's increase).

    `counts[i]` is the number whose latency was at most `bounds[i]` seconds (cumulative, as the
    `_bucket{le=...}` series are); `total` is all of them (the `+Inf` bucket). Valid: bounds
    finite, > 0 and strictly ascending; as many counts as bounds, finite, non-decreasing, within
    [0, total] (`analyze.validity` reports anything else, and the replica is not reporting).
    """

    __pydantic_config__ = STRICT_KEYS

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

    __pydantic_config__ = STRICT_KEYS

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
        return tokens_in_use_of(total=self.kv_capacity_tokens, usage=self.kv_usage)


@dataclass(frozen=True, slots=True)
class PoolMetrics:
    """Model-level metrics from the inference gateway (EPP) and the request counter.

    `queue_size`/`queue_bytes` are the EPP flow-control queue (requests not yet dispatched to any
    pod): 0 when the gateway has no such queue, None when it could not be read this cycle (the
    query failed), which holds the model like any missing figure: an unread queue is not an
    empty one. `request_count` is `sum(increase(vllm:request_success_total[retention]))`; None
    means the query failed or was not made, which forbids scale-to-zero.
    """

    __pydantic_config__ = STRICT_KEYS

    model_id: str
    namespace: str
    observed_at: float
    queue_size: NonNegative | None = 0.0
    queue_bytes: NonNegative | None = 0.0
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

    __pydantic_config__ = STRICT_KEYS

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

    __pydantic_config__ = STRICT_KEYS

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


def tokens_in_use_of(*, total: int, usage: float | None) -> int:
    """`round(usage × total)` with the usage clamped to [0, 1] (WVA collector rule); 0 when
    there is no cache (`total` 0) or the usage is absent, NaN or ±Inf. A function of its own
    so that a caller that already holds `total` need not compute it again."""
    if total == 0 or usage is None or not isfinite(usage):
        return 0
    # Clamp the fraction first: an absurd finite usage (1e305) must not overflow the product.
    return round(min(1.0, max(0.0, usage)) * total)


def action_for(*, current: int, target: int) -> Action:
    """Classify a target against the current replica count."""
    if target > current:
        return Action.SCALE_UP
    if target < current:
        return Action.SCALE_DOWN
    return Action.NO_CHANGE
