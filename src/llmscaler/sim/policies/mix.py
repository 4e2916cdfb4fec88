"""The least-cost replica mix: how many replicas of each variant cover a request rate cheapest.

Why: the clairvoyant baseline (`sim.policies.clairvoyant`) and the warm start (`sim.scenario.setup`)
both ask which fleet serves a known load at the least cost; the answer must be exact (a baseline
that is only near the optimum bounds nothing), and fast enough to be asked every control cycle.

What it computes (`cheapest_mix`): integer n_v in [min_replicas_v, max_replicas_v] minimising
Σ n_v·cost_per_hour_v subject to Σ n_v·capacity_v ≥ R, exactly (depth-first enumeration in name
order with bound pruning). Ties: fewer replicas, then more replicas on the variant whose name
sorts first. When even every variant at its maximum falls short, every variant gets its maximum.
With current counts, the replicas kept of them must also cover a hold rate H (capped at what
keeping all of them gives): Σ min(n_v, current_v)·capacity_v ≥ H. `capped` lowers the maxima
to what a number of free GPUs per accelerator type allows.

What fails: `cheapest_mix` raises `ValueError` when a variant has no capacity in `capacities`;
a NaN, infinite or negative capacity counts as 0 (the variant adds nothing); a NaN, infinite or
negative cost raises `ValueError`. A NaN or negative rate counts as 0 (every variant at its
minimum); +Inf is never covered (every variant at its maximum).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from llmscaler.sim.vocabulary import VariantSpec

_EPS = 1e-9


@dataclass(frozen=True, slots=True)
class Item:
    """One variant as the solver sees it."""

    name: str
    cost: float
    capacity: float
    low: int
    high: int
    accelerator: str = ''
    gpus: int = 1


def items_of(
    *, variants: Sequence[VariantSpec], capacities: Mapping[str, float]
) -> tuple[Item, ...]:
    items = []
    for spec in sorted(variants, key=lambda s: s.name):
        if spec.name not in capacities:
            known = ', '.join(sorted(capacities)) or '(none)'
            raise ValueError(f'no capacity for variant {spec.name!r} (have: {known})')
        cost = spec.cost_per_hour
        if not math.isfinite(cost) or cost < 0:
            raise ValueError(f'variant {spec.name}: cost per hour must be >= 0, got {cost}')
        capacity = capacities[spec.name]
        if not math.isfinite(capacity) or capacity < 0:
            capacity = 0.0
        low = max(0, spec.min_replicas)
        items.append(
            Item(
                spec.name,
                cost,
                capacity,
                low,
                max(low, spec.max_replicas),
                spec.accelerator,
                spec.gpus_per_replica,
            )
        )
    return tuple(items)


def solve(
    *, required: float, items: Sequence[Item], hold: float = 0.0, kept: Sequence[int] = ()
) -> tuple[int, ...]:
    """Exact least-cost mix over `items` (sorted by name); see `cheapest_mix`.

    With `kept` (current counts, same order), the mix must also cover `hold` with replicas it
    keeps: Σ min(n_v, kept_v)·capacity_v ≥ hold. The hold is first lowered to what keeping
    everything (up to each maximum) provides, so it never makes the problem infeasible.
    """
    m = len(items)
    if m == 0:
        return ()
    if not math.isfinite(required):
        return tuple(i.high for i in items)
    keep = [min(max(0, k), it.high) for k, it in zip(kept or [0] * m, items, strict=True)]
    need = required - _EPS * max(1.0, abs(required))
    if sum(i.high * i.capacity for i in items) < need:
        return tuple(i.high for i in items)
    hold = min(
        hold if hold > 0 else 0.0, sum(k * i.capacity for k, i in zip(keep, items, strict=True))
    )
    need_hold = hold - _EPS * max(1.0, hold)
    # Suffix tables for the bounds: capacity reachable and the floor of what is left.
    reach = [0.0] * (m + 1)
    reach_hold = [0.0] * (m + 1)
    floor_cost = [0.0] * (m + 1)
    floor_cap = [0.0] * (m + 1)
    floor_hold = [0.0] * (m + 1)
    best_ratio = [math.inf] * (m + 1)
    for j in range(m - 1, -1, -1):
        it = items[j]
        reach[j] = reach[j + 1] + it.high * it.capacity
        reach_hold[j] = reach_hold[j + 1] + keep[j] * it.capacity
        floor_cost[j] = floor_cost[j + 1] + it.low * it.cost
        floor_cap[j] = floor_cap[j + 1] + it.low * it.capacity
        floor_hold[j] = floor_hold[j + 1] + min(it.low, keep[j]) * it.capacity
        ratio = it.cost / it.capacity if it.capacity > 0 else math.inf
        best_ratio[j] = min(best_ratio[j + 1], ratio)
    best: list[tuple[int, int, tuple[int, ...]]] = []
    chosen = [0] * m

    def key(cost: float, count: int) -> tuple[int, int, tuple[int, ...]]:
        # Micro-dollars: 2 × 3.90 and 4 × 1.95 must tie despite float rounding.
        return (round(cost * 1e6), count, tuple(-n for n in chosen))

    def fewest(short: float, capacity: float) -> int:
        n = max(0, math.ceil(short / capacity - _EPS))
        return n if n * capacity >= short else n + 1

    def visit(j: int, cost: float, count: int, covered: float, held: float) -> None:
        if covered + reach[j] < need or held + reach_hold[j] < need_hold:
            return
        if best:
            short = max(need - covered - floor_cap[j], need_hold - held - floor_hold[j], 0.0)
            bound = cost + floor_cost[j] + (short * best_ratio[j] if short > 0 else 0.0)
            if bound * 1e6 > best[0][0] + 0.5:  # as `key` rounds; an infinite bound prunes
                return
        it = items[j]
        if j == m - 1:
            n = it.low
            if covered + n * it.capacity < need and it.capacity > 0:
                n = max(n, fewest(need - covered, it.capacity))
            if held + min(n, keep[j]) * it.capacity < need_hold and it.capacity > 0:
                n = max(n, fewest(need_hold - held, it.capacity))
            if (
                n > it.high
                or covered + n * it.capacity < need
                or held + min(n, keep[j]) * it.capacity < need_hold
            ):
                return
            chosen[j] = n
            candidate = key(cost + n * it.cost, count + n)
            if not best or candidate < best[0]:
                best[:] = [candidate]
            return
        for n in range(it.low, it.high + 1):
            chosen[j] = n
            now_covered = covered + n * it.capacity
            now_held = held + min(n, keep[j]) * it.capacity
            visit(j + 1, cost + n * it.cost, count + n, now_covered, now_held)
            # More of this variant only adds cost and replicas once the rest at their floor
            # would do.
            if now_covered + floor_cap[j + 1] >= need and now_held + floor_hold[j + 1] >= need_hold:
                break
        chosen[j] = 0

    visit(0, 0.0, 0, 0.0, 0.0)
    return tuple(-n for n in best[0][2])


def cheapest_mix(
    *,
    required: float,
    variants: Sequence[VariantSpec],
    capacities: Mapping[str, float],
    hold: float = 0.0,
    current: Mapping[str, int] | None = None,
) -> dict[str, int]:
    """The least-cost replica counts covering `required` req/s (see the module docstring).

    With `current` (replica counts now; missing names count 0), the replicas kept of them,
    Σ min(n_v, current_v)·capacity_v, must also cover `hold` req/s (capped at what keeping all
    of them gives): the load that arrives before new replicas are ready. A NaN or negative
    `required` counts as 0 (every variant at its minimum); +Inf is never covered (every
    variant at its maximum).
    """
    items = items_of(variants=variants, capacities=capacities)
    rate = required if required > 0 else 0.0  # NaN fails the comparison too
    now = current or {}
    counts = solve(
        required=rate,
        items=items,
        hold=hold if hold > 0 else 0.0,
        kept=[now.get(it.name, 0) for it in items],
    )
    return {it.name: n for it, n in zip(items, counts, strict=True)}


def capped(*, items: Sequence[Item], free: Mapping[str, int]) -> tuple[Item, ...]:
    """`items` with each maximum (and minimum) lowered to what the free GPUs of its accelerator
    type hold, for the types `free` names."""
    result = []
    for it in items:
        if it.accelerator in free:
            most = max(0, free[it.accelerator]) // max(1, it.gpus)
            high = min(it.high, most)
            it = replace(it, high=high, low=min(it.low, high))
        result.append(it)
    return tuple(result)
