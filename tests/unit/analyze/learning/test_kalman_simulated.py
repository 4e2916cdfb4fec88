"""The SLO tuner on the event-driven simulator: it learns what the simulated replica shows.

One llama-3.1-8b-h100 replica (min = max = 1, so the load per replica is the trace's) serves
1000-token prompts with 200-token answers (prefill-heavy: five prompt tokens per output token)
under a load that moves over ten levels between 2 and 16 requests/s, five minutes each, twice
(200 cycles; batches of about 3 to 67 running requests), the change to the next level either a
2-minute ramp or an abrupt step. Every 30 s the core decides on the simulator's snapshot exactly
as the controller does (`engine.decide()` with the `slo-queueing` configuration, through
`sim.policies.core.CorePolicy`), the tuner's seed configured (`perfParms`) 30 % above or below the
replica's effective values; the snapshot's TTFT and ITL carry 2 % of extra measurement noise on
top of the simulator's own (1-minute windows of Poisson traffic).

The effective values are `sim.hardware.perf_seed`'s: the lines through what the replica's step model
implies for the observed ITL and TTFT (prompts interleaved with decodes, the rest of the step a
request arrives in), over the batches the run visits. The test first checks that those curves
are what the simulator shows, then that the filter reaches them.

What it asserts (docs/decision-core.md, tuner section): α and β are within 5 % from cycle
`CONVERGED_BY` to the end, through every load change and the noise, and on average within
2.5 % over the last 50 cycles (no drift). γ and δ one by one are not identified to 5 %: the
observed mean TTFT fixes γ + δ·I·b at the current batch, and TTFT(b) is not a line (its local
slope over batches 3-30 and 30-67 differs by 18 %), so their split follows the recent loads.
What is reached is asserted: the prefill time γ + δ·I·b within `PREFILL_BAND` at both ends of
the visited batches, γ and δ within `SPLIT_BAND`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt
import pytest

from llmscaler.config.resolved import FOUR_PARAMETER, Config, ModelConfig, QueueingModelConfig
from llmscaler.domain.snapshot import Snapshot
from llmscaler.domain.state import KalmanRecord
from llmscaler.sim import runner
from llmscaler.sim.hardware import perf_seed, presets
from llmscaler.sim.policies import core
from llmscaler.sim.runner import SimSettings
from llmscaler.sim.vocabulary import ControlView, Trace, VariantSpec

IN, OUT = 1000, 200
PRESET = 'llama-3.1-8b-h100'
DWELL = 300.0
"""Seconds per load level: ten control cycles."""
RAMP = 120.0
"""Seconds the load takes to move from one level to the next (at the end of each level)."""
LEVELS = (2.0, 8.0, 14.0, 16.0, 11.0, 4.0, 9.0, 15.0, 6.0, 12.0) * 2
"""Requests/s, one level per `DWELL`: 200 cycles."""
NOISE = 0.02
"""Relative sd of the extra noise on the snapshot's TTFT and ITL."""
CONVERGED_BY = 25
"""From this cycle on α and β stay within 5 % (measured: by cycle 21 at the latest)."""
SPLIT_BAND = (0.10, 0.25)
"""γ and δ from `CONVERGED_BY` on (measured: 8.1 % and 21.1 % at worst)."""
PREFILL_BAND = 0.08
"""γ + δ·I·b at both ends of the visited batches from `CONVERGED_BY` on (measured: 7.2 %)."""
CURVE_MEAN = (0.035, 0.03)
CURVE_WORST = (0.09, 0.12)
"""How close the simulator's steady windows are to `perf_seed.curves` (ITL, TTFT)."""


def _spec() -> VariantSpec:
    return replace(presets.preset(name=PRESET), name='v', min_replicas=1, max_replicas=1)


