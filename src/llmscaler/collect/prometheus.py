"""The Prometheus metrics source: seed 000's query registry over Prometheus' HTTP API.

Why: with Prometheus in the cluster, the controller reads the vLLM and gateway (EPP) figures from
it instead of scraping pods. Every family is one batched instant query (`collect.queries`), so a
cycle costs the same handful of requests whatever the fleet size.

What it does: `PrometheusSource.read` runs every query of the registry as
`POST {base_url}/api/v1/query` (form `query=...&time=now`), at most `concurrency` at once, and
folds the vector results into `PodReading`s (one per (namespace, pod)) and `ModelReading`s (one
per model in scope with at least one series).
- Times: a pod's `observed_at` is its last scrape, the value of its `last_sample` series (the newest
  when several series speak for one pod), so the core's fresh / stale classification sees the real
  age of the figures (under about a minute: see `collect.queries`). Without it (the query failed,
  or it has no series for a kept pod, i.e. no `vllm:num_requests_waiting`) the pod falls back to
  the newest timestamp of its other series, which Prometheus sets to the evaluation time `now`:
  fresh, an error of at most a minute, as a pod is only kept with a KV or queue sample from the
  last minute. A failed `last_sample` is reported like any failed query, under its name; a missing
  series is not an error of its own (`queue_length` already reports the gap). A model's
  `observed_at` is always that evaluation time: the EPP figures have no scrape-time query, and the
  core judges the freshness of replica metrics only.
- Pods: a pod is kept when it has a `kv_cache_usage` or a `queue_length` series, even one whose
  value was dropped as non-finite (WVA's collector rule); other families only fill kept pods. A kept
  pod without a KV or queue series gets None there, not 0: WVA treats a missing series as 0, but
  our core reads None as "unknown" and holds instead of scaling on an invented idle figure.
- Only series of a (namespace, model) in scope are used; `cache_config_info` (no model label) and
  the EPP's per-pod arrival rate are matched by pod. Several series for one pod or model (two
  `model_name`s on one pod, say) combine by max; for `cache_config_info` the smallest capacity
  (num_gpu_blocks × block_size) wins, the conservative figure.
- Every NaN or ±Inf sample of the answers is dropped and counted in `dropped_non_finite` (idle
  pods give NaN means, 0/0); its series still counts as present. A -0 sample reads as 0, so that
  no figure depends on the order of the series in an answer. Range checks (a hit rate above 1, a
  negative queue) are left to the core.

Failures never raise; each query gets at most one `SourceError(target=query name, ...)`:
- UNREACHABLE: connection refused, DNS failure, TLS verification failure, a connection dropped
  mid-answer, or a token file that cannot be read or is empty (then nothing is sent);
- TIMEOUT: no complete answer within `timeout` seconds;
- HTTP_4XX / HTTP_5XX: the status code, with Prometheus' `errorType: error` text and any
  Retry-After header in the message (the next cycle is the retry);
- BAD_RESPONSE: another non-2xx status, a body that is not JSON, not the API's vector shape, or
  `status: error`;
- PARTIAL_DATA: the answer carried `warnings` (its series are still used), or a kept pod has no
  series in one of the families every running vLLM pod exposes at all times: `kv_cache_usage`,
  `queue_length`, `running`, `cache_config_info` (a usable one, with integer labels). The
  rate-based families and the EPP ones may lack a pod for ordinary reasons (fewer than two samples
  in the window, a pod the gateway never chose), so their gaps are not errors.
A failed query (any reason but PARTIAL_DATA) leaves its figure None for every pod and model (a
failed `last_sample`: see Times); the core then holds. The time `now` is the caller's; this module
never reads a clock. A `concurrency` below 1 counts as 1.

TLS: an `ssl.SSLContext` built once from the files (`ssl_context`); unreadable files raise at
construction, a configuration error. `server_name` overrides the name used for SNI and certificate
checks through httpx's `sni_hostname` request extension (httpcore passes it as `server_hostname`).
The bearer token comes from `token_file`, re-read every cycle so rotated tokens work, else from
`bearer_token`. A caller-supplied client keeps its own TLS settings; headers, timeout and
`server_name` still apply. `collect.http` holds the TLS, client, token and error-classification
plumbing that this source shares with the pod scraper.
"""

from __future__ import annotations

