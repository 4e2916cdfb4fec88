"""`llmscaler run` processes that crash, restart, freeze and race: still one writer, never down.

Every request in the fake API's log carries the client that sent it (each `ControllerProcess`
has its own token) and the log is in the order the store saw the requests, so the Lease holder
at any request is the holder written by the last successful Lease write before it.

| check | expectation |
|---|---|
| SIGKILL while new pods start; a new process | no `/scale` below spec.replicas until pods are up |
| two processes started together, 3 rounds | every write but the Lease's from the Lease holder |
| leader SIGKILLed | the standby takes the expired Lease and scales; nothing from the dead one |
| leader frozen (SIGSTOP) past its Lease, resumed | it writes nothing more and exits 1 |

They run on the fake API only (`fake_api`): on the real control plane every process would be the
same ServiceAccount in the audit log, and the faults they inject are the fake's.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

import pytest

from llmscaler.devcluster.cluster import Cluster
from llmscaler.devcluster.fakeapi.server import RecordedRequest
from llmscaler.sim.hardware.presets import MODEL_8B
from tests.support.e2e_controller import (
    CHEAP,
    CONTROLLER_NS,
    DEPLOYMENTS,
    ELECTION,
    NS,
    SPEC,
    controller,
    cycles_later,
    desired,
    lease_holder,
    main_resource_writes,
    replicas,
)

pytestmark = pytest.mark.fake_api

LEASES = f'/apis/coordination.k8s.io/v1/namespaces/{CONTROLLER_NS}/leases'
SCALE = f'{DEPLOYMENTS}/{CHEAP}/scale'
VAS = f'/apis/llmd.ai/v1alpha1/namespaces/{NS}/variantautoscalings'
WRITES = ('POST', 'PUT', 'PATCH', 'DELETE')


def scale_writes_by(
    cluster: Cluster, *, since: int = 0, until: int | None = None
) -> list[tuple[str, int]]:
    """(client, spec.replicas) of every PATCH to CHEAP's `/scale` in requests[since:until]."""
    return [
        (r.client, r.json()['spec']['replicas'])
        for r in cluster.api.requests[since:until]
        if r.method == 'PATCH' and r.path == SCALE
    ]


def ready_pods(cluster: Cluster, name: str) -> int:
    value = cluster.deployment(name).get('status', {}).get('readyReplicas', 0)
    assert isinstance(value, int)
    return value


def set_replicas(cluster: Cluster, name: str, count: int) -> None:
    """spec.replicas written straight into the store, as a person with kubectl would."""
    deploy = cluster.deployment(name)
    resource = cluster.api.store_resource(deploy)
    new = {**deploy, 'spec': {**deploy['spec'], 'replicas': count}}
    cluster.api.store.update(resource, NS, name, new, part='main')


# ---- a restart in the middle of a scale-up ------------------------------------------------

STARTUP = 10.0


async def test_a_restart_while_new_pods_start_never_scales_down(cluster: Cluster) -> None:
    await cluster.add_variant(
        name=CHEAP, model_id=MODEL_8B, preset=SPEC, cost=1.0, replicas=1, min_replicas=1
    )
    cluster.set_startup_delay(name=CHEAP, seconds=STARTUP)  # the pods to come, not the first
    args = ('--metrics-source', 'pods', '--interval', '1s')
    async with controller(cluster, *args) as first:
        await cluster.wait_for(
            lambda: desired(cluster, CHEAP) == 1, timeout=20, what='a first status'
        )
        # The process dies after its /scale write and before the status that records it: its
        # status writes fail from now on, so the VA still says 1 when it is killed.
        cluster.api.fail(status=500, path_prefix=f'{VAS}/{CHEAP}/status', times=10_000)
        # Above what one replica serves (about 2/s): a queue and a scale-up, but a backlog that
        # the ready replica clears while the new one starts, so it is idle for the rest.
        cluster.set_rate(model_id=MODEL_8B, rate=3.0)
        await cluster.wait_for(
            lambda: replicas(cluster, CHEAP) >= 2, timeout=20, what='a scale-up decided'
        )
        assert await first.kill() == -9
    cluster.api.clear_faults()
    wanted = replicas(cluster, CHEAP)
    assert ready_pods(cluster, CHEAP) < wanted, cluster.describe()  # the new pods still start
    assert [n for _, n in scale_writes_by(cluster)] == list(range(2, wanted + 1))
    assert desired(cluster, CHEAP) == 1
    # With the load gone, only the pods still starting stand between the new process and a
    # scale-down: they are replicas on their way, not idle ones.
    cluster.set_rate(model_id=MODEL_8B, rate=0.0)
    restart = len(cluster.api.requests)
    async with controller(cluster, *args) as second:
        await cluster.wait_for(
            lambda: ready_pods(cluster, CHEAP) >= wanted,
            timeout=STARTUP + 5,
            what='the new pods ready',
        )
        started = len(cluster.api.requests)
        cycles_while_starting = second.cycles()
        assert cycles_while_starting >= 2, cycles_while_starting  # it did decide meanwhile
        during = scale_writes_by(cluster, since=restart, until=started)
        assert all(n >= wanted for _, n in during), (wanted, during)
        assert replicas(cluster, CHEAP) == wanted
        assert {client for client, _ in during} <= {second.client}
        assert main_resource_writes(cluster) == []


