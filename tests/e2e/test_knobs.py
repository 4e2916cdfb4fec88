"""The development cluster's fault knobs, checked on their own before the tests lean on them.

| knob | expectation |
|---|---|
| `show_kv_usage` | that slot's page shows the value (NaN ...), others the real one; None undoes |
| the fake API's request log | each request's client (its bearer token), arrival order, status |
| `SlowServer` drip / endless | 200 at once, then a byte per interval / an answer past any cap |
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from lightkube.core.exceptions import ApiError
from lightkube.resources.apps_v1 import Deployment

from llmscaler.devcluster.cluster import Cluster
from llmscaler.devcluster.slowhttp import PREFIX, SlowServer
from llmscaler.kube.client import make_client
from llmscaler.sim.hardware.presets import MODEL_8B
from tests.support.e2e_controller import CHEAP, NS, SPEC

KV = re.compile(r'^vllm:kv_cache_usage_perc\{[^}]*\} (\S+)$', re.M)


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    async with Cluster(namespace=NS, workdir=tmp_path, input_tokens=64, output_tokens=32) as c:
        await c.add_variant(
            name=CHEAP, model_id=MODEL_8B, preset=SPEC, cost=1.0, replicas=2, min_replicas=1
        )
        yield c


async def kv_pages(cluster: Cluster) -> list[str]:
    """The KV usage each ready pod's page shows, slot order, as text."""
    async with httpx.AsyncClient(timeout=2) as client:
        pages = [
            (await client.get(f'http://127.0.0.1:{port}/metrics')).text
            for _, port in sorted(cluster.emulator(CHEAP).slot_ports.items())
        ]
    return [KV.findall(page)[0] for page in pages]


async def test_show_kv_usage_breaks_one_page_until_undone(cluster: Cluster) -> None:
    assert await kv_pages(cluster) == ['0.0', '0.0']
    fleet = cluster.emulator(CHEAP).emulator
    fleet.show_kv_usage(slot=1, value=math.nan)
    assert await kv_pages(cluster) == ['0.0', 'NaN']
    fleet.show_kv_usage(slot=0, value=-1.0)
    assert await kv_pages(cluster) == ['-1.0', 'NaN']
    fleet.show_kv_usage(slot=1, value=None)
    fleet.show_kv_usage(slot=0, value=None)
    assert await kv_pages(cluster) == ['0.0', '0.0']
    assert cluster.pod_name(CHEAP, 1) in {p['metadata']['name'] for p in cluster.pods(CHEAP)}


async def test_the_request_log_names_the_client_and_the_answer(
    cluster: Cluster, tmp_path: Path
) -> None:
    named = make_client(kubeconfig=str(cluster.kubeconfig(tmp_path / 'a', client='ctl-a')))
    anonymous = make_client(kubeconfig=str(cluster.kubeconfig(tmp_path / 'b')))
    mark = len(cluster.api.requests)
    before = time.monotonic()
    try:
        await named.get(Deployment, CHEAP, namespace=NS)
        with pytest.raises(ApiError):
            await named.get(Deployment, 'missing', namespace=NS)
        await anonymous.get(Deployment, CHEAP, namespace=NS)
    finally:
        await named.close()
        await anonymous.close()
    seen = [
        (r.client, r.path.rsplit('/', 1)[-1], r.status)
        for r in cluster.api.requests[mark:]
        if r.path.startswith('/apis/apps/v1/namespaces/')
    ]
    assert seen == [('ctl-a', CHEAP, 200), ('ctl-a', 'missing', 404), ('', CHEAP, 200)]
    times = [r.at for r in cluster.api.requests[mark:]]
    assert times == sorted(times)
    assert times[0] >= before


async def test_slow_server_drips_or_never_ends() -> None:
    with pytest.raises(ValueError, match='mode'):
        SlowServer(mode='fast')  # type: ignore[arg-type]
    with pytest.raises(ValueError, match='interval'):
        SlowServer(interval=math.nan)
    async with (
        SlowServer(mode='drip', interval=0.2) as drip,
        httpx.AsyncClient(timeout=5) as client,
        client.stream('POST', f'{drip.url}/api/v1/query') as answer,
    ):
        assert answer.status_code == 200
        got = b''
        started = time.monotonic()
        async for chunk in answer.aiter_raw():
            got += chunk
            if time.monotonic() - started > 0.9:
                break
    assert 3 <= len(got) <= 7, got  # about one byte per 0.2 s
    assert PREFIX.startswith(got)
    async with (
        SlowServer(mode='endless') as endless,
        httpx.AsyncClient(timeout=5) as client,
        client.stream('GET', f'{endless.url}/anything') as answer,
    ):
        size = 0
        async for chunk in answer.aiter_raw():
            size += len(chunk)
            if size > 4 * 1024 * 1024:
                break
        assert endless.requests == 1
    assert size > 4 * 1024 * 1024
