"""The emulated vLLM and EPP pages: vLLM's names, types, labels and buckets, counted right.

The expected families, types and label names below are transcribed from the example page
(captured from a vLLM server, placed beside the repository), vLLM's vllm/v1/metrics/loggers.py and
the Gateway API Inference Extension's pkg/epp/metrics/metrics.go; when the example page is
present the rendered page is also compared with it programmatically.
"""

from __future__ import annotations

import functools
import math
from itertools import pairwise

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.utils import floatToGoString

from llmscaler.emulate.exposition import (
    CONTENT_TYPE,
    Histogram,
    RequestStats,
    SchedulerAttempts,
    go_float,
    prom_float,
    render_epp,
    render_replica,
    token_buckets,
)
from llmscaler.sim.hardware.presets import preset
from llmscaler.sim.vllm.base import ReplicaCounters
from llmscaler.sim.vocabulary import VariantSpec
from tests.support.paths import REFERENCE_PAGE
from tests.support.prerequisites import need_file

EXAMPLE = REFERENCE_PAGE
MODEL = 'meta-llama/Llama-3.1-8B-Instruct'
BASE = frozenset({'engine', 'model_name'})
BUCKET = frozenset({'engine', 'le', 'model_name'})
GAUGES = ('vllm:num_requests_running', 'vllm:num_requests_waiting', 'vllm:kv_cache_usage_perc')
COUNTERS = (
    'vllm:prefix_cache_queries',
    'vllm:prefix_cache_hits',
    'vllm:num_preemptions',
    'vllm:prompt_tokens',
    'vllm:generation_tokens',
)
HISTOGRAMS = (
    'vllm:request_prompt_tokens',
    'vllm:request_generation_tokens',
    'vllm:request_max_num_generation_tokens',
    'vllm:request_params_n',
    'vllm:request_params_max_tokens',
    'vllm:time_to_first_token_seconds',
    'vllm:inter_token_latency_seconds',
    'vllm:request_time_per_output_token_seconds',
    'vllm:e2e_request_latency_seconds',
    'vllm:request_decode_time_seconds',
)
CACHE_CONFIG_LABELS = frozenset(
    {
        'block_size',
        'cache_dtype',
        'calculate_kv_scales',
        'cpu_kvcache_space_bytes',
        'cpu_offload_gb',
        'enable_prefix_caching',
        'engine',
        'gpu_memory_utilization',
        'is_attention_free',
        'kv_cache_memory_bytes',
        'kv_offloading_backend',
        'kv_offloading_size',
        'kv_sharing_fast_prefill',
        'mamba_block_size',
        'mamba_cache_dtype',
        'mamba_cache_mode',
        'mamba_page_size_padded',
        'mamba_ssm_cache_dtype',
        'num_cpu_blocks',
        'num_gpu_blocks',
        'num_gpu_blocks_override',
        'prefix_caching_hash_algo',
        'sliding_window',
        'swap_space',
    }
)
# vLLM's bucket sets (vllm/v1/metrics/buckets.py).
TTFT = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20]
TTFT += [40, 80, 160, 640, 2560]
ITL = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40]
ITL += [80]
LAT = [0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960, 1920]
LAT += [7680]
TOKENS_8192 = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000]

Shape = dict[str, tuple[str, dict[str, frozenset[str]]]]


def expected_shape() -> Shape:
    """family → (type, sample name → label names), as on the example page."""
    shape: Shape = {name: ('gauge', {name: BASE}) for name in GAUGES}
    for name in COUNTERS:
        shape[name] = ('counter', {f'{name}_total': BASE})
        shape[f'{name}_created'] = ('gauge', {f'{name}_created': BASE})
    with_reason = BASE | {'finished_reason'}
    shape['vllm:request_success'] = ('counter', {'vllm:request_success_total': with_reason})
    shape['vllm:request_success_created'] = (
        'gauge',
        {'vllm:request_success_created': with_reason},
    )
    for name in HISTOGRAMS:
        samples = {f'{name}_bucket': BUCKET, f'{name}_count': BASE, f'{name}_sum': BASE}
        shape[name] = ('histogram', samples)
        shape[f'{name}_created'] = ('gauge', {f'{name}_created': BASE})
    shape['vllm:cache_config_info'] = ('gauge', {'vllm:cache_config_info': CACHE_CONFIG_LABELS})
    return shape


def shape_of(text: str) -> Shape:
    shape: Shape = {}
    for family in text_string_to_metric_families(text):
        samples: dict[str, frozenset[str]] = {}
        for sample in family.samples:
            labels = frozenset(sample.labels)
            # A sample name's label set must be the same on every series.
            assert samples.setdefault(sample.name, labels) == labels, sample
        shape[family.name] = (family.type, samples)
    return shape


