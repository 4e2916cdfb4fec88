"""The fake kube-apiserver over real loopback HTTP (httpx): each semantic the controller relies on.

Worked numbers: the resourceVersion counter starts at 0 and every effective write adds 1, so the
first seeded object is RV 1, the second RV 2, and an update of the first is RV 3.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from llmscaler.devcluster import objects
from llmscaler.devcluster.fakeapi import table
from llmscaler.devcluster.fakeapi.semantics import label_selector_matches
from llmscaler.devcluster.fakeapi.server import FakeAPI
from llmscaler.devcluster.process import free_port

NS = '/namespaces/ns'
DEPLOY = f'/apis/apps/v1{NS}/deployments'
STS = f'/apis/apps/v1{NS}/statefulsets'
LWS = f'/apis/leaderworkerset.x-k8s.io/v1{NS}/leaderworkersets'
VA = f'/apis/llmd.ai/v1alpha1{NS}/variantautoscalings'
MERGE = {'Content-Type': 'application/merge-patch+json'}
JSONP = {'Content-Type': 'application/json-patch+json'}


def deployment(name: str = 'x', replicas: int = 1) -> dict[str, Any]:
    return {
        'apiVersion': 'apps/v1',
        'kind': 'Deployment',
        'metadata': {'name': name, 'namespace': 'ns', 'labels': {'app': name, 'tier': 'gpu'}},
        'spec': {'replicas': replicas, 'selector': {'matchLabels': {'b': '2', 'a': '1'}}},
        'status': {'replicas': replicas},
    }


def va(name: str = 'v') -> dict[str, Any]:
    return {
        'apiVersion': 'llmd.ai/v1alpha1',
        'kind': 'VariantAutoscaling',
        'metadata': {'name': name, 'namespace': 'ns'},
        'spec': {'modelID': 'm'},
    }


@pytest.fixture
async def api() -> AsyncIterator[FakeAPI]:
    async with FakeAPI(bookmark_interval=0.05) as running:
        yield running


@pytest.fixture
async def http(api: FakeAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=api.url, timeout=5) as client:
        yield client


async def test_nodes_are_cluster_scoped(http: httpx.AsyncClient) -> None:
    body = {'apiVersion': 'v1', 'kind': 'Node', 'metadata': {'name': 'n1'}}
    assert (await http.post('/api/v1/nodes', json=body)).status_code == 201
    assert (await http.get('/api/v1/nodes/n1')).json()['metadata']['name'] == 'n1'
    listed = (await http.get('/api/v1/nodes')).json()['items']
    assert [n['metadata']['name'] for n in listed] == ['n1']
    assert 'namespace' not in listed[0]['metadata']
    # A Node is never inside a namespace.
    assert (await http.get('/api/v1/namespaces/ns/nodes/n1')).status_code == 404


async def test_discovery_lists_kinds_and_subresources(http: httpx.AsyncClient) -> None:
    assert (await http.get('/api')).json()['versions'] == ['v1']
    core = {r['name'] for r in (await http.get('/api/v1')).json()['resources']}
    assert core == {'configmaps', 'pods', 'pods/status', 'events', 'nodes', 'nodes/status'}
    groups = {g['name'] for g in (await http.get('/apis')).json()['groups']}
    assert groups == {
        'apps',
        'coordination.k8s.io',
        'discovery.k8s.io',
        'events.k8s.io',
        'inference.networking.k8s.io',
        'inference.networking.x-k8s.io',
        'kaito.sh',
        'leaderworkerset.x-k8s.io',
        'llmd.ai',
    }
    apps = {r['name']: r for r in (await http.get('/apis/apps/v1')).json()['resources']}
    assert apps['deployments/scale']['kind'] == 'Scale'
    assert apps['deployments/scale']['group'] == 'autoscaling'
    assert 'statefulsets/status' in apps
    llmd = (await http.get('/apis/llmd.ai/v1alpha1')).json()['resources']
    assert llmd[0]['shortNames'] == ['va']
    assert llmd[0]['namespaced'] is True
    assert [r['name'] for r in llmd] == ['variantautoscalings', 'variantautoscalings/status']
    kaito = (await http.get('/apis/kaito.sh/v1alpha1')).json()['resources']
    assert [(r['name'], r.get('shortNames')) for r in kaito] == [
        ('llmautoscalers', ['llmas']),
        ('llmautoscalers/status', None),
    ]
    isets = {r['name'] for r in (await http.get('/apis/kaito.sh/v1beta1')).json()['resources']}
    assert isets == {'inferencesets', 'inferencesets/scale', 'inferencesets/status'}
    assert (await http.get('/apis/nope/v1')).status_code == 404


async def test_create_sets_metadata_and_rv_increments(http: httpx.AsyncClient) -> None:
    first = (await http.post(DEPLOY, json=deployment('a'))).json()
    second = (await http.post(DEPLOY, json=deployment('b'))).json()
    assert first['metadata']['resourceVersion'] == '1'
    assert second['metadata']['resourceVersion'] == '2'
    assert first['metadata']['generation'] == 1
    assert first['metadata']['uid']
    assert first['metadata']['creationTimestamp'].endswith('Z')
    assert 'status' not in first  # status subresource: create drops status
    dup = await http.post(DEPLOY, json=deployment('a'))
    assert dup.status_code == 409
    assert dup.json()['reason'] == 'AlreadyExists'
    assert dup.json()['code'] == 409
    listed = (await http.get(DEPLOY)).json()
    assert listed['kind'] == 'DeploymentList'
    assert listed['metadata']['resourceVersion'] == '2'
    assert [o['metadata']['name'] for o in listed['items']] == ['a', 'b']


async def test_an_endpoint_slice_may_not_hold_what_kube_apiserver_refuses(
    api: FakeAPI, http: httpx.AsyncClient
) -> None:
    # kube-apiserver 1.34 refuses these (pkg/apis/core/validation ValidateEndpointIP), with
    # the same messages; the real control plane refused 127.0.0.1 in tests/e2e/test_pools.py.
    path = '/apis/discovery.k8s.io/v1/namespaces/default/endpointslices'

    def endpoint_slice(address: str, family: str = 'IPv4') -> dict[str, Any]:
        return objects.endpoint_slice(
            service='s', namespace='default', pod='p', ip=address, metrics_port=9090
        ) | {'addressType': family}

    refused = {
        '127.0.0.1': 'may not be in the loopback range (127.0.0.0/8, ::1/128)',
        '169.254.1.1': 'may not be in the link-local range (169.254.0.0/16, fe80::/10)',
        '224.0.0.5': 'may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)',
        '0.0.0.0': 'may not be unspecified (0.0.0.0)',
        'fd00::2': 'must be a valid IPv4 address',
        'pod-a': 'must be a valid IPv4 address',
    }
    for address, why in refused.items():
        answer = await http.post(path, json=endpoint_slice(address))
        assert answer.status_code == 422, address
        assert answer.json()['reason'] == 'Invalid'
        message = f'endpoints[0].addresses[0]: Invalid value: "{address}": {why}'
        named = 'EndpointSlice.discovery.k8s.io "s-1" is invalid'
        assert answer.json()['message'] == f'{named}: {message}'
    assert (await http.post(path, json=endpoint_slice('::1', 'IPv6'))).status_code == 422
    created = await http.post(path, json=endpoint_slice('192.0.2.7'))
    assert created.status_code == 201
    # A replace or a patch is checked as a create is; the harness's own seed is not.
    name = created.json()['metadata']['name']
    patch = {'endpoints': [{'addresses': ['127.0.0.1'], 'conditions': {'ready': True}}]}
    patched = await http.patch(
        f'{path}/{name}',
        json=patch,
        headers={'Content-Type': 'application/merge-patch+json'},
    )
    assert patched.status_code == 422
    api.seed(endpoint_slice('127.0.0.1') | {'metadata': {'name': 'seeded', 'namespace': 'default'}})
    assert (await http.get(f'{path}/seeded')).status_code == 200


async def test_a_custom_resource_is_pruned_defaulted_and_validated_by_its_crd(
    api: FakeAPI, http: httpx.AsyncClient
) -> None:
    # What kube-apiserver does with deploy/base/crds (tests/e2e run the same writes there).
    def valid(name: str, **spec: Any) -> dict[str, Any]:
        target = {'apiVersion': 'apps/v1', 'kind': 'Deployment', 'name': 'x'}
        return va(name) | {'spec': {**va(name)['spec'], 'scaleTargetRef': target, **spec}}

    sent = valid('p', misspelt=1) | {'extra': {'a': 1}}
    # kubectl's default: unknown fields refused, in kube-apiserver 1.34's words.
    strict = await http.post(VA, json=sent, params={'fieldValidation': 'Strict'})
    assert strict.status_code == 400
    assert strict.json()['message'] == (
        'VariantAutoscaling in version "v1alpha1" cannot be handled as a VariantAutoscaling: '
        'strict decoding error: unknown field "spec.misspelt", unknown field "extra"'
    )
    created = await http.post(VA, json=sent)
    assert created.status_code == 201, created.text
    stored = created.json()
    assert 'misspelt' not in stored['spec']
    assert 'extra' not in stored
    assert stored['spec']['modelID'] == sent['spec']['modelID']

    bad = valid('q', minReplicas=-1)
    refused = await http.post(VA, json=bad)
    assert refused.status_code == 422
    assert refused.json()['reason'] == 'Invalid'
    # The causes kubectl prints, one per violation.
    assert [c['field'] for c in refused.json()['details']['causes']] == ['spec.minReplicas']
    assert (
        'spec.minReplicas: Invalid value: -1: spec.minReplicas in body should be greater than '
        'or equal to 0'
    ) in refused.json()['message']
    missing = valid('r')
    del missing['spec']['modelID']
    answer = await http.post(VA, json=missing)
    assert answer.status_code == 422
    assert 'spec.modelID: Required value' in answer.json()['message']

    # A status write is checked in its status alone, and a value left as it was passes
    # (the real server's ratcheting): the seed below is invalid, as an older CRD allowed.
    api.seed(valid('s', minReplicas=-1))
    status = {'status': {'currentAlloc': {'numReplicas': 1, 'unknown': 'x'}}}
    written = await http.patch(f'{VA}/s/status', content=json.dumps(status), headers=MERGE)
    assert written.status_code == 200, written.text
    assert written.json()['status'] == {'currentAlloc': {'numReplicas': 1}}
    negative = {'status': {'currentAlloc': {'numReplicas': -2}}}
    answer = await http.patch(f'{VA}/s/status', content=json.dumps(negative), headers=MERGE)
    assert answer.status_code == 422
    relabel = {'metadata': {'labels': {'a': 'b'}}}
    answer = await http.patch(f'{VA}/s', content=json.dumps(relabel), headers=MERGE)
    assert answer.status_code == 200, answer.text


async def test_list_selectors(api: FakeAPI, http: httpx.AsyncClient) -> None:
    api.seed(deployment('a'))
    api.seed(deployment('b'))
    other = deployment('c')
    other['metadata']['namespace'] = 'other'
    api.seed(other)

    async def names(**params: str) -> list[str]:
        items = (await http.get(DEPLOY, params=params)).json()['items']
        return [o['metadata']['name'] for o in items]

    assert await names() == ['a', 'b']
    assert await names(labelSelector='app=a') == ['a']
    assert await names(labelSelector='app in (a,b),tier') == ['a', 'b']
    assert await names(labelSelector='app notin (a),!missing') == ['b']
    assert await names(labelSelector='app!=a') == ['b']
    assert await names(fieldSelector='metadata.name=b') == ['b']
    everywhere = (
        await http.get(
            '/apis/apps/v1/deployments', params={'fieldSelector': 'metadata.namespace=other'}
        )
    ).json()['items']
    assert [o['metadata']['name'] for o in everywhere] == ['c']
    bad = await http.get(DEPLOY, params={'fieldSelector': 'spec.replicas=1'})
    assert bad.status_code == 400
    assert bad.json()['reason'] == 'BadRequest'


def test_label_selector_requires_all_requirements() -> None:
    assert label_selector_matches(selector='a=1,b=2', labels={'a': '1', 'b': '2'})
    assert not label_selector_matches(selector='a=1,b=2', labels={'a': '1'})


@pytest.mark.parametrize(
    ('selector', 'labels', 'expected'),
    [
        # lightkube's encoding of {key: [values]}: sorted values, no spaces.
        ('app.kubernetes.io/name in (llmscaler,workload-variant-autoscaler)',
         {'app.kubernetes.io/name': 'llmscaler'}, True),
        ('app.kubernetes.io/name in (llmscaler,workload-variant-autoscaler)',
         {'app.kubernetes.io/name': 'other'}, False),
        ('app.kubernetes.io/name in (llmscaler,workload-variant-autoscaler)', {}, False),
        ('tier in ( gpu , cpu )', {'tier': 'cpu'}, True),
        ('tier notin (gpu)', {}, True),  # notin and != also select objects without the key
        ('tier notin (gpu)', {'tier': 'gpu'}, False),
        ('tier!=gpu', {}, True),
        ('tier', {'tier': ''}, True),
        ('tier', {}, False),
        ('!tier', {}, True),
        ('!tier', {'tier': 'x'}, False),
        ('tier in (gpu),!canary,app', {'tier': 'gpu', 'app': 'a'}, True),
        ('tier in (gpu),!canary,app', {'tier': 'gpu', 'app': 'a', 'canary': ''}, False),
    ],
)  # fmt: skip
def test_set_based_label_selectors(selector: str, labels: dict[str, str], expected: bool) -> None:
    assert label_selector_matches(selector=selector, labels=labels) is expected


@pytest.mark.parametrize('selector', ['tier in ()', 'tier notin ( )', '!tier=a', 'tier in (a'])
async def test_malformed_label_selector_is_400_on_list_and_watch(
    http: httpx.AsyncClient, selector: str
) -> None:
    for params in ({'labelSelector': selector}, {'labelSelector': selector, 'watch': 'true'}):
        answer = await http.get(DEPLOY, params=params)
        assert answer.status_code == 400, params
        assert answer.json()['reason'] == 'BadRequest'


async def test_put_conflict_and_generation(api: FakeAPI, http: httpx.AsyncClient) -> None:
    stored = api.seed(deployment())  # RV 1
    stored['spec']['replicas'] = 4
    ok = await http.put(f'{DEPLOY}/x', json=stored)
    assert ok.status_code == 200
    assert ok.json()['metadata']['resourceVersion'] == '2'
    assert ok.json()['metadata']['generation'] == 2
    stale = await http.put(f'{DEPLOY}/x', json=stored)  # still carries RV 1
    assert stale.status_code == 409
    assert stale.json()['reason'] == 'Conflict'
    # A label change is metadata: RV 3, generation stays 2.
    fresh = ok.json()
    fresh['metadata']['labels'] = {'app': 'y'}
    relabelled = (await http.put(f'{DEPLOY}/x', json=fresh)).json()
    assert relabelled['metadata']['resourceVersion'] == '3'
    assert relabelled['metadata']['generation'] == 2


async def test_merge_patch_and_stale_rv(api: FakeAPI, http: httpx.AsyncClient) -> None:
    api.seed(deployment())  # RV 1
    patch = {'metadata': {'resourceVersion': '1'}, 'spec': {'replicas': 2}}
    ok = await http.patch(f'{DEPLOY}/x', content=json.dumps(patch), headers=MERGE)
    assert ok.json()['spec']['replicas'] == 2
    assert ok.json()['metadata']['resourceVersion'] == '2'
    stale = await http.patch(f'{DEPLOY}/x', content=json.dumps(patch), headers=MERGE)
    assert stale.status_code == 409
    unconditional = {'spec': {'replicas': None, 'paused': True}}
    done = await http.patch(f'{DEPLOY}/x', content=json.dumps(unconditional), headers=MERGE)
    assert 'replicas' not in done.json()['spec']
    assert done.json()['spec']['paused'] is True


async def test_json_patch_test_failure_is_422(api: FakeAPI, http: httpx.AsyncClient) -> None:
    api.seed(deployment(replicas=1))
    ops = [
        {'op': 'test', 'path': '/spec/replicas', 'value': 5},
        {'op': 'replace', 'path': '/spec/replicas', 'value': 6},
    ]
    failed = await http.patch(f'{DEPLOY}/x', content=json.dumps(ops), headers=JSONP)
    assert failed.status_code == 422
    assert failed.json()['reason'] == 'Invalid'
    ops[0]['value'] = 1
    ok = await http.patch(f'{DEPLOY}/x', content=json.dumps(ops), headers=JSONP)
    assert ok.json()['spec']['replicas'] == 6
    ops2 = [
        {'op': 'add', 'path': '/metadata/labels/new', 'value': 'n'},
        {'op': 'remove', 'path': '/metadata/labels/tier'},
        {'op': 'copy', 'from': '/metadata/labels/new', 'path': '/metadata/labels/c'},
    ]
    labels = (await http.patch(f'{DEPLOY}/x', content=json.dumps(ops2), headers=JSONP)).json()
    assert labels['metadata']['labels'] == {'app': 'x', 'new': 'n', 'c': 'n'}
    stale = [{'op': 'replace', 'path': '/metadata/resourceVersion', 'value': '1'}]
    assert (
        await http.patch(f'{DEPLOY}/x', content=json.dumps(stale), headers=JSONP)
    ).status_code == 409


async def test_strategic_merge_patch(api: FakeAPI, http: httpx.AsyncClient) -> None:
    api.seed(deployment())
    api.seed(va())
    smp = {'Content-Type': 'application/strategic-merge-patch+json'}
    body = json.dumps({'spec': {'replicas': 3}})
    assert (await http.patch(f'{DEPLOY}/x', content=body, headers=smp)).status_code == 200
    refused = await http.patch(f'{VA}/v', content=body, headers=smp)
    assert refused.status_code == 415
    assert refused.json()['reason'] == 'UnsupportedMediaType'


async def test_status_and_main_writes_are_separate(api: FakeAPI, http: httpx.AsyncClient) -> None:
    api.seed(va())
    main = {'spec': {'modelID': 'n'}, 'status': {'ignored': True}}
    after_main = (await http.patch(f'{VA}/v', content=json.dumps(main), headers=MERGE)).json()
    assert after_main['spec']['modelID'] == 'n'
    assert 'status' not in after_main
    assert after_main['metadata']['generation'] == 2
    status = {'spec': {'modelID': 'ignored'}, 'status': {'currentAlloc': {'numReplicas': 2}}}
    after = (await http.patch(f'{VA}/v/status', content=json.dumps(status), headers=MERGE)).json()
    assert after['status'] == {'currentAlloc': {'numReplicas': 2}}
    assert after['spec']['modelID'] == 'n'
    assert after['metadata']['generation'] == 2  # a status write is no spec change
    put = dict(after, status={'currentAlloc': {'numReplicas': 3}})
    put_status = (await http.put(f'{VA}/v/status', json=put)).json()
    assert put_status['status'] == {'currentAlloc': {'numReplicas': 3}}
    read = (await http.get(f'{VA}/v/status')).json()
    assert read['status'] == {'currentAlloc': {'numReplicas': 3}}
    assert (await http.get(f'{DEPLOY}/x/status')).status_code == 404


async def test_scale_deployment_and_statefulset(api: FakeAPI, http: httpx.AsyncClient) -> None:
    api.seed(deployment(replicas=2))
    sts = deployment('s', replicas=1) | {'kind': 'StatefulSet'}
    api.seed(sts)
    scale = (await http.get(f'{DEPLOY}/x/scale')).json()
    assert scale['kind'] == 'Scale'
    assert scale['apiVersion'] == 'autoscaling/v1'
    assert scale['spec'] == {'replicas': 2}
    assert scale['status'] == {'replicas': 2, 'selector': 'a=1,b=2'}  # sorted by key
    scale['spec']['replicas'] = 5
    put = (await http.put(f'{DEPLOY}/x/scale', json=scale)).json()
    assert put['spec']['replicas'] == 5
    assert put['metadata']['resourceVersion'] == '3'
    assert (await http.put(f'{DEPLOY}/x/scale', json=scale)).status_code == 409
    assert (
        api.get(api_version='apps/v1', kind='Deployment', namespace='ns', name='x')['metadata'][
            'generation'
        ]
        == 2
    )
    patch = json.dumps({'spec': {'replicas': 0}})
    sts_scale = (await http.patch(f'{STS}/s/scale', content=patch, headers=MERGE)).json()
    assert sts_scale['spec']['replicas'] == 0
    assert sts_scale['status']['replicas'] == 1
    stale = json.dumps({'metadata': {'resourceVersion': '1'}, 'spec': {'replicas': 1}})
    assert (await http.patch(f'{STS}/s/scale', content=stale, headers=MERGE)).status_code == 409
    negative = json.dumps({'spec': {'replicas': -1}})
    assert (await http.patch(f'{STS}/s/scale', content=negative, headers=MERGE)).status_code == 422


async def test_scale_lws_uses_hpa_pod_selector(api: FakeAPI, http: httpx.AsyncClient) -> None:
    selector = 'leaderworkerset.sigs.k8s.io/name=l,leaderworkerset.sigs.k8s.io/worker-index=0'
    api.seed(
        {
            'apiVersion': 'leaderworkerset.x-k8s.io/v1',
            'kind': 'LeaderWorkerSet',
            'metadata': {'name': 'l', 'namespace': 'ns'},
            'spec': {'replicas': 2},
            'status': {'replicas': 2, 'hpaPodSelector': selector},
        }
    )
    scale = (await http.get(f'{LWS}/l/scale')).json()
    assert scale['status'] == {'replicas': 2, 'selector': selector}
    patched = await http.patch(f'{LWS}/l/scale', content='{"spec":{"replicas":4}}', headers=MERGE)
    assert patched.json()['spec']['replicas'] == 4
    assert (await http.get(f'{LWS}/l')).json()['spec']['replicas'] == 4
    smp = {'Content-Type': 'application/strategic-merge-patch+json'}
    assert (await http.patch(f'{LWS}/l/scale', content='{}', headers=smp)).status_code == 415


async def test_delete(api: FakeAPI, http: httpx.AsyncClient) -> None:
    api.seed(deployment())
    gone = await http.delete(f'{DEPLOY}/x')
    assert gone.status_code == 200
    assert gone.json()['metadata']['resourceVersion'] == '2'
    missing = await http.get(f'{DEPLOY}/x')
    assert missing.status_code == 404
    assert missing.json()['reason'] == 'NotFound'


async def read_events(
    http: httpx.AsyncClient,
    path: str,
    params: dict[str, str],
    count: int,
    during: Any = None,
) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    async with http.stream('GET', path, params={'watch': 'true', **params}) as response:
        assert response.status_code == 200
        if during is not None:
            asyncio.get_running_loop().call_later(0.05, during)
        async for line in response.aiter_lines():
            if line:
                events.append(json.loads(line))
            if len(events) >= count:
                break
    return events


async def test_watch_from_rv_with_bookmarks(api: FakeAPI, http: httpx.AsyncClient) -> None:
    api.seed(deployment('a'))  # RV 1
    api.seed(deployment('b'))  # RV 2

    def later() -> None:
        obj = api.get(api_version='apps/v1', kind='Deployment', namespace='ns', name='a')
        obj['spec']['replicas'] = 7
        api.store.update(api.store_resource(obj), 'ns', 'a', obj, part='main')  # RV 3
        api.bookmark()

    events = await read_events(
        http, DEPLOY, {'resourceVersion': '1', 'allowWatchBookmarks': 'true'}, 3, later
    )
    assert [(e['type'], e['object']['metadata']['resourceVersion']) for e in events] == [
        ('ADDED', '2'),
        ('MODIFIED', '3'),
        ('BOOKMARK', '3'),
    ]
    initial = await read_events(http, DEPLOY, {'labelSelector': 'app=b'}, 1)
    assert initial[0]['type'] == 'ADDED'
    assert initial[0]['object']['metadata']['name'] == 'b'


async def test_watch_bookmarks_only_when_allowed(api: FakeAPI, http: httpx.AsyncClient) -> None:
    api.seed(deployment('a'))
    events = await read_events(http, DEPLOY, {'resourceVersion': '1', 'timeoutSeconds': '0.3'}, 9)
    assert events == []  # 0.3 s at a 0.05 s bookmark interval, yet no BOOKMARK
    ticks = await read_events(
        http, DEPLOY, {'resourceVersion': '1', 'allowWatchBookmarks': 'true'}, 2
    )
    assert [e['type'] for e in ticks] == ['BOOKMARK', 'BOOKMARK']


async def test_watch_reports_objects_entering_and_leaving_its_label_selector(
    api: FakeAPI, http: httpx.AsyncClient
) -> None:
    api.seed(deployment('a'))  # RV 1, tier=gpu
    api.seed(deployment('b'))  # RV 2, tier=gpu

    def relabel(name: str, tier: str) -> None:
        obj = api.get(api_version='apps/v1', kind='Deployment', namespace='ns', name=name)
        obj['metadata']['labels']['tier'] = tier
        api.store.update(api.store_resource(obj), 'ns', name, obj, part='main')

    def later() -> None:
        relabel('a', 'cpu')  # RV 3: leaves the selection
        relabel('b', 'cpu')  # RV 4: leaves
        relabel('b', 'tpu')  # RV 5: still out, not reported
        relabel('a', 'gpu')  # RV 6: comes back

    selected = {'resourceVersion': '2', 'labelSelector': 'tier in (gpu)'}
    events = await read_events(http, DEPLOY, selected, 3, later)
    assert [(e['type'], e['object']['metadata']['resourceVersion']) for e in events] == [
        ('DELETED', '3'),
        ('DELETED', '4'),
        ('ADDED', '6'),
    ]
    assert events[0]['object']['metadata']['labels']['tier'] == 'cpu'  # the object as it is now
    unselected = await read_events(http, DEPLOY, {'resourceVersion': '2'}, 4)
    assert [e['type'] for e in unselected] == ['MODIFIED'] * 4


async def test_watch_deleted(api: FakeAPI, http: httpx.AsyncClient) -> None:
    api.seed(deployment('a'))
    events = await read_events(
        http,
        DEPLOY,
        {'resourceVersion': '1'},
        1,
        lambda: asyncio.ensure_future(http.delete(f'{DEPLOY}/a')),
    )
    assert events[0]['type'] == 'DELETED'
    assert events[0]['object']['metadata']['name'] == 'a'


CORE_EVENTS = f'/api/v1{NS}/events'
EVENTS = f'/apis/events.k8s.io/v1{NS}/events'


def new_event(name: str) -> dict[str, Any]:
    """An events.k8s.io/v1 Event, as the controller records it."""
    return {
        'apiVersion': 'events.k8s.io/v1',
        'kind': 'Event',
        'metadata': {'name': name, 'namespace': 'ns'},
        'eventTime': '2026-01-01T00:00:00.000000Z',
        'regarding': {'kind': 'VariantAutoscaling', 'name': 'v', 'namespace': 'ns'},
        'note': 'Deployment ns/v: 1 -> 2',
        'reason': 'ScaledUp',
        'type': 'Normal',
        'action': 'Scale',
        'reportingController': 'llmscaler',
        'reportingInstance': 'ctl-0',
    }


async def test_events_are_one_set_served_through_both_apis(http: httpx.AsyncClient) -> None:
    # kube-apiserver keeps one set of Events: written through events.k8s.io/v1, read through
    # core v1 (kubectl describe), with the fields renamed; and the other way round.
    assert (await http.post(EVENTS, json=new_event('a'))).status_code == 201
    [core] = (await http.get(CORE_EVENTS)).json()['items']
    assert core['apiVersion'] == 'v1'
    assert core['involvedObject'] == {'kind': 'VariantAutoscaling', 'name': 'v', 'namespace': 'ns'}
    assert (core['message'], core['reportingComponent']) == ('Deployment ns/v: 1 -> 2', 'llmscaler')
    assert (core['reason'], core['type'], core['reportingInstance']) == (
        'ScaledUp',
        'Normal',
        'ctl-0',
    )
    assert not {'regarding', 'note', 'reportingController'} & set(core)

    old = {
        'apiVersion': 'v1',
        'kind': 'Event',
        'metadata': {'name': 'b', 'namespace': 'ns'},
        'involvedObject': {'kind': 'Pod', 'name': 'p', 'namespace': 'ns'},
        'message': 'pulled',
        'reason': 'Pulled',
        'source': {'component': 'kubelet'},
        'firstTimestamp': '2026-01-01T00:00:00Z',
        'lastTimestamp': '2026-01-01T00:01:00Z',
        'count': 2,
        'type': 'Normal',
    }
    assert (await http.post(CORE_EVENTS, json=old)).status_code == 201
    new = (await http.get(f'{EVENTS}/b')).json()
    assert new['apiVersion'] == 'events.k8s.io/v1'
    assert (new['regarding']['name'], new['note'], new['deprecatedCount']) == ('p', 'pulled', 2)
    assert new['deprecatedSource'] == {'component': 'kubelet'}
    assert (new['deprecatedFirstTimestamp'], new['deprecatedLastTimestamp']) == (
        '2026-01-01T00:00:00Z',
        '2026-01-01T00:01:00Z',
    )
    # One name space: the same name through the other API already exists.
    assert (
        await http.post(CORE_EVENTS, json={**old, 'metadata': {'name': 'a'}})
    ).status_code == 409
    assert [e['metadata']['name'] for e in (await http.get(EVENTS)).json()['items']] == ['a', 'b']
    # Field selectors read the fields of the API asked.
    selected = await http.get(CORE_EVENTS, params={'fieldSelector': 'involvedObject.name=p'})
    assert [e['metadata']['name'] for e in selected.json()['items']] == ['b']
    selected = await http.get(EVENTS, params={'fieldSelector': 'regarding.name=v,type=Normal'})
    assert [e['metadata']['name'] for e in selected.json()['items']] == ['a']
    wrong = await http.get(EVENTS, params={'fieldSelector': 'involvedObject.name=p'})
    assert wrong.status_code == 400
    # Deleted through one API, gone from both.
    assert (await http.delete(f'{CORE_EVENTS}/a')).status_code == 200
    assert (await http.get(f'{EVENTS}/a')).status_code == 404


async def test_a_core_events_watch_sees_events_recorded_through_events_k8s_io(
    http: httpx.AsyncClient,
) -> None:
    events = await read_events(
        http,
        CORE_EVENTS,
        {'resourceVersion': '0'},
        1,
        lambda: asyncio.ensure_future(http.post(EVENTS, json=new_event('a'))),
    )
    assert events[0]['type'] == 'ADDED'
    assert events[0]['object']['apiVersion'] == 'v1'
    assert events[0]['object']['message'] == 'Deployment ns/v: 1 -> 2'


async def test_watch_too_old_is_in_stream_410(http: httpx.AsyncClient) -> None:
    async with FakeAPI(history_limit=2) as small, httpx.AsyncClient(base_url=small.url) as c:
        for name in 'abc':
            small.seed(deployment(name))  # RV 3 pushes RV 1 out: compacted = 1
        ok = await read_events(c, DEPLOY, {'resourceVersion': '1'}, 2)
        assert [e['object']['metadata']['name'] for e in ok] == ['b', 'c']
        replay = await read_events(c, DEPLOY, {'resourceVersion': '0'}, 3)
        assert len(replay) == 3  # RV 0 replays current objects as ADDED
        small.store.compact()
        err = await read_events(c, DEPLOY, {'resourceVersion': '2'}, 1)
        assert err[0]['type'] == 'ERROR'
        assert err[0]['object']['code'] == 410
        assert err[0]['object']['reason'] == 'Expired'


async def test_faults(api: FakeAPI, http: httpx.AsyncClient) -> None:
    api.seed(deployment())
    api.fail(status=429, method='GET', path_prefix=DEPLOY, times=2, retry_after=7)
    api.fail(status=500, method='PATCH')
    throttled = await http.get(f'{DEPLOY}/x')
    assert throttled.status_code == 429
    assert throttled.headers['Retry-After'] == '7'
    assert throttled.json()['reason'] == 'TooManyRequests'
    assert (await http.get(DEPLOY)).status_code == 429
    assert (await http.get(DEPLOY)).status_code == 200
    assert (await http.patch(f'{DEPLOY}/x', content='{}', headers=MERGE)).status_code == 500
    assert (await http.patch(f'{DEPLOY}/x', content='{}', headers=MERGE)).status_code == 200
    api.fail(status=409, path_prefix=f'{DEPLOY}/x/scale')
    api.fail(status=410, path_prefix='/api/v1')
    assert (await http.get(f'{DEPLOY}/x/scale')).json()['reason'] == 'Conflict'
    assert (await http.get('/api/v1/namespaces/ns/pods')).json()['reason'] == 'Expired'


async def test_latency_and_forced_watch_gone(api: FakeAPI, http: httpx.AsyncClient) -> None:
    api.latency = 0.2
    loop = asyncio.get_running_loop()
    start = loop.time()
    await http.get('/api')
    assert loop.time() - start >= 0.2
    api.latency = 0.0
    api.force_watch_gone()
    err = await read_events(http, DEPLOY, {'resourceVersion': '0'}, 1)
    assert err[0]['object']['code'] == 410
    assert await read_events(http, DEPLOY, {'timeoutSeconds': '0.1'}, 1) == []


async def test_drop_watches_ends_stream(api: FakeAPI, http: httpx.AsyncClient) -> None:
    api.seed(deployment())
    events = await read_events(http, DEPLOY, {'resourceVersion': '1'}, 5, api.drop_watches)
    assert events == []


async def test_request_log(api: FakeAPI, http: httpx.AsyncClient) -> None:
    api.seed(va())
    await http.patch(
        f'{VA}/v/status',
        content='{"status":{"a":1}}',
        headers=MERGE,
        params={'fieldManager': 'llmscaler'},
    )
    [logged] = api.requests_to(method='PATCH', path=f'{VA}/v/status')
    assert logged.content_type == MERGE['Content-Type']
    assert logged.query == {'fieldManager': 'llmscaler'}
    assert logged.json() == {'status': {'a': 1}}


async def test_it_serves_on_the_port_it_is_given() -> None:
    port = free_port()
    async with FakeAPI(port=port) as api, httpx.AsyncClient(base_url=api.url) as client:
        assert api.url == f'http://127.0.0.1:{port}'
        assert (await client.get('/version')).status_code == 200


async def test_without_the_crds_it_does_not_start_and_says_where_it_looked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert table.CRD_DIR.is_dir()  # a checkout: the CRDs are found
    table.require_crds()
    (tmp_path / 'other.yaml').write_text('kind: ConfigMap\n')
    monkeypatch.setattr(table, 'CRD_DIR', tmp_path)
    with pytest.raises(FileNotFoundError, match=f'no CustomResourceDefinition in {tmp_path}'):
        async with FakeAPI():
            pass
