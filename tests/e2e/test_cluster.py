"""The fake cluster itself: what the controller will see and do through it.

| check | expectation |
|---|---|
| add_variant | a Deployment the accessor reads, a VA that parses, ready pods owned via ReplicaSet |
| `/scale` over HTTP (lightkube) | pods, emulator and Deployment status follow, up and down |
| pod ports | every ready pod's annotated port serves its vLLM page |
| load at 0 replicas | the EPP pod's page shows a queue; scaling up drains it onto the pod |
| two variants of a model | one EPP pod; load spread over both; a variant at 0 gets nothing |
| startup delay, deleted pod, deleted Deployment | Pending first; recreated; pods gone |
| ControllerProcess | argv and kubeconfig, exit status, SIGTERM, SIGKILL after the timeout |
| Prometheus (integration) | `vllm:num_requests_waiting` by pod name, and again after a scale-up |
"""

from __future__ import annotations

import asyncio
import math
import re
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st
from lightkube.core.exceptions import ApiError
from lightkube.resources.apps_v1 import Deployment
from lightkube.types import PatchType

from llmscaler.devcluster import objects
from llmscaler.devcluster.cluster import Cluster
from llmscaler.devcluster.process import (
    ControllerProcess,
    PrometheusMissing,
    default_command,
    prometheus_binary,
)
from llmscaler.kube import crd
from llmscaler.kube.client import make_client
from llmscaler.kube.targets import ScaleTarget, accessor
from llmscaler.sim.hardware.presets import MODEL_8B, preset
from tests.support import prom

NS = 'llm'
H100 = 'llama-3.1-8b-h100'
A100 = 'llama-3.1-8b-a100'


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    async with Cluster(namespace=NS, workdir=tmp_path, input_tokens=64, output_tokens=32) as c:
        yield c


async def scale(cluster: Cluster, name: str, replicas: int) -> None:
    """Write spec.replicas through `/scale` with a merge patch, as a controller would."""
    client = make_client(server=cluster.url)
    try:
        await client.patch(
            Deployment.Scale,
            name,
            {'spec': {'replicas': replicas}},
            namespace=NS,
            patch_type=PatchType.MERGE,
        )
    finally:
        await client.close()


def ready_pods(cluster: Cluster, variant: str) -> list[dict[str, Any]]:
    return [p for p in cluster.pods(variant) if p['status'].get('phase') == 'Running']


def sample(page: str, name: str, **labels: str) -> float | None:
    """The value of the first series `name` whose labels include `labels` (None: no such)."""
    for line in page.splitlines():
        match = re.fullmatch(rf'{re.escape(name)}\{{(.*)\}} (\S+)', line)
        if match and all(f'{k}="{v}"' in match[1] for k, v in labels.items()):
            return float(match[2])
    return None


async def page(port: str | int) -> str:
    async with httpx.AsyncClient(timeout=2) as client:
        response = await client.get(f'http://127.0.0.1:{port}/metrics')
        response.raise_for_status()
        return response.text


async def test_add_variant_writes_what_the_controller_reads(cluster: Cluster) -> None:
    await cluster.add_variant(name='h100', model_id=MODEL_8B, preset=H100, cost=3.9, replicas=2)
    spec = preset(name=H100)

    target = accessor(cluster.deployment('h100'))
    assert isinstance(target, ScaleTarget), target
    assert (target.replicas, target.ready, target.pending) == (2, 2, 0)
    assert (target.gpus_per_replica, target.accelerator) == (1, 'H100')
    assert target.engine is not None
    assert target.engine.max_num_seqs == spec.max_num_seqs
    assert target.engine.num_gpu_blocks_override == spec.num_gpu_blocks

    va = crd.parse_va(cluster.va('h100'))
    assert isinstance(va, crd.VariantAutoscaling), va
    assert va.spec.model_id == MODEL_8B
    assert (va.spec.min_replicas, va.spec.max_replicas, va.spec.variant_cost) == (0, 4, '3.9')
    assert va.spec.scale_target_ref.name == 'h100'

    pods = cluster.pods('h100')
    assert len(pods) == 2
    pod_hash = pods[0]['metadata']['labels'][objects.POD_TEMPLATE_HASH_LABEL]
    ports = cluster.emulator('h100').slot_ports
    for slot, pod in enumerate(pods):
        meta = pod['metadata']
        assert meta['name'] == f'h100-{pod_hash}-{slot}'
        (owner,) = meta['ownerReferences']
        assert (owner['kind'], owner['name'], owner['controller']) == (
            'ReplicaSet',
            f'h100-{pod_hash}',
            True,
        )
        assert meta['labels'] == {'app': 'h100', objects.POD_TEMPLATE_HASH_LABEL: pod_hash}
        assert objects.VARIANT_LABEL not in meta['labels']
        assert meta['annotations'][objects.PORT_ANNOTATION] == str(ports[slot])
        assert pod['status']['phase'] == 'Running'
        assert pod['status']['podIP'] == '127.0.0.1'
        assert {'type': 'Ready', 'status': 'True'} in pod['status']['conditions']
        assert pod['spec']['nodeSelector'] == {'nvidia.com/gpu.product': 'H100'}

    (epp,) = [p for p in cluster.pods() if p['metadata']['labels'].get(objects.EPP_LABEL)]
    assert epp['metadata']['labels'][objects.EPP_LABEL] == 'true'
    assert epp['metadata']['annotations'][objects.PORT_ANNOTATION] == str(
        cluster.gateway(MODEL_8B).port
    )


