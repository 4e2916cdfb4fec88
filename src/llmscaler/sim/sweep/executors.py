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
  spawned. Each task is pickled to its worker and its result back. A task goes to the pool
  only when a worker is free, from one queue shared by every thread that calls `start`: the
  tasks of a call `behind` wait there until no other task does, so they take only the workers
  the others leave idle (a search's rounds, each waiting for the last, leave some) and never
  delay them by more than the one run a worker has already started. A worker that a task not
  behind frees is held for such tasks a moment (`GRACE`) first: the search just answered asks
  for its next run within it, where a task behind would take the worker for a whole run.

`behind` is a hint: `InProcess` runs one call's tasks at a time anyway, and `on_ray.OnRay`
leaves the order to Ray's scheduler. So is `idle` (workers free with nothing queued for them,
what a search may fill with runs ahead of its turn): `LocalProcesses` counts them, the others
say 0.

What fails: an exception a task raises is re-raised by `start`'s iterator in the caller, with
the task's own traceback chained; a worker that dies (killed, out of memory) raises
`concurrent.futures.process.BrokenProcessPool`. `jobs` < 1 raises `ValueError`.
"""

from __future__ import annotations

import functools
import heapq
import multiprocessing
import os
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from typing import Any, Protocol, TypeVar

from llmscaler.sim.sweep import on_ray
from llmscaler.sim.sweep.tasks import Task

R = TypeVar('R')


class Executor(Protocol):
    """Runs tasks somewhere; `jobs` is how many at once."""

    @property
    def jobs(self) -> int: ...

    def start(self, *, tasks: Sequence[Task[R]], behind: bool = False) -> Iterator[tuple[int, R]]:
        """Run `tasks`; yield (index in `tasks`, result) as each finishes; `behind`: after
        every task of other calls that waits (module docstring)."""
        ...

    def idle(self) -> int:
        """Workers free now with no task waiting for them: a hint for a caller that could run
        something ahead of its turn (0 where the executor cannot tell)."""
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

    def start(self, *, tasks: Sequence[Task[R]], behind: bool = False) -> Iterator[tuple[int, R]]:
        for index, task in enumerate(tasks):
            yield index, task()

    def idle(self) -> int:
        return 0  # its one worker is the caller

    def close(self) -> None:
        pass


GRACE = 0.1
"""Seconds a worker freed by a task not `behind` is kept from the tasks behind (more than a
search takes to ask for its next run once given its last)."""


def _call(task: Task[R]) -> R:
    return task()


class LocalProcesses:
    """Tasks on `jobs` local worker processes (module docstring)."""

    def __init__(self, *, jobs: int) -> None:
        if jobs < 1:
            raise ValueError(f'jobs must be at least 1, got {jobs}')
        self._jobs = jobs
        self._pool: ProcessPoolExecutor | None = None
        # Reentrant: a pool future that is already done runs its callback at once, in
        # `_dispatch`, which holds the lock.
        self._lock = threading.RLock()
        # (behind, order, task, the caller's future): what waits for a free worker.
        self._queue: list[tuple[bool, int, Task[Any], Future[Any]]] = []
        self._order = 0
        self._busy = 0
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

    def start(self, *, tasks: Sequence[Task[R]], behind: bool = False) -> Iterator[tuple[int, R]]:
        self._workers()
        futures: dict[Future[R], int] = {}
        with self._lock:
            for index, task in enumerate(tasks):
                waiting: Future[R] = Future()
                futures[waiting] = index
                heapq.heappush(self._queue, (behind, self._order, task, waiting))
                self._order += 1
        self._dispatch()
        pending = set(futures)
        try:
            while pending:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for future in sorted(done, key=lambda f: futures[f]):
                    yield futures[future], future.result()
        finally:
            for future in pending:
                future.cancel()  # still queued: `_dispatch` drops it; running: it finishes

    def idle(self) -> int:
        with self._lock:
            return max(0, self._jobs - self._busy - len(self._queue))

    def _dispatch(self, *, plain_only: bool = False) -> None:
        """Send queued tasks to the pool while a worker is free, those not `behind` first
        (`plain_only`: those alone)."""
        with self._lock:
            while self._pool is not None and self._queue and self._busy < self._jobs:
                if plain_only and self._queue[0][0]:
                    break
                behind, _, task, waiting = heapq.heappop(self._queue)
                if not waiting.set_running_or_notify_cancel():
                    continue
                self._busy += 1
                try:
                    running = self._pool.submit(_call, task)
                except Exception as error:  # a broken pool: the caller is told, not left waiting
                    self._busy -= 1
                    waiting.set_exception(error)
                    continue
                running.add_done_callback(functools.partial(self._finished, waiting, behind))

    def _finished(self, waiting: Future[Any], behind: bool, running: Future[Any]) -> None:
        with self._lock:
            self._busy -= 1
        if running.cancelled():
            waiting.set_exception(RuntimeError('the worker pool was shut down'))
        elif (error := running.exception()) is not None:
            waiting.set_exception(error)
        else:
            waiting.set_result(running.result())
        if behind:
            self._dispatch()
            return
        # The caller just answered is often a search about to ask for its next run: the worker
        # waits GRACE for that before a task behind takes it for a whole run.
        self._dispatch(plain_only=True)
        with self._lock:
            later = bool(self._queue) and self._busy < self._jobs
        if later:
            timer = threading.Timer(GRACE, self._dispatch)
            timer.daemon = True
            timer.start()

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
            queued, self._queue = self._queue, []
        for _, _, _, waiting in queued:
            # A cancel alone wakes no `wait`: the notification is what tells the caller.
            waiting.cancel()
            waiting.set_running_or_notify_cancel()
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)


def executor_for(*, jobs: int, ray: str | None = None) -> Executor:
    """`OnRay` when `ray` is given (an address; '' for $RAY_ADDRESS; `jobs` is then the
    cluster's), else `InProcess` for one job, `LocalProcesses` for more; `ValueError` below 1,
    `on_ray.RayUnavailable` when there is no cluster there."""
    if ray is not None:
        return on_ray.OnRay(address=on_ray.address_from(given=ray))
    if jobs < 1:
        raise ValueError(f'jobs must be at least 1, got {jobs}')
    return InProcess() if jobs == 1 else LocalProcesses(jobs=jobs)
