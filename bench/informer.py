"""How much memory the controller's pod and ConfigMap caches hold in a busy cluster.

Setup: the in-repo fake kube-apiserver, in a child process, holds 10,000 pods and 5,000
ConfigMaps. The pods are shaped like a real cluster's (containers with env, probes, resources and
volume mounts; the service-account projected volume; managedFields; status with four conditions
and container statuses): 9,800 application pods in 49 tenant namespaces, 196 vLLM pods of 98
VariantAutoscalings in namespace `llm` (built with the end-to-end tests' builders) and 4 EPP
(gateway) pods in namespace `gateway`. The ConfigMaps are mostly unlabelled (every namespace's
`kube-root-ca.crt`, application configuration), plus the three scaling ConfigMaps labelled
`app.kubernetes.io/name=llmscaler` in the controller namespace, one labelled in `llm`, and one
labelled map of another name.

Measured, for each configuration, with the VariantAutoscaling cache running as well (the pod
cache follows it): the caches are built with a fresh API client, run until they have synced, and
measured by

- deep size: the bytes of every object the pod and ConfigMap caches hold (sys.getsizeof over the
  dicts, lists and strings reachable from the stored objects, each counted once);
- retained: tracemalloc's traced memory after the sync (and a garbage collection) minus before it,
  i.e. everything the caches and the client keep;
- peak: tracemalloc's peak during the list and sync (the whole list response and its decoded
  objects are alive at once, before the transform slims them).

Configurations: the old one (every pod and every ConfigMap of the cluster, as the API sent them);
slim pods of the whole cluster (`--pod-namespace-limit 0`, also what a cluster above the limit
gets) with the labelled ConfigMaps; and the default (pods of the namespaces holding VAs plus the
EPP pods, slim; the labelled scaling ConfigMaps). Prints one row per configuration and the ratio
of the old figures to the default's.
"""

from __future__ import annotations

import asyncio
import gc
import json
import sys
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lightkube.resources.core_v1 import ConfigMap, Pod

from fakeproc import fake_api
from llmscaler.clock import LoopClock
from llmscaler.controller.cluster.caches import build_caches
from llmscaler.controller.cluster.configwatch import SCALING_CONFIGMAPS
from llmscaler.devcluster import objects as objects_
from llmscaler.kube.client import make_client
from llmscaler.kube.informer import Cache, Informer
from llmscaler.sim.hardware import presets

CONTROLLER_NS = 'llmscaler-system'
LLM_NS = 'llm'
TENANTS = 49
APP_PODS_PER_TENANT = 200
VARIANTS = 98
EPP_PODS = 4
CONFIGMAPS = 5000
LABEL = 'app.kubernetes.io/name'
LABELS = (f'{LABEL}=workload-variant-autoscaler', f'{LABEL}=llmscaler')


def _managed_fields(manager: str) -> list[dict[str, Any]]:
    return [
        {
            'manager': manager,
            'operation': 'Update',
            'apiVersion': 'v1',
            'time': '2025-06-01T10:00:00Z',
            'fieldsType': 'FieldsV1',
            'fieldsV1': {
                'f:metadata': {'f:labels': {'.': {}, 'f:app': {}}, 'f:ownerReferences': {}},
                'f:spec': {'f:containers': {'k:{"name":"main"}': {'.': {}, 'f:env': {}}}},
            },
        },
        {
            'manager': 'kubelet',
            'operation': 'Update',
            'apiVersion': 'v1',
            'time': '2025-06-01T10:00:05Z',
            'fieldsType': 'FieldsV1',
            'subresource': 'status',
            'fieldsV1': {'f:status': {'f:conditions': {}, 'f:containerStatuses': {}}},
        },
    ]


