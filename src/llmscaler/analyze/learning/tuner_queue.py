"""The tuner's queue at the observed load while nothing waits: its closed form, asked directly.

Why: every step of the tuner (`analyze.learning.kalman`) solves its variant's queue five times, h(x)
at the state and the wait and service time at four perturbations of the service time's base and
slope for the Jacobian. At the loads replicas run, the chain almost never fills its batch and
its solution is the closed form of `queue_chain.closed` (`Unqueued`: W = 0, S = (base + slope)
/ (1 − λ·slope)). Reached through `QueueAnalyzer.build` and `solve`, each such solution cost
about three times the closed form itself (the analyzer, its rate range and parameters, the
statistics record); here the same closed form is asked with the same arguments, so the answer
is the analyzer's to the bit.

What it computes: `service`, the mean service time when the closed form holds; `latencies`,
the (TTFT, ITL) of `QueueAnalyzer.latencies` on the tuner's queue when it holds;
`wait_and_service`, the (W, S) of the queue with a given base and slope, by the closed form or
else by the analyzer; `waits_and_services`, the same at several (base, slope) at once. Times
in ms, λ per ms, the observed rate per second. What fails: nothing raises; `service` and
`latencies` return None wherever the closed form does not hold or an input is outside what the
fast path covers (no input tokens, a non-positive service time, a rate out of range), and the
caller then solves the queue in full, which also judges the inputs; `wait_and_service` returns
None for a service time ≤ 0 or a rate the queue cannot serve, `waits_and_services` when it does
at any point.
"""

from __future__ import annotations

import math

from llmscaler.analyze.queueing import queue_chain
from llmscaler.analyze.queueing.perf_model import PerfParams, effective_concurrency
from llmscaler.analyze.queueing.queue_model import QueueAnalyzer, QueueError, RateRange


def service(*, base: float, slope: float, batch: int, queue: int, lam: float) -> float | None:
    """S (ms) of the chain at λ per ms when nothing waits; None when the chain must be solved.
    The conditions are `QueueAnalyzer.solve`'s for trying the closed form: λ > 0 and finite, a
    service rate that does not fall with the batch (base ≥ 0)."""
    if not (lam > 0 and base >= 0 and math.isfinite(lam)):
        return None
    closed = queue_chain.closed(base=base, slope=slope, nb=batch, k=batch + queue, lam=lam)
    return closed.serv if isinstance(closed, queue_chain.Unqueued) else None


def latencies(
    *,
    x: tuple[float, ...],
    batch: int,
    queue: int,
    input_tokens: float,
    output_tokens: float,
    rate: float,
    epsilon: float,
) -> tuple[float, float] | None:
    """(TTFT, ITL) ms at `rate` requests/s as `QueueAnalyzer.build(...).latencies(rate/1000)`
    gives them, when the queue's inputs are valid, the rate within its range and nothing
    waits; None otherwise (the caller then asks the analyzer)."""
    if not (batch >= 1 and queue >= 0 and input_tokens > 0 and output_tokens >= 1):
        return None
    alpha, beta, gamma, delta = x
    decodes = output_tokens - 1
    # `QueueAnalyzer.build`'s service time base + slope·n, in its order of operations.
    base = gamma + decodes * alpha
    slope = delta * input_tokens + decodes * beta
    low, high = base + slope, base + slope * batch
    if not (math.isfinite(low) and low > 0 and math.isfinite(high) and high > 0):
        return None
    if rate > batch / high * (1 - epsilon) * 1000:
        return None
    serv = service(base=base, slope=slope, batch=batch, queue=queue, lam=rate / 1000)
    if serv is None:
        return None
    conc = effective_concurrency(
        avg_service_time=serv,
        params=PerfParams(alpha, beta, gamma, delta),
        avg_input_tokens=input_tokens,
        avg_output_tokens=output_tokens,
        max_batch_size=batch,
    )
    return 0.0 + (gamma + delta * input_tokens * conc), alpha + beta * conc


def wait_and_service(
    *,
    x: tuple[float, ...],
    base: float,
    slope: float,
    batch: int,
    queue: int,
    input_tokens: float,
    output_tokens: float,
    rate: float,
    epsilon: float,
) -> tuple[float, float] | None:
    """(W, S) ms of the queue whose service time is base + slope·n at `rate` requests/s (the
    Jacobian's perturbed queues: base and slope are not those of x)."""
    if not _admitted(base=base, slope=slope, batch=batch, rate=rate, epsilon=epsilon):
        return None
    top = batch / (base + slope * batch)
    serv = service(base=base, slope=slope, batch=batch, queue=queue, lam=rate / 1000)
    if serv is not None:
        return 0.0, serv
    analyzer = QueueAnalyzer(
        params=PerfParams(*x),
        max_batch_size=batch,
        max_queue_size=queue,
        avg_input_tokens=input_tokens,
        avg_output_tokens=output_tokens,
        rate_range=RateRange(min=epsilon * 1000 / (base + slope), max=top * (1 - epsilon) * 1000),
        base=base,
        slope=slope,
        monotone=base >= 0,
    )
    stats = analyzer.solve(lam=rate / 1000)
    return None if isinstance(stats, QueueError) else (stats.avg_wait_time, stats.avg_serv_time)


def _admitted(*, base: float, slope: float, batch: int, rate: float, epsilon: float) -> bool:
    """A positive service time at 1 and N, and a rate (req/s) within the queue's range."""
    if not (base + slope > 0 and base + slope * batch > 0):
        return False
    return not rate > batch / (base + slope * batch) * (1 - epsilon) * 1000


def waits_and_services(
    *,
    x: tuple[float, ...],
    points: tuple[tuple[float, float], ...],
    batch: int,
    queue: int,
    input_tokens: float,
    output_tokens: float,
    rate: float,
    epsilon: float,
) -> list[tuple[float, float]] | None:
    """`wait_and_service` at each (base, slope) of `points` (the Jacobian's four perturbed
    queues), None as soon as one is None. The same answers to the bit: what does not depend
    on the point (λ, the chain's length, whether λ admits the closed form) is taken once, and
    a point whose chain is unqueued is read from the closed form without the two calls in
    between; any other point goes through `wait_and_service` itself."""
    lam = rate / 1000
    k = batch + queue
    closable = lam > 0 and math.isfinite(lam)
    found: list[tuple[float, float]] = []
    for base, slope in points:
        if not _admitted(base=base, slope=slope, batch=batch, rate=rate, epsilon=epsilon):
            return None
        closed = (
            queue_chain.closed(base=base, slope=slope, nb=batch, k=k, lam=lam)
            if closable and base >= 0
            else None
        )
        if isinstance(closed, queue_chain.Unqueued):
            found.append((0.0, closed.serv))
            continue
        solved = wait_and_service(
            x=x,
            base=base,
            slope=slope,
            batch=batch,
            queue=queue,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            rate=rate,
            epsilon=epsilon,
        )
        if solved is None:
            return None
        found.append(solved)
    return found
