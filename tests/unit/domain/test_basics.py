"""The number guards every analyzer reads its figures through: `finite`, `positive_or_zero` and
`tokens_in_use_of`, against their definitions written the plain way, on any float."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmscaler.domain.basics import finite, positive_or_zero
from llmscaler.domain.snapshot import tokens_in_use_of

ANY = st.one_of(st.none(), st.floats(), st.integers(min_value=-(10**6), max_value=10**6))


@given(value=ANY)
def test_finite_passes_finite_numbers_only(value: float | None) -> None:
    expected = value if value is not None and math.isfinite(value) else None
    assert finite(value) is expected


@given(value=ANY)
def test_positive_or_zero_is_a_finite_value_above_zero_else_zero(value: float | None) -> None:
    clean = finite(value)
    expected = clean if clean is not None and clean > 0 else 0.0
    got = positive_or_zero(value)
    assert got == expected
    assert type(got) is type(expected)  # the value itself, not a converted copy


@pytest.mark.parametrize('value', [math.nan, math.inf, -math.inf, -1e-300, 0.0, -0.0, None])
def test_positive_or_zero_refuses_what_carries_no_amount(value: float | None) -> None:
    assert positive_or_zero(value) == 0.0


@given(total=st.integers(min_value=0, max_value=10**7), usage=st.one_of(st.none(), st.floats()))
def test_tokens_in_use_is_the_clamped_share_of_the_cache(total: int, usage: float | None) -> None:
    if total == 0 or usage is None or not math.isfinite(usage):
        expected = 0
    else:
        expected = round(min(1.0, max(0.0, usage)) * total)
    got = tokens_in_use_of(total=total, usage=usage)
    assert got == expected
    assert 0 <= got <= total
