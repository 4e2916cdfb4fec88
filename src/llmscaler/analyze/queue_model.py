"""One replica's state-dependent M/M/1/K queue on seed 002's performance model (§2.2, §3.2).

Why: the SLO analyzer asks "at what arrival rate does one replica still meet its TTFT and ITL
targets?"; that needs the latency a replica would show at a given rate, which this module
predicts from four parameters (`analyze.perf_model`, whose names it re-exports) and the request
mix. It follows WVA's queue analyzer (the
`QueueAnalyzer` of the v0.4 line and the `llm-inferno` queue-analysis package) so WVA's unit
tests can be replayed against it:

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
- while the chain (almost) never reaches the full batch, it is a negative binomial over
  0..N with closed-form sums (no waiting, X = λ, S = (base + slope)/(1 − λ·slope)); `solve`
  uses that form when the states from N on hold less than 1e-18 of the mass, the same form
  less its states beyond N (plus the queue's geometric series) when those are few to walk,
  and walks the chain otherwise;
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
from itertools import accumulate, repeat
from operator import add, mul, truediv

from llmscaler.analyze.perf_model import PerfParams as PerfParams
from llmscaler.analyze.perf_model import decode_time as decode_time
from llmscaler.analyze.perf_model import decodes_per_request as decodes_per_request
from llmscaler.analyze.perf_model import effective_concurrency as effective_concurrency
from llmscaler.analyze.perf_model import prefill_time as prefill_time
from llmscaler.analyze.perf_model import service_rates as service_rates

EPSILON = 0.001
"""WVA's `Epsilon`: the rate range is [μ_1·ε, μ_N·(1 − ε)]."""
STABILITY_SAFETY_FRACTION = 0.1
"""WVA's `StabilitySafetyFraction`: a TPS target sizes at (1 − 0.1) × the maximum rate."""
DEFAULT_MAX_QUEUE_SIZE = 100
"""WVA's `DefaultMaxQueueSize` for sizing (the tuner uses 10 × max batch)."""
_TAIL = 1e-18
"""A walk away from the mode stops when the rest of the chain is below this share of the sum."""
_LOG_TAIL = math.log(_TAIL)
_Sums = tuple[float, float, float, float, float, float]
"""Unnormalised (p_0, p_K, Σp, Σn·p, Σ_{n≤N} p, Σ_{n≤N} n·p) of the chain."""
_LARGE_SHAPE = 1e12
"""Above this a = base/slope (a slope of almost 0) the closed form's log-gammas lose their
digits; the walk takes over."""
_CHUNK = 32
"""States multiplied out per step of a walk (C-level products; the tail test runs per chunk)."""
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


