"""Tests of the Prometheus source against a real loopback HTTP server playing Prometheus' API.

The server (tests/support/fake_prometheus.py; over TLS in test_collect_prometheus_tls.py) answers
the instant-query endpoint with canned JSON chosen by the exact query string and logs every request.
Prometheus computes the windows and ratios itself, so the worked values below are the figures a
real server would return (the arithmetic is in the comments) and the source must pass them on
unchanged, attributed to the right pod or model.
"""

from __future__ import annotations

import asyncio
import json
import math
import socket
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmscaler.analyze.observation import freshness
from llmscaler.clock import ManualClock
from llmscaler.collect.http import OFF_LOOP_BYTES
from llmscaler.collect.prometheus.source import PrometheusConfig, PrometheusSource
from llmscaler.collect.readings import (
    ErrorReason,
    ModelReading,
    ModelScope,
    PodReading,
    Reading,
    SourceError,
)
from llmscaler.config.resolved import CoreSettings
from llmscaler.controller.app import Controller
from llmscaler.devcluster.fakeapi.server import FakeAPI
from llmscaler.domain.basics import Freshness
from tests.support.controller_harness import (
    condition_message,
    conditions,
    run_options,
    seed_variant,
    stop,
)
from tests.support.fake_prometheus import (
    LLAMA,
    NOW,
    QUERIES,
    REGISTRY_SIZE,
    SCOPE,
    Canned,
    FakePrometheus,
    at,
    pod,
    prometheus_error,
    read,
    reasons,
    sample,
    scraped,
    vector,
)
from tests.support.fake_prometheus import prom as prom  # the fixture
from tests.support.raw_http import RawServer, claims, drip, endless
from tests.support.waiting import eventually

# --- worked values -------------------------------------------------------------------------------


def answer_full_fleet(prom: FakePrometheus) -> None:
    a0 = {'namespace': 'ns-a', 'pod': 'llama-0', 'model_name': LLAMA}
    a1 = {'namespace': 'ns-a', 'pod': 'llama-1', 'model_name': LLAMA}
    b0 = {'namespace': 'ns-b', 'pod': 'qwen-0', 'model_name': 'qwen'}
    prom.answer(
        'kv_cache_usage',
        vector(
            sample('0.5', **a0, llm_d_ai_variant='llama-h100'),
            sample('0.25', **a1),
            sample('0.75', **b0),
            # qwen is in scope in ns-b only: this series is out of scope and ignored.
            sample('0.9', namespace='ns-a', pod='stray-0', model_name='qwen'),
        ),
    )
    prom.answer('queue_length', vector(sample('3', **a0), sample('0', **a1), sample('1', **b0)))
    # Scraped 4 s, 11.5 s and 2 s before NOW.
    prom.answer(
        'last_sample',
        vector(
            scraped(4, **a0, llm_d_ai_variant='llama-h100'),
            scraped(11.5, **a1),
            scraped(2, **b0),
        ),
    )
    prom.answer(
        'running',
        vector(
            sample('8', **a0),
            sample('4', **a1),
            sample('2', **b0),
            # No KV nor queue series: the pod is dropped (WVA's collector rule).
            sample('5', namespace='ns-a', pod='ghost-0', model_name=LLAMA),
        ),
    )
    prom.answer(
        'cache_config_info',
        vector(
            sample('1', namespace='ns-a', pod='llama-0', num_gpu_blocks='1000', block_size='16'),
            sample('1', namespace='ns-a', pod='llama-1', num_gpu_blocks='2000', block_size='16'),
            # Two data-parallel engines disagree: 500·32 = 16000 > 400·32 = 12800 tokens,
            # the smaller capacity wins.
            sample('1', namespace='ns-b', pod='qwen-0', num_gpu_blocks='500', block_size='32'),
            sample('1', namespace='ns-b', pod='qwen-0', num_gpu_blocks='400', block_size='32'),
            sample('1', namespace='ns-a', pod='ghost-0', num_gpu_blocks='9', block_size='16'),
        ),
    )
    # avg_input_tokens = rate(_sum[5m]) / rate(_count[5m]); llama-0: 60 tokens/s / 0.6 req/s = 100.
    prom.answer(
        'avg_input_tokens',
        vector(sample('100', **a0), sample('250', **a1), sample('NaN', **b0)),
    )
    # avg_output_tokens: llama-0: 30 tokens/s / 0.6 req/s = 50.
    prom.answer('avg_output_tokens', vector(sample('50', **a0), sample('80', **b0)))
    # prefix_cache_hit_rate = rate(hits) / rate(queries) = 24 / 60 = 0.4.
    prom.answer('prefix_cache_hit_rate', vector(sample('0.4', **a0)))
    # avg_ttft: llama-0: 0.072 s/s / 0.6 req/s = 0.12 s.
    prom.answer('avg_ttft', vector(sample('0.12', **a0), sample('+Inf', **b0)))
    prom.answer('avg_itl', vector(sample('0.02', **a0)))
    prom.answer(
        'pod_arrival_rate',
        vector(
            sample('2.5', namespace='ns-a', pod_name='llama-0'),
            sample('1.5', namespace='ns-a', pod_name='llama-1'),
        ),
    )
    # The pods' own admissions: llama-0's gateway figure wins; qwen-0, which no gateway series
    # names, takes its own.
    prom.answer('first_token_rate', vector(sample('2.4', **a0), sample('0.4', **b0)))
    prom.answer('scheduler_queue_size', vector(sample('4', target_model_name=LLAMA)))
    prom.answer('scheduler_queue_bytes', vector(sample('4096', target_model_name=LLAMA)))
    prom.answer(
        'model_arrival_rate',
        vector(
            sample('4', namespace='ns-a', target_model_name=LLAMA),
            sample('0.5', namespace='ns-b', target_model_name='qwen'),
        ),
    )
    prom.answer(
        'model_request_count[600s]',
        vector(
            sample('1200', namespace='ns-a', model_name=LLAMA),
            sample('0', namespace='ns-b', model_name='qwen'),
        ),
    )