def h100(**overrides: int) -> VariantSpec:
    return preset(name='llama-3.1-8b-h100', variant_name='llama-3.1-8b-h100', **overrides)


def page(
    *,
    stats: RequestStats | None = None,
    counters: ReplicaCounters | None = None,
    spec: VariantSpec | None = None,
    model: str = MODEL,
    running: int = 3,
    waiting: int = 2,
    kv: float = 0.25,
) -> str:
    spec = spec or h100(max_model_len=8192)
    return render_replica(
        model_name=model,
        spec=spec,
        running=running,
        waiting=waiting,
        kv_usage=kv,
        counters=counters or ReplicaCounters(),
        stats=stats or RequestStats(max_model_len=spec.max_model_len),
        created=1_763_241_600.0,
    )


def one_request_stats() -> RequestStats:
    """Arrived 10.0, first token 10.25, finished 11.25, 300 in, 5 out, max_tokens 8."""
    stats = RequestStats(max_model_len=8192)
    stats.first_token(ttft=0.25)
    stats.finished(
        arrived=10.0,
        first_token=10.25,
        finished=11.25,
        input_tokens=300,
        output_tokens=5,
        max_tokens=8,
        reason='length',
    )
    return stats


@functools.cache
def samples_of(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(text: str, name: str, **labels: str) -> float:
    base = {'engine': '0', 'model_name': MODEL} if name.startswith('vllm:') else {}
    if name == 'vllm:cache_config_info':
        base = {}
    return samples_of(text)[(name, frozenset({**base, **labels}.items()))]


def buckets(text: str, name: str) -> dict[str, float]:
    return {
        dict(labels)['le']: v
        for (sample, labels), v in samples_of(text).items()
        if sample == f'{name}_bucket'
    }


# ---- shape -------------------------------------------------------------------------------------


def test_page_has_the_example_families_types_and_label_names() -> None:
    assert shape_of(page(stats=one_request_stats())) == expected_shape()


def test_page_matches_the_real_example_page() -> None:
    example_text = need_file(
        EXAMPLE, what='reference material lives outside the repository'
    ).read_text()
    ours_text = page(stats=one_request_stats())
    example, ours = shape_of(example_text), shape_of(ours_text)
    assert set(ours) <= set(example)
    for family, (kind, samples) in ours.items():
        assert example[family] == (kind, samples), family
    helps = {line.split()[2]: line for line in example_text.splitlines() if line[:6] == '# HELP'}
    for line in ours_text.splitlines():
        if line.startswith('# HELP'):
            assert helps[line.split()[2]] == line
    for name in HISTOGRAMS:  # max_model_len 8192 as on the example page
        assert list(buckets(ours_text, name)) == list(buckets(example_text, name)), name


def test_colons_are_kept_and_the_content_type_is_text_0_0_4() -> None:
    text = page()
    assert 'vllm:num_requests_running{engine="0",model_name="' in text
    assert not any(line.startswith('vllm_') for line in text.splitlines())
    assert CONTENT_TYPE == 'text/plain; version=0.0.4; charset=utf-8'
    assert text.endswith('\n')


@pytest.mark.parametrize(
    ('name', 'bounds'),
    [
        ('vllm:time_to_first_token_seconds', TTFT),
        ('vllm:inter_token_latency_seconds', ITL),
        ('vllm:request_time_per_output_token_seconds', ITL),
        ('vllm:e2e_request_latency_seconds', LAT),
        ('vllm:request_decode_time_seconds', LAT),
        ('vllm:request_prompt_tokens', TOKENS_8192),
        ('vllm:request_generation_tokens', TOKENS_8192),
        ('vllm:request_params_max_tokens', TOKENS_8192),
        ('vllm:request_params_n', [1, 2, 5, 10, 20]),
    ],
)
def test_histogram_buckets_are_vllms(name: str, bounds: list[float]) -> None:
    les = list(buckets(page(), name))
    assert les == [floatToGoString(b) for b in bounds] + ['+Inf']  # type: ignore[no-untyped-call]


def test_token_buckets_follow_1_2_5_up_to_max_model_len() -> None:
    assert token_buckets(max_model_len=8192) == tuple(float(b) for b in TOKENS_8192)
    assert token_buckets(max_model_len=131_072)[-1] == 100_000.0
    assert token_buckets(max_model_len=5000)[-1] == 5000.0  # inclusive
    assert token_buckets(max_model_len=1) == (1.0,)
    assert token_buckets(max_model_len=0) == (1.0,)


# ---- values ------------------------------------------------------------------------------------


def test_one_finished_request_worked_example() -> None:
    text = page(stats=one_request_stats())
    # TTFT 0.25 s: le=0.25 is inclusive, le=0.1 is not.
    ttft = buckets(text, 'vllm:time_to_first_token_seconds')
    assert (ttft['0.1'], ttft['0.25'], ttft['+Inf']) == (0.0, 1.0, 1.0)
    # ITL: mean (11.25 − 10.25) / (5 − 1) = 0.25 s observed 4 times; sum 1.0.
    itl = buckets(text, 'vllm:inter_token_latency_seconds')
    assert (itl['0.2'], itl['0.3'], itl['+Inf']) == (0.0, 4.0, 4.0)
    assert value(text, 'vllm:inter_token_latency_seconds_sum') == 1.0
    assert value(text, 'vllm:inter_token_latency_seconds_count') == 4.0
    tpot = buckets(text, 'vllm:request_time_per_output_token_seconds')
    assert (tpot['0.2'], tpot['0.3']) == (0.0, 1.0)
    # e2e 11.25 − 10.0 = 1.25 s; decode 1.0 s.
    e2e = buckets(text, 'vllm:e2e_request_latency_seconds')
    assert (e2e['1.0'], e2e['1.5']) == (0.0, 1.0)
    assert value(text, 'vllm:e2e_request_latency_seconds_sum') == 1.25
    assert buckets(text, 'vllm:request_decode_time_seconds')['1.0'] == 1.0
    prompt = buckets(text, 'vllm:request_prompt_tokens')
    assert (prompt['200.0'], prompt['500.0']) == (0.0, 1.0)
    assert value(text, 'vllm:request_prompt_tokens_sum') == 300.0
    assert buckets(text, 'vllm:request_generation_tokens')['5.0'] == 1.0
    max_tokens = buckets(text, 'vllm:request_params_max_tokens')
    assert (max_tokens['5.0'], max_tokens['10.0']) == (0.0, 1.0)
    assert buckets(text, 'vllm:request_params_n')['1.0'] == 1.0
    assert value(text, 'vllm:request_success_total', finished_reason='length') == 1.0
    assert value(text, 'vllm:request_success_total', finished_reason='stop') == 0.0
    assert value(text, 'vllm:request_success_total', finished_reason='abort') == 0.0


def test_a_single_token_output_has_no_itl_and_a_zero_tpot() -> None:
    stats = RequestStats(max_model_len=8192)
    stats.finished(
        arrived=0.0,
        first_token=0.5,
        finished=0.5,
        input_tokens=10,
        output_tokens=1,
        max_tokens=1,
        reason='stop',
    )
    text = page(stats=stats)
    assert value(text, 'vllm:inter_token_latency_seconds_count') == 0.0
    assert buckets(text, 'vllm:request_time_per_output_token_seconds')['0.01'] == 1.0
    assert value(text, 'vllm:request_success_total', finished_reason='stop') == 1.0


def test_gauges_counters_and_cache_config_come_from_the_engine_and_spec() -> None:
    counters = ReplicaCounters(
        prompt_tokens_total=12_566_772, generation_tokens_total=2_056_073, preemptions_total=3
    )
    text = page(counters=counters, spec=h100(num_gpu_blocks=1234), running=41, waiting=7, kv=0.5)
    assert value(text, 'vllm:num_requests_running') == 41.0
    assert value(text, 'vllm:num_requests_waiting') == 7.0
    assert value(text, 'vllm:kv_cache_usage_perc') == 0.5
    assert value(text, 'vllm:prompt_tokens_total') == 12_566_772.0
    # Prefix caching on but never hit: every prompt token is a query.
    assert value(text, 'vllm:prefix_cache_queries_total') == 12_566_772.0
    assert value(text, 'vllm:prefix_cache_hits_total') == 0.0
    assert value(text, 'vllm:generation_tokens_total') == 2_056_073.0
    assert value(text, 'vllm:num_preemptions_total') == 3.0
    assert value(text, 'vllm:prompt_tokens_created') == 1_763_241_600.0
    assert 'vllm:prompt_tokens_total{engine="0",model_name="' + MODEL + '"} 1.2566772e+07' in text
    info = [s for s in samples_of(text) if s[0] == 'vllm:cache_config_info']
    assert len(info) == 1
    labels = dict(info[0][1])
    assert (labels['block_size'], labels['num_gpu_blocks'], labels['engine']) == ('16', '1234', '0')
    assert 'model_name' not in labels
    assert samples_of(text)[info[0]] == 1.0


def test_nan_gauge_and_escaped_model_name() -> None:
    model = 'team/"odd"\\name\nx'
    text = page(model=model, kv=math.nan)
    assert (
        'vllm:kv_cache_usage_perc{engine="0",model_name="team/\\"odd\\"\\\\name\\nx"} NaN' in text
    )
    names = {
        s.labels['model_name']
        for f in text_string_to_metric_families(text)
        for s in f.samples
        if 'model_name' in s.labels
    }
    assert names == {model}


def test_histogram_worked_example_and_bad_observations() -> None:
    h = Histogram(bounds=(1, 2, 5))
    for v in (0.5, 2.0, 2.0, 7.0):
        assert h.observe(value=v)
    assert h.cumulative() == [1, 3, 3, 4]  # le 1, 2 (inclusive), 5, +Inf
    assert (h.total, h.count) == (11.5, 4)
    for bad in (math.nan, math.inf, -1.0):
        assert not h.observe(value=bad)
    assert not h.observe(value=1.0, times=0)
    assert (h.count, h.dropped, h.cumulative()[-1]) == (4, 3, 4)
    with pytest.raises(ValueError, match='strictly increasing'):
        Histogram(bounds=(2, 1))
    with pytest.raises(ValueError, match='finite'):
        Histogram(bounds=(1, math.inf))


@given(
    st.lists(
        st.tuples(
            st.one_of(st.floats(min_value=0, max_value=1e4), st.sampled_from([math.nan, -1.0])),
            st.integers(min_value=1, max_value=5),
        ),
        max_size=40,
    )
)
def test_histogram_stays_cumulative_and_monotone(observations: list[tuple[float, int]]) -> None:
    h = Histogram(bounds=TTFT)
    before = h.cumulative()
    valid = 0
    for v, times in observations:
        valid += times if h.observe(value=v, times=times) else 0
        now = h.cumulative()
        assert all(a <= b for a, b in pairwise(now))  # cumulative
        assert all(a <= b for a, b in zip(before, now, strict=True))  # counters never fall
        assert now[-1] == h.count == valid  # +Inf bucket = count
        before = now


# ---- number formats ------------------------------------------------------------------------


@given(st.floats(allow_nan=True, allow_infinity=True))
def test_prom_float_is_prometheus_clients_format(x: float) -> None:
    assert prom_float(x) == floatToGoString(x)  # type: ignore[no-untyped-call]


@pytest.mark.parametrize(
    ('x', 'text'),
    [
        (0.0, '0'),
        (1.0, '1'),
        (2.5, '2.5'),
        (123456.0, '123456'),
        (1e6, '1e+06'),
        (1234567.0, '1.234567e+06'),
        (0.0001, '0.0001'),
        (0.00001, '1e-05'),
        (-3.0, '-3'),
        (math.nan, 'NaN'),
        (math.inf, '+Inf'),
        (-math.inf, '-Inf'),
    ],
)
def test_go_float_worked_values(x: float, text: str) -> None:
    assert go_float(x) == text


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_go_float_round_trips(x: float) -> None:
    assert float(go_float(x)) == x


# ---- EPP ---------------------------------------------------------------------------------------


def test_epp_page_families_labels_and_values() -> None:
    text = render_epp(
        model_name=MODEL,
        pool='pool-a',
        queue_size=3,
        queue_bytes=4_000_000,
        attempts=[
            SchedulerAttempts(pod_name='v-1', namespace='ns', port=18001, success=2),
            SchedulerAttempts(pod_name='v-0', namespace='ns', port=18000, success=5),
        ],
    )
    queue_labels = frozenset(
        {'fairness_id', 'priority', 'inference_pool', 'model_name', 'target_model_name'}
    )
    attempt_labels = frozenset({'status', 'target_model_name', 'pod_name', 'namespace', 'port'})
    assert shape_of(text) == {
        'inference_extension_flow_control_queue_size': (
            'gauge',
            {'inference_extension_flow_control_queue_size': queue_labels},
        ),
        'inference_extension_flow_control_queue_bytes': (
            'gauge',
            {'inference_extension_flow_control_queue_bytes': queue_labels},
        ),
        'inference_extension_scheduler_attempts': (
            'counter',
            {'inference_extension_scheduler_attempts_total': attempt_labels},
        ),
    }
    values = samples_of(text)
    size = next(v for (n, _), v in values.items() if n.endswith('queue_size'))
    assert size == 3.0
    assert 'target_model_name="' + MODEL + '"} 4e+06' in text  # Go's number format
    attempts = [
        (dict(labels)['pod_name'], dict(labels)['port'], dict(labels)['status'], v)
        for (n, labels), v in values.items()
        if n == 'inference_extension_scheduler_attempts_total'
    ]
    assert attempts == [('v-0', '18000', 'success', 5.0), ('v-1', '18001', 'success', 2.0)]
    assert all(line.startswith('# HELP') is False or '[ALPHA]' in line for line in text.split('\n'))


def test_epp_page_with_an_empty_queue_and_no_attempts() -> None:
    text = render_epp(model_name='m', pool='p', queue_size=0, queue_bytes=0, attempts=[])
    assert 'inference_extension_flow_control_queue_size{' in text
    assert 'target_model_name="m"} 0\n' in text
    assert 'inference_extension_scheduler_attempts_total{' not in text
