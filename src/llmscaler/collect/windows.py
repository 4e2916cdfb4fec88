"""Prometheus' range-vector windows, computed locally from scraped samples.

Why: without Prometheus (pods scraped directly, as Kaito's LLMAutoScaler proposal does) the
collectors still need the figures WVA's queries produce (v0.9.0, internal/collector/registration/):
`max_over_time(...[1m])` of KV usage and queue length, and `rate(x_sum[5m]) / rate(x_count[5m])` for
token and latency averages. Both sources must agree on the same `Reading`, so the window arithmetic
here follows Prometheus (promql/functions.go, 3.x):

- A range `[d]` evaluated at `now` holds the samples with `now − d < t ≤ now` (left-open).
- `max_over_time` is the largest value in that range; None when the range is empty.
- `increase` follows `extrapolatedRate`:
  1. at least 2 samples in range, else None;
  2. raw = last − first, plus every value just before a drop (a drop is a counter reset, so the
     counter restarted from 0 and the value before the drop had been gained as well);
  3. sampled = t_last − t_first; average step = sampled / (n − 1);
  4. to_start = t_first − (now − d) and to_end = now − t_last; each gap counts in full when it
     is below 1.1 × the average step, otherwise only half a step is assumed (the series
     probably started or ended inside the range);
  5. a counter cannot go below 0: when raw > 0 and first ≥ 0, to_start is further capped at
     sampled × first / raw, the time the counter would have needed to climb from 0;
  6. increase = raw × (sampled + to_start + to_end) / sampled.
  `rate` = increase / d, divided by the full range as Prometheus does.
  Prometheus 2.x (such as the 2.42 used by the integration tests) took the samples in the
  closed range `[now − d, now]` and applied step 5 before the 1.1 test of step 4; the results
  differ only for a sample exactly on the left edge or a counter that starts inside the range.

Bad input: NaN and ±Inf values are ignored (a scrape that gave NaN adds nothing); a sample whose
time is not after the newest one is ignored (time never goes backwards within a series); a query
with `seconds ≤ 0` or non-finite arguments gives None. Samples older than `horizon` (relative to
the newest) are dropped on every `add`, and at most `max_samples` are kept per series, so memory
is bounded; a query longer than the horizon therefore sees only the horizon.
"""

from __future__ import annotations

import math
from array import array
from bisect import bisect_right
from collections.abc import Hashable
from dataclasses import dataclass, field

DEFAULT_MAX_SAMPLES = 2048
"""Enough for a 10-minute horizon at one scrape every 0.3 s."""


