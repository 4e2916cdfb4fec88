"""The fast path for bursts: a model whose arrivals outrun the rate its cycle sized for is decided
again at once, on the burst's rate, and only upwards.

Why: a cycle sizes on the last minute's arrival rate, which shows a step a minute late, and the
next cycle sees it up to a cycle after that. On load that returns in bursts after a lull, the
first replicas were ordered about a minute into each burst and served two and a half minutes in,
with thousands of requests queued behind the fleet the lull left. The gateway counts arrivals
as they come; read every poll (the scale-from-zero loop's, 100 ms in the controller, the wake
period in the simulator), a few seconds of counts tell a burst from noise.

What it computes:

- `record` keeps a model's counts (`Count`: requests arrived at the gateway so far and its
  queue, at one poll) for the last `max(SPANS)` seconds; a count that went down (the gateway
  restarted) starts the memory afresh.
- `burst_rate` is the largest, over the spans of `SPANS` the memory covers, of the lower
  `Z`-sigma Poisson bound of the arrivals in the span, (n − Z·√n) / span, kept only when it
  exceeds the cycle's rate by `MIN_RISE` (relative) and `MIN_EXCESS` req/s: a lower bound, so a
  second of noise on a steady load is not a burst, and a true burst is counted for what the
  evidence so far proves (it grows with each poll, and the next raise buys the rest).
- `burst`, per model that asks for it (`Policy.fast_path`), has a replica (a model at zero is
  scale-from-zero's) and was not raised in the last `QUIET` seconds: `engine.decide` on a
  snapshot of that model alone — its variants as they are now (a replica ready since the last
  cycle has no reading yet, and counts as starting, as it did then), its replicas' readings of
  the last cycle, its pool with the burst rate as the arrival rate and the queue read at the poll,
  the GPU limits charged with every other model's replicas (the budget a whole cycle would
  leave it) — with the core's memory. The decisions that raise a target are the result, their
  reason prefixed with the burst's figures. The memory `decide` returns is dropped: the next
  cycle decides with its own, on its own readings.

Bounds: it never lowers a target (only decisions above the current count are returned); every
safety rule of `decide` holds, and a model whose readings are missing, stale or invalid
(`MetricsAvailable` False on any of its decisions) raises nothing, as its hold is the cycle's;
at most one raise per model per `QUIET` seconds (the caller passes when it last raised each
model), and a model decided without a raise is not decided again for `RECHECK` seconds (the
caller passes when it last decided each: `Outcome.decided`), so a burst the fleet already
serves costs a `decide` per model twice a second, not on every 100 ms poll; counts that are not
finite are ignored.

What fails: nothing raises for odd counts; `decide`'s ValueError for a non-finite `now`. Pure: no
clock, no I/O; the caller keeps the counts and the last raise times; models in name order.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from llmscaler.config.resolved import Config
from llmscaler.domain.snapshot import Decision, PoolMetrics, ReplicaMetrics, Snapshot, Variant
from llmscaler.domain.state import State
from llmscaler.engine import decide
from llmscaler.optimize.constraints import charge_variants
from llmscaler.policies import registry

SPANS: Final = (2.0, 5.0, 10.0)
"""Seconds of arrivals a burst rate is counted over; the memory keeps the longest."""
Z: Final = 4.0
"""Sigmas below the counted arrivals: a burst is what the counts prove, not what they suggest."""
MIN_RISE: Final = 1.0
"""A burst rate at least this much above the cycle's rate (relative)..."""
MIN_EXCESS: Final = 0.5
"""...and this many req/s above it."""
QUIET: Final = 5.0
"""Seconds after a raise before the same model may be raised again."""
RECHECK: Final = 0.5
"""Seconds after a model was decided before it is decided again: a poll's counts barely move
the burst's rate, and a raise they prove waits at most this long. Below the simulator's wake
period (1 s), so that each of its polls decides as before."""
REASON: Final = 'burst'


@dataclass(frozen=True, slots=True)
class Count:
    """One poll of a model's gateway: requests arrived so far, and how many are queued."""

    at: float
    arrived: float
    queued: float = 0.0


@dataclass(frozen=True, slots=True)
class Raise:
    """A model raised by the fast path: the burst rate, the cycle's, and its decisions."""

    group: str
    rate: float
    cycle_rate: float
    decisions: tuple[Decision, ...]


@dataclass(frozen=True, slots=True)
class Outcome:
    """One poll's raises, and the models decided (raised or not), by group in name order."""

    raises: tuple[Raise, ...]
    decided: tuple[str, ...]


def record(*, counts: Sequence[Count], count: Count) -> tuple[Count, ...]:
    """`counts` with `count` added, those older than the longest span dropped (see above)."""
    if not (math.isfinite(count.at) and math.isfinite(count.arrived)):
        return tuple(counts)
    if counts and (count.arrived < counts[-1].arrived or count.at < counts[-1].at):
        return (count,)
    # One count at or before the longest span is kept: a span needs a start to measure from.
    horizon = count.at - max(SPANS, default=0.0)
    kept = list(counts)
    while len(kept) > 1 and kept[1].at <= horizon:
        kept.pop(0)
    return (*kept, count)


