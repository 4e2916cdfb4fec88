"""The search space: targets from the goal's error budget, the grid's order and uniqueness."""

from __future__ import annotations

import pytest

from llmscaler.config.resolved import PredictiveConfig
from llmscaler.sim.tune.space import (
    DEFAULTS,
    Candidate,
    Space,
    defaults,
    grid,
    margin_targets,
    resolve,
    subsets,
)


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
    found = grid(space=space, variants=['h100', 'l40s'], goal=0.99, base=base)
    assert found[0].name == DEFAULTS
    keys = [(resolve(candidate=c, base=base), c.offered) for c in found]
    assert len(set(keys)) == len(keys)
    # 2 targets x 2 delays x 3 subsets, less the one equal to the defaults
    assert len(found) == 1 + 2 * 2 * 3 - 1
    assert [c.name for c in found[1:]] == sorted(c.name for c in found[1:])
    assert grid(space=space, variants=['h100', 'l40s'], goal=0.99, base=base) == found