async def test_scale_over_http_moves_pods_emulator_and_status(cluster: Cluster) -> None:
    await cluster.add_variant(name='h100', model_id=MODEL_8B, preset=H100, cost=3.9, replicas=1)
    first = cluster.pods('h100')[0]['metadata']

    await scale(cluster, 'h100', 3)

    def settled(n: int) -> bool:
        status = cluster.deployment('h100').get('status', {})
        generation = cluster.deployment('h100')['metadata']['generation']
        return (
            len(ready_pods(cluster, 'h100')) == n
            and len(cluster.pods('h100')) == n
            and cluster.emulator('h100').emulator.replicas == n
            and status.get('readyReplicas', 0) == status.get('replicas', 0) == n
            and status['observedGeneration'] == generation
        )

    await cluster.wait_for(lambda: settled(3), timeout=5, what='3 ready replicas')
    pods = cluster.pods('h100')
    assert pods[0]['metadata']['uid'] == first['uid']  # scaling up leaves the old pod alone
    for pod in pods:
        text = await page(pod['metadata']['annotations'][objects.PORT_ANNOTATION])
        assert sample(text, 'vllm:num_requests_waiting', model_name=MODEL_8B) == 0
    status = cluster.deployment('h100')['status']
    assert status['updatedReplicas'] == status['availableReplicas'] == 3

    await scale(cluster, 'h100', 1)
    await cluster.wait_for(lambda: settled(1), timeout=5, what='1 ready replica')
    assert [p['metadata']['name'] for p in cluster.pods('h100')] == [first['name']]

    await scale(cluster, 'h100', 0)
    await cluster.wait_for(lambda: settled(0), timeout=5, what='no replica')
    assert 'readyReplicas' not in cluster.deployment('h100')['status']  # omitempty


