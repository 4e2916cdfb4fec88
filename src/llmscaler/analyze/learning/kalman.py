"""An extended Kalman filter that learns one variant's performance parameters from TTFT and ITL.

Why: the SLO analyzer's queue (`analyze.queueing.queue_model`) is only as good as its
parameters, and they differ by GPU, model, precision and serving arguments. WVA's tuner
(internal/engines/analyzers/queueingmodel/tuner/ on main, commit 8798da8 "Basic model tuner
functionality (#743)", as at b08b1c7; over llm-inferno's kalman-filter) learns them online from
what every replica reports. Its environment (tuner/environment.go) is one replica's arrival
rate, mean input and output tokens, max batch, TTFT and ITL, all > 0. This is that filter, for
either performance model:

- three parameters (the default, WVA main): x = [α, β, γ] of `analyze.queueing.service_model`;
  h(x) is the queue's (W + prefill, ITL) (WVA's tuner leaves the extra ITL of its `Analyze` out
  of the TTFT, as the sizing here does); the Jacobian is WVA's central differences in each
  parameter (step 0.01·|x_j|, six queue solutions); WVA main's defaults seed a variant with
  neither configured nor guessed parameters (α 5 ms, β 0.05 ms, γ 0.00005 ms,
  tuner/defaults.go after b08b1c7, read at commit 42ce1a7), and a guess from the first
  observation (`guess_service_seed`, WVA's guess corrected for the batch it was seen at) a
  variant without configured parameters;
- four parameters (the design paper, WVA ≤ v0.4): x = [α, β, γ, δ] as below.

The four-parameter filter:

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

Deliberate differences from WVA (each fixes a defect of its tuner; they apply to both models):

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
- one step per variant per cycle on the arrival-weighted means of its busy replicas, at the
  mean per-replica rate (WVA steps once per pod, which counts one cycle's evidence as many times
  as there are pods);
- the tuner's TTFT is the sizing TTFT (wait + prefill): they cannot disagree;
- a changed engine fingerprint (serving arguments, accelerator) restarts from the seed.

When a step fails (an unusable observation, a rate the parameters cannot serve, the
innovation gate or a non-positive parameter), the filter keeps its previous state and
covariance, as WVA's tuner does (its stasher), and the analyzer sizes on them.

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
from llmscaler.analyze.queueing.queue_model import EPSILON, ModelParams, QueueAnalyzer, QueueError
from llmscaler.analyze.queueing.service_model import ServiceParams
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
"""Four parameters: used when neither a configured nor a guessed seed exists (WVA's default α
is 5 ms)."""
DEFAULT_SERVICE_SEED = ServiceParams(alpha=5.0, beta=0.05, gamma=0.00005)
"""Three parameters: WVA main's `DefaultAlpha`, `DefaultBeta`, `DefaultGamma`."""
BASE_FACTOR = 0.9
"""WVA main's `BaseFactor`: the cold-start guess takes α as this share of the observed ITL."""

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


def wva_service_guess(
    *, ttft: float, itl: float, avg_input_tokens: float, avg_output_tokens: float
) -> ServiceParams | None:
    """WVA main's cold-start guess of the three parameters from one observation
    (queueingmodel/analyzer.go `guessInitState`): α = 0.9·ITL; the prefill gives β + γ =
    (TTFT − α)/I, the decode γ = ((ITL − α) − (β + γ)) / (I + (O + 1)/2 − 1), β the rest, as if
    the iteration took α (an idle replica). None unless all three are > 0."""
    if not (ttft > 0 and itl > 0 and avg_input_tokens > 0 and avg_output_tokens > 0):
        return None
    alpha = BASE_FACTOR * itl
    both = (ttft - alpha) / avg_input_tokens
    denominator = avg_input_tokens + (avg_output_tokens + 1) / 2 - 1
    if both < 0 or denominator <= 0:
        return None
    gamma = ((itl - alpha) - both) / denominator
    guess = ServiceParams(alpha=alpha, beta=both - gamma, gamma=gamma)
    return guess if guess.positive else None


def guess_service_seed(
    *,
    ttft: float,
    itl: float,
    avg_input_tokens: float,
    avg_output_tokens: float,
    batch: float | None,
) -> ServiceParams | None:
    """A three-parameter seed from one observation at a mean of `batch` requests in service
    (1 when unknown), as `guess_seed` does for four: half of the ITL is the iteration's fixed α,
    the other half the per-request part at that batch plus the token's own work, b·(β·c + γ·m) +
    β + γ·m = ITL/2 (c = (I + O)/(O + 1), m = I + O/2), with β:γ as WVA's guess splits them
    (`wva_service_guess`; the default seed's where it has none). WVA's guess reads a loaded
    replica's ITL as an idle iteration: on a replica running 120 requests it promised under
    0.4 req/s where 14 were served, and every tuner step after it was refused as a rate the
    model cannot serve. The TTFT above the model's prefill is left to the queue and the tuner.
    None unless all three are > 0."""
    if not (ttft > 0 and itl > 0 and avg_input_tokens >= 0 and avg_output_tokens >= 1):
        return None
    wva = wva_service_guess(
        ttft=ttft, itl=itl, avg_input_tokens=avg_input_tokens, avg_output_tokens=avg_output_tokens
    )
    ratio = (wva or DEFAULT_SERVICE_SEED).beta / (wva or DEFAULT_SERVICE_SEED).gamma
    b = batch if batch is not None and math.isfinite(batch) and batch >= 1 else 1.0
    compute = (avg_input_tokens + avg_output_tokens) / (avg_output_tokens + 1)
    memory = avg_input_tokens + avg_output_tokens / 2
    # With β = ratio·γ: ITL/2 = γ·(b·(ratio·c + m) + ratio + m).
    gamma = 0.5 * itl / (b * (ratio * compute + memory) + ratio + memory)
    guess = ServiceParams(alpha=0.5 * itl, beta=ratio * gamma, gamma=gamma)
    return guess if guess.positive else None


