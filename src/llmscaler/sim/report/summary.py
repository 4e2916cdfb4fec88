"""The numbers a simulated run is judged by: cost, latency percentiles, SLO attainment, churn.

Why: `llmscaler simulate` compares policies on the same trace; each `SimResult` is boiled down to
one `PolicySummary` so the table, the JSON report and the plots all quote the same figures.

What it computes (`summarize`), for one result:

- cost_usd = Σ_v replica_seconds_v / 3600 × cost_per_hour_v; gpu_hours = Σ_v replica_seconds_v /
  3600 × gpus_per_replica_v; replica_hours per variant (every variant of the result, sorted by
  name); mean_replicas = Σ_v replica_seconds_v / charged_until (the time-weighted mean number
  of replicas that existed, consistent with the cost). Replicas are charged until the work is
  done (`SimResult.charged_until`: the last arrival or completion; `duration` when NaN): a
  policy that cannot know the trace ends would otherwise pay its scale-down delay after it,
  while a clairvoyant one does not. tail_cost_usd is what the replicas cost after that
  (`tail_replica_seconds`), reported apart.
- Request outcomes: *completed* = not failed and with a finite finish time; *failed* = the
  `failed` flag; *incomplete* = neither (still queued or running when the run ended). They add
  up to `requests`. Failures by their `failure` reason: failed_queue_timeout (timed out in the
  gateway queue), failed_replica_timeout (the client's time-out ran out in a replica, waiting or
  running), failed_rejected (refused by the replica); a failure without a recorded reason is in
  `failed` only.
- TTFT p50/p90/p99 and mean-ITL p50/p90/p99 over completed requests, in seconds. Mean ITL =
  (finished − first_token) / (output_tokens − 1); single-token outputs have none and are left out
  of the ITL percentiles. Percentiles are numpy's default 'linear' method (type 7 of Hyndman and
  Fan: the value at rank (n − 1)·q, interpolated between its neighbours), so the p99 of two
  values 1 and 2 is 1.99.
- slo_attainment = share of ALL requests that completed with TTFT ≤ slo.ttft and mean ITL ≤
  slo.itl (single-token outputs: the TTFT test only). Failed and incomplete requests are misses.
- scale_events = number of events; scale_ups / scale_downs = those with after > / < before.
- throughput = output tokens of completed requests / duration (tokens per second).
- cost_vs_reference = cost_usd / reference_cost (None when no reference is given).
- prefix_hit_rate = Σ cached prompt tokens / Σ prompt tokens over completed requests (each
  request's tokens found in its replica's prefix cache at its last admission), when the
  variants keep a prefix cache (`VariantSpec.prefix_caching`); None otherwise.

`per_minute` buckets requests by the minute they ARRIVED in (a cohort view: a burst's latency
shows at the burst, however long its requests waited), and `summarize_all` summarises a list of
results against the reference policy's cost (the clairvoyant baseline by default). Both read the
few request fields they need as numpy columns (`request_columns`), copied in one pass over the
request objects (a run holds up to millions), so that everything after is vectorised; the
per-minute percentile (`grouped_percentile`) is too, as a day-long trace has thousands of
minutes.

Several models: `slo` may give an SLO per model name, each request judged by its model's (a
model it does not name falls back to its only entry, or fails); `summarize(model=M)` summarises
the part of a result that is model M's: its requests, the replica-hours and events of its
variants (`VariantSpec.model_name`); `summarize_models` does so for every model, against the
reference policy's cost for that model. `gpu_summary` says how the GPU inventory was used: peak
and time-weighted mean GPUs bound per accelerator type (from the timeline samples), and the
replicas that waited for GPUs, how long in all and at most.

Bad input never raises except where noted. No requests: counts are 0, percentiles, attainment and
throughput NaN. A duration that is not a finite positive number makes throughput and
mean_replicas NaN. A completed request without a finite first-token time has NaN TTFT: it is left
out of the percentiles and counts as an SLO miss. An SLO bound that is NaN is never met; an
infinite one always is. A NaN replica_seconds makes the cost NaN. A reference cost of 0 gives a
ratio of inf (or NaN for a zero cost). Raises `ValueError` for a replica_seconds entry of a
variant the result has no spec for (it cannot be priced) or a negative replica_seconds.
In `per_minute`, arrivals before 0 are counted in minute 0 and NaN arrivals are left out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from llmscaler.sim.vocabulary import SLO, Failure, FloatArray, SimResult

SLOs = SLO | Mapping[str, SLO]
"""One SLO for every request, or one per model name."""

PERCENTILES = (50.0, 90.0, 99.0)


@dataclass(frozen=True, slots=True)
class PolicySummary:
    """One policy's run in numbers (times in seconds, money in US dollars)."""

    policy: str
    trace: str
    duration: float
    cost_usd: float
    gpu_hours: float
    requests: int
    completed: int
    failed: int
    incomplete: int
    failed_queue_timeout: int
    failed_replica_timeout: int
    failed_rejected: int
    ttft_p50: float
    ttft_p90: float
    ttft_p99: float
    itl_p50: float
    itl_p90: float
    itl_p99: float
    slo_attainment: float
    scale_events: int
    scale_ups: int
    scale_downs: int
    replica_hours: dict[str, float]
    mean_replicas: float
    cost_vs_reference: float | None
    throughput: float
    prefix_hit_rate: float | None = None
    """Share of the completed requests' prompt tokens found in a prefix cache; None when no
    variant keeps one."""
    tail_cost_usd: float = 0.0
    """What the replicas cost after the work was done (`SimResult.charged_until`; not in
    `cost_usd`)."""


BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True, slots=True)
class RequestColumns:
    """The request fields the metrics need, as columns."""

    arrival: FloatArray
    first_token: FloatArray
    finished: FloatArray
    output_tokens: FloatArray
    failed: BoolArray
    failures: dict[Failure, int]

    @property
    def completed(self) -> BoolArray:
        return ~self.failed & np.isfinite(self.finished)

    @property
    def ttft(self) -> FloatArray:
        return self.first_token - self.arrival

    @property
    def mean_itl(self) -> FloatArray:
        """NaN for single-token outputs, as `SimRequest.mean_itl`."""
        gaps = np.maximum(self.output_tokens - 1.0, 1.0)
        itl = (self.finished - self.first_token) / gaps
        return np.where(self.output_tokens > 1.0, itl, math.nan)


def request_columns(*, result: SimResult) -> RequestColumns:
    """The columns of a result's requests, in request order."""
    # One pass over the request objects; everything after is vectorised.
    requests = result.requests
    rows = np.array(
        [(r.arrival, r.first_token, r.finished, r.output_tokens, r.failed) for r in requests],
        dtype=np.float64,
    ).reshape(-1, 5)
    failed = rows[:, 4] != 0.0
    failures: dict[Failure, int] = {}
    if failed.any():  # failures are few; no second pass over a run without any
        for r in requests:
            if r.failed:
                failures[r.failure] = failures.get(r.failure, 0) + 1
    return RequestColumns(
        arrival=rows[:, 0],
        first_token=rows[:, 1],
        finished=rows[:, 2],
        output_tokens=rows[:, 3],
        failed=failed,
        failures=failures,
    )


def grouped_percentile(
    *, groups: npt.NDArray[np.int64], values: FloatArray, n_groups: int, q: float
) -> FloatArray:
    """The 'linear' q-th percentile (0..100) of `values` within each group 0..n_groups-1,
    NaN for an empty group; equal to np.percentile per group, without a Python loop."""
    out = np.full(n_groups, math.nan)
    if values.size == 0 or n_groups == 0:
        return out
    order = np.lexsort((values, groups))
    g = groups[order]
    v = values[order]
    counts = np.bincount(g, minlength=n_groups)
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    present = counts > 0
    n = counts[present]
    s = starts[present]
    rank = (n - 1) * (q / 100.0)
    lo = np.floor(rank).astype(np.int64)
    hi = np.minimum(lo + 1, n - 1)
    below = v[s + lo]
    above = v[s + hi]
    # Same form as numpy's _lerp, including its switch at t >= 0.5, so the results agree exactly.
    t = rank - lo
    diff = above - below
    out[present] = np.where(t >= 0.5, above - diff * (1.0 - t), below + diff * t)
    return out


