"""The report's judgements: the cost–attainment front and the cheapest peer meeting the goal."""

from __future__ import annotations

from typing import cast

from llmscaler.sim.sweep.tasks import Finished
from llmscaler.sim.tune.predictive import PredictiveSettings
from llmscaler.sim.tune.problem import Row
from llmscaler.sim.tune.report import cheapest_peer, on_front
from llmscaler.sim.tune.search import Measure, Trial
from llmscaler.sim.tune.space import Candidate


def _trial(name: str, cost: float, attainment: float) -> Trial[Candidate[PredictiveSettings]]:
    candidate = Candidate(settings=PredictiveSettings(), offered=(name,))
    return Trial(candidate=candidate, name=name, runs=(Measure(cost=cost, attainment=attainment),))


def test_the_front_keeps_what_nothing_dominates() -> None:
    trials = [
        _trial('cheap', 1.0, 0.90),
        _trial('mid', 2.0, 0.99),
        _trial('worse-mid', 2.0, 0.98),  # as dear as mid, attains less
        _trial('dear', 3.0, 0.999),
        _trial('waste', 4.0, 0.999),  # dearer than dear for the same
    ]
    assert on_front(trials) == {'cheap', 'mid', 'dear'}


def _row(name: str, role: str, cost: float, attainment: float) -> Row:
    return Row(
        name=name, role=role, cost=cost, attainment=attainment, finished=cast(Finished, None)
    )


def test_the_cheapest_peer_meeting_the_goal() -> None:
    rows = [
        _row('chosen', 'chosen', 0.5, 0.999),  # not a peer
        _row('b', 'peer', 2.0, 0.995),
        _row('a', 'peer', 2.0, 0.995),
        _row('cheap-miss', 'peer', 1.0, 0.98),
    ]
    found = cheapest_peer(rows=rows, goal=0.99)
    assert found is not None
    assert found.name == 'a'
    assert cheapest_peer(rows=rows, goal=0.999) is None


def test_a_bound_is_no_peer() -> None:
    rows = [_row('clairvoyant', 'bound', 0.1, 1.0), _row('a', 'peer', 2.0, 0.995)]
    found = cheapest_peer(rows=rows, goal=0.99)
    assert found is not None
    assert found.name == 'a'
