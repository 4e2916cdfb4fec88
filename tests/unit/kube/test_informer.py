"""The informer against the fake apiserver over loopback HTTP: list, watch, re-list and diff.

Worked numbers: the fake's resourceVersion starts at 0 and grows by one per write, so seeding b,
a and c gives RVs 1, 2 and 3 and a list at RV 3; the first watch then asks for resourceVersion=3.
With retry_delay 1 and max_retry_delay 4, failed lists are retried after 1, 2, 4, 4 ... seconds
on the ManualClock.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import lightkube
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.core_v1 import ConfigMap

from llmscaler.clock import ManualClock
from llmscaler.devcluster.fakeapi.server import FakeAPI
from llmscaler.kube.client import VariantAutoscalingResource, make_client
from llmscaler.kube.informer import WATCH_TIMEOUT_SECONDS, Informer
from tests.support.waiting import eventually

DEPLOYS = '/apis/apps/v1/namespaces/ns/deployments'
ALL_DEPLOYS = '/apis/apps/v1/deployments'
MERGE = {'Content-Type': 'application/merge-patch+json'}

Event = tuple[str, str, str]  # (type, namespace/name, resourceVersion)


def deployment(
    name: str, *, namespace: str = 'ns', replicas: int = 1, tier: str = 'gpu'
) -> dict[str, Any]:
    labels = {'app': name, 'tier': tier}
    return {
        'apiVersion': 'apps/v1',
        'kind': 'Deployment',
        'metadata': {'name': name, 'namespace': namespace, 'labels': labels},
        'spec': {
            'replicas': replicas,
            'selector': {'matchLabels': {'app': name}},
            'template': {'metadata': {'labels': {'app': name}}},
        },
    }


def va(name: str, *, namespace: str) -> dict[str, Any]:
    return {
        'apiVersion': 'llmd.ai/v1alpha1',
        'kind': 'VariantAutoscaling',
        'metadata': {'name': name, 'namespace': namespace},
        'spec': {'modelID': 'm'},
    }


def rv(obj: dict[str, Any]) -> str:
    return str(obj['metadata']['resourceVersion'])


def names(informer: Informer) -> list[str]:
    return [f'{o["metadata"]["namespace"]}/{o["metadata"]["name"]}' for o in informer.items()]


def lists(api: FakeAPI, path: str = DEPLOYS) -> list[dict[str, str]]:
    return [
        r.query
        for r in api.requests
        if r.method == 'GET' and r.path == path and r.query.get('watch') != 'true'
    ]


def watches(api: FakeAPI, path: str = DEPLOYS) -> list[dict[str, str]]:
    return [
        r.query
        for r in api.requests
        if r.method == 'GET' and r.path == path and r.query.get('watch') == 'true'
    ]


def awake_or_asleep(api: FakeAPI, clock: ManualClock, requests: int) -> Callable[[], bool]:
    """Still asleep in a backoff, or awake and past the `requests`-th list request."""
    return lambda: len(lists(api)) > requests or clock.sleepers == 1


def grew(read: Callable[[], int], since: int) -> Callable[[], bool]:
    return lambda: read() > since


class Harness:
    def __init__(self, api: FakeAPI, client: lightkube.AsyncClient, clock: ManualClock) -> None:
        self.api, self.client, self.clock = api, client, clock
        self.events: list[Event] = []

    def record(self, kind: str, obj: dict[str, Any]) -> None:
        meta = obj['metadata']
        self.events.append((kind, f'{meta["namespace"]}/{meta["name"]}', rv(obj)))

    def informer(self, **kwargs: Any) -> Informer:
        params: dict[str, Any] = {
            'client': self.client,
            'resource': Deployment,
            'clock': self.clock,
            'namespace': 'ns',
            'name': 'deployments',
            'retry_delay': 1.0,
            'max_retry_delay': 4.0,
            'on_event': self.record,
        }
        return Informer(**(params | kwargs))

    @contextlib.asynccontextmanager
    async def running(self, informer: Informer, *, sync: bool = True) -> AsyncIterator[None]:
        task = asyncio.create_task(informer.run())
        try:
            if sync:
                await asyncio.wait_for(informer.synced.wait(), 5.0)
                await self.watching()
            yield
            assert not task.done(), 'run() returned or raised'
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def watching(self, count: int = 1) -> None:
        """Wait until `count` watch streams are open on the fake."""
        await eventually(lambda: len(self.api.store.watchers) == count, 'an open watch')


@pytest.fixture
async def harness() -> AsyncIterator[Harness]:
    async with FakeAPI() as api:
        client = make_client(server=api.url, timeout=5.0)
        try:
            yield Harness(api, client, ManualClock())
        finally:
            await client.aclose()


@pytest.fixture
async def http(harness: Harness) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=harness.api.url, timeout=5) as client:
        yield client


# --- list, sync, watch ---------------------------------------------------------------------------


async def test_list_fills_store_sets_synced_and_watches_from_list_rv(harness: Harness) -> None:
    api = harness.api
    api.seed(deployment('b'))  # RV 1
    api.seed(deployment('a'))  # RV 2
    api.seed(deployment('c', namespace='other'))  # RV 3
    informer = harness.informer()
    assert not informer.synced.is_set()
    assert informer.items() == ()
    async with harness.running(informer):
        assert names(informer) == ['ns/a', 'ns/b']
        assert harness.events == [('ADDED', 'ns/a', '2'), ('ADDED', 'ns/b', '1')]
        got = informer.get(namespace='ns', name='a')
        assert got is not None
        assert got['spec']['replicas'] == 1
        assert got['metadata']['labels'] == {'app': 'a', 'tier': 'gpu'}
        assert informer.get(namespace='other', name='c') is None
        assert informer.version == 2
        assert informer.relists == 0
        assert informer.last_error is None
        assert informer.resource_version == '3'
        assert lists(api) == [{}]
        [watch] = watches(api)
        assert watch['resourceVersion'] == '3'
        assert watch['timeoutSeconds'] == str(WATCH_TIMEOUT_SECONDS)


async def test_watch_applies_create_patch_delete(harness: Harness, http: httpx.AsyncClient) -> None:
    harness.api.seed(deployment('a'))  # RV 1
    informer = harness.informer()
    async with harness.running(informer):
        harness.events.clear()
        assert (await http.post(DEPLOYS, json=deployment('b'))).status_code == 201  # RV 2
        patch = json.dumps({'spec': {'replicas': 5}})
        patched = await http.patch(f'{DEPLOYS}/a', content=patch, headers=MERGE)  # RV 3
        assert patched.status_code == 200
        assert (await http.delete(f'{DEPLOYS}/b')).status_code == 200  # RV 4
        await eventually(lambda: len(harness.events) == 3, 'three events')
        assert harness.events == [
            ('ADDED', 'ns/b', '2'),
            ('MODIFIED', 'ns/a', '3'),
            ('DELETED', 'ns/b', '4'),
        ]
        assert names(informer) == ['ns/a']
        a = informer.get(namespace='ns', name='a')
        assert a is not None
        assert a['spec']['replicas'] == 5
        assert informer.version == 4
        assert informer.resource_version == '4'
        assert informer.relists == 0


async def test_no_op_write_emits_nothing(harness: Harness, http: httpx.AsyncClient) -> None:
    harness.api.seed(deployment('a'))
    informer = harness.informer()
    async with harness.running(informer):
        same = json.dumps({'spec': {'replicas': 1}})
        await http.patch(f'{DEPLOYS}/a', content=same, headers=MERGE)  # unchanged: no RV bump
        await http.post(DEPLOYS, json=deployment('b'))  # a marker that must arrive
        await eventually(lambda: len(harness.events) == 2, 'the marker')
        assert harness.events[1] == ('ADDED', 'ns/b', '2')
        assert informer.version == 2


# --- re-list and diff ----------------------------------------------------------------------


async def test_410_relist_synthesises_missed_delete_after_backoff(harness: Harness) -> None:
    api = harness.api
    for name in ('a', 'b', 'c'):
        api.seed(deployment(name))  # RVs 1, 2, 3
    informer = harness.informer()
    async with harness.running(informer):
        harness.events.clear()
        version = informer.version
        # Disconnect, then change things the watch cannot see, then answer the re-watch 410.
        api.force_watch_gone()
        api.drop_watches()
        resource = api.store_resource(deployment('x'))
        api.store.delete(resource, 'ns', 'b')  # RV 4, missed
        modified = api.get(api_version='apps/v1', kind='Deployment', namespace='ns', name='c')
        modified['spec']['replicas'] = 3
        api.store.update(resource, 'ns', 'c', modified, part='main')  # RV 5, missed
        api.seed(deployment('d'))  # RV 6, missed
        # The watch delivered nothing before it failed, so the re-list waits retry_delay.
        await eventually(lambda: informer.last_error is not None, 'the 410')
        assert '410' in (informer.last_error or '')
        await eventually(lambda: harness.clock.sleepers == 1, 'the backoff sleep')
        assert informer.relists == 0
        assert harness.events == []
        await harness.clock.advance(1.0)
        await eventually(lambda: len(harness.events) == 3, 'the diff')
        assert harness.events == [
            ('DELETED', 'ns/b', '2'),  # the last state the informer knew
            ('MODIFIED', 'ns/c', '5'),
            ('ADDED', 'ns/d', '6'),
        ]
        assert names(informer) == ['ns/a', 'ns/c', 'ns/d']
        assert informer.version == version + 3
        assert informer.relists == 1
        assert informer.last_error is None
        await harness.watching()
        assert watches(api)[-1]['resourceVersion'] == '6'


async def a_deleted_behind_a_productive_watch(harness: Harness, http: httpx.AsyncClient) -> None:
    """With an informer running on `a` (RV 1): `b` created (RV 2) and delivered on the watch,
    a productive one; then the watch dropped and `a` deleted (RV 3) while none is open."""
    await http.post(DEPLOYS, json=deployment('b'))
    await eventually(lambda: len(harness.events) == 2, 'b')
    harness.api.drop_watches()
    harness.api.store.delete(harness.api.store_resource(deployment('a')), 'ns', 'a')


async def test_410_after_productive_watch_relists_at_once(
    harness: Harness, http: httpx.AsyncClient
) -> None:
    api = harness.api
    api.seed(deployment('a'))  # RV 1
    informer = harness.informer()
    async with harness.running(informer):
        await a_deleted_behind_a_productive_watch(harness, http)
        api.store.compact()  # the re-watch from RV 2 is now too old: a real 410
        await eventually(lambda: len(harness.events) == 3, 'the synthesised delete')
        assert harness.events[2] == ('DELETED', 'ns/a', '1')
        assert names(informer) == ['ns/b']
        assert informer.relists == 1
        assert harness.clock.monotonic() == 0.0  # no backoff was needed


async def test_relist_with_nothing_changed_emits_nothing(harness: Harness) -> None:
    api = harness.api
    api.seed(deployment('a'))
    api.seed(deployment('b'))
    informer = harness.informer()
    async with harness.running(informer):
        before = informer.items()
        version = informer.version
        api.force_watch_gone()
        api.drop_watches()
        await eventually(lambda: harness.clock.sleepers == 1, 'the backoff sleep')
        await harness.clock.advance(1.0)
        await eventually(lambda: informer.relists == 1 and informer.last_error is None, 'relist')
        await harness.watching()
        assert harness.events[2:] == []
        assert informer.version == version
        assert informer.items() == before


async def test_clean_stream_end_rewatches_from_last_rv_without_relist(
    harness: Harness, http: httpx.AsyncClient
) -> None:
    api = harness.api
    api.seed(deployment('a'))  # RV 1
    informer = harness.informer()
    async with harness.running(informer):
        await a_deleted_behind_a_productive_watch(harness, http)
        await eventually(lambda: len(harness.events) == 3, 'the delete, replayed')
        assert harness.events[2] == ('DELETED', 'ns/a', '3')
        assert [w['resourceVersion'] for w in watches(api)] == ['1', '2']
        assert len(lists(api)) == 1
        assert informer.relists == 0
        assert informer.last_error is None


# --- failures and backoff ------------------------------------------------------------------


async def test_list_failures_back_off_on_the_clock_and_cap(harness: Harness) -> None:
    api, clock = harness.api, harness.clock
    api.seed(deployment('a'))
    api.fail(status=500, method='GET', path_prefix=DEPLOYS, times=5)
    informer = harness.informer()
    async with harness.running(informer, sync=False):
        retries_at = []
        for attempt in range(1, 6):
            await eventually(lambda: clock.sleepers == 1, f'backoff after failed list {attempt}')
            assert len(lists(api)) == attempt
            assert not informer.synced.is_set()
            assert (informer.last_error or '').startswith('500 InternalError')
            start = clock.monotonic()
            while len(lists(api)) == attempt:
                await clock.advance(0.5)
                # Either still asleep, or awake and sending the next (real) request.
                await eventually(awake_or_asleep(api, clock, attempt), 'a step')
            retries_at.append(clock.monotonic() - start)
        await asyncio.wait_for(informer.synced.wait(), 5.0)
        assert retries_at == [1.0, 2.0, 4.0, 4.0, 4.0]
        assert informer.relists == 5  # failed attempts count too
        assert informer.last_error is None
        assert names(informer) == ['ns/a']


async def test_productive_watch_resets_the_backoff(
    harness: Harness, http: httpx.AsyncClient
) -> None:
    api, clock = harness.api, harness.clock
    api.fail(status=500, method='GET', path_prefix=DEPLOYS, times=2)
    informer = harness.informer()
    async with harness.running(informer, sync=False):
        await eventually(lambda: clock.sleepers == 1, 'first backoff')
        await clock.advance(1.0)
        await eventually(lambda: len(lists(api)) == 2 and clock.sleepers == 1, 'second backoff')
        await clock.advance(2.0)
        await asyncio.wait_for(informer.synced.wait(), 5.0)
        await harness.watching()
        await http.post(DEPLOYS, json=deployment('a'))
        await eventually(lambda: len(harness.events) == 1, 'an event: the watch is productive')
        # The re-watch fails, then the immediate re-list fails: the wait is retry_delay again.
        api.fail(status=500, method='GET', path_prefix=DEPLOYS, times=2)
        api.drop_watches()
        await eventually(lambda: len(lists(api)) == 4 and clock.sleepers == 1, 'a fresh backoff')
        assert clock.monotonic() == 3.0
        await clock.advance(1.0)
        await eventually(lambda: informer.last_error is None and len(lists(api)) == 5, 'relist')
        await harness.watching()
        assert names(informer) == ['ns/a']


async def test_watches_failing_at_once_back_off_although_lists_work(harness: Harness) -> None:
    api, clock = harness.api, harness.clock
    api.seed(deployment('a'))
    api.force_watch_gone(times=3)
    informer = harness.informer()
    list_times: list[float] = []
    async with harness.running(informer, sync=False):
        while len(list_times) < 4:
            count = len(list_times)
            await eventually(awake_or_asleep(api, clock, count), 'a list or a backoff')
            if len(lists(api)) > count:
                list_times.append(clock.monotonic())
            else:
                await clock.advance(0.5)
        await harness.watching()
    assert list_times == [0.0, 1.0, 3.0, 7.0]
    assert informer.relists == 3
    assert harness.events == [('ADDED', 'ns/a', '1')]


async def test_watch_500_without_events_backs_off_then_relists(harness: Harness) -> None:
    api, clock = harness.api, harness.clock
    api.seed(deployment('a'))
    informer = harness.informer()
    async with harness.running(informer):
        api.fail(status=500, method='GET', path_prefix=DEPLOYS, times=1)
        api.drop_watches()
        await eventually(lambda: clock.sleepers == 1, 'the backoff sleep')
        assert (informer.last_error or '').startswith('500')
        assert len(lists(api)) == 1
        await clock.advance(1.0)
        await eventually(lambda: len(lists(api)) == 2 and informer.last_error is None, 'relist')
        await harness.watching()
        assert informer.synced.is_set()
        assert names(informer) == ['ns/a']


async def test_list_timeout_is_retried(harness: Harness) -> None:
    api, clock = harness.api, harness.clock
    api.seed(deployment('a'))
    client = make_client(server=api.url, timeout=0.1)
    try:
        informer = harness.informer(client=client)
        api.latency = 0.3
        async with harness.running(informer, sync=False):
            await eventually(lambda: clock.sleepers == 1, 'a timed-out list')
            assert 'Timeout' in (informer.last_error or '')
            api.latency = 0.0
            await clock.advance(1.0)
            await asyncio.wait_for(informer.synced.wait(), 5.0)
            assert names(informer) == ['ns/a']
    finally:
        await client.aclose()


async def test_a_kind_not_served_is_said_once_then_polled_quietly(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    api, clock = harness.api, harness.clock
    api.fail(status=404, method='GET', path_prefix=DEPLOYS, times=3)
    informer = harness.informer()
    caplog.set_level(logging.DEBUG, logger='llmscaler.kube.informer')
    async with harness.running(informer, sync=False):
        for attempt, delay in enumerate((1.0, 2.0), start=1):
            await eventually(lambda: clock.sleepers == 1, f'backoff after 404 {attempt}')
            await clock.advance(delay)
            await eventually(grew(lambda: len(lists(api)), attempt), f'list {attempt + 1}')
        await eventually(lambda: clock.sleepers == 1, 'backoff after the third 404')
        await clock.advance(4.0)
        await asyncio.wait_for(informer.synced.wait(), 5.0)
    said = [r for r in caplog.records if 'not served' in r.getMessage()]
    assert [r.levelno for r in said] == [logging.INFO, logging.DEBUG, logging.DEBUG]
    assert 'informer deployments: list failed (not served' in said[0].getMessage()


async def test_unreachable_server_never_raises(harness: Harness) -> None:
    clock = harness.clock
    client = make_client(server='http://127.0.0.1:9', timeout=1.0)  # nothing listens on port 9
    try:
        informer = harness.informer(client=client)
        async with harness.running(informer, sync=False):
            for expected in (1.0, 2.0, 4.0):
                await eventually(lambda: clock.sleepers == 1, 'a backoff sleep')
                assert (informer.last_error or '').startswith('ConnectError')
                relists = informer.relists
                await clock.advance(expected)
                await eventually(grew(lambda: informer.relists, relists), 'a retry')
            assert not informer.synced.is_set()
    finally:
        await client.aclose()


async def test_failing_event_handler_does_not_stop_the_informer(
    harness: Harness, http: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    harness.api.seed(deployment('a'))
    seen: list[str] = []

    def handler(kind: str, obj: dict[str, Any]) -> None:
        seen.append(obj['metadata']['name'])
        raise RuntimeError('handler bug')

    informer = harness.informer(on_event=handler)
    async with harness.running(informer):
        await http.post(DEPLOYS, json=deployment('b'))
        await eventually(lambda: seen == ['a', 'b'], 'both events')
        assert names(informer) == ['ns/a', 'ns/b']
    assert 'informer deployments: event handler failed on ADDED ns/b' in caplog.text


# --- selection -------------------------------------------------------------------------------


async def test_label_selected_informer(harness: Harness, http: httpx.AsyncClient) -> None:
    api = harness.api
    api.seed(deployment('cpu', tier='cpu'))
    api.seed(deployment('gpu'))
    informer = harness.informer(labels={'tier': 'gpu', 'app': 'gpu'})
    async with harness.running(informer):
        assert names(informer) == ['ns/gpu']
        assert lists(api)[0]['labelSelector'] == 'tier=gpu,app=gpu'
        assert watches(api)[0]['labelSelector'] == 'tier=gpu,app=gpu'
        await http.post(DEPLOYS, json=deployment('cpu2', tier='cpu'))
        other = deployment('gpu2')
        other['metadata']['labels']['app'] = 'gpu'
        await http.post(DEPLOYS, json=other)
        await eventually(lambda: len(harness.events) == 2, 'the matching object')
        assert [e[1] for e in harness.events] == ['ns/gpu', 'ns/gpu2']
        assert names(informer) == ['ns/gpu', 'ns/gpu2']


async def test_set_based_selector_reaches_the_api(
    harness: Harness, http: httpx.AsyncClient
) -> None:
    api = harness.api
    for name, tier in (('a', 'gpu'), ('b', 'cpu'), ('c', 'tpu')):
        api.seed(deployment(name, tier=tier))
    informer = harness.informer(labels={'tier': ('tpu', 'gpu')})
    async with harness.running(informer):
        assert names(informer) == ['ns/a', 'ns/c']
        assert lists(api)[0]['labelSelector'] == 'tier in (gpu,tpu)'
        assert watches(api)[0]['labelSelector'] == 'tier in (gpu,tpu)'
        # Relabelled out of the selection: the server reports DELETED, the store drops it.
        patch = json.dumps({'metadata': {'labels': {'tier': 'cpu'}}})
        await http.patch(f'{DEPLOYS}/a', content=patch, headers=MERGE)
        await eventually(lambda: names(informer) == ['ns/c'], 'a to leave')
        assert harness.events[-1][:2] == ('DELETED', 'ns/a')


def test_an_empty_value_set_is_refused() -> None:
    client = make_client(server='http://127.0.0.1:9')
    with pytest.raises(ValueError, match='at least one value'):
        Informer(client=client, resource=Deployment, clock=ManualClock(), labels={'tier': ()})
    asyncio.run(client.aclose())


def replicas_only(obj: dict[str, Any]) -> dict[str, Any] | None:
    """Keeps the keys and spec.replicas; drops deployments of tier cpu."""
    meta = obj['metadata']
    if meta['labels'].get('tier') == 'cpu':
        return None
    kept = {k: meta[k] for k in ('namespace', 'name', 'resourceVersion')}
    return {'metadata': kept, 'spec': {'replicas': obj['spec']['replicas']}}


async def test_transform_shapes_the_store_and_the_events(
    harness: Harness, http: httpx.AsyncClient
) -> None:
    api = harness.api
    api.seed(deployment('a', replicas=2))  # RV 1
    api.seed(deployment('cpu', tier='cpu'))  # RV 2: never kept
    informer = harness.informer(transform=replicas_only)
    seen: list[dict[str, Any]] = []
    informer.subscribe(lambda kind, obj: seen.append(obj))
    async with harness.running(informer):
        assert names(informer) == ['ns/a']
        assert informer.get(namespace='ns', name='a') == {
            'metadata': {'namespace': 'ns', 'name': 'a', 'resourceVersion': '1'},
            'spec': {'replicas': 2},
        }
        assert seen == [informer.get(namespace='ns', name='a')]
        await http.post(DEPLOYS, json=deployment('cpu2', tier='cpu'))  # RV 3: dropped
        await http.post(DEPLOYS, json=deployment('b'))  # RV 4
        await eventually(lambda: names(informer) == ['ns/a', 'ns/b'], 'b')
        # A kept object whose transform turns to None is reported deleted, as last kept.
        patch = json.dumps({'metadata': {'labels': {'tier': 'cpu'}}})
        await http.patch(f'{DEPLOYS}/a', content=patch, headers=MERGE)  # RV 5
        await eventually(lambda: names(informer) == ['ns/b'], 'a to go')
        assert harness.events == [
            ('ADDED', 'ns/a', '1'),
            ('ADDED', 'ns/b', '4'),
            ('DELETED', 'ns/a', '1'),
        ]
        assert [o['metadata']['name'] for o in seen] == ['a', 'b', 'a']
        assert informer.resource_version == '5'  # the dropped objects' RVs still count
        assert informer.version == 3


async def test_a_failing_transform_is_a_failed_list(harness: Harness) -> None:
    harness.api.seed(deployment('a'))

    def broken(obj: dict[str, Any]) -> dict[str, Any]:
        raise KeyError('bug')

    informer = harness.informer(transform=broken)
    async with harness.running(informer, sync=False):
        await eventually(lambda: informer.last_error is not None, 'the failure')
        assert not informer.synced.is_set()
        assert 'bug' in (informer.last_error or '')


async def test_all_namespace_informer(harness: Harness, http: httpx.AsyncClient) -> None:
    api = harness.api
    api.seed(deployment('z', namespace='alpha'))
    api.seed(deployment('a', namespace='beta'))
    api.seed(deployment('m', namespace='alpha'))
    informer = harness.informer(namespace=None)
    async with harness.running(informer):
        assert names(informer) == ['alpha/m', 'alpha/z', 'beta/a']
        assert lists(api, ALL_DEPLOYS) == [{}]
        assert len(watches(api, ALL_DEPLOYS)) == 1
        assert informer.get(namespace='beta', name='a') is not None
        assert informer.get(namespace='alpha', name='a') is None
        created = deployment('n', namespace='gamma')
        await http.post('/apis/apps/v1/namespaces/gamma/deployments', json=created)
        await eventually(lambda: len(harness.events) == 4, 'the gamma object')
        assert names(informer)[-1] == 'gamma/n'


async def test_custom_resource_informer_sees_status_writes(
    harness: Harness, http: httpx.AsyncClient
) -> None:
    api = harness.api
    api.seed(va('v', namespace='x'))
    api.seed(va('w', namespace='y'))
    informer = harness.informer(resource=VariantAutoscalingResource, namespace=None, name='')
    assert informer.name == 'VariantAutoscaling'
    async with harness.running(informer):
        assert names(informer) == ['x/v', 'y/w']
        status = json.dumps({'status': {'desiredOptimizedAlloc': {'numReplicas': 2}}})
        path = '/apis/llmd.ai/v1alpha1/namespaces/y/variantautoscalings/w/status'
        assert (await http.patch(path, content=status, headers=MERGE)).status_code == 200
        await eventually(lambda: len(harness.events) == 3, 'the status write')
        assert harness.events[2] == ('MODIFIED', 'y/w', '3')
        w = informer.get(namespace='y', name='w')
        assert w is not None
        assert w['status'] == {'desiredOptimizedAlloc': {'numReplicas': 2}}


async def test_empty_kind_syncs(harness: Harness) -> None:
    informer = harness.informer(resource=ConfigMap, labels={'llmscaler/config': 'true'})
    async with harness.running(informer):
        assert informer.items() == ()
        assert informer.version == 0
        assert len(informer) == 0


def test_bad_retry_settings_are_refused() -> None:
    client = make_client(server='http://127.0.0.1:9')
    with pytest.raises(ValueError, match='retry_delay'):
        Informer(client=client, resource=Deployment, clock=ManualClock(), retry_delay=-1.0)
    asyncio.run(client.aclose())


# --- property: after any history, a re-list leaves the store equal to the server ---------------

STEPS = st.lists(
    st.tuples(
        st.sampled_from(['create', 'scale', 'delete']),
        st.sampled_from(['a', 'b', 'c', 'd']),
        st.booleans(),  # True: while the watch is down (missed, found by the re-list)
    ),
    max_size=12,
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(initial=st.sets(st.sampled_from(['a', 'b', 'c', 'd'])), steps=STEPS)
def test_property_events_replay_to_the_server_state(initial: set[str], steps: Any) -> None:
    asyncio.run(replay_scenario(initial, steps))


async def replay_scenario(initial: set[str], steps: list[tuple[str, str, bool]]) -> None:
    async with FakeAPI() as api:
        client = make_client(server=api.url, timeout=5.0)
        try:
            harness = Harness(api, client, ManualClock())
            for name in sorted(initial):
                api.seed(deployment(name))
            informer = harness.informer()
            resource = api.store_resource(deployment('x'))

            def server() -> dict[str, str]:
                return {o['metadata']['name']: rv(o) for o in api.store.list(resource, 'ns')}

            def cached() -> dict[str, str]:
                return {o['metadata']['name']: rv(o) for o in informer.items()}

            async with harness.running(informer):
                for missed in (False, True):
                    dropped = False
                    for action, name, down in steps:
                        if down != missed:
                            continue
                        if missed and not dropped:
                            api.force_watch_gone()
                            api.drop_watches()
                            dropped = True
                        present = name in server()
                        if action == 'create' and not present:
                            api.seed(deployment(name))
                        elif action == 'scale' and present:
                            obj = api.store.get(resource, 'ns', name)
                            obj['spec']['replicas'] += 1
                            api.store.update(resource, 'ns', name, obj, part='main')
                        elif action == 'delete' and present:
                            api.store.delete(resource, 'ns', name)
                    # Whatever backoff the informer chose, let it pass until it has caught up.
                    loop = asyncio.get_running_loop()
                    deadline = loop.time() + 5.0
                    while cached() != server() or len(api.store.watchers) != 1:
                        assert loop.time() < deadline, 'the informer did not catch up'
                        if harness.clock.sleepers:
                            await harness.clock.advance(4.0)
                        await asyncio.sleep(0.005)
                    # Replaying the events onto an empty map gives the server's state.
                    replayed: dict[str, str] = {}
                    for kind, key, version in harness.events:
                        name = key.split('/')[1]
                        if kind == 'DELETED':
                            assert name in replayed, f'DELETED {name} before it was added'
                            del replayed[name]
                        else:
                            assert (kind == 'ADDED') == (name not in replayed), (kind, name)
                            replayed[name] = version
                    assert replayed == server()
                    assert informer.version == len(harness.events)
        finally:
            await client.aclose()
