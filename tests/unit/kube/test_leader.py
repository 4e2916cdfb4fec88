"""Lease leader election against the fake apiserver over HTTP, with time driven by hand.

Timings are client-go's defaults: lease 15 s, renew deadline 10 s, retry 2 s. The clock moves in
1 s steps and, after each, the test waits until every elector task is parked on the clock again
(or done), so "at t = 27" means every attempt due by t = 27 has run to completion.

Worked example (standby takeover): A acquires at t=0 and renews at 2, 4, ..., 10, then dies. B
polls at odd times; at t=11 it first sees A's t=10 record and notes observedTime = 11. It may take
over once 15 s of its own time have passed, i.e. at its first poll with t ≥ 26: t = 27. A
remote-wall-clock rule (renewTime 10 + 15) would wrongly have taken over at t = 25.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lightkube import AsyncClient

from llmscaler.clock import ManualClock, rfc3339
from llmscaler.devcluster.fakeapi.server import FakeAPI
from llmscaler.kube.client import make_client
from llmscaler.kube.leader import LeaderConfig, LeaderElector

NS = 'ns'
NAME = 'ctl-lock'
LEASE_PATH = f'/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/{NAME}'
LEASES_PATH = f'/apis/coordination.k8s.io/v1/namespaces/{NS}/leases'


class ParkingClock(ManualClock):
    """A ManualClock that knows which tasks sleep on it, and until when."""

    def __init__(self) -> None:
        super().__init__()
        self.parked: dict[asyncio.Task[Any], float] = {}

    async def sleep(self, seconds: float) -> None:
        task = asyncio.current_task()
        assert task is not None
        if seconds > 0:
            self.parked[task] = self.monotonic() + seconds
        try:
            await super().sleep(seconds)
        finally:
            self.parked.pop(task, None)


@dataclass
class Harness:
    api: FakeAPI
    clock: ParkingClock
    clients: list[AsyncClient] = field(default_factory=list)
    tasks: list[asyncio.Task[Any]] = field(default_factory=list)
    changes: dict[str, list[tuple[bool, float]]] = field(default_factory=dict)

    def elector(
        self,
        identity: str,
        *,
        url: str | None = None,
        on_renewal: Callable[[float, bool], None] | None = None,
    ) -> LeaderElector:
        client = make_client(server=url or self.api.url, timeout=5.0)
        self.clients.append(client)
        log = self.changes.setdefault(identity, [])
        return LeaderElector(
            client=client,
            clock=self.clock,
            config=LeaderConfig(
                namespace=NS,
                identity=identity,
                name=NAME,
                lease_duration=15.0,
                renew_deadline=10.0,
                retry_period=2.0,
            ),
            on_change=lambda leader: log.append((leader, self.clock.monotonic())),
            on_renewal=on_renewal,
        )

    async def leader(self, identity: str) -> tuple[LeaderElector, asyncio.Task[None]]:
        """An elector that has acquired the Lease, and the task in which it holds it."""
        elector = self.elector(identity)
        await elector.acquire()
        return elector, self.start(elector.hold())

    def start(self, work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.ensure_future(work)
        self.tasks.append(task)
        return task

    async def quiesce(self) -> None:
        """Wait (real time) until every task is done or sleeping on the clock into the future."""
        for _ in range(5000):
            await asyncio.sleep(0)
            now = self.clock.monotonic()
            if all(t.done() or self.clock.parked.get(t, -math.inf) > now for t in self.tasks):
                return
            await asyncio.sleep(0.001)
        raise AssertionError('elector tasks did not settle')

    async def run_until(self, moment: float) -> None:
        await self.quiesce()
        while self.clock.monotonic() < moment:
            await self.clock.advance(min(1.0, moment - self.clock.monotonic()))
            await self.quiesce()

    async def close(self) -> None:
        """Cancel every task the test started and wait for them, whatever they end with, then
        close every elector's client."""
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        for client in self.clients:
            await client.aclose()

    def lease(self) -> dict[str, Any]:
        return self.api.get(
            api_version='coordination.k8s.io/v1', kind='Lease', namespace=NS, name=NAME
        )

    def overwrite(self, **spec: Any) -> None:
        """Write the Lease as another party would (keeping its resourceVersion check off)."""
        current = self.lease()
        current['spec'].update(spec)
        del current['metadata']['resourceVersion']
        self.api.store.update(self.api.store_resource(current), NS, NAME, current, part='main')

    def wall(self, t: float) -> str:
        return rfc3339(wall=self.clock.wall() - self.clock.monotonic() + t, micro=True)


