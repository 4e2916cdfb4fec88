"""Pages of vLLM pods and of their gateway (EPP), and windows filled from them by hand.

`feed` fills the windows as a successful scrape fills them; `scraped` scrapes `pages(i)` at each of
`TIMES`; `read` computes the reading. `example_page` is the real example page (captured from a vLLM
server, placed beside the repository) with values substituted, `scrape_values(i)` those of scrape i;
`epp_page` is a gateway page; `epp_pages(i)` two vLLM pods and their gateway at scrape i, whose
figures `check_gateway_figures` checks. The figures are worked out in test_collect_scrape_reading;
test_collect_scrape serves the same pages over HTTP.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

from llmscaler.collect import histograms
from llmscaler.collect.exposition import EPP_FAMILIES, VLLM_FAMILIES, parse
from llmscaler.collect.readings import ModelScope, Reading
from llmscaler.collect.scrape.reading import REQUEST_SUCCESS, Kind, PodSeries, compute_reading
from llmscaler.collect.windows import SeriesWindow
from tests.support.paths import REFERENCE_PAGE
from tests.support.prerequisites import need_file

NS = 'llm'
MODEL = 'meta-llama/Llama-3.1-8B-Instruct'
SCOPE = (ModelScope(model_id=MODEL, namespace=NS, retention_period=60.0),)
EXAMPLE = REFERENCE_PAGE
TIMES = (1000.0, 1015.0, 1030.0, 1045.0)
HISTORY = 3600.0

Pods = dict[tuple[str, str], PodSeries]
TPOT_UNUSED = (
    'vllm:request_time_per_output_token_seconds_sum',
    'vllm:request_time_per_output_token_seconds_count',
)


# --- pages ------------------------------------------------------------------------------------


def example_page(values: dict[str, float], *, old_names: bool = False, model: str = MODEL) -> bytes:
    """The example page with the given series' values replaced (`name` or `name{label="x"`)."""
    text = need_file(EXAMPLE).read_text()
    for series, value in values.items():
        name, _, label = series.partition('{')
        pattern = re.compile(
            rf'^({re.escape(name)}\{{[^}}\n]*{re.escape(label)}[^}}\n]*\}}) \S+$', re.MULTILINE
        )
        text, count = pattern.subn(rf'\g<1> {value!r}', text)
        assert count == 1, series
    if old_names:
        for new, old in (
            ('vllm:kv_cache_usage_perc', 'vllm:gpu_cache_usage_perc'),
            ('vllm:inter_token_latency_seconds', 'vllm:time_per_output_token_seconds'),
            ('vllm:prefix_cache_', 'vllm:gpu_prefix_cache_'),
        ):
            text = text.replace(new, old)
    return text.replace(MODEL, model).encode()


def scrape_values(i: int) -> dict[str, float]:
    """The figures of scrape i (0..3, at TIMES[i])."""
    return {
        'vllm:kv_cache_usage_perc': (0.2, 0.9, 0.4, 0.3)[i],
        'vllm:num_requests_waiting': (0.0, 3.0, 1.0, 0.0)[i],
        'vllm:num_requests_running': (41.0, 40.0, 39.0, 38.0)[i],
        'vllm:request_prompt_tokens_sum': 1000.0 + 300 * i,
        'vllm:request_prompt_tokens_count': 10.0 + 2 * i,
        'vllm:request_generation_tokens_sum': 200.0 + 60 * i,
        'vllm:request_generation_tokens_count': 10.0 + 2 * i,
        'vllm:prefix_cache_hits_total': 100.0 + 60 * i,
        'vllm:prefix_cache_queries_total': 400.0 + 200 * i,
        'vllm:time_to_first_token_seconds_sum': (10.0, 11.0, 12.5, 14.0)[i],
        'vllm:time_to_first_token_seconds_count': 100.0 + 10 * i,
        'vllm:inter_token_latency_seconds_sum': 50.0 + 2 * i,
        'vllm:inter_token_latency_seconds_count': 1000.0 + 100 * i,
    }