async def test_every_query_lands_in_the_right_reading(prom: FakePrometheus) -> None:
    answer_full_fleet(prom)
    reading = await read(PrometheusConfig(base_url=prom.url))
    assert reading.errors == ()
    # NaN avg_input_tokens and +Inf avg_ttft of qwen-0.
    assert reading.dropped_non_finite == 2
    assert reading.pods == (
        PodReading(
            namespace='ns-a',
            pod='llama-0',
            observed_at=NOW - 4,
            model_name=LLAMA,
            labels=(('llm_d_ai_variant', 'llama-h100'), ('model_name', LLAMA)),
            kv_usage=0.5,
            queue_length=3.0,
            num_gpu_blocks=1000,
            block_size=16,
            avg_input_tokens=100.0,
            avg_output_tokens=50.0,
            prefix_cache_hit_rate=0.4,
            avg_ttft=0.12,
            avg_itl=0.02,
            running_requests=8.0,
            arrival_rate=2.5,
        ),
        PodReading(
            namespace='ns-a',
            pod='llama-1',
            observed_at=NOW - 11.5,
            model_name=LLAMA,
            labels=(('model_name', LLAMA),),
            kv_usage=0.25,
            queue_length=0.0,
            num_gpu_blocks=2000,
            block_size=16,
            avg_input_tokens=250.0,
            running_requests=4.0,
            arrival_rate=1.5,
        ),
        PodReading(
            namespace='ns-b',
            pod='qwen-0',
            observed_at=NOW - 2,
            model_name='qwen',
            labels=(('model_name', 'qwen'),),
            kv_usage=0.75,
            queue_length=1.0,
            num_gpu_blocks=400,
            block_size=32,
            avg_output_tokens=80.0,
            running_requests=2.0,
            arrival_rate=0.4,
        ),
    )
    assert reading.models == (
        ModelReading(
            model_id=LLAMA,
            namespace='ns-a',
            observed_at=NOW,
            queue_size=4.0,
            queue_bytes=4096.0,
            arrival_rate=4.0,
            request_count=1200.0,
        ),
        ModelReading(
            model_id='qwen', namespace='ns-b', observed_at=NOW, arrival_rate=0.5, request_count=0.0
        ),
    )


@pytest.mark.parametrize('fleet', [1, 40, 400])
async def test_one_request_per_query_whatever_the_fleet_size(
    prom: FakePrometheus, fleet: int
) -> None:
    kv = [sample('0.5', namespace='ns-a', pod=f'llama-{i}', model_name=LLAMA) for i in range(fleet)]
    prom.answer('kv_cache_usage', vector(*kv))
    reading = await read(PrometheusConfig(base_url=prom.url))
    assert len(reading.pods) == fleet
    # Each registry query exactly once, the same requests for 1 pod as for 400.
    assert len(prom.log) == REGISTRY_SIZE
    assert sorted(entry.query for entry in prom.log) == sorted(QUERIES.values())
    assert not any('llama-' in entry.query for entry in prom.log)
    assert {entry.time for entry in prom.log} == {'1700000000.000'}
    # Pods without queue / running / cache-config series: partial data, not a failure.
    assert set(reasons(reading).values()) == {ErrorReason.PARTIAL_DATA}


async def test_one_request_per_query_whatever_the_number_of_models(prom: FakePrometheus) -> None:
    # 12 models in 3 namespaces, one retention: the same number of requests as SCOPE's 2 models.
    scope = tuple(
        ModelScope(model_id=f'm{i}', namespace=f'ns-{i % 3}', latency_histograms=i % 2 == 0)
        for i in range(12)
    )
    await read(PrometheusConfig(base_url=prom.url), scope=scope)
    assert len(prom.log) == REGISTRY_SIZE
    assert len({entry.query for entry in prom.log}) == REGISTRY_SIZE


async def test_two_retentions_two_request_count_queries(prom: FakePrometheus) -> None:
    scope = (
        ModelScope(
            model_id=LLAMA, namespace='ns-a', retention_period=600.0, latency_histograms=True
        ),
        ModelScope(model_id='qwen', namespace='ns-b', retention_period=1800.0),
    )
    prom.answer(
        'model_request_count[600s]',
        vector(sample('7', namespace='ns-a', model_name=LLAMA)),
        scope=scope,
    )
    prom.answer(
        'model_request_count[1800s]',
        vector(
            sample('0', namespace='ns-b', model_name='qwen'),
            # LLAMA's count belongs to the 600 s query: a stray series here must not win.
            sample('99', namespace='ns-a', model_name=LLAMA),
        ),
        scope=scope,
    )
    reading = await read(PrometheusConfig(base_url=prom.url), scope=scope)
    assert len(prom.log) == REGISTRY_SIZE + 1
    assert [(m.model_id, m.request_count) for m in reading.models] == [
        (LLAMA, 7.0),
        ('qwen', 0.0),
    ]