# ---- two controllers racing for the Lease -------------------------------------------------


def holders(requests: Sequence[RecordedRequest]) -> list[str | None]:
    """The Lease holder when each request arrived (None: no Lease or a released one)."""
    found: list[str | None] = []
    holder: str | None = None
    for request in requests:
        found.append(holder)
        if (
            request.method in ('POST', 'PUT')
            and request.path.startswith(LEASES)
            and request.status in (200, 201)
        ):
            spec = request.json().get('spec') or {}
            holder = spec.get('holderIdentity') or None
    return found


def writes_off_the_lease(cluster: Cluster, *, since: int) -> list[tuple[str, str, str, str | None]]:
    """(client, method, path, Lease holder then) of every write since `since` not made by the
    Lease holder of that moment; the Lease's own requests excepted."""
    requests = cluster.api.requests
    at = holders(requests)
    return [
        (r.client, r.method, r.path, at[i])
        for i, r in enumerate(requests)
        if i >= since
        and r.client
        and r.method in WRITES
        and not r.path.startswith(LEASES)
        and r.client != at[i]
    ]


RACES = ('kill', 'kill', 'freeze')
"""How each round's leader goes: SIGKILL, or SIGSTOP until the standby leads, then SIGCONT."""


async def test_controllers_racing_for_the_lease_never_both_write(cluster: Cluster) -> None:
    await cluster.add_variant(
        name=CHEAP,
        model_id=MODEL_8B,
        preset=SPEC,
        cost=1.0,
        replicas=1,
        min_replicas=1,
        max_replicas=8,
    )
    cluster.set_rate(model_id=MODEL_8B, rate=16.0)
    for round_, loss in enumerate(RACES, start=1):
        await race(cluster, round_=round_, loss=loss)
    assert main_resource_writes(cluster) == []


async def race(cluster: Cluster, *, round_: int, loss: str) -> None:
    """Two processes started together; the leader scales, is lost; the standby leads, scales."""
    set_replicas(cluster, CHEAP, 1)  # something to scale in every round
    since = len(cluster.api.requests)
    args = ('--metrics-source', 'pods', '--interval', '1s', *ELECTION)
    names = (f'r{round_}-a', f'r{round_}-b')
    processes = {name: controller(cluster, *args, '--identity', name, name=name) for name in names}
    async with contextlib.AsyncExitStack() as stack:
        for process in processes.values():  # both started before either can take the Lease
            process.start()
            stack.push_async_callback(process.stop)
        await cluster.wait_for(
            lambda: any(c in processes for c, _ in scale_writes_by(cluster, since=since)),
            timeout=20,
            what=f'round {round_}: a scale-up by the leader',
        )
        leader = lease_holder(cluster)
        assert leader in processes, leader
        (standby,) = set(processes) - {leader}
        writers = {c for c, _ in scale_writes_by(cluster, since=since)}
        assert writers == {leader}, (round_, writers)
        assert processes[standby].cycles() == 0  # a standby decides nothing

        lost = len(cluster.api.requests)
        if loss == 'kill':
            assert await processes[leader].kill() == -9
        else:
            processes[leader].pause()
        await cluster.wait_for(
            lambda: lease_holder(cluster) == standby,
            timeout=8,
            what=f'round {round_}: {standby} taking the Lease',
        )
        set_replicas(cluster, CHEAP, 1)  # the load needs more again: the new leader scales
        took = len(cluster.api.requests)
        await cluster.wait_for(
            lambda: any(c == standby for c, _ in scale_writes_by(cluster, since=took)),
            timeout=10,
            what=f'round {round_}: a scale-up by {standby}',
        )
        if loss == 'freeze':
            processes[leader].resume()
            # It finds the Lease held by another and stops; meanwhile it must write nothing.
            assert await processes[leader].wait(timeout=10) == 1
            await cycles_later(cluster, processes[standby], more=2)
        assert {c for c, _ in scale_writes_by(cluster, since=lost)} == {standby}
        assert writes_off_the_lease(cluster, since=since) == []
