"""The controller's view of the simulated fleet: scraped samples turned into a `Snapshot`.

Why: a policy must decide on what the controller would really know, not on the simulator's
internals. The controller builds its `Snapshot` from Prometheus (WVA's queries, llm-d
workload-variant-autoscaler v0.9.0, internal/collector/registration/; docs/snapshot.md): gauges
scraped every few seconds, seen with a lag, summarised over 1- and 5-minute windows. This module
records the same samples and applies the same windows, so the decision core gets in simulation
exactly the value type, staleness and smoothing it gets live.

What it computes. `scrape(now)` records, for every Ready non-terminating replica, its gauges
(kv usage, waiting, running) and cumulative counters, plus one gateway sample (queue size, queue
bytes, model-wide finished and arrived requests). `snapshot(now)` uses only samples taken at or
before the horizon `h = now − scrape_lag`; a window of length W is (h − W, h] (left-open, as
Prometheus range selectors are). Per replica with a visible sample:

- `observed_at` = time of its newest visible sample;
- `kv_usage`, `queue_length` = max over the 1-minute window (`max_over_time[1m]`), or the newest
  visible sample's value when the window holds none (a scrape interval longer than a minute);
- `avg_input_tokens`, `avg_output_tokens` = Δtokens_sum / Δsuccess between the first and the
  newest sample of the 5-minute window (rate/rate: the durations cancel); None when Δsuccess = 0;
- `avg_ttft`, `avg_itl` = Δsum / Δcount over the 1-minute window; None when Δcount = 0;
- `ttft_histogram`, `tpot_histogram` = the per-bucket increase over that window of the replica's
  `vllm:time_to_first_token_seconds` and `vllm:request_time_per_output_token_seconds` buckets
  (vLLM's bounds, `sim.vllm.latency_buckets`; counts cumulative, total the +Inf bucket); None with
  fewer than two samples in the window (or samples without buckets), total 0 when none finished;
- `arrival_rate` = Δdispatched / Δt over the 1-minute window; None with fewer than two samples;
- `prefix_cache_hit_rate` = Δhits / Δqueries of `vllm:prefix_cache_{hits,queries}_total` (tokens)
  over the 5-minute window, as the controller's query has it; None when Δqueries = 0 (no
  admission in the window, or prefix caching off);
- `running_requests` = the newest visible sample; `num_gpu_blocks`, `block_size` from the
  variant spec.

The pools, one per model (each model has its own gateway): `queue_size`/`queue_bytes` of the
newest visible sample of its gateway; `arrival_rate` = Δ(requests arrived at the gateway) / Δt
over the 1-minute window; `request_count` = increase of the model-wide finished counter from the
newest sample at or before h − retention_period to the newest visible sample: the counted span
starts up to one scrape interval before the window (the conservative side for scale-to-zero) and
ends at the newest scrape. Requests finished on replicas that have gone still count. Before any
sample of its gateway is visible a model has no pool.

The variants: every variant of every model, with its role (`VariantSpec.role`, what the token
analyzer reads), its accelerator and GPUs, and its replica counts as the scale target's status
gives them: `current_replicas` the target, `ready_replicas` the ready ones, `pending_replicas`
every other non-terminating one, those waiting for GPUs included (a Pending pod the scheduler
cannot place is in `status.replicas` and not ready). With disaggregated serving (`sim.fleet.disagg`)
each replica's figures are those of the legs it served, as its own `/metrics` would show them:
a prefill replica's requests have one output token, a decode replica's a prompt one token
longer than the request's.

`snapshot` is cached until a new sample becomes visible or the fleet changes (`Cluster.version`),
so the 1-second wake ticks cost almost nothing.

Replicas that are terminating or gone are not in the snapshot (the controller lists the pods of
the scale target); Pending ones are not scraped (no metrics endpoint yet).

What fails: `Observer` raises `ValueError` for a non-positive or non-finite scrape interval or
retention period, or a negative/NaN lag. Nothing is read from the wall clock; results are in
name order.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

from llmscaler.domain.snapshot import (
    EngineParams,
    GpuLimit,
    PoolMetrics,
    ReplicaMetrics,
    Snapshot,
    Variant,
)
from llmscaler.sim.fleet.cluster import Cluster
from llmscaler.sim.fleet.pods import Replica
from llmscaler.sim.vllm.latency_buckets import ITL_BUCKETS, TTFT_BUCKETS, histogram_increase
from llmscaler.sim.vocabulary import VariantSpec

GAUGE_WINDOW = 60.0
"""`max_over_time[1m]` of the KV and queue gauges; 1-minute rates (TTFT, ITL, arrivals)."""
AVERAGE_WINDOW = 300.0
"""5-minute rates of the prompt/generation token histograms."""


@dataclass(frozen=True, slots=True)
class ReplicaSample:
    """One scrape of one replica's `/metrics` (gauges and cumulative counters)."""

    time: float
    kv_usage: float
    waiting: int
    running: int
    prompt_tokens: float
    generation_tokens: float
    success: float
    ttft_sum: float
    ttft_count: float
    itl_sum: float
    itl_count: float
    dispatched: int
    prefix_queries: float = 0.0
    prefix_hits: float = 0.0
    # Cumulative per-bucket counts (`ReplicaCounters.ttft_buckets`, the last past every bound);
    # empty when the replica exposes no such histogram.
    ttft_buckets: tuple[int, ...] = ()
    tpot_buckets: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class GatewaySample:
    """One scrape of the gateway: its queue and the model-wide request counters."""

    time: float
    queue_size: int
    queue_bytes: int
    finished: int
    arrivals: int