async def lead(elector: LeaderElector) -> None:
    """What the controller does: acquire, hold until lost, and try again."""
    while True:
        await elector.acquire()
        await elector.hold()


@pytest.fixture
async def h() -> AsyncIterator[Harness]:
    async with FakeAPI() as api:
        harness = Harness(api=api, clock=ParkingClock())
        try:
            yield harness
        finally:
            await harness.close()


def test_config_defaults_match_the_controller_manager() -> None:
    config = LeaderConfig(namespace='x', identity='me')
    assert (config.name, config.lease_duration, config.renew_deadline, config.retry_period) == (
        '72dd1cf1.llm-d.ai',
        60.0,
        50.0,
        10.0,
    )


@pytest.mark.parametrize(
    'bad',
    [
        {'identity': ''},
        {'namespace': ''},
        {'lease_duration': 0.0},
        {'retry_period': -1.0},
        {'renew_deadline': math.nan},
        {'renew_deadline': 60.0},
        {'retry_period': 51.0},
    ],
)
def test_config_rejects_unsafe_timings(bad: dict[str, Any]) -> None:
    values: dict[str, Any] = {'namespace': 'x', 'identity': 'me', **bad}
    with pytest.raises(ValueError, match=r'\w'):
        LeaderConfig(**values)


async def test_the_first_elector_creates_the_lease(h: Harness) -> None:
    a = h.elector('a')
    await a.acquire()
    assert a.is_leader
    assert a.transitions == 0
    assert h.changes['a'] == [(True, 0.0)]
    spec = h.lease()['spec']
    assert spec == {
        'holderIdentity': 'a',
        'leaseDurationSeconds': 15,
        'acquireTime': h.wall(0),
        'renewTime': h.wall(0),
        'leaseTransitions': 0,
    }
    # MicroTime on the wire keeps all six fraction digits, even when they are zeros.
    assert spec['renewTime'].endswith('.000000Z')
    posts = h.api.requests_to(method='POST', path=LEASES_PATH)
    assert len(posts) == 1
    assert '"renewTime":"' + h.wall(0) + '"' in posts[0].body.decode()


async def test_renewals_are_puts_carrying_the_read_resource_version(h: Harness) -> None:
    a = h.elector('a')
    await a.acquire()
    h.start(a.hold())
    await h.run_until(6)
    puts = h.api.requests_to(method='PUT', path=LEASE_PATH)
    # The create made RV 1; each renewal replaces the version it read and makes the next one.
    assert [p.json()['metadata']['resourceVersion'] for p in puts] == ['1', '2', '3']
    spec = h.lease()['spec']
    assert spec['renewTime'] == h.wall(6)
    assert spec['acquireTime'] == h.wall(0)
    assert spec['leaseTransitions'] == 0
    assert a.is_leader


async def test_the_standby_waits_while_the_leader_renews(h: Harness) -> None:
    a, b = h.elector('a'), h.elector('b')
    h.start(lead(a))
    await h.run_until(1)
    waiting = h.start(b.acquire())
    await h.run_until(60)
    assert a.is_leader
    assert not b.is_leader
    assert not waiting.done()
    assert h.lease()['spec']['holderIdentity'] == 'a'
    assert h.changes == {'a': [(True, 0.0)], 'b': []}
    # A read at 0 (then created) and at each renewal 2 .. 60; B read at 1, 3 .. 59, never wrote.
    assert len(h.api.requests_to(method='GET', path=LEASE_PATH)) == 31 + 30
    assert len(h.api.requests_to(method='PUT', path=LEASE_PATH)) == 30
    assert len(h.api.requests_to(method='POST', path=LEASES_PATH)) == 1


async def test_the_standby_takes_over_after_lease_duration_of_its_own_time(h: Harness) -> None:
    _, holding = await h.leader('a')
    b = h.elector('b')
    await h.run_until(1)
    h.start(b.acquire())
    await h.run_until(10)
    assert h.lease()['spec']['renewTime'] == h.wall(10)
    holding.cancel()  # A dies without releasing
    await h.run_until(25)
    assert not b.is_leader, 'a remote-clock rule would have taken over at 25'
    await h.run_until(27)
    assert b.is_leader
    assert h.changes['b'] == [(True, 27.0)]
    assert b.transitions == 1
    spec = h.lease()['spec']
    assert spec['holderIdentity'] == 'b'
    assert spec['leaseTransitions'] == 1
    assert spec['acquireTime'] == spec['renewTime'] == h.wall(27)


