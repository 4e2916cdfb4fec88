"""A whole tuning on a tiny scenario, real simulations: the budget, the choice, the cut, the
held-back comparison, the files, and the same result with one worker or two."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from llmscaler.config.file import load_config_file
from llmscaler.sim.tune.run import write
from tests.support.tune_fixtures import Counted, tiny_tune

GOAL = 0.99


@pytest.fixture(scope='module')
def counted() -> Counted:
    return tiny_tune(jobs=1, budget=6)


def test_the_budget_holds_and_every_run_is_counted(counted: Counted) -> None:
    tuned = counted.tuned
    assert tuned.outcome.runs <= tuned.options.budget
    assert sum(len(t.runs) for t in tuned.outcome.trials) == tuned.outcome.runs
    # everything the sweep ran is the search's, the calibration's or the comparison's
    assert counted.executed == tuned.simulations


def test_the_choice_meets_the_goal_and_is_the_cheapest_that_does(counted: Counted) -> None:
    outcome = counted.tuned.outcome
    finalists = [t for t in outcome.trials if len(t.runs) == outcome.draws]
    meeting = [t for t in finalists if t.meets(GOAL)]
    assert meeting, 'the tiny scenario has configurations that meet 99 %'
    assert outcome.best.meets(GOAL)
    assert all(m.attainment >= GOAL for m in outcome.best.runs)
    assert outcome.best.cost == min(t.cost for t in meeting)


def test_the_held_back_part_is_disjoint_from_the_search_part(counted: Counted) -> None:
    problem = counted.tuned.problem
    assert len(problem.draws) == 2  # a synthetic workload: each seed is another draw
    for parts in problem.draws:
        assert float(parts.search.arrivals.max()) < problem.cut
        assert float(parts.held_back.arrivals.min()) >= 0.0
    rows = counted.tuned.held_back
    assert [r.role for r in rows] == ['chosen', 'defaults', 'peer', 'peer']
    assert [r.name for r in rows[2:]] == ['default', 'keda-queue']
    # the chosen configuration on the held-back part, as configured for the search
    assert rows[0].finished.summary.requests == len(problem.draws[0].held_back)


def test_one_worker_or_two_same_result(counted: Counted) -> None:
    two = tiny_tune(jobs=2, budget=6).tuned
    one = counted.tuned
    assert two.outcome.trials == one.outcome.trials
    assert two.chosen == one.chosen
    assert [(r.name, r.cost, r.attainment) for r in two.held_back] == [
        (r.name, r.cost, r.attainment) for r in one.held_back
    ]


def test_the_files_apply(counted: Counted, tmp_path: Path) -> None:
    written = write(tuned=counted.tuned, out=tmp_path)
    assert sorted(p.name for p in written) == [
        'configmap.yaml',
        'front.json',
        'report.md',
        'variantautoscalings.yaml',
    ]
    problem = counted.tuned.problem
    config, errors = load_config_file(path=str(tmp_path / 'configmap.yaml'))
    assert errors == ()
    found = config.model(model_id=problem.model.model_id, namespace=problem.namespace)
    assert found.predictive == counted.tuned.settings.predictive
    # every VariantAutoscaling has the bounds the chosen configuration ran with
    ran = problem.variants(
        candidate=counted.tuned.chosen, trace=problem.draws[0].search, capacities=None
    )
    objects = list(yaml.safe_load_all((tmp_path / 'variantautoscalings.yaml').read_text()))
    written_bounds = {
        o['metadata']['name']: (o['spec']['minReplicas'], o['spec']['maxReplicas']) for o in objects
    }
    assert written_bounds == {v.name: (v.min_replicas, v.max_replicas) for v in ran}
    front = json.loads((tmp_path / 'front.json').read_text())
    assert front['chosen'] == counted.tuned.chosen.name
    assert len(front['tried']) == len(counted.tuned.outcome.trials)
    report = (tmp_path / 'report.md').read_text()
    for heading in (
        '## Chosen configuration',
        '## On the held-back part',
        '## Every configuration',
    ):
        assert heading in report


def test_a_warm_start_calibrates_apart_and_starts_each_run_warm() -> None:
    counted = tiny_tune(budget=3, seeds=1, warm_start=True)
    tuned = counted.tuned
    assert tuned.problem.calibration_runs > 0
    assert tuned.outcome.runs <= 3
    assert counted.executed == tuned.simulations
    capacities = tuned.problem.capacities
    assert capacities is not None
    for spec in tuned.problem.variants(
        candidate=tuned.chosen, trace=tuned.problem.draws[0].search, capacities=capacities
    ):
        assert spec.min_replicas <= spec.initial_replicas <= spec.max_replicas
    assert (
        sum(
            v.initial_replicas
            for v in tuned.problem.variants(
                candidate=tuned.chosen, trace=tuned.problem.draws[0].search, capacities=capacities
            )
        )
        >= 1
    )
