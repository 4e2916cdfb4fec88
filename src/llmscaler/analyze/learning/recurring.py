"""Recurring load: the period a model's arrival rate repeats with, and what it brings next.

Why: the short-term forecast (`analyze.learning.rate_forecast`) learns of a rise when it
arrives, so a replica asked for then serves a start-up later; a rise that comes back every
period (a working day, a batch job, a burst every twenty minutes) can be answered a start-up
ahead, as the clairvoyant bound answers it, once the history shows the period. This module
learns the period and predicts from it; the predictive policy sizes for the larger of the two
forecasts, and falls back to the short-term one whenever this one says "no pattern".

- **History** (`History`, `record`): the arrival rates, in buckets of `width` seconds (mean and
  peak of the samples in each), oldest first, at most `MAX_BUCKETS` buckets. When the cap is
  reached the buckets are merged two by two (the width doubles) up to `MAX_WIDTH`, beyond which
  the oldest buckets go: memory is bounded (512 buckets), and covers two days of a daily period
  at 8-minute resolution, or an hour at 30 s.
- **Period** (`period`): the series of bucket means (a bucket the history lacks repeats the one
  before it), and for each lag k in [`PERIOD_MIN`, `PERIOD_MAX`] no longer than the history /
  `MIN_PERIODS`, the correlation of the series with itself k later (Pearson's, over the part
  they overlap, at least `MIN_OVERLAP` buckets). A lag counts only after the correlation first
  fell to `DIP` or below (a smooth or trending series correlates with itself a little later:
  that is no period), and the period is the shortest lag that is a local peak within
  `PEAK_SLACK` of the best and at least `THRESHOLD`. A fixed period (`fixed`) skips the search
  but not the rest.
- **Prediction** (`predict`): the rate at time t as the largest bucket peak within one bucket
  of the phase t − kP over every earlier period k ≥ 1 the history holds (the highest the load
  was seen at that phase).
- **Agreement** (`agreement`, `holds`): a bucket agrees with the period when it lies within
  what the earlier periods showed at its phase (within one bucket), [low × (1 − `TOLERANCE`),
  high × (1 + `TOLERANCE`)] widened by `NOISE_SIGMAS` standard deviations of a Poisson count
  over a minute. A period is used only while at least `AGREEMENT` of the buckets of the last
  period agree (bursty traffic repeats by chance well enough to correlate, not bucket by
  bucket), and not when every bucket of the last `BREAK_WINDOW` seconds disagrees (a daily
  pattern that breaks is noticed in minutes, not after a tenth of a day); otherwise the
  pattern broke (or never held) and `learn` reports no pattern.

`learn` puts the three together: a `Pattern` (the period, its correlation) or None, with the
reason as a string either way, so the decision can say why it sizes as it does.

What fails: nothing raises for samples; non-finite or negative rates, non-finite times and
samples older than the newest bucket are ignored by `record`. A history too short (less than
`MIN_PERIODS` periods), a constant or nearly constant rate, noise (correlation below
`THRESHOLD`) and a broken pattern give no pattern. Deterministic: pure arithmetic over tuples,
no clock, no dict or set order; every public function takes keyword arguments only.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from llmscaler.config.resolved import PERIOD_MAX, PERIOD_MIN
from llmscaler.domain.basics import STRICT_KEYS, NonNegative

BUCKET_SECONDS: Final = 30.0
"""The finest bucket: one controller cycle."""
MAX_BUCKETS: Final = 512
"""Buckets kept at most per model (the state is persisted every cycle: it must stay small)."""
MAX_WIDTH: Final = 480.0
"""The coarsest bucket (s): 512 of them span 68 hours, two days of a daily period and more."""
MIN_PERIODS: Final = 1.5
"""History needed, in periods: the second period half seen is the first evidence of a repeat."""
MIN_OVERLAP: Final = 8
"""Fewest buckets a correlation is computed over (fewer correlate by chance)."""
THRESHOLD: Final = 0.7
"""Least correlation of the series with itself one period later."""
DIP: Final = 0.0
"""The correlation must first fall to this before a lag can be a period."""
PEAK_SLACK: Final = 0.05
"""A shorter lag within this of the best correlation is the period (the best may be a multiple)."""
AGREEMENT: Final = 0.9
"""Share of the last period's buckets that must agree with the periods before: a repeat seen
once by chance in bursty traffic correlates as well as a period, but does not agree bucket by
bucket."""
BREAK_WINDOW: Final = 120.0
"""Seconds of recent buckets that must all disagree with the period for the pattern to break."""
TOLERANCE: Final = 0.5
"""Relative disagreement allowed between a bucket and what earlier periods showed at its phase."""
NOISE_SIGMAS: Final = 3.0
"""... plus this many standard deviations of a Poisson count over a minute (`COUNT_WINDOW`)."""
COUNT_WINDOW: Final = 60.0
"""Seconds an observed arrival rate is counted over (`rate(...[1m])`)."""
FLAT: Final = 1e-9
"""A series whose variance is below this × its mean² (or 1e-12) is constant: no period."""


@dataclass(frozen=True, slots=True)
class Bucket:
    """The samples of one bucket starting at `at`: their mean and peak rate (req/s), and how
    many there were."""

    __pydantic_config__ = STRICT_KEYS

    at: float
    mean: NonNegative
    peak: NonNegative
    count: int = 1


@dataclass(frozen=True, slots=True)
class History:
    """A model's arrival rates in buckets of `width` seconds, oldest first (module docstring)."""

    __pydantic_config__ = STRICT_KEYS

    width: float = BUCKET_SECONDS
    buckets: tuple[Bucket, ...] = ()


