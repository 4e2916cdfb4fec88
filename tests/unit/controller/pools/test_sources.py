"""Pool discovery, the per-pool EPP sources, the main cycle's queue read and scale-from-zero's.

Against the in-process fake apiserver and EPP pages on loopback. Worked example: pool `llm/chat`
selects the pods of `cheap` and `dear` (model `m`); its Service `chat-epp` has one ready endpoint,
127.0.0.1 at the `http-metrics` port of an EPP page showing
`inference_extension_flow_control_queue_size{target_model_name="m"} 3`. The main cycle's reading
of `m` in `llm` then has queue_size 3 from that page, whatever the configured source said, and a
scale-from-zero tick wakes `llm/cheap`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from lightkube import AsyncClient

from llmscaler.clock import ManualClock
from llmscaler.collect.readings import ModelReading, ModelScope, Reading
from llmscaler.collect.scrape.source import ScrapeConfig
from llmscaler.config.resolved import Config
from llmscaler.controller.cluster.world import World, build_world
from llmscaler.controller.from_zero.loop import FromZero, PoolPlan
from llmscaler.controller.pools.datastore import V1, V1ALPHA2, Membership, assign, read_pools
from llmscaler.controller.pools.sources import PooledSource, PoolSources, hold, pool_epp_targets
from llmscaler.controller.pools.watch import PoolCaches
from llmscaler.controller.publish import ControllerMetrics
from llmscaler.devcluster import loopback, objects
from llmscaler.devcluster.fakeapi.server import FakeAPI
from llmscaler.kube.client import make_client
from llmscaler.kube.events import EventRecorder
from llmscaler.kube.scale import ScaleClient
from tests.support.from_zero_harness import Epp, queued
from tests.support.pool_objects import alpha_pool, deployment, v1_pool, va, world

NS = 'llm'
GA = '/'.join(V1)
ALPHA = '/'.join(V1ALPHA2)


class Fixed:
    """A configured source whose reading the test sets (an in-memory MetricsSource)."""

    def __init__(self, *models: ModelReading) -> None:
        self.models = models

    async def read(self, *, scope: tuple[ModelScope, ...], now: float) -> Reading:
        return Reading(models=self.models)


async def synced(caches: PoolCaches) -> asyncio.Task[None]:
    task = asyncio.create_task(caches.run())
    await asyncio.wait_for(caches.synced.wait(), timeout=5)
    return task


async def stop(task: asyncio.Task[None]) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


@contextlib.asynccontextmanager
async def watching(api: FakeAPI) -> AsyncIterator[tuple[AsyncClient, PoolCaches]]:
    """An API client to `api` and pool caches it has synced, both stopped on leaving."""
    client = make_client(server=api.url, timeout=5.0)
    caches = PoolCaches(client=client, clock=ManualClock(), scope=None)
    task = await synced(caches)
    try:
        yield client, caches
    finally:
        await stop(task)
        await client.aclose()


@dataclasses.dataclass(frozen=True)
class ByPool:
    """A scale-from-zero loop reading the stored pools' EPP pages; its plan is `plans[-1]`."""

    loop: FromZero
    sources: PoolSources
    membership: Membership
    plans: list[PoolPlan]


@contextlib.asynccontextmanager
async def from_zero_by_pool(
    api: FakeAPI, *, clock: ManualClock | None = None
) -> AsyncIterator[ByPool]:
    """Scale-from-zero over the pools and variants stored in `api`, as they are on entering."""
    async with watching(api) as (client, caches):
        sources = PoolSources(pools=caches, config=ScrapeConfig(), default_port=1)
        w = stored_world(api)
        membership = assign(pools=caches.pools(), entries=w.entries)
        sources.refresh(membership.pools)
        plans = [
            PoolPlan(
                model_pools=membership.model_pools,
                targets=pool_epp_targets(membership=membership, sources=sources),
            )
        ]
        loop = FromZero(
            clock=clock or ManualClock(),
            world_fn=lambda: hold(w, membership),
            epp_fn=lambda: (),
            scale=ScaleClient(client=client),
            events=None,
            metrics=ControllerMetrics(),
            pools_fn=lambda: plans[-1],
        )
        try:
            yield ByPool(loop=loop, sources=sources, membership=membership, plans=plans)
        finally:
            await loop.aclose()
            await sources.aclose()


def seed_chat(api: FakeAPI, *, port: int, namespace: str = NS, pool: str = 'chat') -> None:
    for name in ('cheap', 'dear'):
        api.seed(deployment(name, namespace=namespace, labels={'pool': pool}))
    api.seed(
        va('cheap', namespace=namespace) | {'spec': {**va('cheap')['spec'], 'variantCost': '5'}}
    )
    api.seed(va('dear', namespace=namespace))
    api.seed(
        objects.endpoint_slice(
            service=f'{pool}-epp', namespace=namespace, pod=f'{pool}-epp-0', ip='127.0.0.1',
            metrics_port=port,
        )
    )  # fmt: skip


