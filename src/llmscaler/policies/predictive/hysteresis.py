"""Scale up in one step, scale down with hysteresis: the counts a predictive cycle moves to.

Why: `policies.predictive.policy` knows, per cycle, what each variant sustains and what the load
may need over the start-up horizon; which counts follow from that is a rule of its own, with its
own failure modes (a fleet trimmed to its need exactly scales straight back up; a fleet trimmed
just as the load returns misses the SLO for a start-up; a scale-up that rebuilds the mix every
cycle churns replicas). It reads mixes and needs only, never metrics or memory.

- **Scale-up** (the fleet, pending replicas included, covers less than the need): the cheapest
  additions to the current counts, or, when the cheapest mix from scratch costs `SWITCH_SAVING`
  less, that mix added to the current counts (when the current counts already hold that mix,
  the fleet becomes it). When keeping every current replica cannot cover the need, a mix
  without the variants that hold the others back behind the router, or the most the maxima
  sustain.
- **Scale-down**: the cheapest part of the current fleet that still covers the recent need
  with `HYSTERESIS` to spare, no new replicas on the way down, each variant counted at its
  `trusted_rate`. Not in a cycle whose load is arriving (`rate_rises`), nor when the caller
  has no window of history (it passes an infinite recent need). While replicas are starting
  the caller passes the `serving` counts, and no variant goes below them: only replicas not
  yet serving may be cancelled. The mix counts a starting replica at its capacity (it is
  bought for the need), but until it serves it serves nothing; a trim that removed serving
  replicas of one variant for starting ones of another left the load on a fraction of the
  fleet for a start-up.
- Otherwise the counts hold.

What fails: nothing raises; a need no mix covers is reported in the action, and the counts are
the best the maxima allow.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from llmscaler.optimize import exact_mix

TRUST: Final = 1.5
"""A scale-down counts on a variant for at most this × the rate per replica it was seen
meeting its targets at (`VariantLearning.demonstrated`): the model may be optimistic where the
variant has not been."""
TRUST_FLOOR: Final = 0.5
"""... but for at least this share of its capacity: a fleet larger than the load never shows
what its replicas sustain, and must still be able to shrink."""
HYSTERESIS: Final = 0.15
"""A scale-down keeps this much capacity above the recent need: a fleet trimmed to the need
exactly is short of it at the next cycle's noise, and scales straight back up."""
ARRIVING: Final = 2.0
"""A cycle whose arrival rate is more than this × the previous cycle's (and beyond the 1-minute
count's noise) takes no scale-down: load is arriving. After a lull as long as the scale-down
delay, the first cycles of the load's return see a fraction of it (the rate is a 1-minute
mean) and would trim the fleet just before it is needed."""
RISE_NOISE: Final = 2.0
"""... "beyond the noise": by more than this many standard deviations of a Poisson count over
the minute the rate is read on."""
SWITCH_SAVING: Final = 0.10
"""A scale-up rebuilds the mix from scratch only when that costs at least this much less."""
ARRIVING_HOLD: Final = 'hold (the arrival rate more than doubled: no scale-down while load arrives)'


@dataclass(frozen=True, slots=True)
class Choice:
    """The counts chosen, what was done (the decision's reason ends with it), and the mix that
    was priced for it."""

    targets: dict[str, int]
    action: str
    mix: exact_mix.Mix


def trusted_rate(*, alone: float, demonstrated: float) -> float:
    """What a scale-down counts one replica of a variant for (req/s): its capacity `alone`, but
    no more than `TRUST` × the rate it was seen meeting its targets at, nor less than
    `TRUST_FLOOR` × `alone`."""
    return min(alone, max(TRUST * demonstrated, TRUST_FLOOR * alone))


def rate_rises(*, previous: float, rate: float) -> bool:
    """The 1-minute arrival rate (req/s) more than `ARRIVING` × the previous cycle's, by more
    than `RISE_NOISE` standard deviations of its count."""
    noise = RISE_NOISE * math.sqrt(max(previous, rate) / 60.0)
    return rate > ARRIVING * previous and rate - previous > noise


def choose(
    *,
    options: Sequence[exact_mix.MixOption],
    trusted: Sequence[exact_mix.MixOption],
    current: Mapping[str, int],
    need: float,
    recent_need: float,
    have: float,
    arriving: bool = False,
    serving: Mapping[str, int] | None = None,
) -> Choice:
    """The counts of this cycle (see the module docstring): `options` at the variants'
    capacities, `trusted` at what a scale-down counts them for, `need` and `recent_need` in
    req/s (`math.inf`: no scale-down), `have` what the current counts sustain, `serving` the
    replicas per variant a scale-down may not remove (None: any)."""
    if have + 1e-9 < need:
        return _scale_up(options=options, current=current, need=need)
    if recent_need < have and not arriving:
        floor = serving or {}
        trimmed = exact_mix.cheapest(
            options=[
                dataclasses.replace(
                    o,
                    low=max(min(o.low, current[o.variant]), floor.get(o.variant, 0)),
                    high=current[o.variant],
                )
                for o in trusted
            ],
            need=recent_need * (1 + HYSTERESIS),
            prefer=current,
        )
        if trimmed.met and trimmed.cost < exact_mix.price(options=options, counts=current) - 1e-9:
            return Choice(dict(trimmed.counts), 'scale down (the recent need allows it)', trimmed)
    held = exact_mix.Mix(
        counts=tuple(sorted(current.items())),
        capacity=have,
        cost=exact_mix.price(options=options, counts=current),
        met=have + 1e-9 >= need,
    )
    return Choice(dict(current), ARRIVING_HOLD if arriving else 'hold', held)


def _scale_up(
    *, options: Sequence[exact_mix.MixOption], current: Mapping[str, int], need: float
) -> Choice:
    added = exact_mix.cheapest(
        options=[
            dataclasses.replace(o, low=max(o.low, min(current[o.variant], o.high))) for o in options
        ],
        need=need,
        prefer=current,
    )
    fresh = exact_mix.cheapest(options=options, need=need, prefer=current)
    if fresh.met and fresh.cost < added.cost * (1 - SWITCH_SAVING):
        counts = dict(fresh.counts)
        if all(count <= current[name] for name, count in counts.items()):
            # The current fleet holds the cheaper mix and more: the surplus drags it down
            # behind the router (the coupling), so the mix alone is the scale-up.
            return Choice(
                counts, 'switch to a cheaper mix the current replicas already hold', fresh
            )
        targets = {name: max(count, current[name]) for name, count in counts.items()}
        return Choice(targets, 'scale up to a cheaper mix (current replicas kept for now)', fresh)
    if added.met:
        return Choice(dict(added.counts), 'scale up', added)
    # Keeping every current replica cannot cover the need: a mix without some variants (a
    # slow one holds the fast ones back behind the router) may, or sustain more. Only the
    # variants it leaves out lose replicas; those it keeps keep theirs (more of a serving
    # variant never lowers what the set sustains).
    if fresh.met:
        action, chosen = 'scale up to a mix without the variants that hold it back', fresh
    elif fresh.capacity > added.capacity + 1e-9:
        action, chosen = 'scale up to the most the maxima sustain (need not covered)', fresh
    else:
        return Choice(
            dict(added.counts), 'scale up to every maximum kept (need not covered)', added
        )
    targets = {name: max(count, current[name]) if count > 0 else 0 for name, count in chosen.counts}
    return Choice(targets, action, chosen)