EMPTY: Final = History()
"""No history (what a model starts with)."""


@dataclass(frozen=True, slots=True)
class Pattern:
    """A learnt period (s), the correlation it was found with (1.0 when fixed), and the
    history it predicts from."""

    period: float
    correlation: float
    history: History

    def predict(self, *, at: float) -> float | None:
        """The rate the earlier periods showed at the phase of `at` (`predict`)."""
        return predict(history=self.history, period=self.period, at=at)


@dataclass(frozen=True, slots=True)
class Learnt:
    """What `learn` found: a pattern or None, and why, in words for the decision's reason."""

    pattern: Pattern | None
    why: str


def record(*, history: History, at: float, rate: float, max_buckets: int = MAX_BUCKETS) -> History:
    """`history` with the sample (`at`, `rate`) in its bucket (module docstring)."""
    if not (math.isfinite(at) and math.isfinite(rate) and rate >= 0):
        return history
    width = history.width
    start = math.floor(at / width) * width
    buckets = history.buckets
    if buckets and start < buckets[-1].at:
        return history
    if buckets and start == buckets[-1].at:
        last = buckets[-1]
        count = last.count + 1
        merged = Bucket(
            at=start,
            mean=last.mean + (rate - last.mean) / count,
            peak=max(last.peak, rate),
            count=count,
        )
        buckets = (*buckets[:-1], merged)
    else:
        buckets = (*buckets, Bucket(at=start, mean=rate, peak=rate))
    while len(buckets) > max_buckets:
        if width * 2 <= MAX_WIDTH:
            width *= 2
            buckets = _coarsened(buckets, width=width)
        else:
            buckets = buckets[len(buckets) - max_buckets :]
    return History(width=width, buckets=buckets)


def _coarsened(buckets: Sequence[Bucket], *, width: float) -> tuple[Bucket, ...]:
    out: list[Bucket] = []
    for bucket in buckets:
        start = math.floor(bucket.at / width) * width
        if out and out[-1].at == start:
            last = out[-1]
            count = last.count + bucket.count
            out[-1] = Bucket(
                at=start,
                mean=(last.mean * last.count + bucket.mean * bucket.count) / count,
                peak=max(last.peak, bucket.peak),
                count=count,
            )
        else:
            out.append(Bucket(at=start, mean=bucket.mean, peak=bucket.peak, count=bucket.count))
    return tuple(out)


def _series(history: History) -> list[float]:
    """The bucket means on a dense grid; a missing bucket repeats the one before it."""
    if not history.buckets:
        return []
    first = history.buckets[0].at
    size = round((history.buckets[-1].at - first) / history.width) + 1
    values: list[float | None] = [None] * size
    for bucket in history.buckets:
        values[round((bucket.at - first) / history.width)] = bucket.mean
    filled: list[float] = []
    for value in values:
        filled.append(value if value is not None else filled[-1])
    return filled


def _correlation(
    prefix: Sequence[float], squares: Sequence[float], x: Sequence[float], lag: int
) -> float:
    """Pearson's correlation of x[:n − lag] with x[lag:] (0 when either is flat)."""
    n = len(x) - lag
    sum_a, sum_b = prefix[n], prefix[n + lag] - prefix[lag]
    sq_a, sq_b = squares[n], squares[n + lag] - squares[lag]
    cross = math.fsum(map(operator.mul, x[:n], x[lag:]))
    var_a = sq_a - sum_a * sum_a / n
    var_b = sq_b - sum_b * sum_b / n
    scale = max(1e-12, FLAT * (max(sum_a, sum_b) / n) ** 2) * n
    if var_a <= scale or var_b <= scale:
        return 0.0
    return (cross - sum_a * sum_b / n) / math.sqrt(var_a * var_b)


def period(*, history: History) -> tuple[float, float] | None:
    """(period in seconds, its correlation) the history shows, or None (module docstring)."""
    x = _series(history)
    width = history.width
    longest = min(PERIOD_MAX, len(x) * width / MIN_PERIODS)
    low = max(1, math.ceil(PERIOD_MIN / width))
    high = min(math.floor(longest / width), len(x) - MIN_OVERLAP)
    if high < low:
        return None
    prefix, squares = [0.0], [0.0]
    for value in x:
        prefix.append(prefix[-1] + value)
        squares.append(squares[-1] + value * value)
    dipped = False
    found: list[tuple[int, float]] = []
    for lag in range(1, high + 1):
        r = _correlation(prefix, squares, x, lag)
        if not dipped:
            dipped = r <= DIP
            continue
        if lag >= low:
            found.append((lag, r))
    if not found:
        return None
    best = max(r for _, r in found)
    if best < THRESHOLD:
        return None
    for index, (lag, r) in enumerate(found):
        after = found[index + 1][1] if index + 1 < len(found) else -math.inf
        before = found[index - 1][1] if index > 0 else -math.inf
        if r >= max(THRESHOLD, best - PEAK_SLACK) and r >= before and r >= after:
            return lag * width, r
    return None


