"""The whole controller process (`Controller.run`, `main`) against the fake apiserver.

Objects, the in-memory metric source and the read-back helpers are those of
test_controller_cycle. Leader election runs on the real clock with short timings (lease 2 s,
renew deadline 1.5 s, retry 0.5 s, cycle 1 s); the other tests drive a ManualClock.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import pytest

from llmscaler.clock import ManualClock, parse_rfc3339
from llmscaler.controller.app import EXIT_CONFIG, EXIT_LOST, EXIT_OK, Controller, main
from llmscaler.devcluster.fakeapi import FakeAPI
from llmscaler.model import EMPTY_STATE
from tests.unit.test_controller_cycle import (
    SATURATED,
    FakeSource,
    events,
    replicas,
    run_options,
    samples,
    scale_writes,
    seed_variant,
    status_writes,
)
from tests.waiting import eventually

LEASE_NAME = '72dd1cf1.llm-d.ai'
LEASE = f'/apis/coordination.k8s.io/v1/namespaces/ctl/leases/{LEASE_NAME}'
ELECTION = (
    '--leader-elect',
    '--leader-election-lease-duration', '2s',
    '--leader-election-renew-deadline', '1.5s',
    '--leader-election-retry-period', '0.5s',
)  # fmt: skip


@pytest.fixture
async def api() -> AsyncIterator[FakeAPI]:
    async with FakeAPI() as server:
        yield server


@asynccontextmanager
async def running(controller: Controller) -> AsyncIterator[asyncio.Task[int]]:
    """`controller.run()` as a task; stopped (and its exit code checked) on the way out."""
    stop = asyncio.Event()
    task = asyncio.create_task(controller.run(stop=stop))
    try:
        yield task
    finally:
        stop.set()
        await asyncio.wait_for(asyncio.shield(task), 5.0)


def cycles(controller: Controller) -> float:
    """How many main cycles the controller has completed."""
    page = samples(controller.metrics.render().decode())
    return sum(
        value
        for (name, labels), value in page.items()
        if name == 'wva_optimization_duration_seconds_count'
    )


def leader_gauge(controller: Controller) -> float:
    return samples(controller.metrics.render().decode())[('llmscaler_leader', ())]


def lease(api: FakeAPI) -> dict[str, object]:
    obj = api.get(
        api_version='coordination.k8s.io/v1', kind='Lease', namespace='ctl', name=LEASE_NAME
    )
    spec: dict[str, object] = obj['spec']
    return spec


def writes(api: FakeAPI) -> list[tuple[str, str]]:
    """Every write the controllers made to scale targets, VAs and Events."""
    return [
        (r.method, r.path)
        for r in api.requests
        if r.method in ('POST', 'PUT', 'PATCH', 'DELETE') and 'coordination.k8s.io' not in r.path
    ]


async def get(port: int | None, path: str) -> tuple[int, str]:
    assert port is not None
    async with httpx.AsyncClient() as http:
        response = await http.get(f'http://127.0.0.1:{port}{path}')
    return response.status_code, response.text


# --- probes -----------------------------------------------------------------------------------


async def test_healthz_and_readyz_before_and_after_the_caches_sync(api: FakeAPI) -> None:
    seed_variant(api, 'a')
    api.fail(status=500, method='GET', path_prefix='/api/v1/pods', times=1)
    clock = ManualClock()
    controller = Controller(
        options=run_options(api), clock=clock, source=FakeSource(api, load={'a': SATURATED})
    )
    async with running(controller) as task:
        await eventually(lambda: controller.health_port is not None, 'the probes to listen')
        assert await get(controller.health_port, '/healthz') == (200, 'ok')
        await eventually(lambda: controller.caches.pods.last_error is not None, 'the failed list')
        others = [i for i in controller.caches.all() if i is not controller.caches.pods]
        await eventually(lambda: all(i.synced.is_set() for i in others), 'the other caches')
        assert await get(controller.health_port, '/readyz') == (
            503,
            '1 of 5 caches not synced yet',  # LeaderWorkerSets are optional
        )
        assert (await get(controller.metrics_port, '/readyz'))[0] == 404  # another listener
        await asyncio.sleep(0.05)
        assert status_writes(api, 'a') == 0  # no cycle before sync
        assert cycles(controller) == 0

        await clock.advance(1.0)  # the pods informer's backoff
        await eventually(controller.caches.synced, 'the pods cache')
        assert await get(controller.health_port, '/readyz') == (200, 'ok')
        assert await get(controller.health_port, '/healthz') == (200, 'ok')
        await eventually(lambda: status_writes(api, 'a') == 1, 'the first cycle')
        assert scale_writes(api, 'a') == [2]
        assert leader_gauge(controller) == 1.0  # without election, it leads at once
    assert task.result() == EXIT_OK
    assert controller.health_port is None
    assert controller.metrics_port is None


async def test_a_cycle_that_raises_is_counted_and_the_loop_goes_on(api: FakeAPI) -> None:
    seed_variant(api, 'a')
    source = FakeSource(api, load={'a': SATURATED})
    failures = ['boom']

    def explode() -> None:
        if failures:
            raise RuntimeError(failures.pop())

    source.on_read = explode
    clock = ManualClock()
    controller = Controller(options=run_options(api), clock=clock, source=source)
    async with running(controller) as task:
        await eventually(lambda: cycles(controller) == 1, 'the failed cycle')
        assert scale_writes(api) == []
        await clock.advance(1.0)
        await eventually(lambda: cycles(controller) == 2, 'the next cycle')
        assert scale_writes(api, 'a') == [2]
        page = samples(controller.metrics.render().decode())
        assert page[('wva_optimization_duration_seconds_count', (('status', 'error'),))] == 1
        assert page[('wva_optimization_duration_seconds_count', (('status', 'success'),))] == 1
        assert page[('wva_errors_total', (('component', 'engine'), ('error_type', 'cycle')))] == 1
        assert not task.done()


# --- leader election --------------------------------------------------------------------------


async def test_one_leader_writes_and_a_stopped_leader_hands_over(api: FakeAPI) -> None:
    seed_variant(api, 'a', high=10)
    controllers = [
        Controller(
            options=run_options(api, *ELECTION, '--identity', name),
            source=FakeSource(api, load={'a': SATURATED}),
        )
        for name in ('ctl-0', 'ctl-1')
    ]
    stops = [asyncio.Event(), asyncio.Event()]
    tasks = [asyncio.create_task(c.run(stop=s)) for c, s in zip(controllers, stops, strict=True)]
    try:
        await eventually(lambda: any(c.elector.is_leader for c in controllers), 'a leader')
        (leader,) = [c for c in controllers if c.elector.is_leader]
        (standby,) = [c for c in controllers if c is not leader]
        await eventually(lambda: cycles(leader) >= 2, 'two cycles of the leader')
        assert not standby.elector.is_leader
        assert (leader_gauge(leader), leader_gauge(standby)) == (1.0, 0.0)
        assert cycles(standby) == 0
        assert standby.cycle.state == EMPTY_STATE
        assert lease(api)['holderIdentity'] == leader.options.identity
        assert standby.caches.synced()  # the standby's caches are warm
        assert scale_writes(api, 'a')[:1] == [2]
        assert status_writes(api, 'a') >= 2
        instances = {e['reportingInstance'] for e in events(api)}
        assert instances == {leader.options.identity}

        # The leader stops: it releases the Lease and the standby takes over at its next retry.
        loop = asyncio.get_running_loop()
        stopped_at = loop.time()
        stops[controllers.index(leader)].set()
        assert await asyncio.wait_for(tasks[controllers.index(leader)], 5.0) == EXIT_OK
        assert lease(api).get('holderIdentity') in (None, standby.options.identity)
        await eventually(lambda: standby.elector.is_leader, 'the takeover', timeout=3.0)
        assert loop.time() - stopped_at < 1.2  # not the 2 s lease duration
        assert lease(api)['holderIdentity'] == standby.options.identity
        assert lease(api)['leaseTransitions'] == 1
        await eventually(lambda: cycles(standby) >= 1, 'the new leader cycles')
        await eventually(
            lambda: standby.options.identity in {e['reportingInstance'] for e in events(api)},
            'an Event from the new leader',
        )
        assert cycles(leader) >= 2
        assert not leader.elector.is_leader
    finally:
        for stop in stops:
            stop.set()
        codes = await asyncio.wait_for(asyncio.gather(*tasks), 5.0)
    assert codes == [EXIT_OK, EXIT_OK]


async def test_renewal_failing_for_the_deadline_exits_1_and_writes_nothing_more(
    api: FakeAPI,
) -> None:
    seed_variant(api, 'a', high=10)
    controller = Controller(
        options=run_options(api, *ELECTION), source=FakeSource(api, load={'a': SATURATED})
    )
    stop = asyncio.Event()
    task = asyncio.create_task(controller.run(stop=stop))
    try:
        await eventually(lambda: cycles(controller) >= 1, 'the first cycle')
        loop = asyncio.get_running_loop()
        api.fail(status=500, path_prefix='/apis/coordination.k8s.io/', times=1_000_000)
        failing_at = loop.time()
        code = await asyncio.wait_for(asyncio.shield(task), 5.0)
        lost_after = loop.time() - failing_at
    finally:
        stop.set()
        await asyncio.wait_for(task, 5.0)
    assert code == EXIT_LOST
    assert 1.0 <= lost_after < 2.5  # the renew deadline (1.5 s) from the last good renewal
    assert not controller.elector.is_leader
    assert leader_gauge(controller) == 0.0
    assert lease(api)['holderIdentity'] == controller.options.identity  # not released: it lapses
    before = len(writes(api))
    await asyncio.sleep(1.2)  # longer than a cycle
    assert len(writes(api)) == before
    assert replicas(api, 'a') >= 2


async def test_the_lease_is_renewed_while_the_caches_sync(api: FakeAPI) -> None:
    """A leader whose caches take longer than the lease to sync must keep renewing meanwhile,
    or a standby would take the Lease while this replica goes on to act as leader."""
    seed_variant(api, 'a')
    api.fail(status=500, method='GET', path_prefix='/api/v1/pods', times=3)  # 1 + 2 + 4 s
    clock = ManualClock()
    controller = Controller(
        options=run_options(api, *ELECTION),
        clock=clock,
        source=FakeSource(api, load={'a': SATURATED}),
    )

    def renewals() -> int:
        return len(api.requests_to(method='PUT', path=LEASE))

    async with running(controller) as task:
        await eventually(lambda: controller.elector.is_leader, 'the Lease')
        renew_times: list[float | None] = []
        for step in range(1, 13):  # 6 s of clock, three lease durations
            await clock.advance(0.5)
            await eventually(lambda: renewals() == step, f'renewal {step}')  # noqa: B023
            renew_times.append(parse_rfc3339(str(lease(api)['renewTime'])))
            assert controller.elector.is_leader
            assert not controller.caches.synced()
            assert status_writes(api, 'a') == 0
            assert cycles(controller) == 0
        assert None not in renew_times
        assert len(set(renew_times)) == len(renew_times)  # a fresh renewTime every time
        await clock.advance(1.0)  # t = 7: the fourth list succeeds
        await eventually(controller.caches.synced, 'the pods cache')
        await eventually(lambda: status_writes(api, 'a') == 1, 'the first cycle')
        assert not task.done()


# --- main ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    'argv',
    [
        ['--bogus'],
        ['--metrics-source', 'pods', '--leader-election-renew-deadline', '70s'],
        ['--metrics-source', 'pods', '--metrics-bind-address', 'here'],
        ['--metrics-source', 'prometheus'],  # no Prometheus URL
    ],
)
def test_main_exits_2_on_a_fatal_option(argv: list[str]) -> None:
    assert main(argv) == EXIT_CONFIG


def test_main_help_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(['--help'])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith('usage: llmscaler run')
    assert '--leader-elect' in out
    assert '--actuation' in out
