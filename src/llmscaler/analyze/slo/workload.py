"""The workload of a group of replicas as WVA's SLO analyzer reads it: arrival-weighted means.

Why: the SLO analyzer (`analyze.slo.analyzer`) sizes each variant, and tunes its performance
model, on the mean token mix and latencies of its busy replicas (arrival rate > 0), weighted by
their arrival rates (WVA's per-variant workload); the model's figures are the same means over
all its variants' busy replicas. The busy replicas' figures are read once into columns, and a
model's sums are taken over its variants' columns chained, so no replica is read twice in one
analysis. The mean number of requests in service is read only where it is used (to seed a
tuner): `workload_of(..., running=False)`, `running_mean`.

Units: arrival rates in requests/s, tokens per request, TTFT and ITL observed in seconds and
returned in ms. Sums are exact (`math.fsum`), so the means do not depend on replica order.
What fails: nothing raises; a figure no busy replica reports is None.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import chain
from operator import mul
from typing import NamedTuple, cast

from llmscaler.domain.snapshot import ReplicaMetrics

MS = 1000.0
"""Seconds (snapshot) to milliseconds (queue model)."""


class Workload(NamedTuple):
    """Arrival-weighted means over busy replicas; None when no busy replica reports the figure."""

    arrival_rate: float
    busy: int
    """Replicas with an arrival rate > 0."""
    avg_input_tokens: float | None
    avg_output_tokens: float | None
    ttft_ms: float | None
    itl_ms: float | None
    running: float | None = None
    """Requests in service per replica (the batch)."""


def workload(replicas: Sequence[ReplicaMetrics]) -> Workload:
    """WVA's per-variant workload: means weighted by arrival rate over replicas with rate > 0."""
    return workload_of(columns(replicas))


Columns = tuple[list[float], tuple[list[float | None], ...]]
"""Busy replicas' arrival rates and their input tokens, output tokens, TTFT, ITL, running."""


def columns(replicas: Sequence[ReplicaMetrics]) -> Columns:
    busy = [r for r in replicas if r.arrival_rate is not None and r.arrival_rate > 0]
    return [r.arrival_rate or 0.0 for r in busy], (
        [r.avg_input_tokens for r in busy],
        [r.avg_output_tokens for r in busy],
        [r.avg_ttft for r in busy],
        [r.avg_itl for r in busy],
        [r.running_requests for r in busy],
    )


def joined(parts: Sequence[Columns]) -> Columns:
    """The columns of several groups of replicas as one (the model's from its variants')."""
    return list(chain.from_iterable(rates for rates, _ in parts)), tuple(
        list(chain.from_iterable(values[k] for _, values in parts)) for k in range(5)
    )


_SCALES = (1.0, 1.0, MS, MS, 1.0)
"""Of the columns after the rates: tokens in, tokens out, TTFT and ITL (s → ms), running."""


def workload_of(columns: Columns, *, running: bool = True) -> Workload:
    """The workload of these columns; without `running`, its `running` is None (not read: the
    SLO analysis reads it only to seed a tuner, `running_mean`)."""
    rates, figures = columns
    total = math.fsum(rates)
    count = 5 if running else 4
    means = [
        _weighted(rates, values, total, scale)
        if None in values or total <= 0
        # Every busy replica reports it: `_weighted`'s sums, without a call (4 per model).
        else scale * math.fsum(map(mul, rates, cast('list[float]', values))) / total
        for values, scale in zip(figures[:count], _SCALES[:count], strict=True)
    ]
    return Workload(
        arrival_rate=total,
        busy=len(rates),
        avg_input_tokens=means[0],
        avg_output_tokens=means[1],
        ttft_ms=means[2],
        itl_ms=means[3],
        running=means[4] if running else None,
    )


def running_mean(columns: Columns) -> float | None:
    """`workload_of(columns).running` alone."""
    rates, figures = columns
    return _weighted(rates, figures[4], math.fsum(rates))


def joined_workload(parts: Sequence[Columns]) -> Workload:
    """`workload_of(joined(parts), running=False)`, the same to the last bit: an exact sum
    does not depend on how its terms are grouped, so the model's sums are taken over the
    variants' columns chained, without joining them (the common case: every busy replica
    reports every figure). `workload_of` keeps its own loop over one group's columns: one
    function over any number of groups, per-figure generators and all, cost 2 % more
    instructions per SLO cycle (bench/instructions.py)."""
    if any(None in values for _, figures in parts for values in figures[:4]):
        return workload_of(joined(parts), running=False)
    total = math.fsum(chain.from_iterable(rates for rates, _ in parts))
    if total <= 0:
        return workload_of(joined(parts), running=False)
    means = [
        scale
        * math.fsum(
            chain.from_iterable(
                map(mul, rates, cast('list[float]', figures[k])) for rates, figures in parts
            )
        )
        / total
        for k, scale in enumerate(_SCALES[:4])
    ]
    return Workload(
        arrival_rate=total,
        busy=sum(len(rates) for rates, _ in parts),
        avg_input_tokens=means[0],
        avg_output_tokens=means[1],
        ttft_ms=means[2],
        itl_ms=means[3],
    )


def _weighted(
    rates: list[float], values: list[float | None], total: float, scale: float = 1.0
) -> float | None:
    """scale × Σ w·v / Σ w over the replicas that report v (exact sums: order-independent)."""
    if None in values:
        pairs = [(w, v) for w, v in zip(rates, values, strict=True) if v is not None]
        weight = math.fsum(w for w, _ in pairs)
        weighted = math.fsum(w * v for w, v in pairs)
    else:
        weight = total
        weighted = math.fsum(map(mul, rates, cast('list[float]', values)))
    if weight <= 0:
        return None
    return scale * weighted / weight
