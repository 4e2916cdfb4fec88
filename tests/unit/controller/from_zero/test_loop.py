"""The scale-from-zero loop against the fake apiserver and a tiny EPP metrics server on loopback.

Worked example: model `m` in namespace `llm` has two variants at zero replicas, `cheap`
(variantCost 5, minReplicas 2) and `dear` (variantCost 12). The EPP page shows
`inference_extension_flow_control_queue_size{target_model_name="m"} 3`. One tick writes one merge
patch `{"metadata": {"resourceVersion": <the cached copy's>}, "spec": {"replicas": 2}}` to
`/apis/apps/v1/namespaces/llm/deployments/cheap/scale` (no GET first), counts it in
`wva_replica_scaling_total{direction="up",reason="scale-from-zero"}` and the
`llmscaler_scale_from_zero_seconds` histogram, then creates a `ScaledFromZero` Event about the
VariantAutoscaling `llm/cheap`. `dear` is left alone, in that tick and for `quiet` seconds after.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import socket
import ssl
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from llmscaler.collect.readings import ErrorReason, SourceError
from llmscaler.collect.scrape.source import ScrapeConfig
from llmscaler.controller.cluster.world import World
from llmscaler.controller.from_zero.loop import FromZero, Woken
from llmscaler.kube.client import ObjectRef
from tests.support.from_zero_harness import (
    NS,
    QUEUE,
    Epp,
    Harness,
    deployment,
    epp_pod,
    harness,
    page,
    queued,
    va,
)
from tests.support.pki import Pki, make_pki
from tests.support.raw_http import RawServer, claims, drip, endless
from tests.support.waiting import eventually

DEPLOYS = f'/apis/apps/v1/namespaces/{NS}/deployments'
SCALED = 'wva_replica_scaling_total'
SECONDS = 'llmscaler_scale_from_zero_seconds'
ERRORS = 'wva_errors_total'


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return int(sock.getsockname()[1])


# --- harness -----------------------------------------------------------------------------------


@pytest.fixture
async def h() -> AsyncIterator[Harness]:
    async with harness(
        deployment('cheap'),
        deployment('dear'),
        va('cheap', cost='5', min_replicas=2),
        va('dear', cost='12'),
    ) as made:
        yield made


def scaled(variant: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    labels = {
        'variant_name': variant,
        'namespace': NS,
        'direction': 'up',
        'reason': 'scale-from-zero',
    }
    return (SCALED, tuple(sorted(labels.items())))


def error(error_type: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    labels = {'component': 'scale_from_zero', 'error_type': error_type}
    return (ERRORS, tuple(sorted(labels.items())))


def store_replicas(h: Harness, name: str, replicas: int) -> None:
    """The Deployment `name` at `replicas`, written straight into the store (as the main cycle
    would have it); the loop's World is not refreshed."""
    h.api.store.update(
        h.api.store_resource(deployment('x')),
        NS,
        name,
        deployment(name, replicas=replicas),
        part='main',
    )


def histogram_count(h: Harness) -> float:
    return h.series().get((f'{SECONDS}_count', ()), 0.0)


# --- waking ------------------------------------------------------------------------------------


async def test_only_the_cheapest_variant_is_woken_through_one_scale_patch(h: Harness) -> None:
    h.epp.body = queued(3)
    cached_rv = h.rv('cheap')
    va_obj = h.api.get(
        api_version='llmd.ai/v1alpha1', kind='VariantAutoscaling', namespace=NS, name='cheap'
    )
    woken = await h.loop().tick()
    assert woken == (
        Woken(
            variant='cheap',
            namespace=NS,
            model_id='m',
            seconds=0.0,
            target=2,  # max(1, minReplicas 2)
            queue_size=3.0,
            regarding=ObjectRef(
                api_version='llmd.ai/v1alpha1',
                kind='VariantAutoscaling',
                namespace=NS,
                name='cheap',
                uid=va_obj['metadata']['uid'],
            ),
        ),
    )
    assert (h.replicas('cheap'), h.replicas('dear')) == (2, 0)
    [patch] = h.patches()
    assert patch.path == f'{DEPLOYS}/cheap/scale'
    assert patch.content_type.startswith('application/merge-patch+json')
    assert patch.json() == {'metadata': {'resourceVersion': cached_rv}, 'spec': {'replicas': 2}}
    # One round trip: the cached copy is the precondition, the Scale is not read first.
    assert [r for r in h.api.requests if r.path.endswith('/scale') and r.method == 'GET'] == []
    assert h.family(SCALED) == {scaled('cheap'): 1.0}
    assert histogram_count(h) == 1.0
    assert h.family(ERRORS) == {}


