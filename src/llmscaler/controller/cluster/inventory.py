"""The cluster's GPU inventory for the limiter: allocatable GPUs per type, minus other pods' use.

Why: with `enableLimiter: true` the core fits every model's scale-ups to the GPUs that are free
(`optimize.limiter`), and only the cluster knows how many there are: the Nodes' allocatable
GPUs, labelled with their product, and the pods already bound to them. This module watches both
and turns them into the snapshot's `gpu_limits` (provider `inventory`).

What it computes (`gpu_limits`), per accelerator type:

- `limit`: the allocatable GPUs (`nvidia.com/gpu`, `amd.com/gpu`, `intel.com/gpu`,
  `google.com/tpu`, whole numbers) of every Node that can take new pods — not cordoned
  (`spec.unschedulable`) and not NotReady (a Ready condition that is not True; a Node without
  conditions counts). The type is the Node's GPU product label, read in the order WVA and the
  scale-target accessor read them (`kube.targets.GPU_PRODUCT_LABELS`: `nvidia.com/gpu.product`,
  `amd.com/gpu.product-name`, `cloud.google.com/gke-accelerator`,
  `cloud.google.com/gke-tpu-accelerator`), else `inference.optimization/acceleratorName`, else
  `unknown`; so a Node's type and a variant's nodeSelector name the same thing.
- `used`: the GPUs requested (limits over requests, `vllm_args.gpus_per_replica`) by pods bound
  to those Nodes (`spec.nodeName`, phase neither Succeeded nor Failed) that are *not* replicas
  of a variant: the core adds the variants' own GPUs from their current replica counts, starting
  pods included, so they are not counted twice.

Which pods are the variants': those attribution gives to a variant (`collect.attribution`, the
owner chain or the variant label). LWS workers are not attributed, so a LeaderWorkerSet's
worker GPUs are counted twice while its groups run (the limiter is then conservative).

The informers keep little: a Node's GPU labels, allocatable GPUs, cordon and Ready condition;
a pod only when it is bound and requests GPUs, as its name, node, phase and GPU count. A type
no Node carries is not reported (the core does not limit it: the scheduler leaves such pods
Pending anyway, and a variant may name its type differently from the Nodes).

What fails: nothing raises; a Node or pod with malformed fields counts for nothing (an
allocatable count that is not a whole number is ignored).
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Mapping, Sequence
from typing import Any, Final

from lightkube import AsyncClient
from lightkube.resources.core_v1 import Node, Pod

from llmscaler.clock import Clock
from llmscaler.collect.attribution import pod_variants
from llmscaler.config.resolved import Config
from llmscaler.controller.cluster.world import World
from llmscaler.domain.snapshot import GpuLimit
from llmscaler.kube.engine_args.template import GPU_RESOURCES, gpus_per_replica
from llmscaler.kube.informer import Informer, Obj
from llmscaler.kube.targets import ACCELERATOR_LABEL, GPU_PRODUCT_LABELS
from llmscaler.optimize.limiter import INVENTORY_PROVIDER

UNKNOWN: Final = 'unknown'
_LABELS: Final = (*GPU_PRODUCT_LABELS, ACCELERATOR_LABEL)
_DONE_PHASES: Final = frozenset({'Succeeded', 'Failed'})
_GPUS_KEY: Final = 'gpus'


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _whole(value: object) -> int:
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return max(0, value)
    if isinstance(value, str) and value.strip().isdecimal():
        return int(value.strip())
    return 0


def node_accelerator(labels: Mapping[str, Any]) -> str:
    """The accelerator type a Node's labels name (see the module docstring)."""
    for label in _LABELS:
        value = labels.get(label)
        if isinstance(value, str) and value:
            return value
    return UNKNOWN


def slim_node(obj: Obj) -> Obj | None:
    """What `gpu_limits` reads of a Node (a transform for the Node informer)."""
    meta = _mapping(obj.get('metadata'))
    spec = _mapping(obj.get('spec'))
    status = _mapping(obj.get('status'))
    labels = _mapping(meta.get('labels'))
    allocatable = _mapping(status.get('allocatable'))
    ready = [
        c.get('status')
        for c in status.get('conditions') or ()
        if isinstance(c, Mapping) and c.get('type') == 'Ready'
    ]
    return {
        'metadata': {
            'name': meta.get('name'),
            'resourceVersion': meta.get('resourceVersion'),
            'labels': {k: labels[k] for k in _LABELS if k in labels},
        },
        'spec': {'unschedulable': spec.get('unschedulable') is True},
        'status': {
            'allocatable': {r: allocatable[r] for r in GPU_RESOURCES if r in allocatable},
            'ready': ready[0] if ready else None,
        },
    }


