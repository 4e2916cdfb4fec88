"""A harness for the controller's tests against the fake apiserver: the objects of the usual
setup, a metric source in memory, and helpers that read what reached the API.

The usual setup: namespace `ns`, model `m1`; VA `a` (cost 5) scales Deployment `a`, VA `b`
(cost 20) scales Deployment `b`, one ready replica each, one Pod per replica owned through
ReplicaSet `<name>-7d9f` (the controller links it to its Deployment by `pod-template-hash`). The
metric source (`FakeSource`) reports, for every Pod of a Deployment named in `load`, the (KV
usage, queue length) given there, observed `now` (or `age` seconds before). The controller
namespace `ctl` holds the scaling ConfigMaps.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from llmscaler.clock import ManualClock
from llmscaler.collect.readings import ModelReading, ModelScope, PodReading, Reading, SourceError
from llmscaler.config.configmaps import SATURATION_CONFIGMAP
from llmscaler.controller.app import Controller
from llmscaler.controller.options.resolve import RunOptions, fatal_errors, resolve_options
from llmscaler.controller.va.cycle import CycleReport
from llmscaler.devcluster.fakeapi.server import FakeAPI
from llmscaler.domain.basics import Action
from tests.support.waiting import eventually

NS = 'ns'
CTL = 'ctl'
MODEL = 'm1'
HASH = '7d9f'
VA_API = 'llmd.ai/v1alpha1'
CONFIG_LABEL = {'app.kubernetes.io/name': 'workload-variant-autoscaler'}
SATURATED = (0.95, 10.0)
IDLE = (0.0, 0.0)
Obj = dict[str, Any]


# --- objects ----------------------------------------------------------------------------------


def deployment(name: str, replicas: int = 1) -> Obj:
    labels = {'app': name}
    return {
        'apiVersion': 'apps/v1',
        'kind': 'Deployment',
        'metadata': {'name': name, 'namespace': NS},
        'spec': {
            'replicas': replicas,
            'selector': {'matchLabels': labels},
            'template': {
                'metadata': {'labels': labels},
                'spec': {
                    'nodeSelector': {'nvidia.com/gpu.product': 'NVIDIA-L40S'},
                    'containers': [
                        {
                            'name': 'vllm',
                            'image': 'vllm/vllm-openai',
                            'args': ['--model', MODEL],
                            'resources': {'limits': {'nvidia.com/gpu': '1'}},
                        }
                    ],
                },
            },
        },
        'status': {'replicas': replicas, 'readyReplicas': replicas},
    }


def va(
    name: str,
    *,
    cost: str = '5',
    low: int = 1,
    high: int = 3,
    target: str | None = None,
    model: str = MODEL,
) -> Obj:
    return {
        'apiVersion': VA_API,
        'kind': 'VariantAutoscaling',
        'metadata': {'name': name, 'namespace': NS},
        'spec': {
            'modelID': model,
            'scaleTargetRef': {'kind': 'Deployment', 'name': target or name},
            'minReplicas': low,
            'maxReplicas': high,
            'variantCost': cost,
        },
    }


def pod(deploy: str, index: int) -> Obj:
    return {
        'apiVersion': 'v1',
        'kind': 'Pod',
        'metadata': {
            'name': f'{deploy}-{HASH}-{index}',
            'namespace': NS,
            'labels': {'app': deploy, 'pod-template-hash': HASH},
            'ownerReferences': [
                {
                    'apiVersion': 'apps/v1',
                    'kind': 'ReplicaSet',
                    'name': f'{deploy}-{HASH}',
                    'uid': f'uid-{deploy}',
                    'controller': True,
                }
            ],
        },
        'spec': {'containers': [{'name': 'vllm', 'image': 'vllm/vllm-openai'}]},
        'status': {
            'phase': 'Running',
            'podIP': f'10.0.{len(deploy)}.{index + 1}',
            'conditions': [{'type': 'Ready', 'status': 'True'}],
        },
    }


def configmap(name: str, data: Mapping[str, str], namespace: str = CTL) -> Obj:
    return {
        'apiVersion': 'v1',
        'kind': 'ConfigMap',
        'metadata': {'name': name, 'namespace': namespace, 'labels': dict(CONFIG_LABEL)},
        'data': dict(data),
    }


def seed_variant(api: FakeAPI, name: str, *, replicas: int = 1, **spec: Any) -> None:
    """A VA, its Deployment and one ready Pod per replica."""
    api.seed(deployment(name, replicas))
    api.seed(va(name, **spec))
    for index in range(replicas):
        api.seed(pod(name, index))


# --- GPU inventory ----------------------------------------------------------------------------

# Nodes with GPUs, other workloads' GPU pods, and the usual Pods bound to a node with a GPU each.


def node(
    name: str,
    *,
    gpus: object = '8',
    product: str | None = 'NVIDIA-L40S',
    ready: str | None = 'True',
    cordoned: bool = False,
) -> Obj:
    labels = {'nvidia.com/gpu.product': product} if product else {}
    status: Obj = {'allocatable': {'nvidia.com/gpu': gpus, 'cpu': '64'}}
    if ready is not None:
        status['conditions'] = [{'type': 'Ready', 'status': ready}]
    return {
        'apiVersion': 'v1',
        'kind': 'Node',
        'metadata': {'name': name, 'labels': labels},
        'spec': {'unschedulable': cordoned},
        'status': status,
    }


def gpu_pod(
    name: str, *, on: str, gpus: int = 1, namespace: str = 'other', phase: str = 'Running'
) -> Obj:
    return {
        'apiVersion': 'v1',
        'kind': 'Pod',
        'metadata': {'name': name, 'namespace': namespace, 'labels': {'app': 'batch'}},
        'spec': {
            'nodeName': on,
            'containers': [{'name': 'c', 'resources': {'limits': {'nvidia.com/gpu': str(gpus)}}}],
        },
        'status': {'phase': phase},
    }


def bound_pod(deploy: str, index: int, *, on: str) -> Obj:
    obj = copy.deepcopy(pod(deploy, index))
    obj['spec']['nodeName'] = on
    obj['spec']['containers'][0]['resources'] = {'limits': {'nvidia.com/gpu': '1'}}
    return obj


def seed_a_full_node(api: FakeAPI) -> None:
    """The limiter on, and one L40S node `n1` of 2 GPUs: VA `a`'s one replica holds one,
    another workload's pod (`other/batch-job`) the other, so no GPU is left for a scale-up."""
    api.seed(node('n1', gpus='2'))
    api.seed(gpu_pod('batch-job', on='n1', gpus=1))
    api.seed(deployment('a', 1))
    api.seed(va('a', cost='5'))
    api.seed(bound_pod('a', 0, on='n1'))
    api.seed(configmap(SATURATION_CONFIGMAP, {'default': 'enableLimiter: true\n'}))