class Observer:
    """Scrapes a `Cluster` and builds the `Snapshot` the controller would build at `now`."""

    def __init__(
        self, *, scrape_interval: float, scrape_lag: float, retention_period: float
    ) -> None:
        if not (scrape_interval > 0 and math.isfinite(scrape_interval)):
            raise ValueError(f'scrape_interval must be > 0 and finite, got {scrape_interval!r}')
        if not (scrape_lag >= 0 and math.isfinite(scrape_lag)):
            raise ValueError(f'scrape_lag must be >= 0 and finite, got {scrape_lag!r}')
        if not (retention_period > 0 and math.isfinite(retention_period)):
            raise ValueError(f'retention_period must be > 0 and finite, got {retention_period!r}')
        self.scrape_lag = scrape_lag
        self.retention_period = retention_period
        # Enough samples for the longest window behind the lag, plus the one before it.
        self._replica_len = math.ceil((AVERAGE_WINDOW + scrape_lag) / scrape_interval) + 3
        longest = max(AVERAGE_WINDOW, retention_period, GAUGE_WINDOW)
        self._gateway_len = math.ceil((longest + scrape_lag) / scrape_interval) + 3
        self._series: dict[str, deque[ReplicaSample]] = {}
        # Per model; '' holds the samples recorded without a model (a one-model fleet's).
        self._gateways: dict[str, deque[GatewaySample]] = {}
        self._trimmed: set[str] = set()
        self._cache_key: tuple[tuple[float, ...], int] | None = None
        self._cache: Snapshot | None = None

    def scrape(self, *, now: float, cluster: Cluster) -> None:
        """Record one sample of every Ready non-terminating replica and of the gateway."""
        # Replicas no longer routable never come back; their samples are no longer needed.
        self._series = {
            r.name: self._series.get(r.name) or self._buffer() for r in cluster.routable
        }
        for replica in cluster.routable:
            self.record_replica(name=replica.name, sample=_sample(replica=replica, now=now))
        for model, gateway in cluster.gateways.items():
            self.record_gateway(
                sample=GatewaySample(
                    time=now,
                    queue_size=len(gateway.queue),
                    queue_bytes=gateway.queue_bytes,
                    finished=gateway.finished_total,
                    arrivals=gateway.arrivals_total,
                ),
                model=model,
            )

    def record_replica(self, *, name: str, sample: ReplicaSample) -> None:
        """Append one scrape of replica `name` (samples must come in time order)."""
        buffer = self._series.get(name)
        if buffer is None:
            buffer = self._series[name] = self._buffer()
        buffer.append(sample)

    def record_gateway(self, *, sample: GatewaySample, model: str = '') -> None:
        """Append one scrape of `model`'s gateway (samples must come in time order); without a
        model, of the gateway of a one-model fleet."""
        gateway = self._gateways.get(model)
        if gateway is None:
            gateway = self._gateways[model] = deque(maxlen=self._gateway_len)
        if len(gateway) == gateway.maxlen:
            self._trimmed.add(model)
        gateway.append(sample)
        self._cache_key = None

    def _gateway(self, *, cluster: Cluster, model: str) -> str | None:
        """The key of `model`'s gateway samples (None when there are none)."""
        if model in self._gateways:
            return model
        if '' in self._gateways and len(cluster.model_names) == 1:
            return ''
        return None

    def _buffer(self) -> deque[ReplicaSample]:
        return deque(maxlen=self._replica_len)

    def snapshot(self, *, now: float, cluster: Cluster) -> Snapshot:
        """The `Snapshot` at `now` from the samples taken at or before `now − scrape_lag`."""
        horizon = now - self.scrape_lag
        newest: dict[str, GatewaySample] = {}
        for model in cluster.model_names:
            series = self._gateway(cluster=cluster, model=model)
            sample = None if series is None else _newest_visible(self._gateways[series], horizon)
            if series is not None and sample is not None:
                newest[series] = sample
        key = (tuple(s.time for s in newest.values()), cluster.version)
        if key == self._cache_key and self._cache is not None:
            return self._cache
        variants = tuple(_variant(cluster=cluster, spec=s) for s in cluster.specs.values())
        replicas: list[ReplicaMetrics] = []
        for replica in cluster.routable:
            buffer = self._series.get(replica.name)
            if buffer is None:
                continue
            metrics = _replica_metrics(
                replica=replica, spec=cluster.specs[replica.variant], buffer=buffer, horizon=horizon
            )
            if metrics is not None:
                replicas.append(metrics)
        pools: list[PoolMetrics] = []
        for model in cluster.model_names:
            series = self._gateway(cluster=cluster, model=model)
            if series is None or series not in newest:
                continue
            spec = cluster.specs[cluster.variants_of(model=model)[0]]
            pools.append(
                self._pool(spec=spec, series=series, newest=newest[series], horizon=horizon)
            )
        snapshot = Snapshot(
            variants=variants,
            replicas=tuple(replicas),
            pools=tuple(pools),
            # The scenario's GPU inventory feeds the limiter (`enableLimiter`) as the nodes do.
            gpu_limits=tuple(
                GpuLimit(provider='inventory', accelerator=accelerator, limit=count)
                for accelerator, count in sorted(cluster.inventory.items())
            ),
        )
        self._cache_key, self._cache = key, snapshot
        return snapshot

    def _pool(
        self, *, spec: VariantSpec, series: str, newest: GatewaySample, horizon: float
    ) -> PoolMetrics:
        window_start = horizon - GAUGE_WINDOW
        retention_start = horizon - self.retention_period
        first_in_window: GatewaySample | None = None
        gateway = self._gateways[series]
        # The counters start at 0 with the simulation; once old samples were dropped (only when
        # snapshots are asked for a time long before the newest sample), the oldest kept is the
        # best base there is.
        base = gateway[0].finished if series in self._trimmed else 0
        for sample in reversed(gateway):
            if sample.time > horizon:
                continue
            if sample.time > window_start:
                first_in_window = sample
            if sample.time <= retention_start:
                base = sample.finished
                break
        rate = None
        if first_in_window is not None and newest.time > first_in_window.time:
            rate = (newest.arrivals - first_in_window.arrivals) / (
                newest.time - first_in_window.time
            )
        return PoolMetrics(
            model_id=spec.model_id,
            namespace=spec.namespace,
            observed_at=newest.time,
            queue_size=float(newest.queue_size),
            queue_bytes=float(newest.queue_bytes),
            request_count=float(newest.finished - base),
            arrival_rate=rate,
        )


