"""Where a sweep's tasks run: in this process, on local worker processes, or on a Ray cluster.

Why: the runner (`sweep.Sweep`) asks an executor for one thing, `start(tasks)`: run these and
yield each (index, result) as it finishes, in any order; the runner puts them back in input
order. So an executor is small and interchangeable: the Ray executor (`on_ray.OnRay`: tasks on
a cluster, the workload sent once through the object store) has only that method too. Results
do not depend on the executor: a task is pure (`tasks.Task`), and the tests compare one worker
with two, and this process with a Ray cluster.

- `InProcess`: one task after another, here (`--jobs 1`; also what debuggers and profilers
  want).
- `LocalProcesses(jobs)`: a pool of `jobs` worker processes, started when it is made (before
  any progress bar's thread: a fork copies no thread, and a worker forked later could inherit a
  lock such a thread held) and kept for the executor's life (`close`). Workers are forked where
  the platform can (Linux: no re-import, the parent's modules are already loaded), else
  spawned. Each task is pickled to its worker and its result back.

What fails: an exception a task raises is re-raised by `start`'s iterator in the caller, with
the task's own traceback chained; a worker that dies (killed, out of memory) raises
`concurrent.futures.process.BrokenProcessPool`. `jobs` < 1 raises `ValueError`.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from typing import Protocol, TypeVar

from llmscaler.sim.sweep import on_ray
from llmscaler.sim.sweep.tasks import Task

R = TypeVar('R')


class Executor(Protocol):
    """Runs tasks somewhere; `jobs` is how many at once."""

    @property
    def jobs(self) -> int: ...

    def start(self, *, tasks: Sequence[Task[R]]) -> Iterator[tuple[int, R]]:
        """Run `tasks`; yield (index in `tasks`, result) as each finishes."""
        ...

    def close(self) -> None:
        """Release what the executor holds (workers); it may not be used after."""
        ...


def default_jobs() -> int:
    """The cores this process may use (its CPU affinity where the platform tells it)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


class InProcess:
    """Every task here, one after another, in input order."""

    jobs = 1

    def start(self, *, tasks: Sequence[Task[R]]) -> Iterator[tuple[int, R]]:
        for index, task in enumerate(tasks):
            yield index, task()

    def close(self) -> None:
        pass


def _call(task: Task[R]) -> R:
    return task()


class LocalProcesses:
    """Tasks on `jobs` local worker processes (module docstring)."""

    def __init__(self, *, jobs: int) -> None:
        if jobs < 1:
            raise ValueError(f'jobs must be at least 1, got {jobs}')
        self._jobs = jobs
        self._pool: ProcessPoolExecutor | None = None
        self._workers()

    @property
    def jobs(self) -> int:
        return self._jobs

    def _workers(self) -> ProcessPoolExecutor:
        if self._pool is None:
            methods = multiprocessing.get_all_start_methods()
            context = multiprocessing.get_context('fork' if 'fork' in methods else 'spawn')
            self._pool = ProcessPoolExecutor(max_workers=self._jobs, mp_context=context)
            # Every worker starts now (module docstring).
            wait([self._pool.submit(int) for _ in range(self._jobs)])
        return self._pool

    def start(self, *, tasks: Sequence[Task[R]]) -> Iterator[tuple[int, R]]:
        pool = self._workers()
        futures: dict[Future[R], int] = {
            pool.submit(_call, task): index for index, task in enumerate(tasks)
        }
        pending = set(futures)
        try:
            while pending:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for future in sorted(done, key=lambda f: futures[f]):
                    yield futures[future], future.result()
        finally:
            for future in pending:
                future.cancel()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


def executor_for(*, jobs: int, ray: str | None = None) -> Executor:
    """`OnRay` when `ray` is given (an address; '' for $RAY_ADDRESS; `jobs` is then the
    cluster's), else `InProcess` for one job, `LocalProcesses` for more; `ValueError` below 1,
    `on_ray.RayUnavailable` when there is no cluster there."""
    if ray is not None:
        return on_ray.OnRay(address=on_ray.address_from(given=ray))
    if jobs < 1:
        raise ValueError(f'jobs must be at least 1, got {jobs}')
    return InProcess() if jobs == 1 else LocalProcesses(jobs=jobs)
