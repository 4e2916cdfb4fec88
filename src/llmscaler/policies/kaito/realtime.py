"""Kaito's realtime scaler, as a pure function.

Source: Kaito's LLMAutoScaler proposal (kaito-project/kaito,
docs/proposals/20250602-auto-scaler-for-inference-workloads.md, "Realtime Scaler Pseudocode").

Why: the proposal's metric-based scaler is a deliberately slow, step-wise controller for expensive
GPU replicas: one replica at a time, a scale-up only after the metric stayed above its High
threshold for the up window, a scale-down only after it stayed below Low for the down window, and
long cooldowns after any scaling. It is one of the peers the simulator compares, and the
controller serves it for `LLMAutoScaler` objects, so it lives here once, line by line as the
proposal writes it:

    calculateDesiredReplicas: the highest calculateReplicasForMetric(metric) over the metrics
    calculateReplicasForMetric (the history is updated with the current value afterwards):
        elapsed = now - lastScaleTime
        if value > High:
            if upWindow > 0 and min(history within upWindow) <= High: return current
            if elapsed > upCooldown: return min(current + upStep, max)
        if value < Low:
            if downWindow > 0 and max(history within downWindow) >= Low: return current
            if elapsed > downCooldown: return max(current - downStep, min)
        return current
    filterMetricsWithinWindow: samples whose time is strictly after now - window
    updateMetricsHistory: the current value overwrites the last sample older than both windows,
        else it is appended (so the history stays as long as the longer window)

With the defaults (windows 30 s / 300 s, a reading every 15 s) the window holds the previous 1 and
19 readings: with the current value that is the proposal's "2 and 20 consecutive periods".

Readings and missing pods: the scraper averages each metric over the target's pods; a pod whose
value could not be read counts 0 in the scale-up direction and the metric's High threshold in the
scale-down direction (the proposal's "Metrics Scraper"). So a `MetricReading` carries both averages:
`up_value` (missing pods at 0) is compared with High and kept for the up window, `down_value`
(missing pods at High) with Low and kept for the down window; they are equal when every pod
reported. A metric no pod reported has `up_value` 0 and `down_value` High: it can neither scale
up nor down (and its readings keep blocking both windows until real ones fill them).

One deliberate difference: the proposal's `calculateDesiredReplicas` starts from the current count
and keeps a metric's answer only when it is higher, so a scale-down (always below the current
count) could never be returned and the scaler would never scale down, contrary to its own table
of scale-down defaults. Here the answer is the highest of the metrics' answers, as the CRD's
comment says ("calculate the desired replicas for each metric and choose the highest value"):
one metric asking to go down while another holds still holds.

Where the proposal leaves a case open, and what is done here:
- no `lastScaleTime` (never scaled): the cooldown has elapsed (Go's zero time is long ago);
- a window that is not full yet: the pseudocode takes the min (max) of whatever the window holds,
  so right after a start (or after readings stopped) one earlier reading below Low is enough to
  scale down, not the table's "20 consecutive periods" (and `min` of nothing is undefined). Here a
  window counts only when it holds the earlier readings of the whole window, `window / interval`
  − 1 of them: 1 for 30 s and 19 for 300 s at the proposal's 15 s interval, which with the current
  reading are the table's 2 and 20 consecutive periods (a window no longer than the interval
  needs none: the current reading alone decides). A missed reading delays the step by a period;
- the result is not clamped when nothing happens (the pseudocode returns the current count);
  `policies.kaito.autoscaler.decide_llmautoscaler` clamps the final answer to [min, max].

Pure: `now` and the history are arguments; the new history is returned. Metrics are processed in
the order given; the result does not depend on it (a maximum), and the history is keyed by
`MetricReading.key`, returned sorted.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final


@dataclass(frozen=True, slots=True)
class ScalerRule:
    """Step, cooldown and stabilization window of one direction (seconds)."""

    step: int
    cooldown_seconds: float
    stabilization_window_seconds: float


DEFAULT_SCALE_UP: Final = ScalerRule(step=1, cooldown_seconds=600, stabilization_window_seconds=30)
DEFAULT_SCALE_DOWN: Final = ScalerRule(
    step=1, cooldown_seconds=1800, stabilization_window_seconds=300
)
SCRAPE_INTERVAL_SECONDS: Final = 15.0
"""How often the proposal's scraper reads the pods, and so how often the scaler runs."""


@dataclass(frozen=True, slots=True)
class MetricReading:
    """One metric of one cycle: its thresholds and its averages over the target's pods."""

    key: str
    """Identity of the metric in the history (its name and where it is read)."""
    high: float
    low: float
    up_value: float
    """The average with missing pods at 0 (compared with `high`)."""
    down_value: float
    """The average with missing pods at `high` (compared with `low`)."""

    @classmethod
    def of(
        cls, *, key: str, high: float, low: float, values: Sequence[float | None]
    ) -> MetricReading:
        """The reading of per-pod `values` (None: the pod did not report it), averaged as the
        scraper averages them (`average`)."""
        up, down = average(values=values, high=high)
        return cls(key=key, high=high, low=low, up_value=up, down_value=down)


@dataclass(frozen=True, slots=True)
class Sample:
    t: float
    up: float
    down: float


History = Mapping[str, tuple[Sample, ...]]


@dataclass(frozen=True, slots=True)
class RealtimeResult:
    desired: int
    history: tuple[tuple[str, tuple[Sample, ...]], ...]
    reasons: tuple[str, ...]
    """One line per metric that asked for a change or was held back from one."""


