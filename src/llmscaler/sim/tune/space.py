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
- the variants offered: every non-empty subset of the model's variants.

`defaults(...)` is the recommended configuration, the predictive policy as `llmscaler simulate`
runs it, unchanged; `grid(...)` lists it first, then every combination, in name order, without
those that resolve to what an earlier one does.

What fails: `margin_targets` raises `ValueError` for a goal outside (0.5, 1); a factor or delay
that puts a setting out of the ConfigMap's range raises `ValueError` in `resolve` (the ranges are
`config.predictive`'s).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from llmscaler.config.predictive import DURATION_MAX, PredictiveOverrides
from llmscaler.config.resolved import PredictiveConfig

MARGINS = (2.0, 1.0, 0.5)
"""Factors on the goal's error budget (1 − goal) that give the policy's attainment target."""
DELAYS = (120.0, 300.0, 600.0)
"""Scale-down delays (s); 300 is the default."""
HORIZONS = (0.75, 1.0, 1.5)
"""Factors on the start-up time the forecast looks ahead by; 1 is the default."""
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

    @property
    def name(self) -> str:
        if self.target is None and self.delay is None and self.horizon == 1.0:
            return DEFAULTS
        target = 'default' if self.target is None else f'{self.target:.4g}'
        delay = 'default' if self.delay is None else f'{self.delay:g}s'
        return (
            f'target {target}, delay {delay}, horizon ×{self.horizon:g}, '
            f'variants {"+".join(self.offered)}'
        )


@dataclass(frozen=True, slots=True)
class Space:
    """The values searched (module docstring)."""

    margins: tuple[float, ...] = MARGINS
    delays: tuple[float, ...] = DELAYS
    horizons: tuple[float, ...] = HORIZONS
    subsets: bool = True
    """Whether subsets of the variants are offered, or all of them always."""


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


def grid(
    *, space: Space, variants: Sequence[str], goal: float, base: PredictiveConfig
) -> list[Candidate]:
    """The defaults, then every combination of `space` in name order, each resolving to a
    configuration (settings and variants) no earlier candidate resolves to."""
    offers = subsets(variants) if space.subsets else [tuple(sorted(variants))]
    found = [defaults(variants=variants)]
    combos = [
        Candidate(target=t, delay=d, horizon=h, offered=o)
        for o in offers
        for t in margin_targets(goal=goal, margins=space.margins)
        for d in space.delays
        for h in space.horizons
    ]
    found += sorted(combos, key=lambda c: c.name)
    seen: set[tuple[PredictiveConfig, tuple[str, ...]]] = set()
    unique: list[Candidate] = []
    for candidate in found:
        key = (resolve(candidate=candidate, base=base), candidate.offered)
        if key not in seen:
            seen.add(key)
            unique.append(candidate)
    return unique
