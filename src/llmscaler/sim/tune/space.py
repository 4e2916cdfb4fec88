"""The settings `llmscaler tune` searches, and what one choice of them resolves to.

Why: the predictive policy's cost and attainment on a workload move with a few settings of
`llmscaler-predictive-config` and with the variants it may use; the search needs them as a
finite, ordered list of candidates, each with a stable name (ties break by name) and a resolved
`PredictiveConfig` (what the simulation runs and the ConfigMap says, one value for both).

The dimensions:

- the attainment target the policy sizes for (`attainmentTarget`, which sets `sloAttainment`,
  `forecastQuantile` and `latencyMargin` through `config.predictive.sizing_for`), as the user's
  goal with its error budget scaled by a margin factor: 1 − (1 − goal) × k, k in `MARGINS`
  (k > 1 spends more of the budget, k < 1 keeps a margin);
- the scale-down delay (`scaleDownDelaySeconds`, the policy's hysteresis);
- the forecast horizon, as a factor on the model's start-up time (`startupSeconds`, which the
  forecast looks ahead by, plus two cycles);
- the variants offered: every non-empty subset of the model's variants;
- the replica bounds of the offered variants, written as their VariantAutoscalings'
  `minReplicas`/`maxReplicas` and honoured by the simulation through the variants' own bounds
  (`VariantSpec.min_replicas`/`max_replicas`: the snapshot carries them to the enforcer, and the
  fleet's scale subresource caps at the maximum): a floor (`FLOORS`) on the cheapest offered
  variant (cost per replica, ties by name: the one the enforcer keeps when zero is disabled),
  and a cap (`CAPS`) on every offered variant, as a factor on the scenario's `max_replicas`.
  A floor of 1 keeps a replica of the cheapest variant whatever else the policy runs (with zero
  disabled, as in every configuration tuned, the model is never below one replica, but that
  one may be of a dearer variant); a cap of half bounds what a forecast's upper quantile or a
  burst can buy. Two values each, so that the grid grows four-fold, not more: with the default
  budget the pool is a sample of it in any case (`search.spread`), and two values of each come
  up in any pool of a few configurations. A bound never loosens the scenario's: the floor is at
  least the scenario's `min_replicas` and at most its `max_replicas`, the cap at most its
  `max_replicas` and at least the floor and 1.

`defaults(...)` is the recommended configuration, the predictive policy as `llmscaler simulate`
runs it, unchanged, on the scenario's bounds; `grid(...)` lists it first, then every
combination, in name order, without those that resolve to what an earlier one does (settings,
variants and bounds).

What fails: `margin_targets` raises `ValueError` for a goal outside (0.5, 1); a factor or delay
that puts a setting out of the ConfigMap's range raises `ValueError` in `resolve` (the ranges are
`config.predictive`'s).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from llmscaler.config.predictive import DURATION_MAX, PredictiveOverrides
from llmscaler.config.resolved import PredictiveConfig
from llmscaler.sim.vocabulary import VariantSpec

MARGINS = (2.0, 1.0, 0.5)
"""Factors on the goal's error budget (1 − goal) that give the policy's attainment target."""
DELAYS = (120.0, 300.0, 600.0)
"""Scale-down delays (s); 300 is the default."""
HORIZONS = (0.75, 1.0, 1.5)
"""Factors on the start-up time the forecast looks ahead by; 1 is the default."""
FLOORS = (0, 1)
"""`minReplicas` at least this on the cheapest offered variant; 0 keeps the scenario's."""
CAPS = (1.0, 0.5)
"""Factors on each offered variant's `maxReplicas` (rounded up); 1 keeps the scenario's."""
DEFAULTS = 'defaults'
"""The name of the recommended configuration."""


@dataclass(frozen=True, slots=True)
class Candidate:
    """One configuration: None fields keep the recommended value."""

    target: float | None
    """The policy's attainment target (`attainmentTarget`); None: the default's."""
    delay: float | None
    """`scaleDownDelaySeconds`; None: the default's."""
    horizon: float
    """Factor on `startupSeconds`."""
    offered: tuple[str, ...]
    """The variants the policy may use, in name order."""
    floor: int = 0
    """`minReplicas` at least this on the cheapest offered variant (`bounded`)."""
    cap: float = 1.0
    """Factor on each offered variant's `maxReplicas` (`bounded`)."""

    @property
    def name(self) -> str:
        bounds = (f', floor {self.floor}' if self.floor else '') + (
            f', cap ×{self.cap:g}' if self.cap != 1.0 else ''
        )
        if self.target is None and self.delay is None and self.horizon == 1.0 and not bounds:
            return DEFAULTS
        target = 'default' if self.target is None else f'{self.target:.4g}'
        delay = 'default' if self.delay is None else f'{self.delay:g}s'
        return (
            f'target {target}, delay {delay}, horizon ×{self.horizon:g}, '
            f'variants {"+".join(self.offered)}{bounds}'
        )


