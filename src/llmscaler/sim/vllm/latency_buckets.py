"""vLLM's latency histogram buckets.

Why: the simulated replicas keep per-bucket counts of TTFT and per-request TPOT (`sim.fleet.observe`
turns their increase into `ReplicaMetrics.ttft_histogram` / `tpot_histogram`), and the emulator
renders the same families on its `/metrics` pages (`emulate.exposition`). Both must use vLLM's own
bounds (`vllm/v1/metrics/buckets.py`), defined once, here: the emulator imports the simulator, not
the other way round.

An observation of v counts in the first bucket whose bound is >= v (`bisect_left`: Prometheus
buckets are `le`), or past the last bound (+Inf only).

`histogram_increase` turns two scrapes of such counts into the `LatencyHistogram` a
Prometheus `increase()` of the `_bucket` series gives.

What fails: nothing raises; counts of a length other than the bounds' + 1 give None (the
histogram is absent).
"""

from __future__ import annotations

from typing import Final

from llmscaler.domain.snapshot import LatencyHistogram

TTFT_BUCKETS: Final = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
    10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
)  # fmt: skip
"""`vllm:time_to_first_token_seconds`."""
ITL_BUCKETS: Final = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0,
)  # fmt: skip
"""`vllm:inter_token_latency_seconds` and `vllm:request_time_per_output_token_seconds`."""


def histogram_increase(
    *, bounds: tuple[float, ...], first: tuple[int, ...], newest: tuple[int, ...]
) -> LatencyHistogram | None:
    """The increase from `first` to `newest` (per-bucket counts, +Inf last) as `le` buckets."""
    if len(first) != len(bounds) + 1 or len(newest) != len(first):
        return None
    counts: list[float] = []
    running = 0
    for old, new in zip(first, newest, strict=True):
        running += new - old
        counts.append(float(running))
    total = counts.pop()
    return LatencyHistogram(bounds=bounds, counts=tuple(counts), total=total)