def seed_record(*, seed: ModelParams, engine: str, now: float) -> KalmanRecord:
    """A fresh filter at `seed` with covariance diag((0.5·seed)²)."""
    x = seed.as_tuple()
    n = len(x)
    u = INITIAL_UNCERTAINTY
    p = tuple((u * x[i]) ** 2 if i == j else 0.0 for i in range(n) for j in range(n))
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
    """The four parameters of a four-parameter record (the predictive analyzer's model)."""
    if len(record.x) != len(PerfParams._fields):
        raise ValueError(f'a tuner record of {len(record.x)} parameters is not four-parameter')
    return PerfParams(*record.x)


def model_params_of(record: KalmanRecord) -> ModelParams:
    """The record's parameters under the model its size names (three or four)."""
    if len(record.x) == len(ServiceParams._fields):
        return ServiceParams(*record.x)
    return params_of(record)


def measure(*, x: tuple[float, ...], obs: TunerObservation) -> tuple[float, float] | None:
    """h(x): predicted (TTFT, ITL) in ms at the observed load; None when it cannot be served."""
    if len(x) == len(ServiceParams._fields):
        return _solved(params=ServiceParams(*x), obs=obs)
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
    return _solved(params=PerfParams(*x), obs=obs)


def _solved(*, params: ModelParams, obs: TunerObservation) -> tuple[float, float] | None:
    """h(x) from the tuner's queue solved in full (max queue 10 × max batch, WVA's)."""
    analyzer = QueueAnalyzer.build(
        params=params,
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
    """2 × n by central differences, step 0.01·|x_j| (0.01 at 0): WVA's Jacobian."""
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
    n = len(x)
    four = n == len(PerfParams._fields)
    p = list(record.p)
    widen = record.rejected >= REJECTIONS_BEFORE_WIDENING
    for i, v in enumerate(x):
        p[(n + 1) * i] += (PERCENT_CHANGE * v) ** 2 + ((WIDENING * v) ** 2 if widen else 0.0)
    predicted = measure(x=x, obs=obs)
    jac = (
        None
        if predicted is None
        else _jacobian(x=x, obs=obs, predicted=predicted)
        if four
        else _jacobian_plain(x=x, obs=obs)
    )
    if predicted is None or jac is None:
        return _rejected(record, p=None, reason='observed rate above what the model can serve')
    h = (*jac[0], *jac[1])
    noise = (ERROR_LEVEL / T_PERCENTILE) ** 2 / GAMMA_FACTOR
    r0, r1 = noise * obs.ttft**2, noise * obs.itl**2
    y0, y1 = obs.ttft - predicted[0], obs.itl - predicted[1]
    pht, (s00, s01, s10, s11) = (
        kalman_update.innovation(p=p, h=h) if four else kalman_update.innovation_any(p=p, h=h, n=n)
    )
    s00 += r0
    s11 += r1
    det = s00 * s11 - s01 * s10
    if not (math.isfinite(det) and det > 0):
        return _rejected(record, p=p, reason='singular innovation covariance')
    i00, i01, i10, i11 = s11 / det, -s01 / det, -s10 / det, s00 / det
    gain: list[float] = []
    for i in range(n):
        c, d = pht[2 * i], pht[2 * i + 1]
        gain += (c * i00 + d * i10, c * i01 + d * i11)
    moves = [gain[i] * y0 + gain[i + 1] * y1 for i in range(0, 2 * n, 2)]
    # One observation is two equations for three or four unknowns: where the prior is wide, a
    # biased window (a load step inside it) moves the state by tens of percent. The step is
    # shrunk so that no parameter moves by more than MAX_STEP of its value per cycle.
    shrink = min([1.0] + [MAX_STEP * v / abs(m) for v, m in zip(x, moves, strict=True) if m])
    if shrink != 1.0:
        gain = [shrink * g for g in gain]
    new_x = tuple(
        min(max(v + shrink * m, seed / BOUND_FACTOR), seed * BOUND_FACTOR)
        for v, m, seed in zip(x, moves, record.seed, strict=True)
    )
    nis = y0 * i00 * y0 + y0 * i01 * y1 + y1 * i10 * y0 + y1 * i11 * y1
    inf = math.inf
    if not (nis < NIS_GATE and all(0 < v < inf for v in new_x)):
        return _rejected(record, p=p, reason=f'validation failed (NIS {nis:.3g})')
    # Joseph form: the covariance of the gain actually applied, shrunk or not.
    p_new = (
        kalman_update.joseph(p=p, gain=gain, h=h, r0=r0, r1=r1)
        if four
        else kalman_update.joseph_any(p=p, gain=gain, h=h, r0=r0, r1=r1, n=n)
    )
    return TunerResult(
        # Built whole (every field named): `dataclasses.replace` reads the fields each time.
        record=KalmanRecord(
            x=new_x,
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
