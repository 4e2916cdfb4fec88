"""The search space: the replica bounds, the grid's order and uniqueness, and every bound in the
default budget's pool, for each tunable policy."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from llmscaler.config.resolved import ModelConfig, PredictiveConfig, SaturationConfig
from llmscaler.sim.hardware.presets import preset
from llmscaler.sim.tune.predictive import PredictiveSettings, PredictiveSpace
from llmscaler.sim.tune.saturation import SaturationSpace
from llmscaler.sim.tune.search import plan, spread
from llmscaler.sim.tune.space import (
    CAPS,
    DEFAULTS,
    FLOORS,
    Candidate,
    PolicySpace,
    Space,
    bounded,
    defaults,
    grid,
    subsets,
)
from llmscaler.sim.tune.token import TokenSpace
from llmscaler.sim.tune.tuned import DEFAULT_BUDGET, DEFAULT_SEEDS
from llmscaler.sim.vocabulary import VariantSpec

# The L40S is the cheaper replica ($1.90 an hour against $3.90).
VARIANTS = (
    preset(name='llama-3.1-8b-h100', variant_name='h100', max_replicas=4),
    preset(name='llama-3.1-8b-l40s', variant_name='l40s', max_replicas=5),
)
PREDICTIVE_BASE = ModelConfig(predictive=PredictiveConfig(startup_seconds=90.0))
POLICIES: list[tuple[PolicySpace[Any], ModelConfig]] = [
    (PredictiveSpace(), PREDICTIVE_BASE),
    (SaturationSpace(), ModelConfig()),
    (TokenSpace(), ModelConfig(saturation=SaturationConfig(analyzer_name='saturation'))),
]


def _bounds(specs: tuple[VariantSpec, ...]) -> dict[str, tuple[int, int]]:
    return {v.name: (v.min_replicas, v.max_replicas) for v in specs}


def _candidate(**fields: Any) -> Candidate[PredictiveSettings]:
    return Candidate(settings=PredictiveSettings(), **fields)


def test_subsets_all_first() -> None:
    assert subsets(['l40s', 'h100']) == [('h100', 'l40s'), ('h100',), ('l40s',)]


@pytest.mark.parametrize(('policy', 'base'), POLICIES)
def test_defaults_resolve_to_the_base(policy: PolicySpace[Any], base: ModelConfig) -> None:
    found = defaults(policy=policy, variants=['b', 'a'])
    assert found.name == DEFAULTS
    assert found.offered == ('a', 'b')
    assert policy.resolve(settings=found.settings, base=base) == base


def test_grid_starts_with_the_defaults_and_resolves_uniquely() -> None:
    policy = PredictiveSpace(margins=(1.0, 0.5), delays=(120.0, 300.0), horizons=(1.0,))
    base = ModelConfig(predictive=PredictiveConfig())
    found = grid(policy=policy, space=Space(), variants=VARIANTS, goal=0.99, base=base)
    assert found[0].name == DEFAULTS
    keys = [
        (
            policy.resolve(settings=c.settings, base=base),
            c.offered,
            _bounds(bounded(candidate=c, variants=VARIANTS)),
        )
        for c in found
    ]
    assert len({repr(k) for k in keys}) == len(keys)
    # (2 targets x 2 delays, less the one equal to the defaults' settings) x 3 subsets x
    # 2 floors x 2 caps, less the one equal to the defaults themselves
    assert len(found) == 1 + 2 * 2 * 3 * 2 * 2 - 1
    assert [c.name for c in found[1:]] == sorted(c.name for c in found[1:])
    assert grid(policy=policy, space=Space(), variants=VARIANTS, goal=0.99, base=base) == found


@pytest.mark.parametrize(('policy', 'base'), POLICIES)
def test_the_default_budgets_pool_holds_every_subset_floor_and_cap(
    policy: PolicySpace[Any], base: ModelConfig
) -> None:
    found = grid(policy=policy, space=Space(), variants=VARIANTS, goal=0.99, base=base)
    every = {(c.offered, c.floor, c.cap) for c in found}
    assert every == {(o, f, c) for o in subsets(['h100', 'l40s']) for f in FLOORS for c in CAPS}
    pool, _ = plan(budget=DEFAULT_BUDGET, draws=DEFAULT_SEEDS, candidates=len(found))
    assert pool < len(found)  # a sample of the grid, not all of it
    tried = [found[i] for i in spread(count=pool, total=len(found))]
    assert {c.offered for c in tried} == set(subsets(['h100', 'l40s']))
    assert {c.floor for c in tried} == set(FLOORS)
    assert {c.cap for c in tried} == set(CAPS)


def test_bounds_floor_the_cheapest_offered_and_cap_every_one() -> None:
    both = _candidate(offered=('h100', 'l40s'))
    assert _bounds(bounded(candidate=both, variants=VARIANTS)) == {'h100': (0, 4), 'l40s': (0, 5)}
    tight = replace(both, floor=1, cap=0.5)
    assert tight.name == 'default settings, variants h100+l40s, floor 1, cap ×0.5'
    # the floor goes on the cheaper replica; the caps round up
    assert _bounds(bounded(candidate=tight, variants=VARIANTS)) == {'h100': (0, 2), 'l40s': (1, 3)}
    alone = replace(tight, offered=('h100',))
    assert _bounds(bounded(candidate=alone, variants=VARIANTS)) == {'h100': (1, 2)}


def test_bounds_never_loosen_the_scenarios() -> None:
    given = (replace(VARIANTS[1], min_replicas=2, max_replicas=3, initial_replicas=3),)
    one = _candidate(offered=('l40s',), floor=1, cap=0.25)
    (spec,) = bounded(candidate=one, variants=given)
    # the scenario's floor of 2 stays, and the cap does not go below it
    assert (spec.min_replicas, spec.max_replicas) == (2, 2)
    assert spec.initial_replicas == 2  # the start count moved inside the bounds
    with pytest.raises(ValueError, match='cap'):
        bounded(candidate=replace(one, cap=0.0), variants=given)
