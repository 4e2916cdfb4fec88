"""GPU budgets from several constraint providers: how many GPUs of each type new replicas may take.

Why: the limited optimizer (`optimize.limited`) must know, per accelerator type, how many GPUs are
still free, and several providers may each limit them — the nodes' inventory, a cluster quota,
per-namespace quotas, the simulator's scenario. WVA merges them one way (v0.9.0, the limiters of
internal/engines/pipeline/); this module is that merge, pure, so the controller, the simulator and
`llmscaler decide` share it.

What it computes:

- `charge_variants`: each provider's `used` plus the GPUs of the snapshot's variants' current
  replicas in its scope (`current_replicas × gpus_per_replica` of every variant of that type;
  for a namespace pool only the namespace's variants). WVA's `used` is exactly this sum; a
  provider hands in, in `used`, only the GPUs of *other* workloads (0 when it cannot see any).
- `merge_constraints`: per (scope, type), `available = min over providers of max(0, limit −
  used)`; a limit of -1 is unlimited and any finite limit wins over it. A namespace named by
  any namespace-scoped limit becomes a *closed* allow-list: its budget for a listed type is
  min(cluster, namespace), and a type it does not list is denied (0). A type no cluster-scoped
  provider names is not limited cluster-wide.
- `Ledger`: the mutable working copy the allocation charges (cluster and namespace at once).

Units: GPUs, whole numbers. A variant with `gpus_per_replica` 0 (CPU-only) always fits.

Choice where WVA is loose: a type no provider names is unlimited, as in the simulator's
inventory (WVA's greedy reads a missing type as 0 GPUs, which denied every scale-up when the
inventory was unreadable, upstream #1298). A variant may name its type differently from the
Nodes' labels; denying it every replica would be worse than the scheduler leaving a pod
Pending.

What fails: nothing raises; a negative `used` or a limit below -1 cannot be built by the JSON
face (`llmscaler.domain` declares the ranges) and is read as 0 / unlimited here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from llmscaler.domain.snapshot import UNLIMITED_GPUS, GpuLimit, Variant

CLUSTER = ''
"""The scope key of cluster-wide limits."""


@dataclass(frozen=True, slots=True)
class Budgets:
    """GPUs free for new replicas, per accelerator type, cluster-wide and per namespace pool.

    `cluster` holds the types some cluster-scoped provider limits (others are unlimited);
    `namespaces` the closed allow-lists of namespaces that have a pool. Both sorted by key.
    """

    cluster: tuple[tuple[str, int], ...] = ()
    namespaces: tuple[tuple[str, tuple[tuple[str, int], ...]], ...] = ()

    def available(self, *, accelerator: str, namespace: str) -> int | None:
        """Free GPUs of `accelerator` for a replica in `namespace`; None when unlimited."""
        return Ledger(budgets=self).free(accelerator=accelerator, namespace=namespace)

    @property
    def empty(self) -> bool:
        """No provider limits anything."""
        return not self.cluster and not self.namespaces


def charge_variants(
    *, limits: Sequence[GpuLimit], variants: Iterable[Variant]
) -> tuple[GpuLimit, ...]:
    """`limits` with the GPUs of the variants' current replicas added to `used`, in scope."""
    held: dict[tuple[str, str], int] = {}
    for variant in variants:
        gpus = max(0, variant.current_replicas) * max(0, variant.gpus_per_replica)
        if gpus == 0:
            continue
        for scope in (CLUSTER, variant.namespace):
            key = (scope, variant.accelerator)
            held[key] = held.get(key, 0) + gpus
    return tuple(
        replace(limit, used=max(0, limit.used) + held.get((limit.namespace, limit.accelerator), 0))
        for limit in limits
    )


def _available(limit: GpuLimit) -> int | None:
    if limit.limit <= UNLIMITED_GPUS:
        return None
    return max(0, limit.limit - max(0, limit.used))