def _phase_buckets(
    *, history: History, period: float, at: float, by_start: dict[float, Bucket] | None = None
) -> list[Bucket]:
    """The buckets within one bucket of the phase of `at` in each earlier period (all before
    `at`'s own bucket); `by_start` the history's buckets by start, when the caller has it."""
    if not history.buckets or period <= 0:
        return []
    width = history.width
    first, last = history.buckets[0].at, history.buckets[-1].at
    if by_start is None:
        by_start = {b.at: b for b in history.buckets}
    seen: list[Bucket] = []
    k = 1
    while at - k * period >= first - width:
        centre = math.floor((at - k * period) / width) * width
        if centre <= last + width:
            for step in (-1, 0, 1):
                bucket = by_start.get(centre + step * width)
                if bucket is not None and bucket.at < at - width / 2:
                    seen.append(bucket)
        k += 1
    return seen


def _agrees(bucket: Bucket, seen: Sequence[Bucket]) -> bool:
    """`bucket` lies within what the earlier periods showed at its phase, widened by
    `TOLERANCE` and the noise of a 1-minute count."""
    low = min(b.mean for b in seen)
    high = max(b.peak for b in seen)
    noise = NOISE_SIGMAS * math.sqrt(max(high, bucket.mean) / COUNT_WINDOW)
    return low * (1 - TOLERANCE) - noise <= bucket.mean <= high * (1 + TOLERANCE) + noise


def agreement(*, history: History, period: float) -> tuple[int, int]:
    """(agreeing, compared): the buckets of the last period (at least `MIN_OVERLAP` buckets)
    that lie within what the periods before showed at their phase, and how many could be
    compared."""
    if not history.buckets:
        return 0, 0
    by_start = {b.at: b for b in history.buckets}
    last = history.buckets[-1].at
    span = max(period, MIN_OVERLAP * history.width)
    agreeing = compared = 0
    for bucket in history.buckets:
        if bucket.at <= last - span:
            continue
        seen = _phase_buckets(history=history, period=period, at=bucket.at, by_start=by_start)
        if seen:
            compared += 1
            agreeing += _agrees(bucket, seen)
    return agreeing, compared


def predict(*, history: History, period: float, at: float) -> float | None:
    """The largest peak within one bucket of the phase of `at` in the earlier periods the
    history holds; None when it holds none."""
    seen = _phase_buckets(history=history, period=period, at=at)
    return max((b.peak for b in seen), default=None)


def holds(*, history: History, period: float, now: float) -> bool:
    """False when every bucket of the last `BREAK_WINDOW` seconds disagrees with what the
    earlier periods showed at its phase (module docstring); True otherwise, and when no
    recent bucket can be compared."""
    by_start = {b.at: b for b in history.buckets}
    compared = 0
    for bucket in history.buckets:
        if bucket.at <= now - BREAK_WINDOW - history.width:
            continue
        seen = _phase_buckets(history=history, period=period, at=bucket.at, by_start=by_start)
        if not seen:
            continue
        compared += 1
        if _agrees(bucket, seen):
            return True
    return compared == 0


def learn(*, history: History, now: float, fixed: float | None = None) -> Learnt:
    """The pattern the history shows at `now` (module docstring): `fixed` a period to use
    instead of searching one (it must still have been seen once and hold)."""
    span = (
        history.buckets[-1].at + history.width - history.buckets[0].at if history.buckets else 0.0
    )
    if fixed is not None:
        if span < fixed + history.width:
            return Learnt(None, f'no pattern yet ({span:.0f} s of history, period {fixed:.0f} s)')
        length, correlation = fixed, 1.0
    else:
        found = period(history=history)
        if found is None:
            return Learnt(
                None, f'no period in {span:.0f} s of history (none repeats with r ≥ {THRESHOLD})'
            )
        length, correlation = found
    agreeing, compared = agreement(history=history, period=length)
    if compared < MIN_OVERLAP or agreeing < AGREEMENT * compared:
        return Learnt(
            None,
            f'the {length:.0f}-s pattern broke or never held (only {agreeing} of the last '
            f'{compared} buckets agree with the periods before, fewer than {AGREEMENT:.0%})',
        )
    if not holds(history=history, period=length, now=now):
        return Learnt(
            None,
            f'the {length:.0f}-s pattern broke (the last {BREAK_WINDOW:.0f} s disagree with it)',
        )
    return Learnt(
        Pattern(period=length, correlation=correlation, history=history),
        f'period {length:.0f} s (r {correlation:.2f})',
    )
