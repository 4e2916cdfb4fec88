"""A run's requests bucketed by the minute they arrived in: counts and the TTFT p99 per minute.

Why: the plots of `llmscaler simulate` show how a policy copes over time, not only in the
summary of `sim.report.summary`; a cohort view by ARRIVAL minute puts a burst's latency at the
burst, however long its requests waited. The per-group percentile is vectorised, as a day-long trace
has thousands of minutes.

What fails: nothing raises. Arrivals before 0 are counted in minute 0 and NaN arrivals are left
out; a minute without a completed request has a NaN TTFT p99; an empty run gives empty series.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from llmscaler.sim.report.columns import request_columns
from llmscaler.sim.vocabulary import FloatArray, SimResult


def grouped_percentile(
    *, groups: npt.NDArray[np.int64], values: FloatArray, n_groups: int, q: float
) -> FloatArray:
    """The 'linear' q-th percentile (0..100) of `values` within each group 0..n_groups-1,
    NaN for an empty group; equal to np.percentile per group, without a Python loop."""
    out = np.full(n_groups, math.nan)
    if values.size == 0 or n_groups == 0:
        return out
    order = np.lexsort((values, groups))
    g = groups[order]
    v = values[order]
    counts = np.bincount(g, minlength=n_groups)
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    present = counts > 0
    n = counts[present]
    s = starts[present]
    rank = (n - 1) * (q / 100.0)
    lo = np.floor(rank).astype(np.int64)
    hi = np.minimum(lo + 1, n - 1)
    below = v[s + lo]
    above = v[s + hi]
    # Same form as numpy's _lerp, including its switch at t >= 0.5, so the results agree exactly.
    t = rank - lo
    diff = above - below
    out[present] = np.where(t >= 0.5, above - diff * (1.0 - t), below + diff * t)
    return out


@np.errstate(invalid='ignore', divide='ignore', over='ignore')
def per_minute(*, result: SimResult) -> dict[str, FloatArray]:
    """Per-minute series by arrival minute (all float64 arrays of one length):

    - 'start': the minute's start, seconds;
    - 'arrivals': requests that arrived in it;
    - 'completed' / 'failed': how many of those completed / failed;
    - 'ttft_p99': TTFT p99 of those that completed (NaN for a minute without any).

    The series cover the run's duration and every arrival; empty for an empty run.
    """
    req = request_columns(result=result)
    arrival = req.arrival
    known = ~np.isnan(arrival)
    minute = np.floor(np.clip(arrival[known], 0.0, None) / 60.0).astype(np.int64)
    duration = float(result.duration)
    n = math.ceil(duration / 60.0) if math.isfinite(duration) and duration > 0.0 else 0
    if minute.size:
        n = max(n, int(minute.max()) + 1)
    completed = req.completed[known]
    failed = req.failed[known]
    ttft = req.ttft[known]
    with_ttft = completed & np.isfinite(ttft)
    return {
        'start': np.arange(n, dtype=np.float64) * 60.0,
        'arrivals': np.bincount(minute, minlength=n).astype(np.float64),
        'completed': np.bincount(minute[completed], minlength=n).astype(np.float64),
        'failed': np.bincount(minute[failed], minlength=n).astype(np.float64),
        'ttft_p99': grouped_percentile(
            groups=minute[with_ttft], values=ttft[with_ttft], n_groups=n, q=99.0
        ),
    }