async def test_without_scrape_time_the_newest_stamp_is_the_observation_time(
    prom: FakePrometheus,
) -> None:
    # No last_sample series (the fake answers an empty vector): the pod falls back to the newest
    # stamp of its answers. A real Prometheus stamps them all NOW; these differ to show the max.
    labels = {'namespace': 'ns-a', 'pod': 'llama-0', 'model_name': LLAMA}
    # Registry order is kv, queue, running: the newest is neither the first nor the last.
    prom.answer('kv_cache_usage', vector(at(NOW - 30, sample('0.5', **labels))))
    prom.answer('queue_length', vector(at(NOW - 10, sample('2', **labels))))
    prom.answer('running', vector(at(NOW - 20, sample('1', **labels))))
    prom.answer('scheduler_queue_size', vector(at(NOW - 5, sample('1', target_model_name=LLAMA))))
    prom.answer('model_request_count[600s]', vector(at(NOW - 50, sample('3', **labels))))
    reading = await read(PrometheusConfig(base_url=prom.url))
    assert pod(reading, 'ns-a', 'llama-0').observed_at == NOW - 10
    assert reading.models[0].observed_at == NOW - 5


# --- scrape times (last_sample) ------------------------------------------------------------------


def answer_healthy(prom: FakePrometheus, *pods: dict[str, str]) -> None:
    """KV, queue, running and cache-config series for each pod: no PARTIAL_DATA from those."""
    prom.answer('kv_cache_usage', vector(*(sample('0.5', **labels) for labels in pods)))
    prom.answer('queue_length', vector(*(sample('2', **labels) for labels in pods)))
    prom.answer('running', vector(*(sample('1', **labels) for labels in pods)))
    prom.answer(
        'cache_config_info',
        vector(
            *(
                sample(
                    '1',
                    namespace=labels['namespace'],
                    pod=labels['pod'],
                    num_gpu_blocks='8',
                    block_size='16',
                )
                for labels in pods
            )
        ),
    )


async def test_scrape_times_are_the_observation_times(prom: FakePrometheus) -> None:
    a0 = {'namespace': 'ns-a', 'pod': 'llama-0', 'model_name': LLAMA}
    a1 = {'namespace': 'ns-a', 'pod': 'llama-1', 'model_name': LLAMA}
    a2 = {'namespace': 'ns-a', 'pod': 'llama-2', 'model_name': LLAMA}
    b0 = {'namespace': 'ns-b', 'pod': 'qwen-0', 'model_name': 'qwen'}
    answer_healthy(prom, a0, a1, a2, b0)
    prom.answer(
        'last_sample',
        vector(
            # The variant label changed within the minute: two series, the newer scrape wins.
            scraped(25, **a0, llm_d_ai_variant='old'),
            scraped(7.5, **a0, llm_d_ai_variant='new'),
            # qwen is in scope in ns-b only: a newer time from an out-of-scope series is ignored.
            scraped(0, namespace='ns-a', pod='llama-1', model_name='qwen'),
            scraped(42, **a1),
            # Not a finite time: dropped and counted, the pod falls back to the evaluation time.
            sample('NaN', **a2),
            # A scrape time alone does not make a pod (no KV or queue series).
            scraped(1, namespace='ns-a', pod='ghost-0', model_name=LLAMA),
        ),
    )
    reading = await read(PrometheusConfig(base_url=prom.url))
    # Every answer is stamped NOW; the values are the scrape times. qwen-0 has no last_sample
    # series (no vllm:num_requests_waiting): evaluation time, and no error of its own.
    assert [(p.pod, p.observed_at) for p in reading.pods] == [
        ('llama-0', NOW - 7.5),
        ('llama-1', NOW - 42),
        ('llama-2', NOW),
        ('qwen-0', NOW),
    ]
    assert reading.errors == ()
    assert reading.dropped_non_finite == 1
    # The scrape time is no figure of its own: the pod's other figures are untouched.
    assert pod(reading, 'ns-a', 'llama-1').kv_usage == 0.5
    assert pod(reading, 'ns-a', 'llama-1').labels == (('model_name', LLAMA),)


@pytest.mark.parametrize(
    ('age', 'expected'),
    [
        # age = NOW - observed_at = NOW - (NOW - age); fresh < 60 s <= stale < 120 s
        # <= unavailable < 300 s, else dropped (CoreSettings defaults).
        (0.0, Freshness.FRESH),
        (59.5, Freshness.FRESH),
        (60.0, Freshness.STALE),
        (90.0, Freshness.STALE),
        (120.0, Freshness.UNAVAILABLE),
        (299.5, Freshness.UNAVAILABLE),
        (300.0, None),
    ],
)
async def test_scrape_age_reaches_the_core(
    prom: FakePrometheus, age: float, expected: Freshness | None
) -> None:
    labels = {'namespace': 'ns-a', 'pod': 'llama-0', 'model_name': LLAMA}
    answer_healthy(prom, labels)
    prom.answer('last_sample', vector(scraped(age, **labels)))
    reading = await read(PrometheusConfig(base_url=prom.url))
    observed_at = pod(reading, 'ns-a', 'llama-0').observed_at
    assert observed_at == NOW - age
    assert freshness(observed_at=observed_at, now=NOW, settings=CoreSettings()) == expected


