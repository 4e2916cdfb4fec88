"""The cheapest replica counts whose summed capacity reaches a need: an exact branch and bound.

Why: a model's variants differ in price and in what one replica serves, so "enough capacity"
has many answers and the cheapest is rarely "more of the cheapest per replica". Capacity floors
(`enforce.capacity_floors`), the predictive analyzer's mix (`optimize.exact_mix`), and the
simulator's clairvoyant bound and warm start (`sim.policies.clairvoyant`) all ask the same
question, and this is the one answer: given each variant's capacity per replica and cost, a
count it keeps (`target`) and a maximum, which counts reach `need` at the least cost?

What it computes (`cover`): integer n_v in [target_v, max(target_v, max_replicas_v)]
minimising Σ n_v·cost_v subject to Σ n_v·capacity_v ≥ need. With a `hold`, the replicas kept
of those ready now must also cover it: Σ min(n_v, ready_v)·capacity_v ≥ hold (the load that
arrives before new replicas are ready; the hold is first lowered to what keeping every ready
replica gives, so it never makes a need that can be met unmet). Exact: a depth-first branch
and bound over each variant's count (variants cheapest per unit of capacity first, the most
replicas first), pruned by the cheapest possible completion (what is left at the best
remaining price per unit). Past `MAX_NODES` search nodes (never reached by fleets of a few
variants with tens of replicas each) the best cover found so far is taken.

Ties, a total order (so the answer does not depend on the order of `options`): the cheaper
(costs compared in steps of 1e-9 of the dearest replica's cost, so that 2 × 3.90 and 4 × 1.95
tie despite float rounding), then fewer replicas, then more replicas on the variant whose name
sorts first. A need is met within 1e-9 of itself (relative; absolute below 1).

When even every variant at its maximum falls short (or the need is +Inf), every variant that
adds capacity is at its maximum, the others at their target, and `met` is False; what to do
then is the caller's choice.

What fails: nothing raises. A capacity that is not a positive finite number makes its variant
add nothing (it stays at its target); a cost follows the one cost rule
(`domain.snapshot.effective_cost`: one that is not a finite number above 0 is 10); a NaN or
non-positive need or hold asks for nothing; negative targets and ready counts read as 0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from llmscaler.domain.snapshot import effective_cost

MAX_NODES: Final = 200_000
"""Search nodes before the best cover found so far is taken."""
_TOLERANCE: Final = 1e-9
"""Relative slack of a need (and of the cost steps): float sums of capacities and costs."""
_MANY: Final = 2**62
"""More replicas than any maximum: what a shortfall too large to count asks for."""


@dataclass(frozen=True, slots=True)
class Option:
    """A variant the need may be bought on."""

    variant: str
    capacity: float
    """Capacity of one replica, in the unit of the need."""
    cost: float
    """Cost of one replica (the one cost rule applies)."""
    target: int
    """The count it keeps: the cover only adds replicas."""
    max_replicas: int
    ready: int = 0
    """Replicas of it that serve now: the ones kept of them must cover a `hold`."""


@dataclass(frozen=True, slots=True)
class Cover:
    targets: tuple[tuple[str, int], ...]
    """Every option's count, sorted by variant."""
    met: bool
    added_cost: float
    """What the replicas added above the targets cost."""


@dataclass(frozen=True, slots=True)
class _Item:
    """One option as the search sees it: counts in [low, high], `keep` of them ready."""

    name: str
    price: float
    """Its cost by the one cost rule."""
    cost: float
    """`price` in units of the dearest option's (in (0, 1]: sums neither overflow nor depend on
    the unit of cost)."""
    capacity: float
    low: int
    high: int
    keep: int


def _item(option: Option, *, unit: float) -> _Item:
    price = effective_cost(option.cost)
    capacity = option.capacity if 0.0 < option.capacity < math.inf else 0.0
    low = max(0, option.target)
    high = max(low, option.max_replicas)
    keep = min(max(0, option.ready), high)
    return _Item(option.variant, price, price / unit, capacity, low, high, keep)


def _lowered(value: float) -> float:
    """`value` less its tolerance; a NaN or non-positive value asks for nothing."""
    if not value > 0:
        return 0.0
    return value - _TOLERANCE * max(1.0, value)


def _fewest(short: float, capacity: float) -> int:
    """The fewest replicas of `capacity` that reach `short` (0 when nothing is short)."""
    if short <= 0:
        return 0
    ratio = short / capacity
    if not ratio < _MANY:
        return _MANY
    n = max(0, math.ceil(ratio - _TOLERANCE))
    return n if n * capacity >= short else n + 1


def _steps(cost: float) -> float:
    """A cost in steps of the tolerance (an int; +Inf past any count of steps)."""
    value = cost / _TOLERANCE
    return round(value) if value < math.inf else math.inf


def _result(items: Sequence[_Item], counts: dict[str, int], *, met: bool) -> Cover:
    added = math.fsum(it.price * (counts[it.name] - it.low) for it in items)
    return Cover(targets=tuple(sorted(counts.items())), met=met, added_cost=added)


