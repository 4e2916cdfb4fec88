"""Seedable synthetic request traces: a rate envelope, Gamma burstiness, log-normal lengths.

Why: the real traces are one hour long; diurnal cycles, weekends, spikes and day-long runs need
traces made up to measure, shaped after the daily and weekly periodicity plots of the public
BurstGPT (HPMLL/BurstGPT, KDD'25) and Azure LLM inference 2024 (Azure/AzurePublicDataset, DynamoLLM)
traces: peak/trough about 2–4, weekends 20–40 % lower (read off the plots, not fitted).

What it computes. The rate envelope λ(t) (requests/s, t in seconds from the start, t=0 being
midnight of day 0) is
    λ(t) = mean_rate · D(t) · W(t) · Π events
with D(t) = 1 for 'constant' and 1 + A·cos(2π(t − phase)/86400) for 'diurnal' (peak at `phase`
seconds after midnight, trough 12 h later, peak/trough = (1+A)/(1−A)); W(t) = weekend_factor on
days 5 and 6 of each week counted from t=0, else 1; each RateEvent multiplies the rate by its
multiplier on [start, start + duration) — a spike is a short event, a step a long one. So
`mean_rate` is the mean over a weekday without events, not over the whole trace.

Arrivals are a non-homogeneous Gamma renewal process built by time rescaling: unit-rate gaps
Gamma(k, 1/k) with k = 1/cv² (mean 1, coefficient of variation cv) are summed, and each sum u is
mapped to the time t with Λ(t) = u, Λ being the integrated rate. Λ is computed on a 1 s grid with
the rate taken at each cell's midpoint and inverted by linear interpolation, so the rate is exact
up to features shorter than a second. On a constant envelope the inter-arrival times are exactly
Gamma with mean 1/λ and the given cv. The process starts fresh at t=0 (the first arrival is one
gap after 0) and arrivals are not rebased, so the envelope's phase stays put.

Token lengths are independent log-normals (the log-correlation in the Azure traces is about 0):
output = round(exp(N(out_mu, out_sigma))) clipped to [1, min(max_output, max_model_len − 1)],
then input = round(exp(N(in_mu, in_sigma))) clipped to [1, max_model_len − output], so every
request fits the model's context.

Shared system prompts and multi-turn sessions (`SyntheticSpec.prefixes`) are drawn after the
lengths by `sim.workload.prefixes`, which documents them; without them a trace is as it was.

Bad input is rejected when the value is built (ValueError naming the field): a rate, cv or
duration that is NaN, Inf, zero or negative; an amplitude outside [0, 1]; a negative weekend
factor or event multiplier (0 is allowed: an outage); a sigma < 0; max_model_len < 2. An envelope
that is zero everywhere yields an empty trace.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Final, Literal

import numpy as np

from llmscaler.sim.vocabulary import FloatArray, IntArray, Trace
from llmscaler.sim.workload.prefixes import PrefixSpec, add_prefixes

DAY: Final = 86_400.0
WEEK_DAYS: Final = 7
WEEKEND: Final = (5, 6)
GRID_SECONDS: Final = 1.0
DEFAULT_PHASE: Final = 14 * 3600.0
"""Diurnal peak at 14:00: the daily plots of BurstGPT and Azure 2024 peak in the afternoon."""
DIURNAL_AMPLITUDE: Final = 0.5
"""peak/trough = 1.5 / 0.5 = 3, inside the 2–4 of those traces' daily plots."""
WEEKEND_FACTOR: Final = 0.7
"""Weekends 30 % lower: the middle of the 20–40 % of those traces' weekly plots."""


def _positive(*, name: str, value: float) -> None:
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f'{name} must be finite and > 0, got {value}')


def _non_negative(*, name: str, value: float) -> None:
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(f'{name} must be finite and >= 0, got {value}')


@dataclass(frozen=True, slots=True)
class RateEvent:
    """Multiply the rate by `multiplier` on [start, start + duration) seconds."""

    start: float
    duration: float
    multiplier: float

    def __post_init__(self) -> None:
        if not math.isfinite(self.start):
            raise ValueError(f'event start must be finite, got {self.start}')
        _positive(name='event duration', value=self.duration)
        _non_negative(name='event multiplier', value=self.multiplier)