async def test_pod_scraped_90s_ago_is_stale(prom: FakePrometheus) -> None:
    a0 = {'namespace': 'ns-a', 'pod': 'llama-0', 'model_name': LLAMA}
    a1 = {'namespace': 'ns-a', 'pod': 'llama-1', 'model_name': LLAMA}
    answer_healthy(prom, a0, a1)
    # llama-0 was scraped 90 s before NOW; llama-1 5 s before.
    prom.answer('last_sample', vector(scraped(90, **a0), scraped(5, **a1)))
    reading = await read(PrometheusConfig(base_url=prom.url))
    settings = CoreSettings()
    # 90 s: 60 <= 90 < 120, stale; 5 s: fresh.
    assert [
        (p.pod, p.observed_at, freshness(observed_at=p.observed_at, now=NOW, settings=settings))
        for p in reading.pods
    ] == [('llama-0', NOW - 90, Freshness.STALE), ('llama-1', NOW - 5, Freshness.FRESH)]
    assert reading.errors == ()


@pytest.mark.parametrize(
    ('canned', 'error'),
    [
        (
            Canned('oops', status=500),
            SourceError('last_sample', ErrorReason.HTTP_5XX, 'HTTP 500: oops'),
        ),
        (
            Canned(prometheus_error('bad_data', 'subquery not supported'), status=400),
            SourceError(
                'last_sample', ErrorReason.HTTP_4XX, 'HTTP 400: bad_data: subquery not supported'
            ),
        ),
    ],
)
async def test_failed_last_sample_falls_back_to_the_evaluation_time(
    prom: FakePrometheus, canned: Canned, error: SourceError
) -> None:
    a0 = {'namespace': 'ns-a', 'pod': 'llama-0', 'model_name': LLAMA}
    b0 = {'namespace': 'ns-b', 'pod': 'qwen-0', 'model_name': 'qwen'}
    answer_healthy(prom, a0, b0)
    prom.answer('last_sample', canned)
    reading = await read(PrometheusConfig(base_url=prom.url))
    # The evaluation time the source asked for, which Prometheus stamps on every answer.
    assert {entry.time for entry in prom.log} == {f'{NOW:.3f}'}
    assert [(p.pod, p.observed_at) for p in reading.pods] == [('llama-0', NOW), ('qwen-0', NOW)]
    assert reading.errors == (error,)
    # The other figures are unaffected.
    assert [(p.kv_usage, p.queue_length, p.num_gpu_blocks) for p in reading.pods] == [
        (0.5, 2.0, 8),
        (0.5, 2.0, 8),
    ]


@settings(max_examples=20, deadline=None)
@given(
    ages=st.lists(
        st.lists(st.integers(min_value=0, max_value=800).map(lambda n: n / 2), max_size=3),
        min_size=1,
        max_size=4,
    )
)
def test_property_observed_at_is_the_newest_scrape(ages: list[list[float]]) -> None:
    # Pod i has one last_sample series per age (one per variant label); none means no series.
    async def scenario() -> Reading:
        server = FakePrometheus()
        await server.start()
        pods = [
            {'namespace': 'ns-a', 'pod': f'p{i}', 'model_name': LLAMA} for i in range(len(ages))
        ]
        server.answer('kv_cache_usage', vector(*(sample('0.5', **labels) for labels in pods)))
        server.answer(
            'last_sample',
            vector(
                *(
                    scraped(age, **labels, llm_d_ai_variant=f'v{j}')
                    for labels, pod_ages in zip(pods, ages, strict=True)
                    for j, age in enumerate(pod_ages)
                )
            ),
        )
        try:
            return await read(PrometheusConfig(base_url=server.url))
        finally:
            await server.stop()

    reading = asyncio.run(scenario())
    expected = [NOW - min(pod_ages) if pod_ages else NOW for pod_ages in ages]
    assert [p.observed_at for p in reading.pods] == expected
    assert 'last_sample' not in reasons(reading)


async def test_missing_queue_series_is_none_not_zero(prom: FakePrometheus) -> None:
    a0 = {'namespace': 'ns-a', 'pod': 'llama-0', 'model_name': LLAMA}
    a1 = {'namespace': 'ns-a', 'pod': 'llama-1', 'model_name': LLAMA}
    prom.answer('kv_cache_usage', vector(sample('0.5', **a0), sample('0.6', **a1)))
    prom.answer('queue_length', vector(sample('3', **a0)))
    prom.answer('running', vector(sample('1', **a0), sample('1', **a1)))
    prom.answer(
        'cache_config_info',
        vector(
            sample('1', namespace='ns-a', pod='llama-0', num_gpu_blocks='10', block_size='16'),
            # "None" (not yet profiled) is not a block count: unusable, so llama-1 is missing.
            sample('1', namespace='ns-a', pod='llama-1', num_gpu_blocks='None', block_size='16'),
        ),
    )
    reading = await read(PrometheusConfig(base_url=prom.url))
    assert pod(reading, 'ns-a', 'llama-1').queue_length is None
    assert pod(reading, 'ns-a', 'llama-1').kv_usage == 0.6
    assert pod(reading, 'ns-a', 'llama-1').num_gpu_blocks is None
    assert reasons(reading) == {
        'queue_length': ErrorReason.PARTIAL_DATA,
        'cache_config_info': ErrorReason.PARTIAL_DATA,
    }
    assert {e.message for e in reading.errors} == {'no series for 1 of 2 pods: ns-a/llama-1'}


