"""The simulator's SLO tuner seed: α, β, γ, δ fitted to each variant's preset (`sim.perf_seed`)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from llmscaler.sim import perf_seed, policies, presets, scenario

IN, OUT = 800.0, 200.0


@pytest.mark.parametrize('name', ['llama-3.1-8b-a100', 'llama-3.1-8b-h100'])
def test_the_fitted_lines_follow_the_presets_step_times(name: str) -> None:
    spec = presets.preset(name=name)
    seed = perf_seed.fitted_seed(spec=spec, avg_input_tokens=IN, avg_output_tokens=OUT)
    assert seed is not None
    alpha, beta, gamma, delta = seed
    batches = np.arange(1, spec.max_num_seqs + 1)
    decode = np.array(
        [
            1000
            * spec.perf.step_seconds(
                decode_seqs=int(b), prefill_tokens=0, context_tokens=round(b * (IN + OUT / 2))
            )
            for b in batches
        ]
    )
    # Least squares: the residuals are orthogonal to the batch, and the line stays within
    # 10 % of the roofline's decode step over the whole range.
    residual = decode - (alpha + beta * batches)
    assert abs(float(residual @ batches)) < 1e-6 * float(decode @ batches)
    assert float(np.max(np.abs(residual) / decode)) < 0.10
    # The prefill of one prompt grows with the batch it runs beside.
    assert gamma > 0
    assert delta * IN * spec.max_num_seqs > 0.1 * gamma


def test_slo_queueing_seeds_each_accelerator_from_its_preset() -> None:
    setup = scenario.default()
    workloads = scenario.build_workloads(scenario=setup)
    slos = scenario.model_slos(scenario=setup, workloads=workloads)
    built = scenario.build_policies(
        scenario=replace(setup, policies=(policies.SLO_QUEUEING,)), workloads=workloads, slos=slos
    )
    (policy,) = built
    assert isinstance(policy, policies.CorePolicy)
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