@dataclass(frozen=True, slots=True)
class QueueStats:
    """One solution of the chain; times in ms, throughput in requests per ms."""

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
    p = _normalised([n * math.log(rho) for n in range(k + 1)]) if lam > 0 else [1.0] + [0.0] * k
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
    non-decreasing in n (base ≥ 0: every positive parameter set) the chain's probabilities rise
    to a single mode (found in closed form) and fall after it, so `solve` starts at the mode
    (term 1) and multiplies ratios outward, 32 states at a time with C-level products, stopping
    once what is left is below 1e-18 of the sum: exact to rounding, without overflow for any
    K. Otherwise it sums all K + 1 states in log space.
    """

    params: PerfParams
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
        params: PerfParams,
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
        decodes = decodes_per_request(
            avg_input_tokens=avg_input_tokens, avg_output_tokens=avg_output_tokens
        )
        # service(n) = base + slope·n: the prefill and decode times of `service_rates`, inlined.
        prefill_base, prefill_slope = (
            (params.gamma, params.delta * avg_input_tokens) if avg_input_tokens != 0 else (0.0, 0.0)
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
        if not state_dependent_valid(lam=lam, k=self.k):
            return QueueError(f'invalid state-dependent model: lambda={lam}')
        closed = self._closed(lam) if lam > 0 and self.monotone else None
        if isinstance(closed, QueueStats):
            return closed
        nb = self.max_batch_size
        p0, pk, total, first, total_n, first_n = (
            closed
            if closed is not None
            else (1.0, 0.0, 1.0, 0.0, 1.0, 0.0)
            if lam == 0
            else self._walk(lam)
            if self.monotone
            else self._full(lam)
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

    def _closed(self, lam: float) -> QueueStats | _Sums | None:
        """The chain from the closed form of its batch states where that is cheaper than the
        walk: the statistics while it (almost) never reaches the full batch, its sums when it
        does now and then, None otherwise (the walk then).

        With a = base/slope and q = λ·slope, p_{n+1}/p_n = q·(n + 1 + a)/(n + 1): over 0..N
        the chain is a negative binomial of r = a + 1 and q (while q < 1), whose sums over all
        n ≥ 0 are closed: Σ = (1 − q)^−r, mean r·q/(1 − q). When the states from N on (the
        batch limit and the queue) hold less than 1e-18 of the mass and of the mean (bounded
        by a geometric series from p_N, whose ratio λ/μ_N exceeds every later one), they are
        the chain's sums to rounding: nothing waits, X = λ and R = S = (base + slope)/(1 − q).
        When they hold more, the batch states' sums are the closed ones less the negative
        binomial's states beyond N (walked up from p_N until negligible, fewer states than a
        walk of the batch when p_N is small) and the queue states are the geometric series
        from p_N; every term is taken relative to the closed Σ."""
        slope, nb = self.slope, self.max_batch_size
        q = lam * slope
        if not (0 < q < 1):
            return None
        r = self.base / slope + 1
        top = q * (r - 1 + nb) / nb  # λ/μ_N
        if not (top < 1 and r < _LARGE_SHAPE):
            return None
        log_total = -r * math.log1p(-q)
        mean = r * q / (1 - q)
        # p_N / Σ: the negative binomial's probability of N.
        log_at_n = math.lgamma(nb + r) - math.lgamma(r) - math.lgamma(nb + 1) + nb * math.log(q)
        log_at_n -= log_total
        tail = top / (1 - top)  # Σ_{i≥1} top^i
        # Σ_{n>N} p_n ≤ p_N·tail and Σ_{n>N} n·p_n ≤ p_N·(N·tail + tail/(1 − top)).
        if (
            log_at_n + math.log(tail) <= _LOG_TAIL
            and log_at_n + math.log(nb * tail + tail / (1 - top)) - math.log(mean) <= _LOG_TAIL
        ):
            serv = (self.base + slope) / (1 - q)
            return QueueStats(
                throughput=lam,
                avg_num_in_system=mean,
                avg_num_in_servers=mean,
                avg_resp_time=serv,
                avg_serv_time=serv,
                avg_wait_time=0.0,
                avg_queue_length=0.0,
                rho=-math.expm1(-log_total),
            )
        # States past N until the terms fall below 1e-18 (ratios ≤ λ/μ_N): walking them costs
        # about what walking the batch does at 0.8·N (timed).
        if (_LOG_TAIL - log_at_n) / math.log(top) > 0.8 * nb:
            return None
        at_n = math.exp(log_at_n)
        beyond, beyond_first = self._beyond(lam, start=nb, term=at_n)
        total_n, first_n = 1.0 - beyond, mean - beyond_first
        k = self.k
        if k > nb:
            queue, queue_first, last = _tail(top, k - nb, low=nb)
            queue, queue_first, pk = at_n * queue, at_n * queue_first, at_n * last
        else:
            queue, queue_first, pk = 0.0, 0.0, at_n
        return (
            math.exp(-log_total),
            pk,
            total_n + queue,
            first_n + queue_first,
            total_n,
            first_n,
        )

    def _beyond(self, lam: float, *, start: int, term: float) -> tuple[float, float]:
        """Σp and Σn·p of the negative binomial over start+1, start+2, … from p_start = `term`
        (relative to the whole distribution's 1), until the rest is below 1e-18."""
        lb, ls = lam * self.base, lam * self.slope
        total = first = 0.0
        j0 = start
        while True:  # p_{j+1} = p_j·(λ·base/(j + 1) + λ·slope)
            j1 = j0 + _CHUNK
            ratios = map(add, map(truediv, repeat(lb), range(j0 + 1, j1 + 1)), repeat(ls))
            terms = list(accumulate(ratios, mul, initial=term))
            del terms[0]
            term = terms[-1]
            total += sum(terms)
            first += sum(map(mul, range(j0 + 1, j1 + 1), terms))
            ratio = lb / j1 + ls  # the ratios fall: the rest is below a geometric series
            if term * ratio < _TAIL * (1 - ratio):
                return total, first
            j0 = j1

    def _walk(self, lam: float) -> tuple[float, float, float, float, float, float]:
        """Unnormalised (p_0, p_K, Σp, Σn·p, Σ_{n≤N} p, Σ_{n≤N} n·p), the mode's term 1.

        States above N all serve at μ_N, so that stretch is geometric and summed in closed form;
        only the batch states 0..N are walked, outward from the mode."""
        nb, k = self.max_batch_size, self.k
        top = nb / (self.base + self.slope * nb)
        if lam > top:
            # Every state is busier than the last: the mode is K, and the queue states fall
            # geometrically (ratio μ_N/λ) from K down to N.
            total, first, at_n = _geometric(top / lam, k - nb, high=k)
            p0, added, added_first = self._down(lam, start=nb, term=at_n, total=total)
            return (
                p0,
                1.0,
                total + added,
                first + added_first,
                at_n + added,
                nb * at_n + added_first,
            )
        # The mode: the number of n ≤ N with μ_n < λ, i.e. n·(1 − λ·slope) < λ·base.
        free = 1 - lam * self.slope
        mode = nb if free <= 0 else max(0, min(nb, math.ceil(lam * self.base / free) - 1))
        lb, ls = lam * self.base, lam * self.slope
        total, first = 1.0, float(mode)
        p0 = 1.0 if mode == 0 else 0.0
        pk = 1.0 if mode == k else 0.0
        term = 1.0
        reached = mode == nb
        for j0 in range(mode, nb, _CHUNK):  # p_{j+1} = p_j·λ/μ_j
            j1 = min(j0 + _CHUNK, nb)
            # λ/μ_j = λ·base/(j + 1) + λ·slope for the 0-based index j.
            ratios = map(add, map(truediv, repeat(lb), range(j0 + 1, j1 + 1)), repeat(ls))
            terms = list(accumulate(ratios, mul, initial=term))
            del terms[0]
            term = terms[-1]
            total += sum(terms)
            first += sum(map(mul, range(j0 + 1, j1 + 1), terms))
            if j1 == nb:
                reached = True
                if nb == k:
                    pk = term
                break
            # λ/μ_j falls as j rises: the rest is below a geometric series of this ratio.
            ratio = lb / j1 + ls
            if ratio < 1 and term * ratio < _TAIL * (1 - ratio) * total:
                break
        total_n, first_n = total, first
        if reached and k > nb:
            # Queue states N+1..K: term_N·r^i, r = λ/μ_N ≤ 1.
            tail, tail_first, last = _tail(lam / top, k - nb, low=nb)
            total += term * tail
            first += term * tail_first
            pk = term * last
        low, added, added_first = self._down(lam, start=mode, term=1.0, total=total)
        if mode > 0:
            p0 = low
        return p0, pk, total + added, first + added_first, total_n + added, first_n + added_first

    def _down(
        self, lam: float, *, start: int, term: float, total: float
    ) -> tuple[float, float, float]:
        """Walk states start−1 .. 0 from `term` at `start`: (p_0, or 0 when the walk stopped
        before it, Σp, Σn·p) of the states walked."""
        lb, ls = lam * self.base, lam * self.slope
        added, added_first, p0 = 0.0, 0.0, 0.0
        for j0 in range(start, 0, -_CHUNK):  # p_j = p_{j+1}·μ_j/λ, j = j0−1 down to j1
            j1 = max(j0 - _CHUNK, 0)
            # μ_j/λ = 1 / (λ·base/(j + 1) + λ·slope), j = j0 − 1 .. j1.
            up = map(add, map(truediv, repeat(lb), range(j0, j1, -1)), repeat(ls))
            ratios = map(truediv, repeat(1.0), up)
            terms = list(accumulate(ratios, mul, initial=term))
            del terms[0]
            term = terms[-1]
            added += sum(terms)
            added_first += sum(map(mul, range(j0 - 1, j1 - 1, -1), terms))
            if j1 == 0:
                p0 = term
                break
            # μ_j/λ falls as j falls: the rest is below a geometric series of this ratio.
            ratio = 1 / (lb / (j1 + 1) + ls)
            if ratio < 1 and term * ratio < _TAIL * (1 - ratio) * (total + added):
                break
        return p0, added, added_first

    def _full(self, lam: float) -> tuple[float, float, float, float, float, float]:
        """The same sums over every state, in log space (μ not monotone)."""
        nb, log_lam, cum, mu = self.max_batch_size, math.log(lam), 0.0, self.mu
        log_p = [0.0]
        for j in range(self.k):
            cum += log_lam - math.log(mu[min(j, nb - 1)])
            log_p.append(cum)
        p = _normalised(log_p)
        return (
            p[0],
            p[-1],
            1.0,
            math.fsum(n * v for n, v in enumerate(p)),
            math.fsum(p[: nb + 1]),
            math.fsum(n * v for n, v in enumerate(p[: nb + 1])),
        )

    def unqueued_rate(self, *, ttft: float = 0.0, itl: float = 0.0) -> float | None:
        """λ (per ms) at which the closed form of `_unqueued` (no waiting, S = (base + slope)
        / (1 − λ·slope)) predicts a TTFT of `ttft` or an ITL of `itl` ms (the one given > 0):
        the target's effective batch, its service time, and λ from S. Exact wherever that
        closed form holds, a first guess elsewhere; None when the target is not reached that
        way (no prefill or decode slope, a batch outside (0, N), a service time at or below
        one request's)."""
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

    def effective_concurrency(self, *, avg_service_time: float) -> float:
        """b̄ with prefill(I, b̄) + (O − 1)·ITL(b̄) = S, clamped to [0, N] (WVA)."""
        return effective_concurrency(
            avg_service_time=avg_service_time,
            params=self.params,
            avg_input_tokens=self.avg_input_tokens,
            avg_output_tokens=self.avg_output_tokens,
            max_batch_size=self.max_batch_size,
        )

    def latencies(self, *, lam: float) -> tuple[QueueStats, float, float] | QueueError:
        """(stats, TTFT ms, ITL ms) at λ per ms: the two figures the search and the tuner need."""
        stats = self.solve(lam=lam)
        if isinstance(stats, QueueError):
            return stats
        conc = self.effective_concurrency(avg_service_time=stats.avg_serv_time)
        prefill = prefill_time(
            params=self.params, avg_input_tokens=self.avg_input_tokens, batch_size=conc
        )
        return (
            stats,
            stats.avg_wait_time + prefill,
            decode_time(params=self.params, batch_size=conc),
        )

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
        conc = self.effective_concurrency(avg_service_time=stats.avg_serv_time)
        prefill = prefill_time(
            params=self.params, avg_input_tokens=self.avg_input_tokens, batch_size=conc
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


def _tail(ratio: float, count: int, *, low: int) -> tuple[float, float, float]:
    """Σ_{i=1..count} r^i, Σ (low + i)·r^i and r^count, for r ≤ 1 (closed form away from 1)."""
    if abs(1.0 - ratio) < 1e-4:
        total = first = 0.0
        term = 1.0
        for i in range(1, count + 1):
            term *= ratio
            total += term
            first += (low + i) * term
        return total, first, term
    last = ratio**count
    g0 = ratio * (1 - last) / (1 - ratio)
    g1 = ratio * (1 - (count + 1) * last + count * last * ratio) / (1 - ratio) ** 2
    return g0, low * g0 + g1, last


def _geometric(ratio: float, count: int, *, high: int) -> tuple[float, float, float]:
    """States high, high−1, …, high−count with terms r^0..r^count (r < 1): (Σ, Σ n·term,
    the last term)."""
    g0, g1, last = _tail(ratio, count, low=0)
    # Σ_{i=0..count} r^i = 1 + g0; Σ (high − i)·r^i = high·(1 + g0) − g1.
    return 1.0 + g0, high * (1.0 + g0) - g1, last


def _normalised(log_p: list[float]) -> list[float]:
    """exp(log p − max), normalised to sum 1: WVA's rescaled products without overflow."""
    top = max(log_p)
    p = [math.exp(v - top) for v in log_p]
    total = math.fsum(p)
    return [v / total for v in p]
