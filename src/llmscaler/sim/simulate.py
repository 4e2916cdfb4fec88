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
workload, and the sweep's progress bar (`sim.sweep`: one bar over every run, the calibration's
and the searches' included, drawn when stderr is a terminal); without it (`progress=False`), one
line when the calibration is done and one per policy once the policies have run, in their order
(cost, SLO attainment, wall time). Every run (the calibration's, the searches', the policies')
goes through the sweep given (`--jobs` worker processes, the run cache), so the report is the
same whichever the number of workers; without one, they run here, one after another. With more
than one worker and no warm start, the calibration's search and the search of the best fixed
fleet (`static-best`, the bound's) run side by side, in two threads sharing the workers: the
fixed fleet's search starts from the scenario's own fleet, so neither waits for the other. The
policies that wait for no search run beside them too, on the workers the searches' rounds leave
idle (`Sweep.run`'s `behind`), and take their place in the report's order.

What fails: bad scenario or trace input raises `ScenarioError` / `TraceError` (one line each) before
anything runs; the caller turns them into an exit status. Wall-clock time is read here (for the
progress bar and the run time in the report) and nowhere in the simulated logic.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from llmscaler.sim.policies.bound import Fleet
from llmscaler.sim.report import summary as metrics
from llmscaler.sim.report import writer as report
from llmscaler.sim.report.table import slo_text
from llmscaler.sim.report.writer import RequestsCsv
from llmscaler.sim.scenario.setup import (
    best_fleet,
    build_policies,
    calibrate_capacities,
    needs_capacities,
    needs_fleet,
    warm_start_fleet,
    with_start_fleet,
)
from llmscaler.sim.scenario.validated import Scenario
from llmscaler.sim.scenario.workloads import Workloads, build_workloads, model_slos
from llmscaler.sim.sweep.sweep import Sweep
from llmscaler.sim.sweep.tasks import Finished, RunSpec
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


SEARCHED = ('clairvoyant', 'static-best')
"""The policies whose runs wait for a search (the bound's and the best fixed fleet's)."""


def _only(setup: Scenario, *, searched: bool) -> Scenario:
    """`setup` with only its policies that wait for a search (`searched`), or only the others."""
    return dataclasses.replace(
        setup, policies=tuple(n for n in setup.policies if (n in SEARCHED) == searched)
    )


def _runs(
    *,
    scenario: Scenario,
    workloads: Workloads,
    slos: dict[str, SLO],
    judged: metrics.SLOs,
    sweep: Sweep,
    capacities: dict[str, float] | None = None,
    fleet: Fleet | None = None,
) -> list[RunSpec]:
    """A run, its whole result kept, of each of `scenario`'s policies, in their order."""
    policies = build_policies(
        scenario=scenario,
        workloads=workloads,
        slos=slos,
        capacities=capacities,
        sweep=sweep,
        fleet=fleet,
    )
    return [
        RunSpec(
            traces=workloads.traces,
            variants=scenario.variants,
            policy=policy,
            settings=scenario.settings,
            slos=judged,
            inventory=scenario.inventory,
            keep=True,
        )
        for policy in policies
    ]


def _in_order(
    *, names: tuple[str, ...], searched: list[Finished], plain: list[Finished]
) -> list[Finished]:
    """The two lists merged back into the order of `names` (`SEARCHED` ones from `searched`)."""
    picks = {True: iter(searched), False: iter(plain)}
    return [next(picks[name in SEARCHED]) for name in names]


def run(
    *,
    setup: Scenario,
    out: Path | None,
    console: Console | None = None,
    progress: bool = True,
    requests_csv: RequestsCsv = 'gz',
    sweep: Sweep | None = None,
) -> Outcome:
    """Simulate every policy of `setup`; write the report into `out` when given (the
    per-request CSVs as `requests_csv` says: 'gz', 'plain' or 'none'). The runs go through
    `sweep` (None: a sweep of one job here, its bar drawn when `progress` and stderr is a
    terminal)."""
    if sweep is None:
        with Sweep(jobs=1, progress=None if progress else False, label='simulate') as own:
            return run(
                setup=setup,
                out=out,
                console=console,
                progress=progress,
                requests_csv=requests_csv,
                sweep=own,
            )
    started = time.perf_counter()
    console = console if console is not None else Console(stderr=True)
    workloads = build_workloads(scenario=setup)
    slos = model_slos(scenario=setup, workloads=workloads)
    # One model: one SLO, as it always was; several: each request by its model's.
    judged: metrics.SLOs = slos if setup.several_models else next(iter(slos.values()))
    console.print(_header(setup, workloads, slos))
    capacities: dict[str, float] | None = None
    calibration_seconds: float | None = None
    fleet: Fleet | None = None
    # Without a warm start every run starts from the scenario's own fleet, so with more than one
    # worker the searches run side by side, and the policies that wait for none run beside them
    # on the workers the searches' runs leave idle (module docstring).
    side_by_side = not setup.warm_start and sweep.jobs > 1 and needs_fleet(scenario=setup)
    with ThreadPoolExecutor(max_workers=2) as side:
        plain: Future[list[Finished]] | None = None
        if side_by_side and any(name not in SEARCHED for name in setup.policies):
            plain = side.submit(
                functools.partial(sweep.run, behind=True),
                tasks=_runs(
                    scenario=_only(setup, searched=False),
                    workloads=workloads,
                    slos=slos,
                    judged=judged,
                    sweep=sweep,
                ),
            )
        if needs_capacities(scenario=setup):
            calibrating = time.perf_counter()
            if side_by_side:
                # Each search reads only its own runs: the same answers.
                searching = side.submit(
                    best_fleet, scenario=setup, workloads=workloads, slos=slos, sweep=sweep
                )
                capacities = calibrate_capacities(
                    scenario=setup, workloads=workloads, slos=slos, sweep=sweep
                )
                fleet = searching.result()
            else:
                capacities = calibrate_capacities(
                    scenario=setup, workloads=workloads, slos=slos, sweep=sweep
                )
            calibration_seconds = time.perf_counter() - calibrating
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
        done = sweep.run(
            tasks=_runs(
                scenario=_only(setup, searched=True) if plain is not None else setup,
                workloads=workloads,
                slos=slos,
                judged=judged,
                sweep=sweep,
                capacities=capacities,
                fleet=fleet,
            )
        )
        if plain is not None:
            done = _in_order(names=setup.policies, searched=done, plain=plain.result())
    results: list[SimResult] = []
    for finished in done:
        assert finished.result is not None  # keep=True
        results.append(finished.result)
        if not progress:
            attained = finished.summary.slo_attainment
            console.print(
                f'{escape(finished.result.policy)}: ${finished.summary.cost_usd:,.2f}, SLO '
                + ('n/a' if math.isnan(attained) else f'{attained * 100:.1f} %')
                + f', {finished.result.wall_seconds:.1f} s'
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
