"""The whole controller process (`Controller.run`, `main`) against the fake apiserver.

Objects, the in-memory metric source and the read-back helpers are those of
test_controller_cycle. Leader election runs on the real clock with short timings (lease 2 s,
renew deadline 1.5 s, retry 0.5 s, cycle 1 s); the other tests drive a ManualClock. Covered too:
liveness (a leader whose loop stops finishing cycles fails `/healthz`; a standby or a leader
still syncing does not), the options reaching the parts they configure, `main`'s one-line
exits (bad options, no or a bad kubeconfig, unusable TLS files), and `llmscaler run` as a process
serving /healthz, /readyz and /metrics with aiohttp unimportable (it is in the `sim` extra only).
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from llmscaler.clock import ManualClock, parse_rfc3339, rfc3339
from llmscaler.collect.readings import ModelScope, Reading
from llmscaler.controller.app import EXIT_CONFIG, EXIT_LOST, EXIT_OK, Controller, main
from llmscaler.controller.publish import METRICS_CONTENT_TYPE
from llmscaler.devcluster.fakeapi.server import FakeAPI
from llmscaler.devcluster.objects import kubeconfig as kubeconfig_object
from llmscaler.devcluster.process import ControllerProcess
from llmscaler.domain.state import EMPTY_STATE
from tests.support.controller_harness import (
    CTL,
    SATURATED,
    FakeSource,
    caught_up,
    events,
    informed,
    pod,
    replicas,
    run_options,
    samples,
    scale_writes,
    seed_variant,
    status_writes,
)
from tests.support.waiting import eventually

LEASE_NAME = '72dd1cf1.llm-d.ai'
LEASE = f'/apis/coordination.k8s.io/v1/namespaces/ctl/leases/{LEASE_NAME}'
ELECTION = (
    '--leader-elect',
    '--leader-election-lease-duration', '2s',
    '--leader-election-renew-deadline', '1.5s',
    '--leader-election-retry-period', '0.5s',
)  # fmt: skip


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


class FreezingSource(FakeSource):
    """A FakeSource during whose first read the process is stopped for `frozen` seconds."""

    def __init__(self, api: FakeAPI, *, clock: ManualClock, frozen: float, **kw: Any) -> None:
        super().__init__(api, **kw)
        self.clock, self.frozen, self.reads = clock, frozen, 0

    async def read(self, *, scope: tuple[ModelScope, ...], now: float) -> Reading:
        self.reads += 1
        if self.reads == 1:
            self.clock.jump(self.frozen)
        return await super().read(scope=scope, now=now)


async def test_a_leader_resuming_past_its_renew_deadline_writes_nothing(api: FakeAPI) -> None:
    """Stopped inside its first cycle for longer than the renew deadline, the leader resumes
    with a scale-up decided; a standby may lead by now, so the write must not go out."""
    seed_variant(api, 'a', high=10)
    clock = ManualClock()
    source = FreezingSource(api, clock=clock, frozen=5.0, load={'a': SATURATED})
    controller = Controller(options=run_options(api, *ELECTION), clock=clock, source=source)
    async with running(controller) as task:
        await eventually(
            lambda: controller.cycle.last_completed is not None, 'the cycle the freeze fell in'
        )
        assert controller.elector.is_leader  # hold() has not run since the freeze
        assert writes(api) == []
        await clock.advance(0)  # its timers fire: hold() sees the deadline passed
        assert await asyncio.wait_for(asyncio.shield(task), 5.0) == EXIT_LOST
    assert writes(api) == []
    assert replicas(api, 'a') == 1


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
        ['--bogus', '--metrics-source', 'pods'],
        ['--metrics-source', 'pods', '--leader-election-renew-deadline', '70s'],
        ['--metrics-source', 'pods', '--metrics-bind-address', 'here'],
        ['--metrics-source', 'prometheus'],  # no Prometheus URL
    ],
)
def test_main_exits_2_on_a_fatal_option(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == EXIT_CONFIG
    err = capsys.readouterr().err
    assert err.count('\n') == 1
    assert err.startswith('llmscaler run: ')


def test_main_help_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(['--help'])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith('usage: llmscaler run')
    assert '--leader-elect' in out
    assert '--actuation' in out


def test_main_refuses_a_bad_environment_value_before_anything_starts(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv('ACTUATION_MODE', 'metrcs')
    assert main(['--metrics-source', 'pods', '--server', 'http://127.0.0.1:9']) == EXIT_CONFIG
    assert capsys.readouterr().err == (
        "llmscaler run: environment: key 'ACTUATION_MODE', value 'metrcs': must be one of "
        'direct, metrics, both\n'
    )


def test_main_refuses_tls_files_it_cannot_load(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    bogus = tmp_path / 'ca.pem'
    bogus.write_text('not a certificate')
    argv = ['--metrics-source', 'pods', '--server', 'http://127.0.0.1:9']
    assert main([*argv, '--scrape-ca-cert-path', str(bogus)]) == EXIT_CONFIG
    err = capsys.readouterr().err
    assert err.startswith(f'llmscaler run: SCRAPE_CA_CERT_PATH {bogus}: cannot be used as a CA')
    assert err.count('\n') == 1
    missing = tmp_path / 'missing.pem'
    assert main([*argv, '--scrape-client-cert-path', str(missing)]) == EXIT_CONFIG
    err = capsys.readouterr().err
    assert err == (
        f'llmscaler run: SCRAPE_CLIENT_CERT_PATH {missing}: cannot be used as a client '
        'certificate: No such file or directory\n'
    )


def run_process(*argv: str, home: Path) -> subprocess.CompletedProcess[str]:
    """`llmscaler run` in a process of its own, with `home` as HOME and no cluster around."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(('KUBE', 'POD_', 'PROMETHEUS_', 'METRICS_', 'LOG_'))
    }
    env['HOME'] = str(home)
    code = 'import sys; from llmscaler.cli import main; sys.exit(main(sys.argv[1:]))'
    return subprocess.run(
        [sys.executable, '-c', code, 'run', '--metrics-source', 'pods',
         '--health-probe-bind-address', '0', '--metrics-bind-address', '0', *argv],
        env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


@pytest.mark.parametrize(
    ('argv', 'line'),
    [
        ((), 'llmscaler run: no Kubernetes configuration: not running in a cluster (no service '
         'account), no KUBECONFIG and no ~/.kube/config; give --kubeconfig FILE or --server URL'),
        (('--kubeconfig', '/nonexist'), 'llmscaler run: kubeconfig /nonexist: no such file'),
    ],
)  # fmt: skip
def test_no_usable_kubeconfig_is_one_line_and_exit_2(
    tmp_path: Path, argv: tuple[str, ...], line: str
) -> None:
    done = run_process(*argv, home=tmp_path)
    assert (done.returncode, done.stderr) == (EXIT_CONFIG, line + '\n')


def test_a_kubeconfig_that_is_not_one_is_named_without_its_content(tmp_path: Path) -> None:
    path = tmp_path / 'config'
    path.write_text('users: [{name: me, user: {token: sk-live-123}}\n')
    done = run_process('--kubeconfig', str(path), home=tmp_path)
    assert done.returncode == EXIT_CONFIG
    assert done.stderr.startswith(f'llmscaler run: kubeconfig {path}: not usable: not YAML (line')
    assert done.stderr.count('\n') == 1
    assert 'sk-live' not in done.stderr


# --- without aiohttp --------------------------------------------------------------------------

# `llmscaler run` with aiohttp unimportable: None in sys.modules fails every import of it.
WITHOUT_AIOHTTP = (
    "import sys; sys.modules['aiohttp'] = None; "
    'from llmscaler.cli import main; sys.exit(main(sys.argv[1:]))'
)
SERVING = re.compile(r'serving (?P<routes>/[^"]*?) on 127\.0\.0\.1 port (?P<port>[0-9]+)')


@dataclass(frozen=True)
class FakeCluster:
    """The `ClusterAccess` of a `ControllerProcess` for a bare fake API: a kubeconfig for it."""

    api: FakeAPI
    workdir: Path

    def kubeconfig(self, path: Path, *, client: str | None = None) -> Path:
        config = kubeconfig_object(server=self.api.url, namespace=CTL, token=client)
        path.write_text(yaml.safe_dump(config))
        return path


async def test_the_controller_process_serves_its_endpoints_without_aiohttp(
    api: FakeAPI, tmp_path: Path
) -> None:
    process = ControllerProcess(
        cluster=FakeCluster(api=api, workdir=tmp_path),
        command=[sys.executable, '-c', WITHOUT_AIOHTTP, 'run'],
        args=[
            '--metrics-source', 'pods',
            '--namespace', CTL,
            '--metrics-bind-address', '127.0.0.1:0',
            '--health-probe-bind-address', '127.0.0.1:0',
        ],
    )  # fmt: skip

    def ports() -> dict[str, int]:
        return {m['routes']: int(m['port']) for m in SERVING.finditer(process.log())}

    async with process, httpx.AsyncClient(timeout=2) as http:
        await eventually(
            lambda: len(ports()) == 2 or process.returncode is not None,
            'both endpoints to listen',
            timeout=30,
        )
        assert process.returncode is None, process.log()
        health = f'http://127.0.0.1:{ports()["/healthz, /readyz"]}'
        live = await http.get(f'{health}/healthz')
        assert (live.status_code, live.text) == (200, 'ok')

        # Ready once the caches have listed the (empty) fake API.
        deadline = asyncio.get_running_loop().time() + 10
        while (ready := await http.get(f'{health}/readyz')).status_code != 200:
            assert asyncio.get_running_loop().time() < deadline, ready.text
            await asyncio.sleep(0.05)
        assert ready.text == 'ok'
        page = await http.get(f'http://127.0.0.1:{ports()["/metrics"]}/metrics')
        assert page.status_code == 200
        assert page.headers['content-type'] == METRICS_CONTENT_TYPE
        assert 'wva_optimization_duration_seconds' in page.text
        assert await process.stop() == EXIT_OK
    assert 'aiohttp' not in process.log()


# --- liveness ---------------------------------------------------------------------------------


class StuckSource:
    """A metric source whose read never returns until released: a loop stuck inside a cycle."""

    def __init__(self) -> None:
        self.reads = 0
        self.release = asyncio.Event()

    async def read(self, *, scope: tuple[ModelScope, ...], now: float) -> Reading:
        self.reads += 1
        await self.release.wait()
        return Reading()


async def test_healthz_fails_when_the_leading_loop_stops_finishing_cycles(api: FakeAPI) -> None:
    seed_variant(api, 'a')
    clock = ManualClock()
    source = StuckSource()
    # The limit: 3 intervals of 1 s + the read deadline (0.5 s, half the interval) + the API
    # timeout (10 s) = 13.5 s.
    options = run_options(api, '--rest-client-timeout', '10s')
    controller = Controller(options=options, clock=clock, source=source)
    async with running(controller):
        await eventually(lambda: source.reads == 1, 'the first read, which hangs')
        assert await get(controller.health_port, '/healthz') == (200, 'ok')
        await clock.advance(13.0)
        assert await get(controller.health_port, '/healthz') == (200, 'ok')
        await clock.advance(1.0)
        status, text = await get(controller.health_port, '/healthz')
        assert status == 503
        assert text == (
            'the main loop has not finished a cycle for 14s (limit 14s: 3 intervals, the read '
            'deadline and the API timeout)'
        )
        assert await get(controller.health_port, '/readyz') == (200, 'ok')  # not readiness
        source.release.set()  # the cycle ends: live again
        # 14 s late, the loop starts its next cycle at once: one or two may have ended by now.
        await eventually(lambda: cycles(controller) >= 1, 'the cycle to end')
        assert await get(controller.health_port, '/healthz') == (200, 'ok')


async def test_liveness_counts_the_configured_number_of_intervals(api: FakeAPI) -> None:
    seed_variant(api, 'a')
    clock = ManualClock()
    source = StuckSource()
    options = run_options(api, '--rest-client-timeout', '10s', '--liveness-intervals', '10')
    controller = Controller(options=options, clock=clock, source=source)
    async with running(controller):
        await eventually(lambda: source.reads == 1, 'the first read, which hangs')
        await clock.advance(20.0)  # under 10 × 1 s + 0.5 s + 10 s
        assert await get(controller.health_port, '/healthz') == (200, 'ok')
        await clock.advance(1.0)
        assert (await get(controller.health_port, '/healthz'))[0] == 503
        source.release.set()


async def test_a_leader_still_syncing_and_a_standby_are_live(api: FakeAPI) -> None:
    seed_variant(api, 'a')
    api.fail(status=500, method='GET', path_prefix='/api/v1/namespaces/ns/pods', times=1000)
    clock = ManualClock()
    syncing = Controller(options=run_options(api), clock=clock, source=StuckSource())
    async with running(syncing):
        await eventually(lambda: syncing.health_port is not None, 'the probes')
        for _ in range(10):  # 100 s, far past the limit
            await clock.advance(10.0)
        assert not syncing.caches.synced()
        assert await get(syncing.health_port, '/healthz') == (200, 'ok')

    other = {
        'apiVersion': 'coordination.k8s.io/v1',
        'kind': 'Lease',
        'metadata': {'name': LEASE_NAME, 'namespace': 'ctl'},
        'spec': {
            'holderIdentity': 'someone-else',
            'leaseDurationSeconds': 3600,
            'renewTime': rfc3339(wall=clock.wall()),
        },
    }
    api.seed(other)
    standby = Controller(options=run_options(api, *ELECTION), clock=clock, source=StuckSource())
    async with running(standby):
        await eventually(lambda: standby.health_port is not None, 'the probes')
        for _ in range(10):
            await clock.advance(10.0)
        assert not standby.elector.is_leader
        assert await get(standby.health_port, '/healthz') == (200, 'ok')


# --- options reach the parts ------------------------------------------------------------------


async def test_pod_selector_and_namespace_limit_reach_the_pod_cache(api: FakeAPI) -> None:
    seed_variant(api, 'a')
    seed_variant(api, 'b')
    extra = ('--pod-selector', 'app=a', '--pod-namespace-limit', '0')
    async with informed(api, FakeSource(api), *extra) as controller:
        names = sorted(p['metadata']['name'] for p in controller.caches.pods.items())
        assert names == ['a-7d9f-0']
        pod_lists = {r.path for r in api.requests if r.path.endswith('/pods')}
        assert pod_lists == {'/api/v1/pods'}  # cluster-wide, no per-namespace watch


async def test_epp_selector_and_schemes_reach_the_targets(api: FakeAPI) -> None:
    seed_variant(api, 'a')
    epp = pod('gateway', 0)
    epp['metadata'].update(namespace='gw', labels={'role': 'epp'}, ownerReferences=[])
    api.seed(epp)
    extra = ('--epp-selector', 'role=epp', '--pod-metrics-scheme', 'https',
             '--epp-metrics-scheme', 'https')  # fmt: skip
    async with informed(api, FakeSource(api), *extra) as controller:
        targets = {(t.kind, t.url) for t in controller._scrape_targets()}
        assert targets == {
            ('vllm', 'https://10.0.1.1:8000/metrics'),
            ('epp', 'https://10.0.7.1:9090/metrics'),
        }


async def test_status_refresh_interval_reaches_the_status_writer(api: FakeAPI) -> None:
    seed_variant(api, 'a')
    source = FakeSource(api, load={'a': (0.5, 0.0)})
    clock = ManualClock()
    extra = ('--status-refresh-interval', '1m')
    async with informed(api, source, *extra, clock=clock) as controller:
        await controller.cycle.run_once()
        assert status_writes(api, 'a') == 1
        await clock.advance(59.0)
        await caught_up(controller, api)
        await controller.cycle.run_once()
        assert status_writes(api, 'a') == 1  # nothing changed: not rewritten
        await clock.advance(1.0)
        await caught_up(controller, api)
        await controller.cycle.run_once()
        assert status_writes(api, 'a') == 2  # a minute on: lastRunTime moves (default: 5 min)


async def test_the_scrape_configuration_reaches_scale_from_zero(api: FakeAPI) -> None:
    extra = ('--scrape-max-page-bytes', '1Ki', '--epp-metrics-scheme', 'https')
    async with informed(api, FakeSource(api), *extra) as controller:
        assert controller.from_zero._scrape is controller.options.scrape
        assert controller.from_zero._scrape.max_page_bytes == 1024