import asyncio
import gc
import json
import math
import ssl
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from llmscaler.collect import http
from llmscaler.collect import queries as q
from llmscaler.collect.queries import Query
from llmscaler.collect.types import (
    ErrorReason,
    ModelReading,
    ModelScope,
    PodReading,
    Reading,
    SourceError,
)

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
}
_MODEL_FIELDS = {
    q.SCHEDULER_QUEUE_SIZE: 'queue_size',
    q.SCHEDULER_QUEUE_BYTES: 'queue_bytes',
    q.MODEL_ARRIVAL_RATE: 'arrival_rate',
    q.MODEL_REQUEST_COUNT: 'request_count',
}
_POD_DEFINING = (q.KV_CACHE_USAGE, q.QUEUE_LENGTH)
_ALWAYS_PRESENT = (q.KV_CACHE_USAGE, q.QUEUE_LENGTH, q.RUNNING, q.CACHE_CONFIG_INFO)
_IDENTITY_SKIP = frozenset({'namespace', 'pod'})
_JSON_NUMBERS = (int, float)
_LISTED_PODS = 10


@dataclass(frozen=True, slots=True)
class PrometheusConfig:
    """How to reach Prometheus. `timeout` is seconds per query; `concurrency` queries in flight."""

    base_url: str
    bearer_token: str | None = None
    token_file: Path | None = None
    ca_file: Path | None = None
    client_cert_file: Path | None = None
    client_key_file: Path | None = None
    server_name: str | None = None
    insecure_skip_verify: bool = False
    timeout: float = 10.0
    concurrency: int = 4


def ssl_context(*, config: PrometheusConfig) -> ssl.SSLContext:
    """The client TLS context: `ca_file` alone is trusted when given, else the system store."""
    return http.client_ssl_context(
        ca_file=config.ca_file,
        insecure_skip_verify=config.insecure_skip_verify,
        client_cert_file=config.client_cert_file,
        client_key_file=config.client_key_file,
    )


# (labels, timestamp, value): a plain tuple, as a response holds one per pod and family.
# The value is None when Prometheus returned NaN or ±Inf.
_Series = tuple[dict[str, str], float, float | None]


@dataclass(frozen=True, slots=True)
class _Outcome:
    series: tuple[_Series, ...] | None
    """None when the query failed."""
    error: SourceError | None = None
    dropped: int = 0


class _BadResponse(Exception):
    pass


class PrometheusSource:
    """`MetricsSource` over Prometheus' HTTP API (see the module docstring)."""

    def __init__(self, *, config: PrometheusConfig, client: httpx.AsyncClient | None = None):
        self._config = config
        self._url = config.base_url.rstrip('/') + '/api/v1/query'
        self._http = http.OwnedClient(
            client=client, verify=lambda: ssl_context(config=config), timeout=config.timeout
        )
        self._extensions = {'sni_hostname': config.server_name} if config.server_name else {}

    async def aclose(self) -> None:
        """Close the HTTP client if this source created it."""
        await self._http.aclose()

    async def read(self, *, scope: tuple[ModelScope, ...], now: float) -> Reading:
        batch = q.build(scope=scope)
        if not batch:
            return Reading()
        headers = {'Accept': 'application/json'}
        token = http.read_token(
            token_file=self._config.token_file, bearer_token=self._config.bearer_token
        )
        if token.error is not None:
            return Reading(
                errors=tuple(
                    SourceError(qu.name, ErrorReason.UNREACHABLE, token.error) for qu in batch
                )
            )
        if token.value:
            headers['Authorization'] = f'Bearer {token.value}'
        gate = asyncio.Semaphore(max(1, self._config.concurrency))
        outcomes = await asyncio.gather(
            *(self._run(query=query, now=now, headers=headers, gate=gate) for query in batch)
        )
        with _collector_paused():
            return _assemble(queries=batch, outcomes=tuple(outcomes))

    async def _run(
        self, *, query: Query, now: float, headers: dict[str, str], gate: asyncio.Semaphore
    ) -> _Outcome:
        def failed(reason: ErrorReason, message: str) -> _Outcome:
            return _Outcome(series=None, error=SourceError(query.name, reason, message))

        try:
            async with gate:
                # POST with a form body: a scope of many models makes regex matchers longer than
                # the URL limits of proxies and servers (8 KiB is common); the API takes both.
                response = await self._http.client.post(
                    self._url,
                    data={'query': query.promql, 'time': f'{now:.3f}'},
                    headers=headers,
                    timeout=self._config.timeout,
                    extensions=self._extensions,
                )
        except http.TRANSPORT_ERRORS as exc:
            timeout = self._config.timeout
            return failed(
                *http.transport_failure(exc=exc, timeout=timeout, awaited='answer', where=self._url)
            )
        return _outcome(query=query, response=response)


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Hold off Python's cyclic garbage collector for one synchronous step.

    Decoding an answer and folding the answers allocate hundreds of thousands of containers, none
    of them in reference cycles; each allocation burst sets off collections that walk every live
    object, which cost more than the decoding itself (about 70% of `json.loads`' time for 10,000
    pods). Reference counting still frees everything; the collector resumes, if it was on, when
    the step ends, before any other coroutine runs.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _outcome(*, query: Query, response: httpx.Response) -> _Outcome:
    status = response.status_code

    def failed(reason: ErrorReason, message: str) -> _Outcome:
        return _Outcome(series=None, error=SourceError(query.name, reason, message))

    failure = http.status_failure(status=status)
    if failure is not None:
        reason, message = failure
        if reason is ErrorReason.BAD_RESPONSE:
            return failed(reason, message)
        retry_after = response.headers.get('Retry-After')
        if retry_after is not None:
            message += f' (Retry-After: {retry_after})'
        detail = _error_detail(response)
        return failed(reason, f'{message}: {detail}' if detail else message)
    try:
        with _collector_paused():
            series, dropped, warnings = _parse(json.loads(response.content))
    except (ValueError, _BadResponse) as exc:
        # json.JSONDecodeError and UnicodeDecodeError are ValueErrors.
        return failed(ErrorReason.BAD_RESPONSE, str(exc) or type(exc).__name__)
    error = None
    if warnings:
        error = SourceError(query.name, ErrorReason.PARTIAL_DATA, '; '.join(warnings))
    return _Outcome(series=series, error=error, dropped=dropped)