@dataclass(frozen=True, slots=True)
class RateEnvelope:
    """The request rate over time, λ(t) in requests/s (see the module docstring)."""

    kind: Literal['constant', 'diurnal']
    mean_rate: float
    amplitude: float = 0.0
    phase: float = DEFAULT_PHASE
    weekend_factor: float = 1.0
    events: tuple[RateEvent, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in ('constant', 'diurnal'):
            raise ValueError(f'unknown envelope kind {self.kind!r}; valid: constant, diurnal')
        _positive(name='mean rate', value=self.mean_rate)
        if not (0.0 <= self.amplitude <= 1.0):
            raise ValueError(f'diurnal amplitude must be in [0, 1], got {self.amplitude}')
        if not math.isfinite(self.phase):
            raise ValueError(f'diurnal phase must be finite, got {self.phase}')
        _non_negative(name='weekend factor', value=self.weekend_factor)

    def rate(self, t: FloatArray) -> FloatArray:
        """λ at each time in `t` (seconds), vectorised."""
        t = np.asarray(t, dtype=np.float64)
        rate = np.full(t.shape, self.mean_rate, dtype=np.float64)
        if self.kind == 'diurnal' and self.amplitude > 0:
            rate *= 1.0 + self.amplitude * np.cos(2.0 * np.pi * (t - self.phase) / DAY)
        if self.weekend_factor != 1.0:
            weekday = np.floor(t / DAY) % WEEK_DAYS
            rate[np.isin(weekday, WEEKEND)] *= self.weekend_factor
        for event in self.events:
            inside = (t >= event.start) & (t < event.start + event.duration)
            rate[inside] *= event.multiplier
        return rate


@dataclass(frozen=True, slots=True)
class LengthModel:
    """Log-normal token lengths: mu and sigma are the mean and sd of ln(tokens)."""

    in_mu: float
    in_sigma: float
    out_mu: float
    out_sigma: float
    max_output: int = 2048

    def __post_init__(self) -> None:
        for name in ('in_mu', 'out_mu'):
            if not math.isfinite(getattr(self, name)):
                raise ValueError(f'{name} must be finite, got {getattr(self, name)}')
        _non_negative(name='in_sigma', value=self.in_sigma)
        _non_negative(name='out_sigma', value=self.out_sigma)
        if self.max_output < 1:
            raise ValueError(f'max_output must be >= 1, got {self.max_output}')

    def sample(
        self, *, rng: np.random.Generator, n: int, max_model_len: int
    ) -> tuple[IntArray, IntArray]:
        """(input, output) token counts for n requests, clipped to fit max_model_len."""
        max_out = min(self.max_output, max_model_len - 1)
        output = _lognormal(rng=rng, mu=self.out_mu, sigma=self.out_sigma, n=n)
        output = np.clip(output, 1, max_out)
        inputs = _lognormal(rng=rng, mu=self.in_mu, sigma=self.in_sigma, n=n)
        inputs = np.clip(inputs, 1, max_model_len - output)
        return inputs, output


def _lognormal(*, rng: np.random.Generator, mu: float, sigma: float, n: int) -> IntArray:
    # Clip the log first so a wide sigma cannot overflow exp() or the int64 cast.
    logs = np.minimum(rng.normal(mu, sigma, size=n), 40.0)
    return np.rint(np.exp(logs)).astype(np.int64)


@dataclass(frozen=True, slots=True)
class SyntheticSpec:
    """Everything `generate` needs besides the seed."""

    name: str
    duration: float
    envelope: RateEnvelope
    cv: float
    lengths: LengthModel
    max_model_len: int = 8192
    prefixes: PrefixSpec | None = None
    """Shared system prompts and multi-turn sessions (`sim.workload.prefixes`); None: prompts
    share nothing and carry no block ids."""

    def __post_init__(self) -> None:
        _positive(name='duration', value=self.duration)
        _positive(name='cv', value=self.cv)
        if self.max_model_len < 2:
            raise ValueError(f'max_model_len must be >= 2, got {self.max_model_len}')


def integrated_rate(*, envelope: RateEnvelope, duration: float) -> tuple[FloatArray, FloatArray]:
    """(grid times, Λ at those times) on a 1 s grid over [0, duration], Λ(0) = 0."""
    edges = np.arange(0.0, duration, GRID_SECONDS, dtype=np.float64)
    edges = np.append(edges, duration)
    widths = np.diff(edges)
    mids = edges[:-1] + widths / 2.0
    cumulative = np.concatenate([[0.0], np.cumsum(envelope.rate(mids) * widths)])
    return edges, cumulative


def generate(*, spec: SyntheticSpec, seed: int | Sequence[int]) -> Trace:
    """A synthetic trace over [0, spec.duration), the same for the same spec and seed (an int,
    or a sequence of ints: the several models of a scenario draw (seed, model index))."""
    rng = np.random.default_rng(seed)
    edges, cumulative = integrated_rate(envelope=spec.envelope, duration=spec.duration)
    total = float(cumulative[-1])
    shape = 1.0 / spec.cv**2
    units = _unit_arrivals(rng=rng, shape=shape, total=total)
    arrivals: FloatArray = np.interp(units, cumulative, edges)
    # interp may land a point on a zero-rate stretch's left edge; times must stay in range.
    arrivals = np.minimum(arrivals, np.nextafter(spec.duration, 0.0))
    inputs, outputs = spec.lengths.sample(
        rng=rng, n=int(arrivals.size), max_model_len=spec.max_model_len
    )
    trace = Trace(name=spec.name, arrivals=arrivals, input_tokens=inputs, output_tokens=outputs)
    if spec.prefixes is None:
        return trace
    return add_prefixes(
        trace=trace,
        spec=spec.prefixes,
        seed=seed if isinstance(seed, int) else tuple(seed),
        max_model_len=spec.max_model_len,
    )


def _unit_arrivals(*, rng: np.random.Generator, shape: float, total: float) -> FloatArray:
    """Event times of a unit-rate Gamma renewal process on [0, total)."""
    if total <= 0:
        return np.zeros(0, dtype=np.float64)
    # The count has mean ≈ total and variance ≈ total·cv²: draw six sd over, then top up.
    cv2 = 1.0 / shape
    batch = int(total + 6.0 * math.sqrt(total * cv2) + 64)
    sums = np.cumsum(rng.gamma(shape, 1.0 / shape, size=batch))
    while sums[-1] < total:
        more = np.cumsum(rng.gamma(shape, 1.0 / shape, size=batch)) + sums[-1]
        sums = np.concatenate([sums, more])
    return sums[: int(np.searchsorted(sums, total, side='left'))]


_CONV: Final = SyntheticSpec(
    name='azure-conv',
    duration=3600.0,
    envelope=RateEnvelope(kind='constant', mean_rate=5.53),
    cv=1.09,
    # Outputs capped at 1000: the conv trace's maximum is exactly 1000, a max_tokens limit.
    lengths=LengthModel(in_mu=6.63, in_sigma=0.99, out_mu=5.02, out_sigma=0.86, max_output=1000),
)
_CODE: Final = SyntheticSpec(
    name='azure-code',
    duration=3600.0,
    envelope=RateEnvelope(kind='constant', mean_rate=2.57),
    # The code trace's CV is 13.2 overall and 6.2 within busy stretches, but that comes from
    # on/off traffic (12 idle minutes of 58), a property of the envelope, not of the gaps. A
    # Gamma renewal with cv 6.2 (shape 0.026) degenerates: its median gap is ~1e-11 s and 79 % of
    # gaps are under 1 ms, so requests arrive in a few simultaneous clumps (the real trace: median
    # gap 64 ms, 17 % under 1 ms). cv 2.5 (median 20 ms, 31 % under 1 ms) is the closest Gamma
    # to the real gap distribution and the top of the 2–3 range the reference gives for bursty
    # traffic; model minute-scale on/off periods with RateEvents.
    cv=2.5,
    lengths=LengthModel(in_mu=7.00, in_sigma=1.36, out_mu=2.79, out_sigma=0.85, max_output=2048),
)
PRESETS: Final[Mapping[str, SyntheticSpec]] = MappingProxyType(
    {'azure-code': _CODE, 'azure-conv': _CONV}
)


def preset(
    *, name: str, duration: float, rate: float | None = None, diurnal: bool = False
) -> SyntheticSpec:
    """A preset spec with the given duration, optionally another mean rate and a diurnal shape.

    diurnal=True uses A = 0.5 (peak/trough 3, peak at 14:00) and weekends at 0.7.
    """
    base = PRESETS.get(name)
    if base is None:
        raise ValueError(f'unknown preset {name}; valid: {", ".join(sorted(PRESETS))}')
    mean_rate = base.envelope.mean_rate if rate is None else rate
    envelope = (
        RateEnvelope(
            kind='diurnal',
            mean_rate=mean_rate,
            amplitude=DIURNAL_AMPLITUDE,
            weekend_factor=WEEKEND_FACTOR,
        )
        if diurnal
        else RateEnvelope(kind='constant', mean_rate=mean_rate)
    )
    return replace(base, duration=duration, envelope=envelope)