def epp_page(
    *, queue: Sequence[tuple[str, str, float]], attempts: Sequence[tuple[str, str, str, float]]
) -> bytes:
    """A gateway page: queue (priority, target model, size); attempts (status, model, pod, n)."""
    registry = CollectorRegistry()
    labels = ['fairness_id', 'priority', 'inference_pool', 'model_name', 'target_model_name']
    size = Gauge('inference_extension_flow_control_queue_size', 'q', labels, registry=registry)
    size_bytes = Gauge(
        'inference_extension_flow_control_queue_bytes', 'b', labels, registry=registry
    )
    for priority, model, value in queue:
        size.labels('f', priority, 'pool', model, model).set(value)
        size_bytes.labels('f', priority, 'pool', model, model).set(value * 1000)
    counter = Counter(
        'inference_extension_scheduler_attempts',
        'attempts',
        ['status', 'target_model_name', 'pod_name', 'namespace', 'port'],
        registry=registry,
    )
    for status, model, pod, value in attempts:
        counter.labels(status, model, pod, NS if pod else '', '8000' if pod else '').inc(value)
    Gauge('inference_extension_info', 'info', ['commit'], registry=registry).labels('abc').set(1)
    return generate_latest(registry)


def epp_pages(i: int) -> dict[str, bytes]:
    """Two vLLM pods and their gateway at scrape i; the gateway counts attempts since 0."""
    vllm = {pod: example_page(scrape_values(i)) for pod in ('p1', 'p2')}
    gateway = epp_page(
        queue=[('0', MODEL, 3.0), ('1', MODEL, 2.0), ('0', 'qwen', 7.0)],
        attempts=[
            ('success', MODEL, 'p1', 30.0 * i),
            ('success', MODEL, 'p2', 15.0 * i),
            ('success', 'qwen', 'p2', 100.0 * i),
            ('failure', MODEL, '', 50.0 * i),
        ],
    )
    return {**vllm, 'epp': gateway}


def check_gateway_figures(reading: Reading) -> None:
    """What `epp_pages` give at 1045 after the four scrapes of TIMES."""
    # p1: 0, 30, 60, 90 over (985, 1045]; the counter starts at 0, so to_start is capped at 0:
    # increase 90, rate 90 / 60 = 1.5/s; p2: 0, 15, 30, 45 → 0.75/s (qwen is out of scope)
    assert [(p.pod, p.arrival_rate) for p in reading.pods] == [('p1', 1.5), ('p2', 0.75)]
    (model,) = reading.models
    assert model.arrival_rate == pytest.approx(2.25)
    assert (model.queue_size, model.queue_bytes) == (5.0, 5000.0)  # priorities 0 and 1 summed


# --- windows filled as a scrape fills them ------------------------------------------------------


def feed(
    pods: Pods,
    pod: str,
    page: bytes,
    *,
    now: float,
    namespace: str = NS,
    kind: Kind = 'vllm',
    hint: str = '',
) -> None:
    """Add one successful scrape of `page` at `now` (collect.scrape.source does the same)."""
    series = pods.setdefault((namespace, pod), PodSeries(kind, hint))
    families = EPP_FAMILIES if kind == 'epp' else VLLM_FAMILIES
    for sample in parse(page=page, families=families).samples:
        name = sample.name
        if name in TPOT_UNUSED or (
            name.endswith(('_bucket', '_created')) and name not in histograms.FIELDS
        ):
            continue
        key = (name, sample.labels)
        horizon = HISTORY if name == REQUEST_SUCCESS else 360.0
        if name in histograms.FIELDS:
            horizon = histograms.HORIZON
        record = series.series.setdefault(key, SeriesWindow(horizon=horizon).record)
        SeriesWindow.of(record).add(t=now, value=sample.value)
    series.present_at = now


def scraped(
    pages: Callable[[int], dict[str, bytes]], *, kinds: dict[str, Kind] | None = None
) -> Pods:
    """The pods after one scrape of `pages(i)` at each of TIMES."""
    pods: Pods = {}
    for i, now in enumerate(TIMES):
        for pod, body in pages(i).items():
            feed(pods, pod, body, now=now, kind=(kinds or {}).get(pod, 'vllm'))
    return pods


def read(
    pods: Pods,
    *,
    now: float,
    scope: tuple[ModelScope, ...] = SCOPE,
    since: float | None = TIMES[0],
    history: float = HISTORY,
) -> Reading:
    return compute_reading(pods=pods, scope=scope, now=now, history=history, scraping_since=since)
