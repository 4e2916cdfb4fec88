"""The clairvoyant baseline: the cheapest fleet that would have served the trace, knowing it.

Why: a policy's cost means little alone; the reference lower bound says how far it is from the
best any reactive autoscaler could do. This policy reads the whole trace in advance, so it never
reacts late: at each control instant it provisions, with the least-cost mix of variants, for the
load that will arrive once the replicas it asks for are ready.

What it computes:

- `sliding_rates`: rate[k] = arrivals in [k, k + 60) / 60 (req/s) for every whole second k,
  from per-second counts (numpy, once per trace). Arrivals are binned by whole second.
- `ClairvoyantPolicy.required_rate(now)`, per model: with d = the LARGEST startup delay of the
  model's variants (a replica of any of them asked for now is then ready by t + d, so one number
  covers the mix), R(t) = max of rate[k] over whole seconds k in [floor(t + d), floor(t + d +
  cycle)], i.e. over every 60-second window that starts between t + d and t + d + cycle and so
  lies in [t + d, t + d + cycle + 60]: the load from when these replicas are ready until the
  next decision's replicas are, plus the minute that requests arriving then keep them busy.
- The mix, per model: the least-cost replica counts whose capacities cover R (`cheapest_mix`,
  with the exact cheapest cover of `optimize.cover`; ties: fewer replicas, then the variant whose
  name sorts first; every variant at its maximum when even that falls short).
- Keeping what is still needed: replicas asked for now serve only from t + d, but a replica
  removed now is gone now. So the mix must also keep, of the replicas ready now (pending ones
  serve nothing yet and are no reason to keep a mix chosen a cycle earlier), enough to cover
  H(t) = max of rate[k] for k in [floor(t), floor(t + d)] (the load until the new ones are
  ready): Σ min(n_v, ready_v)·capacity_v ≥ H, with H capped at what keeping all of them gives.
  Without this a change of mix (say 2 × H100 → 1 × H100 + 2 × L40S) would drop capacity for d
  seconds. Otherwise scale-down is immediate: no stabilization, the future is known.
- A GPU inventory: when the models' mixes together need more GPUs of a type than there are, the
  models take them first come in name order, each the cheapest mix within what the models
  before it left (`cheapest_mix` with `free`). That fleet is no longer the cheapest that serves the
  trace; `short` records when it happened and `notes` says so for the report.
- `calibrate`: capacity_v, the req/s one replica sustains within the SLO, by replaying a seeded
  Poisson stream on one `FastReplica` (details on the function).

What it knows and what it assumes: it knows every arrival of the trace (not the token lengths of
each request, which only the calibration's resampled mix stands for) and each variant's price
and start-up delay. Sized on `calibrate`'s one-replica capacities alone it is no bound: the
least-loaded router gives a slow variant as many requests in flight as a fast one, so in a mix
the slow one misses its ITL target well below its one-replica capacity, and long prompts stall
the decode steps of the requests around them. So the capacities it is given in a simulate run
(`scenario.calibrate_capacities`) are measured on the scenario itself: `sim.policies.bound` runs
this plan on the whole workload with the real router, start fleet and settings, with the one-replica
capacities scaled by a searched headroom factor (and each variant also tried alone), and keeps
the cheapest that meets 99 % of requests within the SLO. The scenario's warm start is sized with
the same capacities, so the first minutes have the fleet this plan needs. What it assumes: that
attainment grows with capacity (the search bisects on it), and one factor for all the variants
of a set; the bound is the cheapest plan of that family found, not a proven optimum, and it
holds only from a warm start (from a cold 1 + 1 fleet nothing is ready before the start-up
delay). A test checks, on a benchmark case, that no policy is both cheaper and at least as good.

What fails: `ClairvoyantPolicy` (and `cheapest_mix`) raises `ValueError` when a variant has no
capacity in `capacities`, `cycle` is negative or not finite, or a model has no trace (one
`Trace` serves one model); a NaN, infinite or negative capacity counts as 0 (the variant adds
nothing); a price follows the one cost rule (`domain.snapshot.effective_cost`: one that is not
a finite number above 0 is 10, as every policy prices it).
`calibrate` returns 0.0 for an empty trace (no lengths to resample) and raises `ValueError` on an
attainment outside (0, 1] or a non-positive SLO.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

import numpy as np

from llmscaler.optimize.cover import Option, cover
from llmscaler.sim.vllm.fast import FastReplica
from llmscaler.sim.vocabulary import (
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


def _mix_options(
    *,
    variants: Sequence[VariantSpec],
    capacities: Mapping[str, float],
    free: Mapping[str, int] | None = None,
) -> tuple[Option, ...]:
    """Each variant as the cheapest cover sees it, sorted by name: its capacity (a NaN, infinite
    or negative one counts as 0), its price per hour, and its bounds, the maximum at least the
    minimum. With `free` (GPUs per accelerator type), each maximum (and minimum) is lowered to
    what the free GPUs of its type hold, for the types `free` names."""
    options = []
    for spec in sorted(variants, key=lambda s: s.name):
        if spec.name not in capacities:
            known = ', '.join(sorted(capacities)) or '(none)'
            raise ValueError(f'no capacity for variant {spec.name!r} (have: {known})')
        capacity = capacities[spec.name]
        if not math.isfinite(capacity) or capacity < 0:
            capacity = 0.0
        low = max(0, spec.min_replicas)
        high = max(low, spec.max_replicas)
        if free is not None and spec.accelerator in free:
            high = min(high, max(0, free[spec.accelerator]) // max(1, spec.gpus_per_replica))
            low = min(low, high)
        options.append(
            Option(
                variant=spec.name,
                capacity=capacity,
                cost=spec.cost_per_hour,
                target=low,
                max_replicas=high,
            )
        )
    return tuple(options)


def _solve_mix(
    *, options: Sequence[Option], required: float, hold: float = 0.0, ready: Sequence[int] = ()
) -> tuple[int, ...]:
    """The least-cost counts of `options` (in their order) covering `required`, the replicas
    kept of `ready` (counts in the same order) covering `hold` (`optimize.cover.cover`); every
    variant at its maximum when even that falls short: the plan then does the most it can."""
    now = ready or (0,) * len(options)
    answer = cover(
        options=[replace(o, ready=n) for o, n in zip(options, now, strict=True)],
        need=required,
        hold=hold,
    )
    if not answer.met:
        return tuple(o.max_replicas for o in options)
    counts = dict(answer.targets)
    return tuple(counts[o.variant] for o in options)


def cheapest_mix(
    *,
    required: float,
    variants: Sequence[VariantSpec],
    capacities: Mapping[str, float],
    hold: float = 0.0,
    current: Mapping[str, int] | None = None,
    free: Mapping[str, int] | None = None,
) -> dict[str, int]:
    """The least-cost replica counts covering `required` req/s, per variant name: the exact
    cheapest cover of `optimize.cover`, or every variant at its maximum when even that falls
    short.

    With `current` (replica counts now; missing names count 0), the replicas kept of them,
    Σ min(n_v, current_v)·capacity_v, must also cover `hold` req/s (capped at what keeping all
    of them gives): the load that arrives before new replicas are ready. With `free` (GPUs per
    accelerator type), each maximum (and minimum) is lowered to what the free GPUs of its type
    hold. A NaN or negative `required` counts as 0 (every variant at its minimum); +Inf is
    never covered (every variant at its maximum).
    """
    options = _mix_options(variants=variants, capacities=capacities, free=free)
    now = current or {}
    counts = _solve_mix(
        options=options,
        required=required,
        hold=hold,
        ready=[now.get(o.variant, 0) for o in options],
    )
    return {o.variant: n for o, n in zip(options, counts, strict=True)}


class _Plan:
    """One model's look-ahead: its variants, its arrival rates, its start-up delay."""

    def __init__(
        self,
        *,
        model: str,
        variants: Sequence[VariantSpec],
        capacities: Mapping[str, float],
        trace: Trace,
        delay: float,
        cycle: float,
    ) -> None:
        self.model = model
        self.variants = tuple(sorted(variants, key=lambda s: s.name))
        self.options = _mix_options(variants=variants, capacities=capacities)
        self.delay = delay
        self.cycle = cycle
        self.rates = sliding_rates(arrivals=trace.arrivals)
        # R takes few distinct values (counts / 60), each solved once.
        self.mixes: dict[tuple[float, float, tuple[int, ...]], tuple[int, ...]] = {}

    def max_rate(self, first_second: float, last_second: float) -> float:
        first = max(0, math.floor(first_second))
        last = min(self.rates.shape[0] - 1, math.floor(last_second))
        if last < first:
            return 0.0
        return float(self.rates[first : last + 1].max())

    def required_rate(self, now: float) -> float:
        return self.max_rate(now + self.delay, now + self.delay + self.cycle)

    def hold_rate(self, now: float) -> float:
        return self.max_rate(now, now + self.delay)

    def mix(self, *, required: float, hold: float, kept: tuple[int, ...]) -> tuple[int, ...]:
        key = (required, hold, kept)
        counts = self.mixes.get(key)
        if counts is None:
            counts = self.mixes[key] = _solve_mix(
                options=self.options, required=required, hold=hold, ready=kept
            )
        return counts


