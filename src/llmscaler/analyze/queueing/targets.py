"""The TTFT and ITL targets of one model: explicit, inferred, or a cold-start fallback.

Why: sizing by latency needs targets, and most users set none. WVA's rule (its SLO analyzer,
internal/engines/analyzers/queueingmodel/analyzer.go `getSLOTarget`/`guessSLOFromMetrics` on main
after b08b1c7, read at commit 42ce1a7) picks, in order:

1. **explicit**: the model's `wva-queueing-model-config` entry sets both `targetTTFT` and
   `targetITL` (ms; the configuration refuses one without the other);
2. **inferred**: the largest over the variants whose parameters are all positive, k =
   `sloMultiplier` (default 3, > 1). Three-parameter model (WVA main): the iteration time may grow
   to k·α while the per-token work stays at its cost, TTFT k·α + (β + γ)·I and ITL k·α + β +
   γ·(I + (O + 1)/2) (`analyze.queueing.service_model.inferred_targets`). Four-parameter model
   (the design paper; WVA ≤ v0.4 had no inference): k × the unloaded (batch of one) prefill
   `γ + δ·I` and ITL `α + β`. With an iteration time of α/(1 − ρ) in the closed-form theory, k = 3
   stands for a utilisation of about 1 − 1/k ≈ 0.67;
3. **fallback**: min(1.5 × the observed TTFT, 10,000 ms) and min(1.5 × the observed ITL, 500 ms),
   from the arrival-weighted observed means;
4. otherwise none: the caller holds, naming what is missing.

Units: every target and observation in milliseconds; I and O are the model's arrival-weighted
mean input and output tokens per request.

What fails: nothing raises; `choose` returns None when no source gives a target, and ignores
parameters that are not all finite and positive.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from llmscaler.analyze.queueing import service_model
from llmscaler.analyze.queueing.perf_model import PerfParams
from llmscaler.analyze.queueing.service_model import ServiceParams

DEFAULT_SLO_MULTIPLIER = 3.0
FALLBACK_HEADROOM = 1.5
FALLBACK_MAX_TTFT_MS = 10_000.0
FALLBACK_MAX_ITL_MS = 500.0

TargetSource = Literal['explicit', 'inferred', 'fallback']
SOURCE_CODES: dict[TargetSource, float] = {'explicit': 1.0, 'inferred': 2.0, 'fallback': 3.0}
"""The source as a number, for the decision's figures (`slo_target_source`)."""


@dataclass(frozen=True, slots=True)
class SloTargets:
    ttft: float
    """ms"""
    itl: float
    """ms"""
    source: TargetSource


def inferred(
    *,
    params: PerfParams | ServiceParams,
    avg_input_tokens: float,
    avg_output_tokens: float,
    multiplier: float,
) -> tuple[float, float]:
    """The inferred (TTFT, ITL) of one variant, ms (see the module docstring)."""
    if isinstance(params, ServiceParams):
        return service_model.inferred_targets(
            params=params,
            avg_input_tokens=avg_input_tokens,
            avg_output_tokens=avg_output_tokens,
            multiplier=multiplier,
        )
    unloaded_ttft = params.gamma + params.delta * avg_input_tokens
    unloaded_itl = params.alpha + params.beta
    return multiplier * unloaded_ttft, multiplier * unloaded_itl


def choose(
    *,
    explicit_ttft: float | None,
    explicit_itl: float | None,
    learned: Sequence[PerfParams | ServiceParams],
    avg_input_tokens: float | None,
    avg_output_tokens: float | None,
    multiplier: float,
    observed_ttft: float | None,
    observed_itl: float | None,
) -> SloTargets | None:
    """The first source of WVA's order that gives both targets (see the module docstring)."""
    if explicit_ttft is not None and explicit_itl is not None:
        return SloTargets(ttft=explicit_ttft, itl=explicit_itl, source='explicit')
    usable = [p for p in learned if p.positive]
    if (
        usable
        and avg_input_tokens is not None
        and math.isfinite(avg_input_tokens)
        and avg_output_tokens is not None
        and math.isfinite(avg_output_tokens)
    ):
        pairs = [
            inferred(
                params=p,
                avg_input_tokens=avg_input_tokens,
                avg_output_tokens=avg_output_tokens,
                multiplier=multiplier,
            )
            for p in usable
        ]
        return SloTargets(
            ttft=max(t for t, _ in pairs), itl=max(i for _, i in pairs), source='inferred'
        )
    if observed_ttft is not None and observed_itl is not None and observed_ttft > 0 < observed_itl:
        return SloTargets(
            ttft=min(FALLBACK_HEADROOM * observed_ttft, FALLBACK_MAX_TTFT_MS),
            itl=min(FALLBACK_HEADROOM * observed_itl, FALLBACK_MAX_ITL_MS),
            source='fallback',
        )
    return None
