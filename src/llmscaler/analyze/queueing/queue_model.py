"""One replica's state-dependent M/M/1/K queue on either performance model.

Source: llm-d workload-variant-autoscaler pkg/analyzer/ (queueanalyzer.go,
mm1modelstatedependent.go, mm1kmodel.go: main at b08b1c7 for the three-parameter model, the v0.4
line for the four); *Workload Variant Autoscaler: A Performance-Model-Based Approach to AI
Inference Autoscaling* (the WVA design paper), §2.2 and §3.2.

Why: the SLO analyzer asks "at what arrival rate does one replica still meet its TTFT and ITL
targets?"; that needs the latency a replica would show at a given rate, which this module
predicts from the tuned parameters and the request mix. Under both models a request's service
time at n requests in service is a line base + slope·n, so the chain below is the same; the
models differ in that line and in how the latencies are read from a solution:

- three parameters (`ServiceParams`, WVA main, the default): the line of
  `analyze.queueing.service_model.service_line`; TTFT W + prefill(n̄) and ITL (S − prefill(n̄))/O
  at the mean number in service n̄ = E[min(n, N)];
- four parameters (`PerfParams`, below): the design paper's prefill and decode lines and the
  effective batch b̄.

It follows WVA's queue analyzer so WVA's unit tests can be replayed against it. The
four-parameter model:

- decode (inter-token) time at batch size b: `ITL(b) = α + β·b` (ms);
- prefill time of a request with I input tokens at batch b: `γ + δ·I·b` (ms), 0 when I = 0;
- state-dependent service rate at n requests in service, n = 1..N (N = max batch size, vLLM's
  `--max-num-seqs`): `μ_n = n / (prefill(I, n) + (O − 1)·ITL(n))` requests per ms, one prefill
  and O − 1 decodes per request (O = 1 and I = 0: one decode); for n > N, `μ_n = μ_N`;
- a birth–death chain over 0..K, K = N + maxQueue, with constant arrival rate λ per ms:
  `p_{n+1} = p_n·λ/μ_n`, normalised. Computed in log space, which gives WVA's rescaled
  products without their overflow loop;
- throughput X = λ(1 − p_K), N̄ = Σ n·p_n, servers = Σ_{n≤N} n·p_n + N·(1 − Σ_{n≤N} p_n),
  response R = N̄/X, service S = servers/X, wait W = max(0, R − S), queue length X·W;
- the chain's sums come from `analyze.queueing.queue_chain`: in closed form while the batch seldom
  fills (its batch states are then a negative binomial: nothing waits, X = λ, S = (base +
  slope)/(1 − λ·slope)), walked from the mode otherwise;
- the effective batch b̄ solves prefill(I, b̄) + (O − 1)·ITL(b̄) = S, clamped to [0, N]; the
  predicted TTFT is W + prefill(I, b̄) and the predicted ITL is ITL(b̄).

Units (as WVA): times in milliseconds; λ inside the queue in requests per millisecond; every
rate a caller passes or gets back (`analyze`'s `request_rate`, `throughput`, `max_rate`,
`RateRange`) in requests per second (× 1000). The tuner converts the observed seconds of
`avg_ttft`/`avg_itl` to ms and the arrival rate (requests/s) as is.

Validity checks (`mm1k_valid`, `state_dependent_valid`): the plain M/M/1/K model is valid for
λ ≥ 0, μ > 0 and 0 ≤ ρ < K with ρ = λ/μ (ρ = 1 when λ = μ); the state-dependent model is
solved with a dummy μ = 1 and its ρ = 1 − p_0 ≤ 1, so it is valid for λ ≥ 0 and K ≥ 1.

What fails: `QueueAnalyzer.build` returns a `QueueError` (not raises) for a max batch size < 1,
a max queue size < 0, I < 0, O < 1, or parameters that give a non-positive or non-finite
service time; `analyze` returns one for a rate ≤ 0 or above `rate_range.max`. Nothing raises
on figures within those ranges.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import repeat
from operator import add, mul, truediv
from typing import NamedTuple

from llmscaler.analyze.queueing import queue_chain, service_model
from llmscaler.analyze.queueing.perf_model import (
    PerfParams,
    decodes_per_request,
    effective_concurrency,
    prefill_time,
)
from llmscaler.analyze.queueing.service_model import ServiceParams

ModelParams = PerfParams | ServiceParams
"""A replica's tuned parameters: WVA main's three (`ServiceParams`, the default) or the design
paper's four (`PerfParams`); the queue's service time is a line in n under either."""

EPSILON = 0.001
"""WVA's `Epsilon`: the rate range is [μ_1·ε, μ_N·(1 − ε)]."""
STABILITY_SAFETY_FRACTION = 0.1
"""WVA's `StabilitySafetyFraction`: a TPS target sizes at (1 − 0.1) × the maximum rate."""
DEFAULT_MAX_QUEUE_SIZE = 100
"""WVA's `DefaultMaxQueueSize` for sizing (the tuner uses 10 × max batch)."""
DEFAULT_MAX_BATCH_SIZE = 256
"""vLLM's default `--max-num-seqs` on most GPUs, WVA's default max batch."""


