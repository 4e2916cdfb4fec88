"""A development cluster on this machine: the API, its controllers, the pods and the load.

Why: `llmscaler run` must be tried (`llmscaler demo`), tested and benchmarked as it runs in a
cluster: as a separate process that watches VAs, Deployments and pods, scrapes pods (directly or
through Prometheus) and writes `/scale`, then sees the replicas it asked for come up and the
load spread over them. `Cluster` stands in for the apiserver, the Deployment and ReplicaSet
controllers and the kubelet, the vLLM pods (one emulator fleet per variant, `llmscaler.emulate`),
each model's gateway (`gateway.Gateway`) and, optionally, a real Prometheus
(`process.Prometheus`).

Two backends. By default the API is the in-process fake (`FakeAPI`, `api`) and the controllers
are this module's. With `control_plane=True` they are the real ones (`controlplane.ControlPlane`:
etcd, kube-apiserver with RBAC, kube-controller-manager, kube-scheduler, built by `make
binaries`): the CRDs and RBAC of deploy/base are applied first, `kubeconfig` gives the
controller its ServiceAccount's token, and the kubelet is `nodes.VariantPods`, a client of the
API. `get`, `list`, `seed`, `replace`, `report_status` and `requests` (the fake's request log,
or the API server's audit log of writes and `/scale` reads, each stamped with its arrival) serve
both, so a test written against them runs on either; the fake's fault injection (`api`) exists
on the fake alone, and InferencePools too.

On the fake, every 50 ms a reconciler task syncs each variant's `kubelet.Workload`
(spec.replicas → pods `<deploy>-<hash>-<slot>` owned by ReplicaSet `<deploy>-<hash>`, ready after
the variant's `startup_delay`, annotated with their emulator port; the emulator scaled to the
ready pods; the Deployment status written), working on `api.store` directly, so faults
injected into the HTTP API do not touch it. On either backend, with Prometheus, it rewrites the
file_sd targets (ready pods and EPP pods, labels namespace and pod) when they change.

Load and EPP: one `Gateway` per model generates its load (`set_rate`), queues it while no
variant of the model has a ready replica and routes it over the replicas of *all* its variants
otherwise (fewest requests in flight), so scaling any variant relieves the model. One EPP pod per
model (`<model-slug>-epp`, label `llm-d.ai/epp=true`) points at that gateway's page, which holds
the model's whole queue: summing `inference_extension_flow_control_queue_size` over EPP pods of a
model counts each queued request once. The emulators' own gateways stay unused.

Faults to play: `set_startup_delay` makes the pods a variant gets from now on start slowly (a
scale-up still in progress), `emulator(name).emulator.show_kv_usage` makes one pod's page show a
broken KV usage (NaN, −1 ...), `api.fail` and friends break the API (`fakeapi.server`).

What fails: `add_variant` raises ValueError for a duplicate name, an unknown preset, a negative
count, min > max, a bad cost or rate, before it creates anything; `set_startup_delay` raises
ValueError for a negative or non-finite delay; the emulator's own errors
(ValueError for a spec it refuses, OSError for a port) propagate.
`wait_for` raises TimeoutError naming `what` and the cluster's state; `stop_prometheus` (a
metrics outage) raises RuntimeError when the cluster runs no Prometheus. A failure inside the
reconciler or the load task is logged and retried on the next pass; the first one is raised
again when the cluster exits, so a broken harness cannot pass a test.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import dataclasses
import json
import logging
import math
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml

from llmscaler.clock import parse_rfc3339
from llmscaler.devcluster import binaries, controlplane, nodes, objects
from llmscaler.devcluster.controlplane import ControlPlane, ControlPlaneMissing
from llmscaler.devcluster.fakeapi.semantics import ApiError
from llmscaler.devcluster.fakeapi.server import FakeAPI, RecordedRequest
from llmscaler.devcluster.gateway import Backend, Gateway
from llmscaler.devcluster.kubelet import Workload, replicas_of
from llmscaler.devcluster.nodes import VariantPods
from llmscaler.devcluster.process import Prometheus
from llmscaler.devcluster.rest import Rest
from llmscaler.emulate.server import RunningEmulator, serve
from llmscaler.sim.hardware import presets
from llmscaler.sim.vocabulary import VariantSpec

logger = logging.getLogger(__name__)

Obj = dict[str, Any]

# The shipped manifests the real control plane gets before anything else: the CRDs, and the
# controller's namespace, ServiceAccount and RBAC, as `kubectl kustomize deploy/base` renders them
# (the controller's own Deployment, ConfigMaps and Service are left out: it runs as a process).
_DEPLOY_BASE = Path(__file__).resolve().parents[3] / 'deploy' / 'base'
_INSTALLED_KINDS = frozenset(
    {
        'CustomResourceDefinition',
        'Namespace',
        'ServiceAccount',
        'ClusterRole',
        'ClusterRoleBinding',
        'Role',
        'RoleBinding',
    }
)
CONTROLLER_NAMESPACE = 'llmscaler-system'
CONTROLLER_ACCOUNT = 'llmscaler-controller'
# What `Cluster(control_plane=True)` runs: the control plane, and kubectl to install deploy/base.
CONTROL_PLANE_BINARIES = (*controlplane.BINARIES, 'kubectl')
_VERBS = {'create': 'POST', 'update': 'PUT', 'patch': 'PATCH', 'delete': 'DELETE', 'get': 'GET'}


class Cluster:
    """The development cluster (async context manager); see the module docstring."""

    def __init__(
        self,
        *,
        namespace: str = 'llm',
        prometheus: bool = False,
        workdir: Path | None = None,
        seed: int = 1,
        input_tokens: int | None = None,
        output_tokens: int | None = None,
        poll_interval: float = 0.05,
        load_interval: float = 0.02,
        api_port: int = 0,
        inference_pools: bool = False,
        control_plane: bool = False,
    ) -> None:
        if control_plane and inference_pools:
            raise ValueError('InferencePools are served by the fake API only (no CRD installed)')
        self.namespace = namespace
        self._inference_pools = inference_pools
        self._fake = None if control_plane else FakeAPI(port=api_port)
        self._plane: ControlPlane | None = None
        self._rest: Rest | None = None
        self._token = ''
        self._nodes: set[str] = set()
        self.url = ''
        self.prometheus_url: str | None = None
        self._want_prometheus = prometheus
        self._workdir = workdir
        self._seed = seed
        self._tokens = (input_tokens, output_tokens)
        self._poll = poll_interval
        self._load_interval = load_interval
        self._variants: dict[str, Workload | VariantPods] = {}
        self._gateways: dict[str, Gateway] = {}
        self._prometheus: Prometheus | None = None
        self._stack = contextlib.AsyncExitStack()
        self._tasks: list[asyncio.Task[None]] = []
        self._lock = asyncio.Lock()
        self.failures: list[BaseException] = []

    # ---- lifecycle -------------------------------------------------------------------------

    @property
    def real(self) -> bool:
        """True on the real control plane, False on the fake API."""
        return self._fake is None

    @property
    def api(self) -> FakeAPI:
        """The fake API (its store, request log and fault injection); fake backend only."""
        if self._fake is None:
            raise RuntimeError('the real control plane has no fake API (use get, list, requests)')
        return self._fake

    @property
    def control_plane(self) -> ControlPlane:
        """The real control plane; real backend only."""
        if self._plane is None:
            raise RuntimeError('the cluster runs on the fake API, not a control plane')
        return self._plane

    @property
    def _client(self) -> Rest:
        if self._rest is None:
            raise RuntimeError('the cluster has not been started')
        return self._rest

    @property
    def workdir(self) -> Path:
        if self._workdir is None:
            raise RuntimeError('the cluster has not been started')
        return self._workdir

    async def __aenter__(self) -> Cluster:
        try:
            if self._workdir is None:
                temporary = self._stack.enter_context(tempfile.TemporaryDirectory())
                self._workdir = Path(temporary)
            if self._fake is not None:
                await self._stack.enter_async_context(self._fake)
                self.url = self._fake.url
            else:
                await self._start_control_plane()
            if self._want_prometheus:
                self._prometheus = Prometheus(workdir=self.workdir)
                self._stack.push_async_callback(self._prometheus.stop)
                self.prometheus_url = await self._prometheus.start()
            self._stack.push_async_callback(self._stop_gateways_and_emulators)
            self._stack.push_async_callback(self._cancel_tasks)
            self._tasks = [
                asyncio.create_task(self._every(self._poll, self.reconcile), name='reconciler'),
                asyncio.create_task(self._every(self._load_interval, self._load), name='load'),
            ]
        except BaseException:
            await self._stack.aclose()
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._stack.aclose()
        if exc is None and self.failures:
            raise RuntimeError(
                f'the development cluster failed: {self.failures[0]!r}'
            ) from self.failures[0]

    async def _start_control_plane(self) -> None:
        plane = ControlPlane(workdir=self.workdir / 'control-plane')
        await self._stack.enter_async_context(plane)
        self._plane, self.url = plane, plane.url
        self._rest = Rest(
            url=plane.url, ca=plane.ca, cert=plane.pki / 'admin.crt', key=plane.pki / 'admin.key'
        )
        self._stack.callback(self._rest.close)
        await asyncio.to_thread(self._install)
        nodes.register_node(self._rest, name=objects.NODE_NAME, accelerator=None)
        self._nodes.add(objects.NODE_NAME)

    def _install(self) -> None:
        """CRDs, the controller's namespace, ServiceAccount and RBAC; the workload namespace
        (with its default ServiceAccount, which pods need); a token for the controller."""
        kubectl = binaries.find('kubectl')
        if kubectl is None:
            raise ControlPlaneMissing('kubectl is not built (make binaries)')
        rendered = subprocess.run(
            [str(kubectl), 'kustomize', str(_DEPLOY_BASE)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        wanted = [d for d in yaml.safe_load_all(rendered) if d and d['kind'] in _INSTALLED_KINDS]
        self._apply(wanted)
        self._add_namespace(self.namespace)
        answer = self._client.raw(
            method='POST',
            path=f'/api/v1/namespaces/{CONTROLLER_NAMESPACE}/serviceaccounts/'
            f'{CONTROLLER_ACCOUNT}/token',
            body={
                'apiVersion': 'authentication.k8s.io/v1',
                'kind': 'TokenRequest',
                'spec': {'expirationSeconds': 86400},
            },
        )
        self._token = str(answer['status']['token'])

    def install(self, docs: builtins.list[Obj]) -> None:
        """Apply `docs` (CRDs, namespaces, ...) on the real control plane as `kubectl apply
        --server-side` does, and wait until every CRD is established (at most a minute); the
        fake API has its kinds and namespaces built in, and installs nothing (ValueError)."""
        if self._fake is not None:
            raise ValueError('the fake API has its kinds built in: install on the real one only')
        self._apply(docs)
        for doc in docs:
            if doc['kind'] == 'Namespace':
                self._add_namespace(doc['metadata']['name'])

    def _apply(self, docs: builtins.list[Obj]) -> None:
        kubectl = binaries.find('kubectl')
        if kubectl is None:
            raise ControlPlaneMissing('kubectl is not built (make binaries)')
        admin = self.control_plane.kubeconfig(self.workdir / 'admin.kubeconfig')
        for command in (
            ['apply', '--server-side', '-f', '-'],
            ['wait', '--for=condition=Established', '--timeout=60s', 'crd', '--all'],
        ):
            subprocess.run(
                [str(kubectl), f'--kubeconfig={admin}', *command],
                input=yaml.safe_dump_all(docs),
                capture_output=True,
                text=True,
                check=True,
            )

    def _add_namespace(self, name: str) -> None:
        """Namespace `name` (kept if there), once its default ServiceAccount, which pods
        need, is there too (at most a minute)."""
        rest = self._client
        with contextlib.suppress(ApiError):
            rest.raw(
                method='POST',
                path='/api/v1/namespaces',
                body={'apiVersion': 'v1', 'kind': 'Namespace', 'metadata': {'name': name}},
            )
        deadline = time.monotonic() + 60
        while True:
            try:
                rest.raw(method='GET', path=f'/api/v1/namespaces/{name}/serviceaccounts/default')
                return
            except ApiError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    async def _cancel_tasks(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _stop_gateways_and_emulators(self) -> None:
        for model in sorted(self._gateways):
            await self._gateways[model].stop()
        for name in sorted(self._variants):
            await self._variants[name].running.stop()

    async def _every(self, interval: float, step: Callable[[], Awaitable[None]]) -> None:
        while True:
            try:
                await step()
            except Exception as exc:  # re-raised at exit; the next pass retries
                if repr(exc) not in {repr(f) for f in self.failures}:
                    logger.exception(
                        'development cluster: %s failed', getattr(step, '__name__', step)
                    )
                    self.failures.append(exc)
            await asyncio.sleep(interval)

    # ---- building the cluster --------------------------------------------------------------

    async def add_variant(
        self,
        *,
        name: str,
        model_id: str,
        preset: str | VariantSpec,
        cost: float,
        replicas: int,
        min_replicas: int = 0,
        max_replicas: int = 4,
        accelerator: str | None = None,
        rate: float = 0.0,
        startup_delay: float = 0.0,
    ) -> None:
        """A Deployment, its VA and an emulated fleet; the model's EPP on its first variant.

        `accelerator` defaults to the preset's (e.g. H100); `rate`, when > 0, sets the model's
        load (`set_rate`). New pods are ready after `startup_delay` seconds (the preset's own
        startup delay, 90 s and more, is not used). On return the pods of a variant without
        startup delay are ready.
        """
        if name in self._variants:
            raise ValueError(f'variant {name} already exists')
        if not (math.isfinite(rate) and rate >= 0):
            raise ValueError(f'rate must be finite and >= 0, got {rate}')
        if replicas < 0 or not 0 <= min_replicas <= max_replicas:
            raise ValueError(f'bad replica counts {replicas} [{min_replicas}, {max_replicas}]')
        if isinstance(preset, str):
            spec = presets.preset(name=preset, variant_name=name)
        else:
            spec = dataclasses.replace(preset, name=name)
        deploy = objects.deployment(
            name=name,
            namespace=self.namespace,
            model_id=model_id,
            spec=spec,
            replicas=replicas,
            accelerator=accelerator or spec.accelerator,
        )
        if self._inference_pools:
            labels = deploy['spec']['template']['metadata']['labels']
            labels[objects.POOL_LABEL] = f'{objects.slug(model_id)}-pool'
        va = objects.variant_autoscaling(
            name=name,
            namespace=self.namespace,
            model_id=model_id,
            target=name,
            cost=cost,
            min_replicas=min_replicas,
            max_replicas=max_replicas,
        )
        async with self._lock:
            gateway = self._gateways.get(model_id) or await self._add_gateway(model_id)
            running = await serve(
                base_port=0,
                epp_port=0,
                spec=spec,
                replicas=0,
                model_name=model_id,
                namespace=self.namespace,
                seed=self._seed + len(self._variants),
            )
            variant: Workload | VariantPods
            if self._fake is None:
                accelerator_name = deploy['spec']['template']['spec']['nodeSelector'][
                    objects.GPU_PRODUCT_LABEL
                ]
                node_name = f'gpu-{objects.slug(accelerator_name)}'
                if node_name not in self._nodes:
                    nodes.register_node(self._client, name=node_name, accelerator=accelerator_name)
                    self._nodes.add(node_name)
                variant = VariantPods(
                    name=name,
                    namespace=self.namespace,
                    running=running,
                    startup_delay=startup_delay,
                )
            else:
                variant = Workload(
                    name=name,
                    namespace=self.namespace,
                    model_id=model_id,
                    running=running,
                    pod_hash=objects.template_hash(deploy['spec']['template']),
                    startup_delay=startup_delay,
                )
            self._variants[name] = variant
            gateway.backends[name] = Backend(name=name, running=running, pod_name=variant.pod_name)
            self.seed(deploy)
            self.seed(va)
        if rate > 0:
            self.set_rate(model_id=model_id, rate=rate)
        await self.reconcile()

    async def _add_gateway(self, model_id: str) -> Gateway:
        slug = objects.slug(model_id)
        gateway = Gateway(
            model_id=model_id,
            namespace=self.namespace,
            pool=f'{slug}-pool',
            seed=self._seed * 1000 + len(self._gateways),
            input_tokens=self._tokens[0],
            output_tokens=self._tokens[1],
        )
        await gateway.start()
        self._gateways[model_id] = gateway
        self.seed(objects.epp_pod(namespace=self.namespace, model_id=model_id, port=gateway.port))
        if self._inference_pools:
            # The model's InferencePool, its EPP reached through its Service's EndpointSlice.
            service = f'{gateway.pool}-epp'
            self.api.seed(
                objects.inference_pool(name=gateway.pool, namespace=self.namespace, service=service)
            )
            self.api.seed(
                objects.endpoint_slice(
                    service=service,
                    namespace=self.namespace,
                    pod=f'{slug}-epp',
                    ip=objects.POD_IP,
                    metrics_port=gateway.port,
                )
            )
        return gateway

    def seed(self, obj: Obj) -> None:
        """Create `obj` as the harness (a pod: already bound to its node, Running, Ready)."""
        if self._fake is not None:
            self._fake.seed(obj)
        elif obj['kind'] == 'Pod':
            nodes.start_static_pod(self._client, obj)
        else:
            self._client.create(obj)

    def replace(self, obj: Obj) -> None:
        """Replace a stored object's spec or data as a person with kubectl would (not its
        status); its watchers see a MODIFIED."""
        meta = obj['metadata']
        if self._fake is not None:
            resource = self._fake.store_resource(obj)
            self._fake.store.update(resource, meta['namespace'], meta['name'], obj, part='main')
            return
        path = Rest.path(
            api_version=obj['apiVersion'],
            kind=obj['kind'],
            namespace=meta.get('namespace'),
            name=meta['name'],
        )
        # A controller may write the object (its status) between the read and the write: read
        # again and retry, as a person whose `kubectl replace` met a conflict would.
        for attempt in range(5):
            current = self.get(
                api_version=obj['apiVersion'],
                kind=obj['kind'],
                namespace=meta.get('namespace'),
                name=meta['name'],
            )
            version = current['metadata']['resourceVersion']
            try:
                self._client.raw(
                    method='PUT',
                    path=path,
                    body={**obj, 'metadata': {**meta, 'resourceVersion': version}},
                )
                return
            except ApiError as exc:
                if exc.code != 409 or attempt == 4:
                    raise

    def delete(self, *, api_version: str, kind: str, namespace: str | None, name: str) -> None:
        """Delete an object as a person with kubectl would; its watchers see a DELETED."""
        if self._fake is not None:
            resource = self._fake.store_resource({'apiVersion': api_version, 'kind': kind})
            self._fake.store.delete(resource, namespace or '', name)
            return
        self._client.delete(api_version=api_version, kind=kind, namespace=namespace, name=name)

    def report_status(self, obj: Obj) -> None:
        """Write `obj`'s status as the object's own controller would (a kubelet for a pod): its
        watchers see a MODIFIED; the spec is left alone."""
        meta = obj['metadata']
        if self._fake is not None:
            resource = self._fake.store_resource(obj)
            self._fake.store.update(resource, meta['namespace'], meta['name'], obj, part='status')
            return
        # A merge patch replaces lists whole, so the status written is `obj`'s, conditions too.
        self._client.patch(
            api_version=obj['apiVersion'],
            kind=obj['kind'],
            namespace=meta.get('namespace'),
            name=meta['name'],
            patch={'status': obj['status']},
            subresource='status',
        )

    def set_startup_delay(self, *, name: str, seconds: float) -> None:
        """Pods of variant `name` created from now on are ready after `seconds` (finite, >= 0)."""
        if not (math.isfinite(seconds) and seconds >= 0):
            raise ValueError(f'startup delay must be finite and >= 0, got {seconds}')
        self._variants[name].startup_delay = seconds

    def set_rate(self, *, model_id: str, rate: float) -> None:
        """The model's load in requests/s from now on (0 stops it)."""
        gateway = self._gateways.get(model_id)
        if gateway is None:
            raise KeyError(f'no variant serves model {model_id}')
        gateway.set_rate(rate=rate, now=time.monotonic())

    # ---- reading the cluster ---------------------------------------------------------------

    def get(self, *, api_version: str, kind: str, namespace: str | None, name: str) -> Obj:
        """An object as stored now, on either backend (404 ApiError when there is none)."""
        if self._fake is not None:
            # The fake stores a cluster-scoped object under the namespace ''.
            return self._fake.get(
                api_version=api_version, kind=kind, namespace=namespace or '', name=name
            )
        return self._client.get(api_version=api_version, kind=kind, namespace=namespace, name=name)

    def list(self, *, api_version: str, kind: str, namespace: str | None) -> list[Obj]:
        """The objects of a kind in a namespace, by name, on either backend."""
        if self._fake is not None:
            resource = self._fake.store_resource({'apiVersion': api_version, 'kind': kind})
            return self._fake.store.list(resource, namespace)
        return self._client.list(api_version=api_version, kind=kind, namespace=namespace)

    @property
    def requests(self) -> builtins.list[RecordedRequest]:
        """The requests of clients other than the cluster itself, oldest first: the fake API's
        request log, or the real API server's audit log (writes, with their bodies, and reads of
        `/scale` subresources)."""
        if self._fake is not None:
            return list(self._fake.requests)
        found = []
        for event in self.control_plane.audited():
            verb = str(event.get('verb', ''))
            if verb not in _VERBS:
                continue
            path, _, query = str(event.get('requestURI', '')).partition('?')
            user = event.get('user')
            status = event.get('responseStatus')
            found.append(
                RecordedRequest(
                    method=_VERBS[verb],
                    path=path,
                    query=dict(p.partition('=')[::2] for p in query.split('&') if p),
                    content_type='application/json',
                    body=json.dumps(event.get('requestObject')).encode(),
                    client=str(user.get('username', '')) if isinstance(user, dict) else '',
                    at=parse_rfc3339(str(event.get('requestReceivedTimestamp'))) or 0.0,
                    status=int(status['code']) if isinstance(status, dict) else None,
                )
            )
        return found

    def deployment(self, name: str) -> Obj:
        """The Deployment as stored now (404 ApiError when it was deleted)."""
        return self.get(
            api_version='apps/v1', kind='Deployment', namespace=self.namespace, name=name
        )

    def va(self, name: str) -> Obj:
        return self.get(
            api_version='llmd.ai/v1alpha1',
            kind='VariantAutoscaling',
            namespace=self.namespace,
            name=name,
        )

    def pods(self, variant: str | None = None) -> builtins.list[Obj]:
        """Pod objects, by name: all of them, or those of one variant's ReplicaSet."""
        found = self.list(api_version='v1', kind='Pod', namespace=self.namespace)
        if variant is None:
            return found
        workload = self._variants[variant]
        if not isinstance(workload, Workload):
            return [
                p
                for p in found
                if p['metadata'].get('labels', {}).get(objects.APP_LABEL) == variant
            ]
        owner = workload.replica_set
        return [
            p
            for p in found
            if any(r.get('name') == owner for r in p['metadata'].get('ownerReferences', []))
        ]

    def emulator(self, name: str) -> RunningEmulator:
        return self._variants[name].running

    def pod_name(self, variant: str, slot: int) -> str:
        """The name of the variant's pod in `slot` (its emulated replica is the same slot's)."""
        return self._variants[variant].pod_name(slot)

    def gateway(self, model_id: str) -> Gateway:
        return self._gateways[model_id]

    async def stop_prometheus(self) -> None:
        """Stop the cluster's Prometheus for good (a metrics outage); idempotent.

        Its URL then refuses connections; the reconciler keeps writing its target files.
        """
        if self._prometheus is None:
            raise RuntimeError('the cluster runs no Prometheus')
        await self._prometheus.stop()

    def epp_pod_name(self, model_id: str) -> str:
        return f'{objects.slug(model_id)}-epp'

    def kubeconfig(self, path: Path, *, client: str | None = None) -> Path:
        """Write a kubeconfig for the fake API (namespace = the cluster's) to `path`.

        `client` names the requests made with it in the fake API's log (`RecordedRequest.client`).
        """
        if self._plane is not None:
            # Every client is the controller's ServiceAccount, bound to the shipped RBAC.
            return self._plane.token_kubeconfig(path, token=self._token, namespace=self.namespace)
        config = objects.kubeconfig(server=self.url, namespace=self.namespace, token=client)
        path.write_text(yaml.safe_dump(config))
        return path

    def describe(self) -> str:
        """One line per variant and per model: replicas wanted, pods, emulator, load, queue."""
        lines = []
        for name in sorted(self._variants):
            v = self._variants[name]
            try:
                wanted: object = replicas_of(self.deployment(name))
            except (ApiError, ValueError) as exc:
                wanted = exc
            ready = v.ready
            lines.append(
                f'{name}: spec.replicas={wanted} pods={v.started} ready={ready} '
                f'emulator={v.running.emulator.replicas}'
            )
        for model in sorted(self._gateways):
            g = self._gateways[model]
            lines.append(
                f'{model}: rate={g.rate} queue={g.queue_size} dispatched={g.dispatched} '
                f'rejected={g.rejected}'
            )
        return '\n'.join(lines)

    async def wait_for(self, predicate: Callable[[], bool], *, timeout: float, what: str) -> None:
        """Poll `predicate` every 50 ms until true; TimeoutError after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f'timed out after {timeout} s waiting for {what}\n{self.describe()}'
                )
            await asyncio.sleep(0.05)

    # ---- the controllers -------------------------------------------------------------------

    async def _load(self) -> None:
        now = time.monotonic()
        for model in sorted(self._gateways):
            self._gateways[model].tick(now=now)

    async def reconcile(self) -> None:
        """One pass of the Deployment controller and kubelet over every variant (see above)."""
        async with self._lock:
            now = time.monotonic()
            listed = (
                []
                if self._fake is not None
                else self._client.list(api_version='v1', kind='Pod', namespace=self.namespace)
            )
            for name in sorted(self._variants):
                variant = self._variants[name]
                if isinstance(variant, Workload):
                    await variant.sync(api=self.api, now=now)
                else:
                    await variant.sync(rest=self._client, listed=listed, now=now)
            if self._prometheus is not None:
                vllm = [
                    t for n in sorted(self._variants) for t in self._variants[n].scrape_targets()
                ]
                epp = [
                    (self.namespace, self.epp_pod_name(m), self._gateways[m].port)
                    for m in sorted(self._gateways)
                ]
                self._prometheus.write_targets(job='vllm', groups=objects.file_sd(targets=vllm))
                self._prometheus.write_targets(job='epp', groups=objects.file_sd(targets=epp))
