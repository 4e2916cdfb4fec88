"""A scenario's workloads and the SLO each model is judged by.

Why: `sim.scenario.setup` prepares a valid scenario for the event loop; the first two things it
needs, before capacities, start fleet and policies, are each model's trace and SLO. They live
here:

- Workloads (`build_workloads`): a model's synthetic workload is drawn with the scenario's seed
  (with several models, the seed and the model's place in name order, so two models with one
  spec do not get the very same arrivals); a model's trace file is read whole, or only the rows
  of its `model` when given; a shared trace is split by its model column, a row belonging to the
  model whose name, or else whose model id, it holds.
- Default SLO (`derive_slo`), per model when it has none: TTFT ≤ 5 × the time of one prefill of
  the workload's p90 prompt, and mean ITL ≤ 3 × one decode step of a single sequence at the
  workload's mean context (3 is WVA's SLO multiplier, a target utilisation of about 2/3), on
  the model's slowest variant at idle, each rounded up to two significant figures.

What fails: a bad synthetic preset (`ScenarioError`), a trace file that cannot be read
(`formats.TraceError`), one line each.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from llmscaler.sim.scenario.document import ScenarioError, SyntheticModel, TraceModel, WorkloadModel
from llmscaler.sim.vocabulary import SLO, Trace, VariantSpec
from llmscaler.sim.workload import synthetic, trace
from llmscaler.sim.workload.prefixes import PrefixSpec

if TYPE_CHECKING:
    from llmscaler.sim.scenario.validated import Scenario


@dataclass(frozen=True, slots=True)
class Workloads:
    """Each model's trace, by model name in name order; the malformed rows skipped reading them."""

    traces: dict[str, Trace]
    skipped_rows: int = 0


# ---- workloads -----------------------------------------------------------------------------


def _synthetic(
    *, workload: WorkloadModel, seed: int | tuple[int, int], where: str, field: str
) -> Trace:
    spec = workload.synthetic
    assert spec is not None
    try:
        synth = synthetic.preset(
            name=spec.preset, duration=spec.duration, rate=spec.rate, diurnal=spec.diurnal
        )
    except ValueError as exc:
        raise ScenarioError(f'{where}: {field}.synthetic.preset: {exc}') from None
    if spec.events:
        events = tuple(
            synthetic.RateEvent(start=s, duration=d, multiplier=m) for s, d, m in spec.events
        )
        synth = replace(synth, envelope=replace(synth.envelope, events=events))
    if spec.prefixes is not None:
        shared = spec.prefixes
        synth = replace(
            synth,
            prefixes=PrefixSpec(
                system_prompts=shared.system_prompts,
                system_tokens=shared.system_tokens,
                skew=shared.skew,
                followup=shared.followup,
                open_sessions=shared.open_sessions,
            ),
        )
    return synthetic.generate(spec=synth, seed=seed)


def _read(*, source: TraceModel, seed: int | tuple[int, int]) -> Trace:
    return trace.load_trace(
        path=Path(source.path),
        fmt=source.format,
        skip_bad=source.skip_bad,
        start=source.start,
        duration=source.duration,
        rate_scale=source.rate_scale,
        seed=seed,
        model=source.model,
    )


def build_trace(*, scenario: Scenario) -> Trace:
    """The workload of a one-model scenario as a trace (`formats.TraceError`/`ScenarioError` on
    bad input); `build_workloads` for any scenario."""
    traces = build_workloads(scenario=scenario).traces
    if len(traces) != 1:
        raise ScenarioError(f'{scenario.source}: a scenario of several models has a trace each')
    return next(iter(traces.values()))


def build_workloads(*, scenario: Scenario) -> Workloads:
    """Every model's trace (see the module docstring)."""
    models = sorted(scenario.models, key=lambda m: m.name)
    several = len(models) > 1
    shared = scenario.workload.trace
    if any(m.workload is None for m in models):  # the rows of one shared trace each
        assert shared is not None
        labels = {m.model_id: m.name for m in models} | {m.name: m.name for m in models}
        split = trace.load_by_model(
            path=Path(shared.path),
            models=labels,
            fmt=shared.format,
            skip_bad=shared.skip_bad,
            start=shared.start,
            duration=shared.duration,
            rate_scale=shared.rate_scale,
            seed=scenario.seed,
        )
        return Workloads(traces=split.traces, skipped_rows=split.skipped_rows)
    traces: dict[str, Trace] = {}
    skipped = 0
    for index, model in enumerate(models):
        workload = model.workload if model.workload is not None else WorkloadModel()
        seed = (scenario.seed, index) if several else scenario.seed
        if workload.trace is not None:
            traces[model.name] = _read(source=workload.trace, seed=seed)
            skipped += traces[model.name].skipped_rows
        else:
            if workload.synthetic is None:  # a one-model scenario's default
                workload = WorkloadModel(synthetic=SyntheticModel())
            traces[model.name] = _synthetic(
                workload=workload, seed=seed, where=scenario.source, field=f'{model.where}workload'
            )
    return Workloads(traces=traces, skipped_rows=skipped)


# ---- SLOs ----------------------------------------------------------------------------------


def round_up(value: float) -> float:
    """Round up to two significant figures."""
    if value <= 0 or not math.isfinite(value):
        return value
    scale = 10.0 ** (math.floor(math.log10(value)) - 1)
    return float(math.ceil(value / scale - 1e-9) * scale)


def derive_slo(*, variants: Sequence[VariantSpec], workload: Trace) -> SLO:
    """Default SLO from the slowest variant at idle (see the module docstring)."""
    p90_input = int(np.percentile(workload.input_tokens, 90)) if len(workload) else 1024
    mean_context = (
        float(np.mean(workload.input_tokens) + np.mean(workload.output_tokens) / 2)
        if len(workload)
        else 1024.0
    )
    ttft = 0.0
    itl = 0.0
    for spec in variants:
        remaining, prefill = p90_input, 0.0
        while remaining > 0:  # chunked prefill: one step per budget-sized chunk
            chunk = min(remaining, spec.max_num_batched_tokens)
            prefill += spec.perf.step_seconds(
                decode_seqs=0, prefill_tokens=chunk, context_tokens=p90_input - remaining
            )
            remaining -= chunk
        decode = spec.perf.step_seconds(
            decode_seqs=1, prefill_tokens=0, context_tokens=round(mean_context)
        )
        ttft = max(ttft, 5 * prefill)
        itl = max(itl, 3 * decode)
    return SLO(ttft=round_up(ttft), itl=round_up(itl))


def model_slos(*, scenario: Scenario, workloads: Workloads) -> dict[str, SLO]:
    """Each model's SLO: its own, else the scenario's, else derived (`derive_slo`)."""
    return {
        m.name: m.slo
        if m.slo is not None
        else derive_slo(variants=m.variants, workload=workloads.traces[m.name])
        for m in sorted(scenario.models, key=lambda m: m.name)
    }
