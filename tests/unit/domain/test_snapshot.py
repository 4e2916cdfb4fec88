"""The one cost rule (`effective_cost`): a finite cost above 0 is itself, anything else is
`DEFAULT_COST`, on any float, for a bare number and for a `Variant`."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from llmscaler.domain.snapshot import DEFAULT_COST, Variant, effective_cost

ANY = st.one_of(st.none(), st.floats(), st.integers(min_value=-(10**6), max_value=10**6))


@given(cost=ANY)
def test_a_cost_that_is_not_finite_and_positive_reads_as_the_default(cost: float | None) -> None:
    expected = cost if cost is not None and math.isfinite(cost) and cost > 0 else DEFAULT_COST
    assert effective_cost(cost) == expected


def test_the_default_is_wvas_and_every_odd_cost_takes_it() -> None:
    assert DEFAULT_COST == 10.0
    for odd in (None, math.nan, math.inf, -math.inf, 0.0, -0.0, -3.9):
        assert effective_cost(odd) == DEFAULT_COST
    assert effective_cost(3.9) == 3.9
    assert effective_cost(5e-324) == 5e-324  # the smallest positive float is a price


def test_a_variant_prices_its_replicas_by_the_rule() -> None:
    assert Variant(name='a', namespace='ns', model_id='m', cost=1.9).effective_cost == 1.9
    assert Variant(name='a', namespace='ns', model_id='m', cost=0.0).effective_cost == 10.0
    assert Variant(name='a', namespace='ns', model_id='m').effective_cost == DEFAULT_COST
