"""bench/sweep.py's executor comparison (c): every timed pass simulates all its runs (none
answered from a sweep's memory of an earlier pass), and both executors' passes give the same
summaries."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TypeVar

from llmscaler.sim.sweep.executors import InProcess
from llmscaler.sim.sweep.tasks import Task
from tests.support.bench_scripts import load

sweep = load('sweep')

R = TypeVar('R')


class Counting(InProcess):
    """Runs here and counts the tasks it is given to run."""

    def __init__(self) -> None:
        self.started = 0

    def start(self, *, tasks: Sequence[Task[R]], behind: bool = False) -> Iterator[tuple[int, R]]:
        self.started += len(tasks)
        return super().start(tasks=tasks, behind=behind)


def test_each_timed_pass_simulates_every_run_on_each_executor() -> None:
    executors = [Counting(), Counting()]
    runs = len(sweep.small_runs(duration=60.0))
    [(_, first, peaks), (_, second, _)] = sweep.passes(executors, duration=60.0)
    warm_up, residents = 1, 4  # one job each
    for executor in executors:
        assert executor.started == warm_up + sweep.REPEATS * runs + residents
    assert len(first) == runs
    assert repr(first) == repr(second)
    # One peak a worker process: here, this one.
    assert len(peaks) == 1
    assert peaks[0] > 0