@np.errstate(invalid='ignore', divide='ignore', over='ignore')
def per_minute(*, result: SimResult) -> dict[str, FloatArray]:
    """Per-minute series by arrival minute (all float64 arrays of one length):

    - 'start': the minute's start, seconds;
    - 'arrivals': requests that arrived in it;
    - 'completed' / 'failed': how many of those completed / failed;
    - 'ttft_p99': TTFT p99 of those that completed (NaN for a minute without any).

    The series cover the run's duration and every arrival; empty for an empty run.
    """
    req = request_columns(result=result)
    arrival = req.arrival
    known = ~np.isnan(arrival)
    minute = np.floor(np.clip(arrival[known], 0.0, None) / 60.0).astype(np.int64)
    duration = float(result.duration)
    n = math.ceil(duration / 60.0) if math.isfinite(duration) and duration > 0.0 else 0
    if minute.size:
        n = max(n, int(minute.max()) + 1)
    completed = req.completed[known]
    failed = req.failed[known]
    ttft = req.ttft[known]
    with_ttft = completed & np.isfinite(ttft)
    return {
        'start': np.arange(n, dtype=np.float64) * 60.0,
        'arrivals': np.bincount(minute, minlength=n).astype(np.float64),
        'completed': np.bincount(minute[completed], minlength=n).astype(np.float64),
        'failed': np.bincount(minute[failed], minlength=n).astype(np.float64),
        'ttft_p99': grouped_percentile(
            groups=minute[with_ttft], values=ttft[with_ttft], n_groups=n, q=99.0
        ),
    }


def _percentiles(values: FloatArray) -> tuple[float, float, float]:
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return (math.nan, math.nan, math.nan)
    p50, p90, p99 = np.percentile(finite, PERCENTILES, method='linear')
    return (float(p50), float(p90), float(p99))


def _ratio(numerator: float, denominator: float) -> float:
    if denominator == 0.0:
        return math.nan if numerator == 0.0 or math.isnan(numerator) else math.inf
    return numerator / denominator


def _per_unit_time(amount: float, duration: float) -> float:
    return amount / duration if math.isfinite(duration) and duration > 0.0 else math.nan


def _replica_figures(result: SimResult) -> tuple[float, float, dict[str, float], float]:
    """Cost, GPU hours, replica hours per variant and total replica seconds."""
    specs = {v.name: v for v in result.variants}
    unknown = sorted(set(result.replica_seconds) - set(specs))
    if unknown:
        raise ValueError(f'{result.policy}: replica_seconds for unknown variants {unknown}')
    cost = gpu_hours = total_seconds = 0.0
    hours: dict[str, float] = {}
    for name in sorted(specs):
        seconds = float(result.replica_seconds.get(name, 0.0))
        if seconds < 0.0:
            raise ValueError(f'{result.policy}: negative replica_seconds {seconds} for {name}')
        spec = specs[name]
        hours[name] = seconds / 3600.0
        cost += hours[name] * spec.cost_per_hour
        gpu_hours += hours[name] * spec.gpus_per_replica
        total_seconds += seconds
    return cost, gpu_hours, hours, total_seconds


