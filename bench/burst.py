"""What the fast path for bursts buys: how soon a returning burst is answered, and at what cost.

Why: a cycle sizes on the last minute's arrival rate, so a burst after a lull is answered a
minute or more late (docs/controller.md, "The fast path for bursts"). This script runs
`predictive` on the cases where load returns after a lull (`on-off`, `silent-bursts`) and on
every case of bench/policy.py, with the fast path as it is and without it (`burst.SPANS`
emptied in the worker process: no span, no burst rate, no raise, the same as `fastPath: false`
for every model), and prints:

- per returning burst (the end of each event of the case that lowered the load): seconds from
  the burst's first request to the first scale-up written at or after it (the simulator writes
  a target one actuation delay before it takes effect), with and without the fast path;
- per case: the SLO attainment and the cost with the fast path, and without it.

`--write-docs` puts both tables into docs/controller.md between `<!-- burst:begin -->` and
`<!-- burst:end -->`.

Each (case, fast path or not) is one task of one sweep (`sim.sweep`, `BurstRun`): `--jobs N`
worker processes (default: one per core) or a Ray cluster's (`--ray [ADDRESS]`), and the run
cache unless `--no-cache`, as bench/policy.py takes them (its docstring); a run cut short
resumes from the runs it finished, and the tables are the same whatever `--jobs`. The task
names the emptied constant, so a cached run without the fast path is never one with it; its
result is what the simulator made (the summary and the scale events), and the responses are
measured from it here, so a cached run is never measured by an older copy of this script.
`SPANS` is emptied in worker processes (one run at a time, restored after it), never in the
process that writes the page (with `--jobs 1`, in it, and restored all the same).

Run: `.venv/bin/python bench/burst.py [--write-docs] [--case NAME] [--jobs N | --ray [ADDRESS]]
[--no-cache]` (about fifteen minutes on two cores for every case).
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

import doc_blocks
import policy
from llmscaler.sim import simulate
from llmscaler.sim.report.summary import PolicySummary
from llmscaler.sim.scenario import cases, loader
from llmscaler.sim.vocabulary import ScaleEvent

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / 'docs' / 'controller.md'
MARKERS = ('<!-- burst:begin -->', '<!-- burst:end -->')
POLICY = 'predictive'
RESPONSE_CASES = ('on-off', 'silent-bursts')


@dataclass(frozen=True)
class Run:
    """One case with or without the fast path: attainment, cost and the response per burst."""

    case: str
    fast: bool
    attainment: float
    cost: float
    responses: tuple[float | None, ...]
    """Per returning burst, seconds to the first scale-up written (None: none before the next)."""


def rises(document: Mapping[str, object]) -> list[float]:
    """When the load comes back: the end of each event that lowered it, before the end."""
    workload = document['workload']
    assert isinstance(workload, dict)
    synthetic = workload.get('synthetic', {})
    duration = float(synthetic.get('duration', 0.0))
    ends = [
        float(start) + float(length)
        for start, length, multiplier in synthetic.get('events', ())
        if float(multiplier) < 1.0
    ]
    return sorted(t for t in ends if t < duration)


def document(*, case: str) -> dict[str, Any]:
    """The scenario of `predictive` on `case` (seed 1), as bench/policy.py runs it."""
    return policy.Case(name=case, names=(POLICY,)).document()


Simulated = tuple[PolicySummary, tuple[ScaleEvent, ...], float, float]
"""A run as the simulator left it: its summary, its scale events, the actuation delay and the
run's length. Only the package's types, so that it pickles by reference wherever it was made
(a worker, a Ray node) and into the run cache."""


def simulated(*, case: str, fast: bool) -> Simulated:
    """`predictive` on `case` (seed 1), with the fast path as it is or emptied."""
    module = importlib.import_module('llmscaler.burst')
    before = getattr(module, 'SPANS')  # noqa: B009 - a constant patched for the run
    if not fast:
        setattr(module, 'SPANS', ())  # noqa: B010
    try:
        setup = loader.from_document(document=document(case=case), where=case)
        outcome = simulate.run(
            setup=setup, out=None, console=Console(stderr=True, quiet=True), progress=False
        )
    finally:
        setattr(module, 'SPANS', before)  # noqa: B010
    (result,) = outcome.results
    (summary,) = outcome.summaries
    return summary, tuple(result.events), setup.settings.actuation_delay, result.duration


def measure(*, case: str, fast: bool, run: Simulated) -> Run:
    """The attainment, the cost and the response to each returning burst of `run`."""
    summary, events, delay, duration = run
    ups = sorted(e.time - delay for e in events if e.after > e.before)
    times = rises(document(case=case))
    responses: list[float | None] = []
    for index, rise in enumerate(times):
        until = times[index + 1] if index + 1 < len(times) else duration
        first = next((t for t in ups if rise <= t < until), None)
        responses.append(None if first is None else first - rise)
    return Run(
        case=case,
        fast=fast,
        attainment=summary.slo_attainment,
        cost=summary.cost_usd,
        responses=tuple(responses),
    )


def run_case(case: str, fast: bool) -> Run:
    """`predictive` on `case` (seed 1), with the fast path as it is or emptied, measured."""
    return measure(case=case, fast=fast, run=simulated(case=case, fast=fast))


@dataclass(frozen=True)
class BurstRun:
    """`simulated(case, fast)` as a task of a sweep (`sim.sweep.tasks.Task`)."""

    case: str
    fast: bool

    @property
    def label(self) -> str:
        return f'{self.case} {"fast path" if self.fast else "without"}'

    def identity(self) -> object:
        emptied = None if self.fast else ('llmscaler.burst', 'SPANS', ())
        return (
            'bench/burst.py',
            emptied,
            policy.Case(name=self.case, names=(POLICY,)).identity(),
        )

    def weight(self) -> float:
        return policy.Case(name=self.case, names=(POLICY,)).weight()

    def __call__(self) -> Simulated:
        return simulated(case=self.case, fast=self.fast)


def _seconds(value: float | None) -> str:
    return '–' if value is None else f'{value:.1f} s'


def response_table(runs: Mapping[tuple[str, bool], Run]) -> list[str]:
    lines = [
        '| case | burst | fast path | without |',
        '|---|---:|---:|---:|',
    ]
    for case in RESPONSE_CASES:
        if (case, True) not in runs:
            continue
        fast, slow = runs[(case, True)], runs[(case, False)]
        for index, (one, other) in enumerate(zip(fast.responses, slow.responses, strict=True)):
            lines.append(f'| `{case}` | {index + 1} | {_seconds(one)} | {_seconds(other)} |')
    return lines


def cost_table(runs: Mapping[tuple[str, bool], Run], names: Sequence[str]) -> list[str]:
    lines = [
        '| case | fast path: SLO · cost | without: SLO · cost | cost ratio |',
        '|---|---:|---:|---:|',
    ]
    for case in names:
        fast, slow = runs[(case, True)], runs[(case, False)]
        ratio = fast.cost / slow.cost if slow.cost > 0 else float('nan')
        lines.append(
            f'| `{case}` | {100 * fast.attainment:.2f} % · {fast.cost:.2f} $ | '
            f'{100 * slow.attainment:.2f} % · {slow.cost:.2f} $ | {ratio:.2f}× |'
        )
    return lines


def block(runs: Mapping[tuple[str, bool], Run], names: Sequence[str]) -> str:
    return '\n'.join(
        [
            'Generated by `bench/burst.py` (`--write-docs`): `predictive` (seed 1) with the fast '
            'path and without it. Seconds from the first request of each returning burst to '
            'the first scale-up written:',
            '',
            *response_table(runs),
            '',
            'SLO attainment and cost on every case:',
            '',
            *cost_table(runs, names),
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or '').splitlines()[0])
    parser.add_argument('--write-docs', action='store_true')
    everything = (*cases.NAMES, *cases.HELD_OUT, *cases.BURSTS)
    parser.add_argument('--case', action='append', choices=everything, help='only these cases')
    policy.jobs_argument(parser)
    args = parser.parse_args(argv)
    policy.check_jobs(parser, args)
    names = list(args.case or everything)
    tasks = [BurstRun(case, fast) for case in names for fast in (True, False)]
    with policy.sweep_of(parser, args, label='bench/burst.py') as sweep:
        done = sweep.run(tasks=tasks, weights=[t.weight() for t in tasks])
    runs = {
        (t.case, t.fast): measure(case=t.case, fast=t.fast, run=run)
        for t, run in zip(tasks, done, strict=True)
    }
    doc_blocks.emit(DOC, markers=MARKERS, body=block(runs, names), write_docs=args.write_docs)
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