async def test_rate_families_may_lack_pods(prom: FakePrometheus) -> None:
    labels = {'namespace': 'ns-a', 'pod': 'llama-0', 'model_name': LLAMA}
    prom.answer('kv_cache_usage', vector(sample('0.5', **labels)))
    prom.answer('queue_length', vector(sample('0', **labels)))
    prom.answer('running', vector(sample('0', **labels)))
    prom.answer(
        'cache_config_info',
        vector(sample('1', namespace='ns-a', pod='llama-0', num_gpu_blocks='8', block_size='16')),
    )
    reading = await read(PrometheusConfig(base_url=prom.url))
    assert reading.errors == ()
    assert pod(reading, 'ns-a', 'llama-0').avg_ttft is None
    assert reading.models == ()


async def test_warnings_are_partial_data_but_values_are_kept(prom: FakePrometheus) -> None:
    labels = {'namespace': 'ns-a', 'pod': 'llama-0', 'model_name': LLAMA}
    prom.answer(
        'kv_cache_usage',
        vector(sample('0.5', **labels), warnings=['store eu-1 unavailable, partial response']),
    )
    prom.answer('queue_length', vector(sample('0', **labels)))
    reading = await read(PrometheusConfig(base_url=prom.url))
    assert pod(reading, 'ns-a', 'llama-0').kv_usage == 0.5
    (error,) = [e for e in reading.errors if e.target == 'kv_cache_usage']
    assert error.reason == ErrorReason.PARTIAL_DATA
    assert error.message == 'store eu-1 unavailable, partial response'


async def test_non_finite_values_are_dropped_and_counted(prom: FakePrometheus) -> None:
    a0 = {'namespace': 'ns-a', 'pod': 'llama-0', 'model_name': LLAMA}
    a1 = {'namespace': 'ns-a', 'pod': 'llama-1', 'model_name': LLAMA}
    prom.answer('kv_cache_usage', vector(sample('+Inf', **a0), sample('NaN', **a1)))
    prom.answer('queue_length', vector(sample('-Inf', **a0)))
    prom.answer('scheduler_queue_size', vector(sample('NaN', target_model_name=LLAMA)))
    reading = await read(PrometheusConfig(base_url=prom.url))
    assert reading.dropped_non_finite == 4
    # The series exist, so the pods are kept with unknown figures.
    assert [(p.pod, p.kv_usage, p.queue_length) for p in reading.pods] == [
        ('llama-0', None, None),
        ('llama-1', None, None),
    ]
    # The queue's series is there but unreadable: unknown, not empty (the core holds).
    assert reading.models == (
        ModelReading(model_id=LLAMA, namespace='ns-a', observed_at=NOW, queue_size=None),
    )


async def test_empty_scope_sends_nothing(prom: FakePrometheus) -> None:
    assert await read(PrometheusConfig(base_url=prom.url), scope=()) == Reading()
    assert prom.log == []


@settings(max_examples=20, deadline=None)
@given(
    values=st.lists(
        st.one_of(
            st.floats(allow_nan=False, allow_infinity=False, width=32).map(repr),
            st.sampled_from(['NaN', '+Inf', '-Inf']),
        ),
        min_size=1,
        max_size=6,
    )
)
def test_property_finite_values_pass_through(values: list[str]) -> None:
    async def scenario() -> Reading:
        server = FakePrometheus()
        await server.start()
        series = [
            sample(text, namespace='ns-a', pod=f'p{i}', model_name=LLAMA)
            for i, text in enumerate(values)
        ]
        server.answer('kv_cache_usage', vector(*series))
        try:
            return await read(PrometheusConfig(base_url=server.url))
        finally:
            await server.stop()

    reading = asyncio.run(scenario())
    expected = [float(text) if math.isfinite(float(text)) else None for text in values]
    by_pod = {p.pod: p.kv_usage for p in reading.pods}
    assert [by_pod[f'p{i}'] for i in range(len(values))] == expected
    assert reading.dropped_non_finite == expected.count(None)


_SHUFFLED = {
    'kv_cache_usage': [
        sample(
            '0.5', namespace='ns-a', pod='p0', model_name=LLAMA, engine='1', llm_d_ai_variant='v2'
        ),
        sample(
            '0.25', namespace='ns-a', pod='p0', model_name=LLAMA, engine='0', llm_d_ai_variant='v1'
        ),
        sample('-0', namespace='ns-a', pod='p1', model_name=LLAMA, engine='0'),
        sample('0', namespace='ns-a', pod='p1', model_name=LLAMA, engine='1'),
    ],
    'queue_length': [
        sample('3', namespace='ns-a', pod='p0', model_name=LLAMA, llm_d_ai_variant='v3'),
        sample('1', namespace='ns-a', pod='p1', model_name=LLAMA),
    ],
    'cache_config_info': [
        sample('1', namespace='ns-a', pod=p, num_gpu_blocks=blocks, block_size=size)
        for p in ('p0', 'p1')
        for blocks, size in (('8', '32'), ('16', '16'), ('64', '16'))
    ],
}