def _tighter(first: int | None, second: int | None) -> int | None:
    if first is None:
        return second
    if second is None:
        return first
    return min(first, second)


def merge_constraints(*, limits: Sequence[GpuLimit]) -> Budgets:
    """The budgets of every provider's limits together (see the module docstring)."""
    by_scope: dict[str, dict[str, int | None]] = {}
    for limit in limits:
        scope = by_scope.setdefault(limit.namespace, {})
        available = _available(limit)
        if limit.accelerator in scope:
            scope[limit.accelerator] = _tighter(scope[limit.accelerator], available)
        else:
            scope[limit.accelerator] = available
    cluster = by_scope.pop(CLUSTER, {})
    pools: list[tuple[str, tuple[tuple[str, int], ...]]] = []
    for namespace in sorted(by_scope):
        listed = by_scope[namespace]
        # An unlimited namespace entry still lists the type (it is allowed); the cluster
        # budget then decides. The sentinel -1 carries "listed, unlimited" in the tuple form.
        pools.append(
            (
                namespace,
                tuple(
                    (acc, UNLIMITED_GPUS if listed[acc] is None else int(listed[acc] or 0))
                    for acc in sorted(listed)
                ),
            )
        )
    return Budgets(
        cluster=tuple(
            (acc, UNLIMITED_GPUS if cluster[acc] is None else int(cluster[acc] or 0))
            for acc in sorted(cluster)
        ),
        namespaces=tuple(pools),
    )


class Ledger:
    """A mutable copy of `Budgets` that an allocation charges as it commits replicas."""

    def __init__(self, *, budgets: Budgets) -> None:
        self._cluster: dict[str, int | None] = {
            acc: None if free == UNLIMITED_GPUS else free for acc, free in budgets.cluster
        }
        self._pools: dict[str, dict[str, int | None]] = {
            ns: {acc: None if free == UNLIMITED_GPUS else free for acc, free in listed}
            for ns, listed in budgets.namespaces
        }

    def free(self, *, accelerator: str, namespace: str) -> int | None:
        """GPUs of `accelerator` still free for `namespace`; None when unlimited."""
        free = self._cluster.get(accelerator)
        pool = self._pools.get(namespace)
        if pool is not None:
            if accelerator not in pool:
                return 0
            free = _tighter(free, pool[accelerator])
        return free

    def fits(self, *, accelerator: str, namespace: str, gpus: int) -> int | None:
        """How many replicas of `gpus` GPUs still fit; None when any number does."""
        if gpus <= 0:
            return None
        free = self.free(accelerator=accelerator, namespace=namespace)
        return None if free is None else free // gpus

    def charge(self, *, accelerator: str, namespace: str, gpus: int) -> None:
        """Take `gpus` GPUs from the cluster and the namespace budget (never below 0)."""
        if gpus <= 0:
            return
        if self._cluster.get(accelerator) is not None:
            self._cluster[accelerator] = max(0, (self._cluster[accelerator] or 0) - gpus)
        pool = self._pools.get(namespace)
        if pool is not None and pool.get(accelerator) is not None:
            pool[accelerator] = max(0, (pool[accelerator] or 0) - gpus)

    def snapshot(self) -> Budgets:
        """The budgets left, in the immutable form."""
        return Budgets(
            cluster=tuple(
                (acc, UNLIMITED_GPUS if free is None else free)
                for acc, free in sorted(self._cluster.items())
            ),
            namespaces=tuple(
                (
                    ns,
                    tuple(
                        (acc, UNLIMITED_GPUS if free is None else free)
                        for acc, free in sorted(pool.items())
                    ),
                )
                for ns, pool in sorted(self._pools.items())
            ),
        )


def free_by_type(*, budgets: Budgets) -> Mapping[str, int]:
    """The cluster-wide free GPUs of every limited type (for messages and figures)."""
    return {acc: free for acc, free in budgets.cluster if free != UNLIMITED_GPUS}
