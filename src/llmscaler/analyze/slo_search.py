"""The largest arrival rate per replica that meets TTFT and ITL targets (WVA `Size`).

Why: the SLO analyzer sizes a variant as ⌈arrival rate / what one replica sustains within the
targets⌉; this module finds the second figure on the queue of `analyze.queue_model`, exactly as
WVA's queue analyzer does, so its unit tests can be replayed:

- `within_tolerance(x, value, tolerance)`: x = value, or |(x − value)/value| ≤ tolerance (False
  for value = 0 or a negative tolerance);
- `binary_search(x_min, x_max, y_target, evaluate)`: f monotone on [x_min, x_max] (direction
  read from the endpoints); returns (x, indicator) with indicator −1 when the target lies below
  the curve at x_min (x = x_min), +1 when above it at x_max (x = x_max), 0 when found within the
  relative tolerance 1e-6 in at most 100 halvings (the last midpoint otherwise);
- `size(analyzer, targets)`: for each target > 0, the rate λ* where predicted TTFT (resp. ITL)
  equals it; a TTFT or ITL target below the curve at the smallest rate is an error ("target is
  below the bounded region"); a TPS target > 0 takes (1 − 0.1)·λmax; the smallest of the three
  is analysed and its throughput is the replica's maximum rate. `size(..., bisection=True)`
  runs WVA's bisection for each target; by default (the analyzer's path) the ends of the rate
  range are solved once for both targets and each rate is found by regula falsi on log y with
  the Illinois correction: the same end rules and the same acceptance test (predicted latency
  within 1e-6 of the target), in 4-8 queue solutions instead of 20-25 per target. The two
  answers differ by less than the tolerance allows (a property test compares them).

Units: targets in ms (TTFT, ITL) and tokens/s (TPS); λ in requests per ms inside the search
(as WVA's eval functions), every rate returned in requests per second.

TTFT here is queueing plus prefill (the first token is the prefill's output), the same figure
the tuner fits (`analyze.kalman`): WVA's main branch adds one ITL in `Size` but not in its
tuner, so the two disagree; here they cannot.

What fails: errors are values (`SearchError`): an invalid range, a model that cannot be solved,
a negative target, a target below the bounded region. Nothing raises.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from llmscaler.analyze.queue_model import (
    STABILITY_SAFETY_FRACTION,
    AnalysisMetrics,
    QueueAnalyzer,
    QueueError,
)

TOLERANCE = 1e-6
"""WVA's relative tolerance of the binary search."""
MAX_ITERATIONS = 100
"""WVA's bound on halvings."""


@dataclass(frozen=True, slots=True)
class SearchError:
    message: str


def within_tolerance(*, x: float, value: float, tolerance: float) -> bool:
    """WVA `WithinTolerance`: x is relatively within `tolerance` of `value`."""
    if x == value:
        return True
    if value == 0 or tolerance < 0:
        return False
    return abs((x - value) / value) <= tolerance


def binary_search(
    *,
    x_min: float,
    x_max: float,
    y_target: float,
    evaluate: Callable[[float], float | None],
) -> tuple[float, int] | SearchError:
    """WVA `BinarySearch`; `evaluate` returns None where the function cannot be evaluated."""
    if x_min > x_max:
        return SearchError(f'invalid range [{x_min}, {x_max}]')
    bounds: list[float] = []
    for x in (x_min, x_max):
        y = evaluate(x)
        if y is None:
            return SearchError(f'invalid function evaluation at {x}')
        if within_tolerance(x=y, value=y_target, tolerance=TOLERANCE):
            return x, 0
        bounds.append(y)
    increasing = bounds[0] < bounds[1]
    if (increasing and y_target < bounds[0]) or (not increasing and y_target > bounds[0]):
        return x_min, -1
    if (increasing and y_target > bounds[1]) or (not increasing and y_target < bounds[1]):
        return x_max, 1
    lo, hi = x_min, x_max
    x_star = lo
    for _ in range(MAX_ITERATIONS):
        x_star = 0.5 * (lo + hi)
        y_star = evaluate(x_star)
        if y_star is None:
            return SearchError(f'invalid function evaluation at {x_star}')
        if within_tolerance(x=y_star, value=y_target, tolerance=TOLERANCE):
            break
        if (increasing and y_target < y_star) or (not increasing and y_target > y_star):
            hi = x_star
        else:
            lo = x_star
    return x_star, 0


@dataclass(frozen=True, slots=True)
class TargetPerf:
    """WVA `TargetPerf`: TTFT and ITL in ms, TPS in tokens/s; 0 = not considered."""

    ttft: float = 0.0
    itl: float = 0.0
    tps: float = 0.0


@dataclass(frozen=True, slots=True)
class TargetRate:
    """WVA `TargetRate`: the largest rate (requests/s) meeting each target."""

    rate_ttft: float
    rate_itl: float
    rate_tps: float


@dataclass(frozen=True, slots=True)
class Sizing:
    """`size`'s answer: the rates, the analysis at the smallest, and what it achieves."""

    target_rate: TargetRate
    metrics: AnalysisMetrics
    achieved: TargetPerf

    @property
    def max_rate(self) -> float:
        """Requests/s one replica sustains within the targets (the throughput at λ*)."""
        return self.metrics.throughput


def _log(y: float) -> float:
    """log y; −∞ below 0 (a step there halves the bracket instead of interpolating)."""
    return math.log(y) if y > 0 else -math.inf


def _plain(y: float) -> float:
    return y


