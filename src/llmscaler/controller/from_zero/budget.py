"""The GPU budget of scale-from-zero: wake the cheapest variant that fits, or hold and say why.

Why: with `enableLimiter` on, the main cycle never sizes a variant beyond the GPUs free for its
type (`optimize.limiter`); scale-from-zero writes `/scale` between cycles and must keep the same
rule, or it would wake a variant whose pod can only sit Pending while a dearer type has room.
So when the cheapest variant `enforce.scale_from_zero.wake` picks needs more GPUs of its type
than are free, the cheapest variant that fits is woken instead; when none fits, the model is held
and the hold says why (the limiter's `ResourceConstrained`).

What it computes (`fit`), for the wakes of models whose configuration turns the limiter on (other
models' wakes pass untouched, and no budget is computed for them):

- the budgets as the limiter reads them (`gpu_budgets`): the snapshot's limits (the Nodes'
  inventory unless `limiters:` leaves it out) plus the quota's, charged with every variant's
  current replicas and merged by `optimize.constraints`; a type no provider limits is unlimited,
  so with no inventory known yet nothing is held;
- a variant needs `max(1, minReplicas) × gpusPerReplica` GPUs of its type in its namespace (a
  CPU-only variant always fits).

Pure: the limits come from `limits_fn`, asked at most once per call and only when a limited
model has a wake; results keep the order of the wakes given.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from llmscaler.config.quota import Limiters
from llmscaler.config.resolved import Config
from llmscaler.domain.snapshot import GpuLimit, PoolMetrics, Variant
from llmscaler.enforce.scale_from_zero import Wake, wake
from llmscaler.optimize.constraints import Budgets, charge_variants, merge_constraints
from llmscaler.optimize.limiter import INVENTORY_PROVIDER


@dataclass(frozen=True, slots=True)
class Held:
    """A model not woken: no variant fits the GPU budget. `variant` is its cheapest."""

    variant: str
    namespace: str
    model_id: str
    message: str


@dataclass(frozen=True, slots=True)
class Fitted:
    """The wakes to write, why a cheaper variant was passed over (by woken variant key), and the
    models held."""

    wakes: tuple[Wake, ...]
    passed_over: Mapping[str, str]
    held: tuple[Held, ...]


def gpu_budgets(
    *, limits: Sequence[GpuLimit], config: Config, variants: Sequence[Variant]
) -> Budgets:
    """Free GPUs per type and namespace, read as `optimize.limiter` reads them."""
    limiters = config.default.saturation.limiters or Limiters()
    kept = tuple(
        limit for limit in limits if limiters.inventory or limit.provider != INVENTORY_PROVIDER
    )
    quotas = limiters.quota_limits(namespaces=sorted({v.namespace for v in variants}))
    return merge_constraints(limits=charge_variants(limits=kept + quotas, variants=variants))


def _need(variant: Variant) -> int:
    return max(1, variant.min_replicas) * max(0, variant.gpus_per_replica)


def _shortfall(variant: Variant, budgets: Budgets) -> str:
    """'' when the variant fits; otherwise what it needs and what is free (one phrase)."""
    need = _need(variant)
    if need == 0:
        return ''
    free = budgets.available(accelerator=variant.accelerator, namespace=variant.namespace)
    if free is None or need <= free:
        return ''
    return f'{variant.name} needs {need} {variant.accelerator} GPUs, {free} free'


def fit(
    *,
    wakes: Sequence[Wake],
    variants: Sequence[Variant],
    pools: Sequence[PoolMetrics],
    config: Config,
    limits_fn: Callable[[], Budgets],
) -> Fitted:
    """`wakes` kept, moved to the cheapest variant that fits, or held (module docstring).

    `variants` holds at least every variant of the woken models; `pools` the queues that chose
    them; `limits_fn` gives the budgets (see `gpu_budgets`).
    """
    budgets: Budgets | None = None
    kept: list[Wake] = []
    passed_over: dict[str, str] = {}
    held: list[Held] = []
    for order in wakes:
        model = config.model(model_id=order.model_id, namespace=order.namespace)
        if not model.saturation.enable_limiter:
            kept.append(order)
            continue
        if budgets is None:
            budgets = limits_fn()
        members = sorted(
            (v for v in variants if (v.namespace, v.model_id) == (order.namespace, order.model_id)),
            key=lambda v: v.name,
        )
        chosen = next((v for v in members if v.name == order.variant), None)
        short = _shortfall(chosen, budgets) if chosen is not None else ''
        if not short:
            kept.append(order)
            continue
        fitting = [v for v in members if not _shortfall(v, budgets)]
        again = wake(variants=fitting, pools=pools)
        if again:
            kept.append(again[0])
            passed_over[f'{again[0].namespace}/{again[0].variant}'] = short
            continue
        reasons = '; '.join(s for s in (_shortfall(v, budgets) for v in members) if s)
        held.append(
            Held(
                variant=order.variant,
                namespace=order.namespace,
                model_id=order.model_id,
                message=f'scale-from-zero held: no variant of {order.model_id} fits the GPU '
                f'budget ({reasons})',
            )
        )
    return Fitted(wakes=tuple(kept), passed_over=passed_over, held=tuple(held))