def _error_detail(response: httpx.Response) -> str:
    try:
        body = json.loads(response.content)
    except ValueError:
        return response.text[:200].strip()
    if isinstance(body, dict) and 'error' in body:
        return f'{body.get("errorType", "error")}: {body["error"]}'
    return ''


def _parse(body: Any) -> tuple[tuple[_Series, ...], int, list[str]]:
    if not isinstance(body, dict):
        raise _BadResponse('answer is not a JSON object')
    if body.get('status') == 'error':
        raise _BadResponse(f'{body.get("errorType", "error")}: {body.get("error", "")}')
    if body.get('status') != 'success':
        raise _BadResponse(f'unknown status {body.get("status")!r}')
    warnings = body.get('warnings') or []
    if not isinstance(warnings, list) or not all(isinstance(w, str) for w in warnings):
        raise _BadResponse('warnings is not a list of strings')
    data = body.get('data')
    if not isinstance(data, dict) or data.get('resultType') != 'vector':
        raise _BadResponse('data is not an instant vector')
    result = data.get('result')
    if not isinstance(result, list):
        raise _BadResponse('data.result is not a list')
    parsed, dropped = _parse_result(result)
    return tuple(parsed), dropped, warnings


def _parse_result(result: list[Any]) -> tuple[list[_Series], int]:
    """The series of a vector and the number of non-finite values among them.

    The fast path trusts the shapes `json.loads` can produce: object keys are always strings, so
    joining the label values is enough to prove they are all strings. An item it rejects goes
    through `_parse_series`, which raises with the precise complaint.
    """
    parsed: list[_Series] = []
    append = parsed.append
    join = ''.join
    isfinite = math.isfinite
    dropped = 0
    for item in result:
        try:
            metric = item['metric']
            stamp, text = item['value']
            join(metric.values())
            ok = (
                type(metric) is dict
                and type(text) is str
                and type(stamp) in _JSON_NUMBERS
                and isfinite(stamp)
            )
            value = float(text) if ok else math.nan
        except (AttributeError, KeyError, OverflowError, TypeError, ValueError):
            ok = False
        if not ok:
            _parse_series(item)
            raise _BadResponse('a series is malformed')  # unreachable: it raised
        if isfinite(value):
            # + 0.0 turns -0 into 0, so that combining series by max cannot depend on their order.
            append((metric, float(stamp), value + 0.0))
        else:
            append((metric, float(stamp), None))
            dropped += 1
    return parsed, dropped


