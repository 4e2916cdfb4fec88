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
import struct
from bisect import bisect_right

DEFAULT_MAX_SAMPLES = 2048
"""Enough for a 10-minute horizon at one scrape every 0.3 s."""

_HEAD = struct.Struct('=4d')
"""A record's header: horizon, max samples, pairs dropped (the start), newest time seen."""
_PAIR = struct.Struct('=2d')
_DOUBLE = struct.Struct('=d')
_HEAD_PAIRS = _HEAD.size // _PAIR.size
_START = 2 * _DOUBLE.size
_LAST_SEEN = 3 * _DOUBLE.size


def _at(index: int) -> int:
    """The offset in a record of the time of its pair `index`."""
    return _HEAD.size + index * _PAIR.size


class SeriesWindow:
    """The recent (t, value) samples of one series, for `horizon` seconds back from the newest.

    A window is a view over its record, a `bytearray` of doubles: a header (horizon, max samples,
    how many of the oldest pairs are dropped, the newest time seen), then the (t, value) pairs. A
    scraper keeps a window per series of every pod (tens of thousands), and the garbage
    collector's full passes walk every container it tracks while holding the interpreter lock,
    the event loop's turn included: a `bytearray` is no container to it, nor is a dict that holds
    only records under keys of strings, so the store keeps the records (`record`) and makes a
    view (`of`) when it reads or adds. Dropping the oldest samples moves the header's start; the
    record is compacted once the dropped part is as long as the kept one (amortized O(1)).

    A view must not outlive the call that reads through it: a `memoryview` of the record open
    elsewhere would stop `add` from growing it (`BufferError`).
    """

    __slots__ = ('record',)

    def __init__(self, *, horizon: float, max_samples: int = DEFAULT_MAX_SAMPLES) -> None:
        self.record = bytearray(_HEAD.pack(horizon, max(2, max_samples), 0, -math.inf))

    @classmethod
    def of(cls, record: bytearray) -> SeriesWindow:
        """The window whose record is `record` (as made by `SeriesWindow(...).record`)."""
        window = cls.__new__(cls)
        window.record = record
        return window

    @property
    def horizon(self) -> float:
        horizon: float = _DOUBLE.unpack_from(self.record, 0)[0]
        return horizon

    @property
    def last_seen(self) -> float:
        """The newest time `add` was called with, even for a value that was ignored."""
        seen: float = _DOUBLE.unpack_from(self.record, _LAST_SEEN)[0]
        return seen

    def __len__(self) -> int:
        start = int(_DOUBLE.unpack_from(self.record, _START)[0])
        return len(self.record) // _PAIR.size - _HEAD_PAIRS - start

    def add(self, *, t: float, value: float) -> None:
        """Record one sample; NaN/±Inf values and times not after the newest are ignored."""
        if not math.isfinite(t):
            return
        record = self.record
        horizon, cap, dropped, last_seen = _HEAD.unpack_from(record, 0)
        start = int(dropped)
        end = len(record) // _PAIR.size - _HEAD_PAIRS
        newest = _DOUBLE.unpack_from(record, _at(end - 1))[0] if end > start else -math.inf
        if not math.isfinite(value) or t <= newest:
            _DOUBLE.pack_into(record, _LAST_SEEN, max(last_seen, t))
            return
        record += _PAIR.pack(t, value)
        end += 1
        start = max(start, end - int(cap))
        oldest_kept = t - horizon
        while start < end and _DOUBLE.unpack_from(record, _at(start))[0] <= oldest_kept:
            start += 1
        if start >= 32 and 2 * start >= end:
            del record[_at(0) : _at(start)]
            start = 0
        _HEAD.pack_into(record, 0, horizon, cap, start, max(last_seen, t))

    def _columns(self) -> tuple[memoryview[float], memoryview[float]]:
        """The kept times and values, oldest first (views of the record: see the class)."""
        doubles = memoryview(self.record).cast('d')
        first = 2 * (_HEAD_PAIRS + int(doubles[_START // _DOUBLE.size]))
        return doubles[first::2], doubles[first + 1 :: 2]

    def _span(self, times: memoryview[float], now: float, seconds: float) -> tuple[int, int]:
        """The indexes [lo, hi) in `times` of the samples with now − seconds < t ≤ now."""
        if not (math.isfinite(now) and math.isfinite(seconds)) or seconds <= 0:
            return 0, 0
        lo = bisect_right(times, now - seconds)
        return lo, bisect_right(times, now, lo)

    def in_range(self, *, now: float, seconds: float) -> list[tuple[float, float]]:
        """The samples with now − seconds < t ≤ now, oldest first."""
        times, values = self._columns()
        lo, hi = self._span(times, now, seconds)
        return list(zip(times[lo:hi], values[lo:hi], strict=True))

    def max_over(self, *, now: float, seconds: float) -> float | None:
        """`max_over_time(series[seconds])` at `now`; None when no sample is in range."""
        times, values = self._columns()
        lo, hi = self._span(times, now, seconds)
        return max(values[lo:hi]) if hi > lo else None

    def latest(self, *, now: float, seconds: float) -> tuple[float, float] | None:
        """The newest (t, value) in range, as an instant query with `seconds` of lookback."""
        times, values = self._columns()
        lo, hi = self._span(times, now, seconds)
        return (times[hi - 1], values[hi - 1]) if hi > lo else None

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
