"""Bad metrics never cause an unsafe decision: from a misbehaving Prometheus to `decide()`.

A loopback server plays Prometheus and misbehaves (500 on every query, invalid JSON, a hang
past the client timeout, NaN values); the reading goes through attribution into the core.

| Prometheus | expectation |
|---|---|
| 500 / invalid JSON / timeout | errors classified; the variant holds, MetricsMissing |
| NaN for KV usage and queue | dropped and counted; hold, MetricsMissing, never to zero |
| KV 0.45 on one pod, NaN on the other, queues 0 | hold 2 -> 2, MetricsMissing naming the pod |
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from aiohttp import web

from llmscaler.collect.attribution import PodInfo, TargetRef, attribute
from llmscaler.collect.prometheus.source import PrometheusConfig, PrometheusSource
from llmscaler.collect.readings import ErrorReason, ModelScope, Reading
from llmscaler.config.resolved import Config, ModelConfig, ScaleToZeroConfig
from llmscaler.devcluster import loopback
from llmscaler.domain.snapshot import Decision, Snapshot, Variant
from llmscaler.domain.state import EMPTY_STATE
from llmscaler.engine import decide

MODEL = 'm'
NS = 'ns'
NOW = 1_800_000_000.0
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@pytest.fixture
async def prometheus(request: pytest.FixtureRequest) -> AsyncIterator[str]:
    handler: Handler = request.param
    app = web.Application()
    app.router.add_post('/api/v1/query', handler)
    served = await loopback.serve(app)
    try:
        yield served.url
    finally:
        await served.close()


async def server_error(request: web.Request) -> web.Response:
    return web.Response(status=500, text='boom')


async def invalid_json(request: web.Request) -> web.Response:
    return web.Response(text='{"status": "success", "data": ', content_type='application/json')


async def hang(request: web.Request) -> web.Response:
    await asyncio.sleep(1.0)
    return web.Response(status=500)


async def not_a_number(request: web.Request) -> web.Response:
    query = str((await request.post())['query'])
    labels = {'namespace': NS, 'pod': 'p-0', 'model_name': MODEL}
    if 'cache_config_info' in query:
        labels.update(num_gpu_blocks='1000', block_size='16')
    value = '1' if 'cache_config_info' in query else 'NaN'
    body = {
        'status': 'success',
        'data': {'resultType': 'vector', 'result': [{'metric': labels, 'value': [NOW, value]}]},
    }
    return web.Response(text=json.dumps(body), content_type='application/json')


async def one_pod_nan_kv(request: web.Request) -> web.Response:
    """Two pods, both scraped now; p-0 at KV 0.45, p-1's KV gauge NaN; nothing queued."""
    query = str((await request.post())['query'])
    if 'timestamp(' in query:
        values = {'p-0': str(NOW), 'p-1': str(NOW)}
    elif 'kv_cache_usage' in query:
        values = {'p-0': '0.45', 'p-1': 'NaN'}
    elif 'num_requests_waiting' in query or 'num_requests_running' in query:
        values = {'p-0': '0', 'p-1': '0'}
    elif 'cache_config_info' in query:
        values = {'p-0': '1', 'p-1': '1'}
    else:
        values = {}
    result = []
    for pod, value in values.items():
        labels = {'namespace': NS, 'pod': pod, 'model_name': MODEL}
        if 'cache_config_info' in query:
            labels.update(num_gpu_blocks='1000', block_size='16')
        result.append({'metric': labels, 'value': [NOW, value]})
    body = {'status': 'success', 'data': {'resultType': 'vector', 'result': result}}
    return web.Response(text=json.dumps(body), content_type='application/json')


def decide_on(reading: Reading) -> tuple[int, str, bool]:
    decision = decision_on(reading)
    return decision.target, decision.metrics_reason, decision.metrics_available


def decision_on(reading: Reading) -> Decision:
    variant = Variant(
        name='v',
        namespace=NS,
        model_id=MODEL,
        min_replicas=0,
        max_replicas=4,
        current_replicas=2,
        ready_replicas=2,
    )
    attributed = attribute(
        reading=reading,
        variants=[variant],
        targets=[TargetRef(namespace=NS, kind='Deployment', name='v', variant='v')],
        pods=[
            PodInfo(
                namespace=NS, name=f'p-{i}', owners=(('ReplicaSet', 'v-1'), ('Deployment', 'v'))
            )
            for i in range(2)
        ],
    )
    # Scale to zero enabled: a reading that looked idle would be the dangerous mistake.
    config = Config(default=ModelConfig(scale_to_zero=ScaleToZeroConfig(enabled=True)))
    snapshot = Snapshot(variants=(variant,), replicas=attributed.replicas, pools=attributed.pools)
    (decision,) = decide(snapshot=snapshot, config=config, state=EMPTY_STATE, now=NOW).decisions
    return decision


@pytest.mark.parametrize(
    ('prometheus', 'reason'),
    [
        (server_error, ErrorReason.HTTP_5XX),
        (invalid_json, ErrorReason.BAD_RESPONSE),
        (hang, ErrorReason.TIMEOUT),
    ],
    indirect=['prometheus'],
)
async def test_a_failing_prometheus_makes_the_variant_hold(
    prometheus: str, reason: ErrorReason
) -> None:
    source = PrometheusSource(config=PrometheusConfig(base_url=prometheus, timeout=0.3))
    try:
        reading = await source.read(scope=(ModelScope(model_id=MODEL, namespace=NS),), now=NOW)
    finally:
        await source.aclose()
    assert reading.errors
    assert {e.reason for e in reading.errors} == {reason}
    assert reading.pods == ()
    assert decide_on(reading) == (2, 'MetricsMissing', False)


@pytest.mark.parametrize('prometheus', [not_a_number], indirect=True)
async def test_nan_metrics_are_dropped_and_the_variant_holds(prometheus: str) -> None:
    source = PrometheusSource(config=PrometheusConfig(base_url=prometheus, timeout=2.0))
    try:
        reading = await source.read(scope=(ModelScope(model_id=MODEL, namespace=NS),), now=NOW)
    finally:
        await source.aclose()
    assert reading.dropped_non_finite > 0
    assert decide_on(reading) == (2, 'MetricsMissing', False)


@pytest.mark.parametrize('prometheus', [one_pod_nan_kv], indirect=True)
async def test_a_nan_kv_on_one_of_two_pods_holds_and_names_the_pod(prometheus: str) -> None:
    # Read as 0 (an idle pod) this would be 2 -> 1 with MetricsAvailable=True.
    source = PrometheusSource(config=PrometheusConfig(base_url=prometheus, timeout=2.0))
    try:
        reading = await source.read(scope=(ModelScope(model_id=MODEL, namespace=NS),), now=NOW)
    finally:
        await source.aclose()
    assert [p.pod for p in reading.pods] == ['p-0', 'p-1']
    decision = decision_on(reading)
    assert (decision.current, decision.target) == (2, 2)
    assert not decision.metrics_available
    assert decision.metrics_reason == 'MetricsMissing'
    assert decision.message == 'p-1: kv_usage missing'