def _sample(*, replica: Replica, now: float) -> ReplicaSample:
    engine = replica.engine
    assert engine is not None
    c = engine.counters
    return ReplicaSample(
        time=now,
        kv_usage=float(engine.kv_usage),
        waiting=engine.waiting,
        running=engine.running,
        prompt_tokens=float(c.prompt_tokens_sum),
        generation_tokens=float(c.generation_tokens_sum),
        success=float(c.request_success_total),
        ttft_sum=float(c.ttft_sum),
        ttft_count=float(c.ttft_count),
        itl_sum=float(c.itl_sum),
        itl_count=float(c.itl_count),
        dispatched=replica.dispatched,
        prefix_queries=float(c.prefix_cache_queries_total),
        prefix_hits=float(c.prefix_cache_hits_total),
        ttft_buckets=tuple(c.ttft_buckets),
        tpot_buckets=tuple(c.tpot_buckets),
    )


def _newest_visible(buffer: deque[GatewaySample], horizon: float) -> GatewaySample | None:
    for sample in reversed(buffer):
        if sample.time <= horizon:
            return sample
    return None


def engine_params(*, spec: VariantSpec) -> EngineParams:
    """The serving parameters the controller would parse from the variant's vLLM arguments.

    A replica of N GPUs is one tensor-parallel group of N. `num_gpu_blocks_override` stays unset,
    as in a real deployment: the KV size is only known from a running replica's metrics.
    """
    return EngineParams(
        engine='vllm',
        max_num_seqs=spec.max_num_seqs,
        max_num_batched_tokens=spec.max_num_batched_tokens,
        max_model_len=spec.max_model_len,
        tensor_parallel_size=spec.gpus_per_replica,
        block_size=spec.block_size,
    )