async def test_a_minimum_of_zero_still_wakes_one_replica(h: Harness) -> None:
    h.api.store.delete(h.api.store_resource(va('x')), NS, 'cheap')
    h.refresh()
    h.epp.body = queued(1)
    [woken] = await h.loop().tick()
    assert (woken.variant, woken.target) == ('dear', 1)
    assert h.replicas('dear') == 1


async def test_the_event_is_about_the_va_and_follows_the_write(h: Harness) -> None:
    h.epp.body = queued(3)
    await h.loop().tick()
    [event] = h.stored_events()
    assert event['reason'] == 'ScaledFromZero'
    assert event['type'] == 'Normal'
    assert event['action'] == 'Scale'
    assert event['note'] == '0 -> 2: 3 requests queued for m; cheapest variant cheap woken'
    regarding = event['regarding']
    assert (regarding['kind'], regarding['namespace'], regarding['name']) == (
        'VariantAutoscaling',
        NS,
        'cheap',
    )
    order = [(r.method, r.path) for r in h.api.requests]
    write = order.index(('PATCH', f'{DEPLOYS}/cheap/scale'))
    create = order.index(('POST', f'/apis/events.k8s.io/v1/namespaces/{NS}/events'))
    assert write < create


async def test_no_events_recorder_still_wakes(h: Harness) -> None:
    h.epp.body = queued(2)
    [woken] = await h.loop(events=None).tick()
    assert woken.variant == 'cheap'
    assert h.stored_events() == []


async def test_two_models_each_get_one_wake(h: Harness) -> None:
    for obj in (deployment('other-a'), va('other-a', model='n', cost='3')):
        h.api.seed(obj)
    h.refresh()
    h.epp.body = page(f'{QUEUE}{{target_model_name="m"}} 3', f'{QUEUE}{{target_model_name="n"}} 1')
    woken = await h.loop().tick()
    assert [(w.variant, w.model_id, w.target) for w in woken] == [
        ('cheap', 'm', 2),
        ('other-a', 'n', 1),
    ]
    assert len(h.patches()) == 2


# --- nothing to wake ---------------------------------------------------------------------------


async def test_an_empty_queue_wakes_nothing(h: Harness) -> None:
    h.epp.body = queued(0)
    assert await h.loop().tick() == ()
    assert h.epp.hits == 1
    assert h.patches() == []
    assert histogram_count(h) == 0.0


async def test_a_model_with_a_replica_is_left_to_the_main_cycle(h: Harness) -> None:
    store_replicas(h, 'dear', 1)
    h.refresh()
    h.epp.body = queued(5)
    assert await h.loop().tick() == ()
    assert h.epp.hits == 0  # no idle model, no page to read
    assert h.patches() == []
    assert (h.replicas('cheap'), h.replicas('dear')) == (0, 1)


async def test_an_unreachable_epp_wakes_nothing(h: Harness) -> None:
    h.epp_pods = [epp_pod('epp-0', port=closed_port())]
    assert await h.loop(timeout=0.5).tick() == ()
    assert h.patches() == []
    assert h.family(ERRORS) == {}


async def test_an_epp_answering_500_wakes_nothing(h: Harness) -> None:
    h.epp.status = 500
    h.epp.body = queued(3)
    assert await h.loop().tick() == ()
    assert h.epp.hits == 1
    assert h.patches() == []


@pytest.mark.parametrize(
    'body',
    [
        b'\x00\xff\xfe garbage {{{ \x80\n\n',
        b'<html><body>502 Bad Gateway</body></html>',
        page(f'{QUEUE}{{target_model_name="m"}} banana'),
        page(f'{QUEUE}{{target_model_name="m"}} NaN'),
        page(f'{QUEUE}{{target_model_name="m"}} +Inf'),
        page(f'{QUEUE}{{target_model_name="m"}} -3'),
        page(f'{QUEUE}{{target_model_name="m" 3'),
        page(f'{QUEUE} 3'),  # no model label
        queued(3, model='another-model'),
        # A page cut before the end of its last line: the parser does not keep that line.
        f'# TYPE {QUEUE} gauge\n{QUEUE}{{target_model_name="m"}} 3'.encode(),
    ],
)
async def test_a_garbled_page_wakes_nothing(h: Harness, body: bytes) -> None:
    h.epp.body = body
    assert await h.loop().tick() == ()
    assert h.epp.hits == 1
    assert h.patches() == []