def slim_gpu_pod(obj: Obj) -> Obj | None:
    """A bound pod that requests GPUs, as its name, node, phase and GPU count; None otherwise."""
    meta = _mapping(obj.get('metadata'))
    spec = _mapping(obj.get('spec'))
    status = _mapping(obj.get('status'))
    node = spec.get('nodeName')
    if not isinstance(node, str) or not node or status.get('phase') in _DONE_PHASES:
        return None
    containers = spec.get('containers')
    gpus = gpus_per_replica(containers=containers if isinstance(containers, list) else [])
    if gpus <= 0:
        return None
    return {
        'metadata': {
            'name': meta.get('name'),
            'namespace': meta.get('namespace'),
            'resourceVersion': meta.get('resourceVersion'),
        },
        'spec': {'nodeName': node},
        'status': {'phase': status.get('phase')},
        _GPUS_KEY: gpus,
    }


def gpu_limits(
    *,
    nodes: Sequence[Obj],
    pods: Sequence[Obj],
    managed: Collection[tuple[str, str]],
) -> tuple[GpuLimit, ...]:
    """One `GpuLimit` per accelerator type the schedulable Nodes carry, sorted by type.

    `nodes` and `pods` as `slim_node` / `slim_gpu_pod` keep them (full objects work too);
    `managed` holds the (namespace, name) of every pod that is a variant's replica.
    """
    node_type: dict[str, str] = {}
    limit: dict[str, int] = {}
    for node in nodes:
        slim = slim_node(node) if 'ready' not in _mapping(node.get('status')) else node
        if slim is None:
            continue
        meta, status = _mapping(slim.get('metadata')), _mapping(slim.get('status'))
        name = meta.get('name')
        if not isinstance(name, str) or _mapping(slim.get('spec')).get('unschedulable'):
            continue
        if status.get('ready') not in (None, 'True'):
            continue
        gpus = sum(_whole(v) for v in _mapping(status.get('allocatable')).values())
        if gpus <= 0:
            continue
        accelerator = node_accelerator(_mapping(meta.get('labels')))
        node_type[name] = accelerator
        limit[accelerator] = limit.get(accelerator, 0) + gpus
    used = dict.fromkeys(limit, 0)
    for pod in pods:
        slim = pod if _GPUS_KEY in pod else slim_gpu_pod(pod)
        if slim is None:
            continue
        meta = _mapping(slim.get('metadata'))
        on = node_type.get(str(_mapping(slim.get('spec')).get('nodeName')))
        key = (str(meta.get('namespace')), str(meta.get('name')))
        if on is None or key in managed:
            continue
        used[on] += _whole(slim.get(_GPUS_KEY))
    return tuple(
        GpuLimit(
            provider=INVENTORY_PROVIDER,
            accelerator=accelerator,
            limit=min(limit[accelerator], 2**31 - 1),
            used=min(used[accelerator], 2**31 - 1),
        )
        for accelerator in sorted(limit)
    )


def limiter_wanted(config: Config) -> bool:
    """Whether any layer of the configuration turns the limiter on."""
    layers = [config.default, *(c for _, c in config.by_namespace)]
    layers += [c for _, c in config.by_model] + [c for _, c in config.by_group]
    return any(layer.saturation.enable_limiter for layer in layers)


class Inventory:
    """The Node informer and the cluster-wide informer of bound GPU pods, and their limits.

    The informers start the first time a configuration turns the limiter on (a cluster-wide pod
    watch costs a list of every pod; without the limiter nobody reads it) and run until
    `aclose()`. Until both have listed, `limits` is empty: the limiter then limits nothing and
    the decisions say no inventory is known (as when the API refuses to list Nodes).
    """

    def __init__(self, *, client: AsyncClient, clock: Clock) -> None:
        self.nodes = Informer(
            client=client, resource=Node, clock=clock, name='nodes', transform=slim_node
        )
        self.pods = Informer(
            client=client, resource=Pod, clock=clock, name='gpu-pods', transform=slim_gpu_pod
        )
        self._tasks: list[asyncio.Task[None]] = []

    def informers(self) -> tuple[Informer, Informer]:
        return (self.nodes, self.pods)

    def synced(self) -> bool:
        return self.nodes.synced.is_set() and self.pods.synced.is_set()

    def limits(self, *, world: World, config: Config) -> tuple[GpuLimit, ...]:
        """The snapshot's `gpu_limits` for the cycle of `world` (see the class docstring)."""
        if not limiter_wanted(config):
            return ()
        if not self._tasks:
            loop = asyncio.get_running_loop()
            self._tasks = [loop.create_task(i.run()) for i in self.informers()]
        if not self.synced():
            return ()
        managed = {
            (namespace, pod)
            for namespace, pod, _ in pod_variants(
                pods=world.pods, variants=world.variants, targets=world.targets
            )
        }
        return gpu_limits(nodes=self.nodes.items(), pods=self.pods.items(), managed=managed)

    async def aclose(self) -> None:
        """Stop the informers, if they were started."""
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