class SeriesWindow:
    """The recent (t, value) samples of one series, for `horizon` seconds back from the newest.

    The samples are kept in two arrays of floats (times, values) from index `_start` on, not in a
    container of tuples: a scraper keeps a window per series of every pod (tens of thousands), and
    the garbage collector's full passes visit every element of every container they walk, while
    an array of floats is no container to them. Dropping the oldest samples moves `_start`; the
    arrays are compacted once the dropped part is as long as the kept one (amortized O(1)).
    """

    __slots__ = ('_max', '_start', '_times', '_values', 'horizon', 'last_seen')

    def __init__(self, *, horizon: float, max_samples: int = DEFAULT_MAX_SAMPLES) -> None:
        self.horizon = horizon
        self._max = max(2, max_samples)
        self._times = array('d')
        self._values = array('d')
        self._start = 0
        self.last_seen = -math.inf
        """The newest time `add` was called with, even for a value that was ignored."""

    def __len__(self) -> int:
        return len(self._times) - self._start

    def add(self, *, t: float, value: float) -> None:
        """Record one sample; NaN/±Inf values and times not after the newest are ignored."""
        if not math.isfinite(t):
            return
        self.last_seen = max(self.last_seen, t)
        times = self._times
        start = self._start
        if not math.isfinite(value) or (len(times) > start and t <= times[-1]):
            return
        times.append(t)
        self._values.append(value)
        end = len(times)
        start = max(start, end - self._max)
        oldest_kept = t - self.horizon
        while start < end and times[start] <= oldest_kept:
            start += 1
        if start >= 32 and 2 * start >= end:
            del times[:start]
            del self._values[:start]
            start = 0
        self._start = start

    def _span(self, now: float, seconds: float) -> tuple[int, int]:
        """The indexes [lo, hi) of the samples with now − seconds < t ≤ now."""
        if not (math.isfinite(now) and math.isfinite(seconds)) or seconds <= 0:
            return 0, 0
        times = self._times
        lo = bisect_right(times, now - seconds, self._start)
        return lo, bisect_right(times, now, lo)

    def in_range(self, *, now: float, seconds: float) -> list[tuple[float, float]]:
        """The samples with now − seconds < t ≤ now, oldest first."""
        lo, hi = self._span(now, seconds)
        return list(zip(self._times[lo:hi], self._values[lo:hi], strict=True))

    def max_over(self, *, now: float, seconds: float) -> float | None:
        """`max_over_time(series[seconds])` at `now`; None when no sample is in range."""
        lo, hi = self._span(now, seconds)
        return max(self._values[lo:hi]) if hi > lo else None

    def latest(self, *, now: float, seconds: float) -> tuple[float, float] | None:
        """The newest (t, value) in range, as an instant query with `seconds` of lookback."""
        lo, hi = self._span(now, seconds)
        return (self._times[hi - 1], self._values[hi - 1]) if hi > lo else None

    def increase(self, *, now: float, seconds: float) -> float | None:
        """`increase(series[seconds])` at `now` for a counter; None with fewer than 2 samples."""
        found = self.in_range(now=now, seconds=seconds)
        if len(found) < 2:
            return None
        first_t, first = found[0]
        last_t, last = found[-1]
        raw = last - first
        previous = first
        for _, value in found[1:]:
            if value < previous:
                raw += previous
            previous = value
        sampled = last_t - first_t
        step = sampled / (len(found) - 1)
        to_start = first_t - (now - seconds)
        to_end = now - last_t
        threshold = 1.1 * step
        if to_start >= threshold:
            to_start = step / 2
        if raw > 0 and first >= 0:
            to_start = min(to_start, sampled * first / raw)
        if to_end >= threshold:
            to_end = step / 2
        return raw * (sampled + to_start + to_end) / sampled

    def reaches_start(self, *, now: float, seconds: float) -> bool:
        """Whether `increase` over `(now − seconds, now]` extrapolates to the range's start in
        full: two samples in range, the first within 1.1 average steps of the start (step 4).
        Otherwise the series seems to start inside the range, and for a counter that was already
        counting when its scraping began (or after a gap) the increase is only the part seen."""
        found = self.in_range(now=now, seconds=seconds)
        if len(found) < 2:
            return False
        step = (found[-1][0] - found[0][0]) / (len(found) - 1)
        return found[0][0] - (now - seconds) < 1.1 * step

    def measures_whole(self, *, now: float, seconds: float) -> bool:
        """Whether an increase over `(now − seconds, now]` counts the whole range: the series
        reaches its start (`reaches_start`), or its first value in it is 0, so that it began
        counting inside the range. A counter already counting when its scraping began (or
        resumed after a gap) would otherwise give only the part seen."""
        if self.reaches_start(now=now, seconds=seconds):
            return True
        found = self.in_range(now=now, seconds=seconds)
        return bool(found) and found[0][1] == 0

    def rate(self, *, now: float, seconds: float) -> float | None:
        """`rate(series[seconds])` at `now`: the increase per second of the whole range."""
        increase = self.increase(now=now, seconds=seconds)
        return None if increase is None else increase / seconds


@dataclass(slots=True)
class WindowStore:
    """Windows of many series, keyed by whatever identifies a series to the caller.

    A key is typically (pod, sample name, labels). Series of pods that went away stop being
    updated; `forget_older_than` drops them so the store does not grow with pod churn.
    """

    horizon: float
    max_samples: int = DEFAULT_MAX_SAMPLES
    _series: dict[Hashable, SeriesWindow] = field(default_factory=dict, init=False, repr=False)

    def __len__(self) -> int:
        return len(self._series)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._series

    def add(self, *, key: Hashable, t: float, value: float) -> SeriesWindow:
        window = self._series.get(key)
        if window is None:
            window = SeriesWindow(horizon=self.horizon, max_samples=self.max_samples)
            self._series[key] = window
        window.add(t=t, value=value)
        return window

    def get(self, *, key: Hashable) -> SeriesWindow | None:
        return self._series.get(key)

    def forget_older_than(self, *, now: float, seconds: float | None = None) -> int:
        """Drop the series not updated in the last `seconds` (default: the horizon); how many.

        "Updated" counts every `add`, even of a NaN, because a pod that answers is still there.
        """
        cutoff = now - (self.horizon if seconds is None else seconds)
        stale = [key for key, window in self._series.items() if window.last_seen <= cutoff]
        for key in stale:
            del self._series[key]
        return len(stale)


def ratio_of_rates(
    *, numerator: SeriesWindow, denominator: SeriesWindow, now: float, seconds: float
) -> float | None:
    """rate(numerator[seconds]) / rate(denominator[seconds]), e.g. rate(x_sum) / rate(x_count).

    None when either rate is missing or the denominator did not increase (Prometheus would give
    NaN or ±Inf there, which the collectors drop anyway).
    """
    bottom = denominator.rate(now=now, seconds=seconds)
    if bottom is None or bottom == 0:
        return None
    top = numerator.rate(now=now, seconds=seconds)
    return None if top is None else top / bottom
