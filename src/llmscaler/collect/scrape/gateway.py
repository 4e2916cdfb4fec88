"""The gateway (EPP) figures of the pod-scraping source: arrival rates and the flow-control queue.

Why: `collect.scrape.reading` answers the registry's queries from the scraped windows; the
gateway's part of them is here: per (namespace, pod_name, model) the 1-min rate of
`inference_extension_scheduler_attempts_total{status="success"}` (summed per pod and per
model), and per model the present `inference_extension_flow_control_queue_size` / `_bytes`
series. The arrival rates feed the SLO and predictive analyzers' demand.

A rate counts the whole minute or is unknown: where Prometheus' rule takes a series to start
inside the minute (its first sample there more than 1.1 steps after the minute's start) but
the counter's first value is not 0, it was counting before its scraping began or resumed, and
the rate (the part's increase over the whole minute) understates it: a gateway counting
6 dispatches/s read as 1.6/s 18 s into scraping it. Such a rate is None here, and so is any sum
it is part of. An understated rate invites a scale-down; an unknown one holds.

The queue is the sum of the present series, 0 without any (a gateway without flow control). An
EPP page that failed leaves its series out of the sum, as Prometheus' staleness does after a
failed scrape; the failure is reported as the page's error, but the sum cannot tell it from an
emptied queue (the Prometheus source's failed *query*, by contrast, reads None and holds).

What fails: nothing raises; pure (no I/O, no clock: `now` is passed in).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from llmscaler.collect.readings import ModelReading, ModelScope
from llmscaler.collect.windows import SeriesWindow

Labels = tuple[tuple[str, str], ...]

LOOKBACK = 300.0
"""Prometheus' instant-query lookback: a present series older than this is not returned."""
ATTEMPTS = 'inference_extension_scheduler_attempts_total'
QUEUE_FIELDS = {
    'inference_extension_flow_control_queue_size': 'queue_size',
    'inference_extension_flow_control_queue_bytes': 'queue_bytes',
}


@dataclass(frozen=True, slots=True)
class SeriesView:
    """One kept series as the reading sees it; `model`: its model_name label or the hint."""

    namespace: str
    pod: str
    model: str
    name: str
    labels: Labels
    window: SeriesWindow
    present: bool

    def label(self, name: str) -> str:
        return dict(self.labels).get(name, '')

    def instant(self, now: float) -> tuple[float, float] | None:
        """What an instant query returns: only series on the last good page, 5-min lookback."""
        return self.window.latest(now=now, seconds=LOOKBACK) if self.present else None


AttemptRates = dict[tuple[str, str, str], tuple[float | None, float]]
ATTEMPT_WINDOW = 60.0
"""Seconds of the arrival rates' window (`rate(...[1m])`)."""


def measured_rate(*, window: SeriesWindow, now: float) -> float | None:
    """The 1-min rate, None when it would count only the part of the minute seen: the series
    seems to start inside the minute but its first value there
    is not 0, so it was counting before (`SeriesWindow.measures_whole`)."""
    rate = window.rate(now=now, seconds=ATTEMPT_WINDOW)
    if rate is None or window.measures_whole(now=now, seconds=ATTEMPT_WINDOW):
        return rate
    return None


def attempt_rates(
    *, views: list[SeriesView], in_scope: set[tuple[str, str]], now: float
) -> AttemptRates:
    """(namespace, pod_name, target model) → (1-min rate of successful attempts, newest time);
    the rate is None when one of the series summed is not measured over the whole minute."""
    namespaces = {ns for ns, _ in in_scope}
    models = {model for _, model in in_scope}
    rates: AttemptRates = {}
    for view in views:
        key = (view.label('namespace'), view.label('pod_name'), view.label('target_model_name'))
        if view.name != ATTEMPTS or view.label('status') != 'success':
            continue
        if key[0] not in namespaces or key[2] not in models:
            continue
        if len(view.window.in_range(now=now, seconds=ATTEMPT_WINDOW)) < 2:
            continue  # no rate at all, as Prometheus gives none: the series is not summed
        rate = measured_rate(window=view.window, now=now)
        total, newest = rates.get(key, (0.0, -math.inf))
        summed = None if total is None or rate is None else total + rate
        rates[key] = (summed, max(newest, newest_time(window=view.window, now=now)))
    return rates


def sum_rates(*, rates: list[float | None]) -> float | None:
    """The sum, or None when a part is unknown (a partial sum would understate the load)."""
    return None if any(rate is None for rate in rates) else math.fsum(r or 0.0 for r in rates)


def model_reading(
    *,
    entry: ModelScope,
    views: list[SeriesView],
    attempts: AttemptRates,
    count: tuple[float, float] | None,
    now: float,
) -> ModelReading | None:
    """The model's gateway figures (queue, arrival rate) and its request count, with the
    newest sample's time; None when it has none."""
    figures: dict[str, tuple[float, float]] = {}

    def add(name: str, value: float, t: float) -> None:
        total, newest = figures.get(name, (0.0, -math.inf))
        figures[name] = (total + value, max(newest, t))

    for view in views:
        field_name = QUEUE_FIELDS.get(view.name)
        found = view.instant(now)
        if field_name and found and view.label('target_model_name') == entry.model_id:
            add(field_name, found[1], found[0])
    arrivals = [
        (rate, newest)
        for (namespace, _, model), (rate, newest) in sorted(attempts.items())
        if (namespace, model) == (entry.namespace, entry.model_id)
    ]
    unmeasured = False
    if arrivals:
        rate = sum_rates(rates=[rate for rate, _ in arrivals])
        newest = max(t for _, t in arrivals)
        # Seen but not yet measured over a minute: the model is read, its rate unknown.
        add('arrival_rate', 0.0 if rate is None else rate, newest)
        unmeasured = rate is None
    if count is not None:
        add('request_count', *count)
    if not figures:
        return None
    values = {name: value for name, (value, _) in sorted(figures.items())}
    return ModelReading(
        model_id=entry.model_id,
        namespace=entry.namespace,
        observed_at=max(t for _, t in figures.values()),
        **{**values, 'arrival_rate': None} if unmeasured else values,
    )


def newest_time(*, window: SeriesWindow, now: float) -> float:
    """The time of the newest sample kept, -inf without one."""
    found = window.latest(now=now, seconds=window.horizon)
    return found[0] if found is not None else -math.inf
