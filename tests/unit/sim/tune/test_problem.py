"""A candidate's replica bounds reach the simulation: the floor and the cap hold in the timeline
of a run, where the scenario's own bounds let the policy go below and above them."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from llmscaler.sim.sweep.sweep import Sweep
from llmscaler.sim.tune.predictive import PredictiveSpace
from llmscaler.sim.tune.problem import Problem
from llmscaler.sim.tune.space import Candidate, defaults
from tests.support.tune_fixtures import tiny_scenario


def _replicas(
    problem: Problem, sweep: Sweep, candidate: Candidate[Any]
) -> dict[str, tuple[int, int]]:
    """Each variant's fewest and most replicas over the run of `candidate` on the search part."""
    spec = problem.run_spec(
        candidate=candidate, name=candidate.name, trace=problem.draws[0].search, capacities=None
    )
    (finished,) = sweep.run(tasks=[replace(spec, keep=True)])
    assert finished.result is not None
    return {v: (min(n), max(n)) for v, n in finished.result.timeline.replicas.items()}


@pytest.fixture(scope='module')
def runs() -> dict[str, dict[str, tuple[int, int]]]:
    # 20 req/s: more than one H100 replica at its peak, and no L40S for long stretches
    with Sweep(jobs=1, progress=False) as sweep:
        problem = Problem(
            scenario=tiny_scenario(rate=20.0),
            seeds=1,
            holdout=0.3,
            sweep=sweep,
            policy=PredictiveSpace(),
        )
        free = defaults(policy=problem.policy, variants=problem.variant_names)
        return {
            'free': _replicas(problem, sweep, free),
            'capped': _replicas(problem, sweep, replace(free, cap=0.25)),
            'floored': _replicas(problem, sweep, replace(free, floor=1)),
        }


def test_a_cap_of_one_holds_every_variant_at_one(
    runs: dict[str, dict[str, tuple[int, int]]],
) -> None:
    assert runs['free']['h100'][1] > 1  # the scenario's maximum of 4 lets it grow
    assert all(most <= 1 for _, most in runs['capped'].values())


def test_a_floor_keeps_the_cheapest_variant_running(
    runs: dict[str, dict[str, tuple[int, int]]],
) -> None:
    assert runs['free']['l40s'][0] == 0  # the policy lets the L40S go
    assert runs['floored']['l40s'][0] >= 1