@settings(max_examples=25, deadline=None)
@given(orders=st.fixed_dictionaries({name: st.permutations(s) for name, s in _SHUFFLED.items()}))
def test_property_series_order_does_not_change_the_reading(
    orders: dict[str, list[dict[str, Any]]],
) -> None:
    async def scenario() -> Reading:
        server = FakePrometheus()
        await server.start()
        for name, series in orders.items():
            server.answer(name, vector(*series))
        try:
            return await read(PrometheusConfig(base_url=server.url))
        finally:
            await server.stop()

    reading = asyncio.run(scenario())
    p0, p1 = reading.pods
    # Two KV series of p0 combine by max: max(0.5, 0.25) = 0.5. Its labels come from the KV series
    # first in label order (engine '0' < '1'), and the KV query precedes the queue query, whose
    # v3 therefore loses.
    assert (p0.kv_usage, p0.queue_length) == (0.5, 3.0)
    assert p0.labels == (('engine', '0'), ('llm_d_ai_variant', 'v1'), ('model_name', LLAMA))
    # 8 × 32 = 16 × 16 = 256 < 64 × 16 = 1024; of the tied two, block_size '16' sorts first.
    assert (p0.num_gpu_blocks, p0.block_size) == (16, 16)
    # -0 reads as 0, so the sign of p1's zero cannot depend on which series came first.
    assert p1.kv_usage == 0.0
    assert math.copysign(1.0, p1.kv_usage) == 1.0


# --- failures ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ('canned', 'reason', 'message'),
    [
        (Canned('oops', status=500), ErrorReason.HTTP_5XX, 'HTTP 500: oops'),
        (
            Canned(prometheus_error('bad_data', 'parse error at char 3'), status=400),
            ErrorReason.HTTP_4XX,
            'HTTP 400: bad_data: parse error at char 3',
        ),
        (
            Canned(
                prometheus_error('timeout', 'query timed out'),
                status=503,
                headers={'Retry-After': '7'},
            ),
            ErrorReason.HTTP_5XX,
            'HTTP 503 (Retry-After: 7): timeout: query timed out',
        ),
        (Canned('{"status": "succ'), ErrorReason.BAD_RESPONSE, None),
        (
            Canned(prometheus_error('execution', 'too many samples')),
            ErrorReason.BAD_RESPONSE,
            'execution: too many samples',
        ),
        (
            Canned(json.dumps({'status': 'success', 'data': {'resultType': 'matrix'}})),
            ErrorReason.BAD_RESPONSE,
            'data is not an instant vector',
        ),
        (
            vector(sample('abc', namespace='ns-a', pod='p', model_name=LLAMA)),
            ErrorReason.BAD_RESPONSE,
            "sample value 'abc' is not a number",
        ),
        (
            Canned(
                json.dumps(
                    {
                        'status': 'success',
                        'data': {'resultType': 'vector', 'result': [{'metric': {}}]},
                    }
                )
            ),
            ErrorReason.BAD_RESPONSE,
            'a series has no [timestamp, value] sample',
        ),
        (Canned('', status=302), ErrorReason.BAD_RESPONSE, 'unexpected HTTP 302'),
        # An integer stamp beyond the float range: a bad answer, not an OverflowError.
        (
            vector({'metric': {}, 'value': [10**400, '1']}),
            ErrorReason.BAD_RESPONSE,
            f'bad sample timestamp {10**400}',
        ),
    ],
)
async def test_failed_query_is_classified_and_its_field_is_none(
    prom: FakePrometheus, canned: Canned, reason: ErrorReason, message: str | None
) -> None:
    labels = {'namespace': 'ns-a', 'pod': 'llama-0', 'model_name': LLAMA}
    prom.answer('kv_cache_usage', vector(sample('0.5', **labels)))
    prom.answer('queue_length', vector(sample('2', **labels)))
    prom.answer(
        'cache_config_info',
        vector(sample('1', namespace='ns-a', pod='llama-0', num_gpu_blocks='8', block_size='16')),
    )
    prom.answer('running', canned)
    reading = await read(PrometheusConfig(base_url=prom.url))
    (error,) = reading.errors
    assert (error.target, error.reason) == ('running', reason)
    if message is not None:
        assert error.message == message
    # The other queries still count: the pod is there, only its running figure is unknown.
    assert pod(reading, 'ns-a', 'llama-0').kv_usage == 0.5
    assert pod(reading, 'ns-a', 'llama-0').running_requests is None


async def test_timeout(prom: FakePrometheus) -> None:
    prom.answer('model_arrival_rate', Canned(vector().body, delay=0.5))
    reading = await read(PrometheusConfig(base_url=prom.url, timeout=0.2))
    assert reasons(reading) == {'model_arrival_rate': ErrorReason.TIMEOUT}
    assert reading.errors[0].message == 'no complete answer within 0.2s (no response headers)'


async def test_connection_refused() -> None:
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        port = sock.getsockname()[1]
    # The port was just released and nothing listens on it.
    reading = await read(PrometheusConfig(base_url=f'http://127.0.0.1:{port}', timeout=2.0))
    assert reading.pods == ()
    assert reading.models == unread_queues(SCOPE)
    assert [e.target for e in reading.errors] == list(QUERIES)
    assert {e.reason for e in reading.errors} == {ErrorReason.UNREACHABLE}


def unread_queues(scope: tuple[ModelScope, ...]) -> tuple[ModelReading, ...]:
    """What a cycle whose every query failed reads of the models: a gateway queue it could not
    see (None), which the core holds on, and nothing else."""
    return tuple(
        ModelReading(
            model_id=entry.model_id,
            namespace=entry.namespace,
            observed_at=NOW,
            queue_size=None,
            queue_bytes=None,
        )
        for entry in sorted(scope, key=lambda e: (e.namespace, e.model_id))
    )