@dataclass(frozen=True, slots=True)
class QueueError:
    """Why a model could not be built or solved (an error as a value)."""

    message: str


def mm1k_valid(*, lam: float, mu: float, k: int) -> bool:
    """WVA's `QueueModel.Solve` check for the plain M/M/1/K model: λ ≥ 0, μ > 0, 0 ≤ ρ < K."""
    if not (lam >= 0 and mu > 0):
        return False
    rho = 1.0 if lam == mu else lam / mu
    return 0 <= rho < k


def state_dependent_valid(*, lam: float, k: int) -> bool:
    """The same check for the state-dependent model (dummy μ = 1, ρ = 1 − p_0 ∈ [0, 1])."""
    return lam >= 0 and k >= 1 and math.isfinite(lam)


class QueueStats(NamedTuple):
    """One solution of the chain; times in ms, throughput in requests per ms (a named tuple:
    the search and the tuner take thousands a cycle)."""

    throughput: float
    avg_num_in_system: float
    avg_num_in_servers: float
    avg_resp_time: float
    avg_serv_time: float
    avg_wait_time: float
    avg_queue_length: float
    rho: float


def solve_mm1k(*, lam: float, mu: float, k: int) -> QueueStats | QueueError:
    """The plain M/M/1/K queue (WVA `MM1KModel`); λ and μ per ms."""
    if not mm1k_valid(lam=lam, mu=mu, k=k):
        return QueueError(f'invalid M/M/1/K model: lambda={lam}, mu={mu}, K={k}')
    rho = 1.0 if lam == mu else lam / mu
    p = (
        queue_chain.normalised([n * math.log(rho) for n in range(k + 1)])
        if lam > 0
        else [1.0] + [0.0] * k
    )
    in_system = math.fsum(n * v for n, v in enumerate(p))
    throughput = lam * (1 - p[k])
    resp = in_system / throughput if throughput > 0 else 0.0
    wait = max(0.0, resp - 1 / mu)
    return QueueStats(
        throughput=throughput,
        avg_num_in_system=in_system,
        avg_num_in_servers=min(in_system, 1.0),
        avg_resp_time=resp,
        avg_serv_time=1 / mu,
        avg_wait_time=wait,
        avg_queue_length=throughput * wait,
        rho=rho,
    )


@dataclass(frozen=True, slots=True)
class RateRange:
    """The arrival rates (requests/s) the model is solved for: [μ_1·ε, μ_N·(1 − ε)] × 1000."""

    min: float
    max: float


@dataclass(frozen=True, slots=True)
class AnalysisMetrics:
    """WVA's `AnalysisMetrics`: rates in requests/s, times in ms."""

    throughput: float
    avg_resp_time: float
    avg_wait_time: float
    avg_num_in_serv: float
    avg_prefill_time: float
    avg_token_time: float
    max_rate: float
    rho: float

    @property
    def ttft(self) -> float:
        """Predicted time to first token: queueing plus prefill (ms)."""
        return self.avg_wait_time + self.avg_prefill_time

    @property
    def itl(self) -> float:
        return self.avg_token_time