async def test_a_lease_renewed_long_ago_but_just_observed_is_not_taken_at_once(
    h: Harness,
) -> None:
    past = h.wall(-3600)
    h.api.seed(
        {
            'apiVersion': 'coordination.k8s.io/v1',
            'kind': 'Lease',
            'metadata': {'name': NAME, 'namespace': NS, 'labels': {'keep': 'me'}},
            'spec': {
                'holderIdentity': 'ghost',
                'leaseDurationSeconds': 15,
                'acquireTime': past,
                'renewTime': past,
                'leaseTransitions': 4,
            },
        }
    )
    b = h.elector('b')
    h.start(b.acquire())
    await h.run_until(14)
    assert not b.is_leader
    assert b.transitions == 4
    await h.run_until(16)
    assert b.is_leader
    assert h.changes['b'] == [(True, 16.0)]
    lease = h.lease()
    assert lease['spec']['holderIdentity'] == 'b'
    assert lease['spec']['leaseTransitions'] == 5
    assert lease['metadata']['labels'] == {'keep': 'me'}


async def test_an_empty_holder_is_free_at_once(h: Harness) -> None:
    h.api.seed(
        {
            'apiVersion': 'coordination.k8s.io/v1',
            'kind': 'Lease',
            'metadata': {'name': NAME, 'namespace': NS},
            'spec': {'holderIdentity': '', 'leaseDurationSeconds': 15, 'leaseTransitions': 2},
        }
    )
    b = h.elector('b')
    await b.acquire()
    assert b.is_leader
    assert h.lease()['spec']['leaseTransitions'] == 3


async def test_release_lets_the_standby_take_over_at_its_next_retry(h: Harness) -> None:
    a, holding = await h.leader('a')
    b = h.elector('b')
    await h.run_until(1)
    h.start(b.acquire())
    await h.run_until(6)
    holding.cancel()
    await a.release()
    assert not a.is_leader
    assert h.changes['a'] == [(True, 0.0), (False, 6.0)]
    spec = h.lease()['spec']
    assert spec.get('holderIdentity', '') == ''
    assert spec['leaseDurationSeconds'] == 1
    assert spec['renewTime'] == h.wall(6)
    assert spec['leaseTransitions'] == 0
    await h.run_until(7)
    assert b.is_leader
    assert h.changes['b'] == [(True, 7.0)]
    assert h.lease()['spec']['leaseTransitions'] == 1


async def test_release_without_leadership_writes_nothing(h: Harness) -> None:
    a = h.elector('a')
    await a.release()
    assert h.api.requests == []
    assert h.changes['a'] == []


