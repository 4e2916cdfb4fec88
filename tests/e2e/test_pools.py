"""`llmscaler run` with InferencePools: each pool's EPP found through its Service and read apart.

Two namespaces hold the same model with a cheap and a dear variant at zero replicas: `llm` in
pool `pool-a` (GA `inference.networking.k8s.io/v1`), `other` in pool `pool-b` (the older
`inference.networking.x-k8s.io/v1alpha2`). Each pool's endpoint picker is an emulated EPP
(`llmscaler.emulate`, `--pool`) reached only through its Service's EndpointSlice; neither EPP
carries the `--epp-selector` label (there is no EPP pod at all). On the fake API and on the real
control plane, where the InferencePool CRDs of the Gateway API Inference Extension (v1.2.0) are
installed first. The EPPs listen on this machine's own address, which their EndpointSlices
hold (the API server refuses loopback addresses there).

| step | expectation |
|---|---|
| pool-a, then pool-b while running | one EPP source per pool, each as it appears (logged) |
| a request queues at pool-a's EPP | llm/cheap woken 0 → 1 by scale-from-zero; other/* untouched |
| pool-a deleted | its source removed; llm/cheap says PoolResolved=False, why it holds |
| a request queues at pool-b's EPP | other/cheap woken; llm/* untouched |
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from llmscaler.devcluster import objects
from llmscaler.devcluster.cluster import Cluster
from llmscaler.devcluster.host import host_address
from llmscaler.emulate.server import RunningEmulator, serve
from llmscaler.sim.hardware.presets import MODEL_8B
from tests.support.e2e_controller import SPEC, controller
from tests.support.pool_objects import inference_pool_crds

A, B = 'llm', 'other'
GA = 'inference.networking.k8s.io/v1'
ALPHA = 'inference.networking.x-k8s.io/v1alpha2'
Obj = dict[str, Any]


@pytest.fixture
async def cluster(backend: bool, tmp_path: Path) -> AsyncIterator[Cluster]:
    async with Cluster(namespace=A, workdir=tmp_path, control_plane=backend) as c:
        if c.real:
            await install_pools(c)
        yield c


async def install_pools(cluster: Cluster) -> None:
    """The second namespace and the InferencePool CRDs, on the real control plane (the fake API
    serves InferencePools and every namespace of its own)."""
    namespace = {'apiVersion': 'v1', 'kind': 'Namespace', 'metadata': {'name': B}}
    await asyncio.to_thread(cluster.install, [namespace, *inference_pool_crds()])


def seed_model(cluster: Cluster, *, namespace: str, pool: str) -> None:
    """CHEAP and DEAR at zero replicas, their pods labelled for `pool`."""
    for name, cost in (('cheap', 1.0), ('dear', 5.0)):
        deploy = objects.deployment(
            name=name,
            namespace=namespace,
            model_id=MODEL_8B,
            spec=SPEC,
            replicas=0,
            accelerator=SPEC.accelerator,
        )
        deploy['spec']['template']['metadata']['labels'][objects.POOL_LABEL] = pool
        cluster.seed(deploy)
        cluster.seed(
            objects.variant_autoscaling(
                name=name,
                namespace=namespace,
                model_id=MODEL_8B,
                target=name,
                cost=cost,
                min_replicas=0,
                max_replicas=4,
            )
        )


async def epp(cluster: Cluster, *, namespace: str, pool: str) -> RunningEmulator:
    """An emulated EPP for `pool` (no replica: requests queue) behind its Service's slice, on
    this machine's own address: an API server refuses loopback ones in an EndpointSlice."""
    running = await serve(
        base_port=0,
        epp_port=0,
        spec=SPEC,
        replicas=0,
        model_name=MODEL_8B,
        namespace=namespace,
        pool=pool,
        host=host_address(),
    )
    cluster.seed(
        objects.endpoint_slice(
            service=f'{pool}-epp',
            namespace=namespace,
            pod=f'{pool}-epp-0',
            ip=host_address(),
            metrics_port=running.epp_port,
        )
    )
    return running


def replicas(cluster: Cluster, namespace: str, name: str) -> int:
    deploy = cluster.get(api_version='apps/v1', kind='Deployment', namespace=namespace, name=name)
    value = deploy['spec']['replicas']
    assert isinstance(value, int)
    return value


def scale_writes(cluster: Cluster, namespace: str, name: str) -> list[int]:
    path = f'/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale'
    return [
        r.json()['spec']['replicas']
        for r in cluster.requests
        if r.method == 'PATCH' and r.path == path
    ]


def condition(cluster: Cluster, namespace: str, va: str, kind: str) -> Obj | None:
    obj = cluster.get(
        api_version='llmd.ai/v1alpha1', kind='VariantAutoscaling', namespace=namespace, name=va
    )
    for cond in obj.get('status', {}).get('conditions', []):
        if cond.get('type') == kind:
            assert isinstance(cond, dict)
            return cond
    return None


def events(cluster: Cluster, namespace: str, reason: str) -> list[Obj]:
    found = cluster.list(api_version='events.k8s.io/v1', kind='Event', namespace=namespace)
    return [e for e in found if e.get('reason') == reason]


@contextlib.asynccontextmanager
async def queued_request(running: RunningEmulator) -> AsyncIterator[None]:
    """One completion waiting at the EPP (no replica serves it) while the block runs."""
    async with httpx.AsyncClient(timeout=60) as client:
        url = f'http://{host_address()}:{running.epp_port}/v1/completions'
        body = {'model': MODEL_8B, 'prompt': 'hello', 'max_tokens': 4}
        task = asyncio.create_task(client.post(url, json=body))
        try:
            yield
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


