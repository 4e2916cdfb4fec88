"""The cheapest replica counts whose summed capacity reaches a need: an exact branch and bound.

Why: a model's variants differ in price and in what one replica serves, so "enough capacity"
has many answers and the cheapest is rarely "more of the cheapest per replica". Capacity floors
(`enforce.capacity_floors`) and the predictive analyzer's mix (`optimize.exact_mix`) both ask
the same question: given each variant's capacity per replica and cost, a count it must keep
(`target`) and a maximum, which extra replicas reach `need` at the least cost?

`cover` answers exactly: a depth-first branch and bound over the extra replicas of each variant
(variants tried cheapest capacity first, ties by name), pruned by the cheapest possible
completion (what is left at the best remaining price per unit). When even every variant at its
maximum falls short, every usable variant is raised to its maximum and the result says the need
was not met. Past `_MAX_NODES` search nodes (never reached by fleets of a few variants with
tens of replicas each) the best cover found so far is taken, else cheapest-per-unit first.

What fails: nothing raises for odd figures: a capacity that is not a positive finite number
makes its variant unusable (it adds nothing), a cost that is not finite and >= 0 likewise.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

_MAX_NODES: Final = 200_000
"""Search nodes before the best cover found so far is taken."""


@dataclass(frozen=True, slots=True)
class Option:
    """A variant the need may be bought on."""

    variant: str
    capacity: float
    """Capacity of one replica, in the unit of the need."""
    cost: float
    """Cost of one replica."""
    target: int
    """The count it keeps: the cover only adds replicas."""
    max_replicas: int


@dataclass(frozen=True, slots=True)
class Cover:
    targets: tuple[tuple[str, int], ...]
    """Every option's target, sorted by variant."""
    met: bool
    added_cost: float


def _usable(option: Option) -> bool:
    return (
        math.isfinite(option.capacity)
        and option.capacity > 0
        and math.isfinite(option.cost)
        and option.cost >= 0
        and option.max_replicas > option.target
    )


def cover(*, options: Sequence[Option], need: float) -> Cover:
    """The cheapest targets reaching `need` (see the module docstring)."""
    base = {o.variant: o.target for o in options}
    have = sum(
        o.capacity * o.target for o in options if o.capacity > 0 and math.isfinite(o.capacity)
    )
    missing = need - have
    if not math.isfinite(missing) or missing <= 1e-9:
        return Cover(targets=tuple(sorted(base.items())), met=True, added_cost=0.0)
    usable = sorted(
        (o for o in options if _usable(o)), key=lambda o: (o.cost / o.capacity, o.variant)
    )
    room = sum(o.capacity * (o.max_replicas - o.target) for o in usable)
    if room + 1e-9 < missing:
        targets = {**base, **{o.variant: o.max_replicas for o in usable}}
        added = sum(o.cost * (o.max_replicas - o.target) for o in usable)
        return Cover(targets=tuple(sorted(targets.items())), met=False, added_cost=added)
    best: list[tuple[float, tuple[int, ...]]] = []
    nodes = 0

    def search(index: int, left: float, cost: float, chosen: tuple[int, ...]) -> None:
        nonlocal nodes
        nodes += 1
        if left <= 1e-9:
            if not best or cost < best[0][0] - 1e-12:
                best[:] = [(cost, chosen + (0,) * (len(usable) - len(chosen)))]
            return
        if index == len(usable) or nodes > _MAX_NODES:
            return
        option = usable[index]
        # The cheapest possible completion: what is left at the best remaining price.
        if best and cost + left * (option.cost / option.capacity) >= best[0][0] - 1e-12:
            return
        most = min(option.max_replicas - option.target, math.ceil(left / option.capacity - 1e-9))
        for extra in range(most, -1, -1):
            search(
                index + 1,
                left - extra * option.capacity,
                cost + extra * option.cost,
                (*chosen, extra),
            )

    search(0, missing, 0.0, ())
    if not best:  # the node budget ran out before any cover: fill cheapest first
        taken: list[int] = []
        left = missing
        for option in usable:
            take = min(
                option.max_replicas - option.target, max(0, math.ceil(left / option.capacity))
            )
            taken.append(take)
            left -= take * option.capacity
        spent = sum(e * o.cost for e, o in zip(taken, usable, strict=True))
        best = [(spent, tuple(taken))]
    cost, extras = best[0]
    targets = dict(base)
    for option, extra in zip(usable, extras, strict=True):
        targets[option.variant] = option.target + extra
    return Cover(targets=tuple(sorted(targets.items())), met=True, added_cost=cost)