async def test_epp_pods_of_other_namespaces_are_ignored(h: Harness) -> None:
    async with Epp() as foreign:
        foreign.body = queued(5)
        h.epp_pods.append(epp_pod('epp-0', namespace='elsewhere', port=foreign.port))
        assert await h.loop().tick() == ()
        assert (h.epp.hits, foreign.hits) == (1, 0)
        assert h.patches() == []


async def test_queues_of_several_epp_pods_add_up(h: Harness) -> None:
    async with Epp() as second:
        h.epp.body = queued(2)
        second.body = queued(1.5)
        h.epp_pods.append(epp_pod('epp-1', port=second.port))
        [woken] = await h.loop().tick()
        assert woken.queue_size == 3.5
        assert (h.epp.hits, second.hits) == (1, 1)


# --- conflicts and failures --------------------------------------------------------------------


async def test_a_target_changed_since_the_cache_conflicts_and_nothing_is_written(
    h: Harness,
) -> None:
    cached_rv = h.rv('cheap')
    # The target changes after the cache was read (a label, replicas still 0).
    changed = deployment('cheap')
    changed['metadata']['labels']['touched'] = 'yes'
    h.api.store.update(h.api.store_resource(changed), NS, 'cheap', changed, part='main')
    assert h.rv('cheap') != cached_rv
    h.epp.body = queued(3)
    assert await h.loop().tick() == ()
    [patch] = h.patches()
    assert patch.json()['metadata'] == {'resourceVersion': cached_rv}
    assert h.replicas('cheap') == 0
    assert h.family(ERRORS) == {}
    assert h.family(SCALED) == {}
    assert histogram_count(h) == 0.0
    assert h.stored_events() == []


async def test_the_write_carries_the_version_of_the_copy_that_showed_zero(h: Harness) -> None:
    # The main cycle scales `cheap` to 3 while the EPP page is being read: a world read after
    # the page would show that newer copy; the write must still be made against the old one.
    stale = h.world
    store_replicas(h, 'cheap', 3)
    newer = h.fresh_world()
    worlds = iter([stale])
    h.epp.body = queued(3)
    assert await h.loop(world_fn=lambda: next(worlds, newer)).tick() == ()
    assert h.replicas('cheap') == 3


async def test_a_failed_write_counts_an_error_and_backs_off_for_quiet(h: Harness) -> None:
    h.api.fail(status=500, method='PATCH', path_prefix=f'{DEPLOYS}/cheap/scale')
    h.epp.body = queued(3)
    loop = h.loop(quiet=5.0)
    assert await loop.tick() == ()
    assert h.family(ERRORS) == {error('Failed'): 1.0}
    assert h.family(SCALED) == {}
    assert h.replicas('cheap') == 0
    await h.clock.advance(1.0)
    assert await loop.tick() == ()
    assert len(h.patches()) == 1  # backing off: neither cheap nor dear
    await h.clock.advance(4.0)
    [woken] = await loop.tick()
    assert woken.variant == 'cheap'
    assert h.replicas('cheap') == 2


# --- quiet -------------------------------------------------------------------------------------


async def test_quiet_suppresses_a_second_wake_of_the_model(h: Harness) -> None:
    h.epp.body = queued(3)
    loop = h.loop(quiet=5.0)
    [first] = await loop.tick()
    assert first.variant == 'cheap'
    # The informer has not caught up: the world still shows the whole model at zero. Neither
    # `cheap` again nor the next cheapest, `dear`, may be woken.
    await h.clock.advance(0.1)
    assert await loop.tick() == ()
    assert len(h.patches()) == 1
    assert h.replicas('dear') == 0