def average(*, values: Sequence[float | None], high: float) -> tuple[float, float]:
    """(up, down) averages of per-pod values; None (missing) counts 0 up and `high` down.

    No pods at all gives (0, high): nothing to scale on in either direction.
    """
    if not values:
        return 0.0, high
    up = sum(v if v is not None else 0.0 for v in values) / len(values)
    down = sum(v if v is not None else high for v in values) / len(values)
    return up, down


def _needed(window: float, interval: float) -> int:
    """Earlier readings a full window holds: 1 for 30 s, 19 for 300 s, 0 for 15 s or less, at
    15 s a reading."""
    if not (math.isfinite(interval) and interval > 0):
        return 1
    return max(0, math.ceil(window / interval - 1e-9) - 1)


def _within(samples: Sequence[Sample], *, now: float, window: float) -> list[Sample]:
    start = now - window
    return [s for s in samples if s.t > start]


def _updated(
    samples: tuple[Sample, ...], *, sample: Sample, up: float, down: float
) -> tuple[Sample, ...]:
    up_start, down_start = sample.t - up, sample.t - down
    stale = None
    for index, old in enumerate(samples):
        if old.t < up_start and old.t < down_start:
            stale = index
    if stale is None:
        return (*samples, sample)
    return (*samples[:stale], sample, *samples[stale + 1 :])


def _for_metric(
    *,
    metric: MetricReading,
    current: int,
    min_replicas: int,
    max_replicas: int,
    up: ScalerRule,
    down: ScalerRule,
    elapsed: float,
    samples: Sequence[Sample],
    now: float,
    interval: float,
) -> tuple[int, str]:
    if metric.up_value > metric.high:
        if up.stabilization_window_seconds > 0:
            window = _within(samples, now=now, window=up.stabilization_window_seconds)
            short = len(window) < _needed(up.stabilization_window_seconds, interval)
            if short or (window and min(s.up for s in window) <= metric.high):
                return current, (
                    f'{metric.key} {metric.up_value:g} > high {metric.high:g}: not yet for '
                    f'{up.stabilization_window_seconds:g}s'
                )
        if elapsed > up.cooldown_seconds:
            return min(current + up.step, max_replicas), (
                f'{metric.key} {metric.up_value:g} > high {metric.high:g}: up {up.step}'
            )
        held_up = (
            f'{metric.key} {metric.up_value:g} > high {metric.high:g}: in the '
            f'{up.cooldown_seconds:g}s up cooldown'
        )
    else:
        held_up = ''
    if metric.down_value < metric.low:
        if down.stabilization_window_seconds > 0:
            window = _within(samples, now=now, window=down.stabilization_window_seconds)
            short = len(window) < _needed(down.stabilization_window_seconds, interval)
            if short or (window and max(s.down for s in window) >= metric.low):
                return current, held_up or (
                    f'{metric.key} {metric.down_value:g} < low {metric.low:g}: not yet for '
                    f'{down.stabilization_window_seconds:g}s'
                )
        if elapsed > down.cooldown_seconds:
            return max(current - down.step, min_replicas), (
                f'{metric.key} {metric.down_value:g} < low {metric.low:g}: down {down.step}'
            )
        return current, held_up or (
            f'{metric.key} {metric.down_value:g} < low {metric.low:g}: in the '
            f'{down.cooldown_seconds:g}s down cooldown'
        )
    return current, held_up


def calculate_desired_replicas(
    *,
    current_replicas: int,
    metrics: Sequence[MetricReading],
    min_replicas: int,
    max_replicas: int,
    scale_up: ScalerRule = DEFAULT_SCALE_UP,
    scale_down: ScalerRule = DEFAULT_SCALE_DOWN,
    last_scale_time: float | None,
    history: History,
    now: float,
    interval: float = SCRAPE_INTERVAL_SECONDS,
) -> RealtimeResult:
    """The realtime scaler's desired replicas and the history for the next call.

    Raises ValueError for a `now` that is not finite. A reading whose values or thresholds are
    not finite numbers takes no part (it can neither scale nor enter the history).
    """
    if not math.isfinite(now):
        raise ValueError(f'now must be a finite number of seconds, got {now!r}')
    elapsed = math.inf if last_scale_time is None else now - last_scale_time
    wanted_by_metric: list[int] = []
    reasons: list[str] = []
    kept: dict[str, tuple[Sample, ...]] = {key: tuple(v) for key, v in history.items()}
    for metric in metrics:
        figures = (metric.high, metric.low, metric.up_value, metric.down_value)
        if not all(math.isfinite(x) for x in figures):
            reasons.append(f'{metric.key}: not a finite reading, ignored')
            continue
        samples = kept.get(metric.key, ())
        wanted, why = _for_metric(
            metric=metric,
            current=current_replicas,
            min_replicas=min_replicas,
            max_replicas=max_replicas,
            up=scale_up,
            down=scale_down,
            elapsed=elapsed,
            samples=samples,
            now=now,
            interval=interval,
        )
        # The proposal's `defer updateMetricsHistory`: the window above saw only earlier readings.
        kept[metric.key] = _updated(
            samples,
            sample=Sample(t=now, up=metric.up_value, down=metric.down_value),
            up=scale_up.stabilization_window_seconds,
            down=scale_down.stabilization_window_seconds,
        )
        if why:
            reasons.append(why)
        wanted_by_metric.append(wanted)
    desired = max(wanted_by_metric) if wanted_by_metric else current_replicas
    return RealtimeResult(
        desired=desired, history=tuple(sorted(kept.items())), reasons=tuple(reasons)
    )
