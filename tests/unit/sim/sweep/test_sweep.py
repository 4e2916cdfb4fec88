"""`sim.sweep.sweep`: results in input order, the same on one worker as on two, resumed from the
cache without simulating again."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TypeVar

import pytest

from llmscaler.sim import runner
from llmscaler.sim.sweep.cache import RunCache
from llmscaler.sim.sweep.sweep import Sweep
from llmscaler.sim.sweep.tasks import Task
from tests.support.sweep_fixtures import Fails, Square, Wide, mixed, small_sweep

R = TypeVar('R')


def test_one_worker_and_two_give_the_same_summaries_in_the_same_order() -> None:
    with Sweep(jobs=1) as one:
        alone = one.run(tasks=small_sweep())
    with Sweep(jobs=2) as two:
        shared = two.run(tasks=small_sweep())
    assert [f.summary for f in alone] == [f.summary for f in shared]
    assert [f.summary.policy for f in shared] == [
        'default',
        'predictive',
        'keda-queue',
        'hpa-kv',
        'kaito-realtime',
    ]
    # Not trivially equal: the policies differ on this load.
    assert len({f.summary.cost_usd for f in shared}) > 1
    assert one.executed == two.executed == 5


def test_a_kept_result_comes_back_whole_from_a_worker() -> None:
    tasks = [dataclasses.replace(t, keep=True) for t in small_sweep(policies=('default',))]
    tasks += [dataclasses.replace(t, keep=True) for t in small_sweep(policies=('hpa-kv',))]
    with Sweep(jobs=2) as sweep:
        finished = sweep.run(tasks=tasks)
    for outcome in finished:
        assert outcome.result is not None
        assert outcome.result.policy == outcome.summary.policy
        assert len(outcome.result.requests) > 0


def test_results_come_in_input_order_whatever_finishes_first() -> None:
    with Sweep(jobs=2) as sweep:
        assert sweep.run(tasks=[Square(n) for n in range(9, -1, -1)]) == [
            n * n for n in range(9, -1, -1)
        ]


def test_a_task_given_twice_runs_once_in_one_call_or_in_a_later_one() -> None:
    with Sweep(jobs=2) as sweep:
        assert sweep.run(tasks=[Square(2), Square(3), Square(2)]) == [4, 9, 4]
        assert (sweep.executed, sweep.reused) == (2, 1)
        assert sweep.run(tasks=[Square(3), Square(5)]) == [9, 25]
        assert (sweep.executed, sweep.reused) == (3, 2)
        # Other inputs are another task, even where the result would be the same.
        assert sweep.run(tasks=[Square(-3)]) == [9]
        assert (sweep.executed, sweep.reused) == (4, 2)


def test_a_second_sweep_on_the_same_inputs_simulates_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = RunCache(directory=tmp_path)
    with Sweep(jobs=2, cache=cache) as first:
        before = first.run(tasks=small_sweep())
    assert (first.executed, first.reused) == (5, 0)
    assert len(list(tmp_path.glob('*.pickle'))) == 5

    def no_simulation(**_: object) -> None:
        raise AssertionError('simulated again')

    monkeypatch.setattr(runner, 'run', no_simulation)
    with Sweep(jobs=1, cache=cache) as second:
        after = second.run(tasks=small_sweep())
    assert (second.executed, second.reused) == (0, 5)
    assert [f.summary for f in after] == [f.summary for f in before]


def test_an_interrupted_sweep_resumes_from_the_runs_it_finished(tmp_path: Path) -> None:
    cache = RunCache(directory=tmp_path)
    with Sweep(jobs=1, cache=cache) as sweep, pytest.raises(RuntimeError, match='fails'):
        sweep.run(tasks=mixed(Square(2), Square(3), Fails(), Square(4)))
    assert sweep.executed == 2  # one after another: 2 and 3 finished before the failure
    with Sweep(jobs=1, cache=cache) as again:
        assert again.run(tasks=[Square(2), Square(3), Square(4)]) == [4, 9, 16]
    assert (again.executed, again.reused) == (1, 2)


def test_a_changed_input_misses_the_cache(tmp_path: Path) -> None:
    cache = RunCache(directory=tmp_path)
    with Sweep(jobs=1, cache=cache) as first:
        first.run(tasks=small_sweep(policies=('default',)))
    with Sweep(jobs=1, cache=cache) as other_seed:
        other_seed.run(tasks=small_sweep(policies=('default',), seed=2))
    assert other_seed.executed == 1
    (task,) = small_sweep(policies=('default',))
    slower = dataclasses.replace(task, settings=dataclasses.replace(task.settings, cycle=60.0))
    with Sweep(jobs=1, cache=cache) as other_settings:
        other_settings.run(tasks=[slower, task])
    assert (other_settings.executed, other_settings.reused) == (1, 1)


def test_a_task_that_fails_in_a_worker_fails_the_sweep() -> None:
    with Sweep(jobs=2) as sweep, pytest.raises(RuntimeError, match='this task fails'):
        sweep.run(tasks=mixed(Square(1), Fails(), Square(3)))


def test_no_bar_is_drawn_unless_asked_when_stderr_is_not_a_terminal(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with Sweep(jobs=1) as quiet:
        quiet.run(tasks=[Square(1), Square(2)])
    assert not quiet.bar.shown
    assert capsys.readouterr().err == ''


def test_one_bar_counts_every_round_of_a_sweep_when_asked() -> None:
    with Sweep(jobs=1, progress=True) as sweep:
        sweep.run(tasks=[Square(1), Square(2)])
        sweep.run(tasks=[Square(3)])
        assert sweep.bar.counts() == (3, 3)


def test_jobs_below_one_are_refused() -> None:
    with pytest.raises(ValueError, match='at least 1'):
        Sweep(jobs=0)


def test_weights_start_the_heaviest_first_and_keep_the_order_of_results() -> None:
    started: list[int] = []

    class Recording(Wide):
        def start(
            self, *, tasks: Sequence[Task[R]], behind: bool = False
        ) -> Iterator[tuple[int, R]]:
            for index, task in enumerate(tasks):
                started.append(task.value)  # type: ignore[attr-defined]
                yield index, task()

    with Sweep(executor=Recording(jobs=2)) as sweep:
        found = sweep.run(tasks=[Square(1), Square(2), Square(3), Square(4)], weights=[1, 5, 1, 9])
    assert found == [1, 4, 9, 16]
    assert started == [4, 2, 1, 3]
    with pytest.raises(ValueError, match='2 weights for 1 tasks'):
        sweep.run(tasks=[Square(1)], weights=[1, 2])
