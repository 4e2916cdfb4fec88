"""Rolling window of observed compute-bound capacities (k2) for the token-based analyzer.

Why: a replica only reveals its compute-bound capacity while its queue is saturated (the tokens it
holds at that moment are all it can run). The token-based analyzer (WVA v0.9.0,
internal/engines/analyzers/saturation_v2/, priority P2 "historical") keeps those observations so
that, once the queue drains, it still knows the bound. Observations are keyed
`modelID|accelerator|gpusPerReplica|outputBucket`, because the bound depends on the hardware and on
how long the outputs are (long outputs keep requests resident longer), and each key keeps the last
`window` samples (WVA: 10).

UPSTREAM DEFECT FIX: WVA has eviction functions but never calls them, so one saturated observation
pins a bucket's capacity until a restart. Here every sample carries its time and is ignored once
older than the TTL (`CoreSettings.k2_history_ttl`, default 24 h); `expire` also drops such samples
and empty keys so the persisted state stays small. The engine expires the whole history once per
cycle; `average` still ignores expired samples on its own.

All functions are pure and never mutate their input. `record` returns only the new samples of
its key (O(window), not O(history)), so a caller can collect one cycle's writes in a small dict.
Bad input: a NaN, infinite, zero or negative value is not recorded (it carries no capacity); a
missing, NaN, infinite or negative average output length falls in the `short` bucket, as WVA's
zero default does; a window below 1 keeps one sample; a NaN TTL expires nothing (comparisons
with NaN are false) and `math.inf` disables expiry.
"""

from __future__ import annotations

from collections.abc import Mapping
from math import isfinite

from llmscaler.analyze import finite_sums
from llmscaler.domain.basics import finite
from llmscaler.domain.state import K2Sample

SHORT_OUTPUT_THRESHOLD = 100.0
"""Average output tokens below this are the `short` bucket (WVA `ShortOutputThreshold`)."""
MEDIUM_OUTPUT_THRESHOLD = 500.0
"""Average output tokens below this (and >= 100) are `medium`, else `long`
(WVA `MediumOutputThreshold`)."""
ROLLING_AVERAGE_WINDOW_SIZE = 10
"""Samples kept per key (WVA `RollingAverageWindowSize`; `CoreSettings.k2_window`)."""

History = dict[str, tuple[K2Sample, ...]]


def output_bucket(*, avg_output_tokens: float | None) -> str:
    """`short` (< 100), `medium` ([100, 500)) or `long` (>= 500) by average output tokens."""
    value = avg_output_tokens
    # `finite` written out: this runs once per replica per cycle.
    if value is None or not isfinite(value) or value < SHORT_OUTPUT_THRESHOLD:
        return 'short'
    if value < MEDIUM_OUTPUT_THRESHOLD:
        return 'medium'
    return 'long'


def history_key(*, model_id: str, accelerator: str, gpus_per_replica: int, bucket: str) -> str:
    """The WVA key `modelID|accelerator|gpusPerReplica|outputBucket`."""
    return f'{model_id}|{accelerator}|{gpus_per_replica}|{bucket}'


def _expired(*, sample: K2Sample, now: float, ttl: float) -> bool:
    return now - sample.at > ttl


def record(
    *,
    history: Mapping[str, tuple[K2Sample, ...]],
    key: str,
    value: float,
    now: float,
    window: int,
) -> tuple[K2Sample, ...] | None:
    """The samples of `key` once `value` observed at `now` is appended: the last `window` of them.
    None (nothing to write) when the value is not a positive finite number."""
    clean = finite(value)
    if clean is None or clean <= 0:
        return None
    keep = max(1, window)
    samples = (*history.get(key, ()), K2Sample(value=clean, at=now))
    return samples[-keep:]


def average(
    *, history: Mapping[str, tuple[K2Sample, ...]], key: str, now: float, ttl: float
) -> float | None:
    """Mean of the unexpired samples under `key` (age <= ttl), or None when there are none."""
    live = [s.value for s in history.get(key, ()) if not _expired(sample=s, now=now, ttl=ttl)]
    if not live:
        return None
    return finite_sums.mean(live)


def expire(*, history: Mapping[str, tuple[K2Sample, ...]], now: float, ttl: float) -> History:
    """A copy of `history` without samples older than `ttl` and without keys left empty."""
    result: History = {}
    for key in sorted(history):
        kept = tuple(s for s in history[key] if not _expired(sample=s, now=now, ttl=ttl))
        if kept:
            result[key] = kept
    return result
