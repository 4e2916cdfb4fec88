"""The emulator's own traffic: seeded Poisson arrivals and traces replayed at a speed."""

from __future__ import annotations

import math
import re
from itertools import islice

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmscaler.emulate.load import PoissonLoad, TraceLoad, arrivals, check_positive
from tests.support.emulate_fixtures import trace_of


@given(
    st.lists(st.floats(min_value=0, max_value=1e5), max_size=20).map(sorted),
    st.floats(min_value=0.01, max_value=100),
)
def test_trace_replay_divides_times_by_the_speed(times: list[float], speed: float) -> None:
    out = list(
        arrivals(
            load=TraceLoad(trace=trace_of(times), speed=speed), seed=0, start=5.0, max_model_len=9
        )
    )
    assert [a.time for a in out] == [5.0 + t / speed for t in times]
    assert [(a.input_tokens, a.output_tokens) for a in out] == [
        (i + 1, 10 + i) for i in range(len(times))
    ]


def test_trace_replay_defaults_to_real_time_and_ends_with_the_trace() -> None:
    # speed 1: arrival t at start + t / 1 = 100 + t; three rows, three arrivals, whatever seed.
    load = TraceLoad(trace=trace_of([0.0, 0.5, 2.0], inputs=[7, 8, 9], outputs=[1, 2, 3]))
    assert load.speed == 1.0
    out = [
        (a.time, a.input_tokens, a.output_tokens)
        for a in arrivals(load=load, seed=5, start=100.0, max_model_len=9)
    ]
    assert out == [(100.0, 7, 1), (100.5, 8, 2), (102.0, 9, 3)]
    empty = TraceLoad(trace=trace_of([]))
    assert list(arrivals(load=empty, seed=0, start=0.0, max_model_len=9)) == []


def test_poisson_load_is_seeded_with_the_right_mean_rate() -> None:
    load = PoissonLoad(rate=4.0, input_tokens=7)
    first = list(islice(arrivals(load=load, seed=3, start=0.0, max_model_len=8192), 2000))
    again = list(islice(arrivals(load=load, seed=3, start=0.0, max_model_len=8192), 2000))
    other = list(islice(arrivals(load=load, seed=4, start=0.0, max_model_len=8192), 10))
    assert first == again
    assert first[:10] != other
    # Mean gap 1/4 s; over 2000 gaps the standard error is 0.25 / √2000 ≈ 0.0056 s (4σ: 0.022).
    assert first[-1].time / 2000 == pytest.approx(0.25, abs=0.022)
    assert {a.input_tokens for a in first} == {7}
    outputs = [a.output_tokens for a in first]
    assert min(outputs) >= 1
    assert max(outputs) <= 1000  # azure-conv lengths are capped at 1000
    assert len(set(outputs)) > 50


def test_poisson_lengths_fit_a_tiny_model_and_fixed_ones_win() -> None:
    # max_model_len 1 is sampled as 2: output clipped to [1, 2 − 1] = 1, input to [1, 2 − 1] = 1.
    tiny = islice(arrivals(load=PoissonLoad(rate=1.0), seed=0, start=0.0, max_model_len=1), 50)
    assert {(a.input_tokens, a.output_tokens) for a in tiny} == {(1, 1)}
    fixed = PoissonLoad(rate=1.0, input_tokens=3, output_tokens=4)
    out = list(islice(arrivals(load=fixed, seed=0, start=10.0, max_model_len=8192), 50))
    assert {(a.input_tokens, a.output_tokens) for a in out} == {(3, 4)}
    times = [a.time for a in out]
    assert times == sorted(times)
    assert times[0] > 10.0


@pytest.mark.parametrize('rate', [0.0, -1.0, math.nan, math.inf])
def test_bad_rate_is_refused(rate: float) -> None:
    with pytest.raises(ValueError, match='rate must be finite and > 0'):
        PoissonLoad(rate=rate)


def test_bad_fixed_lengths_and_speed_are_refused() -> None:
    with pytest.raises(ValueError, match='input_tokens must be >= 1, got 0'):
        PoissonLoad(rate=1.0, input_tokens=0)
    with pytest.raises(ValueError, match='output_tokens must be >= 1, got -2'):
        PoissonLoad(rate=1.0, output_tokens=-2)
    for speed in (0.0, -0.5, math.nan, math.inf):
        with pytest.raises(ValueError, match='speed must be finite and > 0'):
            TraceLoad(trace=trace_of([0.0]), speed=speed)


@given(st.floats(allow_nan=True, allow_infinity=True))
def test_check_positive_accepts_exactly_the_finite_positive_values(value: float) -> None:
    if math.isfinite(value) and value > 0:
        check_positive(name='x', value=value)
    else:
        with pytest.raises(ValueError, match=re.escape(f'x must be finite and > 0, got {value}')):
            check_positive(name='x', value=value)
