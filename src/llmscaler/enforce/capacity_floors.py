"""Capacity floors on a schedule: "from 08:00 Europe/Berlin on weekdays, at least the capacity of
6 H100 replicas", bought in the cheapest mix of a model's variants.

Why: Kaito's cron scaler fixes one workload's replica count at scheduled times. A model with
several variants (GPU types, prices) is better served by a floor on *capacity*: before the
morning ramp the model must hold at least what 6 H100 replicas serve, and the optimizer may buy it
as 4 H100 and 5 L40S if that is cheaper. A floor opens at each activation of its cron schedule
(`config.cron.Schedule.last_start`: daylight-saving gaps open at the jump, repeated hours at their
first occurrence) and lasts `duration` seconds.

What it computes (pure, `now` an argument):

- `active`: the floors open at `now`;
- `required_capacity`: the largest open floor, in the capacity unit of the per-replica
  capacities given (`replicas` × the reference variant's capacity per replica); a floor whose
  reference variant has no known capacity cannot be priced and is reported, not guessed;
- the floor is bought with `optimize.cover.cover`: the cheapest targets, each at least its
  current target and at most the variant's maximum, whose capacity reaches the floor (exact;
  ties: fewer replicas, then the variant whose name sorts first). A floor beyond every maximum
  raises each variant that adds capacity to its maximum, and the reason says so.

What fails: nothing raises for odd figures (see `optimize.cover`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from llmscaler.analyze.learning.capacity_knowledge import capacity_from_params
from llmscaler.config.resolved import CapacityFloor
from llmscaler.domain.snapshot import ReplicaMetrics, Variant
from llmscaler.optimize.cover import Option, cover

DEFAULT_MIX: Final = (1000.0, 200.0)
"""Input and output tokens of the request mix that sizes replicas when no replica reports its
own (a model idle before its morning ramp, exactly when a floor matters)."""


def active(floors: Sequence[CapacityFloor], *, now: float) -> tuple[CapacityFloor, ...]:
    """The floors open at `now`, sorted by name."""
    found = []
    for floor in floors:
        if not (math.isfinite(floor.duration) and floor.duration > 0):
            continue
        start = floor.schedule.last_start(now=now)
        if start <= now < start + floor.duration:
            found.append(floor)
    return tuple(sorted(found, key=lambda f: f.name))


def required_capacity(
    floors: Sequence[CapacityFloor], *, capacities: Mapping[str, float]
) -> tuple[float, tuple[str, ...]]:
    """The largest floor's capacity, and the names of floors that could not be priced."""
    need = 0.0
    unpriced = []
    for floor in floors:
        per_replica = capacities.get(floor.reference)
        if per_replica is None or not (math.isfinite(per_replica) and per_replica > 0):
            unpriced.append(floor.name)
            continue
        need = max(need, floor.replicas * per_replica)
    return need, tuple(unpriced)


@dataclass(frozen=True, slots=True)
class FloorOutcome:
    """The targets with the open floors bought, the variants raised, and why (one line)."""

    targets: dict[str, int]
    raised: tuple[str, ...]
    reason: str


def _median(values: Sequence[float]) -> float | None:
    clean = sorted(v for v in values if math.isfinite(v) and v > 0)
    return clean[len(clean) // 2] if clean else None


def replica_capacities(
    *, variants: Sequence[Variant], replicas: Sequence[ReplicaMetrics]
) -> dict[str, float]:
    """Capacity of one replica of each variant, in KV tokens held at the model's request mix.

    The steady-state batching estimate of the variant's serving parameters
    (`capacity_knowledge.capacity_from_params`, per engine instance, times the data-parallel
    instances of a replica), at the median input and output tokens the model's replicas report,
    else `DEFAULT_MIX`. A variant without serving parameters has 0: it cannot take the floor.
    """
    inp = _median([r.avg_input_tokens for r in replicas if r.avg_input_tokens is not None])
    out = _median([r.avg_output_tokens for r in replicas if r.avg_output_tokens is not None])
    if inp is None or out is None:
        inp, out = DEFAULT_MIX
    found = {}
    for variant in variants:
        engine = variant.engine
        per_instance = capacity_from_params(engine=engine, avg_input=inp, avg_output=out)
        instances = engine.data_parallel_size if engine is not None else 1
        found[variant.name] = float(per_instance * instances)
    return found


def apply(
    *,
    variants: Sequence[Variant],
    targets: Mapping[str, int],
    floors: Sequence[CapacityFloor],
    replicas: Sequence[ReplicaMetrics],
    now: float,
) -> FloorOutcome:
    """`targets` raised, in the cheapest mix, to the largest floor open at `now` (a variant
    missing from `targets` starts at its current count); unchanged when none is open."""
    current = {v.name: targets.get(v.name, v.current_replicas) for v in variants}
    opened = active(floors, now=now)
    if not opened:
        return FloorOutcome(targets=current, raised=(), reason='')
    capacities = replica_capacities(variants=variants, replicas=replicas)
    need, unpriced = required_capacity(opened, capacities=capacities)
    options = [
        Option(
            variant=v.name,
            capacity=capacities[v.name],
            cost=v.cost,
            target=current[v.name],
            max_replicas=v.max_replicas,
        )
        for v in sorted(variants, key=lambda v: v.name)
    ]
    result = cover(options=options, need=need)
    raised = tuple(name for name, count in result.targets if count > current[name])
    names = ', '.join(f.name for f in opened)
    reason = f'capacity floor {names}: {need:.0f} tokens'
    if not result.met:
        reason += ', more than every variant at its maximum holds'
    if unpriced:
        reason += f' (not priced: {", ".join(unpriced)})'
    return FloorOutcome(targets=dict(result.targets), raised=raised, reason=reason)
