"""What only a real API server can tell: the CRDs' schemas, the shipped RBAC, real rollouts.

Each test runs on the real control plane (etcd, kube-apiserver with Node,RBAC, the
kube-controller-manager and kube-scheduler built by `make binaries`), the CRDs and RBAC of
deploy/base applied by kubectl, and the controller signed in as its ServiceAccount.

| check | expectation |
|---|---|
| the samples' VAs; a VA the schema refuses | created; kubectl apply fails naming the field |
| VA printer columns | `kubectl get va` shows the CRD's columns with the status values |
| load on a real Deployment | `/scale` by the ServiceAccount, a real ReplicaSet's pods scheduled |
|  | on the GPU node and Ready; VA status, Events, Lease; nothing forbidden |
| a scale-down by hand | the ReplicaSet deletes pods; they leave the API (graceful deletion) |
| `deployments/scale` taken out of the ClusterRole | 403 reported, no replica changed |
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from llmscaler.devcluster.cluster import Cluster
from llmscaler.sim.hardware.presets import MODEL_8B
from tests.e2e.conftest import need_control_plane
from tests.support.cluster_kubectl import kubectl
from tests.support.e2e_controller import (
    CHEAP,
    CONTROLLER_NS,
    DEAR,
    NS,
    condition,
    controller,
    desired,
    events,
    main_resource_writes,
    metrics_available,
    replicas,
    scale_writes,
    show,
    two_variants,
)

ROOT = Path(__file__).resolve().parents[2]
ACCOUNT = f'system:serviceaccount:{CONTROLLER_NS}:llmscaler-controller'


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    need_control_plane()
    async with Cluster(
        namespace=NS, workdir=tmp_path, input_tokens=64, output_tokens=32, control_plane=True
    ) as c:
        yield c


def read(cluster: Cluster, kind: str, name: str) -> dict[str, Any]:
    """A cluster-scoped object as kubectl gets it."""
    done = kubectl(cluster, 'get', kind, name, '-o', 'json', namespace=NS)
    assert done.returncode == 0, done.stderr
    found: dict[str, Any] = json.loads(done.stdout)
    return found


def sample_vas() -> list[dict[str, Any]]:
    found = []
    for path in sorted((ROOT / 'deploy' / 'samples').glob('*.yaml')):
        found += [
            d
            for d in yaml.safe_load_all(path.read_text())
            if d and d['kind'] == 'VariantAutoscaling'
        ]
    assert len(found) >= 3
    return found


def running_ready(pod: dict[str, Any]) -> bool:
    status = pod.get('status', {})
    ready = {c['type']: c['status'] for c in status.get('conditions', [])}.get('Ready')
    return status.get('phase') == 'Running' and ready == 'True'


async def test_the_crds_accept_the_samples_and_refuse_what_their_schema_forbids(
    cluster: Cluster,
) -> None:
    for va in sample_vas():
        va['metadata']['namespace'] = NS
        done = kubectl(cluster, 'apply', '-f', '-', stdin=yaml.safe_dump(va), namespace=NS)
        assert done.returncode == 0, done.stderr
    names = {va['metadata']['name'] for va in sample_vas()}
    listed = cluster.list(api_version='llmd.ai/v1alpha1', kind='VariantAutoscaling', namespace=NS)
    assert {va['metadata']['name'] for va in listed} == names
    bad = sample_vas()[0]
    bad['metadata'] = {'name': 'bad', 'namespace': NS}
    bad['spec']['scaleTargetRef'] = {'kind': 'Deployment'}  # no name
    done = kubectl(cluster, 'apply', '-f', '-', stdin=yaml.safe_dump(bad), namespace=NS)
    assert done.returncode != 0
    assert 'scaleTargetRef.name' in done.stderr, done.stderr
    bad = sample_vas()[0]
    bad['metadata'] = {'name': 'bad', 'namespace': NS}
    bad['spec']['modelID'] = 7
    done = kubectl(cluster, 'apply', '-f', '-', stdin=yaml.safe_dump(bad), namespace=NS)
    assert done.returncode != 0
    assert 'modelID' in done.stderr, done.stderr


async def test_the_controller_scales_a_real_deployment_as_its_service_account(
    cluster: Cluster,
) -> None:
    await two_variants(cluster, replicas=1, min_replicas=1)
    async with controller(cluster, '--metrics-source', 'pods', '--interval', '1s') as process:
        await cluster.wait_for(
            lambda: metrics_available(cluster, CHEAP) and metrics_available(cluster, DEAR),
            timeout=30,
            what='a first cycle with metrics',
        )
        cluster.set_rate(model_id=MODEL_8B, rate=12.0)
        await cluster.wait_for(lambda: replicas(cluster, CHEAP) >= 2, timeout=30, what='a scale-up')
        await cluster.wait_for(
            lambda: sum(running_ready(p) for p in cluster.pods(CHEAP)) >= 2,
            timeout=30,
            what='the new pods Running and Ready',
        )
        deployment = cluster.deployment(CHEAP)
        await cluster.wait_for(
            lambda: cluster.deployment(CHEAP).get('status', {}).get('readyReplicas', 0) >= 2,
            timeout=30,
            what='the Deployment status from its ReplicaSet',
        )
        for pod in cluster.pods(CHEAP):
            owner = pod['metadata']['ownerReferences'][0]
            assert owner['kind'] == 'ReplicaSet', show(pod)
            assert owner['name'].startswith(f'{CHEAP}-'), show(pod)
            assert pod['spec']['nodeName'].startswith('gpu-'), show(pod)
        await cluster.wait_for(
            lambda: (desired(cluster, CHEAP) or 0) >= 2 and bool(events(cluster, 'ScaledUp')),
            timeout=10,
            what='the VA status and a ScaledUp event',
        )
        cond = condition(cluster, CHEAP, 'MetricsAvailable')
        assert cond is not None
        assert cond['status'] == 'True', show(cond)
        assert scale_writes(cluster, CHEAP)[0] == 2
        by = {r.client for r in cluster.requests}
        assert by == {ACCOUNT}, by
        assert all(r.status is not None and r.status < 300 for r in cluster.requests), [
            (r.method, r.path, r.status) for r in cluster.requests if (r.status or 0) >= 300
        ]
        assert main_resource_writes(cluster) == []
        assert 'forbidden' not in process.log().lower()
        assert deployment['metadata']['uid'] == cluster.deployment(CHEAP)['metadata']['uid']
    # A scale-down by hand: the ReplicaSet deletes pods, the kubelet emulation ends them.
    cluster.set_rate(model_id=MODEL_8B, rate=0.0)
    done = kubectl(cluster, 'scale', f'deployment/{CHEAP}', '--replicas=1', namespace=NS)
    assert done.returncode == 0, done.stderr
    await cluster.wait_for(
        lambda: len(cluster.pods(CHEAP)) == 1, timeout=30, what='the surplus pods gone'
    )
    await cluster.wait_for(
        lambda: cluster.deployment(CHEAP).get('status', {}).get('replicas') == 1,
        timeout=30,
        what='the Deployment status at 1',
    )


async def test_the_va_printer_columns_as_kubectl_shows_them(cluster: Cluster) -> None:
    await two_variants(cluster, replicas=1, min_replicas=1)
    async with controller(cluster, '--metrics-source', 'pods', '--interval', '1s'):
        await cluster.wait_for(
            lambda: desired(cluster, CHEAP) == 1, timeout=30, what='a first status'
        )
    done = kubectl(cluster, 'get', 'variantautoscalings', '-o', 'wide', namespace=NS)
    assert done.returncode == 0, done.stderr
    header, *rows = done.stdout.splitlines()
    assert header.split()[0] == 'NAME'
    assert {row.split()[0] for row in rows} == {CHEAP, DEAR}
    crd = read(cluster, 'crd', 'variantautoscalings.llmd.ai')
    columns = [c['name'].upper() for c in crd['spec']['versions'][0]['additionalPrinterColumns']]
    for column in columns:
        assert column in header, (column, header)


async def test_without_the_scale_permission_the_controller_reports_and_changes_nothing(
    cluster: Cluster,
) -> None:
    role = read(cluster, 'clusterrole', 'llmscaler-controller')
    rules = [r for r in role['rules'] if 'deployments/scale' not in r.get('resources', [])]
    assert len(rules) == len(role['rules']) - 1
    role['rules'] = rules
    done = kubectl(cluster, 'replace', '-f', '-', stdin=yaml.safe_dump(role), namespace=NS)
    assert done.returncode == 0, done.stderr
    await two_variants(cluster, replicas=1, min_replicas=1)
    cluster.set_rate(model_id=MODEL_8B, rate=12.0)
    async with controller(cluster, '--metrics-source', 'pods', '--interval', '1s') as process:
        await cluster.wait_for(
            lambda: 'forbidden' in process.log().lower(),
            timeout=40,
            what='a forbidden /scale reported',
        )
        await cluster.wait_for(
            lambda: bool(events(cluster, 'ScaleFailed')), timeout=10, what='ScaleFailed'
        )
        assert replicas(cluster, CHEAP) == replicas(cluster, DEAR) == 1
        # The read of /scale before the write is refused, so no write is sent at all.
        assert 'cannot get resource "deployments/scale"' in process.log()
        assert scale_writes(cluster, CHEAP) == scale_writes(cluster, DEAR) == []
        assert process.returncode is None
