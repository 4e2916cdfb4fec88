"""`llmscaler simulate`: run every policy of a scenario on the same workload, then report.

Why: this is the project's main job on a machine without a cluster, and the instrument by which
policies are compared. Each policy runs on the same trace, the same fleet and the same loop
settings; the core policies run `engine.decide()` exactly as the controller does.

A run: each model's workload is built and its SLO derived (when the scenario has none); the
variants' clairvoyant capacities are calibrated when the clairvoyant policy or a warm start needs
them (once for both); with a warm start the start fleet is chosen
(`scenario.warm_start_fleet`); then every policy runs, on every model at once (the fleet of
several models shares the scenario's GPU inventory). With several models the report has a row
per model and policy besides the totals. The console gets a header naming the scenario and its
workload, and a progress bar over the calibration and each policy; without the bar
(`progress=False`), one line when the calibration is done and one per policy as it finishes
(cost, SLO attainment, wall time).

What fails: bad scenario or trace input raises `ScenarioError` / `TraceError` (one line each) before
anything runs; the caller turns them into an exit status. Wall-clock time is read here (for the
progress bar and the run time in the report) and nowhere in the simulated logic.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from llmscaler.sim import runner
from llmscaler.sim.policies.clairvoyant import ClairvoyantPolicy
from llmscaler.sim.report import summary as metrics
from llmscaler.sim.report import writer as report
from llmscaler.sim.report.table import slo_text
from llmscaler.sim.report.writer import RequestsCsv
from llmscaler.sim.scenario.setup import (
    build_policies,
    calibrate_capacities,
    needs_capacities,
    warm_start_fleet,
    with_start_fleet,
)
from llmscaler.sim.scenario.validated import Scenario
from llmscaler.sim.scenario.workloads import Workloads, build_workloads, model_slos
from llmscaler.sim.vocabulary import SLO, SimResult, Trace, VariantSpec


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a simulate run produced."""

    results: list[SimResult]
    summaries: list[metrics.PolicySummary]
    slo: SLO
    """The SLO (with several models, the first model's in name order: `slos` has each)."""
    workload: Trace
    """The workload (with several models, the first model's: `workloads` has each)."""
    report: Path | None
    setup: Scenario | None = None
    """The scenario as run: its variants carry the start fleet (a warm start's included)."""
    capacities: dict[str, float] | None = None
    """The calibrated capacities (req/s per replica), when something needed them."""
    wall_seconds: float = 0.0
    """From the start of the run to the last policy's end (the report not included)."""
    slos: dict[str, SLO] = dataclasses.field(default_factory=dict)
    """Each model's SLO, by model name."""
    workloads: Workloads | None = None
    model_summaries: list[dict[str, metrics.PolicySummary]] | None = None
    """With several models: per result, each model's summary."""


def version() -> str:
    """The simulator's version: the installed package's."""
    try:
        return metadata.version('llmscaler')
    except metadata.PackageNotFoundError:  # a source tree that is not installed
        return 'unknown'


def _fleet(setup: Scenario) -> str:
    return ', '.join(f'{v.name}={v.initial_replicas}' for v in setup.variants)


def _variants(variants: tuple[VariantSpec, ...]) -> str:
    return ', '.join(f'{escape(v.name)} ({v.preset}, ${v.cost_per_hour:.2f}/h)' for v in variants)


def _header(setup: Scenario, workloads: Workloads, slos: dict[str, SLO]) -> str:
    start = 'warm start' if setup.warm_start else f'start {_fleet(setup)}'
    timeout = setup.settings.request_timeout
    traces = workloads.traces.values()
    requests = sum(len(t) for t in traces)
    minutes = max((t.duration for t in traces), default=0.0) / 60
    if setup.several_models:
        fleet = 'models ' + '; '.join(
            f'{escape(m.name)}: {_variants(m.variants)}, SLO {slo_text(slo=slos[m.name])}'
            for m in setup.models
        )
    else:
        slo = next(iter(slos.values()))
        fleet = (
            f'variants {_variants(setup.variants)}'
            + f'; {start}; SLO TTFT ≤ {slo.ttft:g} s, mean ITL ≤ {slo.itl * 1000:g} ms'
        )
        start = ''
    inventory = (
        '; GPUs ' + ', '.join(f'{a} {n}' for a, n in sorted(setup.inventory.items()))
        if setup.inventory is not None
        else ''
    )
    return (
        f'[bold]{escape(setup.name)}[/] — {escape(setup.workload_text)}: {requests:,} '
        f'requests over {minutes:.0f} min; {fleet}'
        + (f'; {start}' if start else '')
        + inventory
        + (f'; requests time out after {timeout:g} s' if timeout is not None else '')
    )


