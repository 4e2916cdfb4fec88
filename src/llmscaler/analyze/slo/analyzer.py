"""The SLO (queueing-model) analyzer of one model: tune, choose targets, size every variant.

Why: WVA's SLO analyzer (llm-d workload-variant-autoscaler,
internal/engines/analyzers/queueingmodel/analyzer.go on main after b08b1c7, read at commit
42ce1a7) scales on latency targets instead of saturation. Per model, per cycle, as it does, with
its defect fixed, on the performance model the configuration names (`performanceModel`): WVA
main's three parameters α, β, γ (`analyze.queueing.service_model`, the default) or the design
paper's four α, β, γ, δ (`analyze.queueing.perf_model`). A tuner record of the other model (a
change of `performanceModel`, a model moved from the predictive analyzer, which keeps four)
restarts from the seed.

1. **Workload.** Busy replicas (arrival rate > 0) give arrival-weighted means of input and
   output tokens, TTFT and ITL per variant and for the model. The model's demand is the
   gateway's arrival rate when the pool reports one, else Σ of the replicas' arrival rates.
2. **Tuner** (`tuningEnabled`, default true): one EKF step per variant with busy replicas
   (`analyze.learning.kalman`); a variant without a record starts from the configured
   `perfParms` of its accelerator (idle or not), else from a seed guessed from its first
   observation at the batch it was seen at (`kalman.guess_service_seed`, `kalman.guess_seed`),
   else the model's default seed (`kalman.DEFAULT_SERVICE_SEED`, `kalman.DEFAULT_SEED`); a
   changed engine fingerprint or changed configured values restart it. A controller restarted
   with an empty state therefore starts from the configured values. A step that fails keeps
   the previous parameters (WVA's fallback), and the variant is sized on them.
3. **Targets** (`analyze.queueing.targets`): explicit, inferred (k × unloaded), or fallback.
4. **Per-variant capacity**: the largest rate one replica sustains within the targets
   (`analyze.queueing.search.size`, WVA's binary search, max queue 100) for the model's token mix.
   **Observed-latency guard**: a variant whose busy replicas miss a target (arrival-weighted
   TTFT or ITL above it) sustains less than its current per-replica rate within the targets,
   whatever the model says; its capacity is capped at that rate × target/observed (at least
   half of it, so the fleet at most doubles per cycle).
5. **Needed vs current (the fix).** Supply is Σ current replicas × that rate, demand the
   model's arrival rate plus its backlog (the requests waiting on the replicas and at the
   gateway) drained over one cycle — a backlog is load the arrival rate no longer shows, and
   without it a model whose queue grows by thousands sheds the replica that would drain it.
   The result goes to the threshold post-step with thresholds 1.0 (the latency targets are
   the margin) and the cost-aware optimizer, which adds ⌈RC/PRC⌉ replicas of the cheapest
   variant or removes whole spare ones. WVA's main branch builds supply from
   the replicas it *wants*, so RC is 0 and SC < PRC: it can never change a count.

Missing inputs hold (the caller turns `SloAnalysis.missing` into a hold with that reason): no
arrival rate anywhere, no token mix, or no targets. A variant whose sizing fails (a target below
what even an idle replica achieves, parameters that cannot serve) gets capacity 0 (`error`) and
is not chosen; the reason names it.

Units: rates in requests/s; TTFT/ITL observed in seconds (snapshot) and converted to ms here;
targets in ms. Pure: the caller passes and keeps the tuner records.
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields

from llmscaler.analyze.learning import kalman
from llmscaler.analyze.queueing import targets as slo_targets
from llmscaler.analyze.queueing.perf_model import PerfParams
from llmscaler.analyze.queueing.queue_model import (
    DEFAULT_MAX_BATCH_SIZE,
    DEFAULT_MAX_QUEUE_SIZE,
    ModelParams,
    QueueAnalyzer,
    QueueError,
)
from llmscaler.analyze.queueing.search import SearchError, TargetPerf, max_rate
from llmscaler.analyze.queueing.service_model import ServiceParams
from llmscaler.analyze.slo.workload import MS, Columns, Workload
from llmscaler.analyze.slo.workload import columns as _columns
from llmscaler.analyze.slo.workload import joined_workload as _joined_workload
from llmscaler.analyze.slo.workload import running_mean as _running_mean

# `llmscaler.policies.predictive.policy` still takes `workload` from here; every other importer
# takes it from `analyze.slo.workload`, which defines it.
from llmscaler.analyze.slo.workload import workload_of as _workload_of
from llmscaler.config.resolved import PARAMETER_COUNT, THREE_PARAMETER, QueueingModelConfig
from llmscaler.domain.signals import AnalyzerResult, Totals, VariantCapacity
from llmscaler.domain.snapshot import EngineParams, PoolMetrics, ReplicaMetrics, Variant
from llmscaler.domain.state import KalmanRecord

ANALYZER = 'queueing-model'
_TUNED = operator.attrgetter(*(f.name for f in fields(KalmanRecord) if f.name != 'engine'))
"""What a tuner step reads of its record: all but the engine fingerprint."""


@dataclass(frozen=True, slots=True)
class SloAnalysis:
    """One model's SLO analysis: the capacities for the optimizer (None when holding), the
    targets and their source, the tuner records to keep, the per-variant reasons and figures."""

    result: AnalyzerResult | None
    missing: str
    targets: slo_targets.SloTargets | None
    kalman_updates: dict[str, KalmanRecord] = field(default_factory=dict)
    figures: tuple[tuple[str, float], ...] = ()
    variant_figures: dict[str, tuple[tuple[str, float], ...]] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)


def configured_seed(*, config: QueueingModelConfig, accelerator: str) -> ModelParams | None:
    """The configured (`perfParms`) parameters for variants on `accelerator`, if any, in the
    configured performance model. Values in the other model's form (only a merge of entries can
    give them: each entry's own form is checked when it is read) are not a seed of this one."""
    for acc, values in config.perf_parms or ():
        if acc == accelerator and len(values) == PARAMETER_COUNT[config.performance_model]:
            return ServiceParams(*values) if len(values) == 3 else PerfParams(*values)
    return None


