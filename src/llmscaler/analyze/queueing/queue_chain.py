"""The sums of one replica's birth–death chain (`analyze.queueing.queue_model`), walked or closed.

Why: the queue's statistics are five sums over its states 0..K (K = N + max queue) with
p_{n+1} = p_n·λ/μ_n and μ_n = n/(base + slope·n) up to the batch limit N (μ_N beyond it).
The SLO path solves this chain a few times per variant per cycle, so how the sums are taken
decides the cost of the whole analyzer. Three ways, each exact to rounding:

- `closed`: while q = λ·slope < 1, the batch states are a negative binomial of r = base/slope
  + 1 and q, whose sums over all n ≥ 0 are closed. When the states from N on hold less than
  1e-18 of the mass (bounded by a geometric series from p_N) the chain is that closed form
  (`Unqueued`: nothing waits); when they hold more (and λ < μ_N), its sums up to N are
  regularised incomplete beta functions, taken from their continued fractions (10-25 steps,
  a quarter of a walk's time or less), and the queue's are a geometric series from p_N;
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
from itertools import accumulate, repeat
from operator import add, mul, truediv
from typing import NamedTuple

TAIL = 1e-18
"""A walk away from the mode stops when the rest of the chain is below this share of the sum."""
_LOG_TAIL = math.log(TAIL)
_LARGE_SHAPE = 1e12
"""Above this a = base/slope (a slope of almost 0) the closed form's log-gammas lose their
digits; the walk takes over."""
_CHUNK = 32
"""States multiplied out per step of a walk (C-level products; the tail test runs per chunk)."""
_STIRLING_FROM = 30
"""Stirling's series to four terms is exact to rounding from here on."""
_FRACTION_STEPS = 200
"""Steps of a continued fraction before the walk takes over (10-25 where `closed` uses it)."""

Sums = tuple[float, float, float, float, float, float]
"""Unnormalised (p_0, p_K, Σp, Σn·p, Σ_{n≤N} p, Σ_{n≤N} n·p) of the chain."""


# Named tuples here and for the SLO path's other per-solution and per-variant records
# (`PerfParams`, `TunerObservation`, `Workload`): built and hashed thousands of times per
# cycle, at a third of a frozen dataclass's cost.
class Unqueued(NamedTuple):
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
    When they hold more, the batch states' sums are incomplete beta functions of the
    negative binomial (`_batch_sums`, from p_N in closed form: `_log_binomial`) and the queue
    states are the geometric series from p_N; every term is taken relative to the closed Σ.
    None where λ ≥ μ_N, where a fraction does not settle, or where most of the mass lies
    past N and the fraction's side would keep too few digits."""
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
    # The test above may round; the sums below take p_N to the digits the walk would.
    log_at_n = _log_binomial(r=r, q=q, nb=nb) - log_total
    at_n = math.exp(log_at_n)
    batch = _batch_sums(r=r, q=q, nb=nb, mean=mean, after=at_n * q * (nb + r) / (nb + 1))
    if batch is None:
        return None
    total_n, first_n = batch
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


def _log_binomial(*, r: float, q: float, nb: int) -> float:
    """log(C(N + r − 1, N)·q^N), the negative binomial's p_N·(1 − q)^−r, to a few 1e-14.

    log Γ(N + r) − log Γ(r) − log N! rounds to about 1e-16 of its largest term, 1e-9 for a
    shape r of 1e6 (a decode slope near 0): the two large log-gammas are taken as one
    difference from Stirling's series instead, whose terms stay near the result's size."""
    if r > nb and r >= _STIRLING_FROM:
        return (
            (r - 0.5) * math.log1p(nb / r)
            + nb * math.log(q * (r + nb))
            - nb
            + _stirling(r + nb)
            - _stirling(r)
            - math.lgamma(nb + 1)
        )
    if nb + 1 >= _STIRLING_FROM:
        shape = r - 1
        return (
            (nb + 0.5) * math.log1p(shape / (nb + 1))
            + shape * math.log(nb + r)
            - shape
            + _stirling(nb + r)
            - _stirling(nb + 1.0)
            - math.lgamma(r)
            + nb * math.log(q)
        )
    return math.lgamma(nb + r) - math.lgamma(r) - math.lgamma(nb + 1) + nb * math.log(q)


