"""`llmscaler run` as a process against the cluster: what it writes to the API, and when.

The controller runs as a child process (`ControllerProcess`) with short intervals, on the fake
API and on the real control plane (the faults only on the fake); every check reads the stored
objects and the request log (the real API server's audit log), and cycles are counted on the
controller's own /metrics (a status is written only when it changes). Two variants of one model,
CHEAP and DEAR, run the same small replica (4 sequences at a time), so a few requests per second
saturate one.

| check | expectation |
|---|---|
| load above capacity (Prometheus) | CHEAP's `/scale` goes up, DEAR's untouched; status says so |
| load gone, scale-to-zero ConfigMap (Prometheus) | N → 1 → 0, not before the 20 s retention |
| requests queue at zero (pods) | CHEAP at 1 within ~2 s, by scale-from-zero; ScaledFromZero |
| two controllers with --leader-elect | one holder and decider; SIGTERM: the other leads, scales |
| `/scale` answers 409, 500; watches dropped, 410 | only up; applied later; Warning events |
| Prometheus stops (Prometheus) | no scale-down; MetricsAvailable False, PrometheusError |

In every test the controller never writes a Deployment itself, only its `/scale` subresource.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from llmscaler.devcluster.cluster import Cluster
from llmscaler.devcluster.fakeapi.server import RecordedRequest
from llmscaler.sim.hardware.presets import MODEL_8B
from tests.support import prom
from tests.support.e2e_controller import (
    CHEAP,
    CONTROLLER_NS,
    DEAR,
    DEPLOYMENTS,
    ELECTION,
    NS,
    SPEC,
    Obj,
    both_report_through_prometheus,
    condition,
    controller,
    cycles_later,
    desired,
    events,
    idle,
    lease_holder,
    main_resource_writes,
    metrics_available,
    prometheus_source,
    replicas,
    scale_writes,
    show,
    two_variants,
)

# ---- scale-from-zero ----------------------------------------------------------------------


async def test_queued_requests_wake_the_cheapest_variant(cluster: Cluster) -> None:
    await two_variants(cluster, replicas=0, min_replicas=0)
    # A long cycle: the wake must come from the scale-from-zero loop, not the main cycle.
    async with controller(
        cluster, '--metrics-source', 'pods', '--interval', '30s', '--scale-to-zero'
    ) as process:
        await cluster.wait_for(
            lambda: status_writes(cluster, CHEAP) > 0 and status_writes(cluster, DEAR) > 0,
            timeout=20,
            what='a first cycle',
        )
        assert replicas(cluster, CHEAP) == replicas(cluster, DEAR) == 0
        cluster.set_rate(model_id=MODEL_8B, rate=20.0)
        await cluster.wait_for(
            lambda: replicas(cluster, CHEAP) == 1, timeout=2.5, what='the cheap variant woken'
        )
        await cluster.wait_for(
            lambda: bool(events(cluster, 'ScaledFromZero')), timeout=2, what='ScaledFromZero'
        )
        assert replicas(cluster, DEAR) == 0
        assert scale_writes(cluster, CHEAP) == [1]
        assert scale_writes(cluster, DEAR) == []
        (event,) = events(cluster, 'ScaledFromZero')
        assert (event['type'], event['regarding']['name']) == ('Normal', CHEAP), show(event)
        assert 'woke Deployment llm/cheap: 0 -> 1' in process.log()
        assert main_resource_writes(cluster) == []
        assert process.returncode is None
    assert process.returncode == 0


# ---- leader election ----------------------------------------------------------------------


def status_writes(cluster: Cluster, va: str) -> int:
    path = f'/apis/llmd.ai/v1alpha1/namespaces/{NS}/variantautoscalings/{va}/status'
    return sum(1 for r in cluster.requests if r.path == path and r.method in ('PATCH', 'PUT'))


def reported_by(cluster: Cluster, reason: str) -> set[str]:
    return {e.get('reportingInstance', '') for e in events(cluster, reason)}


async def test_one_leader_and_a_standby_that_takes_over(cluster: Cluster) -> None:
    await two_variants(cluster, replicas=1, min_replicas=1)
    common = ('--metrics-source', 'pods', '--interval', '1s', *ELECTION)
    processes = {
        identity: controller(cluster, *common, '--identity', identity, name=identity)
        for identity in ('ctl-a', 'ctl-b')
    }
    async with processes['ctl-a'], processes['ctl-b']:
        await cluster.wait_for(
            lambda: lease_holder(cluster) is not None and status_writes(cluster, CHEAP) > 0,
            timeout=20,
            what='a leader writing status',
        )
        first = lease_holder(cluster)
        assert first in processes
        (second,) = set(processes) - {first}
        await cycles_later(cluster, processes[first], more=2)
        assert lease_holder(cluster) == first  # several renewals later: still one holder
        assert processes[second].cycles() == 0  # and one process deciding
        assert 'leading: caches synced' in processes[first].log()
        assert 'leading: caches synced' not in processes[second].log()
        assert processes[second].returncode is None

        assert await processes[first].stop() == 0
        stopped = time.monotonic()
        assert 'released' in processes[first].log()
        await cluster.wait_for(
            lambda: lease_holder(cluster) == second, timeout=5, what=f'{second} holding the Lease'
        )
        assert time.monotonic() - stopped < 3  # the released Lease is taken before it expires
        await cluster.wait_for(
            lambda: 'leading: caches synced' in processes[second].log(),
            timeout=5,
            what=f'{second} leading',
        )
        await cluster.wait_for(
            lambda: processes[second].cycles() > 0, timeout=5, what=f'{second} deciding'
        )
        assert reported_by(cluster, 'ScaledUp') == set()
        cluster.set_rate(model_id=MODEL_8B, rate=12.0)
        await cluster.wait_for(
            lambda: replicas(cluster, CHEAP) >= 2, timeout=20, what='a scale-up by the new leader'
        )
        await cluster.wait_for(
            lambda: bool(events(cluster, 'ScaledUp')), timeout=5, what='a ScaledUp event'
        )
        assert reported_by(cluster, 'ScaledUp') == {second}
        assert lease_holder(cluster) == second
        assert processes[second].returncode is None
        assert main_resource_writes(cluster) == []


# ---- faults -------------------------------------------------------------------------------


def watches(cluster: Cluster, *, since: int = 0) -> list[RecordedRequest]:
    return [r for r in cluster.api.requests[since:] if r.query.get('watch') in ('true', '1')]


@pytest.mark.fake_api
async def test_scale_faults_and_broken_watches_delay_but_never_corrupt_a_scale_up(
    cluster: Cluster,
) -> None:
    await two_variants(cluster, replicas=1, min_replicas=1)
    async with controller(cluster, '--metrics-source', 'pods', '--interval', '1s'):
        await cluster.wait_for(
            lambda: metrics_available(cluster, CHEAP) and len(watches(cluster)) >= 6,
            timeout=20,
            what='a first cycle with metrics',
        )
        assert scale_writes(cluster, CHEAP) == []
        scale_path = f'{DEPLOYMENTS}/{CHEAP}/scale'
        cluster.api.fail(status=409, method='PATCH', path_prefix=scale_path, times=2)
        cluster.api.fail(status=500, method='PATCH', path_prefix=scale_path, times=2)
        mark, before = len(cluster.api.requests), len(watches(cluster))
        cluster.api.force_watch_gone(times=6)
        cluster.api.drop_watches()
        cluster.set_rate(model_id=MODEL_8B, rate=12.0)

        await cluster.wait_for(
            lambda: replicas(cluster, CHEAP) >= 2, timeout=20, what='the scale-up applied'
        )
        await cluster.wait_for(
            lambda: bool(events(cluster, 'ScaleConflict') and events(cluster, 'ScaleFailed')),
            timeout=5,
            what='ScaleConflict and ScaleFailed events',
        )
        # The watches came back, so the controller sees the replicas it wrote and goes on.
        await cluster.wait_for(
            lambda: replicas(cluster, CHEAP) >= 3, timeout=20, what='a second scale-up'
        )
        attempts = scale_writes(cluster, CHEAP)
        assert len(attempts) >= 5, attempts  # 4 answered with a fault, then applied
        assert attempts[:5] == [2] * 5, attempts
        assert attempts == sorted(attempts), attempts  # never down while the load is high
        assert all(n >= 1 for n in scale_writes(cluster, DEAR))
        watched = {r.path for r in watches(cluster)[:before]}
        assert {r.path for r in watches(cluster, since=mark)} == watched  # every watch is back
        relisted = {
            r.path
            for r in cluster.api.requests[mark:]
            if r.method == 'GET' and r.path in watched and 'watch' not in r.query
        }
        assert len(relisted) >= 3, relisted  # a 410 makes an informer list afresh
        assert main_resource_writes(cluster) == []
        for reason in ('ScaleConflict', 'ScaleFailed'):
            found = {(e['type'], e['regarding']['name']) for e in events(cluster, reason)}
            assert found == {('Warning', CHEAP)}, (reason, found)


# ---- with Prometheus ------------------------------------------------------------------------


@pytest.fixture
async def prom_cluster(backend: bool, tmp_path: Path) -> AsyncIterator[Cluster]:
    """A cluster whose pods Prometheus scrapes (skips without the `prometheus` binary)."""
    prom.binary()
    async with Cluster(
        namespace=NS,
        workdir=tmp_path,
        prometheus=True,
        input_tokens=64,
        output_tokens=32,
        control_plane=backend,
    ) as c:
        yield c


@pytest.mark.integration
async def test_load_above_capacity_scales_the_cheap_variant_up(prom_cluster: Cluster) -> None:
    cluster = prom_cluster
    await two_variants(cluster, replicas=1, min_replicas=1)
    async with controller(cluster, *prometheus_source(cluster), '--interval', '2s'):
        await both_report_through_prometheus(cluster)
        assert replicas(cluster, CHEAP) == replicas(cluster, DEAR) == 1
        cluster.set_rate(model_id=MODEL_8B, rate=12.0)
        await cluster.wait_for(
            lambda: replicas(cluster, CHEAP) >= 2 and (desired(cluster, CHEAP) or 0) >= 2,
            timeout=30,
            what='the cheap variant scaled up',
        )
        cheap_writes = scale_writes(cluster, CHEAP)
        assert cheap_writes[0] == 2, cheap_writes
        assert cheap_writes == sorted(cheap_writes)  # only up while the load is high
        assert scale_writes(cluster, DEAR) == []
        assert replicas(cluster, DEAR) == 1
        assert main_resource_writes(cluster) == []
        cond = condition(cluster, CHEAP, 'MetricsAvailable')
        assert cond is not None
        assert cond['status'] == 'True', show(cond)
        await cluster.wait_for(
            lambda: bool(events(cluster, 'ScaledUp')), timeout=5, what='a ScaledUp event'
        )
        assert {e['regarding']['name'] for e in events(cluster, 'ScaledUp')} == {CHEAP}
    assert main_resource_writes(cluster) == []  # not even on the way out


def scale_to_zero_configmap(*, retention: str) -> Obj:
    return {
        'apiVersion': 'v1',
        'kind': 'ConfigMap',
        'metadata': {
            'name': 'wva-model-scale-to-zero-config',
            'namespace': CONTROLLER_NS,
            'labels': {'app.kubernetes.io/name': 'workload-variant-autoscaler'},
        },
        'data': {'default': f'enable_scale_to_zero: true\nretention_period: {retention}'},
    }


@pytest.mark.integration
async def test_load_gone_scales_down_then_to_zero_after_the_retention(
    prom_cluster: Cluster,
) -> None:
    cluster = prom_cluster
    cluster.seed(scale_to_zero_configmap(retention='20s'))
    await cluster.add_variant(
        name=CHEAP,
        model_id=MODEL_8B,
        preset=SPEC,
        cost=1.0,
        replicas=3,
        min_replicas=0,
        rate=2.0,
    )
    await cluster.add_variant(name=DEAR, model_id=MODEL_8B, preset=SPEC, cost=5.0, replicas=1)
    async with controller(cluster, *prometheus_source(cluster), '--interval', '2s'):
        await both_report_through_prometheus(cluster)
        cluster.set_rate(model_id=MODEL_8B, rate=0.0)
        stopped = time.monotonic()
        # About 22 s on a quiet machine (the 20-s retention after the last completion); on a
        # loaded one it has taken over 60 s: the emulated pods finish their last requests late,
        # and a completion within the retention, or a request in flight, keeps the model up.
        # The bound only catches a model that never goes; the lower one is asserted below.
        await cluster.wait_for(
            lambda: replicas(cluster, CHEAP) == replicas(cluster, DEAR) == 0,
            timeout=120,
            what='both variants at zero',
        )
        zero_after = time.monotonic() - stopped
        await cluster.wait_for(
            lambda: bool(events(cluster, 'ScaledToZero')), timeout=5, what='ScaledToZero'
        )
        # The statuses follow the /scale writes within the same cycle.
        await cluster.wait_for(
            lambda: desired(cluster, CHEAP) == desired(cluster, DEAR) == 0,
            timeout=5,
            what='desired 0 in both statuses',
        )
    # Nothing reaches zero while requests were served within the retention period.
    assert zero_after >= 18, zero_after
    for name, start in ((CHEAP, 3), (DEAR, 1)):
        path = [start, *scale_writes(cluster, name)]
        assert path == sorted(path, reverse=True), (name, path)  # never up without load
        assert path[-1] == 0
        steps = list(itertools.pairwise(path))
        assert all(after > 0 or before == 1 for before, after in steps), (name, path)
    assert 1 in scale_writes(cluster, CHEAP)  # 3 → ... → 1 → 0
    assert main_resource_writes(cluster) == []


@pytest.mark.integration
async def test_prometheus_outage_holds_the_replicas(prom_cluster: Cluster) -> None:
    cluster = prom_cluster
    await two_variants(cluster, replicas=1, min_replicas=1)
    async with controller(cluster, *prometheus_source(cluster), '--interval', '1s') as process:
        cluster.set_rate(model_id=MODEL_8B, rate=8.0)
        await cluster.wait_for(lambda: replicas(cluster, CHEAP) >= 2, timeout=30, what='a scale-up')
        # Prometheus goes away and so does the load: a scale-down would now be due.
        await cluster.stop_prometheus()
        cluster.set_rate(model_id=MODEL_8B, rate=0.0)
        held = {name: replicas(cluster, name) for name in (CHEAP, DEAR)}
        mark = {name: len(scale_writes(cluster, name)) for name in held}

        def prometheus_error() -> bool:
            cond = condition(cluster, CHEAP, 'MetricsAvailable')
            return cond is not None and cond.get('status') == 'False'

        await cluster.wait_for(prometheus_error, timeout=10, what='MetricsAvailable False')
        # Once every replica is idle a scale-down would be due, were the metrics there.
        await cluster.wait_for(
            lambda: idle(cluster, CHEAP) and idle(cluster, DEAR),
            timeout=30,
            what='every replica idle',
        )
        await cycles_later(cluster, process, more=3)
        for name, count in held.items():
            later = scale_writes(cluster, name)[mark[name] :]
            assert all(n >= count for n in later), (name, count, later)
            assert replicas(cluster, name) >= count
        for name in held:
            cond = condition(cluster, name, 'MetricsAvailable')
            assert cond is not None
            assert (cond['status'], cond['reason']) == ('False', 'PrometheusError'), show(cond)
            assert cond.get('message'), show(cond)
        assert main_resource_writes(cluster) == []