def _realistic(pod: dict[str, Any], *, ip: str) -> dict[str, Any]:
    """What the API server and the kubelet add to a pod: the bulk of a real pod object."""
    meta, spec = pod['metadata'], pod['spec']
    name = meta['name']
    meta.update(
        uid=f'6f1c2b9e-{abs(hash(name)) % 10**12:012d}',
        creationTimestamp='2025-06-01T10:00:00Z',
        generateName=name.rsplit('-', 1)[0] + '-',
        managedFields=_managed_fields('kube-controller-manager'),
    )
    for container in spec['containers']:
        container.setdefault('env', []).extend(
            {'name': f'SETTING_{i}', 'value': f'value-of-setting-{i}-for-{name[:20]}'}
            for i in range(12)
        )
        container.update(
            imagePullPolicy='IfNotPresent',
            terminationMessagePath='/dev/termination-log',
            terminationMessagePolicy='File',
            livenessProbe={'httpGet': {'path': '/health', 'port': 8000}, 'periodSeconds': 10},
            readinessProbe={'httpGet': {'path': '/ready', 'port': 8000}, 'periodSeconds': 5},
            volumeMounts=[
                {'name': 'config', 'mountPath': '/etc/app'},
                {
                    'name': 'kube-api-access-x7k2p',
                    'mountPath': '/var/run/secrets/kubernetes.io/serviceaccount',
                    'readOnly': True,
                },
            ],
        )
        container.setdefault('resources', {'requests': {'cpu': '500m', 'memory': '1Gi'}})
    spec.update(
        restartPolicy='Always',
        terminationGracePeriodSeconds=30,
        dnsPolicy='ClusterFirst',
        serviceAccountName='default',
        schedulerName='default-scheduler',
        tolerations=[
            {'key': k, 'operator': 'Exists', 'effect': 'NoExecute', 'tolerationSeconds': 300}
            for k in ('node.kubernetes.io/not-ready', 'node.kubernetes.io/unreachable')
        ],
        volumes=[
            {'name': 'config', 'configMap': {'name': f'{name[:30]}-config', 'defaultMode': 420}},
            {
                'name': 'kube-api-access-x7k2p',
                'projected': {
                    'defaultMode': 420,
                    'sources': [
                        {'serviceAccountToken': {'expirationSeconds': 3607, 'path': 'token'}},
                        {
                            'configMap': {
                                'name': 'kube-root-ca.crt',
                                'items': [{'key': 'ca.crt', 'path': 'ca.crt'}],
                            }
                        },
                        {
                            'downwardAPI': {
                                'items': [
                                    {
                                        'path': 'namespace',
                                        'fieldRef': {
                                            'apiVersion': 'v1',
                                            'fieldPath': 'metadata.namespace',
                                        },
                                    }
                                ]
                            }
                        },
                    ],
                },
            },
        ],
    )
    status = objects_.pod_status(ready=True)
    status.update(
        podIP=ip,
        podIPs=[{'ip': ip}],
        hostIP='10.0.0.7',
        startTime='2025-06-01T10:00:01Z',
        qosClass='Burstable',
        containerStatuses=[
            {
                'name': c['name'],
                'image': c['image'],
                'imageID': f'docker.io/{c["image"]}@sha256:{"ab" * 32}',
                'containerID': f'containerd://{"cd" * 32}',
                'ready': True,
                'started': True,
                'restartCount': 0,
                'state': {'running': {'startedAt': '2025-06-01T10:00:03Z'}},
            }
            for c in spec['containers']
        ],
    )
    for condition in status['conditions']:
        condition['lastTransitionTime'] = '2025-06-01T10:00:04Z'
    pod['status'] = status
    return pod


def _app_pod(namespace: str, index: int) -> dict[str, Any]:
    app = f'service-{index % 20:02d}'
    owner = f'{app}-5d8f7c9b4'
    return {
        'apiVersion': 'v1',
        'kind': 'Pod',
        'metadata': {
            'name': f'{owner}-{index:05d}',
            'namespace': namespace,
            'labels': {'app': app, 'pod-template-hash': '5d8f7c9b4', 'team': namespace},
            'annotations': {'kubectl.kubernetes.io/restartedAt': '2025-06-01T09:59:00Z'},
            'ownerReferences': [
                {
                    'apiVersion': 'apps/v1',
                    'kind': 'ReplicaSet',
                    'name': owner,
                    'uid': '1b2c3d4e-0000-4000-8000-000000000001',
                    'controller': True,
                    'blockOwnerDeletion': True,
                }
            ],
        },
        'spec': {
            'nodeName': f'node-{index % 40:02d}',
            'containers': [
                {
                    'name': 'main',
                    'image': f'registry.example.com/{namespace}/{app}:1.4.2',
                    'args': ['--config', '/etc/app/config.yaml', '--port', '8000'],
                    'ports': [{'name': 'http', 'containerPort': 8000, 'protocol': 'TCP'}],
                }
            ],
        },
    }


def _pods() -> Iterator[dict[str, Any]]:
    for t in range(TENANTS):
        for i in range(APP_PODS_PER_TENANT):
            yield _realistic(_app_pod(f'tenant-{t:02d}', i), ip=f'10.{t}.{i // 250}.{i % 250}')
    spec = presets.preset(name='llama-3.1-8b-h100')
    for v in range(VARIANTS):
        name = f'model-{v:03d}-h100'
        deploy = objects_.deployment(
            name=name,
            namespace=LLM_NS,
            model_id=f'model-{v:03d}',
            spec=spec,
            replicas=2,
            accelerator=spec.accelerator,
        )
        for slot in range(2):
            pod = objects_.replica_pod(
                deploy=deploy, pod_hash='abc12', replica_set_uid='u', slot=slot, port=8000
            )
            yield _realistic(pod, ip=f'10.200.{v}.{slot}')
    for e in range(EPP_PODS):
        pod = objects_.epp_pod(namespace='gateway', model_id=f'model-{e:03d}', port=9090)
        yield _realistic(pod, ip=f'10.201.0.{e}')


def _variants() -> Iterator[dict[str, Any]]:
    for v in range(VARIANTS):
        name = f'model-{v:03d}-h100'
        yield objects_.variant_autoscaling(
            name=name,
            namespace=LLM_NS,
            model_id=f'model-{v:03d}',
            target=name,
            cost=10.0,
            min_replicas=1,
            max_replicas=4,
        )