def _stirling(x: float) -> float:
    """log Γ(x) − (x − 1/2)·log x + x − log(2π)/2 for x ≥ 30 (four terms: below 1e-16)."""
    inv = 1.0 / x
    inv2 = inv * inv
    return inv * (1 / 12 - inv2 * (1 / 360 - inv2 * (1 / 1260 - inv2 / 1680)))


def _batch_sums(
    *, r: float, q: float, nb: int, mean: float, after: float
) -> tuple[float, float] | None:
    """Σ_{n≤N} p_n and Σ_{n≤N} n·p_n of the negative binomial (r, q), relative to its whole
    mass, from p_{N+1} = `after`; None where the continued fractions do not settle.

    Both are regularised incomplete beta functions: P(X ≤ N) = I_{1−q}(r, N + 1) and, as
    n·p_n(r) = mean·p_{n−1}(r + 1), Σ_{n≤N} n·p_n = mean·I_{1−q}(r + 1, N). Each is taken
    from whichever side's fraction converges fast (x below (a + 1)/(a + b + 2)): the part
    past N (a small term from p_{N+1}, subtracted from the whole) or the part up to N itself
    (so that neither loses its digits to a difference)."""
    if q < (nb + 2) / (nb + r + 3):
        # The part past N: it only needs the digits it keeps against the whole.
        fraction = _fraction(nb + 1.0, r, q, TAIL / after)
        if fraction is None or after * fraction > 0.5:
            return None
        total_n = 1.0 - after * fraction
    else:
        fraction = _fraction(r, nb + 1.0, 1.0 - q, 0.0)
        if fraction is None:
            return None
        total_n = (nb + 1) * after / r * fraction
    if mean <= 2 * nb:
        # (n + 1)·p_{n+1} = q·(n + r)·p_n summed over n < N: Σ_{n≤N} n·p_n = mean·Σ_{n≤N} p_n
        # − (N + 1)·p_{N+1}/(1 − q), no second fraction. With the mean at most 2N the
        # difference keeps its digits (within 1e-13 of the walk in tests/unit/
        # test_queue_model.py); above, the first term can dwarf the result.
        return total_n, mean * total_n - (nb + 1) * after / (1 - q)
    if q < (nb + 1) / (nb + r + 3):
        fraction = _fraction(float(nb), r + 1, q, TAIL * mean / ((nb + 1) * after))
        if fraction is None:
            return None
        first_n = mean - (nb + 1) * after * fraction
    else:
        fraction = _fraction(r + 1, float(nb), 1.0 - q, 0.0)
        if fraction is None:
            return None
        first_n = nb * (nb + 1) * after / (r + 1) * fraction
    return total_n, first_n


def _fraction(a: float, b: float, x: float, rel: float) -> float | None:
    """The continued fraction of the regularised incomplete beta function (modified Lentz),
    I_x(a, b) = x^a·(1 − x)^b / (a·B(a, b)) times this, to `rel` relative (1e-16 at least).
    None when a denominator vanishes or after `_FRACTION_STEPS` steps without converging
    (x well above (a + 1)/(a + b + 2), where it converges slowly): the walk then."""
    rel = max(rel, 1e-16)
    sum_ab, a1, a_1 = a + b, a + 1.0, a - 1.0
    try:
        c = 1.0
        d = 1.0 / (1.0 - sum_ab * x / a1)
        h = d
        for m in range(1, _FRACTION_STEPS + 1):
            m2 = 2 * m
            term = m * (b - m) * x / ((a_1 + m2) * (a + m2))
            d = 1.0 / (1.0 + term * d)
            c = 1.0 + term / c
            h *= d * c
            term = -(a + m) * (sum_ab + m) * x / ((a + m2) * (a1 + m2))
            d = 1.0 / (1.0 + term * d)
            c = 1.0 + term / c
            step = d * c
            h *= step
            if abs(step - 1.0) <= rel:
                return h if h > 0 and math.isfinite(h) else None
    except ZeroDivisionError:
        return None
    return None


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