def _fits(record: KalmanRecord, size: int) -> bool:
    """A record of the configured model: its state, seed and covariance all of its size."""
    return len(record.x) == size and len(record.seed) == size and len(record.p) == size * size


def engine_fingerprint(variant: Variant) -> str:
    """What the learnt parameters depend on: accelerator, GPUs and serving arguments."""
    return f'{variant.accelerator}|{variant.gpus_per_replica}|{_engine_text(variant.engine)}'


@functools.lru_cache(maxsize=256)
def _engine_text(engine: EngineParams | None) -> str:
    # A fleet has a few distinct engines and thousands of variants: each variant's fingerprint
    # is taken every cycle, and the dataclass's repr costs six times its hash.
    return repr(engine)


def max_batch(
    *, variant: Variant, replicas: Sequence[ReplicaMetrics], tokens_per_request: float | None
) -> int:
    """N of the queue: `--max-num-seqs` (WVA), but no more requests than the KV cache holds at
    the mix's mean occupancy (I + O/2 tokens each), the smallest cache of the variant's
    replicas. vLLM cannot batch more than its cache holds, and a queue that believes it can
    (1,024 sequences where 290 fit) promises several times the rate a replica sustains."""
    return _batch_limit(variant, _smallest_cache(replicas), tokens_per_request)


def _smallest_cache(replicas: Sequence[ReplicaMetrics]) -> float | None:
    """The smallest KV cache (tokens) the replicas report, None when none does."""
    caches = [c for r in replicas if (c := r.kv_capacity_tokens) > 0]
    return min(caches) if caches else None