def rate_at(t: npt.NDArray[np.float64], ramp: float) -> npt.NDArray[np.float64]:
    """λ(t): each level held for `DWELL`, the step to the next one a `ramp`-long line."""
    index = np.minimum((t // DWELL).astype(np.int64), len(LEVELS) - 1)
    levels = np.array(LEVELS)
    into = t - index * DWELL
    following = levels[np.minimum(index + 1, len(LEVELS) - 1)]
    share = np.clip((into - (DWELL - ramp)) / ramp, 0.0, 1.0)
    rate: npt.NDArray[np.float64] = levels[index] + (following - levels[index]) * share
    return rate


def _trace(seed: int, ramp: float) -> Trace:
    """Poisson arrivals at `rate_at` (thinning), fixed lengths."""
    rng = np.random.default_rng(seed)
    top, end = max(LEVELS), DWELL * len(LEVELS)
    candidates = np.sort(rng.uniform(0.0, end, int(rng.poisson(top * end))))
    arrivals = candidates[rng.uniform(0.0, top, len(candidates)) < rate_at(candidates, ramp)]
    n = len(arrivals)
    return Trace(
        name='levels',
        arrivals=arrivals,
        input_tokens=np.full(n, IN, dtype=np.int64),
        output_tokens=np.full(n, OUT, dtype=np.int64),
    )


class _Tuned:
    """`CorePolicy` on the SLO path, fed a snapshot with extra TTFT/ITL noise; keeps every
    cycle's tuner record and the replica's figures."""

    def __init__(self, *, config: Config, seed: int) -> None:
        self.core = core.CorePolicy(name='slo-queueing', config=config)
        self.rng = np.random.default_rng(seed)
        self.records: list[KalmanRecord] = []
        self.seen: list[tuple[float, float, float, float]] = []

    @property
    def name(self) -> str:
        return self.core.name

    def targets(self, *, view: ControlView) -> dict[str, int]:
        replicas = []
        for r in view.snapshot.replicas:
            if r.arrival_rate and r.avg_ttft and r.avg_itl and r.running_requests is not None:
                self.seen.append((r.arrival_rate, r.avg_ttft, r.avg_itl, r.running_requests))
            ttft, itl = (1 + NOISE * self.rng.standard_normal(2)).tolist()
            replicas.append(
                replace(
                    r,
                    avg_ttft=None if r.avg_ttft is None else r.avg_ttft * ttft,
                    avg_itl=None if r.avg_itl is None else r.avg_itl * itl,
                )
            )
        noisy: Snapshot = replace(view.snapshot, replicas=tuple(replicas))
        targets = self.core.targets(view=replace(view, snapshot=noisy))
        self.records.extend(self.core.state.kalman_map().values())
        return targets

    def wake(self, *, view: ControlView) -> dict[str, int]:
        return {}


@dataclass(frozen=True, slots=True)
class Run:
    records: list[KalmanRecord]
    seen: list[tuple[float, float, float, float]]


def _run(*, start: tuple[float, ...], seed: int, ramp: float = RAMP) -> Run:
    spec = _spec()
    queueing = QueueingModelConfig(
        target_ttft=2000.0,
        target_itl=100.0,
        perf_parms=((spec.accelerator, start),),
        performance_model=FOUR_PARAMETER,
    )
    config = Config(
        default=ModelConfig(queueing=QueueingModelConfig()),
        by_model=((spec.model_id, ModelConfig(queueing=queueing)),),
    )
    policy = _Tuned(config=config, seed=seed)
    runner.run(
        trace=_trace(seed, ramp),
        variants=[spec],
        policy=policy,
        settings=SimSettings(tail=0.0, wake_period=math.inf),
    )
    return Run(records=policy.records, seen=policy.seen)


@pytest.fixture(scope='module')
def curves() -> perf_seed.Curves:
    spec = _spec()
    limit = perf_seed.batch_limit(spec=spec, avg_input_tokens=IN, avg_output_tokens=OUT)
    return perf_seed.curves(spec=spec, avg_input_tokens=IN, avg_output_tokens=OUT, max_batch=limit)


def _batch_at(curves: perf_seed.Curves, rate: float) -> float:
    """Little's law on the curves: b = λ·(TTFT(b) + (O − 1)·ITL(b))."""
    b = 1.0
    for _ in range(200):
        ttft = float(np.interp(b, curves.batches, curves.ttft))
        itl = float(np.interp(b, curves.batches, curves.itl))
        b = rate * (ttft + (OUT - 1) * itl) / 1000
    return b


@pytest.fixture(scope='module')
def effective(curves: perf_seed.Curves) -> tuple[float, float, float, float]:
    low, high = _batch_at(curves, min(LEVELS)), _batch_at(curves, max(LEVELS))
    fitted = perf_seed.fit(curves=curves, avg_input_tokens=IN, low=low, high=high)
    assert fitted is not None
    return fitted


def _errors(x: tuple[float, ...], truth: tuple[float, ...]) -> list[float]:
    return [abs(a / b - 1) for a, b in zip(x, truth, strict=True)]


def _settled(errors: list[float], bound: float) -> int:
    """The first cycle from which every error is below `bound` (len when never)."""
    cycle = len(errors)
    while cycle > 0 and errors[cycle - 1] < bound:
        cycle -= 1
    return cycle


def _prefill_errors(
    x: tuple[float, ...], truth: tuple[float, ...], batches: tuple[float, float]
) -> list[float]:
    """Relative error of the prefill time γ + δ·I·b at each of `batches`."""
    return [abs((x[2] + x[3] * IN * b) / (truth[2] + truth[3] * IN * b) - 1) for b in batches]


_RUNS: dict[tuple[float, int, float], Run] = {}


def _cached(*, factor: float, seed: int, ramp: float, truth: tuple[float, ...]) -> Run:
    if (factor, seed, ramp) not in _RUNS:
        start = tuple(factor * v for v in truth)
        _RUNS[factor, seed, ramp] = _run(start=start, seed=seed, ramp=ramp)
    return _RUNS[factor, seed, ramp]


def test_the_effective_curves_are_what_the_simulated_replica_shows(
    curves: perf_seed.Curves, effective: tuple[float, float, float, float]
) -> None:
    # Per cycle, the ITL and TTFT the snapshot reports (before the extra noise) against the
    # curves at the batch Little's law gives for the observed rate. Cycles on a ramp are left
    # out: their 1-minute windows mix two loads.
    run = _cached(factor=1.3, seed=1, ramp=RAMP, truth=effective)
    itl_errors, ttft_errors = [], []
    for cycle, (rate, ttft, itl, _) in enumerate(run.seen, start=1):
        into = (cycle * 30.0) % DWELL
        if not 90.0 <= into <= DWELL - RAMP:
            continue
        b = _batch_at(curves, rate)
        itl_errors.append(itl * 1000 / float(np.interp(b, curves.batches, curves.itl)) - 1)
        ttft_errors.append(ttft * 1000 / float(np.interp(b, curves.batches, curves.ttft)) - 1)
    assert len(itl_errors) > 50
    # The ITL is on average 2.5-3 % above the curve at the mean batch: tokens see the batch
    # size-biased (about one request more than its time average), as the queue's effective
    # batch does, so the tuner's own figures carry the same offset.
    assert abs(float(np.mean(itl_errors))) < CURVE_MEAN[0]
    assert abs(float(np.mean(ttft_errors))) < CURVE_MEAN[1]
    assert float(np.max(np.abs(itl_errors))) < CURVE_WORST[0]
    assert float(np.max(np.abs(ttft_errors))) < CURVE_WORST[1]
    # TTFT(b) is not a line: its δ over the lower half of the visited batches is about 20 %
    # above that over the upper half, which is why δ is not identified to 5 %.
    low, high = _batch_at(curves, min(LEVELS)), _batch_at(curves, max(LEVELS))
    middle = 30.0
    lower = perf_seed.fit(curves=curves, avg_input_tokens=IN, low=low, high=middle)
    upper = perf_seed.fit(curves=curves, avg_input_tokens=IN, low=middle, high=high)
    assert lower is not None
    assert upper is not None
    assert 1.15 < lower[3] / upper[3] < 1.25
    assert lower[3] > effective[3] > upper[3]


@pytest.mark.parametrize('ramp', [RAMP, 1.0], ids=['ramped', 'abrupt'])
@pytest.mark.parametrize('seed', [1, 2, 3])
@pytest.mark.parametrize('factor', [1.3, 0.7])
def test_the_tuner_converges_on_the_simulator_and_stays_under_noise(
    curves: perf_seed.Curves,
    effective: tuple[float, float, float, float],
    factor: float,
    seed: int,
    ramp: float,
) -> None:
    run = _cached(factor=factor, seed=seed, ramp=ramp, truth=effective)
    assert len(run.records) == len(LEVELS) * DWELL / 30 - 1
    assert run.records[0].seed == pytest.approx(tuple(factor * v for v in effective))
    ends = (_batch_at(curves, min(LEVELS)), _batch_at(curves, max(LEVELS)))
    errors = np.array([_errors(r.x, effective) for r in run.records])
    prefill = np.array([_prefill_errors(r.x, effective, ends) for r in run.records])
    # The seed is 30 % off; α and β are within 5 % from CONVERGED_BY to the end.
    assert float(errors[0, :2].min()) > 0.15
    assert _settled(list(errors[:, 0]), 0.05) <= CONVERGED_BY
    assert _settled(list(errors[:, 1]), 0.05) <= CONVERGED_BY
    # No drift: over the last 50 cycles α and β are on average within 2.5 %.
    assert float(errors[-50:, :2].mean()) < 0.025
    # What γ, δ and the prefill line reach from CONVERGED_BY on.
    after = errors[CONVERGED_BY:]
    assert float(after[:, 2].max()) < SPLIT_BAND[0]
    assert float(after[:, 3].max()) < SPLIT_BAND[1]
    assert float(prefill[CONVERGED_BY:].max()) < PREFILL_BAND


def main() -> None:
    """Print the figures docs/decision-core.md quotes: per run, the cycle each parameter is
    first within 5 % and the cycle from which it stays there, the worst error from
    `CONVERGED_BY` on (and of the prefill line), the final errors, α and β's mean error over the
    last 50 cycles. `python tests/unit/analyze/learning/test_kalman_simulated.py`."""
    spec = _spec()
    limit = perf_seed.batch_limit(spec=spec, avg_input_tokens=IN, avg_output_tokens=OUT)
    shown = perf_seed.curves(spec=spec, avg_input_tokens=IN, avg_output_tokens=OUT, max_batch=limit)
    ends = (_batch_at(shown, min(LEVELS)), _batch_at(shown, max(LEVELS)))
    truth = perf_seed.fit(curves=shown, avg_input_tokens=IN, low=ends[0], high=ends[1])
    assert truth is not None
    print(f'batches {ends[0]:.1f}-{ends[1]:.1f}; effective α β γ δ', *(f'{v:.4g}' for v in truth))
    for ramp in (RAMP, 1.0):
        for factor in (1.3, 0.7):
            for seed in (1, 2, 3):
                run = _run(start=tuple(factor * v for v in truth), seed=seed, ramp=ramp)
                errors = np.array([_errors(r.x, truth) for r in run.records])
                prefill = np.array([_prefill_errors(r.x, truth, ends) for r in run.records])
                first = [int(np.argmax(errors[:, j] < 0.05)) for j in range(4)]
                stays = [_settled(list(errors[:, j]), 0.05) for j in range(4)]
                worst = [*errors[CONVERGED_BY:].max(0), prefill[CONVERGED_BY:].max()]
                print(
                    f'ramp {ramp:5.0f} s  start ×{factor}  seed {seed}:',
                    f'first within 5 % {first}, stays from {stays},',
                    f'worst from {CONVERGED_BY} (α β γ δ prefill)',
                    ' '.join(f'{v:.3f}' for v in worst) + ',',
                    'final',
                    ' '.join(f'{v:.3f}' for v in errors[-1]) + ',',
                    f'α β last 50 {errors[-50:, :2].mean():.4f}',
                )


if __name__ == '__main__':
    main()
