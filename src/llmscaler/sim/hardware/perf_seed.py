"""The SLO tuner's seed in the simulator: the α, β, γ, δ a simulated replica effectively shows.

Why: a controller can be given its variants' α, β, γ, δ (`perfParms` in
`wva-queueing-model-config`); the simulator knows them better than any user, from the roofline
step model of each variant's preset (`sim.vocabulary.PerfModel`), so `slo-queueing` starts its tuner
where a well-configured controller would, instead of from a one-observation guess. The same
curves are what the tuner must converge to on the simulator
(tests/unit/analyze/learning/test_kalman_simulated.py).

What "effective" means: the performance model of the WVA design paper (*Workload Variant Autoscaler:
A Performance-Model-Based Approach to AI Inference Autoscaling*, §2.2) reads ITL = α + β·b and TTFT
= wait + γ + δ·I·b at a batch b. The replica (`sim.vllm.reference`) does not run pure decode steps:
with chunked prefill the prompts of new requests ride in the same steps as the decodes, so the ITL a
client sees is the mean step time *with* that prefill in it. Per batch b of running requests, at the
mix's mean I input and O output tokens (units: ms):

- a request spends O steps running, one of them its prefill, so a step carries on average
  q = b/O prompts (Poisson: arrivals during a step). A step with k prompts runs b − k decodes
  at a mean context of I + O/2 tokens each and k·I prompt tokens, whose attention pairs are
  their own, k·I(I + 1)/2 (a prompt does not attend to the other requests' contexts);
- ITL(b) = the token-weighted mean of those step times (each decode emits one token);
- TTFT(b) = the rest of the step the request arrives in (half of it; that step is
  length-biased, a long step catches more arrivals) + the step that runs its prompt, beside the
  Poisson(λ·that step) prompts that arrived with it (λ = q / mean step) and the other decodes.

α, β and γ, δ are the least-squares lines through ITL(b) and TTFT(b) over a batch range (by
default 1..N, N the analyzer's batch limit: max_num_seqs, or fewer when the KV cache holds
fewer requests of the mix). Against the event-driven replica (llama-3.1-8b-h100, 1000/200
tokens, b from 3 to 67) the curves are on average within 3 % of the measured 1-minute means
(tests/unit/analyze/learning/test_kalman_simulated.py). Ignored: prompts longer than the step's
token budget (max_num_batched_tokens − decodes), which split over several steps, and KV preemption;
both make the real TTFT grow faster at large batches than these curves (a preset with a small
budget, llama-3.1-8b-a100's 2048 tokens, the soonest). An idle engine starts a prompt at once;
at the smallest batches the curve's TTFT is a little high.

What fails: nothing raises for a valid preset; a fit that is not all finite and positive (a
preset whose step time falls with the batch) is left out, and that variant keeps the guess.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from llmscaler.config.perf_parms import PerfParmsByAccelerator
from llmscaler.sim.vocabulary import VariantSpec

Seed = tuple[float, float, float, float]
FloatArray = npt.NDArray[np.float64]

_TAIL_SD = 8.0
"""Poisson counts are summed to mean + 8 sd (+ 8): the rest weighs under 1e-12."""


@dataclass(frozen=True, slots=True)
class Curves:
    """ITL and TTFT (ms) of one replica per batch b (`batches`), at one mix."""

    batches: FloatArray
    itl: FloatArray
    ttft: FloatArray


def batch_limit(*, spec: VariantSpec, avg_input_tokens: float, avg_output_tokens: float) -> int:
    """The analyzer's N for this variant and mix (`slo_queueing.max_batch`): max_num_seqs, or
    the requests of I + O/2 tokens the KV cache holds, whichever is fewer."""
    per_request = avg_input_tokens + avg_output_tokens / 2
    held = int(spec.kv_capacity_tokens // per_request) if per_request > 0 else spec.max_num_seqs
    return max(1, min(spec.max_num_seqs, held))


def _poisson(mean: float, counts: npt.NDArray[np.int64]) -> FloatArray:
    none: FloatArray = (counts == 0).astype(np.float64)
    if mean <= 0:
        return none
    lgamma = np.array([math.lgamma(k + 1.0) for k in counts.tolist()])
    weights: FloatArray = np.exp(counts * math.log(mean) - mean - lgamma)
    total = float(weights.sum())
    return weights / total if total > 0 else none


def curves(
    *, spec: VariantSpec, avg_input_tokens: float, avg_output_tokens: float, max_batch: int
) -> Curves:
    """ITL(b) and TTFT(b) for b = 1..max_batch (see the module docstring)."""
    prompt = max(1.0, avg_input_tokens)
    out = max(1.0, avg_output_tokens)
    context = prompt + out / 2
    perf = spec.perf

    def step(decodes: int, prompts: int) -> float:
        tokens = decodes * context
        return 1000 * perf.step_seconds(
            decode_seqs=decodes,
            prefill_tokens=round(prompts * prompt),
            context_tokens=round(tokens),
            attention_pairs=round(tokens + decodes + prompts * prompt * (prompt + 1) / 2),
        )

    batches = np.arange(1, max(1, max_batch) + 1)
    itl = np.empty(len(batches))
    ttft = np.empty(len(batches))
    for i, b in enumerate(batches.tolist()):
        q = b / out
        counts = np.arange(0, min(b, math.ceil(q + _TAIL_SD * math.sqrt(q) + _TAIL_SD)) + 1)
        weights = _poisson(q, counts)
        steps = np.array([step(b - k, k) for k in counts.tolist()])
        decodes = b - counts
        itl[i] = float((weights * decodes) @ steps) / float(weights @ decodes)
        mean_step = float(weights @ steps)
        # The request's own prompt step: itself and j others, the rest of the batch decoding.
        own = np.array([step(max(b - 1 - j, 0), j + 1) for j in counts.tolist()])
        rate = q / mean_step
        caught = weights * steps / mean_step  # the step it arrives in, length-biased
        ttft[i] = math.fsum(
            w * (t / 2 + float(_poisson(rate * t, counts) @ own))
            for w, t in zip(caught.tolist(), steps.tolist(), strict=True)
        )
    return Curves(batches=batches.astype(np.float64), itl=itl, ttft=ttft)


def fit(*, curves: Curves, avg_input_tokens: float, low: float, high: float) -> Seed | None:
    """Least-squares (α, β, γ, δ) through `curves` over batches [low, high]; None unless all
    four are finite and positive."""
    inside = (curves.batches >= low) & (curves.batches <= high)
    b = curves.batches[inside]
    if len(b) < 2:
        return None
    design = np.stack([np.ones(len(b)), b], 1)
    (alpha, beta), *_ = np.linalg.lstsq(design, curves.itl[inside], rcond=None)
    (gamma, slope), *_ = np.linalg.lstsq(design, curves.ttft[inside], rcond=None)
    seed = (float(alpha), float(beta), float(gamma), float(slope) / max(1.0, avg_input_tokens))
    return seed if all(math.isfinite(v) and v > 0 for v in seed) else None


def fitted_seed(
    *, spec: VariantSpec, avg_input_tokens: float, avg_output_tokens: float
) -> Seed | None:
    """(α, β, γ, δ) ms of `spec`'s preset at the mix, over b = 1..N (the module docstring)."""
    limit = batch_limit(
        spec=spec, avg_input_tokens=avg_input_tokens, avg_output_tokens=avg_output_tokens
    )
    shown = curves(
        spec=spec,
        avg_input_tokens=avg_input_tokens,
        avg_output_tokens=avg_output_tokens,
        max_batch=max(2, limit),
    )
    return fit(curves=shown, avg_input_tokens=avg_input_tokens, low=1, high=max(2, limit))


def preset_seeds(
    *, variants: tuple[VariantSpec, ...], mixes: Mapping[str, tuple[float, float]]
) -> dict[str, PerfParmsByAccelerator]:
    """Per model ID, the `perfParms` fitted to its variants' presets, sorted by accelerator.

    `mixes` maps a model ID to its mean (input, output) tokens per request; a model without one
    has no seeds. Per accelerator, the first variant in name order gives the seed."""
    seeds: dict[str, dict[str, Seed]] = {}
    for spec in sorted(variants, key=lambda v: v.name):
        mix = mixes.get(spec.model_id)
        if mix is None:
            continue
        seed = fitted_seed(spec=spec, avg_input_tokens=mix[0], avg_output_tokens=mix[1])
        if seed is not None:
            seeds.setdefault(spec.model_id, {}).setdefault(spec.accelerator, seed)
    return {model_id: tuple(sorted(by_acc.items())) for model_id, by_acc in sorted(seeds.items())}
