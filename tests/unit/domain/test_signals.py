"""`VariantCapacity` prices its replicas by the one cost rule, as `Variant` does."""

from __future__ import annotations

import math

import pytest

from llmscaler.domain.signals import VariantCapacity
from llmscaler.domain.snapshot import DEFAULT_COST


def capacity(cost: float) -> VariantCapacity:
    return VariantCapacity(
        variant='a',
        namespace='ns',
        role='both',
        cost=cost,
        accelerator='H100',
        gpus_per_replica=1,
        min_replicas=0,
        max_replicas=4,
        current_replicas=1,
        per_replica_capacity=100.0,
        replica_count=1,
        pending=0,
        total_demand=50.0,
        reason='P1-obs',
    )


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
    assert capacity(cost).effective_cost == expected
