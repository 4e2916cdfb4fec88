"""The sums of one replica's birth–death chain (`analyze.queue_model`), walked or closed.

Why: the queue's statistics are five sums over its states 0..K (K = N + max queue) with
p_{n+1} = p_n·λ/μ_n and μ_n = n/(base + slope·n) up to the batch limit N (μ_N beyond it).
The SLO path solves this chain a few times per variant per cycle, so how the sums are taken
decides the cost of the whole analyzer. Three ways, each exact to rounding:

- `closed`: while q = λ·slope < 1, the batch states are a negative binomial of r = base/slope
  + 1 and q, whose sums over all n ≥ 0 are closed. When the states from N on hold less than
  1e-18 of the mass (bounded by a geometric series from p_N) the chain is that closed form
  (`Unqueued`: nothing waits); when they hold more but are few to walk, its sums are the
  closed ones less the negative binomial's states beyond N plus the queue's geometric series;
  otherwise None;
- `walk`: from the mode (found in closed form) outward, 32 states at a time with C-level
  products, until the rest is below 1e-18 of the sum; the queue states in closed form;
- `full`: every state in log space, for service rates that are not monotone (base < 0).

`Sums` are unnormalised (p_0, p_K, Σp, Σn·p, Σ_{n≤N} p, Σ_{n≤N} n·p). Units: λ per ms, base
and slope in ms. What fails: nothing raises on the inputs `QueueAnalyzer.build` admits (a
positive service time at 1 and N, λ > 0).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate, repeat
from operator import add, mul, truediv

TAIL = 1e-18
"""A walk away from the mode stops when the rest of the chain is below this share of the sum."""
_LOG_TAIL = math.log(TAIL)
_LARGE_SHAPE = 1e12
"""Above this a = base/slope (a slope of almost 0) the closed form's log-gammas lose their
digits; the walk takes over."""
_CHUNK = 32
"""States multiplied out per step of a walk (C-level products; the tail test runs per chunk)."""

Sums = tuple[float, float, float, float, float, float]
"""Unnormalised (p_0, p_K, Σp, Σn·p, Σ_{n≤N} p, Σ_{n≤N} n·p) of the chain."""


@dataclass(frozen=True, slots=True)
class Unqueued:
    """The chain that never reaches its batch limit: requests in service (= in system), the
    service (= response) time in ms, and ρ = 1 − p_0."""

    mean: float
    serv: float
    rho: float


def closed(*, base: float, slope: float, nb: int, k: int, lam: float) -> Unqueued | Sums | None:
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
    q = lam * slope
    if not (0 < q < 1):
        return None
    r = base / slope + 1
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
        return Unqueued(mean=mean, serv=(base + slope) / (1 - q), rho=-math.expm1(-log_total))
    # States past N until the terms fall below 1e-18 (ratios ≤ λ/μ_N): walking them costs
    # about what walking the batch does at 0.8·N (timed).
    if (_LOG_TAIL - log_at_n) / math.log(top) > 0.8 * nb:
        return None
    at_n = math.exp(log_at_n)
    beyond, beyond_first = _beyond(base=base, slope=slope, lam=lam, start=nb, term=at_n)
    total_n, first_n = 1.0 - beyond, mean - beyond_first
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


def _beyond(
    *, base: float, slope: float, lam: float, start: int, term: float
) -> tuple[float, float]:
    """Σp and Σn·p of the negative binomial over start+1, start+2, … from p_start = `term`
    (relative to the whole distribution's 1), until the rest is below 1e-18."""
    lb, ls = lam * base, lam * slope
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
        if term * ratio < TAIL * (1 - ratio):
            return total, first
        j0 = j1


def walk(*, base: float, slope: float, nb: int, k: int, lam: float) -> Sums:
    """Unnormalised (p_0, p_K, Σp, Σn·p, Σ_{n≤N} p, Σ_{n≤N} n·p), the mode's term 1.

    States above N all serve at μ_N, so that stretch is geometric and summed in closed form;
    only the batch states 0..N are walked, outward from the mode."""
    top = nb / (base + slope * nb)
    if lam > top:
        # Every state is busier than the last: the mode is K, and the queue states fall
        # geometrically (ratio μ_N/λ) from K down to N.
        total, first, at_n = _geometric(top / lam, k - nb, high=k)
        p0, added, added_first = _down(
            base=base, slope=slope, lam=lam, start=nb, term=at_n, total=total
        )
        return (
            p0,
            1.0,
            total + added,
            first + added_first,
            at_n + added,
            nb * at_n + added_first,
        )
    # The mode: the number of n ≤ N with μ_n < λ, i.e. n·(1 − λ·slope) < λ·base.
    free = 1 - lam * slope
    mode = nb if free <= 0 else max(0, min(nb, math.ceil(lam * base / free) - 1))
    lb, ls = lam * base, lam * slope
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
        if ratio < 1 and term * ratio < TAIL * (1 - ratio) * total:
            break
    total_n, first_n = total, first
    if reached and k > nb:
        # Queue states N+1..K: term_N·r^i, r = λ/μ_N ≤ 1.
        tail, tail_first, last = _tail(lam / top, k - nb, low=nb)
        total += term * tail
        first += term * tail_first
        pk = term * last
    low, added, added_first = _down(
        base=base, slope=slope, lam=lam, start=mode, term=1.0, total=total
    )
    if mode > 0:
        p0 = low
    return p0, pk, total + added, first + added_first, total_n + added, first_n + added_first


def _down(
    *, base: float, slope: float, lam: float, start: int, term: float, total: float
) -> tuple[float, float, float]:
    """Walk states start−1 .. 0 from `term` at `start`: (p_0, or 0 when the walk stopped
    before it, Σp, Σn·p) of the states walked."""
    lb, ls = lam * base, lam * slope
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
        if ratio < 1 and term * ratio < TAIL * (1 - ratio) * (total + added):
            break
    return p0, added, added_first


def full(*, mu: Sequence[float], k: int, lam: float) -> Sums:
    """The same sums over every state, in log space (μ not monotone)."""
    nb, log_lam, cum = len(mu), math.log(lam), 0.0
    log_p = [0.0]
    for j in range(k):
        cum += log_lam - math.log(mu[min(j, nb - 1)])
        log_p.append(cum)
    p = normalised(log_p)
    return (
        p[0],
        p[-1],
        1.0,
        math.fsum(n * v for n, v in enumerate(p)),
        math.fsum(p[: nb + 1]),
        math.fsum(n * v for n, v in enumerate(p[: nb + 1])),
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


def normalised(log_p: list[float]) -> list[float]:
    """exp(log p − max), normalised to sum 1: WVA's rescaled products without overflow."""
    top = max(log_p)
    p = [math.exp(v - top) for v in log_p]
    total = math.fsum(p)
    return [v / total for v in p]