async def test_release_never_raises_and_leaves_a_failed_lease_to_expire(
    h: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    a = h.elector('a')
    await a.acquire()
    h.api.fail(status=500, method='PUT', path_prefix=LEASE_PATH)
    with caplog.at_level(logging.WARNING, logger='llmscaler.kube.leader'):
        await a.release()
    assert not a.is_leader
    assert h.lease()['spec']['holderIdentity'] == 'a'
    assert f'lease {NS}/{NAME}' in caplog.text
    assert '500' in caplog.text


async def test_release_after_a_conflict_rereads_and_releases_if_still_ours(h: Harness) -> None:
    a = h.elector('a')
    await a.acquire()
    h.overwrite(preferredHolder='someone')  # a foreign write: our copy is now stale
    await a.release()
    spec = h.lease()['spec']
    assert spec.get('holderIdentity', '') == ''
    assert spec['preferredHolder'] == 'someone'
    assert len(h.api.requests_to(method='PUT', path=LEASE_PATH)) == 2


async def test_release_after_a_takeover_leaves_the_new_holder_alone(h: Harness) -> None:
    a = h.elector('a')
    await a.acquire()
    h.overwrite(holderIdentity='c')
    await a.release()
    assert h.lease()['spec']['holderIdentity'] == 'c'
    assert not a.is_leader


async def test_a_conflict_during_renew_is_retried(h: Harness) -> None:
    a, holding = await h.leader('a')
    h.api.fail(status=409, method='PUT', path_prefix=LEASE_PATH)
    await h.run_until(2)
    assert h.lease()['spec']['renewTime'] == h.wall(0)
    assert a.is_leader
    await h.run_until(4)
    assert h.lease()['spec']['renewTime'] == h.wall(4)
    assert not holding.done()
    assert h.changes['a'] == [(True, 0.0)]


async def test_another_holder_ends_hold_at_once(h: Harness) -> None:
    a, holding = await h.leader('a')
    await h.run_until(3)
    h.overwrite(holderIdentity='intruder', leaseTransitions=1)
    await h.run_until(4)
    assert holding.done()
    assert not a.is_leader
    assert h.changes['a'] == [(True, 0.0), (False, 4.0)]
    assert h.lease()['spec']['holderIdentity'] == 'intruder'
    assert a.transitions == 1


async def test_server_errors_until_the_renew_deadline_lose_leadership(h: Harness) -> None:
    a, holding = await h.leader('a')
    h.api.fail(status=500, path_prefix=LEASE_PATH, times=1000)
    await h.run_until(9)
    assert a.is_leader
    await h.run_until(10)
    assert holding.done()
    assert not a.is_leader
    assert h.changes['a'] == [(True, 0.0), (False, 10.0)]
    # The read before the create at 0, then attempts at 2, 4, 6 and 8; at 10 no time is left.
    assert len(h.api.requests_to(method='GET', path=LEASE_PATH)) == 1 + 4


async def test_the_renew_deadline_counts_from_the_last_success(h: Harness) -> None:
    a, holding = await h.leader('a')
    h.api.fail(status=500, path_prefix=LEASE_PATH, times=3)  # 2, 4, 6 fail
    await h.run_until(8)
    assert h.lease()['spec']['renewTime'] == h.wall(8)
    h.api.fail(status=429, path_prefix=LEASE_PATH, times=4)  # 10, 12, 14, 16 fail
    await h.run_until(17)
    assert a.is_leader
    await h.run_until(18)
    assert holding.done()
    assert h.changes['a'] == [(True, 0.0), (False, 18.0)]


async def test_writes_are_refused_once_the_renew_deadline_passes_unnoticed(h: Harness) -> None:
    """A leader frozen past its deadline: hold() has not run, but its writes are refused."""
    a = h.elector('a')
    assert a.write_refusal() == f'not the holder of lease {NS}/{NAME}'
    await a.acquire()
    assert a.write_refusal() is None
    await h.clock.advance(9.5)  # no hold() running: as if the process had been stopped
    assert a.write_refusal() is None
    await h.clock.advance(0.5)
    assert a.is_leader  # nothing has noticed yet ...
    assert a.write_refusal() == f'lease {NS}/{NAME} last renewed 10.0 s ago (renew deadline 10 s)'
    holding = h.start(a.hold())
    await h.quiesce()
    assert holding.done()
    assert not a.is_leader  # ... until hold() runs
    assert a.write_refusal() == f'not the holder of lease {NS}/{NAME}'


async def test_each_renewal_reopens_writes_for_a_renew_deadline(h: Harness) -> None:
    a, holding = await h.leader('a')
    h.api.fail(status=500, path_prefix=LEASE_PATH, times=3)  # 2, 4, 6 fail
    await h.run_until(7)
    assert a.write_refusal() is None  # 7 s since the renewal at 0
    await h.run_until(8)
    assert a.write_refusal() is None  # renewed at 8
    holding.cancel()  # the process stops before the renewal due at 10
    await h.clock.advance(9.9)
    assert a.write_refusal() is None
    await h.clock.advance(0.1)
    assert a.write_refusal() == f'lease {NS}/{NAME} last renewed 10.0 s ago (renew deadline 10 s)'


async def test_a_hung_renewal_is_abandoned_at_the_deadline(h: Harness) -> None:
    _, holding = await h.leader('a')
    await h.run_until(0)
    h.api.latency = 0.3
    await h.clock.advance(2)
    for _ in range(500):
        if h.api.requests_to(method='GET', path=LEASE_PATH):
            break
        await asyncio.sleep(0.001)
    await h.clock.advance(8)
    await asyncio.wait_for(holding, 2)
    assert h.changes['a'] == [(True, 0.0), (False, 10.0)]


async def test_a_create_conflict_means_someone_else_won(h: Harness) -> None:
    h.api.fail(status=409, method='POST', path_prefix=LEASES_PATH)
    b = h.elector('b')
    h.start(b.acquire())
    await h.run_until(1)
    assert not b.is_leader
    await h.run_until(2)
    assert b.is_leader
    assert h.changes['b'] == [(True, 2.0)]


async def test_an_unreachable_server_is_retried_without_raising(h: Harness) -> None:
    async with FakeAPI() as gone:
        url = gone.url
    b = h.elector('b', url=url)
    trying = h.start(b.acquire())
    await h.run_until(10)
    assert not trying.done()
    assert not b.is_leader


async def test_a_restart_with_the_same_identity_keeps_the_record(h: Harness) -> None:
    await h.elector('a').acquire()
    await h.run_until(5)
    again = h.elector('a')
    await again.acquire()
    assert again.is_leader
    spec = h.lease()['spec']
    assert spec['acquireTime'] == h.wall(0)
    assert spec['renewTime'] == h.wall(5)
    assert spec['leaseTransitions'] == 0


async def test_a_failing_callback_does_not_stop_the_election(h: Harness) -> None:
    def explode(leader: bool) -> None:
        raise RuntimeError(f'callback {leader}')

    client = make_client(server=h.api.url, timeout=5.0)
    h.clients.append(client)
    a = LeaderElector(
        client=client,
        clock=h.clock,
        config=LeaderConfig(namespace=NS, identity='a', name=NAME),
        on_change=explode,
    )
    await a.acquire()
    assert a.is_leader
    await a.release()
    assert not a.is_leader


# --- property: never two live leaders ---------------------------------------------------------

STEP = st.sampled_from(['ok', 'ok', 'ok', '500x3', '500x8', '409', 'kill', 'release'])


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(STEP, min_size=10, max_size=30))
def test_property_at_most_one_live_leader(steps: list[str]) -> None:
    """Whatever faults hit the API and whichever leader dies or steps down, no two live
    electors ever believe they lead, a live leader is the Lease's holder, and once faults stop a
    live elector leads again."""

    async def scenario() -> None:
        async with FakeAPI() as api:
            h = Harness(api=api, clock=ParkingClock())
            live: dict[str, LeaderElector] = {}
            runs: dict[str, asyncio.Task[None]] = {}
            spawned = 0

            def spawn() -> None:
                nonlocal spawned
                spawned += 1
                name = f'e{spawned}'
                live[name] = h.elector(name)
                runs[name] = h.start(lead(live[name]))

            try:
                spawn()
                spawn()
                for step in [*steps, *['ok'] * 20]:
                    leaders = [n for n, e in live.items() if e.is_leader]
                    if step.startswith('500'):
                        h.api.fail(status=500, path_prefix=LEASE_PATH, times=int(step[4:]))
                    elif step == '409':
                        h.api.fail(status=409, method='PUT', path_prefix=LEASE_PATH)
                    elif step in ('kill', 'release') and leaders:
                        name = leaders[0]
                        runs.pop(name).cancel()
                        gone = live.pop(name)
                        if step == 'release':
                            await gone.release()
                        spawn()
                    await h.run_until(h.clock.monotonic() + 1)
                    leaders = [n for n, e in live.items() if e.is_leader]
                    assert len(leaders) <= 1, (h.clock.monotonic(), leaders)
                    for name in leaders:
                        assert h.lease()['spec']['holderIdentity'] == name
                    writers = [n for n, e in live.items() if e.write_refusal() is None]
                    assert set(writers) <= set(leaders), (writers, leaders)
                # The electors make at least one request a second between them, so the queued
                # faults drain within `injected` seconds; then a takeover needs under 20 s.
                injected = steps.count('409') + sum(int(s[4:]) for s in steps if s[:3] == '500')
                await h.run_until(h.clock.monotonic() + injected + 20)
                assert sum(e.is_leader for e in live.values()) == 1
            finally:
                await h.close()

    asyncio.run(scenario())


async def test_renewals_are_counted_with_how_late_each_started(h: Harness) -> None:
    seen: list[tuple[float, bool]] = []
    a = h.elector('a', on_renewal=lambda late, ok: seen.append((late, ok)))
    await a.acquire()
    holding = h.start(a.hold())
    await h.run_until(4)  # renewals at 2 and 4, on time
    assert (a.renewals, a.late_max) == (2, 0.0)
    # A loop held for 5 s: time passes the renewal due at 6, which starts at 9.
    h.clock.jump(5)
    await h.clock.advance(0)
    await h.quiesce()
    assert a.renewals == 3
    assert a.late_max == pytest.approx(3.0)
    h.api.fail(status=500, path_prefix=LEASE_PATH, times=1)
    await h.run_until(11)
    assert seen == [(0.0, True), (0.0, True), (pytest.approx(3.0), True), (0.0, False)]
    assert not holding.done()
