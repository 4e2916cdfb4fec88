"""The search space: targets from the goal's error budget, the replica bounds, the grid's order
and uniqueness."""

from __future__ import annotations

from dataclasses import replace

import pytest

from llmscaler.config.resolved import PredictiveConfig
from llmscaler.sim.hardware.presets import preset
from llmscaler.sim.tune.search import plan, spread
from llmscaler.sim.tune.space import (
    CAPS,
    DEFAULTS,
    FLOORS,
    Candidate,
    Space,
    bounded,
    defaults,
    grid,
    margin_targets,
    resolve,
    subsets,
)
from llmscaler.sim.tune.tuned import DEFAULT_BUDGET, DEFAULT_SEEDS
from llmscaler.sim.vocabulary import VariantSpec

# The L40S is the cheaper replica ($1.90 an hour against $3.90).
VARIANTS = (
    preset(name='llama-3.1-8b-h100', variant_name='h100', max_replicas=4),
    preset(name='llama-3.1-8b-l40s', variant_name='l40s', max_replicas=5),
)


def _bounds(specs: tuple[VariantSpec, ...]) -> dict[str, tuple[int, int]]:
    return {v.name: (v.min_replicas, v.max_replicas) for v in specs}


def test_targets_scale_the_error_budget() -> None:
    assert margin_targets(goal=0.99, margins=(2.0, 1.0, 0.5)) == (0.98, 0.99, 0.995)
    assert margin_targets(goal=0.9, margins=(10.0, 1.0)) == (0.9,)  # 0 is out of (0.5, 1)
    with pytest.raises(ValueError, match='goal'):
        margin_targets(goal=1.0, margins=(1.0,))


def test_subsets_all_first() -> None:
    assert subsets(['l40s', 'h100']) == [('h100', 'l40s'), ('h100',), ('l40s',)]


def test_defaults_resolve_to_the_base() -> None:
    base = PredictiveConfig(startup_seconds=90.0)
    assert resolve(candidate=defaults(variants=['a']), base=base) == base
    assert defaults(variants=['b', 'a']).name == DEFAULTS


def test_a_candidate_sets_the_keys_it_names() -> None:
    base = PredictiveConfig(startup_seconds=90.0)
    got = resolve(
        candidate=Candidate(target=0.995, delay=120.0, horizon=1.5, offered=('a',)), base=base
    )
    assert (got.attainment, got.scale_down_delay, got.startup_seconds) == (0.995, 120.0, 135.0)
    assert got.quantile > base.quantile  # a higher target sizes for a higher quantile
    assert got.history_seconds == base.history_seconds


def test_grid_starts_with_the_defaults_and_resolves_uniquely() -> None:
    base = PredictiveConfig()
    space = Space(margins=(1.0, 0.5), delays=(120.0, 300.0), horizons=(1.0,))
    found = grid(space=space, variants=VARIANTS, goal=0.99, base=base)
    assert found[0].name == DEFAULTS
    keys = [
        (
            resolve(candidate=c, base=base),
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
    assert grid(space=space, variants=VARIANTS, goal=0.99, base=base) == found


def test_the_grid_holds_every_floor_and_cap_on_every_subset() -> None:
    found = grid(space=Space(), variants=VARIANTS, goal=0.99, base=PredictiveConfig())
    combos = {(c.offered, c.floor, c.cap) for c in found}
    for offered in subsets(['h100', 'l40s']):
        for floor in FLOORS:
            for cap in CAPS:
                assert (offered, floor, cap) in combos


def test_bounds_floor_the_cheapest_offered_and_cap_every_one() -> None:
    both = Candidate(target=None, delay=None, horizon=1.0, offered=('h100', 'l40s'))
    assert _bounds(bounded(candidate=both, variants=VARIANTS)) == {'h100': (0, 4), 'l40s': (0, 5)}
    tight = replace(both, floor=1, cap=0.5)
    assert tight.name.endswith('variants h100+l40s, floor 1, cap ×0.5')
    # the floor goes on the cheaper replica; the caps round up
    assert _bounds(bounded(candidate=tight, variants=VARIANTS)) == {'h100': (0, 2), 'l40s': (1, 3)}
    alone = replace(tight, offered=('h100',))
    assert _bounds(bounded(candidate=alone, variants=VARIANTS)) == {'h100': (1, 2)}


def test_bounds_never_loosen_the_scenarios() -> None:
    given = (replace(VARIANTS[1], min_replicas=2, max_replicas=3, initial_replicas=3),)
    one = Candidate(target=None, delay=None, horizon=1.0, offered=('l40s',), floor=1, cap=0.25)
    (spec,) = bounded(candidate=one, variants=given)
    # the scenario's floor of 2 stays, and the cap does not go below it
    assert (spec.min_replicas, spec.max_replicas) == (2, 2)
    assert spec.initial_replicas == 2  # the start count moved inside the bounds
    with pytest.raises(ValueError, match='cap'):
        bounded(candidate=replace(one, cap=0.0), variants=given)


def test_the_default_budgets_pool_holds_every_bound_on_every_subset() -> None:
    found = grid(
        space=Space(), variants=VARIANTS, goal=0.99, base=PredictiveConfig(startup_seconds=90.0)
    )
    pool, _ = plan(budget=DEFAULT_BUDGET, draws=DEFAULT_SEEDS, candidates=len(found))
    assert pool < len(found)  # a sample of the grid, not all of it
    tried = [found[i] for i in spread(count=pool, total=len(found))]
    assert {(c.offered, c.floor, c.cap) for c in tried} == {
        (c.offered, c.floor, c.cap) for c in found
    }
