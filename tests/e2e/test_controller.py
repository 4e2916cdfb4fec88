"""`llmscaler run` as a process against the fake cluster: what it writes, and when.

| check | expectation |
|---|---|
| load above capacity (Prometheus) | the cheap variant's `/scale` goes up; never a write to the Deployment |
| load gone, scale-to-zero ConfigMap (Prometheus) | down to 1, then to 0 after the retention |
| requests queue at zero (pods) | the cheap variant goes to 1 within ~2 s; ScaledFromZero |
| two controllers with --leader-elect | one holder; SIGTERM → exit 0, the other takes over |
| /scale answers 409, 500; watches broken | nothing wrong written; applied later; a Warning |
| metrics gone (pods) | no scale down; MetricsAvailable False with a reason |
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from llmscaler.sim.presets import MODEL_8B, preset
from tests.e2e.cluster import Cluster
from tests.e2e.process import ControllerProcess
from tests.fakeapi.server import RecordedRequest
from tests.integration import prom

NS = 'llm'
CONTROLLER_NS = 'llmscaler-system'
CHEAP, DEAR = 'cheap', 'dear'
# A small replica: 4 sequences at a time and a slow step, so a few requests/s saturate it.
SPEC = preset(name='llama-3.1-8b-l4', max_num_seqs=4)
DEPLOYMENTS = f'/apis/apps/v1/namespaces/{NS}/deployments'
Obj = dict[str, Any]


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    async with Cluster(namespace=NS, workdir=tmp_path, input_tokens=64, output_tokens=32) as c:
        yield c


def controller(cluster: Cluster, *args: str, name: str = 'controller') -> ControllerProcess:
    """`llmscaler run` on ephemeral ports, its Lease and global ConfigMaps in CONTROLLER_NS."""
    return ControllerProcess(
        cluster=cluster,
        name=name,
        args=[
            '--namespace',
            CONTROLLER_NS,
            '--metrics-bind-address',
            '127.0.0.1:0',
            '--health-probe-bind-address',
            '127.0.0.1:0',
            *args,
        ],
    )


async def two_variants(cluster: Cluster, *, replicas: int, min_replicas: int) -> None:
    """CHEAP and DEAR: the same small replica at two prices, one model."""
    for name, cost in ((CHEAP, 1.0), (DEAR, 5.0)):
        await cluster.add_variant(
            name=name,
            model_id=MODEL_8B,
            preset=SPEC,
            cost=cost,
            replicas=replicas,
            min_replicas=min_replicas,
            max_replicas=4,
        )


def replicas(cluster: Cluster, name: str) -> int:
    value = cluster.deployment(name)['spec']['replicas']
    assert isinstance(value, int)
    return value


def scale_writes(cluster: Cluster, name: str) -> list[int]:
    """spec.replicas of every PATCH to the Deployment's `/scale`, in order."""
    path = f'{DEPLOYMENTS}/{name}/scale'
    return [
        r.json()['spec']['replicas']
        for r in cluster.api.requests
        if r.method == 'PATCH' and r.path == path
    ]


def main_resource_writes(cluster: Cluster) -> list[RecordedRequest]:
    """Writes to a Deployment itself (not a subresource): the controller must never send one."""
    return [
        r
        for r in cluster.api.requests
        if r.method in ('PATCH', 'PUT', 'POST', 'DELETE')
        and r.path.startswith(DEPLOYMENTS)
        and not r.path.endswith('/scale')
    ]


def events(cluster: Cluster, reason: str) -> list[Obj]:
    """events.k8s.io/v1 and core Events with `reason`, in the VA namespace."""
    found = []
    for api_version in ('events.k8s.io/v1', 'v1'):
        resource = cluster.api.store_resource({'apiVersion': api_version, 'kind': 'Event'})
        found += [e for e in cluster.api.store.list(resource, NS) if e.get('reason') == reason]
    return found


def condition(cluster: Cluster, va: str, kind: str) -> Obj | None:
    for cond in cluster.va(va).get('status', {}).get('conditions', []):
        if cond.get('type') == kind:
            assert isinstance(cond, dict)
            return cond
    return None


def desired(cluster: Cluster, va: str) -> int | None:
    alloc = cluster.va(va).get('status', {}).get('desiredOptimizedAlloc', {})
    value = alloc.get('numReplicas')
    return value if isinstance(value, int) else None


def status_writes(cluster: Cluster, va: str) -> int:
    path = f'/apis/llmd.ai/v1alpha1/namespaces/{NS}/variantautoscalings/{va}/status'
    return sum(1 for r in cluster.api.requests if r.path == path and r.method in ('PATCH', 'PUT'))


def metrics_available(cluster: Cluster, va: str) -> bool:
    cond = condition(cluster, va, 'MetricsAvailable')
    return cond is not None and cond.get('status') == 'True'


def show(obj: object) -> str:
    return json.dumps(obj, indent=1, sort_keys=True)


# ---- scale-from-zero ----------------------------------------------------------------------


