"""The real Kubernetes control plane, seeded with a benchmark's cluster, for benchmarks of the
controller.

Why: the fake kube-apiserver (`fakeproc`) answers from Python dicts; a real kube-apiserver
validates every object against its schema, stores it in etcd, runs admission and RBAC, and
kube-controller-manager reacts to every `/scale` write with ReplicaSets and pods. A figure
measured against the fake alone says nothing about how the controller fares against that. The
control plane runs in processes of its own (etcd, kube-apiserver, kube-controller-manager,
kube-scheduler), so, as with the fake's child process, their work is not counted as the
controller's; on a machine of few cores they do compete with it for the processor.

What: `real_api(objects, ...)`, an async context manager, starts the development cluster on the
real control plane (`Cluster(control_plane=True)`: the CRDs and RBAC of deploy/base, the
benchmark's namespace, a token of the controller's ServiceAccount), applies the InferencePool
CRDs when asked, registers enough GPU nodes for every replica the VAs may ask for, creates
`objects` through the admin client, 16 at a time, and plays the kubelet once: every pod that
kube-controller-manager creates for the seeded Deployments and kube-scheduler binds is reported
Running and Ready. It yields a `RealAPI` once every Deployment's status says all its replicas
are ready. No kubelet runs after that: pods created later (a scale-up, a wake from zero) are
bound by the scheduler and stay Pending, as the fake cluster never starts the pods a scale-up
asks for. The controller signs in as its ServiceAccount, with the shipped RBAC. The pools'
EPPs are served on this machine's own address (`devcluster.host`): the real API server refuses
loopback addresses in an EndpointSlice.

The benchmarks' common face: `add_backend_option` (`--backend fake|real`, the fake by default),
`require` (exit status 2 and one line when the real backend is asked for and not built) and
`describe` (the line naming the backend a run measured, and how long the real one took to start
and seed).

What fails: `missing()` names the binaries that are not built (the benchmark refuses to start,
status 2); `real_api` raises RuntimeError when the cluster does not settle within `settle_timeout`
seconds (with the counts reached), and lets the control plane's own errors (`ControlPlaneMissing`,
RuntimeError with a process's log, `ApiError` for an object the API server refuses) propagate,
after stopping every process it started.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from llmscaler.devcluster import binaries, nodes, objects
from llmscaler.devcluster.cluster import CONTROL_PLANE_BINARIES, Cluster
from llmscaler.devcluster.rest import Rest

Obj = dict[str, Any]

INFERENCE_POOL_CRDS = (
    Path(__file__).resolve().parents[1] / 'src/llmscaler/devcluster/crds/inferencepools.yaml'
)
CONCURRENCY = 16
"""Writes in flight while seeding (the API server's default max-requests-inflight is 400)."""
_IDLE = 3600.0
"""The cluster's own reconciler and load loops: nothing for them to do, so they sleep."""


def missing() -> list[str]:
    """The binaries of the real control plane that are not built (`make binaries`)."""
    return [name for name in CONTROL_PLANE_BINARIES if binaries.find(name) is None]


@dataclass(frozen=True, slots=True)
class RealAPI:
    """A seeded real control plane: how the controller reaches it, and what it holds."""

    argv: tuple[str, ...]
    """The `llmscaler run` options that reach the API server (a ServiceAccount kubeconfig)."""
    pods: tuple[Obj, ...]
    """The seeded Deployments' pods, as kube-controller-manager named them, by name."""
    seconds: float
    """From the first process started to the cluster settled."""


def _gpu_demand(objs: Sequence[Obj]) -> Counter[str]:
    """GPUs per accelerator if every VA ran its target Deployment at maxReplicas."""
    deployments = {
        (d['metadata']['namespace'], d['metadata']['name']): d
        for d in objs
        if d['kind'] == 'Deployment'
    }
    demand: Counter[str] = Counter()
    for va in objs:
        if va['kind'] != 'VariantAutoscaling':
            continue
        ref = va['spec']['scaleTargetRef']['name']
        spec = deployments[(va['metadata']['namespace'], ref)]['spec']['template']['spec']
        per_pod = sum(
            int(c.get('resources', {}).get('requests', {}).get('nvidia.com/gpu', 0))
            for c in spec['containers']
        )
        demand[spec['nodeSelector'][objects.GPU_PRODUCT_LABEL]] += (
            per_pod * va['spec']['maxReplicas']
        )
    return demand


def _apply_crds(rest: Rest, path: Path) -> None:
    """Create the CRDs of `path` and wait until the API server serves them."""
    crds = [d for d in yaml.safe_load_all(path.read_text(encoding='utf-8')) if d]
    for crd in crds:
        rest.raw(
            method='POST',
            path='/apis/apiextensions.k8s.io/v1/customresourcedefinitions',
            body=crd,
        )
    deadline = time.monotonic() + 60
    for crd in crds:
        name = crd['metadata']['name']
        while not _established(rest, name=name):
            if time.monotonic() > deadline:
                raise RuntimeError(f'CRD {name} not established within 60 s')
            time.sleep(0.1)


def _established(rest: Rest, *, name: str) -> bool:
    path = f'/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}'
    # A CRD just created has `status.conditions: null`.
    conditions = (rest.raw(method='GET', path=path).get('status') or {}).get('conditions') or []
    return any(c.get('type') == 'Established' and c.get('status') == 'True' for c in conditions)


def _seed(rest: Rest, objs: Sequence[Obj], *, pool: ThreadPoolExecutor) -> None:
    """Register the nodes every VA's maxReplicas fits on, then create `objs` concurrently."""
    node_names = [
        (f'bench-{objects.slug(accelerator)}-{i}', accelerator)
        for accelerator, gpus in sorted(_gpu_demand(objs).items())
        for i in range(math.ceil(gpus / nodes.GPUS_PER_NODE))
    ]
    list(pool.map(lambda n: nodes.register_node(rest, name=n[0], accelerator=n[1]), node_names))
    list(pool.map(rest.create, objs))


def _settle(
    rest: Rest, *, namespace: str, replicas: int, pool: ThreadPoolExecutor, timeout: float
) -> list[Obj]:
    """Report every bound pod of the namespace Ready, until `replicas` are and every
    Deployment's status says so; the pods then."""
    deadline = time.monotonic() + timeout
    reported: set[str] = set()
    while True:
        pods = rest.list(api_version='v1', kind='Pod', namespace=namespace)
        bound = [p['metadata']['name'] for p in pods if p['spec'].get('nodeName')]
        fresh = [name for name in bound if name not in reported]
        list(pool.map(lambda name: _run_pod(rest, namespace=namespace, name=name), fresh))
        reported.update(fresh)
        deployments = rest.list(api_version='apps/v1', kind='Deployment', namespace=namespace)
        if len(reported) == len(pods) == replicas and all(
            d.get('status', {}).get('observedGeneration') == d['metadata']['generation']
            and d.get('status', {}).get('readyReplicas', 0) == d['spec']['replicas']
            for d in deployments
        ):
            return pods
        if time.monotonic() > deadline:
            ready = sum(d.get('status', {}).get('readyReplicas', 0) for d in deployments)
            raise RuntimeError(
                f'the real cluster did not settle within {timeout:.0f} s: {len(pods)} pods '
                f'created, {len(bound)} bound, {ready} ready of {replicas}'
            )
        time.sleep(1.0)


def _run_pod(rest: Rest, *, namespace: str, name: str) -> None:
    """What a kubelet reports once the pod's containers run: Running, Ready, an IP."""
    rest.patch(
        api_version='v1',
        kind='Pod',
        namespace=namespace,
        name=name,
        patch={'status': objects.pod_status(ready=True)},
        subresource='status',
    )


@contextlib.asynccontextmanager
async def real_api(
    objs: Iterable[Obj],
    *,
    namespace: str,
    inference_pools: bool = False,
    settle_timeout: float = 900.0,
) -> AsyncIterator[RealAPI]:
    """Serve `objs` from a real control plane (see the module docstring)."""
    seeded = list(objs)
    replicas = sum(o['spec']['replicas'] for o in seeded if o['kind'] == 'Deployment')
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix='bench-real-') as workdir:
        async with Cluster(
            namespace=namespace,
            workdir=Path(workdir),
            control_plane=True,
            poll_interval=_IDLE,
            load_interval=_IDLE,
        ) as cluster:
            plane = cluster.control_plane
            rest = Rest(
                url=plane.url,
                ca=plane.ca,
                cert=plane.pki / 'admin.crt',
                key=plane.pki / 'admin.key',
            )
            try:
                with ThreadPoolExecutor(max_workers=CONCURRENCY) as pool:
                    if inference_pools:
                        await asyncio.to_thread(_apply_crds, rest, INFERENCE_POOL_CRDS)
                    await asyncio.to_thread(_seed, rest, seeded, pool=pool)
                    pods = await asyncio.to_thread(
                        _settle,
                        rest,
                        namespace=namespace,
                        replicas=replicas,
                        pool=pool,
                        timeout=settle_timeout,
                    )
            finally:
                rest.close()
            kubeconfig = cluster.kubeconfig(Path(workdir) / 'controller.kubeconfig')
            yield RealAPI(
                argv=('--kubeconfig', str(kubeconfig)),
                pods=tuple(pods),
                seconds=time.perf_counter() - started,
            )