async def test_quiet_window_ends_after_quiet_seconds(h: Harness) -> None:
    h.epp.body = queued(3)
    loop = h.loop(quiet=5.0)
    assert len(await loop.tick()) == 1
    await h.scale_back_to_zero('cheap')
    h.refresh()  # the informer shows `cheap` at zero again, at a new resourceVersion
    await h.clock.advance(4.0)
    assert await loop.tick() == ()
    assert len(h.patches()) == 2  # the scale-back; no wake
    await h.clock.advance(1.0)  # 5 s since the wake
    [again] = await loop.tick()
    assert (again.variant, again.target) == ('cheap', 2)
    assert h.replicas('cheap') == 2
    assert h.family(SCALED) == {scaled('cheap'): 2.0}


# --- timing ------------------------------------------------------------------------------------


async def test_seconds_run_from_the_page_that_showed_the_queue_to_the_write(h: Harness) -> None:
    clock = h.clock

    async def slow_epp() -> None:
        await clock.advance(0.125)  # before the page: not part of the measure

    async def slow_write() -> None:
        # The fake holds the PATCH for `latency` (real) seconds after recording it; the clock
        # moves 0.25 s meanwhile.
        while not h.patches():
            await asyncio.sleep(0.001)
        await clock.advance(0.25)

    h.epp.body = queued(3)
    h.epp.before_answer = slow_epp
    h.api.latency = 0.3
    mover = asyncio.create_task(slow_write())
    [woken] = await h.loop().tick()
    await mover
    assert woken.seconds == 0.25
    assert clock.monotonic() == 0.375
    series = h.series()
    assert series[(f'{SECONDS}_sum', ())] == 0.25
    assert series[(f'{SECONDS}_bucket', (('le', '0.1'),))] == 0.0
    assert series[(f'{SECONDS}_bucket', (('le', '0.25'),))] == 1.0


# --- run() -------------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def running(loop: FromZero) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.create_task(loop.run())
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_run_survives_an_exception_in_world_fn(h: Harness) -> None:
    calls: list[int] = []

    def world_fn() -> World:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError('cache exploded')
        return h.world

    h.epp.body = queued(3)
    loop = h.loop(world_fn=world_fn, interval=0.1)
    async with running(loop) as task:
        await eventually(lambda: h.family(ERRORS) == {error('tick'): 1.0}, 'the failed tick')
        await eventually(lambda: h.clock.sleepers == 1, 'the loop to sleep')
        assert h.patches() == []
        await h.clock.advance(0.1)
        await eventually(lambda: len(h.patches()) == 1, 'the wake')
        await eventually(lambda: len(h.stored_events()) == 1, 'the event')
        assert not task.done()
    assert h.replicas('cheap') == 2
    assert len(calls) == 2


async def test_run_ticks_every_interval(h: Harness) -> None:
    h.epp.body = queued(0)
    loop = h.loop(interval=0.1)
    async with running(loop) as task:
        await eventually(lambda: h.epp.hits == 1 and h.clock.sleepers == 1, 'the first tick')
        await h.clock.advance(0.05)
        assert h.epp.hits == 1
        await h.clock.advance(0.05)
        await eventually(lambda: h.epp.hits == 2, 'the second tick')
        assert not task.done()


# --- bounded reads ------------------------------------------------------------------------------


async def timed_tick(loop: FromZero, *, guard: float) -> tuple[tuple[Woken, ...], float]:
    """One tick and its duration; `guard` seconds turn a hang into a failure, not a wait."""
    started = time.monotonic()
    woken = await asyncio.wait_for(loop.tick(), timeout=guard)
    return woken, time.monotonic() - started


async def test_a_dripping_epp_is_given_up_at_the_timeout(h: Harness) -> None:
    # A byte every 0.2 s: a per-read timeout of 0.5 s would wait for ever.
    async with RawServer(drip(every=0.2)) as server:
        h.epp_pods = [epp_pod('epp-0', port=server.port)]
        loop = h.loop(timeout=0.5)
        woken, took = await timed_tick(loop, guard=1.5)
    assert woken == ()
    assert took < 1.5
    (error,) = loop.errors
    assert error.reason is ErrorReason.TIMEOUT
    # Every page of a tick shares the tick's deadline: this one's was what was left of it.
    assert re.fullmatch(
        r'no complete page within 0\.[0-9]+s \([0-9]+ bytes of the body received\); '
        r'the tick deadline of 0\.5s ran out',
        error.message,
    )
    assert h.patches() == []


