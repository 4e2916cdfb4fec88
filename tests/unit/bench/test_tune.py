"""`bench/tune.py`: what it prints, from a tuning of a tiny scenario."""

from __future__ import annotations

from tests.support.bench_scripts import load
from tests.support.tune_fixtures import tiny_tune

bench = load('tune')


def test_it_prints_the_runs_the_choice_and_the_held_back_figures() -> None:
    tuned = tiny_tune(budget=3, seeds=1).tuned
    printed = '\n'.join(bench.lines(tuned=tuned, case='tiny', duration=600.0, jobs=1))
    assert f'search {tuned.outcome.runs} (budget 3)' in printed
    assert f'chosen: {tuned.chosen.name}' in printed
    chosen = tuned.held_back[0]
    assert f'chosen    ${chosen.cost:8,.2f}' in printed
    for row in tuned.held_back[2:]:
        assert row.name in printed
    assert 'cheapest peer meeting the goal: ' in printed
