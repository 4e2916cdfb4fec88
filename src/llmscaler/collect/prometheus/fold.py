"""Prometheus answers folded: the decoded series of one cycle's queries into one `Reading`.

Why: `collect.prometheus.source` runs the registry's queries and `collect.prometheus.answers`
decodes each answer; this step turns the per-family series into one `PodReading` per (namespace,
pod) and one `ModelReading` per model in scope, as WVA's collector does (v0.9.0,
internal/collector/). It is pure (no I/O, no clock) and runs in a worker thread when the answers are
large.

Rules:
- Times: a pod's `observed_at` is its last scrape, the value of its `last_sample` series (the newest
  when several series speak for one pod), so the core's fresh / stale classification sees the real
  age of the figures (under about a minute: see `collect.prometheus.queries`). Without it (the query
  failed, or it has no series for a kept pod, i.e. no `vllm:num_requests_waiting`) the pod falls
  back to the newest timestamp of its other series, which Prometheus sets to the evaluation time
  `now`: fresh, an error of at most a minute, as a pod is only kept with a KV or queue sample from
  the last minute. A failed `last_sample` is reported like any failed query, under its name; a
  missing series is not an error of its own (`queue_length` already reports the gap). A model's
  `observed_at` is always that evaluation time: the EPP figures have no scrape-time query, and the
  core judges the freshness of replica metrics only.
- Pods: a pod is kept when it has a `kv_cache_usage` or a `queue_length` series, even one whose
  value was dropped as non-finite (WVA's collector rule); other families only fill kept pods. A kept
  pod without a KV or queue series gets None there, not 0: WVA treats a missing series as 0, but
  our core reads None as "unknown" and holds instead of scaling on an invented idle figure.
- Only series of a (namespace, model) in scope are used; `cache_config_info` (no model label) and
  the EPP's per-pod arrival rate are matched by pod. A pod without an EPP arrival series takes
  its `first_token_rate` as its arrival rate (`collect.prometheus.queries`). Several series for one
  pod or model (two `model_name`s on one pod, say) combine by max; for `cache_config_info` the
  smallest capacity (num_gpu_blocks × block_size) wins, the conservative figure. No order of the
  series in an answer changes the reading.
- PARTIAL_DATA: a kept pod has no series in one of the families every running vLLM pod exposes at
  all times: `kv_cache_usage`, `queue_length`, `running`, `cache_config_info` (a usable one, with
  integer labels). The rate-based families and the EPP ones may lack a pod for ordinary reasons
  (fewer than two samples in the window, a pod the gateway never chose), so their gaps are not
  errors; nor are the latency histograms' (absent before vLLM has the family). Range checks (a
  hit rate above 1, a negative queue) are left to the core.
- Histograms: the `ttft_histogram` / `tpot_histogram` series of a kept pod, one per `le`, fold
  into one `LatencyHistogram` by `collect.histograms.fold` (a malformed one is None, logged).
- Gateway queue: a model without a flow-control queue has no series, and reads 0. A series whose
  value was dropped as non-finite reads None, and so does every model in the query's scope when
  the query itself failed (a reading is made for a model with no other series, stamped with the
  evaluation time `now`): the core holds a model whose queue it could not see
  (`model.REQUIRED_POOL_FIGURES`) rather than size it on an empty one.
A failed query (any reason but PARTIAL_DATA) leaves its figure None for every pod and model (a
failed `last_sample`: see Times), and its error is passed on.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from llmscaler.collect import histograms
from llmscaler.collect.prometheus import queries as q
from llmscaler.collect.prometheus.answers import Outcome, Series
from llmscaler.collect.prometheus.queries import Query
from llmscaler.collect.readings import ErrorReason, ModelReading, PodReading, Reading, SourceError
from llmscaler.domain.snapshot import LatencyHistogram

_POD_FIELDS = {
    q.KV_CACHE_USAGE: 'kv_usage',
    q.QUEUE_LENGTH: 'queue_length',
    q.RUNNING: 'running_requests',
    q.LAST_SAMPLE: 'last_sample',
    q.AVG_INPUT_TOKENS: 'avg_input_tokens',
    q.AVG_OUTPUT_TOKENS: 'avg_output_tokens',
    q.PREFIX_CACHE_HIT_RATE: 'prefix_cache_hit_rate',
    q.AVG_TTFT: 'avg_ttft',
    q.AVG_ITL: 'avg_itl',
    q.POD_ARRIVAL_RATE: 'arrival_rate',
    q.FIRST_TOKEN_RATE: 'first_token_rate',
}
_MODEL_FIELDS = {
    q.SCHEDULER_QUEUE_SIZE: 'queue_size',
    q.SCHEDULER_QUEUE_BYTES: 'queue_bytes',
    q.MODEL_ARRIVAL_RATE: 'arrival_rate',
    q.MODEL_REQUEST_COUNT: 'request_count',
}
_HISTOGRAMS = {
    q.TTFT_HISTOGRAM: ('ttft_histogram', histograms.TTFT_BUCKET),
    q.TPOT_HISTOGRAM: ('tpot_histogram', histograms.TPOT_BUCKET),
}
_QUEUE_FIELDS = {q.SCHEDULER_QUEUE_SIZE: 'queue_size', q.SCHEDULER_QUEUE_BYTES: 'queue_bytes'}
_POD_DEFINING = (q.KV_CACHE_USAGE, q.QUEUE_LENGTH)
_ALWAYS_PRESENT = (q.KV_CACHE_USAGE, q.QUEUE_LENGTH, q.RUNNING, q.CACHE_CONFIG_INFO)
_IDENTITY_SKIP = frozenset({'namespace', 'pod'})
_LISTED_PODS = 10


@dataclass(slots=True)
class _Acc:
    """A reading under construction: figures by field name, identifying labels, newest sample.

    Every figure and the time combine by max, which no order of the series can change (-0 was
    read as 0); only the labels and the cache capacity need an order to break ties (see
    `_define_pods` and `_fill_cache_config`).
    """

    observed_at: float = -math.inf
    values: dict[str, float] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    histograms: dict[str, LatencyHistogram | None] = field(default_factory=dict)
    unreadable: set[str] = field(default_factory=set)
    """Gateway queue figures not read: their query failed, or a series' value was dropped as
    non-finite."""


def _label_order(series: Series) -> list[tuple[str, str]]:
    """The order that breaks ties between series: their sorted label pairs."""
    return sorted(series[0].items())


def assemble(*, queries: tuple[Query, ...], outcomes: tuple[Outcome, ...], now: float) -> Reading:
    """Fold per-query outcomes (same order as `queries`, evaluated at `now`) into one sorted
    `Reading`."""
    errors: dict[str, SourceError] = {}
    pods: dict[tuple[str, str], _Acc] = {}
    seen: dict[str, set[tuple[str, str]]] = {}
    usable: list[tuple[Query, Sequence[Series]]] = []
    for query, outcome in zip(queries, outcomes, strict=True):
        if outcome.error is not None:
            errors[query.name] = outcome.error
        if outcome.series is not None:
            usable.append((query, outcome.series))
    kept = {
        query.name: _pod_series(query, series)
        for query, series in usable
        if query.kind == 'pod' and query.family != q.CACHE_CONFIG_INFO
    }
    for query, _ in usable:
        if query.family in _POD_DEFINING:
            _define_pods(kept[query.name], pods)
    for query, series in usable:
        if query.family == q.CACHE_CONFIG_INFO:
            seen[query.family] = _fill_cache_config(series, pods)
        elif query.family in _HISTOGRAMS:
            _fill_histograms(query.family, kept[query.name], pods)
        elif query.kind == 'pod':
            seen[query.family] = _fill_pods(_POD_FIELDS[query.family], kept[query.name], pods)
    for family in _ALWAYS_PRESENT:
        if family in seen:
            missing = sorted(set(pods) - seen[family])
            if missing:
                _add_partial(errors, family, missing, len(pods))
    models = _fill_models([(qu, s) for qu, s in usable if qu.kind == 'model'], queries)
    _mark_unread_queues(queries=queries, outcomes=outcomes, models=models, now=now)
    return Reading(
        pods=tuple(_pod_reading(key, pods[key]) for key in sorted(pods)),
        models=tuple(_model_reading(key, models[key]) for key in sorted(models)),
        errors=tuple(errors[qu.name] for qu in queries if qu.name in errors),
        dropped_non_finite=sum(outcome.dropped for outcome in outcomes),
    )


def _pod_series(query: Query, series: Sequence[Series]) -> list[tuple[Series, tuple[str, str]]]:
    """The series of a per-pod query that belong to the scope, with their (namespace, pod)."""
    kept: list[tuple[Series, tuple[str, str]]] = []
    append = kept.append
    if query.family == q.POD_ARRIVAL_RATE:
        # Summed over target models already; the matchers kept only models in scope.
        namespaces = {entry.namespace for entry in query.models}
        for one in series:
            labels = one[0]
            namespace, pod = labels.get('namespace'), labels.get('pod_name')
            if pod and namespace in namespaces:
                append((one, (labels['namespace'], pod)))
        return kept
    in_scope: dict[str, set[str]] = {}
    for entry in query.models:
        in_scope.setdefault(entry.namespace, set()).add(entry.model_id)
    for one in series:
        labels = one[0]
        pod = labels.get('pod')
        namespace = labels.get('namespace')
        if not pod or namespace is None:
            continue
        models = in_scope.get(namespace)
        if models is not None and labels.get('model_name') in models:
            append((one, (namespace, pod)))
    return kept


def _define_pods(
    kept: list[tuple[Series, tuple[str, str]]], pods: dict[tuple[str, str], _Acc]
) -> None:
    """Create the pods of a pod-defining query and gather their identifying labels.

    Of two series of one pod naming one label differently, the first in label order wins, as
    does the first query; only a pod with several series in one answer needs sorting.
    """
    first: dict[tuple[str, str], Series] = {}
    more: dict[tuple[str, str], list[Series]] = {}
    for one, key in kept:
        if key in first:
            more.setdefault(key, [first[key]]).append(one)
        else:
            first[key] = one
    skip = _IDENTITY_SKIP
    for key, one in first.items():
        group = sorted(more[key], key=_label_order) if key in more else [one]
        acc = pods.get(key)
        if acc is None:
            acc = pods[key] = _Acc()
        for member in group:
            labels = {name: value for name, value in member[0].items() if name not in skip}
            labels.update(acc.labels)
            acc.labels = labels


def _fill_pods(
    name: str, kept: list[tuple[Series, tuple[str, str]]], pods: dict[tuple[str, str], _Acc]
) -> set[tuple[str, str]]:
    """Fold one per-pod family into the pods already defined; the pods it had a series for."""
    found = set()
    for (_, stamp, value), key in kept:
        acc = pods.get(key)
        if acc is None:
            continue
        if stamp > acc.observed_at:
            acc.observed_at = stamp
        if value is not None:
            values = acc.values
            known = values.get(name)
            if known is None or value > known:
                values[name] = value
        found.add(key)
    return found


def _fill_histograms(
    family: str, kept: list[tuple[Series, tuple[str, str]]], pods: dict[tuple[str, str], _Acc]
) -> None:
    """One histogram per kept pod from its bucket series (`collect.histograms.fold`)."""
    name, metric = _HISTOGRAMS[family]
    buckets: dict[tuple[str, str], list[histograms.Bucket]] = {}
    for (labels, _, value), key in kept:
        if key in pods:
            buckets.setdefault(key, []).append((labels.get('le', ''), value))
    for key in sorted(buckets):
        pod = f'{key[0]}/{key[1]}'
        pods[key].histograms[name] = histograms.fold(pod=pod, family=metric, buckets=buckets[key])


def _fill_cache_config(
    series: Sequence[Series], pods: dict[tuple[str, str], _Acc]
) -> set[tuple[str, str]]:
    """The smallest capacity per pod; between equal capacities, the series first in label order."""
    best: dict[tuple[str, str], tuple[int, Series, int, int]] = {}
    for one in series:
        labels, stamp, _ = one
        key = (labels.get('namespace', ''), labels.get('pod', ''))
        acc = pods.get(key)
        if acc is None:
            continue
        blocks = _positive_int(labels.get('num_gpu_blocks'))
        size = _positive_int(labels.get('block_size'))
        if blocks is None or size is None:
            continue
        if stamp > acc.observed_at:
            acc.observed_at = stamp
        capacity = blocks * size
        known = best.get(key)
        if (
            known is None
            or capacity < known[0]
            or (capacity == known[0] and _label_order(one) < _label_order(known[1]))
        ):
            best[key] = (capacity, one, blocks, size)
    for key, (_, _, blocks, size) in best.items():
        values = pods[key].values
        values['num_gpu_blocks'], values['block_size'] = blocks, size
    return set(best)


def _positive_int(text: str | None) -> int | None:
    try:
        value = int(text) if text is not None else None
    except ValueError:
        return None
    return value if value is not None and value > 0 else None


def _add_partial(
    errors: dict[str, SourceError], family: str, missing: list[tuple[str, str]], total: int
) -> None:
    listed = ', '.join(f'{ns}/{pod}' for ns, pod in missing[:_LISTED_PODS])
    more = ', …' if len(missing) > _LISTED_PODS else ''
    message = f'no series for {len(missing)} of {total} pods: {listed}{more}'
    previous = errors.get(family)
    if previous is not None:
        message = f'{previous.message}; {message}'
    errors[family] = SourceError(family, ErrorReason.PARTIAL_DATA, message)


def _fill_models(
    usable: list[tuple[Query, Sequence[Series]]], queries: tuple[Query, ...]
) -> dict[tuple[str, str], _Acc]:
    scope = {(e.namespace, e.model_id) for query in queries for e in query.models}
    # The EPP queue has no namespace label: one model name speaks for every namespace.
    by_model: dict[str, list[tuple[str, str]]] = {}
    for key in sorted(scope):
        by_model.setdefault(key[1], []).append(key)
    models: dict[tuple[str, str], _Acc] = {}
    for query, series in usable:
        name = _MODEL_FIELDS[query.family]
        own = {(e.namespace, e.model_id) for e in query.models}
        for labels, stamp, value in series:
            namespace = labels.get('namespace', '')
            if query.family == q.MODEL_REQUEST_COUNT:
                key = (namespace, labels.get('model_name', ''))
                keys = [key] if key in own else []
            elif query.family == q.MODEL_ARRIVAL_RATE:
                key = (namespace, labels.get('target_model_name', ''))
                keys = [key] if key in scope else []
            else:
                keys = by_model.get(labels.get('target_model_name', ''), [])
            for key in keys:
                acc = models.get(key)
                if acc is None:
                    acc = models[key] = _Acc()
                if stamp > acc.observed_at:
                    acc.observed_at = stamp
                if value is not None:
                    known = acc.values.get(name)
                    if known is None or value > known:
                        acc.values[name] = value
                elif query.family in _QUEUE_FIELDS:
                    acc.unreadable.add(name)
    return models


def _mark_unread_queues(
    *,
    queries: tuple[Query, ...],
    outcomes: tuple[Outcome, ...],
    models: dict[tuple[str, str], _Acc],
    now: float,
) -> None:
    """Mark a failed queue query's figure unread for every model in its scope, making a reading
    (stamped `now`) for a model with no series at all, so that the gap reaches the core."""
    for query, outcome in zip(queries, outcomes, strict=True):
        name = _QUEUE_FIELDS.get(query.family)
        if name is None or outcome.series is not None:
            continue
        for entry in query.models:
            key = (entry.namespace, entry.model_id)
            models.setdefault(key, _Acc(observed_at=now)).unreadable.add(name)


def _queue_figure(name: str, acc: _Acc) -> float | None:
    """No series: the model has no flow-control queue, which is 0; unread: None."""
    return None if name in acc.unreadable else acc.values.get(name, 0.0)


def _pod_reading(key: tuple[str, str], acc: _Acc) -> PodReading:
    get = acc.values.get
    blocks, size = get('num_gpu_blocks'), get('block_size')
    return PodReading(
        namespace=key[0],
        pod=key[1],
        # The last scrape when known; else the answers' own stamps, i.e. the evaluation time.
        observed_at=get('last_sample', acc.observed_at),
        model_name=acc.labels.get('model_name', ''),
        labels=tuple(sorted(acc.labels.items())),
        kv_usage=get('kv_usage'),
        queue_length=get('queue_length'),
        num_gpu_blocks=int(blocks) if blocks is not None else None,
        block_size=int(size) if size is not None else None,
        avg_input_tokens=get('avg_input_tokens'),
        avg_output_tokens=get('avg_output_tokens'),
        prefix_cache_hit_rate=get('prefix_cache_hit_rate'),
        avg_ttft=get('avg_ttft'),
        avg_itl=get('avg_itl'),
        running_requests=get('running_requests'),
        # The gateway's dispatches; without a gateway series for the pod, its own admissions.
        arrival_rate=get('arrival_rate', get('first_token_rate')),
        ttft_histogram=acc.histograms.get('ttft_histogram'),
        tpot_histogram=acc.histograms.get('tpot_histogram'),
    )


def _model_reading(key: tuple[str, str], acc: _Acc) -> ModelReading:
    get = acc.values.get
    return ModelReading(
        model_id=key[1],
        namespace=key[0],
        observed_at=acc.observed_at,
        queue_size=_queue_figure('queue_size', acc),
        queue_bytes=_queue_figure('queue_bytes', acc),
        arrival_rate=get('arrival_rate'),
        request_count=get('request_count'),
    )
