"""How many of a variant's requests missed their latency targets, read from vLLM's histograms,
and what that says about the capacity the model gives it.

Why: the SLO is about each request (its TTFT, and its own mean time per output token), while
the queue model and the mean latencies a replica reports are averages. On bursty traffic with
long prompts and short answers, a few requests whose handful of decode steps share the engine
with long prefills miss the ITL target while the mean ITL sits at a fifth of it: a model of
means promised an H100 several times the rate at which it kept 99 % of such requests within
target. vLLM counts every finished request in two histograms (`ReplicaMetrics.ttft_histogram`,
`tpot_histogram`); the share above each target is a direct reading of the attainment the
variant delivers, whatever the model believes.

- `share_above`: the share of a histogram's requests above a threshold, with the requests of
  the bucket that holds the threshold spread linearly over it (as `histogram_quantile` does),
  and those beyond the last finite bound counted above it;
- `attainment`: a variant's finished requests and the share that missed, summed over its
  replicas' histograms: the TTFT share plus the TPOT share (at most 1), an upper bound of the
  share missing either, since the two histograms cannot be joined per request;
- `capacity_reading`: when the misses are above the budget beyond doubt (1 − `sloAttainment`,
  0.01 by default; the lower `CONFIDENCE` bound of the miss share, a binomial normal
  approximation, exceeds it), the rate per replica the variant showed them at, times
  `clamp((budget / share)^¼, ½, 0.95)`: a variant that misses sustains less than it was given,
  the more so the more it misses.

What fails: nothing raises; a histogram that breaks `model.LatencyHistogram`'s rules never gets
here (`analyze.validity` holds its model first), and a window without finished requests reads
as no evidence (None).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from llmscaler.domain.snapshot import LatencyHistogram, ReplicaMetrics

CONFIDENCE: Final = 1.6448536269514722
"""z of the one-sided 95 % bound a miss share must clear before it lowers a capacity."""
MIN_FINISHED: Final = 20.0
"""Fewer finished requests in the window are no evidence either way."""
BACKLOG_MEMORY: Final = 90.0
"""Seconds after a drained backlog during which misses are not read: the histograms' minute and
a scrape's lag."""
SHRINK_MIN: Final = 0.5
SHRINK_MAX: Final = 0.95


def share_above(*, histogram: LatencyHistogram, threshold: float) -> float | None:
    """The share of the histogram's requests above `threshold` seconds; None without requests."""
    total = histogram.total
    if not total > 0:
        return None
    bounds, counts = histogram.bounds, histogram.counts
    at = bisect.bisect_left(bounds, threshold)
    if at == len(bounds):
        within = counts[-1] if counts else 0.0
    else:
        low = bounds[at - 1] if at > 0 else 0.0
        below = counts[at - 1] if at > 0 else 0.0
        part = (threshold - low) / (bounds[at] - low)
        within = below + (counts[at] - below) * min(1.0, max(0.0, part))
    return min(1.0, max(0.0, (total - within) / total))


@dataclass(frozen=True, slots=True)
class Attainment:
    finished: float
    """Requests finished in the window (the larger of the two histograms' totals)."""
    missed: float
    """The share of them above a target (TTFT share + TPOT share, at most 1)."""


def _pooled(histograms: Sequence[LatencyHistogram], threshold: float) -> tuple[float, float]:
    """(requests, requests above threshold) over histograms whose bounds may differ."""
    requests = above = 0.0
    for histogram in histograms:
        share = share_above(histogram=histogram, threshold=threshold)
        if share is not None:
            requests += histogram.total
            above += share * histogram.total
    return requests, above


def attainment(*, replicas: Sequence[ReplicaMetrics], ttft: float, itl: float) -> Attainment | None:
    """The variant's attainment in the window (targets in seconds); None when no replica reports
    a histogram with a finished request."""
    ttft_requests, ttft_above = _pooled(
        [r.ttft_histogram for r in replicas if r.ttft_histogram is not None], ttft
    )
    tpot_requests, tpot_above = _pooled(
        [r.tpot_histogram for r in replicas if r.tpot_histogram is not None], itl
    )
    finished = max(ttft_requests, tpot_requests)
    if not finished > 0:
        return None
    missed = (ttft_above / ttft_requests if ttft_requests > 0 else 0.0) + (
        tpot_above / tpot_requests if tpot_requests > 0 else 0.0
    )
    return Attainment(finished=finished, missed=min(1.0, missed))


def missing_beyond_doubt(*, seen: Attainment, budget: float) -> bool:
    """More requests miss than the `budget` (a share) allows, at the `CONFIDENCE` bound."""
    if seen.finished < MIN_FINISHED:
        return False
    spread = math.sqrt(seen.missed * (1.0 - seen.missed) / seen.finished)
    return seen.missed - CONFIDENCE * spread > budget


def capacity_reading(*, seen: Attainment, rate: float, budget: float) -> float | None:
    """The rate per replica the variant sustains within the SLO, as far as its misses at `rate`
    (req/s per replica) tell against the `budget` of misses (a share in (0, 0.5)); None when
    they tell nothing (within budget, or too few)."""
    if not (rate > 0 and math.isfinite(rate)):
        return None
    if not missing_beyond_doubt(seen=seen, budget=budget):
        return None
    shrink: float = math.sqrt(math.sqrt(budget / seen.missed))
    return rate * min(SHRINK_MAX, max(SHRINK_MIN, shrink))
