"""`bench/attainment.py`: the table of `predictive` at three attainment targets."""

from __future__ import annotations

from tests.support.bench_scripts import load, summary

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
