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

(c) the Ray executor (`--ray`, `sim.sweep.on_ray`) against local processes, both with two
    workers, on the same small sweep: `RUNS` short runs (the `on-off` case, five policies, four
    seeds, `--ray-duration` seconds each, default 300), so that what it costs to send a run
    and its result shows; each pass after a warm-up sweep (the workers started), the faster of
    `REPEATS`, the two executors' passes alternating (a neighbour's load weighs on both). It
    prints the seconds per run of each, the difference (Ray's overhead per run, negative when
    Ray is faster), how many workloads went to the object store (one per sweep's workload:
    each pass builds its own), and the peak resident memory (RSS) of each worker process, as the
    workers report it. The Ray cluster is one node started here (two CPUs, 200 MB of object
    store), or the cluster at `--ray ADDRESS`. The local workers are forked before Ray starts.

The ratio is wall time with one job over wall time with two; another program busy on the same
cores lowers it. What fails: results that differ between the two passes (of any case) stop the
benchmark with status 1.

Run: `.venv/bin/python bench/sweep.py [--case a|b|c|all] [--duration S] [--ray ADDRESS]` (about
seven minutes on two cores; `bench/perfdocs.py --only sweep --write-docs` puts its output in
docs/performance.md).
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import resource
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from rich.console import Console

import policy
from llmscaler.sim import simulate
from llmscaler.sim.scenario import cases, loader
from llmscaler.sim.scenario.document import DEFAULT_DOCUMENT
from llmscaler.sim.sweep import on_ray
from llmscaler.sim.sweep.executors import Executor, LocalProcesses
from llmscaler.sim.sweep.sweep import Sweep
from llmscaler.sim.sweep.tasks import RunSpec

T = TypeVar('T')
JOBS = (1, 2)
SMALL_POLICIES = ('default', 'predictive', 'keda-queue', 'hpa-kv', 'kaito-realtime')
RUNS = 20
REPEATS = 3


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


@dataclass(frozen=True)
class Resident:
    """A task that reports the worker it ran on: its process id and peak RSS in bytes."""

    turn: int

    @property
    def label(self) -> str:
        return f'resident {self.turn}'

    def identity(self) -> object:
        return ('resident', self.turn)

    def __call__(self) -> tuple[int, int]:
        time.sleep(0.05)  # long enough for the other workers to take the next ones
        return os.getpid(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def small_runs(*, duration: float) -> list[RunSpec]:
    """`RUNS` short runs: the `on-off` case's policies on each of its seeds (warm start off)."""
    return [
        run
        for seed in range(1, RUNS // len(SMALL_POLICIES) + 1)
        for run in cases.runs(
            name='on-off', policies=list(SMALL_POLICIES), duration=duration, seed=seed
        )
    ]


def passes(
    executors: Sequence[Executor], *, duration: float
) -> list[tuple[float, list[object], list[int]]]:
    """Per executor: seconds per run (the fastest of `REPEATS` passes, after a warm-up; the
    executors' passes alternate, so that a neighbour's load weighs on both alike), the
    summaries, and the peak RSS of each worker seen.

    Each pass is a sweep of its own on the executor's workers: a sweep answers inputs it has
    run before from memory, and a pass so answered would time no run at all. A pass that did
    not simulate every run raises `RuntimeError`."""
    for executor in executors:
        pass_on(executor).run(tasks=small_runs(duration=duration)[: executor.jobs])
    best = [math.inf] * len(executors)
    summaries: list[list[object]] = [[] for _ in executors]
    for _ in range(REPEATS):
        for index, executor in enumerate(executors):
            tasks = small_runs(duration=duration)
            sweep = pass_on(executor)
            started = time.perf_counter()
            summaries[index] = [f.summary for f in sweep.run(tasks=tasks)]
            best[index] = min(best[index], (time.perf_counter() - started) / len(tasks))
            if sweep.executed != len(tasks):
                raise RuntimeError(f'a pass simulated {sweep.executed} of {len(tasks)} runs')
    peaks = [
        sorted(
            dict(
                pass_on(executor).run(tasks=[Resident(turn) for turn in range(4 * executor.jobs)])
            ).values()
        )
        for executor in executors
    ]
    return list(zip(best, summaries, peaks, strict=True))


def pass_on(executor: Executor) -> Sweep:
    """A sweep with nothing in memory on `executor`'s workers (left open: the caller closes
    the executor)."""
    return Sweep(executor=executor, progress=False)


def ray_sweep(*, duration: float, address: str | None) -> bool:
    import ray

    # Forked before Ray starts any thread in this process (`executors.LocalProcesses`).
    processes = LocalProcesses(jobs=2)
    if address is None:
        # A loopback node of this machine: token authentication off, ~/.ray left alone.
        os.environ.setdefault('RAY_AUTH_MODE', 'disabled')
        ray.init(
            num_cpus=2,
            object_store_memory=200 * 1024 * 1024,
            include_dashboard=False,
            logging_level=logging.ERROR,
            log_to_driver=False,
        )
        address = ray.get_runtime_context().gcs_address
    assert address is not None
    executor = on_ray.OnRay(address=address)
    try:
        [(local_seconds, local, local_peaks), (ray_seconds, remote, ray_peaks)] = passes(
            [processes, executor], duration=duration
        )
        shared = executor.shared
    finally:
        processes.close()
        executor.close()
        ray.shutdown()
    same = repr(local) == repr(remote)  # NaN != NaN; their reprs are equal
    mib = 1024 * 1024
    print(
        f'(c) the Ray executor against local processes, 2 workers each: {RUNS} runs '
        f'({", ".join(SMALL_POLICIES)} on on-off x {RUNS // len(SMALL_POLICIES)} seeds), '
        f'{duration:g} s each'
    )
    print(f'  local processes : {1000 * local_seconds:7.1f} ms a run')
    print(
        f'  Ray             : {1000 * ray_seconds:7.1f} ms a run '
        f'({1000 * (ray_seconds - local_seconds):+.1f} ms a run), '
        f'workloads put: {shared}, same results: {"yes" if same else "NO"}'
    )
    print(
        '  peak RSS a worker: local '
        + ', '.join(f'{p / mib:.0f}' for p in local_peaks)
        + ' MiB; Ray '
        + ', '.join(f'{p / mib:.0f}' for p in ray_peaks)
        + ' MiB'
    )
    return same


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or '').splitlines()[0])
    parser.add_argument('--case', choices=('a', 'b', 'c', 'all'), default='all')
    parser.add_argument('--duration', type=float, default=600.0, help='seconds per case of (a)')
    parser.add_argument('--ray-duration', type=float, default=300.0, help='seconds per run of (c)')
    parser.add_argument(
        '--ray', metavar='ADDRESS', help='(c) on this Ray cluster (default: one started here)'
    )
    args = parser.parse_args()
    same = True
    if args.case in ('a', 'all'):
        same = policy_sweep(duration=args.duration) and same
    if args.case in ('b', 'all'):
        same = simulate_sweep() and same
    if args.case in ('c', 'all'):
        same = ray_sweep(duration=args.ray_duration, address=args.ray) and same
    return 0 if same else 1


if __name__ == '__main__':
    raise SystemExit(main())
