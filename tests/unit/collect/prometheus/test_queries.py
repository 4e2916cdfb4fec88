"""Tests of the PromQL registry (WVA v0.9.0, internal/collector/registration/)."""

from __future__ import annotations

import json
import math
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmscaler.collect.prometheus import queries as q
from llmscaler.collect.readings import ModelScope

# LLAMA's analyzer reads the latency histograms (the predictive one); QWEN's does not.
LLAMA = ModelScope(model_id='meta-llama/Llama-3.1-8B', namespace='ns-a', latency_histograms=True)
QWEN = ModelScope(model_id='qwen', namespace='ns-b', retention_period=300.0)

# The registry, spelled out: adding, dropping or reordering a query must change this list.
POD_FAMILIES = (
    'kv_cache_usage',
    'queue_length',
    'running',
    'last_sample',
    'cache_config_info',
    'avg_input_tokens',
    'avg_output_tokens',
    'prefix_cache_hit_rate',
    'avg_ttft',
    'avg_itl',
    'pod_arrival_rate',
    'first_token_rate',
    'ttft_histogram',
    'tpot_histogram',
)
MODEL_FAMILIES = ('scheduler_queue_size', 'scheduler_queue_bytes', 'model_arrival_rate')
REGISTRY = POD_FAMILIES + MODEL_FAMILIES
G = 'namespace, pod, model_name, llm_d_ai_variant'
# The '.' of the model name is escaped for RE2, and the backslash again for the PromQL string.
M = '{namespace=~"ns-a", model_name=~"meta-llama/Llama-3\\\\.1-8B"}'


def by_name(scope: tuple[ModelScope, ...]) -> dict[str, q.Query]:
    return {query.name: query for query in q.build(scope=scope)}


def test_registry_order_names_and_kinds() -> None:
    built = q.build(scope=(LLAMA,))
    assert tuple(query.name for query in built) == (*REGISTRY, 'model_request_count[600s]')
    # The request-count query is a model query too.
    assert [query.kind for query in built] == (
        ['pod'] * len(POD_FAMILIES) + ['model'] * (len(MODEL_FAMILIES) + 1)
    )
    assert built[-1].family == 'model_request_count'
    assert all(query.family == query.name for query in built[:-1])
    assert all(query.models == (LLAMA,) for query in built)


def test_saturation_queries_exact() -> None:
    queries = by_name((LLAMA,))
    assert queries['kv_cache_usage'].promql == (
        f'max by ({G}) (max_over_time(vllm:kv_cache_usage_perc{M}[1m])'
        f' or max_over_time(vllm:gpu_cache_usage_perc{M}[1m]))'
    )
    assert queries['queue_length'].promql == (
        f'max by ({G}) (max_over_time(vllm:num_requests_waiting{M}[1m]))'
    )
    assert queries['running'].promql == f'max by ({G}) (vllm:num_requests_running{M})'


def test_last_sample_is_the_newest_scrape_time_of_the_last_minute() -> None:
    # timestamp() of the raw series is its scrape time; the 1 s subquery keeps the newest one seen
    # over the minute, through the staleness marker a failed scrape writes.
    query = by_name((LLAMA,))['last_sample']
    assert query.promql == (
        f'max by ({G}) (max_over_time(timestamp(vllm:num_requests_waiting{M})[1m:1s]))'
    )
    assert (query.kind, query.family, query.models) == ('pod', 'last_sample', (LLAMA,))
    # The series queue_length reads, over the same minute: a pod with a queue figure has a time.
    assert 'vllm:num_requests_waiting' + M + '[1m]' in by_name((LLAMA,))['queue_length'].promql


def test_cache_config_info_filters_namespace_only() -> None:
    # vllm:cache_config_info has no model_name label (WVA #1198): a model filter would drop it.
    promql = by_name((LLAMA, QWEN))['cache_config_info'].promql
    assert promql == (
        'max by (namespace, pod, num_gpu_blocks, block_size)'
        ' (vllm:cache_config_info{namespace=~"ns-a|ns-b"})'
    )
    assert 'model_name' not in promql


def test_means_are_ratios_of_summed_rates() -> None:
    queries = by_name((LLAMA,))
    assert queries['avg_input_tokens'].promql == (
        f'sum by ({G}) (rate(vllm:request_prompt_tokens_sum{M}[5m]))'
        f' / sum by ({G}) (rate(vllm:request_prompt_tokens_count{M}[5m]))'
    )
    assert queries['avg_output_tokens'].promql == (
        f'sum by ({G}) (rate(vllm:request_generation_tokens_sum{M}[5m]))'
        f' / sum by ({G}) (rate(vllm:request_generation_tokens_count{M}[5m]))'
    )
    assert queries['avg_ttft'].promql == (
        f'sum by ({G}) (rate(vllm:time_to_first_token_seconds_sum{M}[1m]))'
        f' / sum by ({G}) (rate(vllm:time_to_first_token_seconds_count{M}[1m]))'
    )