def _variant(*, cluster: Cluster, spec: VariantSpec) -> Variant:
    return Variant(
        name=spec.name,
        namespace=spec.namespace,
        model_id=spec.model_id,
        cost=spec.cost_per_hour,
        accelerator=spec.accelerator,
        gpus_per_replica=spec.gpus_per_replica,
        role=spec.role,
        min_replicas=spec.min_replicas,
        max_replicas=spec.max_replicas,
        current_replicas=cluster.targets[spec.name],
        ready_replicas=cluster.ready_count(variant=spec.name),
        pending_replicas=cluster.pending_count(variant=spec.name),
        engine=engine_params(spec=spec),
    )


def _ratio(numerator: float, denominator: float) -> float | None:
    return numerator / denominator if denominator > 0 else None


def _replica_metrics(
    *, replica: Replica, spec: VariantSpec, buffer: deque[ReplicaSample], horizon: float
) -> ReplicaMetrics | None:
    gauge_start = horizon - GAUGE_WINDOW
    average_start = horizon - AVERAGE_WINDOW
    newest: ReplicaSample | None = None
    first_gauge: ReplicaSample | None = None
    first_average: ReplicaSample | None = None
    kv_max = -math.inf
    queue_max = -math.inf
    for sample in reversed(buffer):
        if sample.time > horizon:
            continue
        if newest is None:
            newest = sample
        if sample.time <= average_start:
            break
        first_average = sample
        if sample.time > gauge_start:
            first_gauge = sample
            kv_max = max(kv_max, sample.kv_usage)
            queue_max = max(queue_max, sample.waiting)
    if newest is None:
        return None
    if first_gauge is None:
        kv_max, queue_max = newest.kv_usage, newest.waiting
        first_gauge = newest
    if first_average is None:
        first_average = newest
    done = newest.success - first_average.success
    span = newest.time - first_gauge.time
    ttft = _ratio(
        newest.ttft_sum - first_gauge.ttft_sum, newest.ttft_count - first_gauge.ttft_count
    )
    itl = _ratio(newest.itl_sum - first_gauge.itl_sum, newest.itl_count - first_gauge.itl_count)
    ttft_histogram = tpot_histogram = None
    if first_gauge is not newest:
        ttft_histogram = histogram_increase(
            bounds=TTFT_BUCKETS, first=first_gauge.ttft_buckets, newest=newest.ttft_buckets
        )
        tpot_histogram = histogram_increase(
            bounds=ITL_BUCKETS, first=first_gauge.tpot_buckets, newest=newest.tpot_buckets
        )
    return ReplicaMetrics(
        pod=replica.name,
        variant=replica.variant,
        namespace=spec.namespace,
        observed_at=newest.time,
        kv_usage=kv_max,
        queue_length=float(queue_max),
        num_gpu_blocks=spec.num_gpu_blocks,
        block_size=spec.block_size,
        avg_input_tokens=_ratio(newest.prompt_tokens - first_average.prompt_tokens, done),
        avg_output_tokens=_ratio(newest.generation_tokens - first_average.generation_tokens, done),
        prefix_cache_hit_rate=_ratio(
            newest.prefix_hits - first_average.prefix_hits,
            newest.prefix_queries - first_average.prefix_queries,
        ),
        arrival_rate=(newest.dispatched - first_gauge.dispatched) / span if span > 0 else None,
        avg_ttft=ttft,
        avg_itl=itl,
        running_requests=float(newest.running),
        ttft_histogram=ttft_histogram,
        tpot_histogram=tpot_histogram,
    )
