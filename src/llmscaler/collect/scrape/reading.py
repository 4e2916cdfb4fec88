"""The pod-scraping source's figures: WVA's queries answered from locally kept windows.

Why: the pod-scraping source (`collect.scrape.source`) must hand attribution and the core the same
`Reading` as the Prometheus source computes with WVA's queries (`collect.prometheus.queries`), so
that they cannot tell the sources apart. The scraper keeps the recent samples of every pod in
windows (`collect.windows`); this module is the other half, pure: no I/O, no clock (`now` is passed
in), it evaluates the registry's queries over those windows.

Correspondence with the PromQL registry (M = the pod's series of model m in namespace n; a series
without `model_name` counts as the target's `model_name` hint; "present" = on the last successful
page of that pod, newest sample at most 5 min old, as Prometheus' staleness and lookback have it):

query                   computed here
----------------------  ----------------------------------------------------------------------
kv_cache_usage          per engine label set: 1-min max of vllm:kv_cache_usage_perc, else of
                        vllm:gpu_cache_usage_perc (`A or B`); then the max over the engines
queue_length            max over engines of the 1-min max of vllm:num_requests_waiting
running                 max over engines of the present vllm:num_requests_running
cache_config_info       present series of the pod, any model; positive integer num_gpu_blocks and
                        block_size labels; the smallest capacity (blocks × size) wins
avg_input/output_tokens sum of 5-min rates of x_sum / sum of 5-min rates of x_count over engines
prefix_cache_hit_rate   the same ratio over prefix_cache_{hits,queries}_total, else over the
                        gpu_prefix_cache_* names; 5 min
avg_ttft / avg_itl      the ratio over 1 min; ITL from inter_token_latency_seconds, else from
                        time_per_output_token_seconds
pod_arrival_rate        EPP pages: sum by (namespace, pod_name) of the 1-min rate of
                        inference_extension_scheduler_attempts_total{status="success"} whose
                        namespace and target_model_name are in scope; None where only part
                        of the minute of a counting series was seen (below)
first_token_rate        sum over engines of the 1-min rate of
                        vllm:time_to_first_token_seconds_count, same rule: the arrival rate of
                        a pod without a gateway series
scheduler_queue_size /  EPP pages: sum of the present inference_extension_flow_control_queue_size
  _bytes                (/_bytes) series of target_model_name = m; no namespace label exists, so
                        the figure applies to m in every namespace in scope
model_arrival_rate      EPP pages: sum by (namespace, target_model_name) of the same 1-min rates
model_request_count     sum over the model's pods (gone ones too) and finished_reason series of
                        increase(vllm:request_success_total[retention])
ttft_ / tpot_histogram  per le, sum over engines of the 1-min increase of the bucket series,
                        whole-minute only and None after a counter reset (`collect.histograms`);
                        only for the models whose analyzer reads them (`latency_histograms`)

Pods and models are kept as the Prometheus source keeps them: a pod with a KV-usage or queue-length
series in its 1-min window, one `PodReading` per (namespace, pod), figures of several in-scope
models of one pod combined by max; a `ModelReading` per in-scope model with any figure. A ratio
whose denominator did not grow (Prometheus: NaN) is None. `observed_at` is the newest sample used
(the Prometheus source has the evaluation time there). NaN samples are not stored, so a pod whose
only KV and queue samples were NaN is not kept, where Prometheus would keep it with None figures.

What Prometheus has and a young scraper has not is history, so the request count is None (which
forbids scale-to-zero) until targets have been scraped for the whole retention period, and None
with a PARTIAL_DATA error when the retention exceeds `history`, the seconds of counter history
kept. Likewise an arrival rate (pod or model) is None, not the part-minute figure Prometheus
would give for a series it only just began to scrape (a gateway that had counted 6 dispatches/s
for an hour read as 1.6/s 18 s into scraping it), during the first minute after the scraper
starts or a gateway comes back from a gap (`collect.scrape.gateway`). A low arrival rate would
invite a scale-down; a missing one holds. Scope entries without a model or a namespace are
ignored; of two entries for one model the longest valid retention counts; a retention that is
not a positive finite number gives no count. Nothing raises.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from llmscaler.collect import histograms
from llmscaler.collect.readings import ErrorReason, ModelScope, PodReading, Reading, SourceError
from llmscaler.collect.scrape.gateway import (
    ATTEMPT_WINDOW,
    AttemptRates,
    SeriesView,
    attempt_rates,
    measured_rate,
    model_reading,
    newest_time,
    sum_rates,
)
from llmscaler.collect.windows import SeriesWindow
from llmscaler.domain.snapshot import LatencyHistogram

Kind = Literal['vllm', 'epp']
Labels = tuple[tuple[str, str], ...]
SeriesKey = tuple[str, Labels]

REQUEST_SUCCESS = 'vllm:request_success_total'
"""The counter of the request count, the one series kept for longer than the others."""


@dataclass(slots=True)
class PodSeries:
    """What is kept of one scraped pod: a window per series, and the series of its last page.

    The windows are kept as their records (`SeriesWindow.record`), so that the garbage collector
    walks none of them. `hint` is the target's model name, for series without a `model_name`
    label. `present_at` is the time of the pod's last successful page, None after a failed
    scrape (Prometheus marks a failed target's series stale): a series is on that page when its
    window was last seen then (`presents`). A time rather than the set of the page's series,
    because such a set would hold a copy of every key each scrape (the page's own, equal to the
    kept ones) for the garbage collector to walk: at 128 labels a series, a third of a million
    containers a page.
    """

    kind: Kind
    hint: str
    series: dict[SeriesKey, bytearray] = field(default_factory=dict)
    present_at: float | None = None
    chars: int = 0
    """Characters of the kept series' `name{labels}` texts (the scraper's per-pod cap)."""

    def presents(self, window: SeriesWindow) -> bool:
        """Whether the series of `window` (one of this pod's) was on the last successful page."""
        return self.present_at is not None and window.last_seen == self.present_at


def compute_reading(
    *,
    pods: Mapping[tuple[str, str], PodSeries],
    scope: tuple[ModelScope, ...],
    now: float,
    history: float,
    scraping_since: float | None,
    errors: tuple[SourceError, ...] = (),
    dropped_non_finite: int = 0,
) -> Reading:
    """The figures of the models in `scope` at `now`, from the windows of the (namespace, pod)s.

    `history` is how many seconds of request counters are kept and `scraping_since` when the
    targets were first scraped (None: never); `errors` and `dropped_non_finite` (the last
    scrape's) lead the reading's own.
    """
    models = _normalize(scope)
    in_scope = {(entry.namespace, entry.model_id) for entry in models}
    views: dict[Kind, list[SeriesView]] = {'vllm': [], 'epp': []}
    counters: dict[tuple[str, str], list[SeriesWindow]] = {}
    for key in sorted(pods):
        pod = pods[key]
        for (name, labels), record in sorted(pod.series.items()):
            window = SeriesWindow.of(record)
            model = dict(labels).get('model_name', pod.hint)
            if name == REQUEST_SUCCESS and pod.kind == 'vllm':
                counters.setdefault((key[0], model), []).append(window)
                continue
            present = pod.presents(window)
            views[pod.kind].append(SeriesView(*key, model, name, labels, window, present))
    attempts = attempt_rates(views=views['epp'], in_scope=in_scope, now=now)
    found_errors = list(errors)
    readings = []
    for entry in models:
        count, error = _request_count(
            entry=entry,
            windows=counters.get((entry.namespace, entry.model_id), []),
            now=now,
            history=history,
            since=scraping_since,
        )
        found_errors.extend([error] if error is not None else [])
        reading = model_reading(
            entry=entry, views=views['epp'], attempts=attempts, count=count, now=now
        )
        readings.extend([reading] if reading is not None else [])
    return Reading(
        pods=_pod_readings(
            views=views['vllm'],
            in_scope=in_scope,
            readers={(e.namespace, e.model_id) for e in scope if e.latency_histograms},
            attempts=attempts,
            now=now,
        ),
        models=tuple(readings),
        errors=tuple(found_errors),
        dropped_non_finite=dropped_non_finite,
    )


def _request_count(
    *,
    entry: ModelScope,
    windows: list[SeriesWindow],
    now: float,
    history: float,
    since: float | None,
) -> tuple[tuple[float, float] | None, SourceError | None]:
    """sum(increase(vllm:request_success_total[retention])) and its newest sample time."""
    retention = entry.retention_period
    if not math.isfinite(retention) or retention <= 0:
        return None, None
    if retention > history:
        message = f'retention {retention:g}s exceeds the {history:g}s of history kept'
        return None, SourceError('model_request_count', ErrorReason.PARTIAL_DATA, message)
    if since is None or now - since < retention:
        return None, None
    found = [
        (increase, newest_time(window=window, now=now))
        for window in windows
        if (increase := window.increase(now=now, seconds=retention)) is not None
    ]
    if not found:
        return None, None
    return (sum(value for value, _ in found), max(t for _, t in found)), None


def _normalize(scope: tuple[ModelScope, ...]) -> tuple[ModelScope, ...]:
    """Entries with a model and a namespace; a duplicate keeps its longest valid retention."""

    def rank(entry: ModelScope) -> float:
        valid = math.isfinite(entry.retention_period) and entry.retention_period > 0
        return entry.retention_period if valid else -1.0

    kept: dict[tuple[str, str], ModelScope] = {}
    for entry in scope:
        key = (entry.namespace, entry.model_id)
        if all(key) and (key not in kept or rank(entry) > rank(kept[key])):
            kept[key] = entry
    return tuple(kept[key] for key in sorted(kept))


_Windows = dict[Labels, SeriesView]


def _pod_readings(
    *,
    views: list[SeriesView],
    in_scope: set[tuple[str, str]],
    readers: set[tuple[str, str]],
    attempts: AttemptRates,
    now: float,
) -> tuple[PodReading, ...]:
    """One reading per pod; the latency histograms only for the models in `readers` (those
    whose analyzer reads them, as the Prometheus source asks for them)."""
    pods: dict[tuple[str, str], dict[str, dict[str, _Windows]]] = {}
    configs: dict[tuple[str, str], list[SeriesView]] = {}
    for view in views:
        key = (view.namespace, view.pod)
        if view.name == 'vllm:cache_config_info':
            configs.setdefault(key, []).append(view)
        elif (view.namespace, view.model) in in_scope:
            by_name = pods.setdefault(key, {}).setdefault(view.model, {})
            by_name.setdefault(view.name, {})[view.labels] = view
    parts: dict[tuple[str, str], list[float | None]] = {}
    for (namespace, pod, _), (rate, _) in sorted(attempts.items()):
        if pod:
            parts.setdefault((namespace, pod), []).append(rate)
    arrivals = {key: sum_rates(rates=rates) for key, rates in parts.items()}
    readings = []
    for key in sorted(pods):
        figures: dict[str, float] = {}
        kept = []
        for model in sorted(pods[key]):
            found = _model_figures(pods[key][model], now)
            kept.extend([model] if found else [])
            for name, value in found.items():
                figures[name] = max(value, figures.get(name, -math.inf))
        if not kept:
            continue
        admitted = figures.pop('first_token_rate', None)
        blocks, size, seen = _cache_config(configs.get(key, []), now)
        newest = max(
            newest_time(window=view.window, now=now)
            for model in kept
            for by_labels in pods[key][model].values()
            for view in by_labels.values()
        )
        latencies = _histograms(
            key, [pods[key][model] for model in kept if (key[0], model) in readers], now
        )
        readings.append(
            PodReading(
                namespace=key[0],
                pod=key[1],
                observed_at=max(newest, seen),
                model_name=kept[0],
                labels=(('model_name', kept[0]),),
                num_gpu_blocks=blocks,
                block_size=size,
                # The gateway's dispatches (None: not measured yet); without a gateway series
                # for the pod, its own admissions.
                arrival_rate=arrivals.get(key, admitted),
                ttft_histogram=latencies['ttft_histogram'],
                tpot_histogram=latencies['tpot_histogram'],
                **figures,
            )
        )
    return tuple(readings)


def _histograms(
    key: tuple[str, str], models: list[dict[str, _Windows]], now: float
) -> dict[str, LatencyHistogram | None]:
    """The pod's latency histograms over its kept models' bucket series (every engine's)."""
    return {
        field_name: histograms.window_histogram(
            pod=f'{key[0]}/{key[1]}',
            family=name,
            series=[(v.label('le'), v.window) for m in models for v in m.get(name, {}).values()],
            now=now,
        )
        for name, field_name in histograms.FIELDS.items()
    }


def _model_figures(names: dict[str, _Windows], now: float) -> dict[str, float]:
    """One model's figures on one pod by `PodReading` field; empty without KV or queue."""
    get = names.get
    kv = _max_over(get('vllm:kv_cache_usage_perc', {}), get('vllm:gpu_cache_usage_perc', {}), now)
    queue = _max_over(get('vllm:num_requests_waiting', {}), {}, now)
    if kv is None and queue is None:
        return {}
    running = [
        sample[1]
        for view in get('vllm:num_requests_running', {}).values()
        if (sample := view.instant(now)) is not None
    ]
    hits = ('_hits_total', '_queries_total')
    found: dict[str, float | None] = {
        'kv_usage': kv,
        'queue_length': queue,
        'running_requests': max(running) if running else None,
        'avg_input_tokens': _ratio(names, 'vllm:request_prompt_tokens', 300.0, now)[1],
        'avg_output_tokens': _ratio(names, 'vllm:request_generation_tokens', 300.0, now)[1],
        'prefix_cache_hit_rate': _either(
            _ratio(names, 'vllm:prefix_cache', 300.0, now, parts=hits),
            _ratio(names, 'vllm:gpu_prefix_cache', 300.0, now, parts=hits),
        ),
        'avg_ttft': _ratio(names, 'vllm:time_to_first_token_seconds', 60.0, now)[1],
        'first_token_rate': _counter_rate(
            names.get('vllm:time_to_first_token_seconds_count', {}), now
        ),
        'avg_itl': _either(
            _ratio(names, 'vllm:inter_token_latency_seconds', 60.0, now),
            _ratio(names, 'vllm:time_per_output_token_seconds', 60.0, now),
        ),
    }
    return {
        name: value for name, value in found.items() if value is not None and math.isfinite(value)
    }


def _max_over(new: _Windows, old: _Windows, now: float) -> float | None:
    """max over engines of (max_over_time(new[1m]) or max_over_time(old[1m]))."""
    values = []
    for labels in sorted(set(new) | set(old)):
        value = new[labels].window.max_over(now=now, seconds=60.0) if labels in new else None
        if value is None and labels in old:
            value = old[labels].window.max_over(now=now, seconds=60.0)
        if value is not None:
            values.append(value)
    return max(values) if values else None


def _ratio(
    names: dict[str, _Windows],
    family: str,
    seconds: float,
    now: float,
    *,
    parts: tuple[str, str] = ('_sum', '_count'),
) -> tuple[bool, float | None]:
    """sum of rates of family+parts[0] / sum of rates of family+parts[1] over the engines.

    (whether PromQL has a result at all, its value or None where it is NaN or ±Inf)
    """
    sums = []
    for part in parts:
        rates = [
            v.window.rate(now=now, seconds=seconds) for v in names.get(family + part, {}).values()
        ]
        known = [rate for rate in rates if rate is not None]
        if not known:
            return False, None
        sums.append(sum(known))
    return True, (sums[0] / sums[1] if sums[1] else None)


def _counter_rate(engines: _Windows, now: float) -> float | None:
    """sum over engines of rate(counter[1m]), measured over the whole minute (as the gateway's
    arrival rates are); None where an engine's rate is not, or no engine has one."""
    rates = [
        measured_rate(window=view.window, now=now)
        for view in engines.values()
        if len(view.window.in_range(now=now, seconds=ATTEMPT_WINDOW)) >= 2
    ]
    return sum_rates(rates=rates) if rates else None


def _either(first: tuple[bool, float | None], second: tuple[bool, float | None]) -> float | None:
    """PromQL `first or second`: the second only where the first has no result at all."""
    return first[1] if first[0] else second[1]


def _cache_config(views: list[SeriesView], now: float) -> tuple[int | None, int | None, float]:
    """(num_gpu_blocks, block_size, sample time) of the smallest present capacity."""
    best: tuple[int, int] | None = None
    seen = -math.inf
    for view in views:
        found = view.instant(now)
        blocks = _positive_int(view.label('num_gpu_blocks'))
        size = _positive_int(view.label('block_size'))
        if found is None or blocks is None or size is None:
            continue
        seen = max(seen, found[0])
        if best is None or blocks * size < best[0] * best[1]:
            best = (blocks, size)
    return (best[0], best[1], seen) if best is not None else (None, None, seen)


def _positive_int(text: str) -> int | None:
    try:
        value = int(text)
    except ValueError:
        return None
    return value if value > 0 else None
