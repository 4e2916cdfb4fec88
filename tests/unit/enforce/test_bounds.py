"""Tests of the replica bounds (a safety rule: never outside [minReplicas, maxReplicas])."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmscaler.domain.snapshot import Variant
from llmscaler.enforce.bounds import clamp, clamp_all


@pytest.mark.parametrize(
    ('target', 'low', 'high', 'expected'),
    [
        (3, 1, 5, 3),  # inside
        (0, 1, 5, 1),  # below the floor
        (9, 1, 5, 5),  # above the ceiling
        (1, 1, 1, 1),  # min == max
        (0, 0, 4, 0),  # zero allowed with min 0
        (-2, 0, 4, 0),  # negative target
        (2, -3, 4, 2),  # negative min counts as 0
        (-1, -3, 4, 0),
        (7, 3, 1, 3),  # max < min resolves to min
        (0, 3, 1, 3),
        (2, 2, 0, 2),
    ],
)
def test_clamp(target: int, low: int, high: int, expected: int) -> None:
    assert clamp(target=target, min_replicas=low, max_replicas=high) == expected


def variant(name: str, *, current: int = 1, low: int = 1, high: int = 2) -> Variant:
    return Variant(
        name=name,
        namespace='ns',
        model_id='m',
        min_replicas=low,
        max_replicas=high,
        current_replicas=current,
    )


def test_clamp_all_sorts_by_name_and_clamps_each_variant() -> None:
    variants = [variant('b', low=0, high=3), variant('a', low=2, high=4)]
    assert clamp_all(variants=variants, targets={'a': 0, 'b': 9}) == (('a', 2), ('b', 3))


def test_clamp_all_uses_current_replicas_for_a_missing_target() -> None:
    variants = [variant('a', current=7, low=1, high=5), variant('b', current=0, low=1, high=5)]
    assert clamp_all(variants=variants, targets={}) == (('a', 5), ('b', 1))


def test_clamp_all_ignores_names_that_are_not_variants() -> None:
    assert clamp_all(variants=[variant('a')], targets={'a': 2, 'zzz': 40}) == (('a', 2),)


def test_clamp_all_of_nothing_is_empty() -> None:
    assert clamp_all(variants=[], targets={'a': 1}) == ()


@given(
    target=st.integers(min_value=-100, max_value=100),
    low=st.integers(min_value=0, max_value=20),
    span=st.integers(min_value=0, max_value=20),
)
def test_clamp_stays_within_valid_bounds_and_keeps_inside_values(
    target: int, low: int, span: int
) -> None:
    high = low + span
    result = clamp(target=target, min_replicas=low, max_replicas=high)
    assert low <= result <= high
    if low <= target <= high:
        assert result == target


@given(
    target=st.integers(min_value=-100, max_value=100),
    low=st.integers(min_value=-5, max_value=20),
    high=st.integers(min_value=-5, max_value=20),
)
def test_clamp_is_idempotent_and_never_negative(target: int, low: int, high: int) -> None:
    once = clamp(target=target, min_replicas=low, max_replicas=high)
    assert once >= 0
    assert clamp(target=once, min_replicas=low, max_replicas=high) == once


@given(
    bounds=st.lists(
        st.tuples(st.integers(min_value=0, max_value=5), st.integers(min_value=0, max_value=5)),
        min_size=1,
        max_size=4,
    ),
    raw=st.lists(st.integers(min_value=-3, max_value=12), min_size=4, max_size=4),
)
def test_clamp_all_results_within_each_variants_bounds(
    bounds: list[tuple[int, int]], raw: list[int]
) -> None:
    variants = [variant(f'v{i}', low=low, high=low + span) for i, (low, span) in enumerate(bounds)]
    targets = {v.name: raw[i] for i, v in enumerate(variants)}
    result = dict(clamp_all(variants=variants, targets=targets))
    for v in variants:
        assert v.min_replicas <= result[v.name] <= v.max_replicas
