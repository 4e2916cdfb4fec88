"""What a variant sustains within its latency targets beyond WVA's queue model, and what its
observed latency teaches about the model's error: the predictive analyzer's capacity corrections.

Why: the queue model (`analyze.queueing.queue_model`, `analyze.queueing.search`) sizes a replica
from α, β, γ, δ alone. Two things it does not know decide whether a fleet sized on it meets the SLO:
prompts share the engine with decode steps (chunked prefill), and the parameters may be wrong
for the traffic at hand. `policies.predictive.policy` corrects for both with these pure functions:

- `interference_rate`: the rate per replica at which prefill's share of the engine stretches
  the mean ITL to its target (beyond the rate the variant was seen meeting its targets at,
  whose ITLs the tuned line already holds);
- `learnt_scale`: one cycle's reading of the model's error from a loaded variant's observed
  TTFT and ITL (the rates at which the model — the queue model, and for ITL the interference
  cap too — predicts them, against the rate it shows them at), smoothed in log space into the
  variant's capacity scale κ, which scales the capacity both give. A reading moves κ in
  proportion to how far the latency it reads is toward its target (`READING_SHARE`): where
  the latency curve is flat, a few milliseconds of model error read as a large error in rate;
- `demonstrated`: the highest rate per replica the variant was seen meeting its targets at;
- `missed_targets`: what the requests that missed their targets teach
  (`analyze.slo.attainment`, from vLLM's latency histograms): a variant missing beyond its
  budget at a rate sustains less than that rate, however far below its believed capacity it runs —
  the mean latencies cannot say so, and `learnt_scale` reads nothing below `LOADED_SHARE`; misses at
  a rate above its believed capacity are the overload's, and lower nothing but what it was seen
  meeting its targets at;
- `draining`: whether a backlog is being drained, when no cycle is a reading.

What fails: nothing raises; inputs the functions cannot read leave the previous value (or 0
for a rate that cannot be met).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Final

from annotated_types import Gt

from llmscaler.analyze.queueing.perf_model import PerfParams
from llmscaler.analyze.queueing.queue_model import DEFAULT_MAX_QUEUE_SIZE, QueueAnalyzer, QueueError
from llmscaler.analyze.queueing.search import SearchError, TargetPerf, size
from llmscaler.analyze.slo import attainment
from llmscaler.analyze.slo.workload import Workload
from llmscaler.domain.basics import STRICT_KEYS, NonNegative
from llmscaler.domain.snapshot import PoolMetrics, ReplicaMetrics


@dataclass(frozen=True, slots=True)
class VariantLearning:
    """What the latencies a variant showed say of its capacity, as its caller keeps it.

    `scale` is the factor κ applied to the modelled capacity at the SLO; `demonstrated` the
    highest rate per replica (req/s) at which the variant was seen meeting its targets, the
    most a scale-down may count on it for beyond `policies.predictive.hysteresis.TRUST` (0: never
    seen)."""

    __pydantic_config__ = STRICT_KEYS

    scale: Annotated[float, Gt(0.0)] = 1.0
    demonstrated: NonNegative = 0.0


LOADED_SHARE: Final = 0.5
"""A variant busy at less than this share of its believed capacity says little of the model's
error (latency hardly depends on load there): its scale is kept."""
SCALE_WEIGHT: Final = 0.3
"""Weight of one cycle's reading in the smoothed log scale."""
QUEUED_READING: Final = 5.0
"""Waiting requests per replica above which a cycle is no reading of the model's error."""
SCALE_MIN: Final = 0.05
SCALE_MAX: Final = 2.0
READING_SHARE: Final = 0.5
"""A reading of a latency at this share of its (scaled) target or more moves κ by
`SCALE_WEIGHT`; one at a smaller share by that much less, in proportion. Far below its target
the latency curve is flat, and a few milliseconds of model error there read as a large error in
rate: two readings of a TTFT at a fifth of its target took a quarter off an L40S's capacity
(the held-out `conv-low` of docs/policies.md). Not taking such readings at all was tried: their
slow drift is also what held the fleet a flash crowd needs."""


def draining(*, replicas: Sequence[ReplicaMetrics], pool: PoolMetrics | None) -> bool:
    """A backlog is being drained: requests queued at the gateway (or a gateway queue that could
    not be read), or many per replica."""
    if pool is not None and (pool.queue_size is None or pool.queue_size > 0):
        return True
    waiting = [r.queue_length for r in replicas if r.queue_length is not None]
    return bool(waiting) and math.fsum(waiting) / len(waiting) > QUEUED_READING


INTERFERENCE_STEPS: Final = 40
"""Bisection steps of `interference_rate` (the rate to within 1e-12 of its ceiling)."""