def _configmap(name: str, namespace: str, labels: dict[str, str], size: int) -> dict[str, Any]:
    meta: dict[str, Any] = {'name': name, 'namespace': namespace}
    if labels:
        meta['labels'] = labels
    body = ''.join(f'key-{i}: value-{i}-{name}\n' for i in range(size // 24))
    return {'apiVersion': 'v1', 'kind': 'ConfigMap', 'metadata': meta, 'data': {'data': body}}


def _configmaps() -> list[dict[str, Any]]:
    labelled = {LABEL: 'llmscaler'}
    found = [_configmap(name, CONTROLLER_NS, labelled, 600) for name in sorted(SCALING_CONFIGMAPS)]
    found.append(_configmap(sorted(SCALING_CONFIGMAPS)[0], LLM_NS, labelled, 600))
    found.append(_configmap('llmscaler-settings', CONTROLLER_NS, labelled, 600))
    namespaces = [f'tenant-{t:02d}' for t in range(TENANTS)] + [LLM_NS, 'gateway']
    for namespace in namespaces:
        found.append(_configmap('kube-root-ca.crt', namespace, {}, 1300))
    index = 0
    while len(found) < CONFIGMAPS:
        namespace = namespaces[index % len(namespaces)]
        found.append(_configmap(f'app-config-{index:04d}', namespace, {'app': 'x'}, 1200))
        index += 1
    return found


def _objects() -> Iterator[dict[str, Any]]:
    """The cluster, built in the fake API's process so the measuring process holds none of it."""
    yield from _pods()
    yield from _configmaps()
    yield from _variants()


def deep_size(objects: Any) -> int:
    """Bytes of the containers and scalars reachable from `objects`, each counted once."""
    seen: set[int] = set()
    total = 0
    stack = [objects]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        total += sys.getsizeof(node)
        if isinstance(node, dict):
            stack.extend(node.keys())
            stack.extend(node.values())
        elif isinstance(node, (list, tuple)):
            stack.extend(node)
    return total


async def _measure(url: str, *, old: bool, namespace_limit: int = 20) -> dict[str, float]:
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    started = time.perf_counter()
    client = make_client(server=url, timeout=120.0)
    caches = build_caches(
        client=client,
        clock=LoopClock(),
        namespace=CONTROLLER_NS,
        watch_namespace='',
        configmap_labels=LABELS,
        pod_namespace_limit=namespace_limit,
    )
    if old:
        clock = LoopClock()
        pods: Cache = Informer(client=client, resource=Pod, clock=clock, name='pods')
        configmaps = [Informer(client=client, resource=ConfigMap, clock=clock, name='configmaps')]
    else:
        pods, configmaps = caches.pods, list(caches.configmaps)
    running: list[Cache] = [caches.vas, pods, *configmaps]
    tasks = [asyncio.create_task(cache.run()) for cache in running]
    for cache in running:
        await cache.synced.wait()
    seconds = time.perf_counter() - started
    gc.collect()
    current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    cached = [*pods.items(), *(o for c in configmaps for o in c.items())]
    figures = {
        'pods': float(len(pods)),
        'configmaps': float(sum(len(c) for c in configmaps)),
        'deep': float(deep_size(cached)),
        'retained': float(current - before),
        'peak': float(peak - before),
        'seconds': seconds,
    }
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await client.aclose()
    return figures


def _mib(value: float) -> str:
    return f'{value / 2**20:,.1f} MiB'


async def main() -> None:
    pods = TENANTS * APP_PODS_PER_TENANT + 2 * VARIANTS + EPP_PODS
    pod_bytes = sum(len(json.dumps(pod)) for pod in _pods())  # freed before anything is measured
    with fake_api(_objects) as url:
        rows = [
            ('old: every pod and ConfigMap, whole', await _measure(url, old=True)),
            ('slim pods of the whole cluster', await _measure(url, old=False, namespace_limit=0)),
            ('default: VA namespaces + EPP, slim', await _measure(url, old=False)),
        ]
    print(
        f'cluster: {pods:,} pods (mean {pod_bytes / pods / 1024:.1f} KiB of JSON), '
        f'{CONFIGMAPS:,} ConfigMaps, {VARIANTS} VAs in namespace {LLM_NS}'
    )
    print(
        f'{"configuration":<38} {"pods":>6} {"CMs":>5} {"deep size":>12} {"retained":>12} '
        f'{"peak":>12} {"sync":>7}'
    )
    for label, f in rows:
        print(
            f'{label:<38} {f["pods"]:>6,.0f} {f["configmaps"]:>5,.0f} {_mib(f["deep"]):>12} '
            f'{_mib(f["retained"]):>12} {_mib(f["peak"]):>12} {f["seconds"]:>6.1f}s'
        )
    old, new = rows[0][1], rows[2][1]
    print(
        f'old / default: deep size {old["deep"] / new["deep"]:,.0f}x, retained '
        f'{old["retained"] / new["retained"]:,.0f}x, peak {old["peak"] / new["peak"]:,.0f}x'
    )


if __name__ == '__main__':
    asyncio.run(main())
