"""Scale from zero: which variant to wake when requests queue for a model that has no replicas.

Why: the main cycle (30 s) is far too slow for a request waiting on an idle model; a separate loop
(about every 100 ms in the controller, as WVA v0.9.0's internal/engines/scalefromzero/engine.go
polls) checks only the models at zero and wakes one variant as soon as the gateway (EPP)
flow-control queue holds a request.

What it decides, per model (variants with the same modelID + namespace):

- only a model whose variants all have `current_replicas == 0` is considered (a model with any
  replica, even a pending one, is the main cycle's business);
- the model's pool must report `queue_size > 0` (NaN, Inf, negatives and an unread queue, None,
  count as empty: nothing is woken on a figure it did not see);
- the variant woken is the CHEAPEST one allowed to run (`max_replicas >= 1`), cost ties broken
  by name; it goes to max(1, min_replicas). Costs follow the one cost rule
  (`domain.snapshot.effective_cost`: one that is not a finite positive number counts as 10), so
  the variant woken is the one `enforce.scale_to_zero` keeps when the model idles.

Deliberate deviation from WVA: upstream wakes *every* zero-replica variant of the model (a TODO
in its code); waking only the cheapest is what its own cost model asks for.

Pure: no clock, no I/O; the result is sorted by namespace and name.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from llmscaler.domain.basics import finite
from llmscaler.domain.snapshot import PoolMetrics, Variant

REASON = 'scale-from-zero'


@dataclass(frozen=True, slots=True)
class Wake:
    """Scale `variant` (in `namespace`) from 0 to `target` replicas."""

    variant: str
    namespace: str
    model_id: str
    target: int
    queue_size: float


def wake(*, variants: Sequence[Variant], pools: Sequence[PoolMetrics]) -> tuple[Wake, ...]:
    """The variants to wake now, at most one per model."""
    by_group: dict[str, list[Variant]] = {}
    for variant in variants:
        by_group.setdefault(variant.group, []).append(variant)
    queued = {}
    for pool in pools:
        size = finite(pool.queue_size)
        if size is not None and size > 0:
            queued[pool.group] = size
    woken = []
    for group in sorted(by_group):
        members = by_group[group]
        if group not in queued or any(v.current_replicas > 0 for v in members):
            continue
        candidates = sorted(
            (v for v in members if v.max_replicas >= 1), key=lambda v: (v.effective_cost, v.name)
        )
        if not candidates:
            continue
        chosen = candidates[0]
        woken.append(
            Wake(
                variant=chosen.name,
                namespace=chosen.namespace,
                model_id=chosen.model_id,
                target=max(1, chosen.min_replicas),
                queue_size=queued[group],
            )
        )
    return tuple(sorted(woken, key=lambda w: (w.namespace, w.variant)))
