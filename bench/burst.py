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

Run: `.venv/bin/python bench/burst.py [--write-docs] [--case NAME] [--workers N]` (about fifteen
minutes on two cores for every case).
"""

from __future__ import annotations

import argparse
import importlib
import os
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

import doc_blocks
from llmscaler.sim import simulate
from llmscaler.sim.scenario import cases, loader

ROOT = Path(__file__).resolve().parents[1]
TRACES = ROOT.parent / 'shared' / 'traces'
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


def run_case(case: str, fast: bool) -> Run:
    """`predictive` on `case` (seed 1), with the fast path as it is or emptied."""
    module = importlib.import_module('llmscaler.burst')
    before = getattr(module, 'SPANS')  # noqa: B009 - a constant patched for the run
    if not fast:
        setattr(module, 'SPANS', ())  # noqa: B010
    try:
        document = cases.case(name=case, policies=[POLICY], traces=TRACES, seed=1)
        setup = loader.from_document(document=document, where=case)
        outcome = simulate.run(
            setup=setup, out=None, console=Console(stderr=True, quiet=True), progress=False
        )
    finally:
        setattr(module, 'SPANS', before)  # noqa: B010
    (result,) = outcome.results
    (summary,) = outcome.summaries
    delay = setup.settings.actuation_delay
    ups = sorted(e.time - delay for e in result.events if e.after > e.before)
    times = rises(document)
    responses: list[float | None] = []
    for index, rise in enumerate(times):
        until = times[index + 1] if index + 1 < len(times) else result.duration
        first = next((t for t in ups if rise <= t < until), None)
        responses.append(None if first is None else first - rise)
    return Run(
        case=case,
        fast=fast,
        attainment=summary.slo_attainment,
        cost=summary.cost_usd,
        responses=tuple(responses),
    )


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


def _one(job: tuple[str, bool]) -> Run:
    return run_case(*job)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--write-docs', action='store_true')
    everything = (*cases.NAMES, *cases.HELD_OUT, *cases.BURSTS)
    parser.add_argument('--case', action='append', choices=everything, help='only these cases')
    parser.add_argument('--workers', type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    names = list(args.case or everything)
    jobs = [(case, fast) for case in names for fast in (True, False)]
    with ProcessPoolExecutor(max_workers=max(1, args.workers)) as pool:
        runs = {(r.case, r.fast): r for r in pool.map(_one, jobs)}
    doc_blocks.emit(DOC, markers=MARKERS, body=block(runs, names), write_docs=args.write_docs)


if __name__ == '__main__':
    main()
