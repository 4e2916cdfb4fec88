"""The cheapest mix of a model's variants that covers a rate within the SLO, under a load balancer.

Why: a replica's capacity at the SLO (`analyze.queueing.search`) is what it sustains *alone*. Behind
a least-loaded router (the simulator's, and the inference gateway's queue scorer) every replica
of a model holds about as many requests in flight as the others, whatever its speed: in a mix,
the slow variant reaches its in-flight limit at the SLO first, and the fast one is held to that
same in-flight count, below what it sustains alone. Sizing a mix on the one-replica capacities
runs the slow variant past its SLO while the fast one idles.

The coupling, per variant v with capacity `rate` alone and time per request T_v(b) = t0 + t1·b
(ms, at b requests in flight; for the SLO model: t0 = γ + O·α, t1 = δ·I + O·β):

- in flight at its capacity alone: b_v = rate·t0 / (1000 − rate·t1) (Little's law, b = λ·T(b));
- in a set S of variants that all serve: b_S = min over S of b_v, and each variant sustains
  λ_v(b_S) = 1000·b_S / T_v(b_S) (its full `rate` when b_S = b_v). Without a time model
  (t0 = t1 = 0) a variant is not coupled: it sustains `rate` in any set.

`cheapest` enumerates the sets S (every subset that holds the variants which must keep replicas,
up to `MAX_ENUMERATED` variants; past that, the whole set and each variant alone), prices each
with `optimize.cover.cover` (exact) on the coupled capacities, and re-evaluates each answer on
the variants it actually uses. Ties: the cheaper, then fewer replicas, then fewer replicas moved
from `prefer`, then the most replicas on the variant whose name sorts first. Nothing covering:
the set that sustains the most at its maxima (not every variant at its maximum: with the
coupling, a slow variant's replicas can lower what the fast ones sustain), `met` False.

What fails: nothing raises; a variant whose rate is not a positive finite number adds nothing;
a cost follows the one cost rule (`domain.snapshot.effective_cost`: one that is not a finite
number above 0 is 10), in the covers and in the prices compared.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from llmscaler.domain.snapshot import effective_cost
from llmscaler.optimize.cover import Option, cover

MAX_ENUMERATED: Final = 8
"""Variants up to which every subset is tried (2^8 covers)."""


@dataclass(frozen=True, slots=True)
class MixOption:
    """One variant: its capacity alone at the SLO (req/s per replica), its time per request
    T(b) = t0 + t1·b (ms), its cost per replica, and the counts it may take."""

    variant: str
    rate: float
    cost: float
    low: int
    high: int
    t0: float = 0.0
    t1: float = 0.0


@dataclass(frozen=True, slots=True)
class Mix:
    counts: tuple[tuple[str, int], ...]
    """Every option's count, sorted by variant."""
    capacity: float
    cost: float
    met: bool


def _usable(option: MixOption) -> bool:
    return math.isfinite(option.rate) and option.rate > 0 and option.high > 0


def in_flight(option: MixOption) -> float:
    """Requests in flight per replica at its capacity alone (inf without a time model)."""
    denominator = 1000.0 - option.rate * option.t1
    if option.t0 <= 0 or denominator <= 0:
        return math.inf
    return option.rate * option.t0 / denominator


def coupled_rates(options: Sequence[MixOption]) -> dict[str, float]:
    """Each option's capacity per replica when all of `options` serve behind one router."""
    usable = [o for o in options if _usable(o)]
    if not usable:
        return {o.variant: 0.0 for o in options}
    shared = min(in_flight(o) for o in usable)
    rates = {}
    for option in options:
        if not _usable(option):
            rates[option.variant] = 0.0
        elif math.isinf(shared) or in_flight(option) <= shared or option.t0 <= 0:
            rates[option.variant] = option.rate
        else:
            rates[option.variant] = min(
                option.rate, 1000.0 * shared / (option.t0 + option.t1 * shared)
            )
    return rates


def capacity(*, options: Sequence[MixOption], counts: Mapping[str, int]) -> float:
    """The capacity of `counts` replicas, coupled over the variants with a replica."""
    serving = [o for o in options if counts.get(o.variant, 0) > 0]
    rates = coupled_rates(serving)
    return math.fsum(rates[o.variant] * counts[o.variant] for o in serving)


def price(*, options: Sequence[MixOption], counts: Mapping[str, int]) -> float:
    """What `counts` replicas cost, each priced by the one cost rule."""
    return math.fsum(effective_cost(o.cost) * counts.get(o.variant, 0) for o in options)


def _sets(options: Sequence[MixOption]) -> list[tuple[MixOption, ...]]:
    forced = [o for o in options if o.low > 0]
    optional = [o for o in options if o.low <= 0 and _usable(o)]
    if len(options) <= MAX_ENUMERATED:
        chosen = [
            combo for k in range(len(optional) + 1) for combo in itertools.combinations(optional, k)
        ]
    else:
        chosen = [(), tuple(optional), *((o,) for o in optional)]
    return [tuple(sorted((*forced, *c), key=lambda o: o.variant)) for c in chosen]


def cheapest(
    *, options: Sequence[MixOption], need: float, prefer: Mapping[str, int] | None = None
) -> Mix:
    """The cheapest counts covering `need` req/s (see the module docstring)."""
    ordered = sorted(options, key=lambda o: o.variant)
    prefer = prefer or {}
    best: tuple[tuple[float, int, int, tuple[tuple[str, int], ...]], float] | None = None
    # The last key: the replicas on the variant whose name sorts first, most first.
    for members in _sets(ordered):
        rates = coupled_rates(members)
        answer = cover(
            options=[
                Option(
                    variant=o.variant,
                    capacity=rates[o.variant],
                    cost=o.cost,
                    target=o.low,
                    max_replicas=o.high,
                )
                for o in members
            ],
            need=need,
        )
        counts = {o.variant: o.low for o in ordered}
        counts.update(answer.targets)
        have = capacity(options=ordered, counts=counts)
        if have + 1e-9 < need:
            continue
        key = (
            price(options=ordered, counts=counts),
            sum(counts.values()),
            sum(abs(counts[v] - prefer.get(v, 0)) for v in counts),
            tuple((name, -count) for name, count in sorted(counts.items())),
        )
        if best is None or key < best[0]:
            best = (key, have)
    if best is None:
        return _most(ordered)
    (cost, _, _, negated), have = best
    return Mix(
        counts=tuple((name, -count) for name, count in negated), capacity=have, cost=cost, met=True
    )


def _most(ordered: Sequence[MixOption]) -> Mix:
    """Nothing covers: the set at its maxima with the most coupled capacity (then the cheaper,
    then by name). Every variant at its maximum is not that: a slow variant's replicas hold the
    fast ones to its in-flight limit, so adding them can lower what the fleet sustains."""
    best: tuple[tuple[float, float, tuple[tuple[str, int], ...]], Mix] | None = None
    for members in _sets(ordered):
        counts = {o.variant: o.low for o in ordered}
        counts.update({o.variant: o.high for o in members if _usable(o)})
        mix = Mix(
            counts=tuple(sorted(counts.items())),
            capacity=capacity(options=ordered, counts=counts),
            cost=price(options=ordered, counts=counts),
            met=False,
        )
        key = (-mix.capacity, mix.cost, mix.counts)
        if best is None or key < best[0]:
            best = (key, mix)
    assert best is not None  # _sets always yields at least the forced set
    return best[1]
