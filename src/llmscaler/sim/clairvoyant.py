"""The clairvoyant baseline: the cheapest fleet that would have served the trace, knowing it.

Why: a policy's cost means little alone; the reference lower bound says how far it is from the
best any reactive autoscaler could do. This policy reads the whole trace in advance, so it never
reacts late: at each control instant it provisions, with the least-cost mix of variants, for the
load that will arrive once the replicas it asks for are ready.

What it computes:

- `sliding_rates`: rate[k] = arrivals in [k, k + 60) / 60 (req/s) for every whole second k,
  from per-second counts (numpy, once per trace). Arrivals are binned by whole second.
- `ClairvoyantPolicy.required_rate(now)`: with d = the LARGEST startup delay of the variants (a
  replica of any variant asked for now is then ready by t + d, so one number covers the mix),
  R(t) = max of rate[k] over whole seconds k in [floor(t + d), floor(t + d + cycle)], i.e. over
  every 60-second window that starts between t + d and t + d + cycle and so lies in
  [t + d, t + d + cycle + 60]: the load from when these replicas are ready until the next
  decision's replicas are, plus the minute that requests arriving then keep them busy.
- `cheapest_mix`: integer n_v in [spec.min_replicas, spec.max_replicas] minimising
  Σ n_v·cost_per_hour_v subject to Σ n_v·capacity_v ≥ R, exactly (depth-first enumeration in
  name order with bound pruning). Ties: fewer replicas, then more replicas on the variant whose
  name sorts first. When even every variant at its maximum falls short, every variant gets its
  maximum.
- Keeping what is still needed: replicas asked for now serve only from t + d, but a replica
  removed now is gone now. So the mix must also keep, of the replicas ready now (pending ones
  serve nothing yet and are no reason to keep a mix chosen a cycle earlier), enough to cover
  H(t) = max of rate[k] for k in [floor(t), floor(t + d)] (the load until the new ones are
  ready): Σ min(n_v, ready_v)·capacity_v ≥ H, with H capped at what keeping all of them gives.
  Without this a change of mix (say 2 × H100 → 1 × H100 + 2 × L40S) would drop capacity for d
  seconds. Otherwise scale-down is immediate: no stabilization, the future is known.
- `calibrate`: capacity_v, the req/s one replica sustains within the SLO, by replaying a seeded
  Poisson stream on one `FastReplica` (details on the function).

What fails: `ClairvoyantPolicy` raises `ValueError` when a variant has no capacity in
`capacities` or `cycle` is negative or not finite; a NaN, infinite or negative capacity counts as
0 (the variant adds nothing); a NaN, infinite or negative cost raises `ValueError`.
`calibrate` returns 0.0 for an empty trace (no lengths to resample) and raises `ValueError` on an
attainment outside (0, 1] or a non-positive SLO.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from llmscaler.sim.replica import FastReplica
from llmscaler.sim.types import (
    SLO,
    ControlView,
    FloatArray,
    IntArray,
    SimRequest,
    Trace,
    VariantSpec,
)

RATE_WINDOW = 60
"""Seconds of the sliding arrival rate."""

CALIBRATION_SECONDS = 600.0
CALIBRATION_REQUESTS = 3000
CALIBRATION_MAX_REQUESTS = 24_000
"""Cap on one replay (600 s at 40 req/s): a faster replica is long steady by then."""
WARMUP_FRACTION = 0.2
BISECTIONS = 12
_BRACKETS = 3

_EPS = 1e-9


def sliding_rates(*, arrivals: FloatArray, window: int = RATE_WINDOW) -> FloatArray:
    """rate[k] = arrivals in [k, k + window) / window for k = 0 .. floor(last arrival).

    Negative or non-finite arrival times are dropped (a loaded trace has none).
    """
    times = np.asarray(arrivals, dtype=np.float64)
    times = times[np.isfinite(times) & (times >= 0)]
    if times.size == 0:
        return np.zeros(0, dtype=np.float64)
    seconds = np.floor(times).astype(np.int64)
    counts = np.bincount(seconds)
    prefix = np.concatenate(([0], np.cumsum(counts)))
    n = counts.shape[0]
    starts = np.arange(n)
    ends = np.minimum(starts + window, n)
    return (prefix[ends] - prefix[starts]).astype(np.float64) / window


@dataclass(frozen=True, slots=True)
class _Item:
    name: str
    cost: float
    capacity: float
    low: int
    high: int


def _items(
    *, variants: Sequence[VariantSpec], capacities: Mapping[str, float]
) -> tuple[_Item, ...]:
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
        items.append(_Item(spec.name, cost, capacity, low, max(low, spec.max_replicas)))
    return tuple(items)


def _solve(
    *, required: float, items: Sequence[_Item], hold: float = 0.0, kept: Sequence[int] = ()
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
    items = _items(variants=variants, capacities=capacities)
    rate = required if required > 0 else 0.0  # NaN fails the comparison too
    now = current or {}
    counts = _solve(
        required=rate,
        items=items,
        hold=hold if hold > 0 else 0.0,
        kept=[now.get(it.name, 0) for it in items],
    )
    return {it.name: n for it, n in zip(items, counts, strict=True)}


class ClairvoyantPolicy:
    """Provisions the cheapest mix for the load one start-up delay ahead (module docstring).

    `last_required` / `last_hold` are R and H of the latest `targets` call (for figures).
    """

    def __init__(
        self,
        *,
        trace: Trace,
        variants: Sequence[VariantSpec],
        slo: SLO,
        cycle: float,
        capacities: Mapping[str, float],
    ) -> None:
        if not math.isfinite(cycle) or cycle < 0:
            raise ValueError(f'cycle must be a finite number >= 0, got {cycle}')
        self.slo = slo
        self.cycle = cycle
        self._items = _items(variants=variants, capacities=capacities)
        self.capacities = {it.name: it.capacity for it in self._items}
        self.delay = max((v.startup_delay for v in variants), default=0.0)
        self._rates = sliding_rates(arrivals=trace.arrivals)
        # Instance-level: R takes few distinct values (counts / 60), each solved once.
        self._mixes: dict[tuple[float, float, tuple[int, ...]], tuple[int, ...]] = {}
        self.last_required = 0.0
        self.last_hold = 0.0

    @property
    def name(self) -> str:
        return 'clairvoyant'

    def _max_rate(self, first_second: float, last_second: float) -> float:
        first = max(0, math.floor(first_second))
        last = min(self._rates.shape[0] - 1, math.floor(last_second))
        if last < first:
            return 0.0
        return float(self._rates[first : last + 1].max())

    def required_rate(self, *, now: float) -> float:
        """R(now): the largest 60-s arrival rate over [now + d, now + d + cycle + 60] (req/s)."""
        return self._max_rate(now + self.delay, now + self.delay + self.cycle)

    def hold_rate(self, *, now: float) -> float:
        """The largest 60-s arrival rate over [now, now + d + 60]: load before new replicas."""
        return self._max_rate(now, now + self.delay)

    def targets(self, *, view: ControlView) -> dict[str, int]:
        required = self.required_rate(now=view.now)
        hold = self.hold_rate(now=view.now)
        # Only ready replicas serve the load that arrives before new ones start: a pending replica
        # is no reason to keep a mix (it would pin an expensive choice made a cycle earlier).
        kept = tuple(max(0, view.ready.get(it.name, 0)) for it in self._items)
        self.last_required = required
        self.last_hold = hold
        cache_key = (required, hold, kept)
        counts = self._mixes.get(cache_key)
        if counts is None:
            counts = _solve(required=required, items=self._items, hold=hold, kept=kept)
            self._mixes[cache_key] = counts
        return {it.name: n for it, n in zip(self._items, counts, strict=True)}

    def wake(self, *, view: ControlView) -> dict[str, int]:
        return {}


def _upper_rate(*, spec: VariantSpec, inputs: IntArray, outputs: IntArray) -> float:
    """A rate no replica can sustain: total step time can not be below the work it must do.

    Per request: p·input (prefill) + β·(output − 1) (decode seats) + α × the steps it needs at
    least, one per max_num_seqs decode tokens or per max_num_batched_tokens tokens.
    """
    perf = spec.perf
    mean_in = float(np.mean(inputs))
    mean_decode = float(np.mean(outputs)) - 1.0
    steps = max(
        mean_decode / spec.max_num_seqs, (mean_in + mean_decode) / spec.max_num_batched_tokens
    )
    seconds = perf.prefill_per_token * mean_in + perf.decode_per_seq * mean_decode
    return 1.0 / (seconds + perf.step_overhead * steps)


def _replay_length(rate: float) -> int:
    return max(
        CALIBRATION_REQUESTS, min(CALIBRATION_MAX_REQUESTS, math.ceil(CALIBRATION_SECONDS * rate))
    )


def _attains(
    *,
    spec: VariantSpec,
    rate: float,
    gaps: FloatArray,
    inputs: IntArray,
    outputs: IntArray,
    slo: SLO,
    attainment: float,
) -> bool:
    """Replay the stream at `rate` on one replica; True when ≥ attainment meet the SLO.

    Stops as soon as the measured failures exceed what the attainment allows.
    """
    count = _replay_length(rate)
    arrivals = np.cumsum(gaps[:count]) / rate
    warmup = int(WARMUP_FRACTION * count)
    replica = FastReplica(spec=spec, name='calibration', now=0.0)
    measured = count - warmup
    allowed = math.floor((1.0 - attainment) * measured + _EPS)
    failures = 0
    ttft, itl = slo.ttft, slo.itl

    def misses(done: list[SimRequest]) -> int:
        missed = 0
        for r in done:
            if r.rid < warmup:
                continue
            # Mean ITL over the gaps: (finished − first) / (n − 1) > itl, without the division.
            late = r.output_tokens > 1 and r.finished - r.first_token > itl * (r.output_tokens - 1)
            if late or r.first_token - r.arrival > ttft:
                missed += 1
        return missed

    arrival_list = arrivals.tolist()
    input_list = inputs[:count].tolist()
    output_list = outputs[:count].tolist()
    for rid in range(count):
        at = arrival_list[rid]
        done = replica.advance(until=at)
        if done:
            failures += misses(done)
            if failures > allowed:
                return False
        request = SimRequest(
            rid=rid, arrival=at, input_tokens=input_list[rid], output_tokens=output_list[rid]
        )
        replica.submit(request=request, now=at)
        if request.failed and rid >= warmup:
            # Rejected for length at any rate: not a capacity matter, left out of the count.
            measured -= 1
            allowed = math.floor((1.0 - attainment) * measured + _EPS)
    failures += misses(replica.advance(until=math.inf))
    return failures <= allowed


def calibrate(
    *,
    spec: VariantSpec,
    trace: Trace,
    slo: SLO,
    attainment: float = 0.99,
    seed: int = 0,
    progress: Callable[[float], None] | None = None,
) -> float:
    """Requests/s one replica of `spec` sustains with ≥ `attainment` of requests within `slo`.

    A Poisson stream (seeded; the same unit gaps and lengths at every rate, so the outcome is
    monotone in the SLO) whose (input, output) pairs are resampled from the trace is replayed on
    one `FastReplica`: max(3000 requests, 600 s) of it (at most 24,000 requests), the first
    20 % of requests discarded as warm-up. A request attains when TTFT ≤ slo.ttft and its mean
    ITL ≤ slo.itl (a one-token output has no ITL); requests the replica rejects for length are
    left out. The largest such rate is bisected (12 halvings) between 0 and a rate above the
    replica's throughput bound; the result is the last rate that attained (0.0 when none did).
    `progress(fraction_done)` is called after every replay and with 1.0 at the end.
    """
    if not 0 < attainment <= 1 or not math.isfinite(attainment):
        raise ValueError(f'attainment must be in (0, 1], got {attainment}')
    if not (slo.ttft > 0 and slo.itl > 0):
        raise ValueError(f'SLO targets must be > 0, got ttft={slo.ttft}, itl={slo.itl}')
    if len(trace) == 0:
        if progress is not None:
            progress(1.0)
        return 0.0
    gap_rng = np.random.default_rng([seed, 0])
    pick_rng = np.random.default_rng([seed, 1])
    high = _upper_rate(spec=spec, inputs=trace.input_tokens, outputs=trace.output_tokens)
    # Enough draws for the longest replay the bisection can ask for (the bracket may double).
    size = _replay_length(high * 8)
    gaps = gap_rng.standard_exponential(size)
    picks = pick_rng.integers(0, len(trace), size=size)
    inputs = trace.input_tokens[picks]
    outputs = trace.output_tokens[picks]

    replays = 0
    most = _BRACKETS + BISECTIONS

    def ok(rate: float) -> bool:
        nonlocal replays
        attained = _attains(
            spec=spec,
            rate=rate,
            gaps=gaps,
            inputs=inputs,
            outputs=outputs,
            slo=slo,
            attainment=attainment,
        )
        replays += 1
        if progress is not None:
            progress(min(1.0, replays / most))
        return attained

    for _ in range(_BRACKETS):  # the bound is loose the other way only in theory; check it
        if not ok(high):
            break
        high *= 2.0
    else:
        if progress is not None:
            progress(1.0)
        return high / 2.0
    low = 0.0
    for _ in range(BISECTIONS):
        mid = (low + high) / 2.0
        if ok(mid):
            low = mid
        else:
            high = mid
    if progress is not None:
        progress(1.0)
    return low
