"""A real HPA controller scales a real Deployment after llmscaler's `wva_desired_replicas`.

On the real control plane only (its binaries, KEDA's and Prometheus 3's built by `make
binaries`; skipped without them, failed with CI=true): the controller runs with `--actuation
metrics` and scrapes the emulated pods, Prometheus 3.16 scrapes the controller's /metrics as a
pod of `llmscaler-system` would be scraped, KEDA's operator and metrics server run as processes
behind the APIService `v1beta1.external.metrics.k8s.io` (`devcluster.keda`), and the
ScaledObjects are what `llmscaler manifests --from-cluster --actuation metrics --via keda`
writes for the cluster's VAs. Nothing but kube-controller-manager's HPA controller may change
the Deployment's replicas.

| step | expectation |
|---|---|
| the ScaledObjects applied | KEDA makes HPA `keda-hpa-<VA>` on the external metric, with the |
|  | rendered behaviour (windows 0, tolerance 0); it reads 1 |
| load on the model | the gauge goes up; spec.replicas follows it, written through `/scale` by |
|  | kube-controller-manager; no other client writes `/scale` |
| no load | the gauge comes back to 1, and spec.replicas with it |
| leaving | no KEDA process is left |
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from llmscaler.devcluster import binaries, keda
from llmscaler.devcluster.cluster import Cluster
from llmscaler.devcluster.fakeapi.semantics import ApiError
from llmscaler.devcluster.rest import Rest
from llmscaler.sim.hardware.presets import MODEL_8B
from tests.e2e.conftest import need_control_plane
from tests.support import prom
from tests.support.e2e_controller import (
    CHEAP,
    CONTROLLER_NS,
    DEAR,
    NS,
    controller,
    replicas,
    scale_writes,
    show,
    two_variants,
)
from tests.support.prerequisites import missing, need_built

HPA = f'/apis/autoscaling/v2/namespaces/{NS}/horizontalpodautoscalers/keda-hpa-{CHEAP}'
RATE = 24.0  # requests/s: more than one small replica serves
DESIRED = f'max(wva_desired_replicas{{exported_namespace="{NS}",variant_name="{CHEAP}"}})'


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    need_control_plane()
    for name in (*keda.BINARIES, 'prometheus'):
        need_built(name)
    if binaries.module_source(binaries.FAMILIES['keda'], keda.MODULE) is None:
        missing(f'{keda.MODULE} is not in the Go module cache (make binaries downloads it)')
    async with Cluster(
        namespace=NS, workdir=tmp_path, input_tokens=64, output_tokens=32, control_plane=True
    ) as c:
        yield c


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def run(*argv: str, stdin: str = '') -> str:
    """A command's standard output; AssertionError with its stderr when it fails."""
    process = await asyncio.create_subprocess_exec(
        *argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(process.communicate(stdin.encode()), timeout=60)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode == 0, f'{argv[:4]} failed: {err.decode()}'
    return out.decode()


def gauge(url: str) -> float | None:
    """The value of DESIRED in Prometheus now; None while there is no series."""
    answer = httpx.get(f'{url}/api/v1/query', params={'query': DESIRED}, timeout=2).json()
    result = answer['data']['result']
    return float(result[0]['value'][1]) if result else None


@dataclass
class Trail:
    """The gauge and the Deployment's spec.replicas as polled: each change, with its time."""

    prometheus: str
    cluster: Cluster
    rest: Rest
    start: float = field(default_factory=time.monotonic)
    changes: list[tuple[float, float | None, int, int]] = field(default_factory=list)

    def __str__(self) -> str:
        return '\n'.join(
            f'{t:5.1f} s: gauge {g}, spec.replicas {r} ({DEAR}: {d})' for t, g, r, d in self.changes
        )

    def _settled(self, wanted: Callable[[float], bool]) -> bool:
        value, count = gauge(self.prometheus), replicas(self.cluster, CHEAP)
        # The other variant's replicas explain the gauge's moves (the model's load is shared).
        change = (value, count, replicas(self.cluster, DEAR))
        if not self.changes or self.changes[-1][1:] != change:
            self.changes.append((time.monotonic() - self.start, *change))
        return value is not None and wanted(value) and count == value

    async def until(self, wanted: Callable[[float], bool], *, timeout: float, what: str) -> None:
        """Wait until the gauge is `wanted` and spec.replicas equals it."""
        try:
            await self.cluster.wait_for(lambda: self._settled(wanted), timeout=timeout, what=what)
        except TimeoutError as late:
            status = show(hpa(self.rest).get('status'))
            raise AssertionError(f'{late}\nseen:\n{self}\nHPA status: {status}') from late


def hpa(rest: Rest) -> dict[str, Any]:
    try:
        return rest.raw(method='GET', path=HPA)
    except ApiError:
        return {}


def hpa_reads(rest: Rest) -> float | None:
    """The external metric's value the HPA controller last read (a quantity: `2`, `1500m`),
    or None before it read one."""
    for metric in hpa(rest).get('status', {}).get('currentMetrics') or []:
        value = str(metric.get('external', {}).get('current', {}).get('averageValue', ''))
        if value.endswith('m'):
            return int(value[:-1]) / 1000
        if value:
            return float(value)
    return None


async def test_a_real_hpa_follows_wva_desired_replicas_through_keda(
    cluster: Cluster, tmp_path: Path
) -> None:
    plane = cluster.control_plane
    rest = Rest(
        url=plane.url, ca=plane.ca, cert=plane.pki / 'admin.crt', key=plane.pki / 'admin.key'
    )
    kubectl = str(binaries.find('kubectl'))
    admin = plane.kubeconfig(tmp_path / 'admin-test.kubeconfig', namespace=NS)
    await two_variants(cluster, replicas=1, min_replicas=1)
    args = ('--metrics-source', 'pods', '--interval', '1s', '--actuation', 'metrics')
    async with controller(cluster, *args) as process:
        await cluster.wait_for(
            lambda: process.metrics_url is not None, timeout=30, what='the controller /metrics'
        )
        assert process.metrics_url is not None
        address = process.metrics_url.removeprefix('http://').removesuffix('/metrics')
        # Labelled as Kubernetes service discovery labels the controller's pod, so the gauge's
        # own namespace label becomes exported_namespace, as the ScaledObject expects.
        target = prom.Target(
            address=address,
            labels=(('namespace', CONTROLLER_NS), ('pod', 'llmscaler-controller-0')),
            job='llmscaler',
        )
        (tmp_path / 'prometheus').mkdir()
        async with (
            prom.running(
                targets=[target], workdir=tmp_path / 'prometheus', server='prometheus-3'
            ) as prometheus,
            keda.Keda(plane=plane, workdir=tmp_path / 'keda') as installed,
        ):
            rendered = await run(
                sys.executable,
                '-m',
                'llmscaler',
                'manifests',
                '--from-cluster',
                '--namespace',
                NS,
                '--kubeconfig',
                str(cluster.kubeconfig(tmp_path / 'manifests.kubeconfig')),
                '--actuation',
                'metrics',
                '--via',
                'keda',
                '--prometheus',
                prometheus,
                '--unpaused',
            )
            objects = [d for d in yaml.safe_load_all(rendered) if d]
            assert {o['kind'] for o in objects} == {'ScaledObject'}, rendered
            await run(kubectl, f'--kubeconfig={admin}', 'apply', '-f', '-', stdin=rendered)
            await cluster.wait_for(
                lambda: hpa_reads(rest) == 1.0,
                timeout=90,
                what=f"KEDA's HPA reading the gauge at 1\n{show(hpa(rest))}\n"
                f'{installed.log("keda-operator")[-3000:]}',
            )
            assert replicas(cluster, CHEAP) == 1
            # The rendered behaviour reaches the HPA, tolerance 0 included (KEDA's CRD carries
            # it, and the control plane honours it as Kubernetes 1.35 does).
            behavior = hpa(rest)['spec']['behavior']
            for rules in (behavior['scaleUp'], behavior['scaleDown']):
                assert rules['stabilizationWindowSeconds'] == 0, show(behavior)
                assert rules['tolerance'] == '0', show(behavior)

            trail = Trail(prometheus=prometheus, cluster=cluster, rest=rest)
            cluster.set_rate(model_id=MODEL_8B, rate=RATE)
            await trail.until(lambda value: value >= 2, timeout=90, what='the HPA following up')
            # What the HPA read is the gauge (per replica), and what it wrote, through /scale
            # as kube-controller-manager, is what it decided; no other client wrote /scale.
            status = hpa(rest)['status']
            assert status['desiredReplicas'] == replicas(cluster, CHEAP), show(status)
            managers = {
                (f['manager'], f.get('subresource', ''))
                for f in cluster.deployment(CHEAP)['metadata']['managedFields']
            }
            assert ('kube-controller-manager', 'scale') in managers, managers
            assert scale_writes(cluster, CHEAP) == []

            cluster.set_rate(model_id=MODEL_8B, rate=0.0)
            await trail.until(lambda value: value == 1, timeout=180, what='the HPA following down')
            assert scale_writes(cluster, CHEAP) == []
            pids = list(installed.pids.values())
            print(f'\n{trail}')
    rest.close()
    assert pids
    assert not any(alive(pid) for pid in pids)
