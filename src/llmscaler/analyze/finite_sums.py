"""Sums and means of finite figures that cannot overflow: what the analyzers add up.

Why: `math.fsum` is exact and independent of order, which keeps decisions reproducible down to
the last bit, but it raises OverflowError as soon as the exact sum leaves the float range
(two queue thresholds of 1e308 are enough). An analyzer that raises takes its model's decision
with it, so every sum of figures in the core goes through here.

What it computes:

- `mean`: `fsum(values) / n` for every sum that fits in a float; when the exact sum does not,
  twice the exact sum of `value / 2n` (every partial sum then fits); either way kept between the
  smallest and the largest value, where the true mean lies (rounding can step just outside);
- `total`: `fsum(values)` when every partial sum fits in a float; otherwise `2n` times the exact
  sum of `value / 2n`, saturated at the largest float (with the sign of the sum): a sum of
  finite non-negative figures stays a finite non-negative number, which every comparison
  downstream handles.

Bad input: a NaN among the values gives NaN, and an infinity gives that infinity (or NaN for
+Inf and -Inf together), as `sum` would: the engine hands over only finite figures, and a caller
that does not must judge the result. Nothing raises.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable, Sequence

_LARGEST = sys.float_info.max


def _has_non_finite(values: Sequence[float]) -> float | None:
    """The sum of the non-finite values (NaN, ±Inf), or None when every value is finite."""
    odd = [value for value in values if not math.isfinite(value)]
    if not odd:
        return None
    return sum(odd)


def total(values: Iterable[float]) -> float:
    """The exact sum of `values`, saturated at ± the largest float; never raises."""
    items = list(values)
    try:
        quick = math.fsum(items)
    except (OverflowError, ValueError):  # a partial sum overflowed, or +Inf met -Inf
        pass
    else:
        # A finite exact sum means every value was finite (fsum carries NaN and ±Inf through)
        # and nothing overflowed: the answer below, without looking at each value first.
        if math.isfinite(quick):
            return quick
    odd = _has_non_finite(items)
    if odd is not None:
        return odd
    try:
        result = math.fsum(items)
    except OverflowError:  # a partial sum left the float range
        result = _scaled_sum(items) * (2 * len(items))
    if math.isinf(result):
        return math.copysign(_LARGEST, result)
    return result


def mean(values: Sequence[float]) -> float:
    """The mean of `values` (0.0 for none), exact to rounding; never raises."""
    if not values:
        return 0.0
    count = len(values)
    try:
        quick = math.fsum(values)
    except (OverflowError, ValueError):  # a partial sum overflowed, or +Inf met -Inf
        quick = math.inf
    if math.isfinite(quick):
        # A finite exact sum means every value was finite (as in `total`): no look at each.
        result = quick / count
    else:
        odd = _has_non_finite(values)
        if odd is not None:
            return odd
        result = math.inf  # finite values whose exact sum leaves the float range
    if math.isinf(result):
        result = _scaled_sum(values) * 2.0
    # The mean lies between the smallest and the largest value; the two roundings (of the sum,
    # then of the division) can step just outside (three equal values near 3e15), so it is held in.
    return min(max(result, min(values)), max(values))


def _scaled_sum(values: Sequence[float]) -> float:
    """The exact sum of `value / 2n`: every partial sum is at most half the largest float."""
    divisor = 2 * len(values)
    return math.fsum(value / divisor for value in values)