def test_both_vllm_generations_new_name_first() -> None:
    # `a or b` keeps a's series and adds b's only for label sets a lacks: the new name wins
    # where a pod exposes both (vLLM 0.9.2 to 0.11), the old one covers older pods.
    queries = by_name((LLAMA,))
    itl = queries['avg_itl'].promql
    new = (
        f'(sum by ({G}) (rate(vllm:inter_token_latency_seconds_sum{M}[1m]))'
        f' / sum by ({G}) (rate(vllm:inter_token_latency_seconds_count{M}[1m])))'
    )
    old = (
        f'(sum by ({G}) (rate(vllm:time_per_output_token_seconds_sum{M}[1m]))'
        f' / sum by ({G}) (rate(vllm:time_per_output_token_seconds_count{M}[1m])))'
    )
    assert itl == f'{new} or {old}'
    hit = queries['prefix_cache_hit_rate'].promql
    assert hit.index('vllm:prefix_cache_hits_total') < hit.index(' or ')
    assert hit.index(' or ') < hit.index('vllm:gpu_prefix_cache_hits_total')
    assert 'vllm:gpu_prefix_cache_queries_total' in hit
    kv = queries['kv_cache_usage'].promql
    assert kv.index('kv_cache_usage_perc') < kv.index(' or ') < kv.index('gpu_cache_usage_perc')


def test_first_token_rate_counts_the_pods_own_admissions() -> None:
    assert by_name((LLAMA,))['first_token_rate'].promql == (
        f'sum by ({G}) (rate(vllm:time_to_first_token_seconds_count{M}[1m]))'
    )


def test_latency_histograms_are_the_buckets_increase_per_pod_and_bound() -> None:
    queries = by_name((LLAMA,))
    for name, metric in (
        ('ttft_histogram', 'vllm:time_to_first_token_seconds_bucket'),
        ('tpot_histogram', 'vllm:request_time_per_output_token_seconds_bucket'),
    ):
        assert queries[name].promql == f'sum by ({G}, le) (increase({metric}{M}[1m]))'


def test_latency_histograms_are_asked_only_for_the_models_that_read_them() -> None:
    assert not {'ttft_histogram', 'tpot_histogram'} & set(by_name((QWEN,)))
    both = by_name((LLAMA, QWEN))
    # Only LLAMA's series: a large fleet's answers are mostly these.
    assert M in both['tpot_histogram'].promql
    assert 'qwen' not in both['tpot_histogram'].promql
    assert 'qwen' in both['avg_ttft'].promql
    # A duplicate entry that reads them makes the model read them.
    reader = ModelScope(model_id='qwen', namespace='ns-b', latency_histograms=True)
    assert 'qwen' in by_name((QWEN, reader))['ttft_histogram'].promql


def test_epp_queries() -> None:
    queries = by_name((LLAMA,))
    e = '{status="success", namespace=~"ns-a", target_model_name=~"meta-llama/Llama-3\\\\.1-8B"}'
    assert queries['pod_arrival_rate'].promql == (
        f'sum by (namespace, pod_name) (rate(inference_extension_scheduler_attempts_total{e}[1m]))'
    )
    assert queries['model_arrival_rate'].promql == (
        'sum by (namespace, target_model_name)'
        f' (rate(inference_extension_scheduler_attempts_total{e}[1m]))'
    )
    t = '{target_model_name=~"meta-llama/Llama-3\\\\.1-8B"}'
    assert queries['scheduler_queue_size'].promql == (
        f'sum by (target_model_name) (inference_extension_flow_control_queue_size{t})'
    )
    assert queries['scheduler_queue_bytes'].promql == (
        f'sum by (target_model_name) (inference_extension_flow_control_queue_bytes{t})'
    )


def test_one_request_count_query_per_retention() -> None:
    queries = by_name((LLAMA, QWEN))
    assert [name for name in queries if name.startswith('model_request_count')] == [
        'model_request_count[300s]',
        'model_request_count[600s]',
    ]
    assert queries['model_request_count[300s]'].promql == (
        'sum by (namespace, model_name) (increase(vllm:request_success_total'
        '{namespace=~"ns-b", model_name=~"qwen"}[300s]))'
    )
    assert queries['model_request_count[600s]'].promql == (
        f'sum by (namespace, model_name) (increase(vllm:request_success_total{M}[600s]))'
    )
    assert queries['model_request_count[300s]'].models == (QWEN,)
    assert queries['model_request_count[600s]'].models == (LLAMA,)


def test_same_retention_shares_one_query() -> None:
    other = ModelScope(model_id='mistral', namespace='ns-b')
    queries = by_name((other, LLAMA))
    assert [name for name in queries if name.startswith('model_request_count')] == [
        'model_request_count[600s]'
    ]
    # Scope entries are sorted by (namespace, model), and the regexes by value.
    assert queries['model_request_count[600s]'].models == (LLAMA, other)
    assert '{namespace=~"ns-a|ns-b", model_name=~"meta-llama/Llama-3\\\\.1-8B|mistral"}' in (
        queries['model_request_count[600s]'].promql
    )


