"""`sim.sweep.on_ray`: a sweep on a real two-node Ray cluster gives what it gives in this
process, sends the workload through the object store once, and fails in one line without a
cluster; `llmscaler simulate --ray` and the benchmarks' Ray sweeps run on it.

The cluster (tests/support/ray_cluster.py: a head and a worker node, one CPU each, separate
`ray start` processes) starts once for the module."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from llmscaler.cli import main
from llmscaler.sim.sweep import on_ray
from llmscaler.sim.sweep.executors import InProcess, executor_for
from llmscaler.sim.sweep.sweep import Sweep
from tests.support.bench_scripts import BENCH, load
from tests.support.ray_cluster import Cluster, cluster, free_port, ray_program
from tests.support.sweep_fixtures import Fails, Reads, Square, mixed, small_sweep

POLICIES = ('default', 'hpa-kv', 'keda-queue')


@pytest.fixture(scope='module')
def ray_cluster() -> Iterator[Cluster]:
    ray_program()
    with cluster() as running:
        yield running


@pytest.fixture(scope='module')
def executor(ray_cluster: Cluster) -> Iterator[on_ray.OnRay]:
    made = on_ray.OnRay(address=ray_cluster.address)
    yield made
    made.close()


def counting(monkeypatch: pytest.MonkeyPatch, target: Any, name: str) -> list[object]:
    """Patch `target.name` to record each call's first argument and call through."""
    calls: list[object] = []
    real: Callable[..., Any] = getattr(target, name)

    def spy(value: object, *args: object, **kwargs: object) -> Any:
        calls.append(value)
        return real(value, *args, **kwargs)

    monkeypatch.setattr(target, name, spy)
    return calls


def test_the_cluster_s_cpus_are_the_jobs(executor: on_ray.OnRay) -> None:
    assert executor.jobs == 2


def test_a_sweep_on_ray_gives_the_summaries_it_gives_in_this_process(
    executor: on_ray.OnRay, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ray

    puts = counting(monkeypatch, ray, 'put')
    # Each pass its own tasks: a run in this process leaves its policy object changed.
    here = Sweep(executor=InProcess()).run(tasks=small_sweep(policies=POLICIES))
    tasks = small_sweep(policies=POLICIES)
    before = executor.shared
    there = Sweep(executor=executor).run(tasks=tasks)
    assert [f.summary for f in there] == [f.summary for f in here]
    assert [f.summary.policy for f in there] == list(POLICIES)
    assert len({f.summary.cost_usd for f in there}) > 1  # not trivially equal
    # The workload went to the object store once, for every task of the sweep.
    assert puts == [tasks[0].traces]
    assert executor.shared == before + 1
    # A second round of the same sweep (a search's next) finds it there (the tasks here are
    # unchanged: they ran on copies).
    again = Sweep(executor=executor).run(tasks=tasks[:1])
    assert again[0].summary == here[0].summary
    assert len(puts) == 1


def test_what_is_sent_per_task_leaves_the_workload_out() -> None:
    task = small_sweep(policies=('default',))[0]
    shared, rest = task.split()
    assert shared is task.traces
    assert rest.rejoined(shared=shared) == task
    assert len(pickle.dumps(rest)) * 10 < len(pickle.dumps(shared))


def test_results_come_in_input_order_on_ray(executor: on_ray.OnRay) -> None:
    squares = Sweep(executor=executor).run(tasks=[Square(n) for n in range(9, -1, -1)])
    assert squares == [n * n for n in range(9, -1, -1)]


def test_a_task_s_exception_is_raised_in_the_caller(executor: on_ray.OnRay) -> None:
    with pytest.raises(RuntimeError, match='this task fails'):
        Sweep(executor=executor).run(tasks=mixed(Square(2), Fails(), Square(3)))


def test_a_benchmark_s_ray_sweep_gives_its_workers_the_scripts_folder(
    ray_cluster: Cluster, executor: on_ray.OnRay
) -> None:
    policy = load('policy')
    task = Reads(variable='PYTHONPATH', imports='doc_blocks')
    with policy.sweep_for(jobs=1, cache=False, label='t', ray=ray_cluster.address) as sweep:
        assert sweep.jobs == 2
        [(path, imported)] = sweep.run(tasks=[task])
    assert path.split(':')[0] == str(BENCH)
    assert imported == 'doc_blocks'


def test_simulate_on_the_cluster_sends_its_workload_once_and_reports(
    ray_cluster: Cluster,
    executor: on_ray.OnRay,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import ray

    puts = counting(monkeypatch, ray, 'put')
    argv = ['--policy', 'default', '--policy', 'hpa-kv', '--duration', '120', '--no-progress']
    argv += ['--requests-csv', 'none']
    there = main(['simulate', '--ray', ray_cluster.address, *argv, '--out', str(tmp_path / 'r')])
    assert there == 0
    assert len(puts) == 1  # the workload, for both policies
    assert main(['simulate', '--jobs', '1', *argv, '--out', str(tmp_path / 'h')]) == 0
    capsys.readouterr()
    remote = json.loads((tmp_path / 'r' / 'summary.json').read_text())
    here = json.loads((tmp_path / 'h' / 'summary.json').read_text())
    assert remote['policies'] == here['policies']


def test_an_address_nobody_answers_is_one_clear_line_within_the_deadline() -> None:
    ray_program()  # Ray installed: the address is what is missing
    address = f'127.0.0.1:{free_port()}'
    with pytest.raises(on_ray.RayUnavailable) as caught:
        on_ray.OnRay(address=address, deadline=1.0)
    message = str(caught.value)
    assert message.startswith(f'--ray {address}: no Ray cluster answers there within 1 s')
    assert '\n' not in message


def test_executor_for_needs_an_address_or_ray_address(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv('RAY_ADDRESS', raising=False)
    with pytest.raises(on_ray.RayUnavailable, match='give an address'):
        executor_for(jobs=1, ray='')


def test_without_ray_installed_the_error_says_which_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, 'ray', None)  # what `import ray` finds absent
    with pytest.raises(on_ray.RayUnavailable, match=r"pip install 'llmscaler\[sim,ray\]'"):
        on_ray.OnRay(address='127.0.0.1:1')


def test_the_runner_and_the_command_line_import_no_ray() -> None:
    """Without the `ray` extra llmscaler works: nothing imports ray before `--ray` is used."""
    probe = (
        'import sys, llmscaler.cli, llmscaler.sim.sweep.sweep, llmscaler.sim.sweep.on_ray; '
        "print('ray' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, '-c', probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == 'False'
