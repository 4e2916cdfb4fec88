"""What `llmscaler tune` searches: a policy's settings, the variants offered and their bounds.

Why: the search needs a finite, ordered list of candidates, each with a stable name (ties break
by name) and one resolved value for what the simulation runs and the objects written say. What
a candidate sets depends on the policy tuned, and only there: each tunable policy is a
`PolicySpace` (`tune.predictive`, `tune.saturation`) that lists its choices of settings,
resolves one into the model's `ModelConfig` and writes it as the ConfigMap the controller
reads for that policy. Everything else here is the same for every policy:

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

`defaults(...)` is the policy's recommended configuration (as `llmscaler simulate` runs it) on
every variant, with the scenario's bounds; `grid(...)` lists it first, then every combination,
in name order, without those that resolve to what an earlier one does (configuration, variants
and bounds).

What fails: `bounded` raises `ValueError` for a negative floor or a cap that is not positive;
`grid` raises what the policy's space raises (`ValueError` for a goal outside (0.5, 1) or a
setting outside its ConfigMap's range).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Generic, Protocol, TypeVar

from llmscaler.config.resolved import ModelConfig
from llmscaler.sim.vocabulary import VariantSpec

FLOORS = (0, 1)
"""`minReplicas` at least this on the cheapest offered variant; 0 keeps the scenario's."""
CAPS = (1.0, 0.5)
"""Factors on each offered variant's `maxReplicas` (rounded up); 1 keeps the scenario's."""
DEFAULTS = 'defaults'
"""The name of the recommended configuration."""


class Settings(Hashable, Protocol):
    """One choice of a policy's settings (a frozen dataclass of its space)."""

    @property
    def text(self) -> str:
        """How the choice reads in a candidate's name; '' for the recommended settings."""
        ...


S = TypeVar('S', bound=Settings)


@dataclass(frozen=True, slots=True)
class Candidate(Generic[S]):
    """One configuration: the policy's settings, the variants offered and their bounds."""

    settings: S
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
        if not self.settings.text and not bounds:
            return DEFAULTS
        settings = self.settings.text or 'default settings'
        return f'{settings}, variants {"+".join(self.offered)}{bounds}'


class PolicySpace(Protocol[S]):
    """A tunable policy: its settings searched, and what one choice of them becomes."""

    @property
    def policy(self) -> str:
        """The core policy's name (`policies.registry`) that the candidates run as."""
        ...

    @property
    def configmap_name(self) -> str:
        """The ConfigMap `configmap` writes."""
        ...

    def recommended(self) -> S:
        """The settings of the policy as `llmscaler simulate` runs it."""
        ...

    def choices(self, *, goal: float, base: ModelConfig) -> Sequence[S]:
        """Every choice of settings searched for an attainment `goal`, on the model's
        recommended configuration `base`."""
        ...

    def resolve(self, *, settings: S, base: ModelConfig) -> ModelConfig:
        """`base` with `settings`, as the ConfigMap's entry sets them."""
        ...

    def entry(self, *, config: ModelConfig, model_id: str, namespace: str) -> dict[str, Any]:
        """The ConfigMap's per-model entry that resolves to `config`'s part of this policy."""
        ...


def subsets(names: Sequence[str]) -> list[tuple[str, ...]]:
    """Every non-empty subset of `names`, all of them first, then by size down and name."""
    ordered = sorted(names)
    return [
        combo
        for size in range(len(ordered), 0, -1)
        for combo in itertools.combinations(ordered, size)
    ]


@dataclass(frozen=True, slots=True)
class Space:
    """What is searched besides the policy's settings (module docstring)."""

    subsets: bool = True
    """Whether subsets of the variants are offered, or all of them always."""
    floors: tuple[int, ...] = FLOORS
    caps: tuple[float, ...] = CAPS


def defaults(*, policy: PolicySpace[S], variants: Sequence[str]) -> Candidate[S]:
    """The recommended configuration on every variant, with the scenario's bounds."""
    return Candidate(settings=policy.recommended(), offered=tuple(sorted(variants)))


def bounded(
    *, candidate: Candidate[Any], variants: Sequence[VariantSpec]
) -> tuple[VariantSpec, ...]:
    """The variants `candidate` offers, with its bounds (module docstring) and each start count
    moved inside them; `ValueError` for a floor below 0 or a cap that is not positive."""
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


def _bounds(
    candidate: Candidate[Any], variants: Sequence[VariantSpec]
) -> tuple[tuple[int, int], ...]:
    return tuple(
        (v.min_replicas, v.max_replicas) for v in bounded(candidate=candidate, variants=variants)
    )


def grid(
    *,
    policy: PolicySpace[S],
    space: Space,
    variants: Sequence[VariantSpec],
    goal: float,
    base: ModelConfig,
) -> list[Candidate[S]]:
    """The defaults, then every combination of `policy`'s choices and `space` in name order,
    each resolving to a configuration (settings, variants and their bounds) no earlier
    candidate resolves to."""
    names = [v.name for v in variants]
    offers = subsets(names) if space.subsets else [tuple(sorted(names))]
    found = [defaults(policy=policy, variants=names)]
    combos = [
        Candidate(settings=s, offered=o, floor=f, cap=c)
        for o in offers
        for s in policy.choices(goal=goal, base=base)
        for f in space.floors
        for c in space.caps
    ]
    found += sorted(combos, key=lambda c: c.name)
    seen: set[tuple[ModelConfig, tuple[str, ...], tuple[tuple[int, int], ...]]] = set()
    unique: list[Candidate[S]] = []
    for candidate in found:
        key = (
            policy.resolve(settings=candidate.settings, base=base),
            candidate.offered,
            _bounds(candidate, variants),
        )
        if key not in seen:
            seen.add(key)
            unique.append(candidate)
    return unique
