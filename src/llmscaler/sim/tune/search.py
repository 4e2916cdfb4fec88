"""Successive halving under a budget of simulations: which candidates run on which draws.

Why: a grid of a few dozen configurations times several draws of the workload is more runs than
a user wants to wait for, and most configurations are plainly worse after one draw. So the search
runs a pool of candidates on the first draw, keeps the better half, runs those on the next draw,
and so on until every survivor has run on every draw; the pool is as large as the budget allows
for that schedule. A candidate is judged on the draws it ran: it meets the goal when its
attainment meets it on every one (the worst draw, not the mean, so that one lucky draw cannot
carry it), and among those that meet it the cheapest (mean cost) is best; among those that do
not, the highest worst-draw attainment. Ties break by name, so the result is the same whatever
order the runs finished in (`evaluate` returns results in the order asked).

When the pool is smaller than the grid it is spread over the grid's order (the defaults always
in it) by the golden-ratio sequence: position ⌊frac(k·φ)·n⌋ for k = 1, 2, ... until the pool is
full. Evenly spaced positions alias with the grid's period (on a grid of 81 in name order every
tenth position was the same variant subset and horizon); the golden-ratio sequence does not, and
a larger pool holds every smaller one, so a larger budget tries more configurations, never
other ones.

What fails: `plan` and `search` raise `ValueError` for a budget or number of draws below 1.
Nothing else: `evaluate` (the simulations) raises what the runs raise.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

C = TypeVar('C')


@dataclass(frozen=True, slots=True)
class Measure:
    """One run's figures: cost in dollars, share of requests within the SLO (NaN: none ran)."""

    cost: float
    attainment: float


@dataclass(frozen=True, slots=True)
class Trial(Generic[C]):
    """A candidate and its runs so far, one per draw in draw order."""

    candidate: C
    name: str
    runs: tuple[Measure, ...]

    @property
    def cost(self) -> float:
        return sum(m.cost for m in self.runs) / len(self.runs)

    @property
    def attainment(self) -> float:
        """The worst draw's attainment (NaN counts as 0: nothing attained)."""
        return min(0.0 if math.isnan(m.attainment) else m.attainment for m in self.runs)

    def meets(self, goal: float) -> bool:
        return self.attainment >= goal


@dataclass(frozen=True, slots=True)
class Outcome(Generic[C]):
    """Every trial, in the order first run; the best of those that ran on every draw."""

    trials: tuple[Trial[C], ...]
    best: Trial[C]
    runs: int
    """Simulations run (the budget's spending)."""
    draws: int
    """Draws every finalist ran on."""


def rank(trial: Trial[C], *, goal: float) -> tuple[int, float, float, str]:
    """Sort key: those meeting `goal` first, cheapest first; then the best attainment."""
    if trial.meets(goal):
        return 0, trial.cost, 0.0, trial.name
    return 1, -trial.attainment, trial.cost, trial.name


def plan(*, budget: int, draws: int, candidates: int) -> tuple[int, int]:
    """(pool size, draws used): the largest pool whose halving over the draws fits `budget`;
    fewer draws when the budget cannot give even one candidate all of them."""
    if budget < 1 or draws < 1 or candidates < 1:
        raise ValueError(
            f'budget, draws and candidates must be ≥ 1, got {budget}, {draws}, {candidates}'
        )
    draws = min(draws, budget)

    def cost(pool: int) -> int:
        total, alive = 0, pool
        for _ in range(draws):
            total += alive
            alive = math.ceil(alive / 2)
        return total

    pool = min(candidates, budget)
    while pool > 1 and cost(pool) > budget:
        pool -= 1
    return pool, draws


GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0


def spread(*, count: int, total: int) -> list[int]:
    """`count` positions of `range(total)`, 0 among them, by the golden-ratio sequence (module
    docstring), increasing; the positions for `count` hold those for any smaller count."""
    if count >= total:
        return list(range(total))
    chosen, step = {0}, 1
    while len(chosen) < count:
        # Equidistributed: every position comes up, so the loop ends.
        chosen.add(min(total - 1, int((step * GOLDEN) % 1.0 * total)))
        step += 1
    return sorted(chosen)


def search(
    *,
    candidates: Sequence[C],
    names: Sequence[str],
    draws: int,
    budget: int,
    goal: float,
    evaluate: Callable[[Sequence[tuple[C, int]]], Sequence[Measure]],
) -> Outcome[C]:
    """Successive halving (module docstring); `evaluate(pairs)` runs each (candidate, draw
    index) and returns their figures in the same order, so one call is one round of the sweep."""
    pool_size, draws = plan(budget=budget, draws=draws, candidates=len(candidates))
    chosen = spread(count=pool_size, total=len(candidates))
    alive = [Trial(candidate=candidates[i], name=names[i], runs=()) for i in chosen]
    every: dict[str, Trial[C]] = {}
    runs = 0
    for draw in range(draws):
        measured = evaluate([(t.candidate, draw) for t in alive])
        runs += len(alive)
        alive = [
            Trial(candidate=t.candidate, name=t.name, runs=(*t.runs, m))
            for t, m in zip(alive, measured, strict=True)
        ]
        every.update((t.name, t) for t in alive)
        alive.sort(key=lambda t: rank(t, goal=goal))
        if draw < draws - 1:
            alive = alive[: math.ceil(len(alive) / 2)]
    order = {names[i]: i for i in chosen}
    trials = tuple(sorted(every.values(), key=lambda t: order[t.name]))
    return Outcome(trials=trials, best=alive[0], runs=runs, draws=draws)