def _attained(
    *,
    ttft: FloatArray,
    mean_itl: FloatArray,
    completed: BoolArray,
    ttft_bound: float | FloatArray,
    itl_bound: float | FloatArray,
) -> BoolArray:
    """Which requests met the SLO: completed, TTFT ≤ its bound, and mean ITL ≤ its bound (a NaN
    ITL, i.e. a single-token output, passes the ITL test; NaN bounds fail every comparison)."""
    itl_ok = np.isnan(mean_itl) | (mean_itl <= itl_bound)
    result: BoolArray = completed & (ttft <= ttft_bound) & itl_ok
    return result


def _bounds(result: SimResult, slo: SLOs) -> tuple[float | FloatArray, float | FloatArray]:
    """The TTFT and ITL bound of every request (scalars when one SLO covers them all)."""
    if isinstance(slo, SLO):
        return slo.ttft, slo.itl
    if len(slo) == 1:
        only = next(iter(slo.values()))
        return only.ttft, only.itl
    ttft = np.empty(len(result.requests))
    itl = np.empty(len(result.requests))
    for i, request in enumerate(result.requests):
        bound = slo.get(request.model)
        if bound is None:
            raise ValueError(f'{result.policy}: no SLO for model {request.model!r}')
        ttft[i], itl[i] = bound.ttft, bound.itl
    return ttft, itl


def model_part(*, result: SimResult, model: str) -> SimResult:
    """The part of `result` that is `model`'s: its requests, variants, replica-seconds, events
    and timeline series (the fleet-wide gauges are kept as they are)."""
    variants = tuple(v for v in result.variants if v.model_name == model)
    names = {v.name for v in variants}
    return replace(
        result,
        requests=[r for r in result.requests if r.model == model],
        variants=variants,
        replica_seconds={k: v for k, v in result.replica_seconds.items() if k in names},
        tail_replica_seconds={k: v for k, v in result.tail_replica_seconds.items() if k in names},
        events=[e for e in result.events if e.variant in names],
        gpu_waits=[w for w in result.gpu_waits if w.variant in names],
    )


def models_of(*, result: SimResult) -> list[str]:
    """The models of a result's variants, sorted."""
    return sorted({v.model_name for v in result.variants})


@np.errstate(invalid='ignore', divide='ignore', over='ignore')
def summarize(
    *,
    result: SimResult,
    slo: SLOs,
    reference_cost: float | None = None,
    model: str | None = None,
) -> PolicySummary:
    """Boil one policy's run (or its model `model`'s part) down to its summary (see the module
    docstring for every figure)."""
    if model is not None:
        result = model_part(result=result, model=model)
        if not isinstance(slo, SLO):
            slo = slo[model]
    ttft_bound, itl_bound = _bounds(result, slo)
    cost, gpu_hours, replica_hours, replica_seconds = _replica_figures(result)
    charged = result.charged_until
    if not math.isfinite(charged):
        charged = float(result.duration)
    req = request_columns(result=result)
    total = int(req.arrival.shape[0])
    completed = req.completed
    n_completed = int(np.count_nonzero(completed))
    n_failed = int(np.count_nonzero(req.failed))
    ttft = np.where(completed, req.ttft, math.nan)
    itl = np.where(completed, req.mean_itl, math.nan)
    # A completed request with a NaN TTFT must miss, not pass, hence the explicit finiteness test.
    ok = _attained(
        ttft=ttft,
        mean_itl=itl,
        completed=completed & np.isfinite(ttft),
        ttft_bound=ttft_bound,
        itl_bound=itl_bound,
    )
    ups = sum(1 for e in result.events if e.after > e.before)
    downs = sum(1 for e in result.events if e.after < e.before)
    tokens = float(np.sum(req.output_tokens[completed]))
    ttft_p = _percentiles(ttft)
    itl_p = _percentiles(itl)
    return PolicySummary(
        policy=result.policy,
        trace=result.trace,
        duration=float(result.duration),
        cost_usd=cost,
        gpu_hours=gpu_hours,
        requests=total,
        completed=n_completed,
        failed=n_failed,
        incomplete=total - n_completed - n_failed,
        failed_queue_timeout=req.failures.get('queue-timeout', 0),
        failed_replica_timeout=req.failures.get('replica-timeout', 0),
        failed_rejected=req.failures.get('rejected', 0),
        ttft_p50=ttft_p[0],
        ttft_p90=ttft_p[1],
        ttft_p99=ttft_p[2],
        itl_p50=itl_p[0],
        itl_p90=itl_p[1],
        itl_p99=itl_p[2],
        slo_attainment=float(np.count_nonzero(ok)) / total if total else math.nan,
        scale_events=len(result.events),
        scale_ups=ups,
        scale_downs=downs,
        replica_hours=replica_hours,
        mean_replicas=_per_unit_time(replica_seconds, charged),
        cost_vs_reference=None if reference_cost is None else _ratio(cost, reference_cost),
        throughput=_per_unit_time(tokens, float(result.duration)),
        prefix_hit_rate=_prefix_hit_rate(result),
        tail_cost_usd=_tail_cost(result),
    )