def interference_rate(
    *,
    params: PerfParams,
    in_tokens: float,
    out_tokens: float,
    itl: float,
    ceiling: float,
    met_at: float = 0.0,
) -> float:
    """The largest rate per replica (req/s, at most `ceiling`) at which the mean ITL stays within
    `itl` (ms) once prefill's share of the engine is counted.

    With chunked prefill a request's prompt is computed in the same engine steps as the others'
    decodes: a share u = λ·(γ + δ·I)/1000 of the engine's time goes to prompts, and the decode
    steps of a batch of b (ITL α + β·b, b from Little's law on the time per request) stretch to
    (α + β·b) / (1 − u). WVA's queue model leaves u out; on prompt-heavy traffic (long prompts,
    short answers) it then promises several times what a replica sustains. 0 when even an idle
    replica misses `itl`.

    `met_at` (req/s per replica): a rate the variant was just seen serving within its targets.
    The line α + β·b is tuned on the ITLs replicas show, and up to that rate those already hold
    prefill's stretch: counted again, the model predicts two or three times the ITL replicas
    show (87 ms for 33 on the simulator's long prompts). Up to `met_at` the line stands alone;
    beyond it, only the stretch's growth, (α + β·b)·(1 − u₀)/(1 − u) with u₀ its share there.
    0 (the default): the whole stretch, for a variant not seen meeting its targets."""
    alpha, beta, gamma, delta = params.as_tuple()
    prefill = gamma + delta * in_tokens
    t0 = gamma + out_tokens * alpha
    t1 = delta * in_tokens + out_tokens * beta
    kept = 1.0 - met_at * prefill / 1000.0

    def stretched(rate: float) -> float:
        room = 1000.0 - rate * t1
        if room <= 0:
            return math.inf
        line = alpha + beta * rate * t0 / room
        if rate <= met_at:
            return line
        busy = rate * prefill / 1000.0
        if busy >= 1:
            return math.inf
        return line * kept / (1 - busy)

    if not (ceiling > 0 and math.isfinite(ceiling)) or stretched(0.0) > itl:
        return 0.0
    if stretched(ceiling) <= itl:
        return ceiling
    low, high = 0.0, ceiling
    for _ in range(INTERFERENCE_STEPS):
        middle = (low + high) / 2
        if stretched(middle) <= itl:
            low = middle
        else:
            high = middle
    return low


def demonstrated(*, previous: float, load: Workload, ttft: float, itl: float) -> float:
    """The highest rate per replica seen meeting both (scaled) targets, this cycle included."""
    if not load.busy or load.ttft_ms is None or load.itl_ms is None:
        return previous
    if load.ttft_ms > ttft or load.itl_ms > itl:
        return previous
    return max(previous, load.arrival_rate / load.busy)


def learnt_scale(
    *,
    previous: float,
    load: Workload,
    params: PerfParams,
    batch: int,
    modelled: float,
    ttft_target: float,
    itl_target: float,
    met_at: float = 0.0,
) -> float:
    """The variant's capacity scale κ after this cycle (`policies.predictive.policy`, step 3), the
    targets (ms, scaled by the latency margin) weighing the readings (`READING_SHARE`); `met_at`
    as for `interference_rate`, whose model the ITL reading is of."""
    if (
        not load.busy
        or load.ttft_ms is None
        or load.itl_ms is None
        or load.avg_input_tokens is None
        or load.avg_output_tokens is None
    ):
        return previous
    rate = load.arrival_rate / load.busy
    if rate < LOADED_SHARE * previous * modelled:
        return previous
    analyzer = QueueAnalyzer.build(
        params=params,
        max_batch_size=batch,
        max_queue_size=DEFAULT_MAX_QUEUE_SIZE,
        avg_input_tokens=load.avg_input_tokens,
        avg_output_tokens=max(1.0, load.avg_output_tokens),
    )
    if isinstance(analyzer, QueueError):
        return previous
    readings: list[tuple[float, float]] = []
    for target, seen, goal in (
        (TargetPerf(ttft=load.ttft_ms), load.ttft_ms, ttft_target),
        (TargetPerf(itl=load.itl_ms), load.itl_ms, itl_target),
    ):
        sized = size(analyzer=analyzer, targets=target)
        if isinstance(sized, SearchError) or not sized.max_rate > 0:
            continue
        predicted = sized.max_rate
        if target.itl > 0:
            # The ITL reading is of the model with prefill's share counted (as it is sized).
            predicted = interference_rate(
                params=params,
                in_tokens=load.avg_input_tokens,
                out_tokens=max(1.0, load.avg_output_tokens),
                itl=load.itl_ms,
                ceiling=predicted,
                met_at=met_at,
            )
        if predicted > 0:
            weight = min(1.0, seen / (READING_SHARE * goal)) if goal > 0 else 1.0
            readings.append((rate / predicted, weight))
    if not readings:
        return previous
    reading, weight = min(readings)
    return toward(previous=previous, reading=reading, weight=weight)


def toward(*, previous: float, reading: float, weight: float = 1.0) -> float:
    """The scale moved `weight` × `SCALE_WEIGHT` of the way to `reading` in log space, within
    [`SCALE_MIN`, `SCALE_MAX`]."""
    reading = min(SCALE_MAX, max(SCALE_MIN, reading))
    smoothed = math.exp(
        math.log(previous) + SCALE_WEIGHT * weight * (math.log(reading) - math.log(previous))
    )
    return min(SCALE_MAX, max(SCALE_MIN, smoothed))


def missed_targets(
    *,
    previous: VariantLearning,
    seen: attainment.Attainment | None,
    load: Workload,
    modelled: float,
    budget: float,
) -> VariantLearning | None:
    """What the variant's requests that missed their targets teach (`slo_attainment`), or None
    when they teach nothing: its scale moves toward the rate it sustains as far as they tell
    (never up), and the rate it was seen meeting its targets at is no higher than that.

    Misses at a rate per replica above what the variant is counted for (κ × `modelled`) are
    the overload's: they say it sustains less than that rate, not less than it is counted
    for, and its scale is kept. Read as a fault of the variant, an overload (a burst that
    outgrew the fleet while replicas started) took the scales lower cycle after cycle, and
    the policy bought replicas it then trimmed for twenty minutes (docs/policies.md)."""
    if seen is None or not load.busy or not modelled > 0:
        return None
    rate = load.arrival_rate / load.busy
    sustained = attainment.capacity_reading(seen=seen, rate=rate, budget=budget)
    if sustained is None:
        return None
    scale = previous.scale
    if sustained / modelled < scale and rate <= scale * modelled:
        scale = toward(previous=scale, reading=sustained / modelled)
    return VariantLearning(scale=scale, demonstrated=min(previous.demonstrated, sustained))
