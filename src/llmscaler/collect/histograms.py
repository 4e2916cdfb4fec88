"""Latency histograms of a pod: the bucket counters' increase over the last minute, both sources.

Why: the predictive analyzer learns a replica's latency distribution, not only its mean, from
`ReplicaMetrics.ttft_histogram` (requests of the window by TTFT,
`vllm:time_to_first_token_seconds_bucket`) and `tpot_histogram` (by each request's own mean time
per output token, `vllm:request_time_per_output_token_seconds_bucket`). The Prometheus source
asks for the buckets' `increase(...[1m])` per pod and `le` (`collect.prometheus.queries`); the pod
scraper computes the same increase from its windows (`window_histogram`). Both end here, in `fold`,
so that both sources apply the same rules and hand the core a histogram `analyze.validity` accepts:

- `le="+Inf"` gives `total`; the other `le`s, sorted by their numeric value, give `bounds` and
  `counts`. Several series with one `le` (data-parallel engines, two label sets of one pod) are
  added up, exactly (`math.fsum`), so no order of the series changes the result.
- `increase()` extrapolates every series on its own, so the cumulative counts can come out
  slightly decreasing from one bound to the next: they are made non-decreasing with a running
  maximum (as `histogram_quantile` does) and capped at `total`; a negative one reads as 0.
- A bound of 0 or below (a `le="0"` bucket) holds no request the model's bounds (> 0) could
  describe: it is left out; the others still hold every request below them.
- An `le` that is not a number, a bucket with no `+Inf` series, or a value that is not finite:
  the pod's histogram is None, with one warning naming the pod. No series at all (an older vLLM
  without the family) is None without a word. Nothing raises.

Scraped windows (`window_histogram`): the increase of every bucket series over the last minute,
by Prometheus' rule (`SeriesWindow.increase`), and only where it covers the whole minute, as the
scraper's arrival rates do (`scrape_gateway.measured_rate`): fewer than two samples in the minute,
a series that seems to start inside the minute while its first value there is not 0 (scraping
began or resumed in the middle of it), or a counter that went down (the server restarted) make the
histogram None for that window. A part-minute or a restarted histogram would understate the
requests; a missing one lets the analyzer fall back to the mean latencies.
"""

from __future__ import annotations

import functools
import itertools
import logging
import math
from collections.abc import Iterable

from llmscaler.collect.windows import SeriesWindow
from llmscaler.domain.snapshot import LatencyHistogram

log = logging.getLogger(__name__)

TTFT_BUCKET = 'vllm:time_to_first_token_seconds_bucket'
TPOT_BUCKET = 'vllm:request_time_per_output_token_seconds_bucket'
FIELDS = {TTFT_BUCKET: 'ttft_histogram', TPOT_BUCKET: 'tpot_histogram'}
"""The bucket series of each histogram, by the `PodReading` field they fill."""
WINDOW = 60.0
"""Seconds of the histograms' window (`increase(...[1m])`)."""
HORIZON = 2 * WINDOW
"""How long the scraper keeps a bucket series' samples: the window, and as much again so that the
window's start is always covered (a bucket series is forgotten when unseen for this long)."""
MAX_SAMPLES = 512
"""Samples kept per bucket series: the horizon at one scrape every 0.25 s. A pod's two histograms
have some forty bucket series per engine, more than all its other series together."""

Bucket = tuple[str, float | None]
"""(the `le` label's text, the bucket's increase; None when it was not a finite number)."""


@functools.lru_cache(maxsize=4096)
def parse_le(text: str | None) -> float | None:
    """The bound an `le` label names (`+Inf` is infinity), None when it is not a number.

    Cached: every pod's answer repeats the same few dozen texts."""
    if text is None:
        return None
    try:
        bound = float(text)
    except ValueError:
        return None
    return None if math.isnan(bound) else bound


def fold(*, pod: str, family: str, buckets: Iterable[Bucket]) -> LatencyHistogram | None:
    """The histogram of one pod from its bucket increases (see the module docstring).

    `pod` and `family` only name the pod and the histogram in the warning.
    """
    # Written for speed: a fleet's answer has a series per pod and bucket. A bound seen twice
    # (two engines) is rare; its values are added exactly once all are known.
    values: dict[float, float] = {}
    repeated: dict[float, list[float]] = {}
    isfinite = math.isfinite
    for le, value in buckets:
        bound = parse_le(le)
        if bound is None:
            log.warning('%s: %s bucket le=%r is not a number; no histogram', pod, family, le)
            return None
        if value is None or not isfinite(value):
            log.warning('%s: %s bucket le=%r is not a finite number; no histogram', pod, family, le)
            return None
        if bound in values:
            repeated.setdefault(bound, [values[bound]]).append(value)
        else:
            values[bound] = value
    if not values:
        return None
    for bound, parts in repeated.items():
        values[bound] = math.fsum(parts)
    total = values.pop(math.inf, None)
    if total is None:
        log.warning('%s: %s has no le="+Inf" bucket; no histogram', pod, family)
        return None
    total = total if total > 0 else 0.0
    bounds: list[float] = []
    counts: list[float] = []
    running = 0.0
    for bound in sorted(values):
        if bound > 0:
            count = values[bound]
            if count > running:
                running = count if count < total else total
            bounds.append(bound)
            counts.append(running)
    return LatencyHistogram(bounds=tuple(bounds), counts=tuple(counts), total=total)


def window_increase(*, window: SeriesWindow, now: float) -> float | None:
    """The bucket's increase over the last minute, None unless measured over the whole of it
    and without a counter reset (see the module docstring)."""
    found = window.in_range(now=now, seconds=WINDOW)
    if len(found) < 2:
        return None
    if any(later < earlier for (_, earlier), (_, later) in itertools.pairwise(found)):
        return None
    if not window.measures_whole(now=now, seconds=WINDOW):
        return None
    return window.increase(now=now, seconds=WINDOW)


def window_histogram(
    *, pod: str, family: str, series: Iterable[tuple[str | None, SeriesWindow]], now: float
) -> LatencyHistogram | None:
    """The histogram of the last minute from one pod's bucket windows, `(le, window)` per series
    (every engine's); None when there are none or one bucket has no whole-minute increase."""
    buckets: list[Bucket] = []
    for le, window in series:
        increase = window_increase(window=window, now=now)
        if increase is None:
            return None
        buckets.append((le if le is not None else '', increase))
    return fold(pod=pod, family=family, buckets=buckets)
