"""The scale client against the fake kube-apiserver over loopback HTTP.

Worked numbers: a Deployment seeded with 2 replicas is RV 1; scaling it to 5 with `expect=2`
sends one merge patch `{"metadata": {"resourceVersion": "1"}, "spec": {"replicas": 5}}` to
`.../deployments/x/scale` and answers APPLIED with replicas 2 (the count read before the write).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lightkube import AsyncClient

from llmscaler.devcluster.fakeapi.server import FakeAPI
from llmscaler.kube.client import make_client
from llmscaler.kube.scale import ScaleClient, ScaleOutcome, ScaleResult

NS = 'ns'
MERGE = 'application/merge-patch+json'
LWS_API = 'leaderworkerset.x-k8s.io/v1'
LWS_SELECTOR = 'leaderworkerset.sigs.k8s.io/name=l,leaderworkerset.sigs.k8s.io/worker-index=0'
PATHS = {
    'Deployment': f'/apis/apps/v1/namespaces/{NS}/deployments',
    'StatefulSet': f'/apis/apps/v1/namespaces/{NS}/statefulsets',
    'LeaderWorkerSet': f'/apis/{LWS_API}/namespaces/{NS}/leaderworkersets',
}
API_VERSIONS = {'Deployment': 'apps/v1', 'StatefulSet': 'apps/v1', 'LeaderWorkerSet': LWS_API}


def target(kind: str, name: str = 'x', replicas: int = 2) -> dict[str, Any]:
    if kind == 'LeaderWorkerSet':
        return {
            'apiVersion': LWS_API,
            'kind': kind,
            'metadata': {'name': name, 'namespace': NS},
            'spec': {'replicas': replicas, 'leaderWorkerTemplate': {'size': 2}},
            'status': {'replicas': replicas, 'hpaPodSelector': LWS_SELECTOR},
        }
    return {
        'apiVersion': 'apps/v1',
        'kind': kind,
        'metadata': {'name': name, 'namespace': NS, 'labels': {'app': name}},
        'spec': {
            'replicas': replicas,
            'selector': {'matchLabels': {'app': name}},
            'template': {'metadata': {'labels': {'app': name}}},
        },
        'status': {'replicas': replicas},
    }


def stored(api: FakeAPI, kind: str, name: str = 'x') -> dict[str, Any]:
    return api.get(api_version=API_VERSIONS[kind], kind=kind, namespace=NS, name=name)


def writes(api: FakeAPI) -> list[tuple[str, str]]:
    return [(r.method, r.path) for r in api.requests if r.method != 'GET']


@pytest.fixture
def scaler(client: AsyncClient) -> ScaleClient:
    return ScaleClient(client=client)


async def test_read_every_kind(api: FakeAPI, scaler: ScaleClient) -> None:
    api.seed(target('Deployment', 'd', replicas=3))
    api.seed(target('StatefulSet', 's', replicas=1))
    api.seed(target('LeaderWorkerSet', 'l', replicas=4))
    deployment = await scaler.read(api_version=None, kind='Deployment', namespace=NS, name='d')
    sts = await scaler.read(api_version='apps/v1', kind='StatefulSet', namespace=NS, name='s')
    lws = await scaler.read(api_version=LWS_API, kind='LeaderWorkerSet', namespace=NS, name='l')
    assert deployment == ScaleResult(ScaleOutcome.UNCHANGED, 3, '')
    assert sts == ScaleResult(ScaleOutcome.UNCHANGED, 1, '')
    assert lws == ScaleResult(ScaleOutcome.UNCHANGED, 4, '')
    assert [(r.method, r.path) for r in api.requests] == [
        ('GET', f'{PATHS["Deployment"]}/d/scale'),
        ('GET', f'{PATHS["StatefulSet"]}/s/scale'),
        ('GET', f'{PATHS["LeaderWorkerSet"]}/l/scale'),
    ]


@pytest.mark.parametrize('kind', ['Deployment', 'StatefulSet', 'LeaderWorkerSet'])
async def test_scale_patches_only_the_scale_subresource(
    api: FakeAPI, scaler: ScaleClient, kind: str
) -> None:
    seeded = api.seed(target(kind, replicas=2))
    result = await scaler.scale(
        api_version=API_VERSIONS[kind], kind=kind, namespace=NS, name='x', replicas=5, expect=2
    )
    assert result == ScaleResult(ScaleOutcome.APPLIED, 2, '')
    after = stored(api, kind)
    assert after['spec']['replicas'] == 5
    assert {k: v for k, v in after['spec'].items() if k != 'replicas'} == {
        k: v for k, v in seeded['spec'].items() if k != 'replicas'
    }
    assert after['status'] == seeded['status']
    [patch] = [r for r in api.requests if r.method != 'GET']
    assert patch.method == 'PATCH'
    assert patch.path == f'{PATHS[kind]}/x/scale'
    assert patch.content_type == MERGE
    assert patch.json() == {'metadata': {'resourceVersion': '1'}, 'spec': {'replicas': 5}}
    assert all(r.path.endswith('/scale') for r in api.requests)


async def test_scale_to_zero_and_back(api: FakeAPI, scaler: ScaleClient) -> None:
    api.seed(target('Deployment', replicas=1))
    down = await scaler.scale(
        api_version=None, kind='Deployment', namespace=NS, name='x', replicas=0, expect=1
    )
    assert down == ScaleResult(ScaleOutcome.APPLIED, 1, '')
    read = await scaler.read(api_version=None, kind='Deployment', namespace=NS, name='x')
    assert read.replicas == 0
    up = await scaler.scale(
        api_version=None, kind='Deployment', namespace=NS, name='x', replicas=1, expect=0
    )
    assert up == ScaleResult(ScaleOutcome.APPLIED, 0, '')
    assert stored(api, 'Deployment')['spec']['replicas'] == 1


async def test_unchanged_sends_no_write(api: FakeAPI, scaler: ScaleClient) -> None:
    api.seed(target('StatefulSet', replicas=3))
    # Even with a stale `expect`: the target already holds the wanted count.
    result = await scaler.scale(
        api_version=None, kind='StatefulSet', namespace=NS, name='x', replicas=3, expect=1
    )
    assert result == ScaleResult(ScaleOutcome.UNCHANGED, 3, '')
    assert writes(api) == []
    assert stored(api, 'StatefulSet')['metadata']['resourceVersion'] == '1'


async def test_expect_mismatch_is_conflict_without_write(api: FakeAPI, scaler: ScaleClient) -> None:
    api.seed(target('Deployment', replicas=2))
    result = await scaler.scale(
        api_version=None, kind='Deployment', namespace=NS, name='x', replicas=5, expect=4
    )
    assert result.outcome is ScaleOutcome.CONFLICT
    assert result.replicas == 2
    assert 'expected 4' in result.message
    assert writes(api) == []
    assert stored(api, 'Deployment')['spec']['replicas'] == 2


async def test_no_expect_writes_whatever_the_count(api: FakeAPI, scaler: ScaleClient) -> None:
    api.seed(target('LeaderWorkerSet', replicas=7))
    result = await scaler.scale(
        api_version=LWS_API,
        kind='LeaderWorkerSet',
        namespace=NS,
        name='x',
        replicas=1,
        expect=None,
    )
    assert result == ScaleResult(ScaleOutcome.APPLIED, 7, '')
    assert stored(api, 'LeaderWorkerSet')['spec']['replicas'] == 1


async def test_409_on_patch_is_conflict_and_not_retried(api: FakeAPI, scaler: ScaleClient) -> None:
    api.seed(target('Deployment', replicas=2))
    api.fail(status=409, method='PATCH', path_prefix=f'{PATHS["Deployment"]}/x/scale')
    result = await scaler.scale(
        api_version=None, kind='Deployment', namespace=NS, name='x', replicas=3, expect=2
    )
    assert result.outcome is ScaleOutcome.CONFLICT
    assert result.replicas == 2
    assert result.message.startswith('409 Conflict')
    assert writes(api) == [('PATCH', f'{PATHS["Deployment"]}/x/scale')]
    assert stored(api, 'Deployment')['spec']['replicas'] == 2


async def test_racing_writers_one_wins_the_other_conflicts(
    api: FakeAPI, client: AsyncClient
) -> None:
    # Two deciders read the same Scale (RV 1) before either writes: the resourceVersion carried
    # by the patch lets exactly one land; the loser gets a real 409 from the store.
    api.seed(target('Deployment', replicas=2))
    api.latency = 0.05
    first, second = ScaleClient(client=client), ScaleClient(client=client)
    results = await asyncio.gather(
        first.scale(
            api_version=None, kind='Deployment', namespace=NS, name='x', replicas=4, expect=2
        ),
        second.scale(
            api_version=None, kind='Deployment', namespace=NS, name='x', replicas=6, expect=2
        ),
    )
    api.latency = 0.0
    outcomes = sorted(r.outcome for r in results)
    assert outcomes == [ScaleOutcome.APPLIED, ScaleOutcome.CONFLICT]
    winner = 4 if results[0].outcome is ScaleOutcome.APPLIED else 6
    assert stored(api, 'Deployment')['spec']['replicas'] == winner
    patches = [r.json() for r in api.requests if r.method == 'PATCH']
    assert [p['metadata'] for p in patches] == [{'resourceVersion': '1'}] * 2


async def test_not_found(api: FakeAPI, scaler: ScaleClient) -> None:
    read = await scaler.read(api_version=None, kind='Deployment', namespace=NS, name='gone')
    scaled = await scaler.scale(
        api_version=None, kind='StatefulSet', namespace=NS, name='gone', replicas=1, expect=None
    )
    assert read.outcome is ScaleOutcome.NOT_FOUND
    assert scaled.outcome is ScaleOutcome.NOT_FOUND
    assert read.replicas is None
    assert '404' in read.message
    assert 'gone' in read.message
    assert writes(api) == []


@pytest.mark.parametrize(
    ('api_version', 'kind'),
    [('apps/v1', 'ReplicaSet'), ('apps/v2', 'Deployment'), (None, 'Pod'), ('v1', 'Service')],
)
async def test_unsupported_kind_makes_no_request(
    api: FakeAPI, scaler: ScaleClient, api_version: str | None, kind: str
) -> None:
    read = await scaler.read(api_version=api_version, kind=kind, namespace=NS, name='x')
    scaled = await scaler.scale(
        api_version=api_version, kind=kind, namespace=NS, name='x', replicas=1, expect=None
    )
    assert read.outcome is ScaleOutcome.UNSUPPORTED
    assert scaled.outcome is ScaleOutcome.UNSUPPORTED
    assert kind in scaled.message
    assert api.requests == []


@pytest.mark.parametrize('replicas', [-1, 2**31, True, 1.5, '3'])
async def test_bad_replicas_fail_without_any_request(
    api: FakeAPI, scaler: ScaleClient, replicas: Any
) -> None:
    api.seed(target('Deployment'))
    result = await scaler.scale(
        api_version=None, kind='Deployment', namespace=NS, name='x', replicas=replicas, expect=2
    )
    assert result.outcome is ScaleOutcome.FAILED
    assert result.replicas is None
    assert repr(replicas) in result.message or str(replicas) in result.message
    assert api.requests == []


async def test_largest_int32_is_accepted(api: FakeAPI, scaler: ScaleClient) -> None:
    api.seed(target('Deployment'))
    result = await scaler.scale(
        api_version=None, kind='Deployment', namespace=NS, name='x', replicas=2**31 - 1, expect=2
    )
    assert result.outcome is ScaleOutcome.APPLIED
    assert stored(api, 'Deployment')['spec']['replicas'] == 2**31 - 1


@pytest.mark.parametrize('status', [500, 429, 422])
async def test_server_errors_on_patch_are_failed(
    api: FakeAPI, scaler: ScaleClient, status: int
) -> None:
    api.seed(target('Deployment', replicas=2))
    api.fail(status=status, method='PATCH')
    result = await scaler.scale(
        api_version=None, kind='Deployment', namespace=NS, name='x', replicas=3, expect=2
    )
    assert result.outcome is ScaleOutcome.FAILED
    assert result.replicas == 2  # read before the failed write
    assert result.message.startswith(str(status))
    assert '\n' not in result.message
    assert stored(api, 'Deployment')['spec']['replicas'] == 2
    assert len(writes(api)) == 1  # no retry


async def test_server_error_on_get_is_failed(api: FakeAPI, scaler: ScaleClient) -> None:
    api.seed(target('StatefulSet'))
    api.fail(status=500, method='GET', times=2)
    read = await scaler.read(api_version=None, kind='StatefulSet', namespace=NS, name='x')
    scaled = await scaler.scale(
        api_version=None, kind='StatefulSet', namespace=NS, name='x', replicas=3, expect=None
    )
    assert read == ScaleResult(ScaleOutcome.FAILED, None, '500 InternalError: injected fault 500')
    assert scaled.outcome is ScaleOutcome.FAILED
    assert writes(api) == []


async def test_timeout_is_failed(api: FakeAPI) -> None:
    api.seed(target('Deployment'))
    api.latency = 0.4
    client = make_client(server=api.url, timeout=0.2)
    try:
        result = await ScaleClient(client=client).scale(
            api_version=None, kind='Deployment', namespace=NS, name='x', replicas=3, expect=2
        )
    finally:
        await client.aclose()
    assert result.outcome is ScaleOutcome.FAILED
    assert 'Timeout' in result.message
    assert writes(api) == []


async def test_refused_connection_is_failed() -> None:
    async with FakeAPI() as gone:
        url = gone.url
    client = make_client(server=url, timeout=2)
    try:
        result = await ScaleClient(client=client).read(
            api_version=None, kind='Deployment', namespace=NS, name='x'
        )
    finally:
        await client.aclose()
    assert result.outcome is ScaleOutcome.FAILED
    assert result.replicas is None
    assert 'Connect' in result.message


# --- the decision table as a property ---------------------------------------------------------


async def _scale_once(
    *, current: int, replicas: int, expect: int | None
) -> tuple[ScaleResult, int, int]:
    async with FakeAPI() as api:
        api.seed(target('Deployment', replicas=current))
        client = make_client(server=api.url, timeout=5)
        try:
            result = await ScaleClient(client=client).scale(
                api_version=None,
                kind='Deployment',
                namespace=NS,
                name='x',
                replicas=replicas,
                expect=expect,
            )
        finally:
            await client.aclose()
        return result, stored(api, 'Deployment')['spec']['replicas'], len(writes(api))


@settings(max_examples=30, deadline=None)
@given(
    current=st.integers(min_value=0, max_value=4),
    replicas=st.integers(min_value=0, max_value=4),
    expect=st.none() | st.integers(min_value=0, max_value=4),
)
def test_property_outcome_follows_the_decision_table(
    current: int, replicas: int, expect: int | None
) -> None:
    result, after, write_count = asyncio.run(
        _scale_once(current=current, replicas=replicas, expect=expect)
    )
    assert result.replicas == current
    if current == replicas:
        assert result.outcome is ScaleOutcome.UNCHANGED
    elif expect is not None and expect != current:
        assert result.outcome is ScaleOutcome.CONFLICT
    else:
        assert result.outcome is ScaleOutcome.APPLIED
    assert write_count == (1 if result.outcome is ScaleOutcome.APPLIED else 0)
    assert after == (replicas if result.outcome is ScaleOutcome.APPLIED else current)


# --- scale_at: one merge patch whose resourceVersion is the precondition ----------------------


@pytest.mark.parametrize('kind', sorted(PATHS))
async def test_scale_at_is_one_patch_carrying_the_read_version(
    api: FakeAPI, scaler: ScaleClient, kind: str
) -> None:
    seeded = api.seed(target(kind, replicas=0))
    rv = seeded['metadata']['resourceVersion']
    result = await scaler.scale_at(
        api_version=API_VERSIONS[kind],
        kind=kind,
        namespace=NS,
        name='x',
        replicas=1,
        resource_version=rv,
    )
    assert result == ScaleResult(ScaleOutcome.APPLIED, None, '')
    assert stored(api, kind)['spec']['replicas'] == 1
    # One request, no GET: the precondition travels in the patch.
    sent = [r for r in api.requests if r.path.startswith(PATHS[kind])]
    assert [(r.method, r.path) for r in sent] == [('PATCH', f'{PATHS[kind]}/x/scale')]
    assert sent[0].content_type == MERGE
    assert sent[0].json() == {'metadata': {'resourceVersion': rv}, 'spec': {'replicas': 1}}


async def test_scale_at_a_stale_version_is_conflict_and_untouched(
    api: FakeAPI, scaler: ScaleClient
) -> None:
    seeded = api.seed(target('Deployment', replicas=0))
    stale = seeded['metadata']['resourceVersion']
    # Someone scales it in between: the informer's copy (version `stale`) is out of date.
    await scaler.scale(
        api_version='apps/v1', kind='Deployment', namespace=NS, name='x', replicas=3, expect=None
    )
    result = await scaler.scale_at(
        api_version='apps/v1',
        kind='Deployment',
        namespace=NS,
        name='x',
        replicas=1,
        resource_version=stale,
    )
    assert result.outcome is ScaleOutcome.CONFLICT
    assert stored(api, 'Deployment')['spec']['replicas'] == 3


async def test_scale_at_failures_are_values(api: FakeAPI, scaler: ScaleClient) -> None:
    def call(replicas: int = 1, rv: str = '1') -> Any:
        return scaler.scale_at(
            api_version='apps/v1',
            kind='Deployment',
            namespace=NS,
            name='x',
            replicas=replicas,
            resource_version=rv,
        )

    assert (await call()).outcome is ScaleOutcome.NOT_FOUND
    seeded = api.seed(target('Deployment', replicas=0))
    rv = seeded['metadata']['resourceVersion']
    api.fail(status=500, method='PATCH')
    assert (await call(rv=rv)).outcome is ScaleOutcome.FAILED
    assert (await call(replicas=-1, rv=rv)).outcome is ScaleOutcome.FAILED
    assert (await call(rv='')).outcome is ScaleOutcome.FAILED
    assert stored(api, 'Deployment')['spec']['replicas'] == 0
