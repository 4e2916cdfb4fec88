"""The largest arrival rate per replica that meets TTFT and ITL targets (WVA `Size`).

Why: the SLO analyzer sizes a variant as ⌈arrival rate / what one replica sustains within the
targets⌉; this module finds the second figure on the queue of `analyze.queueing.queue_model`,
exactly as WVA's queue analyzer does, so its unit tests can be replayed:

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
- `max_rate(analyzer, targets)`: `size(...).max_rate` alone, what the analyzer sizes with.
  Both latencies rise with the rate, so only the target reached first is searched, from the
  rate at which the queue without waiting meets it (exact while the batch seldom fills, where
  the queue has a closed form): one queue solution besides the smallest rate for most sizings,
  secant steps from there otherwise. Same errors and end rules as `size`; the same rate within
  the search's tolerance (a property test compares it with WVA's bisection).

Units: targets in ms (TTFT, ITL) and tokens/s (TPS); λ in requests per ms inside the search
(as WVA's eval functions), every rate returned in requests per second.

TTFT here is queueing plus prefill (the first token is the prefill's output), the same figure
the tuner fits (`analyze.learning.kalman`): WVA's main branch adds one ITL in `Size` but not in its
tuner, so the two disagree; here they cannot.

What fails: errors are values (`SearchError`): an invalid range, a model that cannot be solved,
a negative target, a target below the bounded region. Nothing raises.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from llmscaler.analyze.queueing.queue_model import (
    STABILITY_SAFETY_FRACTION,
    AnalysisMetrics,
    QueueAnalyzer,
    QueueError,
    QueueStats,
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
    search's tolerance of the target (tests/unit/analyze/queueing/test_search.py compares them)."""
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


_Point = tuple[QueueStats, tuple[float, float]]
"""One solution: the queue's statistics and (TTFT, ITL) in ms."""


