"""The SLO tuner's seed in the simulator: α, β, γ, δ fitted to each variant's preset.

Why: a controller can be given its variants' α, β, γ, δ (`perfParms` in
`wva-queueing-model-config`); the simulator knows them better than any user, from the roofline
step model of each variant's preset (`sim.types.PerfModel`), so `slo-queueing` starts its tuner
where a well-configured controller would, instead of from a one-observation guess.

The fit: seed 002's model is linear in the batch b (ITL = α + β·b, prefill = γ + δ·I·b), the
roofline is not, so the four numbers are the least-squares lines through the preset's step
times over b = 1..max_num_seqs at the model's mean mix (I input, O output tokens): a decode step
of b sequences at a mean context of b·(I + O/2) tokens for α, β; a step of one I-token prompt
beside b − 1 decoding sequences for γ, δ (the engine's chunked prefill). Units: ms.

What fails: nothing raises for a valid preset; a fit that is not all finite and positive (a
preset whose step time falls with the batch) is left out, and that variant keeps the guess.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace

import numpy as np

from llmscaler.config.types import Config, QueueingModelConfig
from llmscaler.sim.types import VariantSpec

Seed = tuple[float, float, float, float]


def fitted_seed(
    *, spec: VariantSpec, avg_input_tokens: float, avg_output_tokens: float
) -> Seed | None:
    """(α, β, γ, δ) ms of `spec`'s preset at the mix (see the module docstring)."""
    prompt = max(1, round(avg_input_tokens))
    per_request = avg_input_tokens + avg_output_tokens / 2
    batches = np.arange(1, max(2, spec.max_num_seqs) + 1, dtype=float)
    decode = np.array(
        [
            1000
            * spec.perf.step_seconds(
                decode_seqs=int(b), prefill_tokens=0, context_tokens=round(b * per_request)
            )
            for b in batches
        ]
    )
    prefill = np.array(
        [
            1000
            * spec.perf.step_seconds(
                decode_seqs=int(b) - 1,
                prefill_tokens=prompt,
                context_tokens=round((b - 1) * per_request),
            )
            for b in batches
        ]
    )
    ones = np.ones(len(batches))
    (alpha, beta), *_ = np.linalg.lstsq(np.stack([ones, batches], 1), decode, rcond=None)
    (gamma, delta), *_ = np.linalg.lstsq(np.stack([ones, prompt * batches], 1), prefill, rcond=None)
    seed = (float(alpha), float(beta), float(gamma), float(delta))
    return seed if all(math.isfinite(v) and v > 0 for v in seed) else None


def with_preset_seeds(
    *,
    config: Config,
    variants: tuple[VariantSpec, ...],
    mixes: Mapping[str, tuple[float, float]],
) -> Config:
    """`config` with each SLO-path model's `perf_parms` fitted to its variants' presets.

    `mixes` maps a model ID to its mean (input, output) tokens per request. A model whose
    queueing entry already configures `perf_parms` keeps it; per accelerator, the first variant
    in name order gives the seed."""
    seeds: dict[str, dict[str, Seed]] = {}
    for spec in sorted(variants, key=lambda v: v.name):
        mix = mixes.get(spec.model_id)
        if mix is None:
            continue
        seed = fitted_seed(spec=spec, avg_input_tokens=mix[0], avg_output_tokens=mix[1])
        if seed is not None:
            seeds.setdefault(spec.model_id, {}).setdefault(spec.accelerator, seed)
    by_model = dict(config.by_model)
    for model_id, by_acc in sorted(seeds.items()):
        model = config.model(model_id=model_id, namespace='')
        if model.queueing is None or model.queueing.perf_parms is not None:
            continue
        queueing: QueueingModelConfig = replace(
            model.queueing, perf_parms=tuple(sorted(by_acc.items()))
        )
        by_model[model_id] = replace(model, queueing=queueing)
    return replace(config, by_model=tuple(sorted(by_model.items())))
