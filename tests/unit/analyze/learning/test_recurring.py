"""analyze/learning/recurring.py: the period of a known pattern, no pattern on noise, a short
history, a constant load or a ramp, the fall-back when the pattern breaks, bounded memory and
determinism."""

from __future__ import annotations

import math
import random
from collections.abc import Callable

import pytest

from llmscaler.analyze.learning import recurring
from llmscaler.analyze.learning.recurring import Bucket, History

STEP = 30.0


def history(rate: Callable[[float], float], *, until: float, start: float = STEP) -> History:
    """The history of a model whose rate at t is `rate(t)`, one sample per cycle."""
    kept = recurring.EMPTY
    t = start
    while t <= until:
        kept = recurring.record(history=kept, at=t, rate=rate(t))
        t += STEP
    return kept


def on_off(
    *, period: float = 600.0, high: float = 14.0, low: float = 0.7, seed: int = 1
) -> Callable[[float], float]:
    rng = random.Random(seed)
    return lambda t: max(0.0, (high if t % period < period / 2 else low) + rng.gauss(0, 0.5))


def days(*, seed: int = 1) -> Callable[[float], float]:
    rng = random.Random(seed)

    def rate(t: float) -> float:
        third = int((t % 600.0) // 200.0)
        return max(0.0, 20.0 * (0.3, 1.2, 0.3)[third] + rng.gauss(0, 0.7))

    return rate


@pytest.mark.parametrize('period', [120.0, 600.0, 1200.0])
def test_finds_the_period_of_an_on_off_load(period: float) -> None:
    # At least `MIN_OVERLAP` buckets compared, whatever the period.
    until = max(2.5 * period, 900.0)
    learnt = recurring.learn(history=history(on_off(period=period), until=until), now=until)
    assert learnt.pattern is not None, learnt.why
    assert learnt.pattern.period == pytest.approx(period, abs=STEP)
    assert learnt.pattern.correlation >= recurring.THRESHOLD


def test_finds_the_day_of_compressed_days_and_predicts_the_next_rise() -> None:
    now = 1400.0 - 150.0  # a start-up and two cycles before the third day's rise
    kept = history(days(), until=now)
    learnt = recurring.learn(history=kept, now=now)
    assert learnt.pattern is not None, learnt.why
    assert learnt.pattern.period == 600.0
    # The rise at 1400 was seen at 800 and 200: what they showed, not the low of now.
    assert learnt.pattern.predict(at=1450.0) == pytest.approx(24.0, abs=3.0)
    assert learnt.pattern.predict(at=now) == pytest.approx(6.0, abs=3.0)


def test_no_pattern_in_noise() -> None:
    rng = random.Random(3)
    learnt = recurring.learn(history=history(lambda t: 10 + rng.gauss(0, 1), until=3600), now=3600)
    assert learnt.pattern is None
    assert 'no period' in learnt.why


def test_no_pattern_in_a_constant_load_or_a_ramp() -> None:
    assert recurring.learn(history=history(lambda t: 10.0, until=3600), now=3600).pattern is None
    rng = random.Random(4)
    ramp = history(lambda t: 4 + 36 * t / 1800 + rng.gauss(0, 1), until=1800)
    assert recurring.learn(history=ramp, now=1800.0).pattern is None


def test_no_pattern_from_less_than_one_and_a_half_periods() -> None:
    short = history(on_off(), until=1.4 * 600)
    assert recurring.learn(history=short, now=840.0).pattern is None
    assert recurring.learn(history=recurring.EMPTY, now=0.0).pattern is None


def test_falls_back_when_the_pattern_breaks() -> None:
    """The load stays low where every earlier period rose: after `BREAK_WINDOW` of it, no
    pattern; before that, the pattern still holds."""
    rise = on_off()
    kept = history(rise, until=1770.0)
    assert recurring.learn(history=kept, now=1770.0).pattern is not None
    broken = kept
    for t in (1800.0, 1830.0, 1860.0, 1890.0, 1920.0, 1950.0):
        broken = recurring.record(history=broken, at=t, rate=0.7)
    learnt = recurring.learn(history=broken, now=1950.0)
    assert learnt.pattern is None
    assert 'broke' in learnt.why
    early = recurring.record(history=kept, at=1800.0, rate=0.7)
    assert recurring.learn(history=early, now=1800.0).pattern is not None


def test_a_fixed_period_is_used_once_seen_and_still_breaks() -> None:
    kept = history(on_off(), until=900.0)
    assert recurring.learn(history=kept, now=900.0, fixed=1200.0).pattern is None
    learnt = recurring.learn(history=kept, now=900.0, fixed=600.0)
    assert learnt.pattern is not None
    assert (learnt.pattern.period, learnt.pattern.correlation) == (600.0, 1.0)


def test_memory_is_bounded_and_coarsens_before_it_forgets() -> None:
    kept = history(lambda t: 10 + 5 * math.sin(2 * math.pi * t / 86400), until=3 * 86400)
    assert len(kept.buckets) <= recurring.MAX_BUCKETS
    assert kept.width == recurring.MAX_WIDTH
    # Two days and more of a daily period are still held, and it is found.
    assert kept.buckets[-1].at - kept.buckets[0].at >= 2 * 86400
    learnt = recurring.learn(history=kept, now=3 * 86400)
    assert learnt.pattern is not None
    assert learnt.pattern.period == pytest.approx(86400, rel=0.02)


def test_a_bucket_keeps_the_mean_and_the_peak_and_ignores_what_it_cannot_use() -> None:
    kept = recurring.EMPTY
    for at, rate in ((31.0, 2.0), (40.0, 6.0), (50.0, math.nan), (55.0, -1.0), (10.0, 9.0)):
        kept = recurring.record(history=kept, at=at, rate=rate)
    assert kept.buckets == (Bucket(at=30.0, mean=4.0, peak=6.0, count=2),)


def test_deterministic() -> None:
    one = history(days(seed=7), until=1500.0)
    two = history(days(seed=7), until=1500.0)
    assert one == two
    assert recurring.learn(history=one, now=1500.0) == recurring.learn(history=two, now=1500.0)
