"""The replicas of a simulated fleet: their lifecycle, the GPUs they hold, and what they cost.

Why: this is the part of Kubernetes the simulator needs under the scale subresource (a
ReplicaSet's creations and deletions, a scheduler binding pods to GPUs, pods starting and
draining), kept apart from the gateways in front of the replicas (`sim.fleet.cluster`), which
subclasses it. The rules (removal order, GPU inventory, lifecycle, cost) are in
`sim.fleet.cluster`'s docstring, where a reader of the fleet looks first.

The subclass says where routable replicas go (`_set_routable`) and starts the initial replicas
(`_start`) once its gateways exist.

What fails: `Fleet` raises `ValueError` for an unknown engine kind, duplicate variant names, an
inventory count that is not a whole number >= 0 or initial replicas beyond the inventory;
`set_target` raises `KeyError` for an unknown variant. No I/O, no wall clock; every loop runs in
name order.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping, Sequence

from llmscaler.sim.fleet.inventory import GpuInventory, gpu_waits
from llmscaler.sim.fleet.pods import EngineKind, Replica, engine_factory
from llmscaler.sim.vocabulary import GpuWait, VariantSpec


class Fleet:
    """Every variant's replicas, from creation to disappearance, and the GPUs they hold."""

    def __init__(
        self,
        *,
        variants: Sequence[VariantSpec],
        engine: EngineKind,
        inventory: Mapping[str, int] | None,
    ) -> None:
        names = [v.name for v in variants]
        if len(set(names)) != len(names):
            raise ValueError(f'duplicate variant names: {sorted(names)}')
        self._engine_class = engine_factory(kind=engine)
        self.specs: dict[str, VariantSpec] = {v.name: v for v in sorted(variants, key=_name)}
        self.variant_names: tuple[str, ...] = tuple(self.specs)
        self.model_names: tuple[str, ...] = tuple(sorted({v.model_name for v in variants}))
        self._variants_of: dict[str, tuple[str, ...]] = {
            m: tuple(v for v, s in self.specs.items() if s.model_name == m)
            for m in self.model_names
        }
        self._gpus = GpuInventory(
            limits=inventory or {}, accelerators=(s.accelerator for s in self.specs.values())
        )
        self.inventory: dict[str, int] = self._gpus.limits
        self.gpus_used: dict[str, int] = self._gpus.used
        """GPUs bound to replicas, per accelerator type."""
        self.targets: dict[str, int] = {}
        self.replica_seconds: dict[str, float] = dict.fromkeys(self.variant_names, 0.0)
        self.existing: dict[str, int] = dict.fromkeys(self.variant_names, 0)
        """Replicas bound to GPUs and not gone, per variant: what costs."""
        self.version = 0
        """Bumped on any change of targets or membership (the observer caches on it)."""
        self._counter: dict[str, int] = dict.fromkeys(self.variant_names, 0)
        self._pending: dict[str, list[Replica]] = {v: [] for v in self.variant_names}
        self._ready: dict[str, list[Replica]] = {v: [] for v in self.variant_names}
        self._live: list[Replica] = []  # replicas with an engine (ready or terminating)
        self._ready_heap: list[tuple[float, str]] = []
        self._by_name: dict[str, Replica] = {}
        self.history: list[Replica] = []
        """Replicas that have disappeared, in the order they did."""
        self._gpus.check_initial(specs=self.specs.values())

    def _start(self, *, now: float) -> None:
        """The initial replicas of every variant, bound and Ready (warm) at `now`."""
        for spec in self.specs.values():
            self.targets[spec.name] = max(0, min(spec.initial_replicas, spec.max_replicas))
            for _ in range(self.targets[spec.name]):
                replica = self._create(variant=spec.name, now=now)
                self._gpus.take(spec=spec)
                self._bind(replica=replica, at=now, startup=0.0)
                self._make_ready(replica=replica, now=now)
        self._ready_heap.clear()

    def _set_routable(self) -> None:
        """The set of Ready, non-terminating replicas changed (the subclass routes to them)."""

    # ---- views -------------------------------------------------------------------------------

    @property
    def live(self) -> Sequence[Replica]:
        """Replicas with a running engine (ready or terminating), in name order."""
        return self._live

    def variants_of(self, *, model: str) -> tuple[str, ...]:
        """The names of `model`'s variants, sorted."""
        return self._variants_of[model]

    def ready_count(self, *, variant: str) -> int:
        """Ready, non-terminating replicas of `variant` (the scale target's readyReplicas)."""
        return len(self._ready[variant])

    def pending_count(self, *, variant: str) -> int:
        """Created but not yet ready, non-terminating replicas of `variant` (waiting for GPUs
        or starting)."""
        return len(self._pending[variant])

    def unbound_count(self, *, variant: str) -> int:
        """Replicas of `variant` waiting for GPUs."""
        return sum(1 for r in self._pending[variant] if not r.is_bound)

    def next_ready_time(self) -> float:
        """When the next pending replica becomes Ready (inf when none is pending)."""
        heap = self._ready_heap
        while heap:
            at, name = heap[0]
            replica = self._by_name.get(name)
            if replica is not None and replica.engine is None:
                return at
            heapq.heappop(heap)  # removed before it became ready
        return math.inf

    # ---- scale subresource -------------------------------------------------------------------

    def set_target(
        self, *, variant: str, target: int, now: float, schedule: bool = True
    ) -> tuple[int, int]:
        """Write a variant's replica target; returns (before, after) after clamping.

        With `schedule=False` the replicas it creates wait for `schedule(now)` to be bound to
        GPUs (the event loop writes every target of one instant first; see the module
        docstring); without an inventory they are bound at once either way.
        """
        spec = self.specs[variant]
        before = self.targets[variant]
        after = max(0, min(int(target), spec.max_replicas))
        self.targets[variant] = after
        if after != before:
            self.version += 1
        pending, ready = self._pending[variant], self._ready[variant]
        have = len(pending) + len(ready)
        limited = self._gpus.limited(accelerator=spec.accelerator)
        for _ in range(after - have):
            replica = self._create(variant=variant, now=now)
            if limited:
                self._gpus.waiting.append(replica)
            else:
                self._gpus.take(spec=spec)
                self._bind(replica=replica, at=now, startup=spec.startup_delay)
        excess = have - after
        if excess > 0:
            doomed = sorted(pending, key=_removal_order)[:excess]
            for replica in doomed:
                pending.remove(replica)
                self._disappear(replica=replica, at=now)
            excess -= len(doomed)
        if excess > 0:
            for replica in sorted(ready, key=_fewest_in_flight)[:excess]:
                self._terminate(replica=replica, now=now)
        if schedule and self._gpus.waiting:
            self.schedule(now=now)
        return before, after

    def schedule(self, *, now: float) -> None:
        """Bind waiting replicas to free GPUs at `now`, first come (see the module docstring)."""
        for replica in self._gpus.due(specs=self.specs):
            spec = self.specs[replica.variant]
            self._bind(replica=replica, at=max(now, replica.created), startup=spec.startup_delay)

    def _create(self, *, variant: str, now: float) -> Replica:
        number = self._counter[variant]
        self._counter[variant] = number + 1
        replica = Replica(
            name=f'{variant}-{number:04d}',
            variant=variant,
            number=number,
            created=now,
            ready_at=math.inf,
            model=self.specs[variant].model_name,
        )
        self._by_name[replica.name] = replica
        self._pending[variant].append(replica)
        self.version += 1
        return replica

    def _bind(self, *, replica: Replica, at: float, startup: float) -> None:
        # Its GPUs are taken already (`GpuInventory`); its start-up clock starts.
        replica.bound = at
        replica.ready_at = at + max(0.0, startup)
        self.existing[replica.variant] += 1
        heapq.heappush(self._ready_heap, (replica.ready_at, replica.name))
        self.version += 1

    def _make_ready(self, *, replica: Replica, now: float) -> None:
        spec = self.specs[replica.variant]
        if replica in self._pending[replica.variant]:
            self._pending[replica.variant].remove(replica)
        replica.engine = self._engine_class(spec=spec, name=replica.name, now=now)
        replica.next_step = math.inf
        self._ready[replica.variant].append(replica)
        self._live.append(replica)
        self._live.sort(key=_name)
        self._set_routable()
        self.version += 1

    def _terminate(self, *, replica: Replica, now: float) -> None:
        self._ready[replica.variant].remove(replica)
        replica.terminating = True
        replica.terminated_at = now
        self._set_routable()
        self.version += 1
        assert replica.engine is not None
        if replica.engine.in_flight == 0:
            self._disappear(replica=replica, at=max(now, replica.last_finish))

    def _disappear(self, *, replica: Replica, at: float) -> None:
        replica.gone = at
        if replica.is_bound:
            spec = self.specs[replica.variant]
            self.replica_seconds[replica.variant] += at - replica.bound
            self.existing[replica.variant] -= 1
            self._gpus.give_back(spec=spec)
        else:
            self._gpus.waiting.remove(replica)
        del self._by_name[replica.name]
        self.history.append(replica)
        if replica.engine is not None:
            self._live.remove(replica)
        self.version += 1

    # ---- the end -----------------------------------------------------------------------------

    def finish(self, *, end: float) -> dict[str, float]:
        """Replica-seconds per variant with every replica's existence cut at `end`."""
        seconds = dict.fromkeys(self.variant_names, 0.0)
        for variant, value in self.replica_seconds.items():
            seconds[variant] = value
        # Replicas that disappeared after `end` (their last step ran past it) are trimmed too.
        for replica in self.history:
            if replica.gone > end and replica.is_bound:
                seconds[replica.variant] -= replica.gone - max(end, replica.bound)
        for name in sorted(self._by_name):
            replica = self._by_name[name]
            if replica.is_bound:
                seconds[replica.variant] += max(0.0, end - replica.bound)
        return seconds

    def gpu_waits(self, *, end: float) -> list[GpuWait]:
        """The replicas that waited for GPUs (`sim.fleet.inventory.gpu_waits`)."""
        return gpu_waits(replicas=[*self.history, *self._by_name.values()], end=end)


def _name(item: VariantSpec | Replica) -> str:
    return item.name


def _removal_order(replica: Replica) -> tuple[bool, float, int]:
    # Waiting for GPUs first, then newest first.
    return (replica.is_bound, -replica.created, -replica.number)


def _fewest_in_flight(replica: Replica) -> tuple[int, float, int]:
    assert replica.engine is not None
    return (replica.engine.in_flight, -replica.created, -replica.number)