def cover(*, options: Sequence[Option], need: float, hold: float = 0.0) -> Cover:
    """The cheapest counts reaching `need`, the ready replicas kept covering `hold` (see the
    module docstring)."""
    unit = max((effective_cost(o.cost) for o in options), default=1.0)
    items = sorted((_item(o, unit=unit) for o in options), key=lambda it: it.name)
    counts = {it.name: it.low for it in items}
    usable = sorted(
        (it for it in items if it.capacity > 0), key=lambda it: (it.cost / it.capacity, it.name)
    )
    search = _Search(
        usable,
        want=_lowered(need),
        want_hold=_lowered(min(hold, sum(it.keep * it.capacity for it in usable))),
        counts=counts,
    )
    if need == math.inf or search.reach[0] < search.want:
        counts.update({it.name: it.high for it in usable})
        return _result(items, counts, met=False)
    search.visit(0, covered=0.0, held=0.0, cost=0.0, count=0)
    counts.update(zip((it.name for it in usable), search.best_chosen, strict=True))
    return _result(items, counts, met=True)


class _Search:
    """The branch and bound over `usable` (cheapest per unit first) and the best cover so far.

    A node is pruned when no completion can beat the best on the whole tie order: its cost
    (the floors, and what is short at the best price per unit left), its replicas (the floors,
    and what is short in replicas of the largest capacity left), then its counts by name (each
    undecided variant at its maximum).
    """

    def __init__(
        self,
        usable: Sequence[_Item],
        *,
        want: float,
        want_hold: float,
        counts: dict[str, int],
    ) -> None:
        self.items = usable
        self.want = want
        self.want_hold = want_hold
        order = sorted(counts)
        self.slot = [order.index(it.name) for it in usable]
        """Where each usable variant stands in name order."""
        self.by_name = [-counts[name] for name in order]
        """The last key part, negated counts in name order (the unusable ones stay put)."""
        m = len(usable)
        self.chosen = [it.high for it in usable]
        # Suffix tables: capacity reachable, what the floors of the rest give and cost, the
        # largest capacity left.
        self.reach = [0.0] * (m + 1)
        self.reach_hold = [0.0] * (m + 1)
        self.floor_cost = [0.0] * (m + 1)
        self.floor_cap = [0.0] * (m + 1)
        self.floor_hold = [0.0] * (m + 1)
        self.floor_count = [0] * (m + 1)
        self.largest = [0.0] * (m + 1)
        self.cheapest = [math.inf] * (m + 1)
        for j in range(m - 1, -1, -1):
            it = usable[j]
            self.reach[j] = self.reach[j + 1] + it.high * it.capacity
            self.reach_hold[j] = self.reach_hold[j + 1] + it.keep * it.capacity
            self.floor_cost[j] = self.floor_cost[j + 1] + it.low * it.cost
            self.floor_cap[j] = self.floor_cap[j + 1] + it.low * it.capacity
            self.floor_hold[j] = self.floor_hold[j + 1] + min(it.low, it.keep) * it.capacity
            self.floor_count[j] = self.floor_count[j + 1] + it.low
            self.largest[j] = max(self.largest[j + 1], it.capacity)
            self.cheapest[j] = min(self.cheapest[j + 1], it.cost)
        self.best: tuple[float, int, tuple[int, ...]] | None = None
        self.best_chosen = tuple(self.chosen)
        """Every usable variant at its maximum until a cover is found (it covers: `cover`
        searches only when that reaches the need)."""
        self.nodes = 0

    def _names(self, j: int) -> tuple[int, ...]:
        """The last key part with the variants decided so far (the first `j`) at their counts
        and the others at their maxima: no completion has a smaller one."""
        by_name = list(self.by_name)
        for index, (slot, it) in enumerate(zip(self.slot, self.items, strict=True)):
            by_name[slot] = -(self.chosen[index] if index < j else it.high)
        return tuple(by_name)

    def visit(self, j: int, *, covered: float, held: float, cost: float, count: int) -> None:
        self.nodes += 1
        if covered + self.reach[j] < self.want or held + self.reach_hold[j] < self.want_hold:
            return
        if j == len(self.items):
            key = (_steps(cost), count, self._names(j))
            if self.best is None or key < self.best:
                self.best = key
                self.best_chosen = tuple(self.chosen)
            return
        it = self.items[j]
        if self.best is not None:
            if self.nodes > MAX_NODES:
                return
            short = max(
                self.want - covered - self.floor_cap[j],
                self.want_hold - held - self.floor_hold[j],
                0.0,
            )
            # Two lower bounds on what is short: at the best price per unit left (this item's:
            # the order is cheapest per unit first), and in whole replicas of the largest
            # capacity left at the lowest price left (the first is below a tie by the need's
            # tolerance; the second is not).
            extra = _fewest(short, self.largest[j])
            least = 0.0
            if short > 0:
                least = max(short * (it.cost / it.capacity), extra * self.cheapest[j])
            bound = _steps(cost + self.floor_cost[j] + least)
            if bound > self.best[0]:
                return
            if bound == self.best[0]:
                fewest = count + self.floor_count[j] + extra
                if (fewest, self._names(j)) >= self.best[1:]:
                    return
        # More than covers both with the rest at their floors only adds cost and replicas.
        rest_cap = covered + self.floor_cap[j + 1]
        rest_hold = held + self.floor_hold[j + 1]
        most = max(
            it.low,
            _fewest(self.want - rest_cap, it.capacity),
            min(it.keep, _fewest(self.want_hold - rest_hold, it.capacity)),
        )
        most = min(it.high, most)
        for n in range(most, it.low - 1, -1):
            self.chosen[j] = n
            self.visit(
                j + 1,
                covered=covered + n * it.capacity,
                held=held + min(n, it.keep) * it.capacity,
                cost=cost + n * it.cost,
                count=count + n,
            )