def _root(
    *,
    lo: float,
    hi: float,
    y_lo: float,
    y_hi: float,
    y_target: float,
    evaluate: Callable[[float], float | None],
) -> tuple[float, int] | SearchError:
    """`binary_search`'s answer on a bracket whose end values are known: the same end rules
    and the same acceptance (y within `TOLERANCE` of the target), found by regula falsi with
    the Illinois correction instead of halving. The latency curves are smooth and monotone, so
    it accepts after 4-8 evaluations where halving takes 20-25; a step that would leave the
    bracket halves it instead."""
    for x, y in ((lo, y_lo), (hi, y_hi)):
        if within_tolerance(x=y, value=y_target, tolerance=TOLERANCE):
            return x, 0
    increasing = y_lo < y_hi
    if (increasing and y_target < y_lo) or (not increasing and y_target > y_lo):
        return lo, -1
    if (increasing and y_target > y_hi) or (not increasing and y_target < y_hi):
        return hi, 1
    # Interpolate on log y: a queue's latency grows without bound near its top rate, and a
    # straight line through the ends of such a curve lands by the lower end every time.
    # (A figure ≤ 0, such as a TTFT of 0 without prefill, keeps the plain scale.)
    scale = _log if y_lo > 0 and y_hi > 0 and y_target > 0 else _plain
    shift = scale(y_target)
    f_lo, f_hi = scale(y_lo) - shift, scale(y_hi) - shift
    side = 0
    x = lo
    for _ in range(MAX_ITERATIONS):
        x = hi - f_hi * (hi - lo) / (f_hi - f_lo) if f_hi != f_lo else 0.5 * (lo + hi)
        if not lo < x < hi:
            x = 0.5 * (lo + hi)
        probe = evaluate(x)
        if probe is None:
            return SearchError(f'invalid function evaluation at {x}')
        if within_tolerance(x=probe, value=y_target, tolerance=TOLERANCE):
            break
        f = scale(probe) - shift
        if (f > 0) == (f_hi > 0):
            hi, f_hi = x, f
            if side == -1:
                f_lo *= 0.5
            side = -1
        else:
            lo, f_lo = x, f
            if side == 1:
                f_hi *= 0.5
            side = 1
    return x, 0


def size(
    *, analyzer: QueueAnalyzer, targets: TargetPerf, bisection: bool = False
) -> Sizing | SearchError:
    """WVA `Size`: the largest per-replica rate meeting every target > 0.

    With `bisection`, each rate is WVA's `binary_search` from the rate range's ends; without
    it (the analyzer's path), the ends are solved once for both targets and `_root` finds a
    rate meeting the same acceptance test in a few evaluations. Both answers lie within the
    search's tolerance of the target (tests/unit/test_slo_search.py compares them)."""
    if targets.ttft < 0 or targets.itl < 0 or targets.tps < 0:
        return SearchError(f'invalid target values {targets}')
    lam_min = analyzer.rate_range.min / 1000
    lam_max = analyzer.rate_range.max / 1000
    solved: dict[float, tuple[float, float] | None] = {}

    def latencies(lam: float) -> tuple[float, float] | None:
        if lam not in solved:
            out = analyzer.latencies(lam=lam)
            solved[lam] = None if isinstance(out, QueueError) else (out[1], out[2])
        return solved[lam]

    found: dict[str, float] = {}
    for index, (name, target) in enumerate((('TTFT', targets.ttft), ('ITL', targets.itl))):
        found[name] = lam_max
        if not target > 0:
            continue

        def evaluate(lam: float, index: int = index) -> float | None:
            figures = latencies(lam)
            return None if figures is None else figures[index]

        result: tuple[float, int] | SearchError
        if bisection:
            result = binary_search(x_min=lam_min, x_max=lam_max, y_target=target, evaluate=evaluate)
        else:
            ends = (evaluate(lam_min), evaluate(lam_max))
            if ends[0] is None or ends[1] is None:
                bad = lam_min if ends[0] is None else lam_max
                result = SearchError(f'invalid function evaluation at {bad}')
            else:
                result = _root(
                    lo=lam_min,
                    hi=lam_max,
                    y_lo=ends[0],
                    y_hi=ends[1],
                    y_target=target,
                    evaluate=evaluate,
                )
        if isinstance(result, SearchError):
            return SearchError(f'failed to calculate rate for target {name}={target}: {result}')
        if result[1] < 0:
            return SearchError(
                f'target {name}={target:g} ms is below the bounded region '
                f'(rates {analyzer.rate_range.min:g}..{analyzer.rate_range.max:g}/s)'
            )
        found[name] = result[0]
    lam_tps = lam_max * (1 - STABILITY_SAFETY_FRACTION) if targets.tps > 0 else lam_max
    lam = min(found['TTFT'], found['ITL'], lam_tps)
    # min(): (max / 1000) * 1000 can round one ulp above max.
    metrics = analyzer.analyze(request_rate=min(lam * 1000, analyzer.rate_range.max))
    if isinstance(metrics, QueueError):
        return SearchError(metrics.message)
    return Sizing(
        target_rate=TargetRate(
            rate_ttft=found['TTFT'] * 1000, rate_itl=found['ITL'] * 1000, rate_tps=lam_tps * 1000
        ),
        metrics=metrics,
        achieved=TargetPerf(
            ttft=metrics.ttft,
            itl=metrics.itl,
            tps=metrics.throughput * analyzer.avg_output_tokens,
        ),
    )
