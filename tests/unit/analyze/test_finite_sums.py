"""Sums and means of finite figures: exact where a float can hold them, never an overflow."""

from __future__ import annotations

import math
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmscaler.analyze.finite_sums import mean, total

HUGE = sys.float_info.max
finite = st.floats(allow_nan=False, allow_infinity=False)
non_negative = st.floats(min_value=0.0, allow_nan=False, allow_infinity=False)


@pytest.mark.parametrize(
    ('values', 'expected'),
    [
        ([], 0.0),
        ([1.0, 2.0, 4.0], 7.0 / 3.0),
        ([HUGE, HUGE], HUGE),  # fsum raised: intermediate overflow
        ([HUGE, HUGE, HUGE], HUGE),
        ([1e308, 1e308, 1e308], 1e308),
    ],
)
def test_mean(values: list[float], expected: float) -> None:
    assert mean(values) == expected


@pytest.mark.parametrize(
    ('values', 'expected'),
    [
        ([], 0.0),
        ([0.1, 0.2, 0.3], math.fsum([0.1, 0.2, 0.3])),
        ([1e308, 1e308], HUGE),
        ([HUGE] * 5, HUGE),
        ([-HUGE, -HUGE], -HUGE),
    ],
)
def test_total(values: list[float], expected: float) -> None:
    assert total(values) == expected


def test_non_finite_values_are_passed_on_as_a_sum_would() -> None:
    assert math.isnan(mean([1.0, math.nan]))
    assert total([1.0, math.inf]) == math.inf
    assert math.isnan(total([math.inf, -math.inf]))


@given(st.lists(finite, min_size=1, max_size=12))
def test_the_mean_of_finite_values_lies_between_them_and_matches_fsum_when_it_can(
    values: list[float],
) -> None:
    result = mean(values)
    assert min(values) <= result <= max(values)
    try:
        exact = math.fsum(values) / len(values)
    except OverflowError:
        return
    if math.isfinite(exact) and min(values) <= exact <= max(values):
        assert result == exact


def test_a_mean_rounded_out_of_its_values_is_held_in() -> None:
    # fsum rounds 3 × 3002399751580331 to an even float, and the division rounds down once more.
    values = [3002399751580331.0] * 3
    assert math.fsum(values) / 3 < values[0]
    assert mean(values) == values[0]


@given(st.lists(non_negative, max_size=12))
def test_a_total_of_non_negative_figures_is_finite_and_exact_when_it_can_be(
    values: list[float],
) -> None:
    result = total(values)
    assert 0.0 <= result <= HUGE
    try:
        exact = math.fsum(values)
    except OverflowError:
        assert result == HUGE
        return
    assert result == (exact if math.isfinite(exact) else HUGE)
