"""`bench/goals.py`: each term of G1–G3 decided on runs made up to stand on either side of it."""

from __future__ import annotations

import dataclasses

import pytest

from llmscaler.sim.report.summary import PolicySummary
from tests.support.bench_scripts import load, summary

goals = load('goals')


def run(policy: str, *, slo: float, cost: float, events: int = 2) -> PolicySummary:
    return dataclasses.replace(summary(slo=slo, cost=cost, policy=policy), scale_events=events)


def bound(*, cost: float = 10.0, events: int = 4, slo: float = 0.99) -> PolicySummary:
    return run('clairvoyant', slo=slo, cost=cost, events=events)


def test_a_case_meeting_every_term_is_met() -> None:
    rows = [run('predictive', slo=0.995, cost=11.0), bound(), run('hpa-kv', slo=0.9, cost=5.0)]
    verdict = goals.judge(case='ramp', seed=1, rows=rows)
    assert verdict is not None
    assert (verdict.g1, verdict.g2, verdict.g3, verdict.met) == (True, True, True, True)
    assert verdict.cost == pytest.approx(1.1)
    assert verdict.events == pytest.approx(0.5)


def test_g1_below_99_percent_is_missed() -> None:
    rows = [run('predictive', slo=0.9899, cost=11.0), bound()]
    verdict = goals.judge(case='ramp', seed=1, rows=rows)
    assert verdict is not None
    assert not verdict.g1
    assert not verdict.met


@pytest.mark.parametrize(('mine', 'met'), [(0.977, True), (0.975, False)])
def test_g1_where_no_run_reaches_99_percent_is_within_a_fifth_of_a_point_of_the_best(
    mine: float, met: bool
) -> None:
    rows = [
        run('predictive', slo=mine, cost=11.0),
        bound(slo=0.979),
        run('static-best', slo=0.978, cost=6.0),
    ]
    verdict = goals.judge(case='long-prompts', seed=2, rows=rows)
    assert verdict is not None
    assert verdict.g1 is met
    assert '97.90 %' in verdict.g1_why


@pytest.mark.parametrize(('rival_cost', 'met'), [(12.0, True), (8.0, False)])
def test_g1_on_a_flash_crowd_counts_only_the_policies_that_cost_no_more(
    rival_cost: float, met: bool
) -> None:
    rows = [
        run('predictive', slo=0.90, cost=10.0),
        bound(cost=4.0),
        run('keda-queue', slo=0.93, cost=rival_cost),
        run('static-best', slo=0.999, cost=5.0),  # hindsight: not a rival
    ]
    verdict = goals.judge(case=goals.FLASH_CROWDS[0], seed=1, rows=rows)
    assert verdict is not None
    assert verdict.g1 is met
    assert verdict.g3  # the flash crowd is spared the cost term: 2.5× the bound
    assert verdict.cost == pytest.approx(2.5)


@pytest.mark.parametrize(
    ('slo', 'cost', 'met'),
    [
        (0.9889, 9.4, True),  # short of 99 % less 0.1 pp
        (0.989, 9.4, False),  # at it
        (0.99, 9.6, True),  # not 5 % cheaper
        (0.99, 9.4, False),
        (0.995, 9.4, False),
    ],
)
def test_g2_a_rival_as_good_for_five_percent_less_is_cheaper(
    slo: float, cost: float, met: bool
) -> None:
    rows = [
        run('predictive', slo=0.999, cost=10.0),
        bound(),
        run('slo-queueing', slo=slo, cost=cost),
    ]
    verdict = goals.judge(case='ramp', seed=1, rows=rows)
    assert verdict is not None
    assert verdict.g2 is met
    assert ('`slo-queueing`' in verdict.g2_why) is not met


@pytest.mark.parametrize(
    ('static_slo', 'static_cost', 'met'), [(0.99, 9.0, True), (0.99, 8.0, False), (0.98, 5.0, True)]
)
def test_g2_at_most_110_percent_of_a_fixed_fleet_that_keeps_99_percent(
    static_slo: float, static_cost: float, met: bool
) -> None:
    rows = [
        run('predictive', slo=0.995, cost=9.5),
        bound(cost=8.0),
        run('static-best', slo=static_slo, cost=static_cost),
    ]
    verdict = goals.judge(case='on-off', seed=3, rows=rows)
    assert verdict is not None
    assert verdict.g2 is met


@pytest.mark.parametrize(
    ('cost', 'events', 'bound_events', 'met'),
    [(15.0, 6, 4, True), (15.1, 6, 4, False), (12.0, 7, 4, False), (12.0, 1, 0, True)],
)
def test_g3_cost_and_events_against_the_bound(
    cost: float, events: int, bound_events: int, met: bool
) -> None:
    rows = [run('predictive', slo=0.999, cost=cost, events=events), bound(events=bound_events)]
    verdict = goals.judge(case='ramp', seed=1, rows=rows)
    assert verdict is not None
    assert verdict.g3 is met


def test_runs_without_the_bound_or_predictive_are_left_out() -> None:
    runs = {
        ('a', 1): [run('predictive', slo=1.0, cost=1.0)],
        ('b', 1): [bound()],
        ('c', 1): [run('predictive', slo=1.0, cost=1.0), bound(cost=0.0)],
        ('d', 1): [run('predictive', slo=1.0, cost=1.0), bound()],
    }
    assert [v.case for v in goals.verdicts(runs)] == ['d']


def test_the_median_per_seed_leaves_the_flash_crowd_out() -> None:
    runs = {
        ('x', 1): [run('predictive', slo=1.0, cost=11.0), bound()],
        ('y', 1): [run('predictive', slo=1.0, cost=12.8), bound()],
        (goals.FLASH_CROWDS[0], 1): [run('predictive', slo=1.0, cost=90.0), bound()],
        ('x', 2): [run('predictive', slo=0.98, cost=14.0), bound()],
    }
    assert goals.medians(goals.verdicts(runs)) == pytest.approx({1: 1.19, 2: 1.4})
    lines = goals.table(goals.verdicts(runs))
    assert lines[-1].startswith('Median cost × the bound')
    assert 'seed 1 1.19× (met), seed 2 1.40× (not met)' in lines[-1]
    assert 'Every term met on 3 of 4 rows' in lines[-1]


@pytest.mark.parametrize(
    ('value', 'shown'),
    [
        (1.13, '1.13×'),
        (1.0949, '1.09×'),
        (1.0997, '1.10×'),  # at most the goal, and shown at it
        (1.1, '1.10×'),
        (1.1004, '1.1004×'),  # over the goal: '1.10×' would hide it
        (1.105, '1.105×'),
    ],
)
def test_a_ratio_next_to_a_goal_shows_which_side_it_stands(value: float, shown: str) -> None:
    assert goals.shown_ratio(value, goal=1.10) == shown
    assert (float(shown.rstrip('×')) > 1.10) == (value > 1.10)
