"""`VariantCapacity` prices its replicas by the one cost rule, as `Variant` does."""

from __future__ import annotations

import dataclasses
import math

import pytest

from llmscaler.domain.snapshot import DEFAULT_COST
from tests.support.analyze_fixtures import capacity


@pytest.mark.parametrize(
    ('cost', 'expected'),
    [
        (3.9, 3.9),
        (0.0, DEFAULT_COST),
        (-1.0, DEFAULT_COST),
        (math.nan, DEFAULT_COST),
        (math.inf, DEFAULT_COST),
    ],
)
def test_effective_cost(cost: float, expected: float) -> None:
    assert dataclasses.replace(capacity('a', 100.0), cost=cost).effective_cost == expected
