"""KEDA on the real control plane, for the end-to-end tests that let it drive a real HPA.

Why: `tests/e2e/test_hpa.py` (ScaledObjects following `wva_desired_replicas`) and
`tests/e2e/test_keda_queue.py` (the queue-based ScaledObjects) both start KEDA's operator and
metrics server beside a `Cluster(control_plane=True)`, render ScaledObjects with the real
`llmscaler manifests` command, apply them with the real kubectl, and watch the HPA KEDA makes
and the Deployment kube-controller-manager scales. This module is that shared part, so that
neither test carries its own copy.

What: `need_keda()` (the prerequisites: skipped locally, failed with CI=true), `admin(cluster)`
(a Rest client signed in as the cluster's admin), `run` (a command's output), `instant`
(a PromQL query's value now),
`manifests(...)` (the objects `python -m llmscaler manifests` writes, and its text), `kubectl`
(the real kubectl as admin), `hpa`/`hpa_reads` (the HPA KEDA generated and the external metric
values the HPA controller last read), `quantity` (a Kubernetes quantity as a float), `Trail`
(every change of polled values, with its time) and `until` (poll with a deadline, recording
the trail).

What fails: `until` raises AssertionError naming what was awaited, with the trail and the HPA's
status, when the deadline passes; `run` and `kubectl` raise AssertionError with the command's
stderr when it exits non-zero or takes more than 60 s; `quantity` raises ValueError for a
suffix it does not know.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml

from llmscaler.devcluster import binaries, keda
from llmscaler.devcluster.cluster import Cluster
from llmscaler.devcluster.fakeapi.semantics import ApiError
from llmscaler.devcluster.rest import Rest
from tests.e2e.conftest import need_control_plane
from tests.support.prerequisites import missing, need_built

Obj = dict[str, Any]

# Decimal SI suffixes a metric value may carry in an HPA's status (KEDA's metrics server
# writes milli-units for fractions, e.g. `876m`).
_SUFFIXES = {'n': 1e-9, 'u': 1e-6, 'm': 1e-3, 'k': 1e3, 'M': 1e6, 'G': 1e9}


def need_keda() -> None:
    """Skip the test (fail it with CI=true) unless the control plane, KEDA's binaries, Prometheus
    3 and KEDA's module source are there."""
    need_control_plane()
    for name in (*keda.BINARIES, 'prometheus'):
        need_built(name)
    if binaries.module_source(binaries.FAMILIES['keda'], keda.MODULE) is None:
        missing(f'{keda.MODULE} is not in the Go module cache (make binaries downloads it)')


def admin(cluster: Cluster) -> Rest:
    """A client of the cluster's API server with the admin's certificate (close it after)."""
    plane = cluster.control_plane
    return Rest(
        url=plane.url, ca=plane.ca, cert=plane.pki / 'admin.crt', key=plane.pki / 'admin.key'
    )


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


async def kubectl(cluster: Cluster, *args: str, workdir: Path, stdin: str = '') -> str:
    """The real kubectl as the cluster's admin, in the cluster's namespace."""
    config = cluster.control_plane.kubeconfig(
        workdir / 'admin-test.kubeconfig', namespace=cluster.namespace
    )
    return await run(str(binaries.find('kubectl')), f'--kubeconfig={config}', *args, stdin=stdin)


async def manifests(cluster: Cluster, *args: str, workdir: Path) -> tuple[str, list[Obj]]:
    """What `llmscaler manifests --from-cluster` writes for the cluster's VAs, with `args`:
    the text and its objects (asserted to be ScaledObjects only)."""
    config = cluster.kubeconfig(workdir / 'manifests.kubeconfig')
    text = await run(
        sys.executable,
        '-m',
        'llmscaler',
        'manifests',
        '--from-cluster',
        '--namespace',
        cluster.namespace,
        '--kubeconfig',
        str(config),
        *args,
    )
    objects = [d for d in yaml.safe_load_all(text) if d]
    assert {o['kind'] for o in objects} == {'ScaledObject'}, text
    return text, objects


def hpa_path(*, namespace: str, scaled_object: str) -> str:
    """The HPA KEDA generates for a ScaledObject: `keda-hpa-<name>`."""
    return (
        f'/apis/autoscaling/v2/namespaces/{namespace}/horizontalpodautoscalers/'
        f'keda-hpa-{scaled_object}'
    )


def hpa(rest: Rest, *, path: str) -> Obj:
    """The HPA at `path` as stored now; {} while there is none."""
    try:
        return rest.raw(method='GET', path=path)
    except ApiError:
        return {}


def quantity(text: str) -> float:
    """A Kubernetes quantity (`2`, `1500m`, `1k`) as a float."""
    if text and text[-1] in _SUFFIXES:
        return float(text[:-1]) * _SUFFIXES[text[-1]]
    try:
        return float(text)
    except ValueError:
        raise ValueError(f'not a quantity this test knows: {text!r}') from None


def hpa_reads(rest: Rest, *, path: str) -> tuple[float | None, ...]:
    """The external metrics' values (per replica, AverageValue) the HPA controller last read,
    in the order of the HPA's metrics (KEDA's trigger order); None for one not read yet, ()
    before the HPA exists or reads anything."""
    found = hpa(rest, path=path)
    current = found.get('status', {}).get('currentMetrics') or []
    values: list[float | None] = []
    for metric in current:
        value = metric.get('external', {}).get('current', {}).get('averageValue')
        values.append(None if value is None else quantity(str(value)))
    return tuple(values)


def instant(url: str, query: str) -> float | None:
    """The value of a one-series PromQL `query` in the Prometheus at `url` now; None while it
    has no series."""
    answer = httpx.get(f'{url}/api/v1/query', params={'query': query}, timeout=2).json()
    result = answer['data']['result']
    return float(result[0]['value'][1]) if result else None


@dataclass
class Trail:
    """Values polled over time: each change, with its time since the trail began."""

    start: float = field(default_factory=time.monotonic)
    changes: list[tuple[float, dict[str, object]]] = field(default_factory=list)

    def see(self, values: Mapping[str, object]) -> None:
        if not self.changes or self.changes[-1][1] != values:
            self.changes.append((time.monotonic() - self.start, dict(values)))

    def __str__(self) -> str:
        return '\n'.join(
            f'{t:6.1f} s: ' + ', '.join(f'{k} {v}' for k, v in values.items())
            for t, values in self.changes
        )


async def until(
    cluster: Cluster,
    *,
    trail: Trail,
    sample: Callable[[], Mapping[str, object]],
    done: Callable[[Mapping[str, object]], bool],
    timeout: float,
    what: str,
    explain: Callable[[], str] = lambda: '',
) -> float:
    """Poll `sample` (recorded in `trail`) until `done` holds; the seconds it took.

    AssertionError after `timeout` seconds, with the trail and `explain()` (the HPA's status)."""
    began = time.monotonic()

    def settled() -> bool:
        values = sample()
        trail.see(values)
        return done(values)

    try:
        await cluster.wait_for(settled, timeout=timeout, what=what)
    except TimeoutError as late:
        raise AssertionError(f'{late}\nseen:\n{trail}\n{explain()}') from late
    return time.monotonic() - began