async def test_each_pool_has_its_epp_source_and_wakes_only_its_own_variants(
    cluster: Cluster,
) -> None:
    seed_model(cluster, namespace=A, pool='pool-a')
    seed_model(cluster, namespace=B, pool='pool-b')
    epp_a = await epp(cluster, namespace=A, pool='pool-a')
    epp_b = await epp(cluster, namespace=B, pool='pool-b')
    try:
        cluster.seed(objects.inference_pool(name='pool-a', namespace=A, service='pool-a-epp'))
        process = controller(
            cluster, '--metrics-source', 'pods', '--interval', '2s', '--scale-to-zero'
        )
        async with process:
            await cluster.wait_for(
                lambda: 'EPP source of InferencePool llm/pool-a added' in process.log(),
                timeout=20,
                what='the EPP source of pool-a',
            )
            # A pool created while the controller runs gets its source too.
            cluster.seed(
                objects.inference_pool(
                    name='pool-b', namespace=B, service='pool-b-epp', api_version=ALPHA
                )
            )
            await cluster.wait_for(
                lambda: 'EPP source of InferencePool other/pool-b added' in process.log(),
                timeout=5,
                what='the EPP source of pool-b',
            )
            await cluster.wait_for(
                lambda: condition(cluster, A, 'cheap', 'PoolResolved') is not None,
                timeout=10,
                what='a first cycle',
            )
            found = condition(cluster, A, 'cheap', 'PoolResolved')
            assert found is not None
            assert (found['status'], found['message']) == ('True', 'InferencePool llm/pool-a')

            async with queued_request(epp_a):
                await cluster.wait_for(
                    lambda: replicas(cluster, A, 'cheap') == 1,
                    timeout=3,
                    what='llm/cheap woken by the queue of pool-a',
                )
                await cluster.wait_for(
                    lambda: bool(events(cluster, A, 'ScaledFromZero')),
                    timeout=3,
                    what='ScaledFromZero',
                )
                await asyncio.sleep(0.5)  # several more ticks: nothing else may wake
            assert scale_writes(cluster, A, 'cheap')[0] == 1
            assert scale_writes(cluster, A, 'dear') == []
            # Same model, other namespace, other pool: the queue of pool-a is not its queue.
            assert scale_writes(cluster, B, 'cheap') == scale_writes(cluster, B, 'dear') == []

            cluster.delete(api_version=GA, kind='InferencePool', namespace=A, name='pool-a')
            await cluster.wait_for(
                lambda: 'EPP source of InferencePool llm/pool-a removed' in process.log(),
                timeout=5,
                what='the EPP source of pool-a removed',
            )

            def held() -> bool:
                cond = condition(cluster, A, 'dear', 'PoolResolved')
                return cond is not None and cond['status'] == 'False'

            await cluster.wait_for(held, timeout=10, what='llm/dear held for want of a pool')
            cond = condition(cluster, A, 'dear', 'PoolResolved')
            assert cond is not None
            assert cond['reason'] == 'PoolNotUsable'
            assert (
                'no InferencePool in namespace llm selects the pods of Deployment llm/dear'
                in (cond['message'])
            )
            ready = condition(cluster, A, 'dear', 'OptimizationReady')
            assert ready is not None
            assert ready['status'] == 'False'
            assert ready['message'].startswith('held: no InferencePool')
            assert events(cluster, A, 'NoInferencePool')

            async with queued_request(epp_b):
                await cluster.wait_for(
                    lambda: replicas(cluster, B, 'cheap') == 1,
                    timeout=3,
                    what='other/cheap woken by the queue of pool-b',
                )
            assert scale_writes(cluster, B, 'dear') == []
            assert scale_writes(cluster, A, 'dear') == []
            assert process.returncode is None
        assert process.returncode == 0
    finally:
        await epp_a.stop()
        await epp_b.stop()


async def test_the_fake_clusters_pools_wake_the_cheapest_variant(tmp_path: Path) -> None:
    """`Cluster(inference_pools=True)` (`llmscaler demo --inference-pools`): the model's EPP
    comes only from its InferencePool, and load arriving at zero wakes the cheap variant."""
    async with Cluster(
        namespace=A, workdir=tmp_path, input_tokens=64, output_tokens=32, inference_pools=True
    ) as c:
        for name, cost in (('cheap', 1.0), ('dear', 5.0)):
            await c.add_variant(
                name=name, model_id=MODEL_8B, preset=SPEC, cost=cost, replicas=0, max_replicas=4
            )
        process = controller(
            c,
            '--metrics-source',
            'pods',
            '--interval',
            '30s',
            '--scale-to-zero',
            # No EPP pod carries this label: only the pool can name the EPP.
            '--epp-selector',
            'nothing=here',
        )
        pool = f'{objects.slug(MODEL_8B)}-pool'
        async with process:
            await c.wait_for(
                lambda: f'EPP source of InferencePool {A}/{pool} added' in process.log(),
                timeout=20,
                what='the EPP source of the pool',
            )
            c.set_rate(model_id=MODEL_8B, rate=20.0)
            await c.wait_for(
                lambda: replicas(c, A, 'cheap') == 1, timeout=3, what='the cheap variant woken'
            )
            assert scale_writes(c, A, 'dear') == []
            assert process.returncode is None