def stored_world(api: FakeAPI) -> World:
    store = api.store
    vas = store.list(api.store_resource(va('x')), None)
    deploys = store.list(api.store_resource(deployment('x', labels={})), None)
    targets = {
        ('Deployment', d['metadata']['namespace'], d['metadata']['name']): d for d in deploys
    }
    return build_world(vas=vas, targets=targets, pods=(), config=Config())


# --- discovery ---------------------------------------------------------------------------------


async def test_only_the_served_versions_are_watched(api: FakeAPI) -> None:
    api.unserved.add(GA)
    api.seed(alpha_pool())
    async with watching(api) as (_, caches):
        assert caches.served == {GA: False, ALPHA: True}
        assert [(p.key, p.api_version) for p in caches.pools()] == [('llm/chat', ALPHA)]
        paths = {r.path for r in api.requests}
        assert '/apis/inference.networking.k8s.io/v1/inferencepools' in paths  # asked once
        assert not any('watch' in r.query for r in api.requests if GA in r.path)


async def test_without_inferencepools_nothing_more_is_watched(api: FakeAPI) -> None:
    api.unserved.update({GA, ALPHA})
    async with watching(api) as (_, caches):
        assert caches.served == {GA: False, ALPHA: False}
        assert caches.pools() == ()
        assert not any('endpointslices' in r.path for r in api.requests)


# --- the per-pool sources and the main cycle's reading -----------------------------------------