def run(
    *,
    setup: Scenario,
    out: Path | None,
    console: Console | None = None,
    progress: bool = True,
    requests_csv: RequestsCsv = 'gz',
) -> Outcome:
    """Simulate every policy of `setup`; write the report into `out` when given (the
    per-request CSVs as `requests_csv` says: 'gz', 'plain' or 'none')."""
    started = time.perf_counter()
    console = console if console is not None else Console(stderr=True)
    workloads = build_workloads(scenario=setup)
    slos = model_slos(scenario=setup, workloads=workloads)
    # One model: one SLO, as it always was; several: each request by its model's.
    judged: metrics.SLOs = slos if setup.several_models else next(iter(slos.values()))
    console.print(_header(setup, workloads, slos))
    results: list[SimResult] = []
    capacities: dict[str, float] | None = None
    calibration_seconds: float | None = None
    with Progress(
        TextColumn('{task.description:24}'),
        BarColumn(),
        TextColumn('{task.percentage:>3.0f}%'),
        TimeElapsedColumn(),
        console=console,
        disable=not progress,
        transient=True,
    ) as bar:
        if needs_capacities(scenario=setup):
            task = bar.add_task('calibration', total=1.0)
            calibrating = time.perf_counter()

            def calibrated(done: float, task: TaskID = task) -> None:
                bar.update(task, completed=done)

            capacities = calibrate_capacities(
                scenario=setup, workloads=workloads, slos=slos, progress=calibrated
            )
            calibration_seconds = time.perf_counter() - calibrating
            bar.update(task, completed=1.0)
            if not progress:
                console.print(
                    'calibration: '
                    + ', '.join(f'{escape(n)} {c:.3g} req/s' for n, c in capacities.items())
                    + f' per replica ({calibration_seconds:.1f} s)'
                )
        if setup.warm_start:
            assert capacities is not None  # needs_capacities
            initial = warm_start_fleet(scenario=setup, workloads=workloads, capacities=capacities)
            setup = with_start_fleet(scenario=setup, initial=initial)
            console.print(f'warm start: {escape(_fleet(setup))}')
        policies = build_policies(
            scenario=setup, workloads=workloads, slos=slos, capacities=capacities
        )
        for policy in policies:
            task = bar.add_task(policy.name, total=1.0)

            def update(done: float, task: TaskID = task) -> None:
                bar.update(task, completed=done)

            began = time.perf_counter()
            result = runner.run(
                trace=workloads.traces,
                variants=setup.variants,
                policy=policy,
                settings=setup.settings,
                inventory=setup.inventory,
                progress=update,
            )
            result.wall_seconds = time.perf_counter() - began
            if isinstance(policy, ClairvoyantPolicy):
                result.notes.extend(policy.notes())
            bar.update(task, completed=1.0)
            results.append(result)
            if not progress:
                summary = metrics.summarize(result=result, slo=judged)
                attained = summary.slo_attainment
                console.print(
                    f'{escape(policy.name)}: ${summary.cost_usd:,.2f}, SLO '
                    + ('n/a' if math.isnan(attained) else f'{attained * 100:.1f} %')
                    + f', {result.wall_seconds:.1f} s'
                )
    wall_seconds = time.perf_counter() - started
    summaries = metrics.summarize_all(results=results, slo=judged)
    by_model = metrics.summarize_models(results=results, slo=slos) if setup.several_models else None
    slo = slos[min(slos)]
    path = None
    if out is not None:
        document = dict(setup.document)
        if setup.several_models:
            document['models'] = [
                {**m, 'slo': dataclasses.asdict(slos[m['name']])} for m in document['models']
            ]
        else:
            document['slo'] = dataclasses.asdict(slo)
        path = report.write_report(
            out=out,
            results=results,
            summaries=summaries,
            slo=slo,
            slos=slos if setup.several_models else None,
            model_summaries=by_model,
            scenario=document,
            workload=setup.workload_text,
            run={
                'version': version(),
                'wall_seconds': wall_seconds,
                'calibration_seconds': calibration_seconds,
                'initial': {v.name: v.initial_replicas for v in setup.variants},
                'capacities': capacities,
                'policies': [{'policy': r.policy, 'wall_seconds': r.wall_seconds} for r in results],
            },
            requests_csv=requests_csv,
        )
    return Outcome(
        results=results,
        summaries=summaries,
        slo=slo,
        workload=workloads.traces[min(workloads.traces)],
        report=path,
        setup=setup,
        capacities=capacities,
        wall_seconds=wall_seconds,
        slos=slos,
        workloads=workloads,
        model_summaries=by_model,
    )