def burst_rate(*, counts: Sequence[Count], cycle_rate: float) -> float | None:
    """The burst's rate the counts prove, or None when they prove none (see above)."""
    if len(counts) < 2:
        return None
    newest = counts[-1]
    base = cycle_rate if math.isfinite(cycle_rate) and cycle_rate > 0 else 0.0
    floor = max(base * (1 + MIN_RISE), base + MIN_EXCESS)
    best: float | None = None
    for span in SPANS:
        start = next((c for c in reversed(counts) if c.at <= newest.at - span), None)
        if start is None:
            break
        arrived = newest.arrived - start.arrived
        lower = (arrived - Z * math.sqrt(max(0.0, arrived))) / (newest.at - start.at)
        if lower > floor and (best is None or lower > best):
            best = lower
    return best


def burst(
    *,
    snapshot: Snapshot,
    config: Config,
    state: State,
    counts: Mapping[str, Sequence[Count]],
    raised: Mapping[str, float],
    now: float,
    checked: Mapping[str, float] | None = None,
) -> Outcome:
    """The models to raise now, by group (`modelID|namespace`), their raising decisions, and
    the models decided.

    `snapshot` holds the variants as they are now and the last cycle's readings and pools;
    `counts` the models' recent counts by group; `raised` when each group was last raised;
    `checked` when each was last decided (`Outcome.decided` of earlier polls).
    """
    last_checked = checked or {}
    by_group: dict[str, list[Variant]] = {}
    for variant in snapshot.variants:
        by_group.setdefault(variant.group, []).append(variant)
    pools = {pool.group: pool for pool in snapshot.pools}
    out: list[Raise] = []
    decided: list[str] = []
    for group in sorted(by_group):
        variants = by_group[group]
        if now - raised.get(group, -math.inf) < QUIET:
            continue
        if now - last_checked.get(group, -math.inf) < RECHECK:
            continue
        mine = counts.get(group, ())
        if len(mine) < 2 or not any(v.current_replicas > 0 for v in variants):
            continue
        first = variants[0]
        model = config.model(model_id=first.model_id, namespace=first.namespace)
        if not registry.select(model).fast_path(model):
            continue
        pool = pools.get(group)
        cycle_rate = pool.arrival_rate if pool is not None else None
        base = cycle_rate if cycle_rate is not None else 0.0
        rate = burst_rate(counts=mine, cycle_rate=base)
        if rate is None:
            continue
        decided.append(group)
        decisions = _raise(
            snapshot=snapshot,
            variants=variants,
            pool=_burst_pool(pool=pool, variant=first, rate=rate, queued=mine[-1].queued, now=now),
            config=config,
            state=state,
            now=now,
        )
        if decisions:
            why = f'{REASON}: {rate:.3g} req/s arriving (the cycle sized for {base:.3g})'
            out.append(
                Raise(
                    group=group,
                    rate=rate,
                    cycle_rate=base,
                    decisions=tuple(
                        dataclasses.replace(d, reason=f'{why}; {d.reason}') for d in decisions
                    ),
                )
            )
    return Outcome(raises=tuple(out), decided=tuple(decided))


def _burst_pool(
    *, pool: PoolMetrics | None, variant: Variant, rate: float, queued: float, now: float
) -> PoolMetrics:
    queue = queued if math.isfinite(queued) and queued >= 0 else None
    if pool is None:
        return PoolMetrics(
            model_id=variant.model_id,
            namespace=variant.namespace,
            observed_at=now,
            queue_size=queue,
            arrival_rate=rate,
        )
    return dataclasses.replace(pool, observed_at=now, queue_size=queue, arrival_rate=rate)


def _raise(
    *,
    snapshot: Snapshot,
    variants: Sequence[Variant],
    pool: PoolMetrics,
    config: Config,
    state: State,
    now: float,
) -> list[Decision]:
    names = {(v.namespace, v.name) for v in variants}
    others = [v for v in snapshot.variants if (v.namespace, v.name) not in names]
    readings = tuple(r for r in snapshot.replicas if (r.namespace, r.variant) in names)
    alone = Snapshot(
        variants=tuple(_as_read(v, readings) for v in variants),
        replicas=readings,
        pools=(pool,),
        gpu_limits=charge_variants(limits=snapshot.gpu_limits, variants=others),
    )
    outcome = decide(snapshot=alone, config=config, state=state, now=now)
    if not all(d.metrics_available for d in outcome.decisions):
        # A hold keeps the last desired count: that is the cycle's to write, not a burst's.
        return []
    return [d for d in outcome.decisions if d.target > d.current]


def _as_read(variant: Variant, readings: Sequence[ReplicaMetrics]) -> Variant:
    """`variant` with the replicas ready since the readings were taken counted as starting."""
    read = sum(1 for r in readings if r.variant == variant.name)
    if variant.ready_replicas <= read:
        return variant
    late = variant.ready_replicas - read
    return dataclasses.replace(
        variant, ready_replicas=read, pending_replicas=variant.pending_replicas + late
    )
