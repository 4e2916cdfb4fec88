"""The WVA design paper's performance model of one replica: decode and prefill times, rates.

Source: *Workload Variant Autoscaler: A Performance-Model-Based Approach to AI Inference
Autoscaling* (the WVA design paper), §2.2 "Performance Model Parameters".

Why: the SLO analyzer's queue (`analyze.queueing.queue_model`) and its tuner
(`analyze.learning.kalman`) both need the time a request spends in a replica at a given batch size;
WVA's queue analyzer up to v0.4 (the v0.4 `QueueAnalyzer`, llm-inferno's queue-analysis) defined it
with four parameters. WVA main replaced them with three (`analyze.queueing.service_model`, the
SLO path's default); this model stays selectable (`performanceModel: four-parameter`) and is the
predictive analyzer's:

- decode (inter-token) time at batch size b: `ITL(b) = α + β·b` (ms);
- prefill time of a request with I input tokens at batch b: `γ + δ·I·b` (ms), 0 when I = 0;
- service rate at n requests in service: `μ_n = n / (prefill(I, n) + (O − 1)·ITL(n))` requests
  per ms, one prefill and O − 1 decodes per request (O = 1 and I = 0: one decode);
- the effective batch b̄ solving prefill(I, b̄) + (O − 1)·ITL(b̄) = S for a mean service time S,
  clamped to [0, N].

Units: milliseconds, requests per millisecond (WVA's). What fails: nothing raises; a
non-positive denominator in `effective_concurrency` gives 0 or N.
"""

from __future__ import annotations

import math
from typing import NamedTuple


class PerfParams(NamedTuple):
    """α, β (decode: ms, ms per request in the batch), γ, δ (prefill: ms, ms per input token
    per request in the batch): WVA's `DecodeParms{Alpha, Beta}` and `PrefillParms{Gamma, Delta}`."""

    alpha: float
    beta: float
    gamma: float
    delta: float

    def as_tuple(self) -> tuple[float, float, float, float]:
        return (self.alpha, self.beta, self.gamma, self.delta)

    @property
    def positive(self) -> bool:
        """All four are finite and > 0 (a learned set WVA would use)."""
        # 0 < v < inf: finite and positive (NaN fails every comparison).
        inf = math.inf
        return (
            0 < self.alpha < inf
            and 0 < self.beta < inf
            and 0 < self.gamma < inf
            and 0 < self.delta < inf
        )


def prefill_time(*, params: PerfParams, avg_input_tokens: float, batch_size: float) -> float:
    """`γ + δ·I·b` ms, 0 when there are no input tokens (WVA `PrefillTime`)."""
    if avg_input_tokens == 0:
        return 0.0
    return params.gamma + params.delta * avg_input_tokens * batch_size


def decode_time(*, params: PerfParams, batch_size: float) -> float:
    """`α + β·b` ms (WVA `DecodeTime`)."""
    return params.alpha + params.beta * batch_size


def decodes_per_request(*, avg_input_tokens: float, avg_output_tokens: float) -> float:
    """O − 1 decode steps per request; 1 for a decode-only request of one token (WVA)."""
    if avg_input_tokens == 0 and avg_output_tokens == 1:
        return 1.0
    return avg_output_tokens - 1


def service_rates(
    *, params: PerfParams, max_batch_size: int, avg_input_tokens: float, avg_output_tokens: float
) -> tuple[float, ...]:
    """μ_n for n = 1..N in requests per ms (WVA `BuildModel`)."""
    decodes = decodes_per_request(
        avg_input_tokens=avg_input_tokens, avg_output_tokens=avg_output_tokens
    )
    return tuple(
        n
        / (
            prefill_time(params=params, avg_input_tokens=avg_input_tokens, batch_size=n)
            + decodes * decode_time(params=params, batch_size=n)
        )
        for n in range(1, max_batch_size + 1)
    )


def effective_concurrency(
    *,
    avg_service_time: float,
    params: PerfParams,
    avg_input_tokens: float,
    avg_output_tokens: float,
    max_batch_size: int,
) -> float:
    """WVA `EffectiveConcurrency`: (S − γ − α·(O − 1)) / (δ·I + β·(O − 1)), in [0, N]."""
    tokens = avg_output_tokens - 1
    numerator = avg_service_time - (params.gamma + params.alpha * tokens)
    denominator = params.delta * avg_input_tokens + params.beta * tokens
    if denominator <= 0:
        return 0.0 if numerator <= 0 else float(max_batch_size)
    return min(max(numerator / denominator, 0.0), float(max_batch_size))
