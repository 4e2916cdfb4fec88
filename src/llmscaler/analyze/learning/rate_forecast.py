"""An upper quantile of a model's arrival rate over the horizon a scale-up needs.

Why: a replica asked for now serves only once it has started (scheduling, image pull, weights,
warm-up) and the next cycle has seen it; sizing on the rate observed now is sizing for the past.
The predictive analyzer (`policies.predictive.policy`) sizes instead for what the rate may be when
the replicas it asks for are ready: an upper quantile of a short-term forecast.

The forecast, from the samples of the last `trend_window` seconds (the newest included):

- two least-squares lines rate ≈ a + b·(t − now): one through the samples of the window, one
  through those of its last `CONFIRM_WINDOW` seconds (with fewer than `MIN_TREND_SAMPLES`, or
  samples all at one instant, b = 0 and a = their mean);
- the fit the forecast uses is the one with the smaller slope: a trend must be seen over the
  whole window *and* still be seen in its last minutes. A step followed by a plateau puts a
  steep line through the long window, but the plateau's short line is flat: extrapolating the
  long one bought twice the plateau's need for as long as the step stayed in the window. A
  steady ramp gives both lines the same slope, so it is still extrapolated;
- level = max(newest rate, a): a line fitted through a step lags it, and the newest rate is
  what the replicas see now;
- trend = max(0, b): a falling trend never lowers the bound (the bound is what scale-down is
  allowed to go to, and a fall that stops leaves a fleet sized for less than the load);
- spread σ = √(residual variance + level / RATE_WINDOW): the scatter of the samples about the
  chosen line, and at least the Poisson noise of a rate counted over RATE_WINDOW seconds (a few
  samples on a straight line are not proof that the next minute will be as quiet);
- upper = level + trend · reach + z_q · σ, with z_q the standard normal quantile of `quantile`
  and reach = min(horizon, the age of the oldest sample of the chosen fit): a trend is
  followed no further ahead than it has been seen. In a run's or a restart's first minutes the
  samples span less than the horizon; at the start of the Azure conversation trace a rise from
  9 to 27 req/s seen over 60 s was otherwise followed for 150 s, to 72 req/s, and bought two
  replicas the load never needed. The same holds for the confirming fit: a rise seen only in
  the last 90 s (a step, which the 1-minute rate shows as a minute's ramp) is followed 90 s
  ahead, not the whole horizon.

What fails: `forecast` raises ValueError on a quantile outside (0.5, 1), a negative or
non-finite horizon, or a non-finite `now`; samples that are not finite or not in the past
(at > now) are ignored. No samples: every figure is 0 (nothing is known to be arriving).
Pure: no clock, no I/O; the caller keeps the samples.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

from llmscaler.domain.basics import STRICT_KEYS, NonNegative

RATE_WINDOW = 60.0
"""Seconds over which an observed arrival rate is counted (`rate(...[1m])`)."""
MIN_TREND_SAMPLES = 3
"""Fewer samples give a level, not a line."""
TREND_WINDOW = 300.0
"""Seconds of samples the line is fitted to by default."""
CONFIRM_WINDOW = 120.0
"""Seconds at the end of the window in which a trend must still show (four 30-s cycles)."""


@dataclass(frozen=True, slots=True)
class RateSample:
    """One cycle's arrival rate of a model (req/s) at `at`, and what it was sized for then
    (`need`, req/s: the forecast's upper bound plus the backlog)."""

    __pydantic_config__ = STRICT_KEYS

    at: float
    rate: NonNegative
    need: NonNegative = 0.0
    draining: bool = False
    """A backlog was being drained then: requests that missed their targets in the minute after
    it were late for want of replicas, and say nothing of what a replica sustains."""


@dataclass(frozen=True, slots=True)
class Forecast:
    """The forecast's figures (req/s; `trend` in req/s per second)."""

    newest: float
    level: float
    trend: float
    sigma: float
    horizon: float
    upper: float


def forecast(
    *,
    samples: Sequence[RateSample],
    now: float,
    horizon: float,
    quantile: float,
    trend_window: float = TREND_WINDOW,
    confirm_window: float = CONFIRM_WINDOW,
) -> Forecast:
    """The upper `quantile` of the arrival rate up to `horizon` seconds after `now` (see the
    module docstring); `samples` in any order."""
    if not (0.5 < quantile < 1):
        raise ValueError(f'quantile must be in (0.5, 1), got {quantile!r}')
    if not (math.isfinite(horizon) and horizon >= 0):
        raise ValueError(f'horizon must be a finite number >= 0, got {horizon!r}')
    if not math.isfinite(now):
        raise ValueError(f'now must be finite, got {now!r}')
    usable = sorted(
        (s for s in samples if math.isfinite(s.at) and math.isfinite(s.rate) and s.at <= now),
        key=lambda s: (s.at, s.rate),
    )
    recent = [s for s in usable if s.at > now - trend_window]
    if not recent:
        return Forecast(newest=0.0, level=0.0, trend=0.0, sigma=0.0, horizon=horizon, upper=0.0)
    newest = recent[-1].rate
    confirming = [s for s in recent if s.at > now - min(trend_window, confirm_window)]
    # The fit with the smaller slope, and of two equal slopes the one seen for longer.
    (intercept, slope, residual), seen = min(
        ((_line(recent, now=now), recent), (_line(confirming, now=now), confirming)),
        key=lambda fit: (fit[0][1], fit[1][0].at),
    )
    level = max(newest, intercept)
    trend = max(0.0, slope)
    sigma = math.sqrt(residual + level / RATE_WINDOW)
    z = NormalDist().inv_cdf(quantile)
    # A trend is followed no further ahead than the samples it was fitted to span.
    reach = min(horizon, now - seen[0].at)
    upper = level + trend * reach + z * sigma
    return Forecast(
        newest=newest, level=level, trend=trend, sigma=sigma, horizon=horizon, upper=upper
    )


def _line(samples: Sequence[RateSample], *, now: float) -> tuple[float, float, float]:
    """(intercept at `now`, slope, residual variance) of the least-squares line."""
    n = len(samples)
    xs = [s.at - now for s in samples]
    ys = [s.rate for s in samples]
    mean_x = math.fsum(xs) / n
    mean_y = math.fsum(ys) / n
    sxx = math.fsum((x - mean_x) ** 2 for x in xs)
    if n < MIN_TREND_SAMPLES or sxx <= 0:
        spread = math.fsum((y - mean_y) ** 2 for y in ys) / n if n > 1 else 0.0
        return mean_y, 0.0, spread
    slope = math.fsum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / sxx
    intercept = mean_y - slope * mean_x
    residual = math.fsum(
        (y - intercept - slope * x) ** 2 for x, y in zip(xs, ys, strict=True)
    ) / max(1, n - 2)
    return intercept, slope, residual