def test_duplicate_entries_keep_the_longest_retention() -> None:
    short = ModelScope(model_id='qwen', namespace='ns-b', retention_period=60.0)
    long = ModelScope(model_id='qwen', namespace='ns-b', retention_period=900.0)
    built = q.build(scope=(short, long, short))
    assert [query.name for query in built][-1] == 'model_request_count[900s]'
    assert len(built) == len(REGISTRY) - 2 + 1  # no latency histograms: qwen does not read them
    assert built[0].models == (long,)


@pytest.mark.parametrize('retention', [0.0, -5.0, math.nan, math.inf, 0.0004])
def test_invalid_retention_gets_no_request_count(retention: float) -> None:
    bad = ModelScope(model_id='qwen', namespace='ns-b', retention_period=retention)
    names = [query.name for query in q.build(scope=(bad, LLAMA))]
    assert names[-1] == 'model_request_count[600s]'
    assert len(names) == len(REGISTRY) + 1
    assert 'qwen' not in by_name((bad, LLAMA))['model_request_count[600s]'].promql
    # The other families still cover the model.
    assert 'qwen' in by_name((bad, LLAMA))['kv_cache_usage'].promql


def test_empty_scope_and_empty_names_build_nothing() -> None:
    assert q.build(scope=()) == ()
    assert q.build(scope=(ModelScope(model_id='', namespace='ns'),)) == ()
    assert q.build(scope=(ModelScope(model_id='m', namespace=''),)) == ()
    kept = q.build(scope=(ModelScope(model_id='', namespace='ns'), LLAMA))
    assert kept[0].models == (LLAMA,)


def test_label_regex_escapes_and_sorts() -> None:
    assert q.label_regex(values=['b', 'a', 'b']) == 'a|b'
    assert q.label_regex(values=['meta-llama/Llama-3.1-8B']) == 'meta-llama/Llama-3\\.1-8B'
    assert q.label_regex(values=['a+b(c)|d*']) == 'a\\+b\\(c\\)\\|d\\*'
    assert q.label_regex(values=[]) == ''


def test_promql_string_quotes() -> None:
    assert q.promql_string(value='a\\.b') == '"a\\\\.b"'
    assert q.promql_string(value='say "hi"') == '"say \\"hi\\""'
    assert q.promql_string(value='naïve') == '"naïve"'


@pytest.mark.parametrize(
    ('seconds', 'expected'),
    [
        (600.0, '600s'),
        (1.5, '1500ms'),
        (0.001, '1ms'),
        (86400.0, '86400s'),
        (0.0004, None),  # rounds to 0 ms
        (0.0, None),
        (-1.0, None),
        (math.nan, None),
        (math.inf, None),
    ],
)
def test_promql_duration(seconds: float, expected: str | None) -> None:
    assert q.promql_duration(seconds=seconds) == expected


names = st.text(min_size=1, max_size=12)


@given(values=st.lists(names, min_size=1, max_size=6), other=names)
def test_label_regex_matches_exactly_the_values(values: list[str], other: str) -> None:
    # Prometheus anchors its regexes; re.fullmatch does the same, and the escaped RE2
    # metacharacters are Python's too.
    pattern = re.compile(q.label_regex(values=values), re.DOTALL)
    assert all(pattern.fullmatch(value) for value in values)
    assert (pattern.fullmatch(other) is not None) == (other in values)


@given(value=st.text(max_size=30))
def test_promql_string_round_trips(value: str) -> None:
    # JSON string escapes are a subset of Go's, which PromQL uses.
    literal = q.promql_string(value=value)
    assert literal.startswith('"')
    assert json.loads(literal) == value


@given(millis=st.integers(min_value=1, max_value=10**9))
def test_promql_duration_round_trips(millis: int) -> None:
    text = q.promql_duration(seconds=millis / 1000)
    assert text is not None
    number = int(text.removesuffix('ms').removesuffix('s'))
    assert number * (1 if text.endswith('ms') else 1000) == millis


@given(
    entries=st.lists(
        st.tuples(
            st.sampled_from(['m1', 'm2', 'm3']),
            st.sampled_from(['ns1', 'ns2']),
            st.sampled_from([60.0, 300.0, 600.0]),
        ),
        max_size=8,
    )
)
def test_batch_size_is_registry_plus_retentions(entries: list[tuple[str, str, float]]) -> None:
    scope = tuple(ModelScope(model_id=m, namespace=ns, retention_period=r) for m, ns, r in entries)
    built = q.build(scope=scope)
    pairs = {(ns, m) for m, ns, _ in entries}
    # The longest retention of each (namespace, model) decides its request-count group.
    retentions = {max(r for m, ns, r in entries if (ns, m) == pair) for pair in pairs}
    # No entry reads the latency histograms: their two queries are not asked.
    assert len(built) == (len(REGISTRY) - 2 + len(retentions) if entries else 0)
    assert len({query.name for query in built}) == len(built)
    counted = [e for query in built if query.family == 'model_request_count' for e in query.models]
    assert sorted((e.namespace, e.model_id) for e in counted) == sorted(pairs)