@dataclass(frozen=True, slots=True)
class Space:
    """The values searched (module docstring)."""

    margins: tuple[float, ...] = MARGINS
    delays: tuple[float, ...] = DELAYS
    horizons: tuple[float, ...] = HORIZONS
    subsets: bool = True
    """Whether subsets of the variants are offered, or all of them always."""
    floors: tuple[int, ...] = FLOORS
    caps: tuple[float, ...] = CAPS


def margin_targets(*, goal: float, margins: Sequence[float]) -> tuple[float, ...]:
    """The policy targets 1 − (1 − goal) × k for each k, those inside (0.5, 1), in order."""
    if not 0.5 < goal < 1.0:
        raise ValueError(f'the attainment goal must be in (0.5, 1), got {goal}')
    found = (1.0 - (1.0 - goal) * k for k in margins)
    return tuple(dict.fromkeys(round(t, 6) for t in found if 0.5 < round(t, 6) < 1.0))


def subsets(names: Sequence[str]) -> list[tuple[str, ...]]:
    """Every non-empty subset of `names`, all of them first, then by size down and name."""
    ordered = sorted(names)
    found = [
        combo
        for size in range(len(ordered), 0, -1)
        for combo in itertools.combinations(ordered, size)
    ]
    return found


def defaults(*, variants: Sequence[str]) -> Candidate:
    """The recommended configuration on every variant."""
    return Candidate(target=None, delay=None, horizon=1.0, offered=tuple(sorted(variants)))


def bounded(*, candidate: Candidate, variants: Sequence[VariantSpec]) -> tuple[VariantSpec, ...]:
    """The variants `candidate` offers, with its bounds (module docstring) and each start count
    moved inside them; `ValueError` for a floor or cap below 0."""
    if candidate.floor < 0 or not candidate.cap > 0.0:
        raise ValueError(f'floor {candidate.floor} and cap {candidate.cap:g} must be ≥ 0 and > 0')
    offered = [v for v in variants if v.name in candidate.offered]
    cheapest = min(offered, key=lambda v: (v.cost_per_hour, v.name), default=None)
    found = []
    for spec in offered:
        floor = min(candidate.floor, spec.max_replicas) if spec is cheapest else 0
        low = max(spec.min_replicas, floor)
        high = spec.max_replicas
        if candidate.cap != 1.0:
            high = min(high, max(1, math.ceil(high * candidate.cap)))
        high = max(low, high)
        start = min(max(spec.initial_replicas, low), high)
        found.append(replace(spec, min_replicas=low, max_replicas=high, initial_replicas=start))
    return tuple(found)


def resolve(*, candidate: Candidate, base: PredictiveConfig) -> PredictiveConfig:
    """`base` (the recommended configuration of the model) with `candidate`'s settings, set as
    an entry of `llmscaler-predictive-config` sets them (`PredictiveOverrides.over`)."""
    startup = base.startup_seconds * candidate.horizon
    delay = candidate.delay
    for name, value, low in (
        ('startupSeconds', startup, 0.0),
        ('scaleDownDelaySeconds', delay, -1),
    ):
        if value is not None and not (low < value <= DURATION_MAX):
            raise ValueError(f'{name} {value:g} is outside the ConfigMap range')
    # The default target's own sizing is the defaults' (not a float's width from it).
    target = None if candidate.target == base.attainment else candidate.target
    overrides = PredictiveOverrides(
        attainment_target=target,
        scale_down_delay=delay,
        startup_seconds=startup if candidate.horizon != 1.0 else None,
    )
    return overrides.over(base)


def _bounds(candidate: Candidate, variants: Sequence[VariantSpec]) -> tuple[tuple[int, int], ...]:
    return tuple(
        (v.min_replicas, v.max_replicas) for v in bounded(candidate=candidate, variants=variants)
    )


def grid(
    *, space: Space, variants: Sequence[VariantSpec], goal: float, base: PredictiveConfig
) -> list[Candidate]:
    """The defaults, then every combination of `space` in name order, each resolving to a
    configuration (settings, variants and their bounds) no earlier candidate resolves to."""
    names = [v.name for v in variants]
    offers = subsets(names) if space.subsets else [tuple(sorted(names))]
    found = [defaults(variants=names)]
    combos = [
        Candidate(target=t, delay=d, horizon=h, offered=o, floor=f, cap=c)
        for o in offers
        for t in margin_targets(goal=goal, margins=space.margins)
        for d in space.delays
        for h in space.horizons
        for f in space.floors
        for c in space.caps
    ]
    found += sorted(combos, key=lambda c: c.name)
    seen: set[tuple[PredictiveConfig, tuple[str, ...], tuple[tuple[int, int], ...]]] = set()
    unique: list[Candidate] = []
    for candidate in found:
        key = (
            resolve(candidate=candidate, base=base),
            candidate.offered,
            _bounds(candidate, variants),
        )
        if key not in seen:
            seen.add(key)
            unique.append(candidate)
    return unique
