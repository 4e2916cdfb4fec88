"""Tests of the k2 history: buckets, keys, the rolling window, averages and expiry."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmscaler.analyze.saturation import k2_history as kh
from llmscaler.config.resolved import CoreSettings
from llmscaler.domain.state import K2Sample

DAY = 24 * 3600.0


@pytest.mark.parametrize(
    ('avg_output', 'bucket'),
    [
        (0.0, 'short'),
        (99.9, 'short'),
        (100.0, 'medium'),
        (499.99, 'medium'),
        (500.0, 'long'),
        (4000.0, 'long'),
        (None, 'short'),
        (math.nan, 'short'),
        (math.inf, 'short'),
        (-5.0, 'short'),
    ],
)
def test_output_bucket_boundaries(avg_output: float | None, bucket: str) -> None:
    assert kh.output_bucket(avg_output_tokens=avg_output) == bucket


def test_constants_match_upstream() -> None:
    assert kh.SHORT_OUTPUT_THRESHOLD == 100
    assert kh.MEDIUM_OUTPUT_THRESHOLD == 500
    assert kh.ROLLING_AVERAGE_WINDOW_SIZE == 10 == CoreSettings().k2_window


def test_history_key_format() -> None:
    key = kh.history_key(model_id='llama', accelerator='H100', gpus_per_replica=2, bucket='long')
    assert key == 'llama|H100|2|long'


def put(
    history: dict[str, tuple[K2Sample, ...]], key: str, value: float, now: float, window: int
) -> None:
    """Record into `history` the way the analyzer does: write the returned samples, if any."""
    samples = kh.record(history=history, key=key, value=value, now=now, window=window)
    if samples is not None:
        history[key] = samples


def test_record_returns_the_new_samples_of_the_key_only() -> None:
    before = {
        'k': (K2Sample(value=8000.0, at=0.0),),
        'other': (K2Sample(value=1.0, at=0.0),),
    }
    after = kh.record(history=before, key='k', value=6000.0, now=30.0, window=10)
    assert after == (K2Sample(value=8000.0, at=0.0), K2Sample(value=6000.0, at=30.0))
    # The input is untouched, the other key included.
    assert before == {
        'k': (K2Sample(value=8000.0, at=0.0),),
        'other': (K2Sample(value=1.0, at=0.0),),
    }


def test_record_of_a_new_key_starts_a_window() -> None:
    assert kh.record(history={}, key='k', value=5.0, now=7.0, window=10) == (
        K2Sample(value=5.0, at=7.0),
    )


def test_record_keeps_the_last_window_samples() -> None:
    history: dict[str, tuple[K2Sample, ...]] = {}
    for i in range(1, 13):
        put(history, 'k', float(i), float(i), 10)
    # 12 samples recorded, window 10 -> samples 3..12 survive.
    assert [s.value for s in history['k']] == [float(i) for i in range(3, 13)]


def test_record_window_below_one_keeps_one_sample() -> None:
    history: dict[str, tuple[K2Sample, ...]] = {}
    put(history, 'k', 1.0, 0.0, 0)
    put(history, 'k', 2.0, 1.0, 0)
    assert history['k'] == (K2Sample(value=2.0, at=1.0),)


@pytest.mark.parametrize('value', [math.nan, math.inf, -math.inf, 0.0, -3.0])
def test_record_ignores_values_without_capacity(value: float) -> None:
    # None: nothing to write, whether or not the key already has samples.
    assert kh.record(history={}, key='k', value=value, now=0.0, window=10) is None
    history = {'k': (K2Sample(value=8000.0, at=0.0),)}
    assert kh.record(history=history, key='k', value=value, now=0.0, window=10) is None


def test_average_is_the_mean_of_unexpired_samples() -> None:
    history = {'k': (K2Sample(value=8000.0, at=0.0), K2Sample(value=6000.0, at=3600.0))}
    # At now = 24 h both are exactly 24 h old or younger: (8000 + 6000) / 2 = 7000.
    assert kh.average(history=history, key='k', now=DAY, ttl=DAY) == 7000.0
    # Half an hour later the first sample (age 24.5 h) is expired: only 6000 remains.
    assert kh.average(history=history, key='k', now=DAY + 1800.0, ttl=DAY) == 6000.0
    # After 25 h both are gone.
    assert kh.average(history=history, key='k', now=DAY + 3601.0, ttl=DAY) is None


def test_average_of_missing_key_is_none() -> None:
    assert kh.average(history={}, key='k', now=0.0, ttl=DAY) is None


def test_infinite_ttl_never_expires() -> None:
    history = {'k': (K2Sample(value=5.0, at=0.0),)}
    assert kh.average(history=history, key='k', now=1e12, ttl=math.inf) == 5.0


def test_expire_after_24_hours_by_default() -> None:
    ttl = CoreSettings().k2_history_ttl
    assert ttl == DAY
    history = {
        'old': (K2Sample(value=8000.0, at=0.0),),
        'mixed': (K2Sample(value=1.0, at=0.0), K2Sample(value=2.0, at=7200.0)),
    }
    # now = 24 h + 1 s: samples at t=0 are 86401 s old (> 86400) and go; t=7200 stays.
    expired = kh.expire(history=history, now=DAY + 1.0, ttl=ttl)
    assert expired == {'mixed': (K2Sample(value=2.0, at=7200.0),)}
    assert 'old' in history  # the input is untouched


samples = st.lists(
    st.tuples(st.floats(min_value=1.0, max_value=1e7), st.floats(min_value=0.0, max_value=1e6)),
    max_size=30,
)


@given(samples, st.integers(min_value=1, max_value=12))
def test_record_never_exceeds_window(values: list[tuple[float, float]], window: int) -> None:
    history: dict[str, tuple[K2Sample, ...]] = {}
    for value, at in values:
        put(history, 'k', value, at, window)
    assert len(history.get('k', ())) == min(window, len(values))
    # The window holds the most recent samples, in recording order.
    assert [s.value for s in history.get('k', ())] == [v for v, _ in values][-window:]


@given(samples, st.floats(min_value=0.0, max_value=2e6), st.floats(min_value=1.0, max_value=1e6))
def test_average_lies_within_the_samples_and_expire_is_consistent(
    values: list[tuple[float, float]], now: float, ttl: float
) -> None:
    history = {'k': tuple(K2Sample(value=v, at=at) for v, at in values)}
    mean = kh.average(history=history, key='k', now=now, ttl=ttl)
    expired = kh.expire(history=history, now=now, ttl=ttl)
    assert kh.expire(history=expired, now=now, ttl=ttl) == expired
    assert kh.average(history=expired, key='k', now=now, ttl=ttl) == mean
    if mean is None:
        assert expired == {}
    else:
        kept = [s.value for s in expired['k']]
        assert min(kept) * (1 - 1e-12) <= mean <= max(kept) * (1 + 1e-12)
