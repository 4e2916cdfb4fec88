"""The PromQL registry of the Prometheus source.

Source: WVA's registered queries (llm-d workload-variant-autoscaler v0.9.0,
internal/collector/registration/).

Why: the controller reads every metric family for every model it manages once per cycle. One
query per family for the whole scope, grouped by namespace/pod/model, costs a fixed number of HTTP
requests (the registry size, plus one per extra retention period) whatever the number of pods or
models; one query per pod would grow with the fleet and hammer Prometheus.

What it builds: `build(scope=...)` turns the managed models into `Query` values. Label matchers
list the namespaces and model names in scope as anchored regular expressions
(`namespace=~"ns1|ns2"`, `model_name=~"m1|m2"`, metacharacters escaped, the whole quoted as a PromQL
string). Label names are the ones Prometheus stores for vLLM: `model_name` from vLLM itself,
`namespace` and `pod` added by the scrape configuration (Kubernetes service-discovery relabelling).
In the table:
- M is `{namespace=~NS, model_name=~MODELS}`, N is `{namespace=~NS}`,
  T is `{target_model_name=~MODELS}`,
  E is `{status="success", namespace=~NS, target_model_name=~MODELS}`;
- G is `namespace, pod, model_name, llm_d_ai_variant` (the variant label, when vLLM pods carry it,
  lets the attribution skip the ownerReference walk; an absent label simply groups as empty);
- ratio(x, w) is `sum by (G) (rate(x_sum{M}[w])) / sum by (G) (rate(x_count{M}[w]))`: the mean
  over the pod's data-parallel engines, not a mean of per-engine means.

name                   kind   PromQL
---------------------  -----  ----------------------------------------------------------------------
kv_cache_usage         pod    max by (G) (max_over_time(vllm:kv_cache_usage_perc{M}[1m])
                                or max_over_time(vllm:gpu_cache_usage_perc{M}[1m]))
                              1 m peak; both vLLM generations in one expression (the old name
                              was removed in 0.12); where a pod exposes both, the new one wins
queue_length           pod    max by (G) (max_over_time(vllm:num_requests_waiting{M}[1m]))
running                pod    max by (G) (vllm:num_requests_running{M})
last_sample            pod    max by (G) (max_over_time(
                                timestamp(vllm:num_requests_waiting{M})[1m:1s]))
                              when the pod was last scraped, in Unix seconds (see below)
cache_config_info      pod    max by (namespace, pod, num_gpu_blocks, block_size)
                                (vllm:cache_config_info{N})
                              namespace filter only: the series has no model_name (WVA #1198)
avg_input_tokens       pod    ratio(vllm:request_prompt_tokens, 5m)
avg_output_tokens      pod    ratio(vllm:request_generation_tokens, 5m)
prefix_cache_hit_rate  pod    (sum by (G) (rate(vllm:prefix_cache_hits_total{M}[5m]))
                                / sum by (G) (rate(vllm:prefix_cache_queries_total{M}[5m])))
                                or the same over vllm:gpu_prefix_cache_{hits,queries}_total
                              (the names before 0.9.2)
avg_ttft               pod    ratio(vllm:time_to_first_token_seconds, 1m)
avg_itl                pod    (ratio(vllm:inter_token_latency_seconds, 1m))
                                or (ratio(vllm:time_per_output_token_seconds, 1m))
                              (the old name, before 0.11)
pod_arrival_rate       pod    sum by (namespace, pod_name)
                                (rate(inference_extension_scheduler_attempts_total{E}[1m]))
                              EPP dispatches per pod (WVA's scheduler_dispatch_rate)
first_token_rate       pod    sum by (G) (rate(vllm:time_to_first_token_seconds_count{M}[1m]))
                              requests the pod admitted (first token out) per second: its
                              arrival rate where the gateway has no series for it (below)
ttft_histogram         pod    sum by (G, le) (increase(
                                vllm:time_to_first_token_seconds_bucket{M_H}[1m]))
tpot_histogram         pod    sum by (G, le) (increase(
                                vllm:request_time_per_output_token_seconds_bucket{M_H}[1m]))
                              requests of the last minute by TTFT and by their own mean time
                              per output token, one series per bucket (`collect.histograms`);
                              M_H lists only the models whose analyzer reads them
                              (`ModelScope.latency_histograms`: the predictive one), as the
                              answers of a large fleet are mostly these series
scheduler_queue_size   model  sum by (target_model_name)
                                (inference_extension_flow_control_queue_size{T})
scheduler_queue_bytes  model  sum by (target_model_name)
                                (inference_extension_flow_control_queue_bytes{T})
model_arrival_rate     model  sum by (namespace, target_model_name)
                                (rate(inference_extension_scheduler_attempts_total{E}[1m]))
model_request_count[R] model  sum by (namespace, model_name)
                                (increase(vllm:request_success_total{M_R}[R]))
                              one query per distinct retention R (`600s`, `1500ms`); M_R lists
                              only the namespaces and models with that retention

Scrape times (`last_sample`): every series of an instant query's answer is stamped with the
evaluation time, so those stamps say nothing about how old a pod's figures are. `timestamp()` of a
raw series is the time of the sample it found, i.e. the pod's last scrape. Alone it would vanish at
the pod's first failed scrape (Prometheus then writes a staleness marker) while the 1 m windows
above keep serving the pod's last figures for another minute, so a pod that stopped answering would
look freshly scraped; taking the maximum over 1-second steps of the last minute keeps its last
scrape time through that minute (checked against Prometheus 2.42). The step makes the time up to
1 s older than the sample, never newer. `vllm:num_requests_waiting` is the series `queue_length`
reads, so every pod kept through a queue series has a `last_sample`. A pod is only kept with a
sample in the last minute, so the ages this gives stay under about 61 s; a pod silent for longer
leaves the reading altogether (no figures rather than old ones).

Notes that matter for reading the results:
- Data-parallel engines of one pod collapse by `max` for the gauges (as WVA does for KV and queue),
  and by summed rates for the means.
- The EPP series carry their own `namespace` label (the chosen pod's namespace, EPP ≥ 1.5). A scrape
  configuration with `honor_labels: false` renames it `exported_namespace` and stores the EPP pod's
  namespace instead; with the EPP beside its model servers both name the same namespace.
- `scheduler_queue_*` cannot tell namespaces apart (upstream gateway issue #2309): the figure of a
  model name applies to that model in every namespace in scope.
- A pod's arrival rate is the gateway's dispatch rate to it; where the gateway has no series for
  the pod (no llm-d gateway in front of the model, or a pod it does not route to) it is the rate
  at which the pod's requests got their first token (`first_token_rate`), which vLLM counts
  whatever routes to it: the arrivals it admitted, short of the ones still waiting in its queue
  (`queue_length` shows those). WVA has no such fallback: without a gateway its SLO path has no
  arrival rate at all.

Bad input: scope entries with an empty model name or namespace are ignored (an empty alternative
would match series without the label). A retention period that is not a finite positive number of
at least 1 ms gives that model no request-count query, so its count stays unknown (None), which
forbids scale-to-zero. Duplicate (namespace, model) entries are read once, with their longest
retention (the one least eager to scale to zero). An empty scope builds no query.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Literal

from llmscaler.collect.readings import ModelScope

Kind = Literal['pod', 'model', 'peer']
"""`pod` and `model`: the registry's families, folded into a `Reading`; `peer`: a query outside
the registry (another autoscaler's signal, `collect.prometheus.peer`), never folded."""

KV_CACHE_USAGE = 'kv_cache_usage'
QUEUE_LENGTH = 'queue_length'
RUNNING = 'running'
CACHE_CONFIG_INFO = 'cache_config_info'
AVG_INPUT_TOKENS = 'avg_input_tokens'
AVG_OUTPUT_TOKENS = 'avg_output_tokens'
PREFIX_CACHE_HIT_RATE = 'prefix_cache_hit_rate'
AVG_TTFT = 'avg_ttft'
AVG_ITL = 'avg_itl'
POD_ARRIVAL_RATE = 'pod_arrival_rate'
FIRST_TOKEN_RATE = 'first_token_rate'
SCHEDULER_QUEUE_SIZE = 'scheduler_queue_size'
SCHEDULER_QUEUE_BYTES = 'scheduler_queue_bytes'
MODEL_ARRIVAL_RATE = 'model_arrival_rate'
MODEL_REQUEST_COUNT = 'model_request_count'
LAST_SAMPLE = 'last_sample'
TTFT_HISTOGRAM = 'ttft_histogram'
TPOT_HISTOGRAM = 'tpot_histogram'

POD_GROUP = 'namespace, pod, model_name, llm_d_ai_variant'
"""The grouping of the per-pod vLLM queries (G in the table)."""

# RE2 metacharacters; every other character is literal in a Prometheus regex.
_RE2_SPECIAL = frozenset('\\.+*?()|[]{}^$')


@dataclass(frozen=True, slots=True)
class Query:
    """One PromQL instant query of a cycle.

    `name` is unique within one `build` and names the query in errors; `family` is the registry
    entry it belongs to (equal to `name`, except `model_request_count[R]` whose family is
    `model_request_count`); `models` are the scope entries whose figures it reads.
    """

    name: str
    promql: str
    kind: Kind
    family: str
    models: tuple[ModelScope, ...]


def label_regex(*, values: Iterable[str]) -> str:
    """An RE2 alternation matching exactly `values` (sorted, duplicates removed, escaped)."""
    escaped = (
        ''.join('\\' + char if char in _RE2_SPECIAL else char for char in value)
        for value in sorted(set(values))
    )
    return '|'.join(escaped)


def promql_string(*, value: str) -> str:
    """`value` as a double-quoted PromQL string literal.

    PromQL strings follow Go's escapes, of which JSON's are a subset; raw UTF-8 is kept because
    JSON's surrogate-pair escapes are not valid in Go.
    """
    return json.dumps(value, ensure_ascii=False)


def promql_duration(*, seconds: float) -> str | None:
    """A PromQL range such as `600s` or `1500ms`; None unless finite and at least 1 ms."""
    if not math.isfinite(seconds) or seconds <= 0:
        return None
    millis = round(seconds * 1000)
    if millis < 1:
        return None
    if millis % 1000 == 0:
        return f'{millis // 1000}s'
    return f'{millis}ms'


def _matchers(*pairs: tuple[str, str]) -> str:
    return '{' + ', '.join(f'{label}{op}' for label, op in pairs) + '}'


def _regex_matcher(label: str, values: Iterable[str]) -> tuple[str, str]:
    return label, '=~' + promql_string(value=label_regex(values=values))


def _ratio(metric: str, selector: str, window: str) -> str:
    return (
        f'sum by ({POD_GROUP}) (rate({metric}_sum{selector}[{window}]))'
        f' / sum by ({POD_GROUP}) (rate({metric}_count{selector}[{window}]))'
    )


def _buckets(metric: str, selector: str) -> str:
    return f'sum by ({POD_GROUP}, le) (increase({metric}_bucket{selector}[1m]))'


def _normalize(scope: tuple[ModelScope, ...]) -> tuple[ModelScope, ...]:
    longest: dict[tuple[str, str], ModelScope] = {}
    for entry in scope:
        if not entry.model_id or not entry.namespace:
            continue
        key = (entry.namespace, entry.model_id)
        kept = longest.get(key)
        if kept is None or _retention_rank(entry) > _retention_rank(kept):
            longest[key] = entry
        if entry.latency_histograms and not longest[key].latency_histograms:
            longest[key] = replace(longest[key], latency_histograms=True)
    return tuple(longest[key] for key in sorted(longest))


def _retention_rank(entry: ModelScope) -> float:
    # An invalid retention ranks below every valid one, so a valid duplicate wins.
    return entry.retention_period if promql_duration(seconds=entry.retention_period) else -1.0


def build(*, scope: tuple[ModelScope, ...]) -> tuple[Query, ...]:
    """The queries of one cycle for `scope`, in registry order (see the module table)."""
    models = _normalize(scope)
    if not models:
        return ()
    namespaces = [entry.namespace for entry in models]
    names = [entry.model_id for entry in models]
    ns = _regex_matcher('namespace', namespaces)
    m = _matchers(ns, _regex_matcher('model_name', names))
    n = _matchers(ns)
    e = _matchers(
        ('status', '=' + promql_string(value='success')),
        ns,
        _regex_matcher('target_model_name', names),
    )
    target = _matchers(_regex_matcher('target_model_name', names))
    attempts = f'rate(inference_extension_scheduler_attempts_total{e}[1m])'

    def pod(name: str, promql: str) -> Query:
        return Query(name=name, promql=promql, kind='pod', family=name, models=models)

    def model(name: str, promql: str) -> Query:
        return Query(name=name, promql=promql, kind='model', family=name, models=models)

    queries = [
        pod(
            KV_CACHE_USAGE,
            f'max by ({POD_GROUP}) (max_over_time(vllm:kv_cache_usage_perc{m}[1m])'
            f' or max_over_time(vllm:gpu_cache_usage_perc{m}[1m]))',
        ),
        pod(
            QUEUE_LENGTH,
            f'max by ({POD_GROUP}) (max_over_time(vllm:num_requests_waiting{m}[1m]))',
        ),
        pod(RUNNING, f'max by ({POD_GROUP}) (vllm:num_requests_running{m})'),
        # A subquery, not a bare timestamp(): a failed scrape's staleness marker would hide the
        # last scrape time while the windows above still hold the pod's figures.
        pod(
            LAST_SAMPLE,
            f'max by ({POD_GROUP}) (max_over_time(timestamp(vllm:num_requests_waiting{m})[1m:1s]))',
        ),
        pod(
            CACHE_CONFIG_INFO,
            f'max by (namespace, pod, num_gpu_blocks, block_size) (vllm:cache_config_info{n})',
        ),
        pod(AVG_INPUT_TOKENS, _ratio('vllm:request_prompt_tokens', m, '5m')),
        pod(AVG_OUTPUT_TOKENS, _ratio('vllm:request_generation_tokens', m, '5m')),
        pod(
            PREFIX_CACHE_HIT_RATE,
            f'(sum by ({POD_GROUP}) (rate(vllm:prefix_cache_hits_total{m}[5m]))'
            f' / sum by ({POD_GROUP}) (rate(vllm:prefix_cache_queries_total{m}[5m])))'
            f' or (sum by ({POD_GROUP}) (rate(vllm:gpu_prefix_cache_hits_total{m}[5m]))'
            f' / sum by ({POD_GROUP}) (rate(vllm:gpu_prefix_cache_queries_total{m}[5m])))',
        ),
        pod(AVG_TTFT, _ratio('vllm:time_to_first_token_seconds', m, '1m')),
        pod(
            AVG_ITL,
            f'({_ratio("vllm:inter_token_latency_seconds", m, "1m")})'
            f' or ({_ratio("vllm:time_per_output_token_seconds", m, "1m")})',
        ),
        pod(POD_ARRIVAL_RATE, f'sum by (namespace, pod_name) ({attempts})'),
        pod(
            FIRST_TOKEN_RATE,
            f'sum by ({POD_GROUP}) (rate(vllm:time_to_first_token_seconds_count{m}[1m]))',
        ),
        model(
            SCHEDULER_QUEUE_SIZE,
            f'sum by (target_model_name) (inference_extension_flow_control_queue_size{target})',
        ),
        model(
            SCHEDULER_QUEUE_BYTES,
            f'sum by (target_model_name) (inference_extension_flow_control_queue_bytes{target})',
        ),
        model(MODEL_ARRIVAL_RATE, f'sum by (namespace, target_model_name) ({attempts})'),
    ]
    readers = [entry for entry in models if entry.latency_histograms]
    if readers:
        h = _matchers(
            _regex_matcher('namespace', (entry.namespace for entry in readers)),
            _regex_matcher('model_name', (entry.model_id for entry in readers)),
        )
        # In the registry's order: after the other pod queries.
        at = next(i for i, query in enumerate(queries) if query.kind == 'model')
        queries[at:at] = [
            pod(TTFT_HISTOGRAM, _buckets('vllm:time_to_first_token_seconds', h)),
            pod(TPOT_HISTOGRAM, _buckets('vllm:request_time_per_output_token_seconds', h)),
        ]
    queries.extend(_request_count_queries(models))
    return tuple(queries)


def _request_count_queries(models: tuple[ModelScope, ...]) -> list[Query]:
    # Grouped by the rendered range, so retentions that round to the same window share a query.
    groups: dict[int, list[ModelScope]] = {}
    for entry in models:
        if promql_duration(seconds=entry.retention_period) is not None:
            groups.setdefault(round(entry.retention_period * 1000), []).append(entry)
    queries = []
    for millis in sorted(groups):
        members = tuple(groups[millis])
        window = promql_duration(seconds=millis / 1000)
        selector = _matchers(
            _regex_matcher('namespace', (entry.namespace for entry in members)),
            _regex_matcher('model_name', (entry.model_id for entry in members)),
        )
        queries.append(
            Query(
                name=f'{MODEL_REQUEST_COUNT}[{window}]',
                promql=(
                    'sum by (namespace, model_name)'
                    f' (increase(vllm:request_success_total{selector}[{window}]))'
                ),
                kind='model',
                family=MODEL_REQUEST_COUNT,
                models=members,
            )
        )
    return queries