# --- reading the fake back --------------------------------------------------------------------


def scale_path(name: str) -> str:
    return f'/apis/apps/v1/namespaces/{NS}/deployments/{name}/scale'


def scale_writes(api: FakeAPI, name: str | None = None) -> list[int]:
    """The replica counts PATCHed on `/scale` (of `name`, or of any Deployment), in order."""
    return [
        r.json()['spec']['replicas']
        for r in api.requests
        if r.method == 'PATCH'
        and r.path.endswith('/scale')
        and (name is None or r.path == scale_path(name))
    ]


def scale_requests(api: FakeAPI, method: str, name: str) -> int:
    return len(api.requests_to(method=method, path=scale_path(name)))


def main_writes(api: FakeAPI) -> list[tuple[str, str]]:
    """Writes to a Deployment itself (not its /scale): the controller must make none."""
    return [
        (r.method, r.path)
        for r in api.requests
        if r.method != 'GET'
        and r.path.startswith(f'/apis/apps/v1/namespaces/{NS}/deployments/')
        and not r.path.endswith('/scale')
    ]


def status_writes(api: FakeAPI, name: str) -> int:
    path = f'/apis/{VA_API}/namespaces/{NS}/variantautoscalings/{name}/status'
    return len(api.requests_to(method='PATCH', path=path))


def replicas(api: FakeAPI, name: str) -> int:
    obj = api.get(api_version='apps/v1', kind='Deployment', namespace=NS, name=name)
    return int(obj['spec']['replicas'])


