"""The kubelet emulation on a real API server: GPU nodes, and their pods run as emulated vLLM.

Why: on the real control plane, kube-controller-manager turns a Deployment into a ReplicaSet and
pods, and kube-scheduler binds each pod to a node, exactly as in a cluster. What no binary here
can do is run the pods: there is no container runtime and no GPU. This module plays the kubelet
of a few nodes, as a client of the API (admin certificate): it registers the nodes, with the GPU
product label the Deployments' nodeSelector names and `nvidia.com/gpu` allocatable, and brings
the pods bound to them to life as replicas of the variant's emulator (`llmscaler.emulate`).

What `VariantPods.sync` does, every pass, for one variant's pods (label `app=<variant>`):

- a pod bound to a node (spec.nodeName set) is started when first seen; it is Ready after the
  variant's `startup_delay` (0: on the first pass), with podIP 127.0.0.1 and annotation
  `prometheus.io/port` naming its replica's port. Until then it is Pending with no IP;
- the emulator runs one replica per Ready pod. Replicas are slots 0..k−1 of the emulator, so a
  pod's slot is its rank among the Ready pods (oldest first): when a pod other than the youngest
  goes, the younger pods move down one slot and their port annotations are rewritten. The
  ReplicaSet controller deletes the youngest pods first, so on a plain scale-down nothing moves;
- a pod with a deletionTimestamp (a scale-down, a Deployment deleted by the garbage collector, a
  `kubectl delete pod`) leaves the emulator at once and is then deleted with a grace period of 0,
  with its uid as precondition, as a kubelet does once its containers have stopped.

Status and annotations are written only when they change (JSON merge patches), so an idle
cluster sends one list request per pass.

What fails: API errors other than a 404 or 409 on a pod that is going away propagate (`ApiError`,
httpx errors); the caller logs and retries on the next pass.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

from llmscaler.devcluster import objects
from llmscaler.devcluster.fakeapi.semantics import ApiError
from llmscaler.devcluster.rest import Rest
from llmscaler.emulate.server import RunningEmulator

__all__ = ['GPUS_PER_NODE', 'VariantPods', 'node', 'register_node', 'start_static_pod']

Obj = dict[str, Any]
GPUS_PER_NODE = 64
_POD = {'api_version': 'v1', 'kind': 'Pod'}


def node(*, name: str, accelerator: str | None) -> Obj:
    """A Ready node with room for many pods and, for a GPU node, `GPUS_PER_NODE` GPUs."""
    labels = {'kubernetes.io/hostname': name, 'kubernetes.io/os': 'linux'}
    allocatable = {'cpu': '256', 'memory': '2Ti', 'pods': '250'}
    if accelerator is not None:
        labels[objects.GPU_PRODUCT_LABEL] = accelerator
        allocatable['nvidia.com/gpu'] = str(GPUS_PER_NODE)
    return {
        'apiVersion': 'v1',
        'kind': 'Node',
        'metadata': {'name': name, 'labels': labels},
        'status': {
            'capacity': allocatable,
            'allocatable': allocatable,
            'conditions': [
                {'type': 'Ready', 'status': 'True', 'reason': 'KubeletReady'},
                {
                    'type': 'MemoryPressure',
                    'status': 'False',
                    'reason': 'KubeletHasSufficientMemory',
                },
                {'type': 'DiskPressure', 'status': 'False', 'reason': 'KubeletHasNoDiskPressure'},
                {'type': 'PIDPressure', 'status': 'False', 'reason': 'KubeletHasSufficientPID'},
            ],
            'addresses': [{'type': 'InternalIP', 'address': objects.POD_IP}],
        },
    }


def register_node(rest: Rest, *, name: str, accelerator: str | None) -> None:
    """Create node `name` unless it exists, then report its status (create drops a status).

    The API server's TaintNodesByCondition admission taints a new node not-ready until the node
    lifecycle controller sees it Ready; that controller does not run here (it would evict the
    pods of nodes without a real kubelet's heartbeats), so the harness lifts the taint itself.
    """
    wanted = node(name=name, accelerator=accelerator)
    with contextlib.suppress(ApiError):
        rest.create(wanted)
    rest.patch(
        api_version='v1', kind='Node', namespace=None, name=name, patch={'spec': {'taints': None}}
    )
    rest.patch(
        api_version='v1',
        kind='Node',
        namespace=None,
        name=name,
        patch={'status': wanted['status']},
        subresource='status',
    )


def start_static_pod(rest: Rest, pod: Obj) -> None:
    """Create a pod already bound to a node (spec.nodeName) and report it Running and Ready."""
    meta = pod['metadata']
    rest.create({key: value for key, value in pod.items() if key != 'status'})
    rest.patch(
        **_POD,
        namespace=meta['namespace'],
        name=meta['name'],
        patch={'status': pod['status']},
        subresource='status',
    )


@dataclass(slots=True)
class _Pod:
    name: str
    uid: str
    seen: float
    written: tuple[int | None, bool] | None = None  # (port, ready) last reported


class VariantPods:
    """The pods of one variant on the emulated nodes (see the module docstring)."""

    def __init__(
        self, *, name: str, namespace: str, running: RunningEmulator, startup_delay: float
    ) -> None:
        self.name = name
        self.namespace = namespace
        self.running = running
        self.startup_delay = startup_delay
        self._pods: dict[str, _Pod] = {}  # by uid
        self._ranked: list[str] = []  # uids of Ready pods, slot order

    @property
    def ready(self) -> int:
        return len(self._ranked)

    @property
    def started(self) -> int:
        """Pods started, Ready or not."""
        return len(self._pods)

    def pod_name(self, slot: int) -> str:
        """The Ready pod in `slot`, or a placeholder for a slot no pod holds (draining)."""
        if slot < len(self._ranked):
            return self._pods[self._ranked[slot]].name
        return f'{self.name}-draining-{slot}'

    def scrape_targets(self) -> list[tuple[str, str, int]]:
        """(namespace, pod, port) of every Ready pod."""
        ports = self.running.slot_ports
        return [
            (self.namespace, self._pods[uid].name, ports[slot])
            for slot, uid in enumerate(self._ranked)
            if slot in ports
        ]

    async def sync(self, *, rest: Rest, listed: list[Obj], now: float) -> None:
        """One kubelet pass over this variant's pods, `listed` as the API returned them."""
        live: dict[str, Obj] = {}
        for pod in listed:
            meta = pod['metadata']
            if meta.get('labels', {}).get(objects.APP_LABEL) != self.name:
                continue
            if not pod.get('spec', {}).get('nodeName'):
                continue  # not scheduled yet
            if meta.get('deletionTimestamp'):
                self._pods.pop(meta['uid'], None)
                with contextlib.suppress(ApiError):
                    rest.delete(
                        **_POD,
                        namespace=self.namespace,
                        name=meta['name'],
                        now=True,
                        uid=meta['uid'],
                    )
                continue
            live[meta['uid']] = pod
            if meta['uid'] not in self._pods:
                self._pods[meta['uid']] = _Pod(name=meta['name'], uid=meta['uid'], seen=now)
        for uid in sorted(set(self._pods) - set(live)):
            del self._pods[uid]
        ranked = [uid for uid in self._ranked if uid in self._pods]
        newly = sorted(
            (p.seen, p.name, uid)
            for uid, p in self._pods.items()
            if uid not in ranked and now - p.seen >= self.startup_delay
        )
        self._ranked = ranked + [uid for _, _, uid in newly]
        if self.running.emulator.replicas != len(self._ranked):
            await self.running.scale(replicas=len(self._ranked))
        ports = self.running.slot_ports
        slots = {uid: slot for slot, uid in enumerate(self._ranked)}
        for uid in sorted(self._pods):
            state = self._pods[uid]
            slot = slots.get(uid)
            wanted = (ports.get(slot) if slot is not None else None, slot is not None)
            if state.written != wanted:
                self._report(rest, pod=state, port=wanted[0], ready=wanted[1])
                state.written = wanted

    def _report(self, rest: Rest, *, pod: _Pod, port: int | None, ready: bool) -> None:
        annotations: dict[str, str | None] = {
            objects.PORT_ANNOTATION: str(port) if port is not None else None,
            objects.PATH_ANNOTATION: '/metrics' if port is not None else None,
        }
        try:
            rest.patch(
                **_POD,
                namespace=self.namespace,
                name=pod.name,
                patch={'metadata': {'annotations': annotations}},
            )
            rest.patch(
                **_POD,
                namespace=self.namespace,
                name=pod.name,
                patch={'status': objects.pod_status(ready=ready)},
                subresource='status',
            )
        except ApiError as exc:
            # The pod went away between the list and this write: the next pass forgets it.
            if exc.code not in (404, 409):
                raise
