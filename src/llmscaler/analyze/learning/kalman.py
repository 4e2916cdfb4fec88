"""An extended Kalman filter that learns one variant's α, β, γ, δ from observed TTFT and ITL.

Why: the SLO analyzer's queue (`analyze.queueing.queue_model`) is only as good as its four
parameters, and they differ by GPU, model, precision and serving arguments. WVA's tuner
(internal/engines/analyzers/queueingmodel/tuner/ as v0.6–v0.8 ran it, over llm-inferno's
kalman-filter) learns them online from what every replica reports; this is that filter for the
four-parameter model of the WVA design paper (§2.2):

- state x = [α, β, γ, δ] (ms, ms, ms, ms); identity transition (parameters drift slowly);
- measurement z = [TTFT, ITL] (ms) with h(x) = the queue's predicted (wait + prefill, ITL) at
  the observed arrival rate and token mix, max batch N and max queue 10·N (WVA's tuner sizes);
- Jacobian H: the queue depends on α, β, γ, δ only through its service time base + slope·n,
  so its wait and service time are differenced centrally in base and slope (step 1 %) and the
  rest follows by the chain rule (four queue solutions; WVA differences each parameter, step
  0.01·|x_j|, eight solutions, which `_jacobian_plain` keeps for requests without input tokens
  and tests/unit/analyze/learning/test_kalman.py compares with). Each solution asks the chain's
  closed form first (`analyze.learning.tuner_queue`, the analyzer's answer to the bit), the analyzer
  where it fails;
- R = diag(((errorLevel / tPercentile)² / gammaFactor) · z_j²), WVA's 0.05, 1.96, 1.0 (a
  standard deviation of about 2.55 % of each observed figure);
- Q = diag((percentChange · x_i)²), recomputed from the state each step;
- update x += s·K·y clamped to the bounds, s ≤ 1 the largest factor that moves no parameter by
  more than 5 % of its value (`MAX_STEP`), P = (I − sK·H)·P·(I − sK·H)ᵀ + sK·R·(sK)ᵀ (Joseph's
  form, right for the gain applied; symmetric; written out in `analyze.learning.kalman_update`),
  then validated: every parameter > 0 and the normalised innovation squared yᵀS⁻¹y < 7.378 (χ², 2
  degrees of freedom, WVA's gate). A failed step keeps the previous (x, P).

Deliberate differences from WVA (each fixes a defect of its tuner):

- the bounds are [0.01×, 100×] of the *seed* the filter started from, kept in the record, not
  of a default state rebuilt every cycle;
- the initial covariance is diag((0.5·seed)²), not (0.05·seed)²: a seed from a preset, a
  configuration or a one-sample guess is rarely within 5 %, and with a 5 % prior a seed 30 % off
  fails the innovation gate on every step and never learns;
- from the third rejection in a row on, every step widens P by diag((0.1·x)²) (`WIDENING`), so
  a real change of the hardware is learnt, not refused, a little more readily each cycle it
  persists. A one-off widening by the initial 50 % (this filter's earlier rule) let the first
  window accepted after a few rejections move the parameters by tens of percent: on the
  event-driven simulator, three windows whose TTFT at light load sits 6 % under the linear
  prefill line were enough to send β 25 % off;
- percentChange is 0.005 per cycle, not WVA's 0.05: with 5 % of random walk per cycle the
  filter follows measurement noise of 2 % about as much as the signal and the parameters wander
  5-6 % around their values under a steady load; on the event-driven simulator
  (tests/unit/analyze/learning/test_kalman_simulated.py, after cycle 40) α and β wander up to 8 % at
  0.01 and under 4.5 % at 0.005;
- a step moves no parameter by more than 5 % (WVA applies K·y whole): one observation is two
  equations for four unknowns, and a 1-minute window that straddles a load change is biased (its
  ITL is token-weighted toward the busier part, its rate is the window's mean). On the
  event-driven simulator under abrupt load steps, a full step moved β by more than 100 % on the
  first window of a step and the filter did not come back; from 30 % off, the limit costs
  a few cycles (α within 5 % by cycle 6 instead of 3);
- one step per variant per cycle on the arrival-weighted means of its busy replicas (WVA steps
  once per pod, which counts one cycle's evidence as many times as there are pods);
- the tuner's TTFT is the sizing TTFT (wait + prefill): they cannot disagree;
- a changed engine fingerprint (serving arguments, accelerator) restarts from the seed.

What fails: nothing raises. `step` returns the record unchanged with `accepted` False and a
reason when the observation is unusable (rate ≤ 0, above what the current parameters can
serve, non-finite figures) or the update fails validation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import NamedTuple

from llmscaler.analyze.learning import kalman_update, tuner_queue
from llmscaler.analyze.queueing.perf_model import PerfParams
from llmscaler.analyze.queueing.queue_model import EPSILON, QueueAnalyzer, QueueError
from llmscaler.domain.state import KalmanRecord

ERROR_LEVEL = 0.05
T_PERCENTILE = 1.96
GAMMA_FACTOR = 1.0
PERCENT_CHANGE = 0.005
NIS_GATE = 7.378
"""χ² point for 2 degrees of freedom used by WVA's tuner (97.5 %)."""
INITIAL_UNCERTAINTY = 0.5
"""Relative standard deviation of the seed (P0 = diag((0.5·seed)²))."""
BOUND_FACTOR = 100.0
"""Parameters stay within [seed / 100, seed × 100]."""
REJECTIONS_BEFORE_WIDENING = 3
WIDENING = 0.1
"""Relative standard deviation added to P after `REJECTIONS_BEFORE_WIDENING` rejections."""
MAX_STEP = 0.05
"""No parameter moves by more than 5 % of its value in one step."""
QUEUE_FACTOR = 10
"""The tuner's max queue: 10 × max batch (WVA)."""