def _tail_cost(result: SimResult) -> float:
    """What `tail_replica_seconds` cost, priced (and checked) as the charged seconds are."""
    return _replica_figures(replace(result, replica_seconds=result.tail_replica_seconds))[0]


def _prefix_hit_rate(result: SimResult) -> float | None:
    if not any(v.prefix_caching for v in result.variants):
        return None
    done = [r for r in result.requests if not r.failed and math.isfinite(r.finished)]
    return _ratio(sum(r.cached_tokens for r in done), sum(r.input_tokens for r in done))


def summarize_all(
    *, results: Sequence[SimResult], slo: SLOs, reference: str = 'clairvoyant'
) -> list[PolicySummary]:
    """Summaries in the order of `results`, costs relative to the first result whose policy is
    named `reference` (no ratios when there is none)."""
    reference_cost = None
    for result in results:
        if result.policy == reference:
            reference_cost = _replica_figures(result)[0]
            break
    return [summarize(result=r, slo=slo, reference_cost=reference_cost) for r in results]


def summarize_models(
    *, results: Sequence[SimResult], slo: SLOs, reference: str = 'clairvoyant'
) -> list[dict[str, PolicySummary]]:
    """Per result (in order), a summary of each model's part, by model name in name order;
    costs relative to the reference policy's cost for the same model."""
    reference_costs: dict[str, float] = {}
    for result in results:
        if result.policy == reference:
            reference_costs = {
                m: _replica_figures(model_part(result=result, model=m))[0]
                for m in models_of(result=result)
            }
            break
    return [
        {
            m: summarize(result=r, slo=slo, reference_cost=reference_costs.get(m), model=m)
            for m in models_of(result=r)
        }
        for r in results
    ]


@dataclass(frozen=True, slots=True)
class GpuSummary:
    """How one run used its GPU inventory (see the module docstring)."""

    inventory: dict[str, int]
    peak: dict[str, int]
    mean: dict[str, float]
    waited: int
    """Replicas that waited for GPUs (bound later than asked for, or never)."""
    never_bound: int
    wait_seconds: float
    longest_wait: float


def gpu_summary(*, result: SimResult) -> GpuSummary | None:
    """The GPU figures of a run with an inventory; None without one."""
    if not result.inventory:
        return None
    peak: dict[str, int] = {}
    mean: dict[str, float] = {}
    for accelerator in sorted(result.inventory):
        series = np.asarray(result.timeline.gpus.get(accelerator, []), dtype=np.float64)
        peak[accelerator] = int(series.max()) if series.size else 0
        mean[accelerator] = float(series.mean()) if series.size else math.nan
    waits = [w.seconds for w in result.gpu_waits]
    return GpuSummary(
        inventory=dict(sorted(result.inventory.items())),
        peak=peak,
        mean=mean,
        waited=len(waits),
        never_bound=sum(1 for w in result.gpu_waits if w.bound != w.bound),
        wait_seconds=float(sum(waits)),
        longest_wait=max(waits, default=0.0),
    )
