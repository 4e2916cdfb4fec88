"""`llmscaler simulate`: run every policy of a scenario on the same workload, then report.

Why: this is the project's main job on a machine without a cluster, and the instrument by which
policies are compared. Each policy runs on the same trace, the same fleet and the same loop
settings; the core policies run `engine.decide()` exactly as the controller does.

What fails: bad scenario or trace input raises `ScenarioError` / `TraceError` (one line each) before
anything runs; the caller turns them into an exit status. Wall-clock time is read here (for the
progress bar and the run time in the report) and nowhere in the simulated logic.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from llmscaler.sim import metrics, report, runner, scenario
from llmscaler.sim.types import SLO, SimResult, Trace


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a simulate run produced."""

    results: list[SimResult]
    summaries: list[metrics.PolicySummary]
    slo: SLO
    workload: Trace
    report: Path | None


def run(
    *,
    setup: scenario.Scenario,
    out: Path | None,
    console: Console | None = None,
    progress: bool = True,
) -> Outcome:
    """Simulate every policy of `setup`; write the report into `out` when given."""
    console = console if console is not None else Console(stderr=True)
    workload = scenario.build_trace(scenario=setup)
    slo = (
        setup.slo
        if setup.slo is not None
        else scenario.derive_slo(variants=setup.variants, workload=workload)
    )
    console.print(
        f'[bold]{setup.name}[/]: {len(workload):,} requests over '
        f'{workload.duration / 60:.0f} min; variants '
        + ', '.join(f'{v.name} ({v.preset}, ${v.cost_per_hour:.2f}/h)' for v in setup.variants)
        + f'; SLO TTFT ≤ {slo.ttft:g} s, mean ITL ≤ {slo.itl * 1000:g} ms'
    )
    policies = scenario.build_policies(scenario=setup, workload=workload, slo=slo)
    results: list[SimResult] = []
    with Progress(
        TextColumn('{task.description:24}'),
        BarColumn(),
        TextColumn('{task.percentage:>3.0f}%'),
        TimeElapsedColumn(),
        console=console,
        disable=not progress,
        transient=True,
    ) as bar:
        for policy in policies:
            task = bar.add_task(policy.name, total=1.0)

            def update(done: float, task: TaskID = task) -> None:
                bar.update(task, completed=done)

            started = time.perf_counter()
            result = runner.run(
                trace=workload,
                variants=setup.variants,
                policy=policy,
                settings=setup.settings,
                progress=update,
            )
            result.wall_seconds = time.perf_counter() - started
            bar.update(task, completed=1.0)
            results.append(result)
    summaries = metrics.summarize_all(results=results, slo=slo)
    path = None
    if out is not None:
        document = dict(setup.document)
        document['slo'] = dataclasses.asdict(slo)
        path = report.write_report(
            out=out, results=results, summaries=summaries, slo=slo, scenario=document
        )
    return Outcome(results=results, summaries=summaries, slo=slo, workload=workload, report=path)
