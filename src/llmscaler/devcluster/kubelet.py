"""One Deployment of the fake cluster brought to life: its ReplicaSet's pods and their replicas.

Why: in a cluster the Deployment and ReplicaSet controllers turn spec.replicas into pods, the
kubelet starts them and reports them ready, and the deployment controller writes the status the
autoscaler reads back. The controller under test depends on all three, so `Workload.sync` plays
them for one Deployment whose replicas are emulated (`llmscaler.emulate`). It reads and writes
`api.store` directly, so faults injected into the HTTP API never reach it.

What one `sync` does:

- spec.replicas (absent: 1; a deleted Deployment: 0) decides the pod slots 0..n−1. Pod
  `<deploy>-<hash>-<slot>` is owned by ReplicaSet `<deploy>-<hash>` (the fake API has no
  ReplicaSet kind, so the owner chain is the name plus the `pod-template-hash` label). A new pod
  is Pending, with no IP and no port annotation, for `startup_delay` seconds (0: ready at
  once), then Running and Ready with podIP 127.0.0.1 and `prometheus.io/port` = its slot's port.
  Surplus pods are deleted at once, highest slot first, while their emulated replicas drain
  unscraped; a pod deleted by someone else comes back under its name with a new uid.
- the emulator is scaled to the number of ready pods: ready pods are always slots 0..k−1, since a
  lower slot is never younger than a higher one;
- the Deployment status: replicas, updatedReplicas, readyReplicas, availableReplicas,
  unavailableReplicas and observedGeneration, zero counts omitted.

What fails: a spec.replicas that is not a whole number ≥ 0 (the fake API does not validate it)
raises ValueError; store errors other than a 404 propagate. The caller logs and retries.
"""

from __future__ import annotations

import contextlib
import uuid
from dataclasses import dataclass
from typing import Any

from llmscaler.devcluster import objects
from llmscaler.devcluster.fakeapi.semantics import ApiError
from llmscaler.devcluster.fakeapi.server import FakeAPI
from llmscaler.emulate.server import RunningEmulator

Obj = dict[str, Any]
_POD = {'apiVersion': 'v1', 'kind': 'Pod'}


def replicas_of(obj: Obj) -> int:
    """spec.replicas of a Deployment as the API server defaults it (absent: 1)."""
    value = obj.get('spec', {}).get('replicas')
    if value is None:
        return 1
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f'Deployment {obj["metadata"]["name"]}: bad spec.replicas {value!r}')
    return value


@dataclass(slots=True)
class Slot:
    created: float
    ready: bool


class Workload:
    """Deployment `name`'s pods and emulated replicas (see the module docstring)."""

    def __init__(
        self,
        *,
        name: str,
        namespace: str,
        model_id: str,
        running: RunningEmulator,
        pod_hash: str,
        startup_delay: float,
    ) -> None:
        self.name = name
        self.namespace = namespace
        self.model_id = model_id
        self.running = running
        self.pod_hash = pod_hash
        self.startup_delay = startup_delay
        self.replica_set = objects.replica_set_name(deployment_name=name, pod_hash=pod_hash)
        self.replica_set_uid = str(uuid.uuid4())
        self.slots: dict[int, Slot] = {}

    def pod_name(self, slot: int) -> str:
        return f'{self.replica_set}-{slot}'

    @property
    def started(self) -> int:
        """Pods started, Ready or not."""
        return len(self.slots)

    @property
    def ready(self) -> int:
        """Ready pods: the length of the run of ready slots from slot 0."""
        count = 0
        while count in self.slots and self.slots[count].ready:
            count += 1
        return count

    def scrape_targets(self) -> list[tuple[str, str, int]]:
        """(namespace, pod, port) of every ready pod."""
        ports = self.running.slot_ports
        return [
            (self.namespace, self.pod_name(slot), ports[slot])
            for slot in range(self.ready)
            if slot in ports
        ]

    async def sync(self, *, api: FakeAPI, now: float) -> None:
        """One pass of the Deployment and ReplicaSet controllers and the kubelet."""
        try:
            deploy: Obj | None = api.get(
                api_version='apps/v1', kind='Deployment', namespace=self.namespace, name=self.name
            )
        except ApiError as exc:
            if exc.code != 404:
                raise
            deploy = None
        wanted = replicas_of(deploy) if deploy is not None else 0
        for slot in sorted(self.slots, reverse=True):
            if slot >= wanted:
                del self.slots[slot]
                with contextlib.suppress(ApiError):
                    api.store.delete(api.store_resource(_POD), self.namespace, self.pod_name(slot))
        for slot in range(wanted):
            if slot not in self.slots:
                self.slots[slot] = Slot(created=now, ready=self.startup_delay <= 0)
            elif now - self.slots[slot].created >= self.startup_delay:
                self.slots[slot].ready = True
        ready = self.ready
        if self.running.emulator.replicas != ready:
            await self.running.scale(replicas=ready)
        if deploy is None:
            return
        ports = self.running.slot_ports
        for slot in range(wanted):
            pod = objects.replica_pod(
                deploy=deploy,
                pod_hash=self.pod_hash,
                replica_set_uid=self.replica_set_uid,
                slot=slot,
                port=ports[slot] if slot < ready else None,
            )
            _apply_pod(api, pod)
        status = objects.deployment_status(
            generation=deploy['metadata']['generation'], replicas=wanted, ready=ready
        )
        if deploy.get('status') != status:
            resource = api.store_resource(deploy)
            new = {**deploy, 'status': status}
            try:
                api.store.update(resource, self.namespace, self.name, new, part='status')
            except ApiError as exc:
                # The Deployment moved while the emulator scaled (a /scale write): the copy read
                # above is stale. A real controller requeues; the next pass, 50 ms on, writes.
                if exc.code != 409:
                    raise


def _apply_pod(api: FakeAPI, pod: Obj) -> None:
    """Create the pod, or bring its annotations and status to what the kubelet reports."""
    store, resource = api.store, api.store_resource(pod)
    namespace, name = pod['metadata']['namespace'], pod['metadata']['name']
    try:
        current = store.get(resource, namespace, name)
    except ApiError:
        api.seed(pod)
        return
    annotations = pod['metadata'].get('annotations')
    if current['metadata'].get('annotations') != annotations:
        meta = {k: v for k, v in current['metadata'].items() if k != 'annotations'}
        if annotations:
            meta['annotations'] = annotations
        current = store.update(
            resource, namespace, name, {**current, 'metadata': meta}, part='main'
        )
    if current.get('status') != pod['status']:
        new = {**current, 'status': pod['status']}
        store.update(resource, namespace, name, new, part='status')