async def test_queued_requests_wake_the_cheapest_variant(cluster: Cluster) -> None:
    await two_variants(cluster, replicas=0, min_replicas=0)
    # A long cycle: the wake must come from the scale-from-zero loop, not the main cycle.
    async with controller(
        cluster, '--metrics-source', 'pods', '--interval', '30s', '--scale-to-zero'
    ) as process:
        await cluster.wait_for(
            lambda: status_writes(cluster, CHEAP) > 0 and status_writes(cluster, DEAR) > 0,
            timeout=20,
            what='a first cycle',
        )
        assert replicas(cluster, CHEAP) == replicas(cluster, DEAR) == 0
        cluster.set_rate(model_id=MODEL_8B, rate=20.0)
        await cluster.wait_for(
            lambda: replicas(cluster, CHEAP) == 1, timeout=2.5, what='the cheap variant woken'
        )
        await cluster.wait_for(
            lambda: bool(events(cluster, 'ScaledFromZero')), timeout=2, what='ScaledFromZero'
        )
        assert replicas(cluster, DEAR) == 0
        assert scale_writes(cluster, CHEAP) == [1]
        assert scale_writes(cluster, DEAR) == []
        assert main_resource_writes(cluster) == []
        assert process.returncode is None


# ---- with Prometheus ------------------------------------------------------------------------


@pytest.mark.integration
async def test_load_above_capacity_scales_the_cheap_variant_up(tmp_path: Path) -> None:
    prom.binary()
    async with Cluster(
        namespace=NS, workdir=tmp_path, prometheus=True, input_tokens=64, output_tokens=32
    ) as cluster:
        assert cluster.prometheus_url is not None
        await two_variants(cluster, replicas=1, min_replicas=1)
        args = ('--metrics-source', 'prometheus', '--prometheus-url', cluster.prometheus_url)
        async with controller(cluster, *args, '--interval', '2s'):
            await cluster.wait_for(
                lambda: metrics_available(cluster, CHEAP) and metrics_available(cluster, DEAR),
                timeout=30,
                what='metrics through Prometheus',
            )
            assert replicas(cluster, CHEAP) == replicas(cluster, DEAR) == 1
            cluster.set_rate(model_id=MODEL_8B, rate=12.0)
            await cluster.wait_for(
                lambda: replicas(cluster, CHEAP) >= 2 and (desired(cluster, CHEAP) or 0) >= 2,
                timeout=30,
                what='the cheap variant scaled up',
            )
            cheap_writes = scale_writes(cluster, CHEAP)
            assert cheap_writes[0] == 2, cheap_writes
            assert cheap_writes == sorted(cheap_writes)  # only up while the load is high
            assert scale_writes(cluster, DEAR) == []
            assert replicas(cluster, DEAR) == 1
            assert main_resource_writes(cluster) == []
            cond = condition(cluster, CHEAP, 'MetricsAvailable')
            assert cond is not None
            assert cond['status'] == 'True', show(cond)
            await cluster.wait_for(
                lambda: bool(events(cluster, 'ScaledUp')), timeout=5, what='a ScaledUp event'
            )
            (event,) = events(cluster, 'ScaledUp')[:1]
            assert event['regarding']['name'] == CHEAP


def scale_to_zero_configmap(*, retention: str) -> Obj:
    return {
        'apiVersion': 'v1',
        'kind': 'ConfigMap',
        'metadata': {
            'name': 'wva-model-scale-to-zero-config',
            'namespace': CONTROLLER_NS,
            'labels': {'app.kubernetes.io/name': 'workload-variant-autoscaler'},
        },
        'data': {'default': f'enable_scale_to_zero: true\nretention_period: {retention}'},
    }


@pytest.mark.integration
async def test_load_gone_scales_down_then_to_zero_after_the_retention(tmp_path: Path) -> None:
    prom.binary()
    async with Cluster(
        namespace=NS, workdir=tmp_path, prometheus=True, input_tokens=64, output_tokens=32
    ) as cluster:
        assert cluster.prometheus_url is not None
        cluster.api.seed(scale_to_zero_configmap(retention='20s'))
        await cluster.add_variant(
            name=CHEAP, model_id=MODEL_8B, preset=SPEC, cost=1.0, replicas=3, rate=2.0
        )
        await cluster.add_variant(name=DEAR, model_id=MODEL_8B, preset=SPEC, cost=5.0, replicas=1)
        args = ('--metrics-source', 'prometheus', '--prometheus-url', cluster.prometheus_url)
        async with controller(cluster, *args, '--interval', '2s'):
            await cluster.wait_for(
                lambda: metrics_available(cluster, CHEAP) and metrics_available(cluster, DEAR),
                timeout=30,
                what='metrics through Prometheus',
            )
            cluster.set_rate(model_id=MODEL_8B, rate=0.0)
            stopped = time.monotonic()
            await cluster.wait_for(
                lambda: replicas(cluster, CHEAP) == replicas(cluster, DEAR) == 0,
                timeout=60,
                what='both variants at zero',
            )
            zero_after = time.monotonic() - stopped
            await cluster.wait_for(
                lambda: bool(events(cluster, 'ScaledToZero')), timeout=5, what='ScaledToZero'
            )
        # Nothing reaches zero while requests were served within the retention period.
        print("ZERO", zero_after, scale_writes(cluster, CHEAP), scale_writes(cluster, DEAR))
        assert zero_after >= 18, zero_after
        for name, start in ((CHEAP, 3), (DEAR, 1)):
            path = [start, *scale_writes(cluster, name)]
            assert path == sorted(path, reverse=True), (name, path)  # never up without load
            assert path[-1] == 0
            steps = list(zip(path, path[1:], strict=False))
            assert all(after > 0 or before == 1 for before, after in steps), (name, path)
        assert 1 in scale_writes(cluster, CHEAP)  # 3 → ... → 1 → 0
        assert desired(cluster, CHEAP) == desired(cluster, DEAR) == 0
        assert main_resource_writes(cluster) == []
