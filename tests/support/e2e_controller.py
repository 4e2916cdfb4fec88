"""`llmscaler run` as a child process against the fake cluster, and what the end-to-end tests
read of the API it writes to.

Two variants of one model, CHEAP and DEAR, run the same small replica (`SPEC`: 4 sequences at a
time), so a few requests per second saturate one; the VAs and their Deployments live in `NS`,
the controller's Lease and global ConfigMaps in `CONTROLLER_NS`. The readers take the cluster's
stored objects and its request log (on the real control plane, its audit log) as they are at
the call, so they serve both backends.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from llmscaler.devcluster.cluster import Cluster
from llmscaler.devcluster.fakeapi.semantics import ApiError
from llmscaler.devcluster.fakeapi.server import RecordedRequest
from llmscaler.devcluster.process import ControllerProcess
from llmscaler.sim.hardware.presets import MODEL_8B, preset
from tests.support import prom

NS = 'llm'
CONTROLLER_NS = 'llmscaler-system'
CHEAP, DEAR = 'cheap', 'dear'
# A small replica: 4 sequences at a time and a slow step, so a few requests/s saturate it.
SPEC = preset(name='llama-3.1-8b-l4', max_num_seqs=4)
DEPLOYMENTS = f'/apis/apps/v1/namespaces/{NS}/deployments'
Obj = dict[str, Any]


def controller(cluster: Cluster, *args: str, name: str = 'controller') -> ControllerProcess:
    """`llmscaler run` on ephemeral ports, its Lease and global ConfigMaps in CONTROLLER_NS."""
    return ControllerProcess(
        cluster=cluster,
        name=name,
        args=[
            '--namespace',
            CONTROLLER_NS,
            '--metrics-bind-address',
            '127.0.0.1:0',
            '--health-probe-bind-address',
            '127.0.0.1:0',
            *args,
        ],
    )


async def two_variants(cluster: Cluster, *, replicas: int, min_replicas: int) -> None:
    """CHEAP and DEAR: the same small replica at two prices, one model."""
    for name, cost in ((CHEAP, 1.0), (DEAR, 5.0)):
        await cluster.add_variant(
            name=name,
            model_id=MODEL_8B,
            preset=SPEC,
            cost=cost,
            replicas=replicas,
            min_replicas=min_replicas,
            max_replicas=4,
        )


def replicas(cluster: Cluster, name: str) -> int:
    value = cluster.deployment(name)['spec']['replicas']
    assert isinstance(value, int)
    return value


def scale_writes(cluster: Cluster, name: str) -> list[int]:
    """spec.replicas of every PATCH to the Deployment's `/scale`, in order."""
    path = f'{DEPLOYMENTS}/{name}/scale'
    return [
        r.json()['spec']['replicas']
        for r in cluster.requests
        if r.method == 'PATCH' and r.path == path
    ]


def main_resource_writes(cluster: Cluster) -> list[RecordedRequest]:
    """Writes to a Deployment itself (not a subresource): the controller must never send one."""
    return [
        r
        for r in cluster.requests
        if r.method in ('PATCH', 'PUT', 'POST', 'DELETE')
        and r.path.startswith(DEPLOYMENTS)
        and not r.path.endswith('/scale')
    ]


def events(cluster: Cluster, reason: str, *, namespace: str = NS) -> list[Obj]:
    """events.k8s.io/v1 Events with `reason` in `namespace` (the VAs'): the API the controller
    writes.

    Not the core v1 Events too: a real API server (and the fake) shows every Event under both."""
    listed = cluster.list(api_version='events.k8s.io/v1', kind='Event', namespace=namespace)
    return [e for e in listed if e.get('reason') == reason]


def condition(cluster: Cluster, va: str, kind: str) -> Obj | None:
    for cond in cluster.va(va).get('status', {}).get('conditions', []):
        if cond.get('type') == kind:
            assert isinstance(cond, dict)
            return cond
    return None


def desired(cluster: Cluster, va: str) -> int | None:
    alloc = cluster.va(va).get('status', {}).get('desiredOptimizedAlloc', {})
    value = alloc.get('numReplicas')
    return value if isinstance(value, int) else None


async def cycles_later(cluster: Cluster, process: ControllerProcess, *, more: int) -> None:
    """Wait until `process` has finished `more` cycles beyond those finished now.

    Counted on the controller's /metrics: status writes are no proof of a cycle, since an
    unchanged status is written only every --status-refresh-interval.
    """
    start = process.cycles()
    await cluster.wait_for(
        lambda: process.cycles() >= start + more, timeout=more * 3 + 5, what=f'{more} more cycles'
    )


def metrics_available(cluster: Cluster, va: str) -> bool:
    cond = condition(cluster, va, 'MetricsAvailable')
    return cond is not None and cond.get('status') == 'True'


def idle(cluster: Cluster, name: str) -> bool:
    """No request in flight on any replica of the variant."""
    return all(p.engine.in_flight == 0 for p in cluster.emulator(name).emulator.pods)


def show(obj: object) -> str:
    return json.dumps(obj, indent=1, sort_keys=True)


# ---- leader election ----------------------------------------------------------------------

LEASE = '72dd1cf1.llm-d.ai'
ELECTION = (
    '--leader-elect',
    '--leader-election-lease-duration',
    '3s',
    '--leader-election-renew-deadline',
    '2s',
    '--leader-election-retry-period',
    '0.5s',
)


def lease_holder(cluster: Cluster) -> str | None:
    """spec.holderIdentity of the controller's Lease; None while there is no Lease or holder."""
    try:
        lease = cluster.get(
            api_version='coordination.k8s.io/v1', kind='Lease', namespace=CONTROLLER_NS, name=LEASE
        )
    except ApiError:
        return None
    holder = lease.get('spec', {}).get('holderIdentity')
    return holder if isinstance(holder, str) and holder else None


# ---- metrics through Prometheus -------------------------------------------------------------


def prometheus_source(cluster: Cluster) -> tuple[str, ...]:
    """The controller's arguments that read the metrics from the cluster's Prometheus."""
    assert cluster.prometheus_url is not None
    return ('--metrics-source', 'prometheus', '--prometheus-url', cluster.prometheus_url)


@contextlib.asynccontextmanager
async def reading_cluster(
    *, backend: bool, workdir: Path, source: str, input_tokens: int = 64, output_tokens: int = 32
) -> AsyncIterator[Cluster]:
    """A cluster in NS whose metrics the controller reads from `source` ('pods', or
    'prometheus': a Prometheus scraping the pods; skipped, or failed in CI, without it)."""
    if source == 'prometheus':
        prom.binary()
    async with Cluster(
        namespace=NS,
        workdir=workdir,
        prometheus=source == 'prometheus',
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        control_plane=backend,
    ) as cluster:
        yield cluster


def source_args(cluster: Cluster, *, interval: str) -> tuple[str, ...]:
    """The controller's metric source for the cluster (its Prometheus when it has one, else the
    pods) and its cycle interval."""
    source = prometheus_source(cluster) if cluster.prometheus_url else ('--metrics-source', 'pods')
    return (*source, '--interval', interval)


def unavailable_naming(cluster: Cluster, va: str, pod: str) -> bool:
    """The VA's MetricsAvailable is False and its message names `pod`."""
    cond = condition(cluster, va, 'MetricsAvailable')
    return cond is not None and cond.get('status') == 'False' and pod in cond.get('message', '')


async def both_report_through_prometheus(cluster: Cluster) -> None:
    await cluster.wait_for(
        lambda: metrics_available(cluster, CHEAP) and metrics_available(cluster, DEAR),
        timeout=30,
        what='metrics through Prometheus',
    )
