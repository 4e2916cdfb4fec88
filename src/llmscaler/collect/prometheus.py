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
  pods give NaN means, 0/0); its series still counts as present. Range checks (a hit rate above
  1, a negative queue) are left to the core.

Failures never raise; each query gets at most one `SourceError(target=query name, ...)`:
- UNREACHABLE: connection refused, DNS failure, TLS verification failure, a connection dropped
  mid-answer, or a token file that cannot be read (then no request is sent at all);
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
`server_name` still apply.
"""

from __future__ import annotations

import asyncio
import json
import math
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

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
    context = ssl.create_default_context(
        cafile=str(config.ca_file) if config.ca_file is not None else None
    )
    if config.insecure_skip_verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if config.client_cert_file is not None:
        key = str(config.client_key_file) if config.client_key_file is not None else None
        context.load_cert_chain(certfile=str(config.client_cert_file), keyfile=key)
    return context


@dataclass(frozen=True, slots=True)
class _Series:
    labels: Mapping[str, str]
    timestamp: float
    value: float | None
    """None when Prometheus returned NaN or ±Inf."""


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
        self._owns_client = client is None
        if client is None:
            client = httpx.AsyncClient(verify=ssl_context(config=config), timeout=config.timeout)
        self._client = client
        self._extensions = {'sni_hostname': config.server_name} if config.server_name else {}

    async def aclose(self) -> None:
        """Close the HTTP client if this source created it."""
        if self._owns_client:
            await self._client.aclose()

    async def read(self, *, scope: tuple[ModelScope, ...], now: float) -> Reading:
        batch = q.build(scope=scope)
        if not batch:
            return Reading()
        headers = {'Accept': 'application/json'}
        try:
            token = self._token()
        except (OSError, ValueError) as exc:
            message = f'bearer token file unreadable, nothing sent: {exc}'
            return Reading(
                errors=tuple(SourceError(qu.name, ErrorReason.UNREACHABLE, message) for qu in batch)
            )
        if token:
            headers['Authorization'] = f'Bearer {token}'
        gate = asyncio.Semaphore(max(1, self._config.concurrency))
        outcomes = await asyncio.gather(
            *(self._run(query=query, now=now, headers=headers, gate=gate) for query in batch)
        )
        return _assemble(queries=batch, outcomes=tuple(outcomes))

    def _token(self) -> str | None:
        if self._config.token_file is None:
            return self._config.bearer_token
        token = self._config.token_file.read_text(encoding='utf-8').strip()
        if not token:
            raise ValueError(f'{self._config.token_file} is empty')
        return token

    async def _run(
        self, *, query: Query, now: float, headers: dict[str, str], gate: asyncio.Semaphore
    ) -> _Outcome:
        def failed(reason: ErrorReason, message: str) -> _Outcome:
            return _Outcome(series=None, error=SourceError(query.name, reason, message))

        try:
            async with gate:
                # POST with a form body: a scope of many models makes regex matchers longer than
                # the URL limits of proxies and servers (8 KiB is common); the API takes both.
                response = await self._client.post(
                    self._url,
                    data={'query': query.promql, 'time': f'{now:.3f}'},
                    headers=headers,
                    timeout=self._config.timeout,
                    extensions=self._extensions,
                )
        except httpx.TimeoutException as exc:
            return failed(ErrorReason.TIMEOUT, f'no answer within {self._config.timeout}s: {exc!r}')
        except (httpx.HTTPError, httpx.InvalidURL, OSError) as exc:
            return failed(ErrorReason.UNREACHABLE, f'{self._url}: {exc!r}')
        return _outcome(query=query, response=response)


def _outcome(*, query: Query, response: httpx.Response) -> _Outcome:
    status = response.status_code

    def failed(reason: ErrorReason, message: str) -> _Outcome:
        return _Outcome(series=None, error=SourceError(query.name, reason, message))

    if 400 <= status <= 599:
        reason = ErrorReason.HTTP_4XX if status < 500 else ErrorReason.HTTP_5XX
        message = f'HTTP {status}'
        retry_after = response.headers.get('Retry-After')
        if retry_after is not None:
            message += f' (Retry-After: {retry_after})'
        detail = _error_detail(response)
        return failed(reason, f'{message}: {detail}' if detail else message)
    if not 200 <= status <= 299:
        return failed(ErrorReason.BAD_RESPONSE, f'unexpected HTTP {status}')
    try:
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
    parsed: list[_Series] = []
    dropped = 0
    for item in result:
        series = _parse_series(item)
        dropped += series.value is None
        parsed.append(series)
    return tuple(parsed), dropped, warnings


def _parse_series(item: Any) -> _Series:
    metric = item.get('metric') if isinstance(item, dict) else None
    sample = item.get('value') if isinstance(item, dict) else None
    if not isinstance(metric, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in metric.items()
    ):
        raise _BadResponse('a series has no string labels')
    if not isinstance(sample, list) or len(sample) != 2:
        raise _BadResponse('a series has no [timestamp, value] sample')
    stamp, text = sample
    if isinstance(stamp, bool) or not isinstance(stamp, int | float) or not math.isfinite(stamp):
        raise _BadResponse(f'bad sample timestamp {stamp!r}')
    if not isinstance(text, str):
        raise _BadResponse(f'sample value {text!r} is not a string')
    try:
        value = float(text)
    except ValueError:
        raise _BadResponse(f'sample value {text!r} is not a number') from None
    return _Series(dict(metric), float(stamp), value if math.isfinite(value) else None)


@dataclass(slots=True)
class _Acc:
    """A reading under construction: figures by field name, identifying labels, newest sample."""

    observed_at: float = -math.inf
    values: dict[str, float] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)

    def see(self, series: _Series) -> None:
        self.observed_at = max(self.observed_at, series.timestamp)

    def put(self, name: str, value: float | None) -> None:
        if value is not None:
            self.values[name] = max(value, self.values.get(name, -math.inf))


def _assemble(*, queries: tuple[Query, ...], outcomes: tuple[_Outcome, ...]) -> Reading:
    """Fold per-query outcomes (same order as `queries`) into one sorted `Reading`."""
    errors: dict[str, SourceError] = {}
    pods: dict[tuple[str, str], _Acc] = {}
    seen: dict[str, set[tuple[str, str]]] = {}
    usable = []
    for query, outcome in zip(queries, outcomes, strict=True):
        if outcome.error is not None:
            errors[query.name] = outcome.error
        if outcome.series is not None:
            ordered = sorted(outcome.series, key=lambda s: sorted(s.labels.items()))
            usable.append((query, ordered))
    for query, ordered in usable:
        if query.family in _POD_DEFINING:
            for series, key in _pod_series(query, ordered):
                acc = pods.setdefault(key, _Acc())
                for name, value in sorted(series.labels.items()):
                    if name not in _IDENTITY_SKIP:
                        acc.labels.setdefault(name, value)
    for query, ordered in usable:
        if query.kind == 'pod':
            seen[query.family] = _fill_pods(query, ordered, pods)
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


def _pod_series(query: Query, ordered: list[_Series]) -> list[tuple[_Series, tuple[str, str]]]:
    """The series of a per-pod query that belong to the scope, with their (namespace, pod)."""
    if query.family == q.POD_ARRIVAL_RATE:
        # Summed over target models already; the matchers kept only models in scope.
        namespaces = {entry.namespace for entry in query.models}
        return [
            (series, (series.labels['namespace'], series.labels['pod_name']))
            for series in ordered
            if series.labels.get('namespace') in namespaces and series.labels.get('pod_name')
        ]
    in_scope = {(entry.namespace, entry.model_id) for entry in query.models}
    return [
        (series, (series.labels['namespace'], series.labels['pod']))
        for series in ordered
        if (series.labels.get('namespace'), series.labels.get('model_name')) in in_scope
        and series.labels.get('pod')
    ]


def _fill_pods(
    query: Query, ordered: list[_Series], pods: dict[tuple[str, str], _Acc]
) -> set[tuple[str, str]]:
    if query.family == q.CACHE_CONFIG_INFO:
        return _fill_cache_config(ordered, pods)
    found = set()
    for series, key in _pod_series(query, ordered):
        acc = pods.get(key)
        if acc is None:
            continue
        acc.see(series)
        acc.put(_POD_FIELDS[query.family], series.value)
        found.add(key)
    return found


def _fill_cache_config(
    ordered: list[_Series], pods: dict[tuple[str, str], _Acc]
) -> set[tuple[str, str]]:
    found = set()
    for series in ordered:
        key = (series.labels.get('namespace', ''), series.labels.get('pod', ''))
        blocks = _positive_int(series.labels.get('num_gpu_blocks'))
        size = _positive_int(series.labels.get('block_size'))
        acc = pods.get(key)
        if acc is None or blocks is None or size is None:
            continue
        acc.see(series)
        known = acc.values.get('num_gpu_blocks', math.inf) * acc.values.get('block_size', 1)
        if blocks * size < known:
            acc.values['num_gpu_blocks'], acc.values['block_size'] = blocks, size
        found.add(key)
    return found


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
    usable: list[tuple[Query, list[_Series]]], queries: tuple[Query, ...]
) -> dict[tuple[str, str], _Acc]:
    scope = sorted({(e.namespace, e.model_id) for query in queries for e in query.models})
    models: dict[tuple[str, str], _Acc] = {}
    for query, ordered in usable:
        for series in ordered:
            for key in _model_keys(query, series.labels, scope):
                acc = models.setdefault(key, _Acc())
                acc.see(series)
                acc.put(_MODEL_FIELDS[query.family], series.value)
    return models


def _model_keys(
    query: Query, labels: Mapping[str, str], scope: list[tuple[str, str]]
) -> list[tuple[str, str]]:
    """The in-scope (namespace, model) pairs a model-level series speaks for."""
    namespace = labels.get('namespace', '')
    if query.family == q.MODEL_REQUEST_COUNT:
        key = (namespace, labels.get('model_name', ''))
        return [key] if key in {(e.namespace, e.model_id) for e in query.models} else []
    model = labels.get('target_model_name', '')
    if query.family == q.MODEL_ARRIVAL_RATE:
        return [(namespace, model)] if (namespace, model) in scope else []
    # The EPP queue has no namespace label: one model name speaks for every namespace.
    return [key for key in scope if key[1] == model]


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