def _batch_limit(variant: Variant, cache: float | None, tokens_per_request: float | None) -> int:
    seqs = variant.engine.max_num_seqs if variant.engine is not None else DEFAULT_MAX_BATCH_SIZE
    if cache is not None and tokens_per_request is not None and tokens_per_request > 0:
        return max(1, min(seqs, int(cache // tokens_per_request)))
    return seqs


def analyze(
    *,
    variants: Sequence[Variant],
    replicas: Sequence[ReplicaMetrics],
    pool: PoolMetrics | None,
    config: QueueingModelConfig,
    records: Mapping[str, KalmanRecord],
    now: float,
    interval: float,
    mix: tuple[float, float] | None = None,
) -> SloAnalysis:
    """The SLO analysis of one model (see the module docstring); `interval` is the cycle
    period (s) over which a backlog is to be drained; `mix`, when given, is the token mix
    (input, output tokens per request) sized on while no busy replica shows one."""
    by_variant: dict[str, list[ReplicaMetrics]] = {}
    for replica in replicas:
        by_variant.setdefault(replica.variant, []).append(replica)
    columns = {name: _columns(group) for name, group in by_variant.items()}
    no_columns: Columns = ([], ([],) * 5)
    loads = {v.name: _workload_of(columns.get(v.name, no_columns), running=False) for v in variants}
    model_load = _joined_workload(list(columns.values()))
    if mix is not None and model_load.busy == 0:
        model_load = model_load._replace(avg_input_tokens=mix[0], avg_output_tokens=mix[1])
    # Each variant's smallest KV cache bounds its batch for the tuner and for the sizing.
    caches = {v.name: _smallest_cache(by_variant.get(v.name, ())) for v in variants}
    updates: dict[str, KalmanRecord] = {}
    notes: dict[str, str] = {}
    params: dict[str, ModelParams] = {}
    three = config.performance_model == THREE_PARAMETER
    size = PARAMETER_COUNT[config.performance_model]
    # Variants of one model often share a tuner state and figures (same engine on several
    # pools): their tuner steps and sizings are computed once per analysis.
    steps: dict[tuple[tuple[object, ...], kalman.TunerObservation], kalman.TunerResult] = {}
    sizings: dict[tuple[object, ...], float | str] = {}
    for variant in variants:
        load = loads[variant.name]
        record_key = variant.key
        record = records.get(record_key)
        fingerprint = engine_fingerprint(variant)
        configured = configured_seed(config=config, accelerator=variant.accelerator)
        if record is not None and not _fits(record, size):
            record = None
            notes[variant.name] = (
                f'tuner restarted: performance model is {config.performance_model}'
            )
        elif record is not None and record.engine != fingerprint:
            record = None
            notes[variant.name] = 'tuner restarted: engine arguments changed'
        elif record is not None and configured is not None and record.seed != configured.as_tuple():
            record = None
            notes[variant.name] = 'tuner restarted: configured perfParms changed'
        if record is None and configured is not None:
            # Configured values seed the tuner, idle or not, and a restart starts there again.
            record = kalman.seed_record(seed=configured, engine=fingerprint, now=now)
        if record is None and load.arrival_rate > 0:
            batch = _batch(
                load._replace(running=_running_mean(columns.get(variant.name, no_columns)))
            )
            ttft, itl = load.ttft_ms or 0.0, load.itl_ms or 0.0
            inputs = load.avg_input_tokens or 0.0
            seed: ModelParams = (
                (
                    kalman.guess_service_seed(
                        ttft=ttft,
                        itl=itl,
                        avg_input_tokens=inputs,
                        avg_output_tokens=load.avg_output_tokens or 0.0,
                        batch=batch,
                    )
                    or kalman.DEFAULT_SERVICE_SEED
                )
                if three
                else (
                    kalman.guess_seed(ttft=ttft, itl=itl, avg_input_tokens=inputs, batch=batch)
                    or kalman.DEFAULT_SEED
                )
            )
            record = kalman.seed_record(seed=seed, engine=fingerprint, now=now)
        if record is None:
            continue
        if (
            config.tuning_enabled
            and load.arrival_rate > 0
            and None not in (load.ttft_ms, load.itl_ms, load.avg_input_tokens)
            and load.avg_output_tokens is not None
        ):
            obs = kalman.TunerObservation(
                arrival_rate=load.arrival_rate / max(1, load.busy),
                ttft=load.ttft_ms or 0.0,
                itl=load.itl_ms or 0.0,
                avg_input_tokens=load.avg_input_tokens or 0.0,
                avg_output_tokens=load.avg_output_tokens,
                max_batch_size=_batch_limit(variant, caches[variant.name], _occupancy(load)),
            )
            # The step does not read the fingerprint: variants whose filters stand at the same
            # place and see the same figures take the same step, computed once.
            same = (_TUNED(record), obs)
            if same not in steps:
                steps[same] = kalman.step(record=record, obs=obs, now=now)
            step = steps[same]
            record = (
                step.record
                if step.record.engine == record.engine
                else kalman.with_engine(step.record, engine=record.engine)
            )
            if not step.accepted:
                notes.setdefault(variant.name, f'tuner: {step.reason}')
        updates[record_key] = record
        params[variant.name] = kalman.model_params_of(record)

    demand = pool.arrival_rate if pool is not None and pool.arrival_rate is not None else None
    if demand is None and any(r.arrival_rate is not None for r in replicas):
        demand = model_load.arrival_rate
    missing = _missing(demand=demand, load=model_load)
    backlog = _backlog(replicas=replicas, pool=pool)
    if demand is not None and interval > 0:
        demand += backlog / interval
    targets = slo_targets.choose(
        explicit_ttft=config.target_ttft,
        explicit_itl=config.target_itl,
        learned=[params[n] for n in sorted(params)],
        avg_input_tokens=model_load.avg_input_tokens,
        avg_output_tokens=model_load.avg_output_tokens,
        multiplier=config.slo_multiplier,
        observed_ttft=model_load.ttft_ms,
        observed_itl=model_load.itl_ms,
    )
    if not missing and targets is None:
        missing = 'no SLO targets (none configured, no learned parameters, no observed TTFT/ITL)'
    if missing or demand is None or targets is None:
        return SloAnalysis(result=None, missing=missing, targets=targets, kalman_updates=updates)
    in_tokens = model_load.avg_input_tokens or 0.0
    out_tokens = max(1.0, model_load.avg_output_tokens or 1.0)
    capacities: list[VariantCapacity] = []
    variant_figures: dict[str, tuple[tuple[str, float], ...]] = {}
    for variant in variants:
        rate, reason, modelled = 0.0, 'no-data', 0.0
        if variant.name in params:
            batch = _batch_limit(variant, caches[variant.name], _occupancy(model_load))
            key = (params[variant.name], batch)
            if key not in sizings:
                sizings[key] = _size(
                    params=params[variant.name],
                    max_batch_size=batch,
                    in_tokens=in_tokens,
                    out_tokens=out_tokens,
                    targets=targets,
                )
            sized = sizings[key]
            if isinstance(sized, str):
                reason = 'error'
                notes[variant.name] = f'sizing failed: {sized}'
            else:
                rate, reason, modelled = sized, 'slo', sized
                guard = _observed_cap(load=loads[variant.name], targets=targets)
                if guard is not None and guard < rate:
                    rate = guard
                    notes[variant.name] = (
                        f'observed latency over target: capacity capped at {guard:.3g}/s'
                    )
        variant_load = loads[variant.name].arrival_rate
        needed = math.ceil(variant_load / rate - 1e-9) if rate > 0 else 0
        variant_figures[variant.name] = (
            ('max_rate_per_replica', rate),
            ('model_rate_per_replica', modelled),
            ('needed_replicas', float(needed)),
            *(
                (f'perf_{name}', value)
                for name, value in zip(
                    ('alpha', 'beta', 'gamma', 'delta'),
                    params[variant.name].as_tuple() if variant.name in params else (),
                    strict=False,
                )
            ),
        )
        capacities.append(
            VariantCapacity(
                variant=variant.name,
                namespace=variant.namespace,
                role=variant.role,
                cost=variant.cost,
                accelerator=variant.accelerator,
                gpus_per_replica=variant.gpus_per_replica,
                min_replicas=variant.min_replicas,
                max_replicas=variant.max_replicas,
                current_replicas=variant.current_replicas,
                per_replica_capacity=rate,
                replica_count=variant.current_replicas,
                pending=variant.pending_replicas,
                total_demand=variant_load,
                reason=reason,
            )
        )
    supply = math.fsum(c.per_replica_capacity * c.current_replicas for c in capacities)
    result = AnalyzerResult(
        analyzer=ANALYZER,
        variants=tuple(capacities),
        # Current replicas already include the pending ones: anticipated = supply.
        totals=Totals(supply=supply, anticipated_supply=supply, demand=demand),
        scale_up_threshold=1.0,
        scale_down_boundary=1.0,
    )
    return SloAnalysis(
        result=result,
        missing='',
        targets=targets,
        kalman_updates=updates,
        figures=(
            ('arrival_rate', demand - backlog / interval if interval > 0 else demand),
            ('backlog_requests', backlog),
            ('slo_target_source', slo_targets.SOURCE_CODES[targets.source]),
            ('slo_ttft_ms', targets.ttft),
            ('slo_itl_ms', targets.itl),
            ('slo_supply', supply),
        ),
        variant_figures=variant_figures,
        notes=notes,
    )


MAX_CAP_STEP = 0.5
"""The observed-latency guard lowers a replica's capacity by at most half per cycle."""


def _observed_cap(*, load: Workload, targets: slo_targets.SloTargets) -> float | None:
    """What one replica demonstrably sustains when its observed TTFT or ITL misses a target:
    its current per-replica arrival rate × observed/target headroom, at least half of it.

    The queue model can be wrong (a KV cache that preempts, chunked prefill it does not know);
    replicas that miss the targets at λ per replica do not sustain λ within them, whatever the
    model says. None when the variant meets both targets or reports no latency."""
    if load.busy == 0 or load.ttft_ms is None or load.itl_ms is None:
        return None
    ratio = min(
        targets.ttft / load.ttft_ms if load.ttft_ms > 0 else 1.0,
        targets.itl / load.itl_ms if load.itl_ms > 0 else 1.0,
    )
    if ratio >= 1:
        return None
    return load.arrival_rate / load.busy * max(MAX_CAP_STEP, ratio)


def _batch(load: Workload) -> float | None:
    """Requests in service per replica: reported, else by Little's law (per-replica rate × the
    time a request spends, TTFT + O·ITL)."""
    if load.running is not None:
        return load.running
    if load.busy and load.ttft_ms is not None and load.itl_ms is not None:
        per_replica = load.arrival_rate / load.busy
        out = load.avg_output_tokens or 1.0
        return per_replica * (load.ttft_ms + out * load.itl_ms) / MS
    return None


_QUEUED = operator.attrgetter('queue_length')


def _backlog(*, replicas: Sequence[ReplicaMetrics], pool: PoolMetrics | None) -> float:
    """Requests waiting: every replica's queue and the gateway's (an unread one holds the model
    before this is used: `analyze.observation`)."""
    waiting = math.fsum([q for q in map(_QUEUED, replicas) if q])
    return waiting + ((pool.queue_size or 0.0) if pool is not None else 0.0)


def _occupancy(load: Workload) -> float | None:
    """Mean KV tokens a request holds while in service: I + O/2."""
    if load.avg_input_tokens is None or load.avg_output_tokens is None:
        return None
    return load.avg_input_tokens + load.avg_output_tokens / 2


def _missing(*, demand: float | None, load: Workload) -> str:
    absent = []
    if demand is None:
        absent.append('arrival_rate')
    if demand is not None and demand > 0:
        if load.avg_input_tokens is None:
            absent.append('avg_input_tokens')
        if load.avg_output_tokens is None:
            absent.append('avg_output_tokens')
    if demand is not None and demand == 0 and load.avg_output_tokens is None:
        # Idle: nothing to size against; the optimizer may still shed spare replicas only
        # with a capacity, which needs a token mix.
        absent.append('avg_input_tokens/avg_output_tokens (no busy replica)')
    return f'missing {", ".join(absent)}' if absent else ''


def _size(
    *,
    params: ModelParams,
    max_batch_size: int,
    in_tokens: float,
    out_tokens: float,
    targets: slo_targets.SloTargets,
) -> float | str:
    analyzer = QueueAnalyzer.build(
        params=params,
        max_batch_size=max_batch_size,
        max_queue_size=DEFAULT_MAX_QUEUE_SIZE,
        avg_input_tokens=in_tokens,
        avg_output_tokens=out_tokens,
    )
    if isinstance(analyzer, QueueError):
        return analyzer.message
    sized = max_rate(analyzer=analyzer, targets=TargetPerf(ttft=targets.ttft, itl=targets.itl))
    return sized.message if isinstance(sized, SearchError) else sized