async def test_a_failed_queue_query_leaves_every_model_s_queue_unread(
    prom: FakePrometheus,
) -> None:
    """A model without a gateway queue has no series and reads 0; when the query fails, no
    model's queue is known, even one that no other query names."""
    prom.answer('scheduler_queue_bytes', vector())
    prom.answer('scheduler_queue_size', Canned('down', status=503))
    arrivals = vector(sample('4', namespace='ns-a', target_model_name=LLAMA))
    prom.answer('model_arrival_rate', arrivals)
    reading = await read(PrometheusConfig(base_url=prom.url))
    assert reasons(reading) == {'scheduler_queue_size': ErrorReason.HTTP_5XX}
    assert [(m.model_id, m.queue_size, m.queue_bytes, m.arrival_rate) for m in reading.models] == [
        (LLAMA, None, 0.0, 4.0),
        ('qwen', None, 0.0, None),
    ]


async def test_every_query_failing_gives_an_empty_reading(prom: FakePrometheus) -> None:
    for name in QUERIES:
        prom.answer(name, Canned('down', status=502))
    reading = await read(PrometheusConfig(base_url=prom.url))
    assert reading == Reading(
        models=unread_queues(SCOPE), errors=tuple(reading.errors), dropped_non_finite=0
    )
    assert [e.reason for e in reading.errors] == [ErrorReason.HTTP_5XX] * REGISTRY_SIZE


async def test_concurrency_is_capped(prom: FakePrometheus) -> None:
    prom.delay = 0.05
    await read(PrometheusConfig(base_url=prom.url, concurrency=2))
    assert prom.max_in_flight == 2
    prom.max_in_flight = 0
    await read(PrometheusConfig(base_url=prom.url))
    assert prom.max_in_flight == 4  # the default


# --- deadlines and size caps ---------------------------------------------------------------------


async def timed_read(config: PrometheusConfig, *, guard: float) -> tuple[Reading, float]:
    """`read` and its duration; `guard` seconds turn a hang into a failure instead of a wait."""
    started = time.monotonic()
    reading = await asyncio.wait_for(read(config), timeout=guard)
    return reading, time.monotonic() - started


async def test_a_dripping_prometheus_ends_each_query_at_its_timeout() -> None:
    # A byte every 0.2 s: a per-read timeout of 1.5 s would wait for ever; the total one does not.
    # 1.5 s rather than less: on a loaded machine the headers of all queries, served by the same
    # event loop, can take longer than half a second, and the message must speak of the body.
    async with RawServer(drip(every=0.2, content_type='application/json')) as server:
        config = PrometheusConfig(base_url=server.url, timeout=1.5, concurrency=REGISTRY_SIZE)
        reading, took = await timed_read(config, guard=3.5)
    assert took < 3.5
    assert [e.target for e in reading.errors] == list(QUERIES)
    for error in reading.errors:
        assert error.reason is ErrorReason.TIMEOUT
        assert error.message.startswith('no complete answer within 1.5s (')
        assert 'bytes of the body received' in error.message
    assert (reading.pods, reading.models) == ((), unread_queues(SCOPE))


async def test_the_read_deadline_bounds_the_whole_read() -> None:
    # Two queries at a time would take 5 s each; the read as a whole gets 0.6 s.
    async with RawServer(drip(every=0.2)) as server:
        config = PrometheusConfig(
            base_url=server.url, timeout=5.0, concurrency=2, read_deadline=0.6
        )
        reading, took = await timed_read(config, guard=1.8)
        assert len(server.seen) == 2
    assert took < 1.8
    assert {e.reason for e in reading.errors} == {ErrorReason.TIMEOUT}
    messages = sorted(e.message for e in reading.errors)
    sent = [m for m in messages if not m.startswith('not sent')]
    assert len(sent) == 2
    assert all(m.endswith('; the read deadline of 0.6s ran out') for m in sent)
    assert (
        messages.count('not sent: the read deadline of 0.6s ran out before a slot was free')
        == REGISTRY_SIZE - 2
    )


async def test_an_endless_answer_is_cut_at_the_cap() -> None:
    async with RawServer(endless(content_type='application/json')) as server:
        config = PrometheusConfig(base_url=server.url, timeout=5.0, max_answer_bytes=64 * 1024)
        reading, took = await timed_read(config, guard=15.0)
        await eventually(lambda: server.dropped == REGISTRY_SIZE, 'every answer to be dropped')
    assert took < 5.0
    assert {(e.reason, e.message) for e in reading.errors} == {
        (ErrorReason.BAD_RESPONSE, 'body over 65536 bytes')
    }
    assert len(reading.errors) == REGISTRY_SIZE


async def test_an_answer_announced_over_the_cap_is_refused_unread() -> None:
    # The body never comes: reading it would end in a timeout, not in this error.
    async with RawServer(claims(10**6, content_type='application/json')) as server:
        config = PrometheusConfig(base_url=server.url, timeout=2.0, max_answer_bytes=1000)
        reading, took = await timed_read(config, guard=6.0)
    assert took < 1.0
    assert {(e.reason, e.message) for e in reading.errors} == {
        (ErrorReason.BAD_RESPONSE, 'body over 1000 bytes (Content-Length 1000000), not read')
    }


async def test_a_large_answer_is_decoded_whole(prom: FakePrometheus) -> None:
    # Over OFF_LOOP_BYTES: decoded and folded in a worker thread, to the same figures.
    pods = 4000
    prom.answer(
        'kv_cache_usage',
        vector(
            *(
                sample(f'{i / pods}', namespace='ns-a', pod=f'llama-{i:05d}', model_name=LLAMA)
                for i in range(pods)
            )
        ),
    )
    assert len(prom.canned[QUERIES['kv_cache_usage']].body) > OFF_LOOP_BYTES
    reading = await read(PrometheusConfig(base_url=prom.url))
    assert [p.kv_usage for p in reading.pods] == [i / pods for i in range(pods)]