def status(api: FakeAPI, name: str) -> Obj:
    obj = api.get(api_version=VA_API, kind='VariantAutoscaling', namespace=NS, name=name)
    found: Obj = obj.get('status') or {}
    return found


def conditions(api: FakeAPI, name: str) -> dict[str, tuple[str, str]]:
    """Condition type → (status, reason)."""
    return {c['type']: (c['status'], c['reason']) for c in status(api, name).get('conditions', [])}


def condition_message(api: FakeAPI, name: str, type: str) -> str:
    for c in status(api, name).get('conditions', []):
        if c['type'] == type:
            return str(c['message'])
    raise AssertionError(f'no condition {type} on {name}')


def events(api: FakeAPI, *, reason: str | None = None) -> list[Obj]:
    """events.k8s.io/v1 Events in the store, oldest first."""
    resource = api.store_resource({'apiVersion': 'events.k8s.io/v1', 'kind': 'Event'})
    found = [e for e in api.store.list(resource, None) if reason in (None, e.get('reason'))]
    return sorted(found, key=lambda e: int(e['metadata']['resourceVersion']))


def about(event: Obj) -> tuple[str, str, str]:
    """(type, kind/name regarded, reason) of an Event."""
    regarding = event['regarding']
    return event['type'], f'{regarding["kind"]}/{regarding["name"]}', event['reason']