def max_rate(*, analyzer: QueueAnalyzer, targets: TargetPerf) -> float | SearchError:
    """`size(...).max_rate` (requests/s) without locating a target's rate that does not bind.

    Both latencies rise with the rate, so the smallest of the targets' rates is where the
    first of them reaches its target: the rate is searched once, on the larger of TTFT/target
    and ITL/target, and accepted when that figure is within the search's tolerance of its
    target (the others are then within it or below). The ends keep `size`'s rules (a target
    below the curve at the smallest rate is the same error, a target above it at the largest
    rate gives that rate, a TPS target caps it at 90 %). The first rate tried is the one at
    which the queue without waiting meets the first target (`QueueAnalyzer.unqueued_rate`),
    exact wherever the batch seldom fills: one queue solution for most sizings, regula falsi
    on the log ratio from there otherwise. A queue whose figures do not rise (μ falling with
    the batch, a latency of 0) is sized by `size` itself."""
    if targets.ttft < 0 or targets.itl < 0 or targets.tps < 0:
        return SearchError(f'invalid target values {targets}')
    if not analyzer.monotone:
        return _sized(analyzer=analyzer, targets=targets)
    lam_min = analyzer.rate_range.min / 1000
    lam_max = analyzer.rate_range.max / 1000
    top = lam_max * (1 - STABILITY_SAFETY_FRACTION) if targets.tps > 0 else lam_max
    active = tuple(
        (name, index, target)
        for index, (name, target) in enumerate((('TTFT', targets.ttft), ('ITL', targets.itl)))
        if target > 0
    )
    low = _at(analyzer, lam_min)
    if low is None:
        return SearchError(f'invalid function evaluation at {lam_min}')
    # WVA reads each curve's direction from its ends, and a flat one reverses its end rules
    # (a target below it is met at the top rate). A figure rises from the smallest rate on
    # when the effective batch there is inside (0, N) (it grows with the service time) and
    # the figure grows with it: then the ends rules here are WVA's; otherwise `size` decides.
    if not analyzer.rises(stats=low[0], ttft=targets.ttft > 0, itl=targets.itl > 0):
        return _sized(analyzer=analyzer, targets=targets)
    targets_by_index = (targets.ttft, targets.itl)
    pinned = False
    for _name, index, target in active:
        figure = low[1][index]
        if within_tolerance(x=figure, value=target, tolerance=TOLERANCE):
            pinned = True
        elif target < figure:
            # Below the curve at the smallest rate: an error where the curve rises, which
            # `size` tells from both ends (the three-parameter ITL falls where the batch
            # fills: (S − prefill(n̄))/O with S flat and n̄ growing).
            return _sized(analyzer=analyzer, targets=targets)
        elif not figure > 0:
            return _sized(analyzer=analyzer, targets=targets)
    if pinned:
        return low[0].throughput * 1000
    if not active or top <= lam_min:
        point = _at(analyzer, top)
        return (
            SearchError(f'invalid function evaluation at {top}')
            if point is None
            else (point[0].throughput * 1000)
        )

    def excess(point: _Point) -> tuple[float, bool, int]:
        """(log of the largest figure/target ratio, whether that figure is within tolerance,
        which figure); NaN when a figure did not rise above its value at the smallest rate
        (`size` decides then)."""
        if not all(point[1][i] > low[1][i] for _, i, _ in active):
            return math.nan, False, 0
        ratio, index, target = max((point[1][i] / t, i, t) for _, i, t in active)
        met = within_tolerance(x=point[1][index], value=target, tolerance=TOLERANCE)
        return math.log(ratio), met, index

    guesses = [unqueued(analyzer, index, target) for _, index, target in active]
    x = min((g for g in guesses if g is not None and lam_min < g < top), default=top)
    lo, f_lo = lam_min, max(math.log(low[1][i] / t) for _, i, t in active)
    hi, f_hi = top, math.nan  # f at the top rate: not known until solved
    last: tuple[float, float] | None = None
    side = 0
    point = low
    for _ in range(MAX_ITERATIONS):
        solved = _at(analyzer, x)
        if solved is None:
            return SearchError(f'invalid function evaluation at {x}')
        point = solved
        f, done, index = excess(point)
        if math.isnan(f):
            return _sized(analyzer=analyzer, targets=targets)
        if done or (f < 0 and x == top):
            break
        if f > 0:
            hi, f_hi = x, f
            if side == -1:
                f_lo *= 0.5
            side = -1
        else:
            lo, f_lo = x, f
            if side == 1 and not math.isnan(f_hi):
                f_hi *= 0.5
            side = 1
        # Next: the unqueued model's rate for the target scaled by what this solution missed
        # by (a Newton step on the model's slope), then secant steps through the last two
        # solutions; regula falsi on the bracket when a step would leave it.
        if last is None:
            step = unqueued(analyzer, index, targets_by_index[index] * math.exp(-f))
        elif f != last[1]:
            step = x - f * (x - last[0]) / (f - last[1])
        else:
            step = None
        last = (x, f)
        if step is not None and lo < step < hi:
            x = step
        elif math.isnan(f_hi):
            x = top
        else:
            x = hi - f_hi * (hi - lo) / (f_hi - f_lo)
            if not lo < x < hi:
                x = 0.5 * (lo + hi)
    return point[0].throughput * 1000


def unqueued(analyzer: QueueAnalyzer, index: int, target: float) -> float | None:
    """`QueueAnalyzer.unqueued_rate` for a TTFT (index 0) or ITL (index 1) target."""
    if index == 0:
        return analyzer.unqueued_rate(ttft=target)
    return analyzer.unqueued_rate(itl=target)


def _at(analyzer: QueueAnalyzer, lam: float) -> _Point | None:
    solved = analyzer.latencies(lam=lam)
    return None if isinstance(solved, QueueError) else (solved[0], (solved[1], solved[2]))


def _sized(*, analyzer: QueueAnalyzer, targets: TargetPerf) -> float | SearchError:
    sized = size(analyzer=analyzer, targets=targets)
    return sized if isinstance(sized, SearchError) else sized.max_rate
