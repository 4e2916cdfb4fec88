"""Benchmark: what `--jobs 2` buys a sweep over `--jobs 1`, in the same run, on this machine.

Why: every sweep of the project (bench/policy.py's cases, the bound's searches, `llmscaler
simulate`'s policies) runs through one runner (`sim.sweep`) on local worker processes; the goal
is at least 1.8× with two workers on two cores. Two sweeps, each timed with `--jobs 1` and
then `--jobs 2`, the run cache off (every run simulated), and their results compared (a sweep
whose answer depends on the number of workers is wrong, however fast):

(a) bench/policy.py's sweep: every benchmark case with every policy bench/policy.py runs (the
    clairvoyant bound's and `static-best`'s searches included), each case one task, cut to
    `--duration` seconds (default 600; bench/policy.py runs 1,800) so that both passes take a
    few minutes; the cases start heaviest first, as bench/policy.py starts them (`Case.weight`);
(b) `llmscaler simulate` on the built-in scenario (what `make run` runs, without writing the
    report): its calibration, the bound's searches and its six policies, the runs of the
    searches in rounds (`sim.policies.bound`).

The ratio is wall time with one job over wall time with two; another program busy on the same
cores lowers it. What fails: results that differ between the two passes stop the benchmark with
status 1 (and the runs that differ).

Run: `.venv/bin/python bench/sweep.py [--case a|b|all] [--duration S]` (about six minutes on
two cores; `bench/perfdocs.py --only sweep --write-docs` puts its output in
docs/performance.md).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import TypeVar

from rich.console import Console

import policy
from llmscaler.sim import simulate
from llmscaler.sim.scenario import cases, loader
from llmscaler.sim.scenario.document import DEFAULT_DOCUMENT
from llmscaler.sim.sweep.sweep import Sweep

T = TypeVar('T')
JOBS = (1, 2)


def timed(run: Callable[[int], T]) -> tuple[dict[int, float], dict[int, T]]:
    """`run(jobs)` for each of `JOBS`: seconds and result of each."""
    seconds: dict[int, float] = {}
    results: dict[int, T] = {}
    for jobs in JOBS:
        started = time.perf_counter()
        results[jobs] = run(jobs)
        seconds[jobs] = time.perf_counter() - started
    return seconds, results


def report(seconds: dict[int, float], same: bool) -> list[str]:
    one, two = seconds[1], seconds[2]
    return [
        f'  --jobs 1 : {one:7.1f} s',
        f'  --jobs 2 : {two:7.1f} s ({one / two:.2f}x --jobs 1; goal >= 1.8x), '
        f'same results: {"yes" if same else "NO"}',
    ]


def policy_sweep(*, duration: float) -> bool:
    tasks = [
        policy.Case(name=c, names=tuple(policy.policies()), duration=duration) for c in cases.NAMES
    ]

    def run(jobs: int) -> list[list[object]]:
        with Sweep(jobs=jobs, progress=False) as sweep:
            done = sweep.run(tasks=tasks, weights=[t.weight() for t in tasks])
            return [list(rows) for rows, _ in done]

    seconds, results = timed(run)
    same = repr(results[1]) == repr(results[2])  # NaN != NaN; their reprs are equal
    print(
        f"(a) bench/policy.py's sweep: {len(cases.NAMES)} cases x "
        f'{len(policy.policies())} policies, {duration:g} s each, one task per case'
    )
    print('\n'.join(report(seconds, same)))
    return same


def simulate_sweep() -> bool:
    setup = loader.from_document(document=DEFAULT_DOCUMENT, where='built-in scenario')
    quiet = Console(stderr=True, quiet=True)

    def run(jobs: int) -> list[object]:
        with Sweep(jobs=jobs, progress=False) as sweep:
            outcome = simulate.run(
                setup=setup, out=None, console=quiet, progress=False, sweep=sweep
            )
        return list(outcome.summaries)

    seconds, results = timed(run)
    same = repr(results[1]) == repr(results[2])  # NaN != NaN; their reprs are equal
    print(f'(b) llmscaler simulate, built-in scenario ({", ".join(setup.policies)}), no report')
    print('\n'.join(report(seconds, same)))
    return same


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or '').splitlines()[0])
    parser.add_argument('--case', choices=('a', 'b', 'all'), default='all')
    parser.add_argument('--duration', type=float, default=600.0, help='seconds per case of (a)')
    args = parser.parse_args()
    same = True
    if args.case in ('a', 'all'):
        same = policy_sweep(duration=args.duration) and same
    if args.case in ('b', 'all'):
        same = simulate_sweep() and same
    return 0 if same else 1


if __name__ == '__main__':
    raise SystemExit(main())
