"""WVA main's three-parameter service model of one replica: iteration, prefill and decode times.

Source: llm-d workload-variant-autoscaler, pkg/analyzer/queueanalyzer.go (`ServiceParms`,
`IterationTime`, `PrefillTime`, `DecodeTime`, `Analyze`), since commit aff15ca "enhance queueing
model used by queue analyzer (#727)", as on main at b08b1c7 (no release tag up to v0.5.1 has it).

Why: the SLO analyzer's queue (`analyze.queueing.queue_model`) needs the time a request spends in
a replica at a given number of requests in service. WVA main writes it with three parameters
that do not depend on the request mix, so one tuned set serves every mix:

- α (ms): the baseline overhead of one engine iteration;
- β (ms per token): compute per token processed;
- γ (ms per token): KV-cache (memory) access per token held.

For a mix of I input and O output tokens (O ≥ 1) at n requests in service:

- iteration time `T(n) = α + n·(β·(I + O)/(O + 1) + γ·(I + O/2))`: each request computes its
  I + O tokens over its O + 1 iterations and holds I + O/2 tokens of KV cache on average;
- prefill time `T(n) + (β + γ)·I`, 0 when I = 0;
- decode time (one output token) `T(n) + β + γ·(I + O/2)`;
- a request's service time is one prefill and O decodes: `base + slope·n` with
  base = (1 + O)·α + (β + γ)·I + O·(β + γ·(I + O/2)) and slope = (1 + O)·(β·c + γ·m)
  (c, m the two per-token factors above); without input tokens the prefill term is absent.

From a solved queue (mean wait W, mean service time S, mean requests in service n̄ =
E[min(n, N)]) WVA reads the prefill at n̄, the ITL as (S − prefill)/O and the TTFT as
W + prefill (its tuner) or W + prefill + ITL (its `Analyze`/`Size`); here both are W + prefill
(docs/decision-core.md, "SLO TTFT").

Units: ms, tokens. What fails: nothing raises; callers check the line is positive
(`QueueAnalyzer.build`).
"""

from __future__ import annotations

import math
from typing import NamedTuple


class ServiceParams(NamedTuple):
    """α (ms per iteration), β (ms per token computed), γ (ms per token of KV cache held):
    WVA main's `ServiceParms{Alpha, Beta, Gamma}`."""

    alpha: float
    beta: float
    gamma: float

    def as_tuple(self) -> tuple[float, float, float]:
        return (self.alpha, self.beta, self.gamma)

    @property
    def positive(self) -> bool:
        """All three are finite and > 0 (what WVA's tuner and SLO inference accept)."""
        inf = math.inf
        return 0 < self.alpha < inf and 0 < self.beta < inf and 0 < self.gamma < inf


def per_request_slope(
    *, params: ServiceParams, avg_input_tokens: float, avg_output_tokens: float
) -> float:
    """What one more request in service adds to an iteration (ms):
    β·(I + O)/(O + 1) + γ·(I + O/2)."""
    compute = (avg_input_tokens + avg_output_tokens) / (avg_output_tokens + 1)
    memory = avg_input_tokens + avg_output_tokens / 2
    return params.beta * compute + params.gamma * memory


def iteration_time(
    *, params: ServiceParams, avg_input_tokens: float, avg_output_tokens: float, batch_size: float
) -> float:
    """`α + n·(β·(I + O)/(O + 1) + γ·(I + O/2))` ms (WVA `IterationTime`)."""
    return params.alpha + batch_size * per_request_slope(
        params=params, avg_input_tokens=avg_input_tokens, avg_output_tokens=avg_output_tokens
    )


def prefill_time(
    *, params: ServiceParams, avg_input_tokens: float, avg_output_tokens: float, batch_size: float
) -> float:
    """The iteration time plus `(β + γ)·I` ms, 0 without input tokens (WVA `PrefillTime`)."""
    if avg_input_tokens == 0:
        return 0.0
    return (
        iteration_time(
            params=params,
            avg_input_tokens=avg_input_tokens,
            avg_output_tokens=avg_output_tokens,
            batch_size=batch_size,
        )
        + (params.beta + params.gamma) * avg_input_tokens
    )


def decode_time(
    *, params: ServiceParams, avg_input_tokens: float, avg_output_tokens: float, batch_size: float
) -> float:
    """The iteration time plus `β + γ·(I + O/2)` ms: one output token (WVA `DecodeTime`)."""
    return (
        iteration_time(
            params=params,
            avg_input_tokens=avg_input_tokens,
            avg_output_tokens=avg_output_tokens,
            batch_size=batch_size,
        )
        + params.beta
        + params.gamma * (avg_input_tokens + avg_output_tokens / 2)
    )


def service_line(
    *, params: ServiceParams, avg_input_tokens: float, avg_output_tokens: float
) -> tuple[float, float]:
    """(base, slope) ms with prefill(n) + O·decode(n) = base + slope·n (WVA `BuildModel`'s
    per-state service time, as a line)."""
    per_request = per_request_slope(
        params=params, avg_input_tokens=avg_input_tokens, avg_output_tokens=avg_output_tokens
    )
    out = avg_output_tokens
    decode_work = params.beta + params.gamma * (avg_input_tokens + out / 2)
    if avg_input_tokens == 0:
        return out * (params.alpha + decode_work), out * per_request
    prefill_work = (params.beta + params.gamma) * avg_input_tokens
    return (1 + out) * params.alpha + prefill_work + out * decode_work, (1 + out) * per_request


def latencies(
    *,
    params: ServiceParams,
    avg_input_tokens: float,
    avg_output_tokens: float,
    wait: float,
    service: float,
    in_service: float,
) -> tuple[float, float]:
    """(TTFT, ITL) ms of a solved queue: W + prefill(n̄) and (S − prefill(n̄))/O, n̄ the mean
    number of requests in service (WVA `Analyze` without its extra ITL in the TTFT)."""
    prefill = prefill_time(
        params=params,
        avg_input_tokens=avg_input_tokens,
        avg_output_tokens=avg_output_tokens,
        batch_size=in_service,
    )
    return wait + prefill, (service - prefill) / avg_output_tokens


def inferred_targets(
    *, params: ServiceParams, avg_input_tokens: float, avg_output_tokens: float, multiplier: float
) -> tuple[float, float]:
    """WVA main's inferred SLO (ms): the iteration time allowed to grow to k·α while the
    per-token work stays at its cost: TTFT k·α + (β + γ)·I, ITL k·α + β + γ·(I + (O + 1)/2).
    With T = α/(1 − ρ) in the closed-form theory, k stands for a utilisation of 1 − 1/k."""
    k = multiplier
    ttft = k * params.alpha + (params.beta + params.gamma) * avg_input_tokens
    itl = (
        k * params.alpha
        + params.beta
        + params.gamma * (avg_input_tokens + (avg_output_tokens + 1) / 2)
    )
    return ttft, itl
