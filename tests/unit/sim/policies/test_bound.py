"""The clairvoyant bound is a bound: it meets 99 % and no policy is cheaper and at least as good.

Run on the smallest benchmark case that needs the search: ten minutes of on/off code-like load
(`sim.scenario.cases`), where a plan sized on one-replica capacities misses 99 % (the burst's long
prompts meet a fleet sized for the mean), with every policy the simulator knows by name without a
file.
"""

from __future__ import annotations

import pytest
from rich.console import Console

from llmscaler.sim import simulate
from llmscaler.sim.policies import bound
from llmscaler.sim.scenario import cases, loader
from llmscaler.sim.scenario.document import ScenarioError
from llmscaler.sim.scenario.setup import FIXED_POLICIES, SEARCHED_POLICIES, check_policy_name
from llmscaler.sim.scenario.workloads import build_workloads, model_slos

POLICIES = [*FIXED_POLICIES, 'kaito-realtime', *SEARCHED_POLICIES]


@pytest.fixture(scope='module')
def outcome() -> simulate.Outcome:
    document = cases.case(name='on-off', policies=POLICIES, duration=600.0)
    setup = loader.from_document(document=document, where='on-off')
    return simulate.run(
        setup=setup, out=None, console=Console(stderr=True, quiet=True), progress=False
    )


def test_clairvoyant_meets_the_target(outcome: simulate.Outcome) -> None:
    bound_row = next(s for s in outcome.summaries if s.policy == 'clairvoyant')
    assert bound_row.slo_attainment >= bound.TARGET


def test_no_policy_is_cheaper_and_at_least_as_good(outcome: simulate.Outcome) -> None:
    bound_row = next(s for s in outcome.summaries if s.policy == 'clairvoyant')
    beaten = [
        (s.policy, s.cost_usd, s.slo_attainment)
        for s in outcome.summaries
        if s.policy != 'clairvoyant'
        and s.cost_usd < bound_row.cost_usd
        and s.slo_attainment >= bound_row.slo_attainment
    ]
    assert beaten == [], f'the bound (${bound_row.cost_usd:.3f}) is beaten by {beaten}'


def test_static_best_is_the_cheapest_static_fleet_measured_that_meets_the_target(
    outcome: simulate.Outcome,
) -> None:
    static = next(s for s in outcome.summaries if s.policy == 'static-best')
    # A fixed fleet in hindsight meets 99 % here (the load is bounded), and the bound is
    # no dearer than it.
    assert static.slo_attainment >= bound.TARGET
    bound_row = next(s for s in outcome.summaries if s.policy == 'clairvoyant')
    assert bound_row.cost_usd <= static.cost_usd


def test_the_searched_capacities_keep_a_variant(outcome: simulate.Outcome) -> None:
    # The searched capacities are the one-replica ones derated (never raised) or 0.
    assert outcome.capacities is not None
    assert all(c >= 0 for c in outcome.capacities.values())
    assert any(c > 0 for c in outcome.capacities.values())


def test_static_best_is_a_policy_name() -> None:
    check_policy_name(name='static-best', variants=['h100'], where='policies')
    with pytest.raises(ScenarioError, match='static-best'):
        check_policy_name(name='static-worst', variants=['h100'], where='policies')


def test_static_best_refuses_a_count_space_too_large_to_search() -> None:
    document = cases.case(name='on-off', policies=['static-best'], duration=60.0)
    document['variants'] = [
        {'name': f'v{i}', 'preset': 'llama-3.1-8b-l40s', 'max_replicas': 40} for i in range(4)
    ]
    document['warm_start'] = False  # nothing to calibrate before the policies are built
    setup = loader.from_document(document=document, where='big')
    with pytest.raises(ScenarioError, match='combinations'):
        simulate.run(setup=setup, out=None, console=Console(stderr=True, quiet=True))


def test_variant_sets_try_each_variant_alone_with_one_model() -> None:
    setup = loader.from_document(
        document=cases.case(name='on-off', policies=['clairvoyant'], duration=60.0), where='x'
    )
    assert bound.variant_sets(variants=setup.variants) == [('h100', 'l40s'), ('h100',), ('l40s',)]


def test_a_fixed_fleet_cheaper_than_the_plan_is_kept_as_the_bound() -> None:
    # Ten minutes of multi-turn traffic at 2 req/s: one H100 with its prefix cache serves it,
    # and no plan sized on a replica's capacity comes cheaper than that fleet kept fixed.
    document = cases.case(name='multi-turn', policies=['clairvoyant'], duration=600.0)
    document['workload']['synthetic']['rate'] = 2.0
    document['warm_start'] = False
    document['initial'] = {'h100': 1, 'l40s': 0}
    setup = loader.from_document(document=document, where='multi-turn')
    workloads = build_workloads(scenario=setup)
    slos = model_slos(scenario=setup, workloads=workloads)
    setting = bound.Setting(
        traces=workloads.traces,
        variants=setup.variants,
        settings=setup.settings,
        slos=next(iter(slos.values())),
    )
    fleet = bound.best_static(setting=setting)
    assert fleet.measured is not None
    assert fleet.measured.attainment >= bound.TARGET
    # Capacities that make the plan buy far more than it needs: the fixed fleet wins.
    policy = bound.clairvoyant_bound(
        setting=setting, capacities={'h100': 0.05, 'l40s': 0.0}, cycle=30.0, fleet=fleet
    )
    assert policy.fixed == fleet.counts
    assert 'fixed fleet' in policy.notes()[0]
    # Capacities that make the plan the cheaper: the plan stays.
    cheap = bound.Fleet(counts={'h100': 8, 'l40s': 12}, measured=bound.Measured(1.0, 1e9))
    plan = bound.clairvoyant_bound(
        setting=setting, capacities={'h100': 50.0, 'l40s': 0.0}, cycle=30.0, fleet=cheap
    )
    assert plan.fixed is None