BACKENDS = ('fake', 'real')
"""The API servers a benchmark of the controller runs against (`--backend`)."""


def add_backend_option(parser: argparse.ArgumentParser) -> None:
    """`--backend fake|real`, the fake by default: it needs no binaries (`make bench`)."""
    parser.add_argument(
        '--backend',
        choices=BACKENDS,
        default='fake',
        help='the in-repo fake kube-apiserver (child process), or the real control plane '
        '(etcd, kube-apiserver, kube-controller-manager, kube-scheduler; make binaries)',
    )


def require(parser: argparse.ArgumentParser, *, backend: str) -> None:
    """Exit with status 2 and one line when `backend` is real and a binary is not built."""
    absent = missing() if backend == 'real' else []
    if absent:
        parser.exit(
            2,
            f'{parser.prog}: --backend real needs the control plane built (make binaries); '
            f'not built: {", ".join(absent)}\n',
        )


def describe(backend: str, *, seeding: Sequence[float] = ()) -> str:
    """One line saying which API server the figures were measured against, and how long the
    real one took to start and settle for each run (not part of any figure)."""
    if backend == 'fake':
        return 'backend: fake kube-apiserver (in-repo, child process)'
    took = ', '.join(f'{s:.0f} s' for s in seeding)
    return (
        'backend: real control plane (etcd, kube-apiserver, kube-controller-manager, '
        f'kube-scheduler), the controller as its ServiceAccount; started and seeded in {took} '
        '(not counted)'
    )
