"""The controller's pod cache: slim pods, and pods watched only where VAs need them.

Worked example: VAs live in namespace `llm`; pods live in `llm` (inference), `batch` (someone
else's) and `gateway` (an EPP pod labelled `llm-d.ai/epp=true`). By default the cache lists
`/api/v1/namespaces/llm/pods` and `/api/v1/pods?labelSelector=llm-d.ai/epp=true` and holds
`gateway/epp-0` and `llm/d1`, never `batch/job-0`. A VA created in `batch` starts a third
informer for `batch`; deleting it stops that informer and drops `batch`'s pods.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lightkube import AsyncClient

from llmscaler.clock import ManualClock
from llmscaler.controller.cluster.caches import Caches, build_caches
from llmscaler.controller.cluster.podcache import PodCache, slim_pod
from llmscaler.controller.cluster.pods import epp_targets, pod_info, scrape_targets
from llmscaler.devcluster.fakeapi.server import FakeAPI
from llmscaler.kube.client import make_client
from tests.support.tasks import cancel
from tests.support.waiting import eventually
from tests.support.world_objects import (
    HASH,
    LWS_NAME,
    VA_DEPLOY,
    VA_LWS,
    VA_STS,
    deployment_pod,
    lws_pod,
    pod,
    va,
    with_json_at,
    world,
)

CTRL = 'wva-system'
EPP = {'llm-d.ai/epp': 'true'}
ALL_PODS = '/api/v1/pods'


def full(obj: dict[str, Any]) -> dict[str, Any]:
    """`obj` with what a real pod also carries and the controller never reads."""
    big = copy.deepcopy(obj)
    meta = big['metadata']
    meta.update(uid='u-1', generateName='x-', creationTimestamp='2025-01-01T00:00:00Z')
    meta.setdefault('annotations', {})['kubectl.kubernetes.io/restartedAt'] = '2025-01-01'
    meta['managedFields'] = [{'manager': 'kubelet', 'fieldsV1': {'f:status': {}}}]
    for ref in meta.get('ownerReferences', []):
        ref['blockOwnerDeletion'] = True
    big['spec'] = {
        'containers': [
            {
                'name': 'vllm',
                'image': 'vllm/vllm-openai:v0.10.0',
                'env': [{'name': f'E{i}', 'value': 'x' * 40} for i in range(10)],
            }
        ],
        'volumes': [{'name': 'cache', 'emptyDir': {}}],
    }
    running = {
        'name': 'vllm',
        'image': 'vllm/vllm-openai:v0.10.0',
        'imageID': 'sha256:0',
        'ready': True,
        'restartCount': 0,
    }
    big['status'].update(hostIP='10.9.9.9', containerStatuses=[running])
    return big


def test_slim_pod_keeps_exactly_the_fields_read() -> None:
    obj = full(
        deployment_pod(
            'd1',
            annotations={'prometheus.io/port': '8080', 'prometheus.io/path': '/m'},
            deleting=True,
        )
    )
    obj['metadata']['resourceVersion'] = '42'
    assert slim_pod(obj) == {
        'apiVersion': 'v1',
        'kind': 'Pod',
        'metadata': {
            'namespace': 'llm',
            'name': 'd1',
            'resourceVersion': '42',
            'labels': {'app': 'llama-8b', 'pod-template-hash': HASH},
            'deletionTimestamp': '2025-01-01T00:00:00Z',
            'annotations': {'prometheus.io/port': '8080', 'prometheus.io/path': '/m'},
            'ownerReferences': [
                {'kind': 'ReplicaSet', 'name': f'llama-8b-a100-{HASH}', 'controller': True}
            ],
        },
        'status': {
            'phase': 'Running',
            'podIP': '10.1.2.3',
            'conditions': [{'type': 'Ready', 'status': 'True'}],
        },
    }


LABEL_KEYS = ('app', 'pod-template-hash', LWS_NAME, 'llm-d.ai/variant', 'llm-d.ai/epp', 'x')
LABEL_VALUES = ('llama-8b', HASH, 'vllm-405b', 'llama-a100', 'true', '', 'nope')
BASES = (
    deployment_pod('d1'),
    lws_pod('vllm-405b-0', worker_index='0'),
    lws_pod('vllm-405b-0-1', worker_index='1'),
    pod('q-0', 'pd', owners=[('StatefulSet', 'qwen-decode', True)]),
    pod('epp-0', 'gateway', labels=EPP),
)


@st.composite
def pods(draw: st.DrawFn) -> dict[str, Any]:
    """A full pod of a known shape with the fields the controller reads varied, some broken."""
    obj = full(draw(st.sampled_from(BASES)))
    meta, status = obj['metadata'], obj['status']
    meta['name'] = draw(st.sampled_from([meta['name'], 'd2', 'q-0']))
    if draw(st.booleans()):
        meta['labels'] = draw(
            st.dictionaries(st.sampled_from(LABEL_KEYS), st.sampled_from(LABEL_VALUES))
        )
    meta['annotations'].update(
        draw(
            st.dictionaries(
                st.sampled_from(['prometheus.io/port', 'prometheus.io/path', 'other']),
                st.sampled_from(['8080', '/vllm', 'x', '', 9000]),
            )
        )
    )
    if draw(st.booleans()):
        meta['deletionTimestamp'] = draw(st.sampled_from([None, '2025-01-01T00:00:00Z']))
    # Owners in any order, some of them not the controller: the controller is read first.
    extra = st.fixed_dictionaries(
        {
            'apiVersion': st.just('apps/v1'),
            'kind': st.sampled_from(['ReplicaSet', 'StatefulSet', 'Job']),
            'name': st.sampled_from([f'llama-8b-a100-{HASH}', 'qwen-decode', 'vllm-405b', 'x']),
            'uid': st.just('u-2'),
        },
        optional={'controller': st.sampled_from([True, False, None, 'true'])},
    )
    owners = meta.get('ownerReferences', []) + draw(st.lists(extra, max_size=2))
    meta['ownerReferences'] = draw(st.permutations(owners))
    status['phase'] = draw(st.sampled_from(['Running', 'Pending', 'Failed', 'Succeeded', 1]))
    status['podIP'] = draw(st.sampled_from(['10.0.0.1', 'fd00::1', 'not-an-ip', None]))
    status['conditions'] = draw(
        st.lists(
            st.fixed_dictionaries(
                {
                    'type': st.sampled_from(['Ready', 'PodScheduled', 'ContainersReady']),
                    'status': st.sampled_from(['True', 'False', True]),
                },
                optional={'reason': st.just('x')},
            ),
            max_size=3,
        )
    )
    # Any of the fields read replaced by arbitrary JSON.
    read = [
        ('metadata',),
        ('metadata', 'labels'),
        ('metadata', 'ownerReferences'),
        ('metadata', 'annotations'),
        ('metadata', 'namespace'),
        ('status',),
        ('status', 'conditions'),
        ('status', 'podIP'),
    ]
    return draw(with_json_at(obj, paths=read, at_most=2))


@settings(max_examples=300, deadline=None)
@given(objs=st.lists(pods(), max_size=5))
def test_a_slim_pod_reads_as_the_full_pod(objs: Sequence[dict[str, Any]]) -> None:
    slim = [slim_pod(obj) for obj in objs]
    assert [pod_info(o) for o in slim] == [pod_info(o) for o in objs]
    w = world(VA_DEPLOY, VA_STS, VA_LWS, pods=objs)
    assert world(VA_DEPLOY, VA_STS, VA_LWS, pods=slim) == w
    assert scrape_targets(variants=w.variants, targets=w.targets, pods=slim) == scrape_targets(
        variants=w.variants, targets=w.targets, pods=objs
    )
    for selector in (EPP, {'app': 'llama-8b'}):
        assert epp_targets(pods=slim, selector=selector) == epp_targets(
            pods=objs, selector=selector
        )


# --- against the fake API ----------------------------------------------------------------------


class Cluster:
    def __init__(self, api: FakeAPI, client: AsyncClient) -> None:
        self.api, self.client = api, client
        self.clock = ManualClock()
        self.tasks: list[asyncio.Task[None]] = []

    def caches(self, **kwargs: Any) -> Caches:
        params: dict[str, Any] = {
            'client': self.client,
            'clock': self.clock,
            'namespace': CTRL,
            'watch_namespace': '',
            'configmap_labels': (),
        }
        return build_caches(**(params | kwargs))

    async def start(self, caches: Caches) -> PodCache:
        self.tasks += [asyncio.create_task(c.run()) for c in caches.all()]
        await eventually(caches.synced, 'the caches to sync')
        await self.watching(caches)
        assert isinstance(caches.pods, PodCache)
        return caches.pods

    async def watching(self, caches: Caches) -> None:
        """Every informer of the moment has listed and holds its watch."""
        await eventually(
            lambda: (
                all(i.synced.is_set() for i in caches.informers())
                and len(self.api.store.watchers) == len(caches.informers())
            ),
            'every watch open',
        )

    def pod_requests(self, *, watch: bool) -> list[tuple[str, str]]:
        """(path, labelSelector) of every pod list (or watch) request, in order."""
        return [
            (r.path, r.query.get('labelSelector', ''))
            for r in self.api.requests
            if r.method == 'GET'
            and r.path.endswith('/pods')
            and (r.query.get('watch') == 'true') == watch
        ]


@pytest.fixture
async def cluster(api: FakeAPI, client: AsyncClient) -> AsyncIterator[Cluster]:
    made = Cluster(api, client)
    try:
        yield made
    finally:
        await cancel(made.tasks)


def keys(cache: PodCache) -> list[str]:
    return [f'{o["metadata"]["namespace"]}/{o["metadata"]["name"]}' for o in cache.items()]


def seed_world(api: FakeAPI) -> None:
    api.seed(VA_DEPLOY)  # namespace llm
    api.seed(full(deployment_pod('d1')))
    api.seed(full(pod('job-0', 'batch')))
    api.seed(full(pod('epp-0', 'gateway', labels=EPP)))
    api.seed(full(pod('epp-1', 'llm', labels=EPP)))  # an EPP pod in a VA's namespace


async def test_by_default_only_va_namespaces_and_epp_pods_are_cached(cluster: Cluster) -> None:
    seed_world(cluster.api)
    caches = cluster.caches()
    pods = await cluster.start(caches)
    assert keys(pods) == ['gateway/epp-0', 'llm/d1', 'llm/epp-1']  # epp-1 once
    assert len(pods) == 3
    assert [i.name for i in pods.informers()] == ['pods/llm', 'pods-epp']
    assert sorted(cluster.pod_requests(watch=False)) == [
        ('/api/v1/namespaces/llm/pods', ''),
        (ALL_PODS, 'llm-d.ai/epp=true'),
    ]
    assert sorted(cluster.pod_requests(watch=True)) == sorted(cluster.pod_requests(watch=False))
    cached = pods.get(namespace='llm', name='d1')
    assert cached is not None
    assert 'spec' not in cached
    assert 'managedFields' not in cached['metadata']
    assert pods.get(namespace='batch', name='job-0') is None
    assert pods.pending() == ()
    assert pods.last_error is None


async def test_a_namespace_gaining_a_va_gets_its_pods_watched(cluster: Cluster) -> None:
    api = cluster.api
    seed_world(api)
    caches = cluster.caches()
    pods = await cluster.start(caches)
    before = pods.version
    batch_va = va('batch-va', 'batch', kind='Deployment', target='job')
    api.seed(batch_va)
    await eventually(lambda: 'batch/job-0' in keys(pods), "batch's pods")
    assert pods.version > before
    assert [i.name for i in pods.informers()] == ['pods/batch', 'pods/llm', 'pods-epp']
    assert caches.synced()
    await cluster.watching(caches)
    assert ('/api/v1/namespaces/batch/pods', '') in cluster.pod_requests(watch=True)

    # The pods of the new namespace are followed by its own watch.
    api.seed(full(pod('job-1', 'batch')))
    await eventually(lambda: 'batch/job-1' in keys(pods), 'the new pod')

    # Its last VA gone, the namespace's informer stops and its pods leave the cache.
    before = pods.version
    api.store.delete(api.store_resource(batch_va), 'batch', 'batch-va')
    await eventually(lambda: [i.name for i in pods.informers()] == ['pods/llm', 'pods-epp'], 'stop')
    assert keys(pods) == ['gateway/epp-0', 'llm/d1', 'llm/epp-1']
    assert pods.version > before
    await cluster.watching(caches)


async def test_above_the_namespace_limit_one_watch_takes_every_pod(cluster: Cluster) -> None:
    api = cluster.api
    seed_world(api)
    api.seed(VA_STS)  # namespace pd: two namespaces, above a limit of 1
    caches = cluster.caches(pod_namespace_limit=1)
    pods = await cluster.start(caches)
    assert [i.name for i in pods.informers()] == ['pods', 'pods-epp']
    assert keys(pods) == ['batch/job-0', 'gateway/epp-0', 'llm/d1', 'llm/epp-1']
    assert (ALL_PODS, '') in cluster.pod_requests(watch=False)
    cached = pods.get(namespace='batch', name='job-0')
    assert cached is not None
    assert 'spec' not in cached  # slim all the same

    # Back under the limit: per namespace again, once the new informer has listed.
    api.store.delete(api.store_resource(VA_STS), 'pd', 'qwen-h100')
    await eventually(lambda: [i.name for i in pods.informers()] == ['pods/llm', 'pods-epp'], 'llm')
    assert keys(pods) == ['gateway/epp-0', 'llm/d1', 'llm/epp-1']


async def test_a_limit_of_zero_always_watches_every_pod(cluster: Cluster) -> None:
    seed_world(cluster.api)
    pods = await cluster.start(cluster.caches(pod_namespace_limit=0))
    assert [i.name for i in pods.informers()] == ['pods', 'pods-epp']
    assert 'batch/job-0' in keys(pods)


async def test_a_pod_selector_is_asked_of_the_api(cluster: Cluster) -> None:
    seed_world(cluster.api)
    pods = await cluster.start(cluster.caches(pod_selector='app=llama-8b'))
    assert [i.name for i in pods.informers()] == ['pods', 'pods-epp']
    assert sorted(cluster.pod_requests(watch=False)) == [
        (ALL_PODS, 'app=llama-8b'),
        (ALL_PODS, 'llm-d.ai/epp=true'),
    ]
    assert keys(pods) == ['gateway/epp-0', 'llm/d1', 'llm/epp-1']


async def test_a_pod_selector_that_implies_the_epp_one_needs_no_second_watch(
    cluster: Cluster,
) -> None:
    seed_world(cluster.api)
    pods = await cluster.start(cluster.caches(pod_selector='llm-d.ai/epp=true'))
    assert [i.name for i in pods.informers()] == ['pods']
    assert keys(pods) == ['gateway/epp-0', 'llm/epp-1']


async def test_a_single_watched_namespace_takes_its_pods_only(cluster: Cluster) -> None:
    seed_world(cluster.api)
    pods = await cluster.start(cluster.caches(watch_namespace='llm'))
    assert [i.name for i in pods.informers()] == ['pods']
    assert cluster.pod_requests(watch=False) == [('/api/v1/namespaces/llm/pods', '')]
    assert keys(pods) == ['llm/d1', 'llm/epp-1']


async def test_no_epp_selector_no_epp_watch(cluster: Cluster) -> None:
    seed_world(cluster.api)
    pods = await cluster.start(cluster.caches(epp_selector=''))
    assert [i.name for i in pods.informers()] == ['pods/llm']
    assert keys(pods) == ['llm/d1', 'llm/epp-1']


async def test_synced_waits_for_the_va_namespaces_pods(cluster: Cluster) -> None:
    api = cluster.api
    seed_world(api)
    api.fail(status=500, method='GET', path_prefix='/api/v1/namespaces/llm/pods', times=1)
    caches = cluster.caches()
    cluster.tasks += [asyncio.create_task(c.run()) for c in caches.all()]
    others = [c for c in caches.required() if c is not caches.pods]
    await eventually(lambda: all(c.synced.is_set() for c in others), 'the other caches')
    assert isinstance(caches.pods, PodCache)
    pods = caches.pods
    await eventually(lambda: pods.pending() == ('pods/llm',), 'the llm informer to fail')
    await eventually(lambda: cluster.clock.sleepers == 1, 'its backoff')
    assert not caches.synced()
    assert (pods.last_error or '').startswith('pods/llm: ')
    assert keys(pods) == ['gateway/epp-0', 'llm/epp-1']  # what the EPP watch has so far
    await cluster.clock.advance(1.0)
    await eventually(caches.synced, 'the pods of llm')
    assert keys(pods) == ['gateway/epp-0', 'llm/d1', 'llm/epp-1']
    assert pods.last_error is None


def test_a_negative_namespace_limit_is_refused() -> None:
    client = make_client(server='http://127.0.0.1:9')
    cluster = Cluster.__new__(Cluster)
    cluster.client, cluster.clock = client, ManualClock()
    with pytest.raises(ValueError, match='namespace_limit'):
        cluster.caches(pod_namespace_limit=-1)
    asyncio.run(client.aclose())
