"""What a learnt period adds to a predictive cycle: the load it brings within the horizon, and a
fleet held through a silence the load returns from.

Why: the short-term forecast learns of a rise when it arrives; a rise the load has shown at the
same phase of earlier periods (`analyze.learning.recurring`) can be provisioned for a start-up
ahead, as the clairvoyant bound is. Two rules follow, both off with `periodic: off` and both
gone the moment the learner reports no pattern (too little history, no repeat, or the last
minutes disagree with the period: the present forecast alone sizes again):

- **Outlook** (`look`): the highest rate the period predicts from now to the horizon (start-up
  plus two cycles), sampled every bucket. While the pattern holds, the policy sizes (`sized`)
  for the larger of the short-term forecast's upper bound and the outlook's upper quantile
  (the Poisson noise of a 1-minute count about it, at the forecast's quantile): the period only
  adds what is due, it never sizes for less than the forecast would, so a pattern learnt by
  chance costs replicas, not requests. Load bought ahead of its arrival (`leads`) is bought as
  more of the variants that serve (`serving_only`): the capacities of a fleet in a lull are
  read on a few requests, and rebuilding the mix from them bought variants the load then found
  slow.
- **Silence** (`due`): a model receiving nothing goes to its minimum once it has been idle a
  scale-down delay; a burst returning after that meets a fleet at its floor, the costliest miss
  a policy makes. When the period brings load back within a start-up plus the scale-down delay,
  the fleet holds through the silence instead (the decision says so); further off, it goes to
  its minimum and the outlook buys the burst's replicas a start-up before it is due.

What fails: nothing raises. Pure.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from statistics import NormalDist
from typing import Final

from llmscaler.analyze.learning import recurring
from llmscaler.analyze.learning.rate_forecast import RATE_WINDOW, Forecast
from llmscaler.analyze.learning.recurring import History, Pattern
from llmscaler.config.resolved import PERIODIC_OFF, PredictiveConfig
from llmscaler.optimize.exact_mix import MixOption

DUE_RATE: Final = 0.1
"""A predicted rate (req/s) above this is load: below it, a few requests a minute, one replica
at its floor serves what comes."""


@dataclass(frozen=True, slots=True)
class Outlook:
    """The history with this cycle's rate, the pattern learnt from it (None: none, `why` says
    why), and the highest rate it predicts up to the horizon (0 without a pattern)."""

    history: History
    pattern: Pattern | None
    why: str
    rate: float


def look(
    *, config: PredictiveConfig, history: History, now: float, rate: float | None, ahead: float
) -> Outlook:
    """The outlook of one cycle (module docstring): `rate` the arrival rate seen now (None:
    unknown, not recorded), `ahead` the horizon in seconds."""
    if config.periodic == PERIODIC_OFF:
        return Outlook(history=History(), pattern=None, why='periodic: off', rate=0.0)
    if rate is not None:
        history = recurring.record(history=history, at=now, rate=rate)
    learnt = recurring.learn(history=history, now=now, fixed=config.period_seconds)
    if learnt.pattern is None:
        return Outlook(history=history, pattern=None, why=learnt.why, rate=0.0)
    peak = highest(pattern=learnt.pattern, start=now, end=now + ahead)
    return Outlook(history=history, pattern=learnt.pattern, why=learnt.why, rate=peak)


def sized(*, outlook: Outlook, forecast: Forecast, quantile: float) -> float:
    """The rate (req/s) a cycle sizes for (module docstring): the forecast's upper bound
    without a pattern."""
    if outlook.pattern is None:
        return forecast.upper
    return max(forecast.upper, _upper(outlook.rate, quantile))


def _upper(rate: float, quantile: float) -> float:
    return rate + NormalDist().inv_cdf(quantile) * math.sqrt(max(0.0, rate) / RATE_WINDOW)


def leads(*, outlook: Outlook, forecast: Forecast, quantile: float) -> bool:
    """The period, not the rate seen now, sets what this cycle sizes for: load is due that has
    not arrived."""
    if outlook.pattern is None:
        return False
    return _upper(outlook.rate, quantile) > _upper(forecast.level, quantile)


def serving_only(*, options: Sequence[MixOption], current: Mapping[str, int]) -> list[MixOption]:
    """`options` with no variant that serves nothing now allowed to grow, when some variant
    serves: load bought ahead of its arrival is bought as more of the variants that serve."""
    if not any(current.get(o.variant, 0) > 0 for o in options if o.rate > 0):
        return list(options)
    return [
        o
        if current.get(o.variant, 0) > 0 or o.rate <= 0
        else replace(o, high=min(o.high, current.get(o.variant, 0)))
        for o in options
    ]


def highest(*, pattern: Pattern, start: float, end: float) -> float:
    """The highest rate `pattern` predicts in [start, end], sampled every bucket (0: none)."""
    width = pattern.history.width
    steps = max(0, math.ceil((end - start) / width))
    rates = (pattern.predict(at=min(end, start + i * width)) for i in range(steps + 1))
    return max((r for r in rates if r is not None), default=0.0)


def due(*, outlook: Outlook, now: float, within: float) -> tuple[float, float] | None:
    """(seconds until, rate) of the first bucket within `within` seconds the period brings more
    than `DUE_RATE` req/s, or None (no pattern, or nothing due)."""
    pattern = outlook.pattern
    if pattern is None:
        return None
    width = pattern.history.width
    for i in range(max(0, math.ceil(within / width)) + 1):
        offset = min(within, i * width)
        rate = pattern.predict(at=now + offset)
        if rate is not None and rate > DUE_RATE:
            return offset, rate
    return None


def silence_reason(*, outlook: Outlook, until: float, rate: float, within: float) -> str:
    """The reason of a fleet held through a silence."""
    period = outlook.pattern.period if outlook.pattern is not None else math.nan
    return (
        f'idle, but the {period:.0f}-s period brings {rate:.3g} req/s back in {until:.0f} s '
        f'(within a start-up and the scale-down delay, {within:.0f} s): the fleet holds '
        'through the silence'
    )