DEFAULT_SEED = PerfParams(alpha=5.0, beta=0.05, gamma=10.0, delta=0.0005)
"""Used when neither a configured nor a guessed seed exists (WVA's default α is 5 ms)."""

_Matrix = list[list[float]]
"""The Jacobian's two rows. P and the gain are flat row-major tuples
(`analyze.learning.kalman_update`)."""


class TunerObservation(NamedTuple):
    """One variant's figures for one step: rate in requests/s, times in ms, tokens per request."""

    arrival_rate: float
    ttft: float
    itl: float
    avg_input_tokens: float
    avg_output_tokens: float
    max_batch_size: int


@dataclass(frozen=True, slots=True)
class TunerResult:
    record: KalmanRecord
    accepted: bool
    reason: str


def guess_seed(
    *, ttft: float, itl: float, avg_input_tokens: float, batch: float | None
) -> PerfParams | None:
    """A seed from one observation at a mean batch `batch` (running requests; 1 when unknown):
    half of each latency fixed, half proportional to the batch, as if the replica ran without
    a queue: α = ITL/2, β = ITL/(2b), γ = TTFT/2, δ = TTFT/(2·I·b). WVA's guess (α = 0.9·ITL,
    the rest from the TTFT at batch 1) reads a loaded replica's latency as per-request cost and
    can size a busy model at a fraction of a request per second. None unless all are > 0."""
    if not (ttft > 0 and itl > 0 and avg_input_tokens > 0):
        return None
    b = batch if batch is not None and math.isfinite(batch) and batch >= 1 else 1.0
    guess = PerfParams(
        alpha=0.5 * itl,
        beta=0.5 * itl / b,
        gamma=0.5 * ttft,
        delta=0.5 * ttft / (avg_input_tokens * b),
    )
    return guess if guess.positive else None


def seed_record(*, seed: PerfParams, engine: str, now: float) -> KalmanRecord:
    """A fresh filter at `seed` with covariance diag((0.5·seed)²)."""
    x = seed.as_tuple()
    u = INITIAL_UNCERTAINTY
    a, b, c, d = (u * x[0]) ** 2, (u * x[1]) ** 2, (u * x[2]) ** 2, (u * x[3]) ** 2
    p = (a, 0.0, 0.0, 0.0, 0.0, b, 0.0, 0.0, 0.0, 0.0, c, 0.0, 0.0, 0.0, 0.0, d)
    return KalmanRecord(x=x, p=p, seed=x, engine=engine, nis=0.0, rejected=0, updated_at=now)


def with_engine(record: KalmanRecord, *, engine: str) -> KalmanRecord:
    """`record` under another engine fingerprint (a step shared by variants on different
    accelerators); built whole, as `dataclasses.replace` reads the fields on every call."""
    return KalmanRecord(
        x=record.x,
        p=record.p,
        seed=record.seed,
        engine=engine,
        nis=record.nis,
        rejected=record.rejected,
        updated_at=record.updated_at,
    )


def params_of(record: KalmanRecord) -> PerfParams:
    return PerfParams(*record.x)


