"""`sim.sweep.executors`: local worker processes take the tasks of a call `behind` only when no
other task waits, and what a task raises or a closed pool cancels reaches the caller."""

from __future__ import annotations

import threading
import time
from concurrent.futures.process import BrokenProcessPool

import pytest

from llmscaler.sim.sweep.executors import LocalProcesses
from llmscaler.sim.sweep.tasks import Task
from tests.support.sweep_fixtures import Dies, Fails, Stamp


def collect(
    executor: LocalProcesses, tasks: list[Stamp], behind: bool, into: list[tuple[float, str]]
) -> threading.Thread:
    def run() -> None:
        into.extend(value for _, value in executor.start(tasks=tasks, behind=behind))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_tasks_behind_wait_for_the_tasks_of_other_calls() -> None:
    executor = LocalProcesses(jobs=1)
    started: list[tuple[float, str]] = []
    try:
        # The one worker is busy for a second while both calls queue: the plain call was
        # queued last and starts first, then the ones behind in their order.
        threads = [collect(executor, [Stamp(1.0, 'busy')], False, started)]
        time.sleep(0.2)
        threads.append(
            collect(executor, [Stamp(0.0, 'behind 1'), Stamp(0.0, 'behind 2')], True, started)
        )
        time.sleep(0.2)
        threads.append(collect(executor, [Stamp(0.0, 'plain')], False, started))
        for thread in threads:
            thread.join(timeout=60)
    finally:
        executor.close()
    assert [tag for _, tag in sorted(started)] == ['busy', 'plain', 'behind 1', 'behind 2']


def test_a_caller_given_its_result_asks_again_before_a_task_behind_takes_its_worker() -> None:
    executor = LocalProcesses(jobs=1)
    started: list[tuple[float, str]] = []

    def search() -> None:
        # A search: its next run is asked for as soon as its last is back.
        started.extend(value for _, value in executor.start(tasks=[Stamp(0.5, 'first')]))
        started.extend(value for _, value in executor.start(tasks=[Stamp(0.0, 'next')]))

    try:
        searching = threading.Thread(target=search, daemon=True)
        searching.start()
        time.sleep(0.2)
        behind = collect(executor, [Stamp(0.0, 'behind')], True, started)
        for thread in (searching, behind):
            thread.join(timeout=60)
    finally:
        executor.close()
    assert [tag for _, tag in sorted(started)] == ['first', 'next', 'behind']


def test_idle_counts_the_workers_that_no_task_runs_on_or_waits_for() -> None:
    executor = LocalProcesses(jobs=2)
    started: list[tuple[float, str]] = []
    try:
        assert executor.idle() == 2
        first = collect(executor, [Stamp(1.0, 'one')], False, started)
        time.sleep(0.3)
        assert executor.idle() == 1
        second = collect(executor, [Stamp(1.0, 'two'), Stamp(0.0, 'waits')], False, started)
        time.sleep(0.3)
        assert executor.idle() == 0  # both busy, one task queued
        for thread in (first, second):
            thread.join(timeout=60)
        assert executor.idle() == 2
    finally:
        executor.close()
    assert sorted(tag for _, tag in started) == ['one', 'two', 'waits']


def test_two_workers_run_tasks_behind_beside_a_plain_one() -> None:
    executor = LocalProcesses(jobs=2)
    started: list[tuple[float, str]] = []
    try:
        threads = [collect(executor, [Stamp(1.0, 'plain')], False, started)]
        time.sleep(0.2)
        threads.append(collect(executor, [Stamp(0.0, 'behind')], True, started))
        for thread in threads:
            thread.join(timeout=60)
    finally:
        executor.close()
    begun = {tag: at for at, tag in started}
    assert begun['behind'] < begun['plain'] + 1.0  # on the idle worker, not after the plain one


def test_a_task_s_exception_reaches_the_caller_and_the_next_call_runs() -> None:
    executor = LocalProcesses(jobs=2)
    try:
        with pytest.raises(RuntimeError, match='this task fails'):
            list(executor.start(tasks=[Fails()], behind=True))
        assert next(v for _, v in executor.start(tasks=[Stamp(0.0, 'after')]))[1] == 'after'
    finally:
        executor.close()


def test_closing_cancels_what_still_waits_for_a_worker() -> None:
    executor = LocalProcesses(jobs=1)
    got: list[tuple[float, str]] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            got.extend(v for _, v in executor.start(tasks=[Stamp(0.5, 'a'), Stamp(0.0, 'b')]))
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    time.sleep(0.2)
    executor.close()
    thread.join(timeout=60)
    assert not thread.is_alive()
    assert 'b' not in [tag for _, tag in got]  # never ran: the caller was told, not left waiting
    assert len(errors) == 1
    assert type(errors[0]).__name__ == 'CancelledError'


def test_a_worker_that_dies_fails_the_runs_of_other_calls_still_queued() -> None:
    executor = LocalProcesses(jobs=1)
    errors: dict[str, BaseException] = {}

    def run(name: str, tasks: list[Task[object]]) -> threading.Thread:
        def calls() -> None:
            try:
                list(executor.start(tasks=tasks))
            except BaseException as exc:  # what each caller is told is the point
                errors[name] = exc

        thread = threading.Thread(target=calls, daemon=True)
        thread.start()
        return thread

    try:
        threads = [run('dying', [Stamp(0.5, 'first'), Dies()])]
        time.sleep(0.2)
        threads.append(run('queued', [Stamp(0.0, 'queued')]))
        for thread in threads:
            thread.join(timeout=60)
    finally:
        executor.close()
    assert not any(thread.is_alive() for thread in threads)
    assert isinstance(errors['dying'], BrokenProcessPool)
    assert isinstance(errors['queued'], BrokenProcessPool)