async def test_a_scale_write_while_the_kubelet_syncs_is_picked_up_on_the_next_pass(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The kubelet reads the Deployment, then awaits the emulator: a /scale write that lands in
    # between makes its status write conflict (409). Like a real controller it must requeue, not
    # fail the cluster.
    await cluster.add_variant(name='h100', model_id=MODEL_8B, preset=H100, cost=3.9, replicas=1)
    running = cluster.emulator('h100')
    scale_emulator = running.scale
    moved: list[int] = []

    async def scale_then_move(*, replicas: int) -> None:
        await scale_emulator(replicas=replicas)
        if not moved:
            moved.append(replicas)
            await scale(cluster, 'h100', 3)

    monkeypatch.setattr(running, 'scale', scale_then_move)
    await scale(cluster, 'h100', 2)

    def settled() -> bool:
        status = cluster.deployment('h100').get('status', {})
        return bool(status.get('readyReplicas') == status.get('replicas') == 3)

    await cluster.wait_for(settled, timeout=5, what='3 ready replicas after the conflict')
    assert moved == [2]
    assert cluster.failures == []


async def test_load_queues_at_zero_replicas_and_drains_on_scale_up(cluster: Cluster) -> None:
    await cluster.add_variant(
        name='h100', model_id=MODEL_8B, preset=H100, cost=3.9, replicas=0, rate=40.0
    )
    (epp,) = [p for p in cluster.pods() if p['metadata']['name'] == cluster.epp_pod_name(MODEL_8B)]
    epp_port = epp['metadata']['annotations'][objects.PORT_ANNOTATION]
    queue = 'inference_extension_flow_control_queue_size'
    await cluster.wait_for(
        lambda: cluster.gateway(MODEL_8B).queue_size >= 3, timeout=5, what='a queue'
    )
    text = await page(epp_port)
    queued = sample(text, queue, target_model_name=MODEL_8B)
    assert queued is not None
    assert queued >= 3
    bytes_queued = sample(text, 'inference_extension_flow_control_queue_bytes')
    assert bytes_queued is not None
    assert bytes_queued > 0

    await scale(cluster, 'h100', 1)
    await cluster.wait_for(
        lambda: cluster.gateway(MODEL_8B).queue_size == 0, timeout=5, what='the queue drained'
    )
    (pod,) = cluster.pods('h100')
    name = pod['metadata']['name']
    text = await page(epp_port)
    assert sample(text, queue) == 0
    attempts = sample(text, 'inference_extension_scheduler_attempts_total', pod_name=name)
    assert attempts is not None
    assert attempts >= queued
    port = pod['metadata']['annotations'][objects.PORT_ANNOTATION]
    assert f'port="{port}"' in text
    await cluster.wait_for(
        lambda: cluster.emulator('h100').emulator.pods[0].engine.counters.request_success_total > 0,
        timeout=5,
        what='requests completed on the replica',
    )


async def test_load_spreads_over_the_variants_of_a_model(cluster: Cluster) -> None:
    await cluster.add_variant(name='h100', model_id=MODEL_8B, preset=H100, cost=3.9, replicas=1)
    await cluster.add_variant(name='a100', model_id=MODEL_8B, preset=A100, cost=3.67, replicas=1)
    epps = [p for p in cluster.pods() if p['metadata']['labels'].get(objects.EPP_LABEL)]
    assert len(epps) == 1
    gateway = cluster.gateway(MODEL_8B)
    (h100,) = (p['metadata']['name'] for p in cluster.pods('h100'))
    (a100,) = (p['metadata']['name'] for p in cluster.pods('a100'))

    cluster.set_rate(model_id=MODEL_8B, rate=60.0)
    await cluster.wait_for(
        lambda: min(gateway.attempts(h100), gateway.attempts(a100)) >= 5,
        timeout=5,
        what='requests on both variants',
    )

    await scale(cluster, 'a100', 0)
    await cluster.wait_for(lambda: not cluster.pods('a100'), timeout=5, what='a100 at 0')
    before = (gateway.attempts(h100), gateway.attempts(a100))
    await cluster.wait_for(
        lambda: gateway.attempts(h100) >= before[0] + 10, timeout=5, what='more load on h100'
    )
    assert gateway.attempts(a100) == before[1]
    assert gateway.queue_size == 0  # a ready replica takes every arrival at once
    assert gateway.rejected == 0

    cluster.set_rate(model_id=MODEL_8B, rate=0.0)
    await asyncio.sleep(0.2)
    settled = gateway.dispatched + gateway.queue_size
    await asyncio.sleep(0.3)
    assert gateway.dispatched + gateway.queue_size == settled  # no new arrivals


async def test_startup_delay_deleted_pods_and_deleted_deployments(cluster: Cluster) -> None:
    await cluster.add_variant(
        name='h100', model_id=MODEL_8B, preset=H100, cost=3.9, replicas=1, startup_delay=0.4
    )
    (pod,) = cluster.pods('h100')
    assert pod['status']['phase'] == 'Pending'
    assert 'podIP' not in pod['status']
    assert 'annotations' not in pod['metadata']  # no port to scrape while starting
    status = cluster.deployment('h100')['status']
    assert (status['replicas'], status.get('readyReplicas')) == (1, None)
    assert cluster.emulator('h100').emulator.replicas == 0
    await cluster.wait_for(lambda: len(ready_pods(cluster, 'h100')) == 1, timeout=3, what='ready')
    assert cluster.emulator('h100').emulator.replicas == 1

    async with httpx.AsyncClient(base_url=cluster.url, timeout=5) as http:
        name = pod['metadata']['name']
        response = await http.delete(f'/api/v1/namespaces/{NS}/pods/{name}')
        assert response.status_code == 200
        await cluster.wait_for(
            lambda: (
                [p['metadata']['uid'] for p in ready_pods(cluster, 'h100')]
                not in ([], [pod['metadata']['uid']])
            ),
            timeout=3,
            what='the pod recreated',
        )
        response = await http.delete(f'/apis/apps/v1/namespaces/{NS}/deployments/h100')
        assert response.status_code == 200
    await cluster.wait_for(
        lambda: not cluster.pods('h100') and cluster.emulator('h100').emulator.replicas == 0,
        timeout=3,
        what='pods of the deleted Deployment gone',
    )


async def test_kubeconfig_reaches_the_fake_api(cluster: Cluster, tmp_path: Path) -> None:
    await cluster.add_variant(name='h100', model_id=MODEL_8B, preset=H100, cost=3.9, replicas=0)
    path = cluster.kubeconfig(tmp_path / 'kubeconfig')
    config = yaml.safe_load(path.read_text())
    assert config['contexts'][0]['context']['namespace'] == NS
    client = make_client(kubeconfig=str(path))
    try:
        scale_obj = await client.get(Deployment.Scale, 'h100', namespace=NS)
        assert scale_obj.spec is not None
        assert scale_obj.spec.replicas == 0
        with pytest.raises(ApiError):
            await client.get(Deployment, 'missing', namespace=NS)
    finally:
        await client.close()


async def test_wait_for_names_what_it_waited_for(cluster: Cluster) -> None:
    await cluster.add_variant(name='h100', model_id=MODEL_8B, preset=H100, cost=3.9, replicas=1)
    with pytest.raises(TimeoutError, match=r'waiting for the moon[\s\S]*h100: spec.replicas=1'):
        await cluster.wait_for(lambda: False, timeout=0.1, what='the moon')


async def test_bad_variants_are_refused(cluster: Cluster) -> None:
    await cluster.add_variant(name='h100', model_id=MODEL_8B, preset=H100, cost=3.9, replicas=1)
    with pytest.raises(ValueError, match='already exists'):
        await cluster.add_variant(name='h100', model_id=MODEL_8B, preset=H100, cost=1, replicas=1)
    with pytest.raises(ValueError, match='unknown preset'):
        await cluster.add_variant(name='x', model_id=MODEL_8B, preset='nope', cost=1, replicas=1)
    with pytest.raises(ValueError, match='cost'):
        await cluster.add_variant(name='y', model_id=MODEL_8B, preset=H100, cost=-1, replicas=1)
    with pytest.raises(ValueError, match='rate'):
        await cluster.add_variant(
            name='z', model_id=MODEL_8B, preset=H100, cost=1, replicas=1, rate=-1.0
        )
    with pytest.raises(ValueError, match='rate'):
        cluster.set_rate(model_id=MODEL_8B, rate=math.nan)
    deployments = cluster.api.store.list(cluster.api.store_resource(cluster.deployment('h100')), NS)
    assert [d['metadata']['name'] for d in deployments] == ['h100']  # nothing else was created
    with pytest.raises(KeyError):
        cluster.set_rate(model_id='other/model', rate=1.0)


async def test_a_failing_reconciler_fails_the_test(tmp_path: Path) -> None:
    failures: list[BaseException] = []

    async def break_the_deployment() -> None:
        async with Cluster(namespace=NS, workdir=tmp_path) as cluster:
            await cluster.add_variant(
                name='h100', model_id=MODEL_8B, preset=H100, cost=3.9, replicas=1
            )
            broken = cluster.deployment('h100')
            broken['spec']['replicas'] = '3'  # the fake API does not validate it, as kube would
            resource = cluster.api.store_resource(broken)
            cluster.api.store.update(resource, NS, 'h100', broken, part='main')
            await cluster.wait_for(lambda: bool(cluster.failures), timeout=2, what='a failure')
            await asyncio.sleep(0.2)  # several more passes fail the same way
            failures.extend(cluster.failures)

    with pytest.raises(RuntimeError, match='the development cluster failed'):
        await break_the_deployment()
    assert len(failures) == 1  # logged once, not at every pass
    assert 'bad spec.replicas' in str(failures[0])


@given(cost=st.floats(min_value=0, max_value=1e9, allow_nan=False))
def test_cost_text_is_a_valid_variant_cost(cost: float) -> None:
    text = objects.cost_text(cost)
    assert re.fullmatch(crd.COST_PATTERN, text)
    assert math.isclose(float(text), cost, abs_tol=1e-6)


@given(text=st.text(max_size=80))
def test_slug_is_a_dns_label(text: str) -> None:
    assert re.fullmatch(r'[a-z0-9]([-a-z0-9]{0,48}[a-z0-9])?', objects.slug(text))


# ---- ControllerProcess ----------------------------------------------------------------------

ECHO = """
import os, sys
print('argv', sys.argv[1:], os.environ.get('E2E_MARK'), flush=True)
sys.exit(3)
"""
GRACEFUL = """
import signal, sys, time
signal.signal(signal.SIGTERM, lambda *_: (print('terminated', flush=True), sys.exit(0)))
print('ready', flush=True)
time.sleep(60)
"""
STUBBORN = """
import signal, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
print('ready', flush=True)
time.sleep(60)
"""


async def test_controller_process_passes_kubeconfig_args_and_env(cluster: Cluster) -> None:
    process = ControllerProcess(
        cluster=cluster,
        args=['--namespace', NS],
        env={'E2E_MARK': 'here'},
        command=[sys.executable, '-c', ECHO],
    )
    async with process:
        assert await process.wait(timeout=10) == 3
    assert process.returncode == 3
    expected = ['--kubeconfig', str(process.kubeconfig), '--namespace', NS]
    assert f'argv {expected!r} here' in process.log()
    config = yaml.safe_load(process.kubeconfig.read_text())
    assert config['clusters'][0]['cluster']['server'] == cluster.url
    again = ControllerProcess(cluster=cluster, args=[], command=[sys.executable, '-c', ECHO])
    assert again.log_path != process.log_path  # a second run keeps the first one's log


async def test_controller_process_stops_with_sigterm_then_sigkill(cluster: Cluster) -> None:
    graceful = ControllerProcess(
        cluster=cluster, args=[], name='graceful', command=[sys.executable, '-c', GRACEFUL]
    )
    stubborn = ControllerProcess(
        cluster=cluster,
        args=[],
        name='stubborn',
        command=[sys.executable, '-c', STUBBORN],
        stop_timeout=0.3,
    )
    async with graceful, stubborn:
        await cluster.wait_for(
            lambda: 'ready' in graceful.log() and 'ready' in stubborn.log(),
            timeout=10,
            what='both processes started',
        )
        assert graceful.returncode is None
        with pytest.raises(TimeoutError, match='still runs'):
            await graceful.wait(timeout=0.1)
        assert await graceful.stop() == 0
        assert await stubborn.stop() == -9
    assert 'terminated' in graceful.log()


async def test_default_command_runs_the_llmscaler_cli(tmp_path: Path) -> None:
    command = default_command()
    assert command[0] == sys.executable
    assert command[-1] == 'run'
    process = await asyncio.create_subprocess_exec(
        *command[:-1],
        '--help',
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await process.communicate()
    assert process.returncode == 0, out
    assert b'llmscaler' in out


# ---- with Prometheus -------------------------------------------------------------------------


@pytest.mark.integration
async def test_prometheus_sees_the_pods_by_name(tmp_path: Path) -> None:
    prom.binary()
    async with Cluster(namespace=NS, workdir=tmp_path, prometheus=True) as cluster:
        assert cluster.prometheus_url is not None
        url = cluster.prometheus_url
        await cluster.add_variant(
            name='h100', model_id=MODEL_8B, preset=H100, cost=3.9, replicas=2, rate=5.0
        )
        waiting = f'vllm:num_requests_waiting{{namespace="{NS}"}}'
        await prom.wait_for(url=url, query=waiting, count=2, timeout=15)
        await prom.wait_for(
            url=url, query='inference_extension_flow_control_queue_size', count=1, timeout=5
        )
        async with httpx.AsyncClient(timeout=2) as client:
            response = await client.get(f'{url}/api/v1/query', params={'query': waiting})
            result = response.json()['data']['result']
            epp = await client.get(
                f'{url}/api/v1/query',
                params={'query': 'inference_extension_flow_control_queue_size'},
            )
        pods = sorted(p['metadata']['name'] for p in cluster.pods('h100'))
        assert sorted(s['metric']['pod'] for s in result) == pods
        assert {s['metric']['model_name'] for s in result} == {MODEL_8B}
        (series,) = epp.json()['data']['result']
        assert series['metric']['pod'] == cluster.epp_pod_name(MODEL_8B)

        await scale(cluster, 'h100', 3)
        await prom.wait_for(url=url, query=waiting, count=3, timeout=15)


async def test_without_prometheus_on_path_starting_it_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv('PATH', str(tmp_path))
    with pytest.raises(PrometheusMissing, match='apt-get install prometheus'):
        prometheus_binary()
    with pytest.raises(PrometheusMissing):
        async with Cluster(namespace=NS, workdir=tmp_path, prometheus=True):
            pass
    assert not (tmp_path / 'prometheus.yml').exists()