async def test_the_pool_source_gives_the_queue_and_follows_the_pool(
    api: FakeAPI, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level('INFO', logger='llmscaler.controller.pools.sources')
    async with Epp() as epp:
        epp.body = queued(3)
        seed_chat(api, port=epp.port)
        api.seed(v1_pool())
        async with watching(api) as (_, caches):
            sources = PoolSources(pools=caches, config=ScrapeConfig(), default_port=1)
            membership: list[Membership] = []
            selector_queue = ModelReading(model_id='m', namespace=NS, observed_at=1.0, queue_size=7)
            other = ModelReading(model_id='n', namespace=NS, observed_at=1.0, queue_size=2)
            source = PooledSource(
                base=Fixed(selector_queue, other),
                sources=sources,
                membership_fn=lambda: membership[-1],
                events=None,
            )
            try:
                w = stored_world(api)
                membership.append(assign(pools=caches.pools(), entries=w.entries))
                scope = (
                    ModelScope(model_id='m', namespace=NS),
                    ModelScope(model_id='n', namespace=NS),
                )
                reading = await source.read(scope=scope, now=100.0)
                figures = {(m.namespace, m.model_id): m.queue_size for m in reading.models}
                # m has a pool: its queue is its pool's page's, not the configured source's 7.
                assert figures == {(NS, 'm'): 3.0, (NS, 'n'): 2.0}
                assert sources.pool_keys() == ('llm/chat',)
                first = sources.source('llm/chat')
                assert [t.url for t in sources.targets('llm/chat')] == [
                    f'http://127.0.0.1:{epp.port}/metrics'
                ]
                assert 'EPP source of InferencePool llm/chat added' in caplog.text

                # The EPP reference changes: a new source replaces the old one.
                api.store.update(
                    api.store_resource(v1_pool()),
                    NS,
                    'chat',
                    v1_pool(name='chat') | {'spec': {**v1_pool()['spec'], 'endpointPickerRef': {
                        'name': 'chat-epp', 'port': {'number': 9003}}}},
                    part='',
                )  # fmt: skip
                await asyncio.sleep(0.2)
                membership.append(assign(pools=caches.pools(), entries=w.entries))
                await source.read(scope=scope, now=101.0)
                assert sources.source('llm/chat') is not first
                assert 'its EPP reference changed' in caplog.text

                # The pool goes: the source goes, and the variants are held.
                api.store.delete(api.store_resource(v1_pool()), NS, 'chat')
                await asyncio.sleep(0.2)
                membership.append(assign(pools=caches.pools(), entries=w.entries))
                reading = await source.read(scope=scope, now=102.0)
                assert sources.pool_keys() == ()
                assert (
                    'EPP source of InferencePool llm/chat removed: the pool is gone' in caplog.text
                )
                figures = {(m.namespace, m.model_id): m.queue_size for m in reading.models}
                assert figures == {(NS, 'm'): 7.0, (NS, 'n'): 2.0}  # no pool left: the fallback
            finally:
                await sources.aclose()


# --- scale-from-zero by pool -------------------------------------------------------------------


async def test_a_pool_page_wakes_only_the_models_of_its_pool(api: FakeAPI) -> None:
    async with Epp() as epp_a, Epp() as epp_b:
        epp_a.body = queued(1)  # pool a/chat: m has a request queued
        epp_b.body = queued(0)
        seed_chat(api, port=epp_a.port, namespace='a')
        seed_chat(api, port=epp_b.port, namespace='b')
        api.seed(v1_pool(namespace='a'))
        api.seed(alpha_pool(namespace='b'))
        async with from_zero_by_pool(api) as by_pool:
            woken = await by_pool.loop.tick()
            assert [(x.namespace, x.variant, x.target) for x in woken] == [('a', 'cheap', 1)]
            # b's page shows no queue; a's page answers for a's pool only, though b's
            # variants serve the same model.
            epp_b.body = queued(0)
            epp_a.body = queued(0)
            assert await by_pool.loop.tick() == ()


async def test_a_queue_on_another_pools_epp_wakes_nothing_here(api: FakeAPI) -> None:
    async with Epp() as epp_a, Epp() as epp_b:
        epp_a.body = queued(0)
        epp_b.body = queued(4)  # the other pool's EPP sees m queued: not a's business
        seed_chat(api, port=epp_a.port, namespace='a')
        api.seed(v1_pool(namespace='a'))
        api.seed(v1_pool('second', namespace='a', labels={'pool': 'nobody'}))
        api.seed(
            objects.endpoint_slice(
                service='second-epp', namespace='a', pod='x', ip='127.0.0.1',
                metrics_port=epp_b.port,
            )
        )  # fmt: skip
        async with from_zero_by_pool(api) as by_pool:
            assert by_pool.sources.pool_keys() == ('a/chat', 'a/second')
            assert await by_pool.loop.tick() == ()
            assert epp_b.hits == 0  # no idle model belongs to `second`: its page is not read
            assert not [r for r in api.requests if r.method == 'PATCH']


def test_held_variants_never_reach_scale_from_zero() -> None:
    w = world((NS, 'cheap', {'pool': 'none'}))
    membership = assign(pools=(), entries=w.entries)
    assert hold(w, membership).variants == w.variants  # no pool at all: not held
    pools = read_pools({GA: [v1_pool()]})
    membership = assign(pools=pools, entries=w.entries)
    assert hold(w, membership).variants == ()


async def test_an_unusable_pool_gets_one_warning_event_per_problem(api: FakeAPI) -> None:
    bad = v1_pool(failureMode='Maybe')
    client = make_client(server=api.url, timeout=5.0)
    clock = ManualClock()
    events = EventRecorder(client=client, clock=clock, instance='test-0')
    pools = read_pools({GA: [bad]})
    sources = PoolSources(
        pools=PoolCaches(client=client, clock=clock, scope=None),
        config=ScrapeConfig(),
        default_port=1,
    )
    membership = assign(pools=pools, entries=world((NS, 'cheap', {'pool': 'chat'})).entries)
    source = PooledSource(
        base=Fixed(), sources=sources, membership_fn=lambda: membership, events=events
    )
    try:
        scope = (ModelScope(model_id='m', namespace=NS),)
        await source.read(scope=scope, now=1.0)
        await source.read(scope=scope, now=2.0)  # the same problem: no second event
        assert sources.pool_keys() == ()  # an unusable pool gets no source
        resource = api.store_resource({'apiVersion': 'events.k8s.io/v1', 'kind': 'Event'})
        found = [e for e in api.store.list(resource, NS) if e['reason'] == 'InferencePoolProblem']
        assert len(found) == 1
        (event,) = found
        assert event['type'] == 'Warning'
        assert (event['regarding']['kind'], event['regarding']['name']) == ('InferencePool', 'chat')
        assert "failureMode 'Maybe' is not FailOpen or FailClose" in event['note']
        assert event.get('series', {}).get('count', 1) == 1
    finally:
        await sources.aclose()
        await client.aclose()


class Peers:
    """An EPP page (empty queue) that keeps the client address of every request it answers."""

    def __init__(self) -> None:
        self.peers: list[object] = []
        self.port = 0
        self._served: loopback.Served | None = None

    async def __aenter__(self) -> Peers:
        async def page(request: web.Request) -> web.Response:
            assert request.transport is not None
            self.peers.append(request.transport.get_extra_info('peername'))
            return web.Response(body=queued(0), content_type='text/plain')

        app = web.Application()
        app.router.add_get('/metrics', page)
        self._served = await loopback.serve(app)
        self.port = self._served.port
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._served is not None:
            await self._served.close()


async def test_each_epp_keeps_its_own_connection_until_unread_for_a_minute(api: FakeAPI) -> None:
    async with Peers() as epp:
        seed_chat(api, port=epp.port)
        api.seed(v1_pool())
        clock = ManualClock()
        async with from_zero_by_pool(api, clock=clock) as by_pool:
            loop, plans = by_pool.loop, by_pool.plans
            reading = plans[-1]
            for _ in range(3):
                assert await loop.tick() == ()
            assert len(epp.peers) == 3
            assert len(set(epp.peers)) == 1  # one kept-alive connection, reused every tick
            plans.append(PoolPlan(model_pools=by_pool.membership.model_pools, targets={}))
            await clock.advance(61.0)
            await loop.tick()  # unread for a minute: its client is closed
            plans.append(reading)
            await loop.tick()
            assert len(epp.peers) == 4
            assert epp.peers[3] != epp.peers[0]  # read again, over a new connection
