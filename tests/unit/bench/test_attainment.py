"""`bench/attainment.py`: the table of `predictive` at three attainment targets, and its cases
run through the sweep runner (the same table on one worker as on two, and again from the run
cache without simulating)."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmscaler.sim.sweep import cache as run_cache
from tests.support.bench_scripts import load, same_with_any_jobs, summary

attainment = load('attainment')


def test_the_default_target_is_the_plain_policy() -> None:
    assert [attainment.name(t) for t in attainment.TARGETS] == [
        'predictive:0.95',
        'predictive',
        'predictive:0.999',
    ]


def test_a_missed_target_and_a_cost_that_falls_are_shown() -> None:
    rows = [
        summary(policy='predictive:0.95', slo=0.97, cost=5.0),
        summary(policy='predictive', slo=0.985, cost=6.0),
        summary(policy='predictive:0.999', slo=0.9995, cost=5.5),
    ]
    (line,) = attainment.table({'c': rows}, names=['c'])[2:]
    assert line == (
        '| `c` | 97.00 % · 5.00 $ | 98.50 % (missed) · 6.00 $ | 99.95 % · 5.50 $ | no |'
    )


def test_a_case_s_task_names_every_target_so_the_cache_tells_them_apart() -> None:
    task = attainment.task(case='conv-low')
    assert task.names == tuple(attainment.name(t) for t in attainment.TARGETS)
    alone = attainment.policy.Case(name='conv-low', names=('predictive',))
    assert run_cache.key(identity=task.identity()) != run_cache.key(identity=alone.identity())
    assert run_cache.key(identity=task.identity()) == run_cache.key(
        identity=attainment.task(case='conv-low').identity()
    )


def test_one_job_and_two_print_the_same_table_and_a_rerun_comes_from_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(run_cache.ENV, str(tmp_path))

    def simulates(_: object) -> None:
        raise AssertionError('a cached case was simulated again')

    # conv-low: the lightest case (a few seconds a run).
    out = same_with_any_jobs(
        main=attainment.main,
        argv=['--case', 'conv-low'],
        capsys=capsys,
        forbid_simulating=lambda: monkeypatch.setattr(
            attainment.policy.Case, 'summaries', simulates
        ),
    )
    assert '| `conv-low` | ' in out
