"""Go-style durations: parsing with a required unit, Go `Duration.String` formatting."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmscaler.config.durations import format_duration, parse_duration


@pytest.mark.parametrize(
    ('text', 'seconds'),
    [
        ('10m', 600.0),
        ('1h30m', 5400.0),  # 3600 + 30·60
        ('500ms', 0.5),
        ('1.5s', 1.5),
        ('90s', 90.0),
        ('2h45m30.5s', 9930.5),  # 2·3600 + 45·60 + 30.5 = 7200 + 2700 + 30.5
        ('1500ns', 1.5e-6),
        ('250us', 0.00025),
        ('250µs', 0.00025),  # U+00B5
        ('250μs', 0.00025),  # U+03BC
        ('.5s', 0.5),
        ('5.s', 5.0),
        ('+1m', 60.0),
        ('0s', 0.0),
        (' 30s ', 30.0),
        ('1h1h', 7200.0),  # Go allows repeated units and adds them
        ('168h', 604800.0),  # 7 · 24 · 3600
    ],
)
def test_parse_go_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds, rel=1e-15, abs=0)


@pytest.mark.parametrize('text', ['15', '0', '1.5', '.5', '+10'])
def test_bare_numbers_need_a_unit(text: str) -> None:
    with pytest.raises(ValueError, match='unit is required'):
        parse_duration(text)


@pytest.mark.parametrize('text', ['1h30', '10m5'])
def test_trailing_number_without_unit_is_rejected(text: str) -> None:
    with pytest.raises(ValueError, match='unit is required'):
        parse_duration(text)


@pytest.mark.parametrize(
    ('text', 'match'),
    [
        ('', 'empty'),
        ('   ', 'empty'),
        ('-5s', 'negative'),
        ('5d', 'unknown unit'),
        ('5 s', 'unknown unit'),
        ('1h 30m', 'unknown unit'),
        ('abc', 'invalid'),
        ('s', 'invalid'),
        ('1..5s', 'no unit'),  # Go: '1.' then '.5s'; the first part lacks a unit
        ('3000000h', 'out of range'),  # 3e6 h = 1.08e19 ns > 2^63 − 1 ≈ 9.22e18 ns
    ],
)
def test_bad_durations_are_rejected(text: str, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        parse_duration(text)


def test_non_string_is_rejected() -> None:
    with pytest.raises(ValueError, match='must be a string'):
        parse_duration(15)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ('seconds', 'text'),
    [
        (0.0, '0s'),
        (600.0, '10m0s'),
        (3600.0, '1h0m0s'),
        (5400.0, '1h30m0s'),
        (9930.5, '2h45m30.5s'),
        (1.5, '1.5s'),
        (0.5, '500ms'),
        (0.0015, '1.5ms'),
        (2.5e-6, '2.5µs'),
        (1e-9, '1ns'),
        (86400.0, '24h0m0s'),
        (61.000000001, '1m1.000000001s'),
    ],
)
def test_format_like_go(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


@pytest.mark.parametrize('seconds', [math.nan, math.inf, -math.inf, -1.0])
def test_format_rejects_nan_inf_negative(seconds: float) -> None:
    with pytest.raises(ValueError, match='cannot format'):
        format_duration(seconds)


@given(st.integers(min_value=0, max_value=2**52))
def test_round_trip_whole_nanoseconds(ns: int) -> None:
    seconds = float(Fraction(ns, 10**9))
    assert parse_duration(format_duration(seconds)) == seconds


@given(
    st.lists(
        st.tuples(
            st.integers(min_value=0, max_value=10_000),
            st.sampled_from(['ns', 'us', 'µs', 'ms', 's', 'm', 'h']),
        ),
        min_size=1,
        max_size=4,
    )
)
def test_text_round_trip(parts: list[tuple[int, str]]) -> None:
    text = ''.join(f'{number}{unit}' for number, unit in parts)
    seconds = parse_duration(text)
    assert parse_duration(format_duration(seconds)) == seconds