def measure(*, x: tuple[float, ...], obs: TunerObservation) -> tuple[float, float] | None:
    """h(x): predicted (TTFT, ITL) in ms at the observed load; None when it cannot be served."""
    fast = tuner_queue.latencies(
        x=x,
        batch=obs.max_batch_size,
        queue=QUEUE_FACTOR * obs.max_batch_size,
        input_tokens=obs.avg_input_tokens,
        output_tokens=obs.avg_output_tokens,
        rate=obs.arrival_rate,
        epsilon=EPSILON,
    )
    if fast is not None:
        return fast
    analyzer = QueueAnalyzer.build(
        params=PerfParams(*x),
        max_batch_size=obs.max_batch_size,
        max_queue_size=QUEUE_FACTOR * obs.max_batch_size,
        avg_input_tokens=obs.avg_input_tokens,
        avg_output_tokens=obs.avg_output_tokens,
    )
    if isinstance(analyzer, QueueError) or obs.arrival_rate > analyzer.rate_range.max:
        return None
    solved = analyzer.latencies(lam=obs.arrival_rate / 1000)
    if isinstance(solved, QueueError):
        return None
    return solved[1], solved[2]


def _jacobian(
    *, x: tuple[float, ...], obs: TunerObservation, predicted: tuple[float, float]
) -> _Matrix | None:
    """2 × 4: TTFT = W + γ + δ·I·b̄ and ITL = α + β·b̄, where the queue (W, S) depends on the
    parameters only through its service time base + slope·n (base = γ + (O − 1)·α, slope =
    δ·I + (O − 1)·β) and b̄ = (S − base)/slope. The queue's derivatives in base and slope are
    central differences (step 1 % of each), the rest is the chain rule: four queue solutions
    where differencing each of α, β, γ, δ takes eight. Without input tokens (base and the
    effective batch then differ in γ) each parameter is differenced."""
    if obs.avg_input_tokens == 0 or obs.avg_output_tokens < 1:
        return _jacobian_plain(x=x, obs=obs)
    alpha, beta, gamma, delta = x
    tokens, decodes = obs.avg_input_tokens, obs.avg_output_tokens - 1
    base, slope = gamma + decodes * alpha, delta * tokens + decodes * beta
    h_base, h_slope = 0.01 * abs(base) or 0.01, 0.01 * abs(slope) or 0.01
    n = obs.max_batch_size
    solved = tuner_queue.waits_and_services(
        x=x,
        points=(
            (base + h_base, slope),
            (base - h_base, slope),
            (base, slope + h_slope),
            (base, slope - h_slope),
        ),
        batch=n,
        queue=QUEUE_FACTOR * n,
        input_tokens=obs.avg_input_tokens,
        output_tokens=obs.avg_output_tokens,
        rate=obs.arrival_rate,
        epsilon=EPSILON,
    )
    if solved is None:
        return None
    (w1, s1), (w2, s2), (w3, s3), (w4, s4) = solved
    dw_base, ds_base = (w1 - w2) / (2 * h_base), (s1 - s2) / (2 * h_base)
    dw_slope, ds_slope = (w3 - w4) / (2 * h_slope), (s3 - s4) / (2 * h_slope)
    batch = (predicted[1] - alpha) / beta
    if 0 < batch < obs.max_batch_size:
        db_base, db_slope = (ds_base - 1) / slope, (ds_slope - batch) / slope
    else:  # the effective batch is clamped at 0 or N: it does not move
        db_base = db_slope = 0.0
        batch = min(max(batch, 0.0), float(obs.max_batch_size))
    dt_base = dw_base + delta * tokens * db_base
    dt_slope = dw_slope + delta * tokens * db_slope
    return [
        [dt_base * decodes, dt_slope * decodes, dt_base + 1, dt_slope * tokens + tokens * batch],
        [
            1 + beta * db_base * decodes,
            batch + beta * db_slope * decodes,
            beta * db_base,
            beta * db_slope * tokens,
        ],
    ]


def _jacobian_plain(*, x: tuple[float, ...], obs: TunerObservation) -> _Matrix | None:
    """2 × 4 by central differences, step 0.01·|x_j| (0.01 at 0)."""
    jac: _Matrix = [[0.0] * len(x), [0.0] * len(x)]
    for j, value in enumerate(x):
        h = 0.01 * abs(value) if value != 0 else 0.01
        up = tuple(v + h if i == j else v for i, v in enumerate(x))
        down = tuple(v - h if i == j else v for i, v in enumerate(x))
        z_up = measure(x=up, obs=obs)
        z_down = measure(x=down, obs=obs)
        if z_up is None or z_down is None:
            return None
        for row in range(2):
            jac[row][j] = (z_up[row] - z_down[row]) / (2 * h)
    return jac


