"""The fleet's GPUs: how many of each accelerator type there are, which are bound, who waits.

Why: models sharing a cluster compete for its GPUs; a scale-up the inventory cannot hold leaves
replicas Pending, as a Kubernetes scheduler leaves pods it cannot place, and which replica gets
the GPUs freed next decides which model recovers first. The fleet (`sim.fleet.cluster`) asks this
module whether a replica fits and in which order the waiting ones are bound.

What it models: `limits` GPUs per accelerator type; a type it does not name is unlimited (its use
is still counted). A replica holds `gpus_per_replica` GPUs of its variant's accelerator type.
Waiting replicas are bound first come: by creation time, ties by model name, variant name, then
creation order; every one that fits is bound (`due`), so a replica needing more GPUs than are
free does not hold back a smaller one behind it. GPUs of one type form one pool: nodes, and the
packing of a tensor-parallel replica's GPUs onto one node, are not modelled.

What fails: `check_inventory` and `GpuInventory` raise `ValueError` for a count that is not a
whole number >= 0; `check_initial` for initial replicas that need more GPUs than there are.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from llmscaler.sim.fleet.pods import Replica
from llmscaler.sim.vocabulary import GpuWait, VariantSpec


def check_inventory(*, inventory: Mapping[str, int]) -> None:
    """Raise `ValueError` unless every count is a whole number >= 0."""
    for accelerator in sorted(inventory):
        count = inventory[accelerator]
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ValueError(
                f'inventory.{accelerator}: GPUs must be a whole number >= 0, got {count!r}'
            )


class GpuInventory:
    """GPUs per accelerator type: the limits, what is bound, the replicas waiting for GPUs."""

    def __init__(self, *, limits: Mapping[str, int], accelerators: Iterable[str]) -> None:
        check_inventory(inventory=limits)
        self.limits: dict[str, int] = {a: limits[a] for a in sorted(limits)}
        self.used: dict[str, int] = dict.fromkeys(sorted(set(accelerators) | set(limits)), 0)
        """GPUs bound to replicas, per accelerator type."""
        self.waiting: list[Replica] = []
        """Replicas created and not bound yet, in no particular order (`due` sorts them)."""

    def limited(self, *, accelerator: str) -> bool:
        return accelerator in self.limits

    def check_initial(self, *, specs: Iterable[VariantSpec]) -> None:
        """Raise `ValueError` when the variants' initial replicas need more GPUs than there are."""
        wanted = dict.fromkeys(self.limits, 0)
        for spec in specs:
            if spec.accelerator in wanted:
                count = max(0, min(spec.initial_replicas, spec.max_replicas))
                wanted[spec.accelerator] += count * spec.gpus_per_replica
        for accelerator, gpus in wanted.items():
            if gpus > self.limits[accelerator]:
                raise ValueError(
                    f'the initial replicas need {gpus} {accelerator} GPUs; the inventory has '
                    f'{self.limits[accelerator]}'
                )

    def take(self, *, spec: VariantSpec) -> None:
        """Bind one replica's GPUs (the caller knows they fit, or the type is unlimited)."""
        self.used[spec.accelerator] += spec.gpus_per_replica

    def give_back(self, *, spec: VariantSpec) -> None:
        self.used[spec.accelerator] -= spec.gpus_per_replica

    def due(self, *, specs: Mapping[str, VariantSpec]) -> list[Replica]:
        """The waiting replicas that fit now, first come; their GPUs are taken and they leave
        the waiting list."""
        if not self.waiting:
            return []
        self.waiting.sort(key=_first_come)
        bound: list[Replica] = []
        still: list[Replica] = []
        for replica in self.waiting:
            spec = specs[replica.variant]
            free = self.limits[spec.accelerator] - self.used[spec.accelerator]
            if spec.gpus_per_replica <= free:
                self.take(spec=spec)
                bound.append(replica)
            else:
                still.append(replica)
        self.waiting = still
        return bound


def _first_come(replica: Replica) -> tuple[float, str, str, int]:
    return (replica.created, replica.model, replica.variant, replica.number)


def gpu_waits(*, replicas: Iterable[Replica], end: float) -> list[GpuWait]:
    """The replicas that waited for GPUs (bound after their creation, or never), in creation
    order (ties: name); a wait still on at `end` ends there."""
    waits: list[GpuWait] = []
    for replica in replicas:
        if replica.is_bound and replica.bound <= replica.created:
            continue
        if replica.is_bound:
            until = replica.bound
        elif replica.gone == replica.gone:  # removed while it waited
            until = replica.gone
        else:
            until = end
        waits.append(
            GpuWait(
                variant=replica.variant,
                replica=replica.name,
                asked=replica.created,
                bound=replica.bound,
                until=min(until, end),
            )
        )
    return sorted(waits, key=lambda w: (w.asked, w.replica))
