"""The simulator's SLO tuner seed: α, β, γ, δ fitted to each variant's preset
(`sim.hardware.perf_seed`)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from llmscaler.sim.hardware import perf_seed, presets
from llmscaler.sim.policies import core
from llmscaler.sim.scenario import loader
from llmscaler.sim.scenario.setup import build_policies
from llmscaler.sim.scenario.workloads import build_workloads, model_slos

IN, OUT = 800.0, 200.0


@pytest.mark.parametrize('name', ['llama-3.1-8b-a100', 'llama-3.1-8b-h100'])
def test_the_fitted_lines_follow_the_effective_curves(name: str) -> None:
    spec = presets.preset(name=name)
    seed = perf_seed.fitted_seed(spec=spec, avg_input_tokens=IN, avg_output_tokens=OUT)
    assert seed is not None
    alpha, beta, gamma, delta = seed
    limit = perf_seed.batch_limit(spec=spec, avg_input_tokens=IN, avg_output_tokens=OUT)
    # The analyzer's N: max_num_seqs, or what the KV cache holds at I + O/2 tokens a request.
    assert limit == min(spec.max_num_seqs, spec.kv_capacity_tokens // int(IN + OUT / 2))
    curves = perf_seed.curves(
        spec=spec, avg_input_tokens=IN, avg_output_tokens=OUT, max_batch=limit
    )
    b = curves.batches
    # Least squares: the residuals are orthogonal to the batch. The ITL line stays within 10 %
    # of its curve over the whole range; the TTFT curve is concave (a line over 1..N is up to
    # a quarter off at the smallest batches), within 10 % over the upper three quarters.
    lines = ((alpha + beta * b, curves.itl, 0.10), (gamma + delta * IN * b, curves.ttft, 0.25))
    for line, curve, bound in lines:
        residual = curve - line
        assert abs(float(residual @ b)) < 1e-6 * float(curve @ b)
        assert float(np.max(np.abs(residual) / curve)) < bound
        upper = b > limit / 4
        assert float(np.max(np.abs(residual[upper]) / curve[upper])) < 0.10


def test_the_itl_carries_the_prompts_interleaved_with_the_decodes() -> None:
    # At batch b a step carries b/O prompts on average: the ITL is the pure decode step plus
    # their share, and the fitted β is several times the decode-only slope for 4:1 prompts.
    spec = presets.preset(name='llama-3.1-8b-h100')
    curves = perf_seed.curves(spec=spec, avg_input_tokens=IN, avg_output_tokens=OUT, max_batch=200)
    context = IN + OUT / 2

    def decode(b: int) -> float:
        return 1000 * spec.perf.step_seconds(
            decode_seqs=b, prefill_tokens=0, context_tokens=round(b * context)
        )

    assert curves.itl[0] == pytest.approx(decode(1), rel=0.02)
    decode_slope = (decode(200) - decode(100)) / 100
    itl_slope = float(curves.itl[199] - curves.itl[99]) / 100
    assert itl_slope > 2 * decode_slope
    # The TTFT: half a step of waiting plus the step that runs the prompt, above the ITL.
    assert bool(np.all(curves.ttft > curves.itl))
    assert bool(np.all(np.diff(curves.ttft) > 0))


def test_slo_queueing_seeds_each_accelerator_from_its_preset() -> None:
    setup = loader.default()
    workloads = build_workloads(scenario=setup)
    slos = model_slos(scenario=setup, workloads=workloads)
    built = build_policies(
        scenario=replace(setup, policies=('slo-queueing',)), workloads=workloads, slos=slos
    )
    (policy,) = built
    assert isinstance(policy, core.CorePolicy)
    (model,) = setup.models
    queueing = policy.config.model(model_id=model.model_id, namespace='default').queueing
    assert queueing is not None
    trace = workloads.traces[model.name]
    mix = (float(np.mean(trace.input_tokens)), float(np.mean(trace.output_tokens)))
    expected: dict[str, perf_seed.Seed] = {}
    for spec in sorted(setup.variants, key=lambda v: v.name):
        seed = perf_seed.fitted_seed(spec=spec, avg_input_tokens=mix[0], avg_output_tokens=mix[1])
        assert seed is not None
        expected.setdefault(spec.accelerator, seed)
    assert dict(queueing.perf_parms or ()) == expected
    # The scenario's SLO stays the explicit target.
    assert queueing.target_ttft == pytest.approx(slos[model.name].ttft * 1000)