def _parse_series(item: Any) -> _Series:
    """One series, checked field by field (the slow path: it names what is wrong)."""
    metric = item.get('metric') if isinstance(item, dict) else None
    sample = item.get('value') if isinstance(item, dict) else None
    if not isinstance(metric, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in metric.items()
    ):
        raise _BadResponse('a series has no string labels')
    if not isinstance(sample, list) or len(sample) != 2:
        raise _BadResponse('a series has no [timestamp, value] sample')
    stamp, text = sample
    try:
        finite_stamp = not isinstance(stamp, bool) and math.isfinite(stamp)
    except (OverflowError, TypeError):
        # An integer beyond float range overflows; a non-number is a TypeError.
        finite_stamp = False
    if not finite_stamp:
        raise _BadResponse(f'bad sample timestamp {stamp!r}')
    if not isinstance(text, str):
        raise _BadResponse(f'sample value {text!r} is not a string')
    try:
        value = float(text)
    except ValueError:
        raise _BadResponse(f'sample value {text!r} is not a number') from None
    return metric, float(stamp), value + 0.0 if math.isfinite(value) else None


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


def _label_order(series: _Series) -> list[tuple[str, str]]:
    """The order that breaks ties between series: their sorted label pairs."""
    return sorted(series[0].items())


def _assemble(*, queries: tuple[Query, ...], outcomes: tuple[_Outcome, ...]) -> Reading:
    """Fold per-query outcomes (same order as `queries`) into one sorted `Reading`."""
    errors: dict[str, SourceError] = {}
    pods: dict[tuple[str, str], _Acc] = {}
    seen: dict[str, set[tuple[str, str]]] = {}
    usable: list[tuple[Query, tuple[_Series, ...]]] = []
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
        elif query.kind == 'pod':
            seen[query.family] = _fill_pods(_POD_FIELDS[query.family], kept[query.name], pods)
    for family in _ALWAYS_PRESENT:
        if family in seen:
            missing = sorted(set(pods) - seen[family])
            if missing:
                _add_partial(errors, family, missing, len(pods))
    models = _fill_models([(qu, s) for qu, s in usable if qu.kind == 'model'], queries)
    return Reading(
        pods=tuple(_pod_reading(key, pods[key]) for key in sorted(pods)),
        models=tuple(_model_reading(key, models[key]) for key in sorted(models)),
        errors=tuple(errors[qu.name] for qu in queries if qu.name in errors),
        dropped_non_finite=sum(outcome.dropped for outcome in outcomes),
    )


def _pod_series(query: Query, series: tuple[_Series, ...]) -> list[tuple[_Series, tuple[str, str]]]:
    """The series of a per-pod query that belong to the scope, with their (namespace, pod)."""
    kept: list[tuple[_Series, tuple[str, str]]] = []
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
    kept: list[tuple[_Series, tuple[str, str]]], pods: dict[tuple[str, str], _Acc]
) -> None:
    """Create the pods of a pod-defining query and gather their identifying labels.

    Of two series of one pod naming one label differently, the first in label order wins, as
    does the first query; only a pod with several series in one answer needs sorting.
    """
    first: dict[tuple[str, str], _Series] = {}
    more: dict[tuple[str, str], list[_Series]] = {}
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
    name: str, kept: list[tuple[_Series, tuple[str, str]]], pods: dict[tuple[str, str], _Acc]
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


def _fill_cache_config(
    series: tuple[_Series, ...], pods: dict[tuple[str, str], _Acc]
) -> set[tuple[str, str]]:
    """The smallest capacity per pod; between equal capacities, the series first in label order."""
    best: dict[tuple[str, str], tuple[int, _Series, int, int]] = {}
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
    usable: list[tuple[Query, tuple[_Series, ...]]], queries: tuple[Query, ...]
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
    return models


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
        arrival_rate=get('arrival_rate'),
    )


def _model_reading(key: tuple[str, str], acc: _Acc) -> ModelReading:
    get = acc.values.get
    return ModelReading(
        model_id=key[1],
        namespace=key[0],
        observed_at=acc.observed_at,
        queue_size=get('queue_size'),
        queue_bytes=get('queue_bytes'),
        arrival_rate=get('arrival_rate'),
        request_count=get('request_count'),
    )
