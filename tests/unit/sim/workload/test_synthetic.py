"""Synthetic traces: the rate envelope, the Gamma renewal arrivals, log-normal lengths, presets."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmscaler.sim.workload.synthetic import (
    DAY,
    PRESETS,
    LengthModel,
    RateEnvelope,
    RateEvent,
    SyntheticSpec,
    generate,
    integrated_rate,
    preset,
)

HOUR = 3600.0
WIDE = LengthModel(in_mu=6.63, in_sigma=0.99, out_mu=5.02, out_sigma=0.86, max_output=10**6)


def spec(
    envelope: RateEnvelope,
    *,
    duration: float,
    cv: float = 1.0,
    lengths: LengthModel = WIDE,
    max_model_len: int = 10**7,
) -> SyntheticSpec:
    return SyntheticSpec(
        name='s',
        duration=duration,
        envelope=envelope,
        cv=cv,
        lengths=lengths,
        max_model_len=max_model_len,
    )


def count_in(arrivals: np.ndarray, lo: float, hi: float) -> int:
    return int(np.count_nonzero((arrivals >= lo) & (arrivals < hi)))


# --- the envelope -------------------------------------------------------------------------------


def test_constant_rate() -> None:
    envelope = RateEnvelope(kind='constant', mean_rate=5.0)
    assert envelope.rate(np.array([0.0, 1e5, 7 * DAY])).tolist() == [5.0, 5.0, 5.0]


def test_diurnal_rate_worked_numbers() -> None:
    envelope = RateEnvelope(kind='diurnal', mean_rate=10.0, amplitude=0.5, phase=14 * HOUR)
    t = np.array([14 * HOUR, 2 * HOUR, 8 * HOUR, 20 * HOUR, DAY + 14 * HOUR])
    # 10·(1 + 0.5·cos 0) = 15 at the peak, 10·(1 − 0.5) = 5 twelve hours away, 10 at ±6 h.
    assert envelope.rate(t).tolist() == pytest.approx([15.0, 5.0, 10.0, 10.0, 15.0])


def test_weekend_and_events_multiply() -> None:
    envelope = RateEnvelope(
        kind='constant',
        mean_rate=2.0,
        weekend_factor=0.7,
        events=(RateEvent(start=100.0, duration=50.0, multiplier=3.0),),
    )
    t = np.array([99.9, 100.0, 149.9, 150.0, 4 * DAY + 1, 5 * DAY, 6 * DAY + 9, 7 * DAY, 12 * DAY])
    # 2 outside; 2·3 = 6 inside [100, 150); 2·0.7 = 1.4 on days 5 and 6 (and 12 = 7 + 5).
    assert envelope.rate(t).tolist() == pytest.approx([2.0, 6.0, 6.0, 2.0, 2.0, 1.4, 1.4, 2.0, 1.4])


def test_overlapping_events_compound() -> None:
    envelope = RateEnvelope(
        kind='constant',
        mean_rate=1.0,
        events=(RateEvent(0.0, 10.0, 2.0), RateEvent(5.0, 10.0, 3.0)),
    )
    # 2 on [0, 5), 2·3 = 6 on [5, 10), 3 on [10, 15).
    assert envelope.rate(np.array([1.0, 6.0, 11.0, 16.0])).tolist() == [2.0, 6.0, 3.0, 1.0]


def test_integrated_rate_worked_example() -> None:
    edges, cumulative = integrated_rate(
        envelope=RateEnvelope(kind='constant', mean_rate=2.0), duration=10.5
    )
    # Grid 0, 1, …, 10, 10.5; Λ = 2·t, ending at 21.
    assert edges.tolist() == [*range(11), 10.5]
    assert cumulative.tolist() == pytest.approx([2.0 * t for t in edges.tolist()])


@pytest.mark.parametrize(
    'build',
    [
        lambda: RateEnvelope(kind='constant', mean_rate=0.0),
        lambda: RateEnvelope(kind='constant', mean_rate=-1.0),
        lambda: RateEnvelope(kind='constant', mean_rate=math.nan),
        lambda: RateEnvelope(kind='constant', mean_rate=math.inf),
        lambda: RateEnvelope(kind='weekly', mean_rate=1.0),  # type: ignore[arg-type]
        lambda: RateEnvelope(kind='diurnal', mean_rate=1.0, amplitude=1.5),
        lambda: RateEnvelope(kind='diurnal', mean_rate=1.0, amplitude=-0.1),
        lambda: RateEnvelope(kind='diurnal', mean_rate=1.0, phase=math.nan),
        lambda: RateEnvelope(kind='constant', mean_rate=1.0, weekend_factor=-0.5),
        lambda: RateEvent(start=math.inf, duration=1.0, multiplier=1.0),
        lambda: RateEvent(start=0.0, duration=0.0, multiplier=1.0),
        lambda: RateEvent(start=0.0, duration=1.0, multiplier=-2.0),
        lambda: RateEvent(start=0.0, duration=1.0, multiplier=math.nan),
        lambda: LengthModel(in_mu=math.nan, in_sigma=1.0, out_mu=1.0, out_sigma=1.0),
        lambda: LengthModel(in_mu=1.0, in_sigma=-1.0, out_mu=1.0, out_sigma=1.0),
        lambda: LengthModel(in_mu=1.0, in_sigma=1.0, out_mu=1.0, out_sigma=1.0, max_output=0),
        lambda: spec(RateEnvelope(kind='constant', mean_rate=1.0), duration=0.0),
        lambda: spec(RateEnvelope(kind='constant', mean_rate=1.0), duration=math.inf),
        lambda: spec(RateEnvelope(kind='constant', mean_rate=1.0), duration=10.0, cv=0.0),
        lambda: spec(RateEnvelope(kind='constant', mean_rate=1.0), duration=10, max_model_len=1),
    ],
)
def test_bad_values_are_rejected(build: object) -> None:
    with pytest.raises(ValueError, match=r'must|unknown'):
        build()  # type: ignore[operator]


# --- arrivals -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ('name', 'rate', 'cv'), [('azure-conv', 5.53, 1.09), ('azure-code', 2.57, 2.5)]
)
def test_constant_preset_rate_and_cv(name: str, rate: float, cv: float) -> None:
    trace = generate(spec=preset(name=name, duration=6 * HOUR), seed=11)
    # 6 h · 5.53 = 119,448 requests (conv); 6 h · 2.57 = 55,512 (code). Within 3 %.
    assert len(trace) == pytest.approx(rate * 6 * HOUR, rel=0.03)
    gaps = np.diff(trace.arrivals)
    # Time rescaling by a constant keeps the Gamma shape: CV = spec cv within 10 %.
    assert float(gaps.std() / gaps.mean()) == pytest.approx(cv, rel=0.10)
    assert float(trace.arrivals[0]) >= 0.0
    assert float(trace.arrivals[-1]) < 6 * HOUR


def test_rate_override() -> None:
    trace = generate(spec=preset(name='azure-conv', duration=HOUR, rate=20.0), seed=2)
    # 20 req/s · 3600 s = 72,000.
    assert len(trace) == pytest.approx(72_000, rel=0.03)


def test_diurnal_peak_over_trough() -> None:
    envelope = RateEnvelope(kind='diurnal', mean_rate=2.0, amplitude=0.5, phase=14 * HOUR)
    trace = generate(spec=spec(envelope, duration=2 * DAY), seed=5)
    half = 1800.0
    peak = sum(
        count_in(trace.arrivals, d + 14 * HOUR - half, d + 14 * HOUR + half) for d in (0, DAY)
    )
    trough = sum(
        count_in(trace.arrivals, d + 2 * HOUR - half, d + 2 * HOUR + half) for d in (0, DAY)
    )
    # Mean of 1 ± 0.5·cos over ±30 min: 1 ± 0.5·sin(x)/x with x = π/24, sin(x)/x = 0.99715:
    # 1.498575 / 0.501425 = 2.9887 (the point ratio (1+A)/(1−A) is 3).
    assert peak / trough == pytest.approx(2.9887, rel=0.05)
    # Two days at a mean of 2 req/s: 345,600 requests.
    assert len(trace) == pytest.approx(345_600, rel=0.03)


def test_weekend_factor() -> None:
    envelope = RateEnvelope(kind='constant', mean_rate=0.5, weekend_factor=0.7)
    trace = generate(spec=spec(envelope, duration=7 * DAY), seed=8)
    days = np.bincount((trace.arrivals // DAY).astype(np.int64), minlength=7)
    weekday = float(days[:5].mean())
    # 0.5 · 86,400 = 43,200 per weekday; 0.7 of that on days 5 and 6.
    assert weekday == pytest.approx(43_200, rel=0.03)
    assert float(days[5:].mean()) / weekday == pytest.approx(0.7, rel=0.03)


def test_spike_event() -> None:
    envelope = RateEnvelope(
        kind='constant',
        mean_rate=2.0,
        events=(RateEvent(start=1000.0, duration=300.0, multiplier=4.0),),
    )
    trace = generate(spec=spec(envelope, duration=HOUR), seed=4)
    # 2·4 = 8 req/s on [1000, 1300): 2,400 requests; 2 req/s before: 2,000 on [0, 1000).
    assert count_in(trace.arrivals, 1000.0, 1300.0) == pytest.approx(2400, rel=0.1)
    assert count_in(trace.arrivals, 0.0, 1000.0) == pytest.approx(2000, rel=0.1)
    assert count_in(trace.arrivals, 1300.0, HOUR) == pytest.approx(2 * 2300, rel=0.1)


def test_zero_rate_event_is_an_outage() -> None:
    envelope = RateEnvelope(
        kind='constant',
        mean_rate=5.0,
        events=(RateEvent(start=600.5, duration=600.0, multiplier=0.0),),
    )
    trace = generate(spec=spec(envelope, duration=1800.0, cv=2.0), seed=3)
    assert count_in(trace.arrivals, 601.0, 1200.0) == 0
    # 5 req/s over the 1,200 s outside: 6,000 requests.
    assert len(trace) == pytest.approx(6000, rel=0.1)


def test_weekend_factor_does_not_touch_weekdays() -> None:
    envelope = RateEnvelope(kind='constant', mean_rate=1.0, weekend_factor=0.0)
    trace = generate(spec=spec(envelope, duration=DAY), seed=0)
    # Day 0 is a weekday: 1 req/s · 86,400 s.
    assert len(trace) == pytest.approx(86_400, rel=0.03)


def test_all_zero_envelope_gives_an_empty_trace() -> None:
    envelope = RateEnvelope(
        kind='constant',
        mean_rate=1.0,
        events=(RateEvent(start=-1.0, duration=2 * DAY, multiplier=0.0),),
    )
    empty = generate(spec=spec(envelope, duration=DAY), seed=0)
    assert len(empty) == 0
    assert empty.duration == 0.0


def test_deterministic_per_seed() -> None:
    made = preset(name='azure-code', duration=HOUR, diurnal=True)
    first = generate(spec=made, seed=42)
    second = generate(spec=made, seed=42)
    other = generate(spec=made, seed=43)
    assert first.arrivals.tolist() == second.arrivals.tolist()
    assert first.input_tokens.tolist() == second.input_tokens.tolist()
    assert first.output_tokens.tolist() == second.output_tokens.tolist()
    assert first.arrivals.tolist() != other.arrivals.tolist()
    assert first.name == 'azure-code'


# --- lengths ------------------------------------------------------------------------------------


def test_lognormal_parameters_recovered() -> None:
    trace = generate(
        spec=spec(RateEnvelope(kind='constant', mean_rate=20.0), duration=HOUR), seed=6
    )
    logs_in = np.log(trace.input_tokens)
    logs_out = np.log(trace.output_tokens)
    # ~72,000 samples: the sd of a mean estimate is 0.99 / √72000 ≈ 0.004.
    assert float(logs_in.mean()) == pytest.approx(6.63, abs=0.02)
    assert float(logs_in.std()) == pytest.approx(0.99, abs=0.02)
    assert float(logs_out.mean()) == pytest.approx(5.02, abs=0.02)
    assert float(logs_out.std()) == pytest.approx(0.86, abs=0.02)
    # Drawn independently: the correlation of the logs is ~0.
    assert abs(float(np.corrcoef(logs_in, logs_out)[0, 1])) < 0.02


def test_presets_clip_to_the_model_length() -> None:
    trace = generate(spec=preset(name='azure-code', duration=HOUR), seed=1)
    total = trace.input_tokens + trace.output_tokens
    # ln 8192 = 9.01 is 1.48 sd above the code input mean 7.00: ~7 % of inputs are clipped.
    assert int(total.max()) == 8192
    assert int(trace.input_tokens.min()) >= 1
    assert int(trace.output_tokens.min()) >= 1
    conv = generate(spec=preset(name='azure-conv', duration=HOUR), seed=1)
    # The conv preset caps outputs at 1000, the maximum seen in the real trace.
    assert int(conv.output_tokens.max()) == 1000


@settings(max_examples=40, deadline=None)
@given(
    in_mu=st.floats(min_value=-2.0, max_value=12.0),
    out_mu=st.floats(min_value=-2.0, max_value=12.0),
    sigma=st.floats(min_value=0.0, max_value=4.0),
    max_output=st.integers(min_value=1, max_value=5000),
    max_model_len=st.integers(min_value=2, max_value=10_000),
    seed=st.integers(min_value=0, max_value=2**32),
)
def test_lengths_always_fit(
    in_mu: float, out_mu: float, sigma: float, max_output: int, max_model_len: int, seed: int
) -> None:
    lengths = LengthModel(
        in_mu=in_mu, in_sigma=sigma, out_mu=out_mu, out_sigma=sigma, max_output=max_output
    )
    inputs, outputs = lengths.sample(
        rng=np.random.default_rng(seed), n=500, max_model_len=max_model_len
    )
    assert int(inputs.min()) >= 1
    assert int(outputs.min()) >= 1
    assert int(outputs.max()) <= min(max_output, max_model_len - 1)
    assert int((inputs + outputs).max()) <= max_model_len


@settings(max_examples=40, deadline=None)
@given(
    rate=st.floats(min_value=0.01, max_value=20.0),
    cv=st.floats(min_value=0.2, max_value=4.0),
    duration=st.floats(min_value=1.0, max_value=2 * HOUR),
    amplitude=st.floats(min_value=0.0, max_value=1.0),
    seed=st.integers(min_value=0, max_value=2**32),
)
def test_arrivals_are_sorted_and_inside_the_window(
    rate: float, cv: float, duration: float, amplitude: float, seed: int
) -> None:
    envelope = RateEnvelope(kind='diurnal', mean_rate=rate, amplitude=amplitude)
    trace = generate(spec=spec(envelope, duration=duration, cv=cv), seed=seed)
    assert trace.arrivals.dtype == np.float64
    assert trace.input_tokens.dtype == np.int64
    assert len(trace.input_tokens) == len(trace) == len(trace.output_tokens)
    if len(trace):
        assert bool(np.all(np.diff(trace.arrivals) >= 0))
        assert float(trace.arrivals[0]) >= 0.0
        assert float(trace.arrivals[-1]) < duration


@given(
    t=st.lists(st.floats(min_value=-1e7, max_value=1e7), min_size=1, max_size=50),
    amplitude=st.floats(min_value=0.0, max_value=1.0),
    weekend=st.floats(min_value=0.0, max_value=2.0),
)
def test_rate_is_bounded_by_the_envelope(t: list[float], amplitude: float, weekend: float) -> None:
    envelope = RateEnvelope(
        kind='diurnal', mean_rate=3.0, amplitude=amplitude, weekend_factor=weekend
    )
    rate = envelope.rate(np.asarray(t))
    low = 3.0 * (1 - amplitude) * min(weekend, 1.0)
    high = 3.0 * (1 + amplitude) * max(weekend, 1.0)
    assert bool(np.all(rate >= low - 1e-9))
    assert bool(np.all(rate <= high + 1e-9))


# --- presets ------------------------------------------------------------------------------------


def test_preset_defaults() -> None:
    conv = preset(name='azure-conv', duration=600.0)
    assert conv.duration == 600.0
    assert conv.envelope == RateEnvelope(kind='constant', mean_rate=5.53)
    assert conv.cv == 1.09
    assert (conv.lengths.in_mu, conv.lengths.in_sigma) == (6.63, 0.99)
    assert (conv.lengths.out_mu, conv.lengths.out_sigma) == (5.02, 0.86)
    assert conv.max_model_len == 8192
    code = PRESETS['azure-code']
    assert (code.envelope.mean_rate, code.cv) == (2.57, 2.5)
    assert (code.lengths.in_mu, code.lengths.in_sigma) == (7.00, 1.36)
    assert (code.lengths.out_mu, code.lengths.out_sigma) == (2.79, 0.85)


def test_preset_diurnal() -> None:
    made = preset(name='azure-code', duration=DAY, rate=4.0, diurnal=True)
    assert made.envelope.kind == 'diurnal'
    assert made.envelope.mean_rate == 4.0
    # A = 0.5: peak/trough (1 + 0.5) / (1 − 0.5) = 3; weekends 0.7.
    assert made.envelope.amplitude == 0.5
    assert made.envelope.weekend_factor == 0.7
    assert made.name == 'azure-code'


def test_unknown_preset() -> None:
    with pytest.raises(ValueError, match='unknown preset') as caught:
        preset(name='burstgpt', duration=HOUR)
    assert str(caught.value) == 'unknown preset burstgpt; valid: azure-code, azure-conv'


def test_preset_rejects_a_bad_rate() -> None:
    with pytest.raises(ValueError, match='mean rate'):
        preset(name='azure-conv', duration=HOUR, rate=0.0)