class ClairvoyantPolicy:
    """Provisions the cheapest mix for the load one start-up delay ahead (module docstring).

    `trace` is one trace when the variants serve one model, else a trace per model name
    (`VariantSpec.model_name`); `slo` the SLO (per model) the capacities were calibrated for,
    kept for the record. `last_required` / `last_hold` are R and H of the latest
    `targets` call, summed over the models (for figures); `short` the decision times at which
    the models' cheapest mixes together did not fit the `inventory`. `fixed`, when given, is a
    fleet (replicas per variant) found cheaper in hindsight than any plan (`sim.policies.bound`):
    the policy then keeps it from the first cycle, as a fixed fleet would.
    """

    def __init__(
        self,
        *,
        trace: Trace | Mapping[str, Trace],
        variants: Sequence[VariantSpec],
        slo: SLO | Mapping[str, SLO],
        cycle: float,
        capacities: Mapping[str, float],
        inventory: Mapping[str, int] | None = None,
        fixed: Mapping[str, int] | None = None,
    ) -> None:
        if not math.isfinite(cycle) or cycle < 0:
            raise ValueError(f'cycle must be a finite number >= 0, got {cycle}')
        self.slo = slo
        self.cycle = cycle
        models = sorted({v.model_name for v in variants})
        if isinstance(trace, Trace):
            if len(models) > 1:
                raise ValueError('one trace serves one model: give a trace per model')
            traces: Mapping[str, Trace] = dict.fromkeys(models, trace)
        else:
            traces = trace
        missing = [m for m in models if m not in traces]
        if missing:
            raise ValueError(f'no trace for model {missing[0]!r}')
        self._plans: list[_Plan] = []
        for model in models:
            mine = [v for v in variants if v.model_name == model]
            self._plans.append(
                _Plan(
                    model=model,
                    variants=mine,
                    capacities=capacities,
                    trace=traces[model],
                    delay=max(v.startup_delay for v in mine),
                    cycle=cycle,
                )
            )
        self.capacities = {o.variant: o.capacity for p in self._plans for o in p.options}
        self.delay = max((p.delay for p in self._plans), default=0.0)
        self.inventory = dict(inventory or {})
        self.fixed = dict(sorted(fixed.items())) if fixed is not None else None
        self.last_required = 0.0
        self.last_hold = 0.0
        self.decisions = 0
        self.short: list[float] = []

    @property
    def name(self) -> str:
        return 'clairvoyant'

    def _plan(self, model: str | None) -> _Plan:
        if model is None and len(self._plans) == 1:
            return self._plans[0]
        for plan in self._plans:
            if plan.model == model:
                return plan
        raise KeyError(f'unknown model {model!r}')

    def required_rate(self, *, now: float, model: str | None = None) -> float:
        """R(now): the largest 60-s arrival rate over [now + d, now + d + cycle + 60] (req/s)
        of `model` (may be left out with one model)."""
        return self._plan(model).required_rate(now)

    def hold_rate(self, *, now: float, model: str | None = None) -> float:
        """The largest 60-s arrival rate over [now, now + d + 60]: load before new replicas."""
        return self._plan(model).hold_rate(now)

    def targets(self, *, view: ControlView) -> dict[str, int]:
        now = view.now
        self.decisions += 1
        if self.fixed is not None:
            return dict(self.fixed)
        wanted: list[tuple[_Plan, float, float, tuple[int, ...], tuple[int, ...]]] = []
        for plan in self._plans:
            required, hold = plan.required_rate(now), plan.hold_rate(now)
            # Only ready replicas serve the load that arrives before new ones start: a pending
            # replica is no reason to keep a mix (it would pin an expensive choice made a cycle
            # earlier).
            kept = tuple(max(0, view.ready.get(o.variant, 0)) for o in plan.options)
            counts = plan.mix(required=required, hold=hold, kept=kept)
            wanted.append((plan, required, hold, kept, counts))
        self.last_required = sum(w[1] for w in wanted)
        self.last_hold = sum(w[2] for w in wanted)
        if self.inventory and not self._fits([(w[0].variants, w[4]) for w in wanted]):
            # The models' cheapest fleets do not fit together: first come in model name order,
            # each model's cheapest mix within the GPUs the models before it left.
            self.short.append(now)
            free = dict(self.inventory)
            for index, (plan, required, hold, kept, _) in enumerate(wanted):
                options = _mix_options(
                    variants=plan.variants, capacities=self.capacities, free=free
                )
                counts = _solve_mix(options=options, required=required, hold=hold, ready=kept)
                for spec, n in zip(plan.variants, counts, strict=True):
                    if spec.accelerator in free:
                        free[spec.accelerator] -= n * spec.gpus_per_replica
                wanted[index] = (plan, required, hold, kept, counts)
        return {o.variant: n for w in wanted for o, n in zip(w[0].options, w[4], strict=True)}

    def _fits(self, mixes: Sequence[tuple[tuple[VariantSpec, ...], tuple[int, ...]]]) -> bool:
        used = dict.fromkeys(self.inventory, 0)
        for variants, counts in mixes:
            for spec, n in zip(variants, counts, strict=True):
                if spec.accelerator in used:
                    used[spec.accelerator] += n * spec.gpus_per_replica
        return all(used[a] <= self.inventory[a] for a in used)

    def notes(self) -> list[str]:
        """What the report says about this run: a fixed fleet kept, or when its fleet did not
        fit the inventory."""
        if self.fixed is not None:
            fleet = ', '.join(f'{v}={n}' for v, n in self.fixed.items())
            return [
                f'clairvoyant: a fixed fleet ({fleet}) met the SLO for less than any plan '
                'searched, so the bound keeps it'
            ]
        if not self.short:
            return []
        return [
            f'clairvoyant: the cheapest fleet of every model did not fit the GPU inventory at '
            f'{len(self.short)} of {self.decisions} decisions (first at {self.short[0]:g} s); '
            'there the models took the GPUs in name order, and its cost is no lower bound'
        ]

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