def samples(page: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    found = {}
    for family in text_string_to_metric_families(page):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def update(api: FakeAPI, obj: Obj, *, part: str = 'main') -> None:
    """Write `obj` as another party would (no resourceVersion precondition)."""
    body = copy.deepcopy(obj)
    body['metadata'].pop('resourceVersion', None)
    meta = body['metadata']
    api.store.update(api.store_resource(body), meta['namespace'], meta['name'], body, part=part)


def settle(api: FakeAPI, name: str) -> None:
    """What the Deployment controller and kubelet would do: pods and status follow spec."""
    obj = api.get(api_version='apps/v1', kind='Deployment', namespace=NS, name=name)
    want = int(obj['spec']['replicas'])
    obj['status'] = {'replicas': want, 'readyReplicas': want}
    update(api, obj, part='status')
    resource = api.store_resource(pod(name, 0))
    for existing in api.store.list(resource, NS):
        meta = existing['metadata']
        if meta['labels'].get('app') == name and int(meta['name'].rsplit('-', 1)[1]) >= want:
            api.store.delete(resource, NS, meta['name'])
    present = {o['metadata']['name'] for o in api.store.list(resource, NS)}
    for index in range(want):
        if pod(name, index)['metadata']['name'] not in present:
            api.seed(pod(name, index))


def settle_to(server: FakeAPI, name: str, replicas: int) -> None:
    """Put the Deployment back at `replicas` (as if someone else had scaled it)."""
    obj = server.get(api_version='apps/v1', kind='Deployment', namespace=NS, name=name)
    obj['spec']['replicas'] = replicas
    obj['metadata'].pop('resourceVersion', None)
    server.store.update(server.store_resource(obj), NS, name, obj, part='main')


# --- the metric source ------------------------------------------------------------------------


@dataclass
class FakeSource:
    """An in-memory `MetricsSource`: readings for the Pods in the fake API's store."""

    api: FakeAPI
    load: dict[str, tuple[float, float]] = field(default_factory=dict)
    """Deployment name → (KV usage, queue length) of each of its Pods."""
    request_count: float | None = None
    age: float = 0.0
    """Seconds by which every sample predates `now`."""
    errors: tuple[SourceError, ...] = ()
    on_read: Callable[[], None] | None = None
    scopes: list[tuple[ModelScope, ...]] = field(default_factory=list)

    async def read(self, *, scope: tuple[ModelScope, ...], now: float) -> Reading:
        self.scopes.append(scope)
        if self.on_read is not None:
            self.on_read()
        if self.errors:
            return Reading(errors=self.errors)
        resource = self.api.store_resource(pod('x', 0))
        pods = []
        for obj in self.api.store.list(resource, None):
            meta = obj['metadata']
            figures = self.load.get(meta['labels'].get('app', ''))
            if figures is not None:
                pods.append(
                    PodReading(
                        namespace=meta['namespace'],
                        pod=meta['name'],
                        observed_at=now - self.age,
                        kv_usage=figures[0],
                        queue_length=figures[1],
                    )
                )
        models = tuple(
            ModelReading(
                model_id=s.model_id,
                namespace=s.namespace,
                observed_at=now,
                request_count=self.request_count,
            )
            for s in scope
        )
        return Reading(pods=tuple(pods), models=models)


# --- the harness ------------------------------------------------------------------------------


def run_options(api: FakeAPI, *extra: str) -> RunOptions:
    argv = [
        '--server', api.url,
        '--metrics-source', 'pods',
        '--metrics-bind-address', '127.0.0.1:0',
        '--health-probe-bind-address', '127.0.0.1:0',
        '--interval', '1s',
        '--namespace', CTL,
        '--identity', 'ctl-0',
        *extra,
    ]  # fmt: skip
    options, errors = resolve_options(argv=argv, env={})
    assert fatal_errors(errors=errors) == (), errors
    return options


@asynccontextmanager
async def informed(
    api: FakeAPI, source: FakeSource, *extra: str, clock: ManualClock | None = None
) -> AsyncIterator[Controller]:
    """A Controller whose informers run and have synced; the test drives its cycle."""
    controller = Controller(
        options=run_options(api, *extra), clock=clock or ManualClock(), source=source
    )
    tasks = [asyncio.create_task(i.run()) for i in controller.caches.all()]
    try:
        await eventually(controller.caches.synced, 'the caches to sync')
        yield controller
    finally:
        await stop(controller, tasks)


async def stop(controller: Controller, tasks: Sequence[asyncio.Task[Any]]) -> None:
    """Stop a controller a test started: its queue, its informers' tasks and what it holds
    open (the GPU inventory's informers, the scale-from-zero loop, the API client)."""
    controller.cycle.queue.shutdown()
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await controller.inventory.aclose()
    await controller.from_zero.aclose()
    await controller.client.aclose()


def cached_replicas(controller: Controller, name: str) -> int | None:
    obj = controller.caches.deployments.get(namespace=NS, name=name)
    return None if obj is None else int(obj['spec']['replicas'])


async def inventory_listed(controller: Controller, api: FakeAPI) -> None:
    """After the first cycle with the limiter on, which starts the GPU inventory and, knowing no
    GPUs yet, scales `a` up: wait for the inventory to list, put `a` back at one replica and
    wait until the controller's cache sees it."""
    await eventually(controller.inventory.synced, 'the inventory to sync')
    settle_to(api, 'a', 1)
    await eventually(lambda: cached_replicas(controller, 'a') == 1, 'the scale-down to be seen')


async def configmaps_changed(
    controller: Controller, change: Callable[[], object], what: str
) -> None:
    """Make `change` to the stored ConfigMaps, then wait until the controller's caches hold it
    (`what` names it in the time-out message)."""
    version = controller.caches.configmap_version()
    change()
    await eventually(lambda: controller.caches.configmap_version() != version, what)


async def caught_up(controller: Controller, api: FakeAPI) -> None:
    """Wait until the Deployment, VA and Pod caches hold exactly the store's objects."""

    def versions(objects: Any) -> dict[tuple[str, str], str]:
        return {
            (o['metadata']['namespace'], o['metadata']['name']): o['metadata']['resourceVersion']
            for o in objects
        }

    def same() -> bool:
        for informer, kind, api_version in (
            (controller.caches.deployments, 'Deployment', 'apps/v1'),
            (controller.caches.vas, 'VariantAutoscaling', VA_API),
            (controller.caches.pods, 'Pod', 'v1'),
        ):
            resource = api.store_resource({'apiVersion': api_version, 'kind': kind})
            if versions(api.store.list(resource, None)) != versions(informer.items()):
                return False
        return True

    await eventually(same, 'the informers to catch up')


def decision(report: CycleReport, name: str) -> tuple[int, int, Action]:
    for d in report.decisions:
        if d.variant == name:
            return d.current, d.target, d.action
    raise AssertionError(f'no decision for {name}')
