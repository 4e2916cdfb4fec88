"""The controller's informer caches and the memoised World, against the fake apiserver.

Worked example: the fake holds a Deployment `llm/llama-8b-a100`, a StatefulSet `pd/qwen-decode`
and a LeaderWorkerSet `llm/vllm-405b`, with one VariantAutoscaling per target. `targets()` keys
them ('Deployment', 'llm', 'llama-8b-a100') and so on. `WorldCache.variants()` hands back the very
same World object until a VA or a target changes, or a different Config is passed; a pod change
rebuilds only `full()`, a ConfigMap change rebuilds neither (the Config carries it).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from lightkube import AsyncClient
from lightkube.resources.apps_v1 import Deployment, StatefulSet
from lightkube.resources.core_v1 import ConfigMap, Pod
from lightkube.types import PatchType

from llmscaler.clock import ManualClock
from llmscaler.config.configmaps import (
    QUEUEING_CONFIGMAP,
    SATURATION_CONFIGMAP,
    SCALE_TO_ZERO_CONFIGMAP,
)
from llmscaler.config.resolved import Config, CoreSettings
from llmscaler.controller.cluster.caches import (
    Caches,
    WorldCache,
    build_caches,
    configmap_selectors,
)
from llmscaler.devcluster.fakeapi.server import FakeAPI
from llmscaler.kube.client import LeaderWorkerSetResource, VariantAutoscalingResource
from llmscaler.kube.informer import Informer
from tests.support.tasks import cancel
from tests.support.waiting import eventually
from tests.support.workloads import deployment, lws, stateful_set
from tests.support.world_objects import pod, va

CTRL = 'wva-system'
LABEL = ('app.kubernetes.io/name', 'llmscaler')
LWS_PATH = '/apis/leaderworkerset.x-k8s.io/v1/leaderworkersets'
PODS_PATH = '/api/v1/pods'
DEPLOYMENT_KEY = ('Deployment', 'llm', 'llama-8b-a100')
STATEFULSET_KEY = ('StatefulSet', 'pd', 'qwen-decode')
LWS_KEY = ('LeaderWorkerSet', 'llm', 'vllm-405b')
VAS = (
    va('llama-a100', 'llm', kind='Deployment', target='llama-8b-a100', maxReplicas=6),
    va('qwen-h100', 'pd', kind='StatefulSet', target='qwen-decode', model='Qwen/Qwen3-32B'),
    va('llama-405b', 'llm', kind='LeaderWorkerSet', target='vllm-405b', model='m-405b'),
)


def configmap(name: str, namespace: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {'name': name, 'namespace': namespace}
    if labels is not None:
        meta['labels'] = labels
    return {'apiVersion': 'v1', 'kind': 'ConfigMap', 'metadata': meta, 'data': {'k': name}}


class Harness:
    def __init__(self, api: FakeAPI, client: AsyncClient) -> None:
        self.api, self.client = api, client
        self.clock = ManualClock()
        self.tasks: list[asyncio.Task[None]] = []

    def informer(self, resource: type[Any], name: str, namespace: str | None = None) -> Informer:
        return Informer(
            client=self.client,
            resource=resource,
            clock=self.clock,
            namespace=namespace,
            name=name,
            retry_delay=1.0,
        )

    def caches(self, *, labels: tuple[tuple[str, str], ...] = (LABEL,)) -> Caches:
        return Caches(
            vas=self.informer(VariantAutoscalingResource, 'vas'),
            deployments=self.informer(Deployment, 'deployments'),
            statefulsets=self.informer(StatefulSet, 'statefulsets'),
            leaderworkersets=self.informer(LeaderWorkerSetResource, 'leaderworkersets'),
            pods=self.informer(Pod, 'pods'),
            # Every namespace's ConfigMaps, and the controller namespace's once more: the two
            # informers overlap on wva-system.
            configmaps=(
                self.informer(ConfigMap, 'configmaps'),
                self.informer(ConfigMap, 'configmaps-global', CTRL),
            ),
            configmap_labels=labels,
        )

    def start(self, caches: Caches) -> None:
        self.tasks += [asyncio.create_task(i.run()) for i in caches.all()]

    async def synced(self, caches: Caches) -> None:
        await eventually(caches.synced, 'the caches to sync')
        # Every informer that synced has its watch open before the test writes anything.
        watching = sum(1 for i in caches.all() if i.synced.is_set())
        await eventually(lambda: len(self.api.store.watchers) == watching, 'open watches')

    async def patch(self, resource: type[Any], name: str, namespace: str, body: Any) -> None:
        await self.client.patch(
            resource, name, body, namespace=namespace, patch_type=PatchType.MERGE
        )


@pytest.fixture
async def harness(api: FakeAPI, client: AsyncClient) -> AsyncIterator[Harness]:
    made = Harness(api, client)
    try:
        yield made
    finally:
        await cancel(made.tasks)


def seed_cluster(api: FakeAPI) -> None:
    for obj in (deployment(), stateful_set(), lws(), *VAS):
        api.seed(obj)


# --- targets and ConfigMaps --------------------------------------------------------------------


async def test_targets_are_keyed_by_kind_namespace_and_name(harness: Harness) -> None:
    seed_cluster(harness.api)
    caches = harness.caches()
    harness.start(caches)
    await harness.synced(caches)
    await eventually(caches.leaderworkersets.synced.is_set, 'the LWS informer')
    targets = caches.targets()
    assert sorted(targets) == sorted([DEPLOYMENT_KEY, STATEFULSET_KEY, LWS_KEY])
    assert targets[DEPLOYMENT_KEY]['spec']['replicas'] == 3
    assert targets[STATEFULSET_KEY]['metadata']['namespace'] == 'pd'
    assert targets[LWS_KEY]['status']['readyReplicas'] == 1
    # The values are the informers' own dicts (shared, not copied).
    assert targets[DEPLOYMENT_KEY] is caches.deployments.get(namespace='llm', name='llama-8b-a100')


async def test_configmap_items_filter_by_label_and_dedup_across_informers(
    harness: Harness,
) -> None:
    api = harness.api
    api.seed(configmap('wva-saturation', CTRL, {LABEL[0]: LABEL[1]}))
    api.seed(configmap('llm-overrides', 'llm', {LABEL[0]: LABEL[1], 'extra': 'x'}))
    api.seed(configmap('wva-legacy', CTRL, {LABEL[0]: 'workload-variant-autoscaler'}))
    api.seed(configmap('kube-root-ca.crt', 'llm'))
    api.seed(configmap('unlabelled', CTRL, {}))
    caches = harness.caches(labels=(LABEL, (LABEL[0], 'workload-variant-autoscaler')))
    harness.start(caches)
    await harness.synced(caches)
    everything, global_only = caches.configmaps
    assert len(everything) == 5
    assert len(global_only) == 3
    # wva-system's maps are in both informers, yet listed once; sorted by (namespace, name).
    assert [
        (o['metadata']['namespace'], o['metadata']['name']) for o in caches.configmap_items()
    ] == [
        ('llm', 'llm-overrides'),
        (CTRL, 'wva-legacy'),
        (CTRL, 'wva-saturation'),
    ]


async def test_configmap_items_without_labels_take_every_map_once(harness: Harness) -> None:
    harness.api.seed(configmap('a', CTRL, {LABEL[0]: LABEL[1]}))
    harness.api.seed(configmap('b', 'llm'))
    caches = harness.caches(labels=())
    harness.start(caches)
    await harness.synced(caches)
    before = caches.configmap_version()
    assert [o['metadata']['name'] for o in caches.configmap_items()] == ['b', 'a']
    await harness.patch(ConfigMap, 'a', CTRL, {'data': {'k': 'changed'}})
    # Both informers see the change (both watch wva-system); the llm one alone would not.
    await eventually(
        lambda: all(new > old for new, old in zip(caches.configmap_version(), before, strict=True)),
        'both ConfigMap informers to move',
    )
    [changed] = [o for o in caches.configmap_items() if o['metadata']['name'] == 'a']
    assert changed['data'] == {'k': 'changed'}


def test_configmap_selectors() -> None:
    name = 'app.kubernetes.io/name'
    assert configmap_selectors(()) == (None,)
    assert configmap_selectors([(name, 'llmscaler')]) == ({name: 'llmscaler'},)
    both = [(name, 'workload-variant-autoscaler'), (name, 'llmscaler'), (name, 'llmscaler')]
    assert configmap_selectors(both) == ({name: ('llmscaler', 'workload-variant-autoscaler')},)
    assert configmap_selectors([('b', '2'), ('a', '1')]) == ({'a': '1'}, {'b': '2'})


def configmap_requests(api: FakeAPI, *, watch: bool) -> list[tuple[str, str]]:
    return sorted(
        (r.path, r.query.get('labelSelector', ''))
        for r in api.requests
        if r.method == 'GET'
        and r.path.endswith('/configmaps')
        and (r.query.get('watch') == 'true') == watch
    )


def names_of(informer: Informer) -> list[str]:
    return [f'{o["metadata"]["namespace"]}/{o["metadata"]["name"]}' for o in informer.items()]


async def test_configmaps_are_asked_by_label_and_only_scaling_maps_are_kept(
    harness: Harness,
) -> None:
    api = harness.api
    wva = {LABEL[0]: 'workload-variant-autoscaler'}
    api.seed(configmap(SATURATION_CONFIGMAP, CTRL, {LABEL[0]: LABEL[1]}))
    api.seed(configmap(SCALE_TO_ZERO_CONFIGMAP, 'llm', wva))
    api.seed(configmap(QUEUEING_CONFIGMAP, 'llm'))  # a scaling name, unlabelled
    api.seed(configmap('llmscaler-settings', CTRL, {LABEL[0]: LABEL[1]}))  # labelled, not read
    for i in range(20):
        api.seed(configmap(f'app-{i}', f'team-{i % 3}'))
    caches = build_caches(
        client=harness.client,
        clock=harness.clock,
        namespace=CTRL,
        watch_namespace='',
        configmap_labels=(f'{LABEL[0]}=workload-variant-autoscaler', f'{LABEL[0]}={LABEL[1]}'),
    )
    harness.start(caches)
    await eventually(caches.synced, 'the caches to sync')
    selector = f'{LABEL[0]} in (llmscaler,workload-variant-autoscaler)'
    assert configmap_requests(api, watch=False) == [('/api/v1/configmaps', selector)]
    await eventually(
        lambda: configmap_requests(api, watch=True) == [('/api/v1/configmaps', selector)],
        'the watch',
    )
    (informer,) = caches.configmaps
    assert informer.name == 'configmaps'
    assert names_of(informer) == [
        f'llm/{SCALE_TO_ZERO_CONFIGMAP}',
        f'{CTRL}/{SATURATION_CONFIGMAP}',
    ]
    assert len(caches.configmap_items()) == 2

    # A map that loses its label leaves the cache (the server reports it deleted).
    await harness.patch(
        ConfigMap, SCALE_TO_ZERO_CONFIGMAP, 'llm', {'metadata': {'labels': {LABEL[0]: 'x'}}}
    )
    await eventually(lambda: len(informer) == 1, 'the unlabelled map to go')
    assert names_of(informer) == [f'{CTRL}/{SATURATION_CONFIGMAP}']


async def test_labels_of_different_keys_get_one_informer_each(harness: Harness) -> None:
    api = harness.api
    api.seed(configmap(SATURATION_CONFIGMAP, 'llm', {'a': '1'}))
    api.seed(configmap(SATURATION_CONFIGMAP, CTRL, {'b': '2'}))
    api.seed(configmap(QUEUEING_CONFIGMAP, 'llm', {'b': '2'}))
    api.seed(configmap(QUEUEING_CONFIGMAP, 'other', {'b': '2'}))  # not a watched namespace
    caches = build_caches(
        client=harness.client,
        clock=harness.clock,
        namespace=CTRL,
        watch_namespace='llm',
        configmap_labels=('b=2', 'a=1'),
    )
    assert [i.name for i in caches.configmaps] == [
        'configmaps[a=1]',
        'configmaps[b=2]',
        'configmaps-global[a=1]',
        'configmaps-global[b=2]',
    ]
    harness.start(caches)
    await eventually(caches.synced, 'the caches to sync')
    assert configmap_requests(api, watch=False) == [
        ('/api/v1/namespaces/llm/configmaps', 'a=1'),
        ('/api/v1/namespaces/llm/configmaps', 'b=2'),
        (f'/api/v1/namespaces/{CTRL}/configmaps', 'a=1'),
        (f'/api/v1/namespaces/{CTRL}/configmaps', 'b=2'),
    ]
    assert [
        (o['metadata']['namespace'], o['metadata']['name']) for o in caches.configmap_items()
    ] == [('llm', QUEUEING_CONFIGMAP), ('llm', SATURATION_CONFIGMAP), (CTRL, SATURATION_CONFIGMAP)]


# --- synced ------------------------------------------------------------------------------------


async def test_synced_does_not_wait_for_leaderworkersets(harness: Harness) -> None:
    api = harness.api
    seed_cluster(api)
    # The LWS CRD is absent: its list fails and the informer backs off on the (idle) clock.
    api.fail(status=404, method='GET', path_prefix=LWS_PATH, times=1)
    caches = harness.caches()
    assert not caches.synced()
    assert caches.leaderworkersets not in caches.required()
    assert len(caches.required()) == len(caches.all()) - 1
    harness.start(caches)
    await harness.synced(caches)
    assert not caches.leaderworkersets.synced.is_set()
    assert caches.leaderworkersets.last_error is not None
    assert LWS_KEY not in caches.targets()
    assert DEPLOYMENT_KEY in caches.targets()


async def test_synced_waits_for_every_required_informer(harness: Harness) -> None:
    harness.api.fail(status=500, method='GET', path_prefix=PODS_PATH, times=1)
    caches = harness.caches()
    harness.start(caches)
    others = [i for i in caches.required() if i is not caches.pods]
    await eventually(lambda: all(i.synced.is_set() for i in others), 'the other informers')
    await eventually(lambda: harness.clock.sleepers == 1, 'the pods informer to back off')
    assert not caches.synced()
    await harness.clock.advance(1.0)  # the pods informer's retry_delay
    await harness.synced(caches)
    assert caches.pods.synced.is_set()


# --- WorldCache --------------------------------------------------------------------------------


async def test_world_is_rebuilt_only_when_its_inputs_change(harness: Harness) -> None:
    api = harness.api
    seed_cluster(api)
    api.seed(configmap('wva-saturation', CTRL, {LABEL[0]: LABEL[1]}))
    caches = harness.caches()
    harness.start(caches)
    await harness.synced(caches)
    await eventually(caches.leaderworkersets.synced.is_set, 'the LWS informer')
    worlds = WorldCache(caches=caches)
    config = Config()

    first = worlds.variants(config=config)
    assert [e.key for e in first.entries] == ['llm/llama-405b', 'llm/llama-a100', 'pd/qwen-h100']
    assert [v.current_replicas for v in first.variants] == [2, 3, 2]
    assert first.pods == ()
    assert worlds.variants(config=config) is first
    full = worlds.full(config=config)
    assert full is not first
    assert worlds.full(config=config) is full

    # A pod changes: only the full world is rebuilt.
    pods_before = caches.pods.version
    api.seed(pod('llama-8b-a100-x', 'llm'))
    await eventually(lambda: caches.pods.version > pods_before, 'the pod')
    assert worlds.variants(config=config) is first
    with_pod = worlds.full(config=config)
    assert with_pod is not full
    assert [p.name for p in with_pod.pods] == ['llama-8b-a100-x']

    # A ConfigMap changes: neither world (the Config object carries ConfigMaps).
    cm_before = caches.configmap_version()
    await harness.patch(ConfigMap, 'wva-saturation', CTRL, {'data': {'k': 'v2'}})
    await eventually(lambda: caches.configmap_version() != cm_before, 'the ConfigMap')
    assert worlds.variants(config=config) is first
    assert worlds.full(config=config) is with_pod

    # A scale target changes: both are rebuilt, with the new count.
    deployments_before = caches.deployments.version
    await harness.patch(Deployment, 'llama-8b-a100', 'llm', {'spec': {'replicas': 5}})
    await eventually(lambda: caches.deployments.version > deployments_before, 'the Deployment')
    second = worlds.variants(config=config)
    assert second is not first
    assert [v.current_replicas for v in second.variants] == [2, 5, 2]
    assert worlds.variants(config=config) is second
    assert worlds.full(config=config) is not with_pod

    # A VA changes: rebuilt.
    vas_before = caches.vas.version
    await harness.patch(
        VariantAutoscalingResource, 'llama-a100', 'llm', {'spec': {'maxReplicas': 9}}
    )
    await eventually(lambda: caches.vas.version > vas_before, 'the VA')
    third = worlds.variants(config=config)
    assert third is not second
    assert [v.max_replicas for v in third.variants][1] == 9

    # A different Config: rebuilt (scopes take its default retention period).
    other = Config(settings=CoreSettings(default_retention_period=42.0))
    fourth = worlds.variants(config=other)
    assert fourth is not third
    assert {s.retention_period for s in fourth.scopes} == {42.0}
    assert {s.retention_period for s in third.scopes} == {600.0}
    assert worlds.variants(config=other) is fourth


async def test_lws_change_rebuilds_the_world(harness: Harness) -> None:
    seed_cluster(harness.api)
    caches = harness.caches()
    harness.start(caches)
    await harness.synced(caches)
    await eventually(caches.leaderworkersets.synced.is_set, 'the LWS informer')
    worlds = WorldCache(caches=caches)
    first = worlds.variants(config=Config())
    before = caches.leaderworkersets.version
    await harness.patch(LeaderWorkerSetResource, 'vllm-405b', 'llm', {'spec': {'replicas': 0}})
    await eventually(lambda: caches.leaderworkersets.version > before, 'the LWS')
    second = worlds.variants(config=Config())
    assert second is not first
    assert second.variants[0].name == 'llama-405b'
    assert second.variants[0].current_replicas == 0
