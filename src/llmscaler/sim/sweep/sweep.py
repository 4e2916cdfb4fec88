"""The runner: a list of tasks in, their results out in input order, on the executor chosen.

Why: every sweep of the project (the bound's searches, `static-best`, the policies of
`llmscaler simulate`, bench/policy.py, bench/ablations.py, bench/attainment.py, bench/burst.py)
goes through this one class, so each gets the same parallelism (`--jobs`), the same progress
bar and the same resume. `Sweep.run`
takes the tasks of one round (a search asks for the next round once it has read this one's
results), looks each up among the results the sweep already holds and in the run cache
(`cache`), runs the others on the executor (`executors`), stores each result as it finishes,
and returns them all in the tasks' order, so what a caller does with them does not depend on
which finished first. A sweep runs a task once in its life: the same inputs (the same
`identity`) asked for again, in the same call or a later one, get the result it holds in
memory (the bound's plan on the capacities its search chose, run again to compare it with the
best fixed fleet, is the search's own run of those capacities). With one job a round runs
in this process. The executor's workers live as long as the sweep (`close`, or a `with` block).
Several threads may call `run` at once (two independent searches, each waiting for its rounds):
their tasks share the workers.

Order: results always come back in the tasks' order; `weights` (an estimate of each task's cost,
any unit) only changes the order in which they start, heaviest first (ties: input order), so
that a long task does not start last and run alone while the other workers idle (longest
processing time first). `behind` runs a call's tasks on the workers the other calls leave idle:
tasks no search waits for (the plain policies of `llmscaler simulate`) fill the gaps between a
search's rounds instead of delaying them (`executors`).

`executed` and `reused` count the tasks run and the tasks answered without a run (held in
memory or found in the cache) over the sweep's life (what the tests and the benchmarks report).
What the sweep holds in memory is every result it returned: summaries, and the whole runs a
caller asked to keep, which that caller holds anyway.

What fails: a task's exception propagates (the results that finished before it are in the
cache); `jobs` < 1 raises `ValueError`. Wall-clock time is read nowhere here: a result is the
same whenever and wherever it was computed.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from types import TracebackType
from typing import TypeVar, cast

from llmscaler.sim.sweep import cache as run_cache
from llmscaler.sim.sweep.bar import Bar
from llmscaler.sim.sweep.executors import Executor, executor_for
from llmscaler.sim.sweep.tasks import Task

R = TypeVar('R')


class Sweep:
    """Runs rounds of tasks (module docstring); `cache=None` runs everything."""

    def __init__(
        self,
        *,
        jobs: int = 1,
        cache: run_cache.RunCache | None = None,
        progress: bool | None = None,
        label: str = 'runs',
        executor: Executor | None = None,
    ) -> None:
        self.executor = executor if executor is not None else executor_for(jobs=jobs)
        self.cache = cache
        self.bar = Bar(label=label, show=progress)
        self.executed = 0
        self.reused = 0
        self._memo: dict[str, object] = {}
        self._lock = threading.Lock()

    @property
    def jobs(self) -> int:
        return self.executor.jobs

    def idle(self) -> int:
        """Workers free now with nothing waiting for them (`executors.Executor.idle`)."""
        return self.executor.idle()

    def run(
        self,
        *,
        tasks: Sequence[Task[R]],
        weights: Sequence[float] | None = None,
        behind: bool = False,
    ) -> list[R]:
        """The results of `tasks`, in their order (cached ones reused, the others run, the
        heaviest of `weights` first; `behind`: on the workers other calls leave idle)."""
        if weights is not None and len(weights) != len(tasks):
            raise ValueError(f'{len(weights)} weights for {len(tasks)} tasks')
        results: list[R | None] = [None] * len(tasks)
        done = [False] * len(tasks)
        keys = [run_cache.key(identity=task.identity()) for task in tasks]
        with self._lock:
            self.bar.add(count=len(tasks))
            for index, key in enumerate(keys):
                if key in self._memo:
                    results[index], done[index] = cast(R, self._memo[key]), True
                    self.reused += 1
                    self.bar.advance()
        if self.cache is not None:
            for index, key in enumerate(keys):
                if done[index]:
                    continue
                found, value = self.cache.get(key=key)
                if found:
                    results[index], done[index] = cast(R, value), True
                    with self._lock:
                        self._memo[key] = value
                        self.reused += 1
                        self.bar.advance()
        # A task given twice runs once: the first of its copies runs, the others take its result.
        first: dict[str, int] = {}
        copies: list[tuple[int, int]] = []
        for index, key in enumerate(keys):
            if done[index]:
                continue
            if key in first:
                copies.append((index, first[key]))
            else:
                first[key] = index
        todo = sorted(first.values())
        if weights is not None:
            todo.sort(key=lambda index: (-weights[index], index))
        for position, value in self.executor.start(
            tasks=[tasks[index] for index in todo], behind=behind
        ):
            index = todo[position]
            results[index] = value
            if self.cache is not None:
                self.cache.put(key=keys[index], value=value)
            with self._lock:
                self._memo[keys[index]] = value
                self.executed += 1
                self.bar.advance()
        for index, original in copies:
            results[index] = results[original]
            with self._lock:
                self.reused += 1
                self.bar.advance()
        return cast(list[R], results)

    def close(self) -> None:
        """Stop the workers and erase the bar."""
        self.bar.close()
        self.executor.close()

    def __enter__(self) -> Sweep:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()


def in_process() -> Sweep:
    """A sweep of one job here, without cache or bar: what a caller that was given none runs."""
    return Sweep(jobs=1, cache=None, progress=False)