def step(
    *,
    record: KalmanRecord,
    obs: TunerObservation,
    now: float,
) -> TunerResult:
    """Predict, update with `obs`, validate; the record as it stands after the step."""
    # 0 < v < inf: positive and finite (NaN fails every comparison).
    usable = (
        0 < obs.arrival_rate < math.inf
        and 0 < obs.ttft < math.inf
        and 0 < obs.itl < math.inf
        and math.isfinite(obs.avg_input_tokens)
        and 1 <= obs.avg_output_tokens < math.inf
    )
    if not usable:
        return TunerResult(record=record, accepted=False, reason='no usable observation')
    x = record.x
    p = list(record.p)
    widen = record.rejected >= REJECTIONS_BEFORE_WIDENING
    for i, v in enumerate(x):
        p[5 * i] += (PERCENT_CHANGE * v) ** 2 + ((WIDENING * v) ** 2 if widen else 0.0)
    predicted = measure(x=x, obs=obs)
    jac = None if predicted is None else _jacobian(x=x, obs=obs, predicted=predicted)
    if predicted is None or jac is None:
        return _rejected(record, p=None, reason='observed rate above what the model can serve')
    h = (*jac[0], *jac[1])
    noise = (ERROR_LEVEL / T_PERCENTILE) ** 2 / GAMMA_FACTOR
    r0, r1 = noise * obs.ttft**2, noise * obs.itl**2
    y0, y1 = obs.ttft - predicted[0], obs.itl - predicted[1]
    pht, (s00, s01, s10, s11) = kalman_update.innovation(p=p, h=h)
    s00 += r0
    s11 += r1
    det = s00 * s11 - s01 * s10
    if not (math.isfinite(det) and det > 0):
        return _rejected(record, p=p, reason='singular innovation covariance')
    i00, i01, i10, i11 = s11 / det, -s01 / det, -s10 / det, s00 / det
    c0, d0, c1, d1, c2, d2, c3, d3 = pht
    gain = [
        c0 * i00 + d0 * i10,
        c0 * i01 + d0 * i11,
        c1 * i00 + d1 * i10,
        c1 * i01 + d1 * i11,
        c2 * i00 + d2 * i10,
        c2 * i01 + d2 * i11,
        c3 * i00 + d3 * i10,
        c3 * i01 + d3 * i11,
    ]
    moves = [gain[i] * y0 + gain[i + 1] * y1 for i in range(0, 8, 2)]
    # One observation is two equations for four unknowns: where the prior is wide, a biased
    # window (a load step inside it) moves the state by tens of percent. The step is shrunk
    # so that no parameter moves by more than MAX_STEP of its value per cycle.
    shrink = min([1.0] + [MAX_STEP * v / abs(m) for v, m in zip(x, moves, strict=True) if m])
    if shrink != 1.0:
        gain = [shrink * g for g in gain]
    x0, x1, x2, x3 = [
        min(max(v + shrink * m, seed / BOUND_FACTOR), seed * BOUND_FACTOR)
        for v, m, seed in zip(x, moves, record.seed, strict=True)
    ]
    nis = y0 * i00 * y0 + y0 * i01 * y1 + y1 * i10 * y0 + y1 * i11 * y1
    inf = math.inf
    if not (nis < NIS_GATE and 0 < x0 < inf and 0 < x1 < inf and 0 < x2 < inf and 0 < x3 < inf):
        return _rejected(record, p=p, reason=f'validation failed (NIS {nis:.3g})')
    # Joseph form: the covariance of the gain actually applied, shrunk or not.
    p_new = kalman_update.joseph(p=p, gain=gain, h=h, r0=r0, r1=r1)
    return TunerResult(
        # Built whole (every field named): `dataclasses.replace` reads the fields each time.
        record=KalmanRecord(
            x=(x0, x1, x2, x3),
            p=p_new,
            seed=record.seed,
            engine=record.engine,
            nis=nis,
            rejected=0,
            updated_at=now,
        ),
        accepted=True,
        reason='updated',
    )


def _rejected(record: KalmanRecord, *, p: list[float] | None, reason: str) -> TunerResult:
    """Keep x; count the rejection. After widening, P keeps the widened prior, so that each
    further rejection in a row widens it a little more."""
    widened = record.rejected >= REJECTIONS_BEFORE_WIDENING and p is not None
    kept = replace(
        record,
        p=tuple(p) if widened and p is not None else record.p,
        rejected=record.rejected + 1,
    )
    return TunerResult(record=kept, accepted=False, reason=reason)