@dataclass(frozen=True, slots=True)
class QueueAnalyzer:
    """One replica's queue for one request mix, built once and solved for many rates.

    The service time at n requests in service is `base + slope·n` (ms), so μ_n = n / (base +
    slope·n) (`mu`, requests per ms) is computed where needed, never tabulated. With μ
    non-decreasing in n (base ≥ 0: every positive parameter set) `solve` takes the chain's sums
    in closed form or walks them from the mode (`analyze.queueing.queue_chain`): exact to rounding,
    without overflow for any K. Otherwise it sums all K + 1 states in log space.
    """

    params: ModelParams
    max_batch_size: int
    max_queue_size: int
    avg_input_tokens: float
    avg_output_tokens: float
    rate_range: RateRange
    base: float
    """Service time (ms) = base + slope·n at n requests in service."""
    slope: float
    monotone: bool

    @staticmethod
    def build(
        *,
        params: ModelParams,
        max_batch_size: int,
        max_queue_size: int,
        avg_input_tokens: float,
        avg_output_tokens: float,
    ) -> QueueAnalyzer | QueueError:
        if max_batch_size < 1 or max_queue_size < 0:
            return QueueError(
                f'invalid configuration: maxBatch={max_batch_size}, maxQueue={max_queue_size}'
            )
        if not (avg_input_tokens >= 0 and avg_output_tokens >= 1):
            return QueueError(
                f'invalid request size: inTokens={avg_input_tokens}, outTokens={avg_output_tokens}'
            )
        if isinstance(params, ServiceParams):
            base, slope = service_model.service_line(
                params=params,
                avg_input_tokens=avg_input_tokens,
                avg_output_tokens=avg_output_tokens,
            )
        else:
            decodes = decodes_per_request(
                avg_input_tokens=avg_input_tokens, avg_output_tokens=avg_output_tokens
            )
            # service(n) = base + slope·n: the prefill and decode times of `service_rates`.
            prefill_base, prefill_slope = (
                (params.gamma, params.delta * avg_input_tokens)
                if avg_input_tokens != 0
                else (0.0, 0.0)
            )
            base = prefill_base + decodes * params.alpha
            slope = prefill_slope + decodes * params.beta
        # service(n) is linear in n: positive and finite at both ends means positive throughout.
        for n in (1, max_batch_size):
            service = base + slope * n
            if not (math.isfinite(service) and service > 0):
                return QueueError(f'parameters {params} give a non-positive service time')
        # μ_n = n / (base + slope·n) is not tabulated: the tuner builds nine queues per variant
        # per cycle and solves each once, and a table of 256 rates was a quarter of decide().
        mu_1, mu_n = 1 / (base + slope), max_batch_size / (base + slope * max_batch_size)
        return QueueAnalyzer(
            params=params,
            max_batch_size=max_batch_size,
            max_queue_size=max_queue_size,
            avg_input_tokens=avg_input_tokens,
            avg_output_tokens=avg_output_tokens,
            rate_range=RateRange(min=mu_1 * EPSILON * 1000, max=mu_n * (1 - EPSILON) * 1000),
            base=base,
            slope=slope,
            # dμ_n/dn = base / service(n)²: μ never falls when the fixed part is ≥ 0.
            monotone=base >= 0,
        )

    @property
    def mu(self) -> tuple[float, ...]:
        """μ_1..μ_N, requests per ms."""
        batches = range(1, self.max_batch_size + 1)
        service = map(add, repeat(self.base), map(mul, repeat(self.slope), batches))
        return tuple(map(truediv, batches, service))

    @property
    def k(self) -> int:
        return self.max_batch_size + self.max_queue_size

    def solve(self, *, lam: float) -> QueueStats | QueueError:
        """The chain at λ requests per ms (WVA `MM1ModelStateDependent.Solve(λ, 1)`)."""
        nb = self.max_batch_size
        k = nb + self.max_queue_size
        if not state_dependent_valid(lam=lam, k=k):
            return QueueError(f'invalid state-dependent model: lambda={lam}')
        closed = (
            queue_chain.closed(base=self.base, slope=self.slope, nb=nb, k=k, lam=lam)
            if lam > 0 and self.monotone
            else None
        )
        if isinstance(closed, queue_chain.Unqueued):
            # Positional: the tuner and the search take thousands of solutions per cycle, and
            # keywords cost a fifth of this one's construction.
            mean, serv = closed.mean, closed.serv
            return QueueStats(lam, mean, mean, serv, serv, 0.0, 0.0, closed.rho)
        p0, pk, total, first, total_n, first_n = (
            closed
            if closed is not None
            else (1.0, 0.0, 1.0, 0.0, 1.0, 0.0)
            if lam == 0
            else queue_chain.walk(base=self.base, slope=self.slope, nb=nb, k=k, lam=lam)
            if self.monotone
            else queue_chain.full(mu=self.mu, k=k, lam=lam)
        )
        in_system = first / total
        in_servers = first_n / total + nb * (1.0 - total_n / total)
        throughput = lam * (1.0 - pk / total)
        p0 /= total
        resp = in_system / throughput if throughput > 0 else 0.0
        serv = in_servers / throughput if throughput > 0 else 0.0
        wait = max(0.0, resp - serv)
        return QueueStats(
            throughput=throughput,
            avg_num_in_system=in_system,
            avg_num_in_servers=in_servers,
            avg_resp_time=resp,
            avg_serv_time=serv,
            avg_wait_time=wait,
            avg_queue_length=throughput * wait,
            rho=1.0 - p0,
        )

    def unqueued_rate(self, *, ttft: float = 0.0, itl: float = 0.0) -> float | None:
        """λ (per ms) at which the closed form of `_unqueued` (no waiting, S = (base + slope)
        / (1 − λ·slope)) predicts a TTFT of `ttft` or an ITL of `itl` ms (the one given > 0):
        the target's load, its service time, and λ from S. Exact wherever that closed form
        holds, a first guess elsewhere; None when the target is not reached that way (no
        prefill or decode slope, a load outside (0, N), a service time at or below one
        request's)."""
        if isinstance(self.params, ServiceParams):
            return self._unqueued_rate_iteration(self.params, ttft=ttft, itl=itl)
        params, tokens = self.params, self.avg_output_tokens - 1
        if ttft > 0:
            per_batch = params.delta * self.avg_input_tokens
            batch = (ttft - params.gamma) / per_batch if per_batch else 0.0
        else:
            batch = (itl - params.alpha) / params.beta if params.beta else 0.0
        if not 0 < batch < self.max_batch_size or self.slope <= 0:
            return None
        # effective_concurrency inverted: S = γ + α·(O − 1) + (δ·I + β·(O − 1))·b̄.
        service = (
            params.gamma
            + params.alpha * tokens
            + (params.delta * self.avg_input_tokens + params.beta * tokens) * batch
        )
        single = self.base + self.slope
        if not service > single:
            return None
        return (1 - single / service) / self.slope

    def _unqueued_rate_iteration(
        self, params: ServiceParams, *, ttft: float, itl: float
    ) -> float | None:
        """`unqueued_rate` on the three-parameter model. Without waiting, n̄ = λ·S requests are
        in service and S = base + slope·(1 + n̄); prefill(n̄) and ITL(n̄) = (S − prefill(n̄))/O
        are lines in n̄, so the target's n̄ is solved directly and λ = n̄/S(n̄)."""
        tokens, out = self.avg_input_tokens, self.avg_output_tokens
        per_request = service_model.per_request_slope(
            params=params, avg_input_tokens=tokens, avg_output_tokens=out
        )
        prefill_0 = 0.0 if tokens == 0 else params.alpha + (params.beta + params.gamma) * tokens
        prefill_slope = 0.0 if tokens == 0 else per_request
        if ttft > 0:
            load = (ttft - prefill_0) / prefill_slope if prefill_slope > 0 else 0.0
        else:
            itl_0 = (self.base + self.slope - prefill_0) / out
            itl_slope = (self.slope - prefill_slope) / out
            load = (itl - itl_0) / itl_slope if itl_slope > 0 else 0.0
        if not 0 < load < self.max_batch_size or self.slope <= 0:
            return None
        return load / (self.base + self.slope * (1 + load))

    def effective_concurrency(self, *, avg_service_time: float) -> float:
        """b̄ with prefill(I, b̄) + (O − 1)·ITL(b̄) = S, clamped to [0, N] (four-parameter
        model; WVA v0.4)."""
        assert isinstance(self.params, PerfParams)
        return effective_concurrency(
            avg_service_time=avg_service_time,
            params=self.params,
            avg_input_tokens=self.avg_input_tokens,
            avg_output_tokens=self.avg_output_tokens,
            max_batch_size=self.max_batch_size,
        )

    def load(self, stats: QueueStats) -> float:
        """What the latencies are read at: the effective batch b̄ (four parameters) or the
        mean number in service E[min(n, N)] (three parameters)."""
        if isinstance(self.params, ServiceParams):
            return stats.avg_num_in_servers
        return self.effective_concurrency(avg_service_time=stats.avg_serv_time)

    def rises(self, *, stats: QueueStats, ttft: bool, itl: bool) -> bool:
        """Whether the TTFT (`ttft`) and ITL (`itl`) rise with the rate from the solution
        `stats` on: its load lies inside (0, N), where it grows with the rate, and each figure
        asked for grows with the load (the search's fast path needs it; `size` decides
        otherwise)."""
        if not 0 < self.load(stats) < self.max_batch_size:
            return False
        params = self.params
        if isinstance(params, ServiceParams):
            slope = service_model.per_request_slope(
                params=params,
                avg_input_tokens=self.avg_input_tokens,
                avg_output_tokens=self.avg_output_tokens,
            )
            return slope > 0 and not (ttft and not self.avg_input_tokens > 0)
        return not (ttft and not params.delta * self.avg_input_tokens > 0) and not (
            itl and not params.beta > 0
        )

    def latencies(self, *, lam: float) -> tuple[QueueStats, float, float] | QueueError:
        """(stats, TTFT ms, ITL ms) at λ per ms: the two figures the search and the tuner need."""
        stats = self.solve(lam=lam)
        if isinstance(stats, QueueError):
            return stats
        params, tokens = self.params, self.avg_input_tokens
        if isinstance(params, ServiceParams):
            ttft, itl = service_model.latencies(
                params=params,
                avg_input_tokens=tokens,
                avg_output_tokens=self.avg_output_tokens,
                wait=stats.avg_wait_time,
                service=stats.avg_serv_time,
                in_service=stats.avg_num_in_servers,
            )
            return stats, ttft, itl
        conc = effective_concurrency(
            avg_service_time=stats.avg_serv_time,
            params=params,
            avg_input_tokens=tokens,
            avg_output_tokens=self.avg_output_tokens,
            max_batch_size=self.max_batch_size,
        )
        # `prefill_time` and `decode_time` written out (the search and the tuner call this
        # thousands of times per cycle), in their order of operations.
        prefill = 0.0 if tokens == 0 else params.gamma + params.delta * tokens * conc
        return stats, stats.avg_wait_time + prefill, params.alpha + params.beta * conc

    def analyze(self, *, request_rate: float) -> AnalysisMetrics | QueueError:
        """Performance at `request_rate` requests/s, 0 < rate ≤ `rate_range.max` (WVA `Analyze`)."""
        if not request_rate > 0:
            return QueueError(f'invalid request rate {request_rate}')
        if request_rate > self.rate_range.max:
            return QueueError(f'rate={request_rate}, max allowed rate={self.rate_range.max}')
        solved = self.latencies(lam=request_rate / 1000)
        if isinstance(solved, QueueError):
            return solved
        stats, _ttft, itl = solved
        load = self.load(stats)
        prefill = (
            service_model.prefill_time(
                params=self.params,
                avg_input_tokens=self.avg_input_tokens,
                avg_output_tokens=self.avg_output_tokens,
                batch_size=load,
            )
            if isinstance(self.params, ServiceParams)
            else prefill_time(
                params=self.params, avg_input_tokens=self.avg_input_tokens, batch_size=load
            )
        )
        return AnalysisMetrics(
            throughput=stats.throughput * 1000,
            avg_resp_time=stats.avg_resp_time,
            avg_wait_time=stats.avg_wait_time,
            avg_num_in_serv=stats.avg_num_in_servers,
            avg_prefill_time=prefill,
            avg_token_time=itl,
            max_rate=self.rate_range.max,
            rho=min(max(stats.avg_num_in_servers / self.max_batch_size, 0.0), 1.0),
        )