async def test_a_slow_epp_does_not_hold_up_the_wake_another_one_asks_for(h: Harness) -> None:
    h.epp.body = queued(3)
    async with RawServer(drip(every=0.2)) as server:
        h.epp_pods.append(epp_pod('epp-1', port=server.port))
        loop = h.loop(timeout=0.5)
        woken, took = await timed_tick(loop, guard=1.5)
    assert [w.variant for w in woken] == ['cheap']
    assert took < 1.5
    assert [e.reason for e in loop.errors] == [ErrorReason.TIMEOUT]


async def test_an_endless_epp_page_is_cut_at_the_cap(h: Harness) -> None:
    async with RawServer(endless()) as server:
        h.epp_pods = [epp_pod('epp-0', port=server.port)]
        loop = h.loop(timeout=5.0, scrape=ScrapeConfig(max_page_bytes=64 * 1024))
        woken, took = await timed_tick(loop, guard=15.0)
    assert (woken, took < 5.0) == ((), True)
    (error,) = loop.errors
    assert (error.reason, error.message) == (ErrorReason.BAD_RESPONSE, 'body over 65536 bytes')


async def test_an_epp_page_announced_over_the_cap_is_refused_unread(h: Harness) -> None:
    async with RawServer(claims(10**6)) as server:
        h.epp_pods = [epp_pod('epp-0', port=server.port)]
        loop = h.loop(timeout=2.0, scrape=ScrapeConfig(max_page_bytes=1000))
        woken, took = await timed_tick(loop, guard=6.0)
    assert (woken, took < 1.0) == ((), True)
    (error,) = loop.errors
    assert (error.reason, error.message) == (
        ErrorReason.BAD_RESPONSE,
        'body over 1000 bytes (Content-Length 1000000), not read',
    )


async def test_errors_are_those_of_the_last_tick_that_read(h: Harness) -> None:
    h.epp.status = 500
    loop = h.loop()
    assert await loop.tick() == ()
    assert loop.errors == (SourceError(h.epp_targets()[0].url, ErrorReason.HTTP_5XX, 'HTTP 500'),)
    h.epp.status = 200
    assert await loop.tick() == ()
    assert len(loop.errors) == 0


def test_an_invalid_timeout_is_refused(h: Harness) -> None:
    with pytest.raises(ValueError, match=r'^timeout must be a positive number of seconds'):
        h.loop(timeout=float('nan'))


# --- credentials and TLS ------------------------------------------------------------------------


async def test_a_token_is_not_sent_to_a_plain_http_epp(h: Harness) -> None:
    h.epp.body = queued(3)
    loop = h.loop(scrape=ScrapeConfig(bearer_token='s3cret'))
    assert await loop.tick() == ()
    assert h.epp.hits == 0  # neither the token in clear nor a request without it
    (error,) = loop.errors
    assert error.reason is ErrorReason.UNREACHABLE
    assert error.message.startswith('credentials are not sent in clear: http://127.0.0.1:')
    assert h.patches() == []


async def test_the_opt_in_sends_the_token_to_a_plain_http_epp(h: Harness) -> None:
    h.epp.body = queued(3)
    loop = h.loop(scrape=ScrapeConfig(bearer_token='s3cret', allow_http_credentials=True))
    [woken] = await loop.tick()
    assert woken.variant == 'cheap'
    assert h.epp.authorization == ['Bearer s3cret']


@pytest.fixture(scope='module')
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory)


async def test_an_https_epp_is_verified_and_gets_the_token(
    h: Harness, pki: Pki, tmp_path: Any
) -> None:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(pki.server_cert, pki.server_key)
    token = tmp_path / 'token'
    token.write_text('s3cret\n')
    async with Epp(tls=context) as secure:
        secure.body = queued(3)
        h.epp_pods = [epp_pod('epp-0', port=secure.port)]
        h.epp_scheme = 'https'
        unverified = h.loop(scrape=ScrapeConfig(token_file=token))
        assert await unverified.tick() == ()
        (error,) = unverified.errors
        assert error.reason is ErrorReason.UNREACHABLE
        assert 'CERTIFICATE_VERIFY_FAILED' in error.message
        assert secure.hits == 0
        [woken] = await h.loop(scrape=ScrapeConfig(token_file=token, ca_file=pki.ca)).tick()
        assert woken.variant == 'cheap'
        assert secure.authorization == ['Bearer s3cret']