@pytest.mark.parametrize(
    ('field', 'value', 'message'),
    [
        ('timeout', 0.0, 'timeout must be a positive number of seconds, not 0.0'),
        ('timeout', math.inf, 'timeout must be a positive number of seconds, not inf'),
        ('read_deadline', math.nan, 'read_deadline must be a positive number of seconds, not nan'),
        ('read_deadline', -1, 'read_deadline must be a positive number of seconds, not -1'),
        ('max_answer_bytes', 0, 'max_answer_bytes must be a whole number of bytes of at least 1'),
    ],
)
def test_invalid_bounds_are_refused(field: str, value: float, message: str) -> None:
    with pytest.raises(ValueError, match=f'^{message}'):
        PrometheusConfig(base_url='http://prometheus:9090', **{field: value})  # type: ignore[arg-type]


def test_bound_defaults() -> None:
    config = PrometheusConfig(base_url='http://prometheus:9090')
    assert (config.timeout, config.read_deadline, config.max_answer_bytes) == (
        10.0,
        15.0,
        32 * 1024 * 1024,
    )
    assert config.allow_http_credentials is False


# --- authentication ------------------------------------------------------------------------------


async def test_a_token_is_never_sent_to_plain_http_without_the_opt_in(
    prom: FakePrometheus, tmp_path: Path
) -> None:
    token = tmp_path / 'token'
    token.write_text('from-file')
    for config in (
        PrometheusConfig(base_url=prom.url, bearer_token='s3cret'),
        PrometheusConfig(base_url=prom.url, token_file=token),
        PrometheusConfig(base_url=prom.url, token_file=tmp_path / 'missing'),
    ):
        reading = await read(config)
        assert prom.log == []  # not one request: no token in clear, no unauthenticated read
        assert [e.target for e in reading.errors] == list(QUERIES)
        assert {e.reason for e in reading.errors} == {ErrorReason.UNREACHABLE}
        assert {e.message for e in reading.errors} == {
            f'credentials are not sent in clear: {prom.url}/api/v1/query is not https, '
            'nothing sent (use https, or opt in with allow_http_credentials)'
        }


async def test_bearer_token_header(prom: FakePrometheus) -> None:
    await read(
        PrometheusConfig(base_url=prom.url, bearer_token='s3cret', allow_http_credentials=True)
    )
    assert {entry.authorization for entry in prom.log} == {'Bearer s3cret'}
    prom.log.clear()
    await read(PrometheusConfig(base_url=prom.url))
    assert {entry.authorization for entry in prom.log} == {None}


async def test_token_file_is_read_every_cycle(prom: FakePrometheus, tmp_path: Path) -> None:
    token = tmp_path / 'token'
    token.write_text('first\n')
    config = PrometheusConfig(
        base_url=prom.url, bearer_token='static', token_file=token, allow_http_credentials=True
    )
    source = PrometheusSource(config=config)
    try:
        await source.read(scope=SCOPE, now=NOW)
        token.write_text('rotated')
        await source.read(scope=SCOPE, now=NOW + 15)
        assert [entry.authorization for entry in prom.log] == (
            ['Bearer first'] * REGISTRY_SIZE + ['Bearer rotated'] * REGISTRY_SIZE
        )
        token.unlink()
        prom.log.clear()
        reading = await source.read(scope=SCOPE, now=NOW + 30)
    finally:
        await source.aclose()
    # An unreadable token file sends nothing rather than an unauthenticated request.
    assert prom.log == []
    assert len(reading.errors) == REGISTRY_SIZE
    assert {e.reason for e in reading.errors} == {ErrorReason.UNREACHABLE}
    assert 'bearer token file unreadable' in reading.errors[0].message


# --- a whole cycle -------------------------------------------------------------------------------


async def test_a_cycle_against_a_dripping_prometheus_ends_in_time_and_says_why() -> None:
    """The controller's cycle, not just the source: bounded by the read deadline, and the VA's
    status names the source's failure (`PrometheusError`, the timeout) while the variant holds."""
    async with (
        FakeAPI() as api,
        RawServer(drip(every=0.2, content_type='application/json')) as server,
    ):
        seed_variant(api, 'a')
        config = PrometheusConfig(base_url=server.url, timeout=5.0, read_deadline=0.8)
        source = PrometheusSource(config=config)
        options = run_options(api, '--metrics-source', 'prometheus', '--prometheus-url', server.url)
        controller = Controller(options=options, clock=ManualClock(), source=source)
        informers = [asyncio.create_task(i.run()) for i in controller.caches.all()]
        try:
            await eventually(controller.caches.synced, 'the caches to sync')
            started = time.monotonic()
            report = await asyncio.wait_for(controller.cycle.run_once(), timeout=2.4)
            took = time.monotonic() - started
            assert took < 2.4
            assert {e.reason for e in report.source_errors} == {ErrorReason.TIMEOUT}
            assert [(d.variant, d.current, d.target) for d in report.decisions] == [('a', 1, 1)]
            assert conditions(api, 'a')['MetricsAvailable'] == ('False', 'PrometheusError')
            message = condition_message(api, 'a', 'MetricsAvailable')
            assert 'Timeout' in message
            assert 'the read deadline of 0.8s ran out' in message
        finally:
            await stop(controller, informers)
            await source.aclose()
