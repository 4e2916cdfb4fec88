"""`analyze.learning.kalman`: the EKF tuner learns the simulator replica's effective α, β, γ, δ.

The replica is the simulator's roofline step model (`sim.hardware.stepmodel`, preset
llama-3.1-8b-a100). Its observed TTFT and ITL at a load come from the same state-dependent
queue the analyzer uses, but with the *roofline's* step times in it, not a linear model:
service rate μ_n = n / (prefill_roofline(n) + (O − 1)·decode_roofline(n)), the effective
batch b̄ where prefill + (O − 1)·decode = the mean service time, TTFT = wait + prefill(b̄),
ITL = decode(b̄). A decode step at batch b is the roofline step of b decoding sequences at the
mix's mean context; a request's prefill at batch b is the step of its I prompt tokens beside
b − 1 decoding sequences (chunked prefill). The *effective values* are the least-squares
lines through those step times over the batch range the run visits, and the filter starts 30 %
off them.
"""

from __future__ import annotations

import math
from dataclasses import MISSING, fields, replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmscaler.analyze.learning import kalman
from llmscaler.analyze.queueing.perf_model import PerfParams
from llmscaler.analyze.slo import analyzer
from llmscaler.config.resolved import FOUR_PARAMETER, QueueingModelConfig
from llmscaler.domain.snapshot import EngineParams, ReplicaMetrics, Variant
from llmscaler.domain.state import KalmanRecord
from llmscaler.sim.hardware import presets

IN, OUT, N = 600.0, 150.0, 256
CONVERGED_BY = 20
"""Cycles after which every parameter stays within 5 % (stated in docs/decision-core.md)."""
CYCLES = 80


class Replica:
    """The roofline replica at a load: (TTFT ms, ITL ms, mean batch)."""

    def __init__(self) -> None:
        perf = presets.preset(name='llama-3.1-8b-a100').perf
        batches = np.arange(1, N + 1)
        self.batches = batches
        self.decode = np.array(
            [
                1000
                * perf.step_seconds(
                    decode_seqs=int(b), prefill_tokens=0, context_tokens=round(b * (IN + OUT / 2))
                )
                for b in batches
            ]
        )
        self.prefill = np.array(
            [
                1000
                * perf.step_seconds(
                    decode_seqs=int(b) - 1,
                    prefill_tokens=int(IN),
                    context_tokens=round((b - 1) * (IN + OUT / 2)),
                )
                for b in batches
            ]
        )
        self.service = self.prefill + (OUT - 1) * self.decode
        mu = batches / self.service
        k = N + kalman.QUEUE_FACTOR * N
        per_state = np.concatenate([mu, np.full(k - N, mu[-1])])
        self.log_mu = np.concatenate(([0.0], np.cumsum(np.log(per_state))))
        self.states = np.arange(k + 1.0)
        self.max_rate = float(mu[-1]) * 1000 * 0.999

    def observe(self, rate: float) -> tuple[float, float, float]:
        lam = rate / 1000
        log_p = self.states * math.log(lam) - self.log_mu
        p = np.exp(log_p - log_p.max())
        p /= p.sum()
        weighted = self.states * p
        in_servers = weighted[: N + 1].sum() + N * (1 - p[: N + 1].sum())
        x = lam * (1 - p[-1])
        serv = in_servers / x
        wait = max(0.0, weighted.sum() / x - serv)
        b = float(np.interp(serv, self.service, self.batches))
        return (
            wait + float(np.interp(b, self.batches, self.prefill)),
            float(np.interp(b, self.batches, self.decode)),
            b,
        )

    def effective(self, low: float, high: float) -> PerfParams:
        """Least-squares α, β, γ, δ of the roofline's step times over batches [low, high]."""
        b = np.arange(max(1, math.floor(low)), math.ceil(high) + 1)
        ones = np.ones(len(b))
        (alpha, beta), *_ = np.linalg.lstsq(np.stack([ones, b], 1), self.decode[b - 1], rcond=None)
        (gamma, delta), *_ = np.linalg.lstsq(
            np.stack([ones, IN * b], 1), self.prefill[b - 1], rcond=None
        )
        return PerfParams(float(alpha), float(beta), float(gamma), float(delta))


@pytest.fixture(scope='module')
def replica() -> Replica:
    return Replica()


def varying_rates(replica: Replica) -> list[float]:
    """A daily-like swing between 15 % and 80 % of the replica's maximum rate."""
    return [replica.max_rate * (0.15 + 0.65 * (0.5 + 0.5 * math.sin(c / 3))) for c in range(CYCLES)]


def errors(x: tuple[float, ...], truth: PerfParams) -> list[float]:
    return [abs(a / b - 1) for a, b in zip(x, truth.as_tuple(), strict=True)]


def obs(rate: float, ttft: float, itl: float) -> kalman.TunerObservation:
    return kalman.TunerObservation(
        arrival_rate=rate,
        ttft=ttft,
        itl=itl,
        avg_input_tokens=IN,
        avg_output_tokens=OUT,
        max_batch_size=N,
    )


@pytest.mark.parametrize('seed', [1, 2, 3])
def test_converges_from_30_percent_off_and_stays_under_noise(replica: Replica, seed: int) -> None:
    rates = varying_rates(replica)
    seen = [replica.observe(r) for r in rates]
    truth = replica.effective(min(s[2] for s in seen), max(s[2] for s in seen))
    start = PerfParams(*(1.3 * v for v in truth.as_tuple()))
    record = kalman.seed_record(seed=start, engine='e', now=0.0)
    rng = np.random.default_rng(seed)
    worst_after = 0.0
    for cycle, (rate, (ttft, itl, _)) in enumerate(zip(rates, seen, strict=True)):
        noisy = obs(
            rate,
            ttft * (1 + 0.02 * rng.standard_normal()),
            itl * (1 + 0.02 * rng.standard_normal()),
        )
        record = kalman.step(record=record, obs=noisy, now=float(cycle)).record
        if cycle >= CONVERGED_BY:
            worst_after = max(worst_after, *errors(record.x, truth))
    assert worst_after < 0.05


def test_without_the_widened_prior_a_30_percent_seed_never_learns(replica: Replica) -> None:
    # WVA's prior, P0 = (5 %·x)², and no widening: the first innovations fail the gate.
    rates = varying_rates(replica)[:20]
    truth = replica.effective(10, 130)
    start = PerfParams(*(1.3 * v for v in truth.as_tuple()))
    record = kalman.seed_record(seed=start, engine='e', now=0.0)
    narrow = np.diag([(0.05 * v) ** 2 for v in start.as_tuple()]).reshape(-1)
    record = replace(record, p=tuple(float(v) for v in narrow))
    first = kalman.step(record=record, obs=obs(rates[0], *replica.observe(rates[0])[:2]), now=0.0)
    assert not first.accepted
    assert 'NIS' in first.reason
    assert first.record.x == record.x


def test_an_outlier_is_gated_and_the_state_kept(replica: Replica) -> None:
    truth = replica.effective(10, 130)
    record = kalman.seed_record(seed=truth, engine='e', now=0.0)
    rate = replica.max_rate * 0.5
    ttft, itl, _ = replica.observe(rate)
    good = kalman.step(record=record, obs=obs(rate, ttft, itl), now=1.0)
    assert good.accepted
    bad = kalman.step(record=good.record, obs=obs(rate, ttft * 5, itl * 5), now=2.0)
    assert not bad.accepted
    assert bad.record.x == good.record.x
    assert bad.record.rejected == 1


def test_repeated_rejections_widen_the_prior_so_a_real_change_is_learnt(replica: Replica) -> None:
    truth = replica.effective(10, 130)
    record = kalman.seed_record(seed=truth, engine='e', now=0.0)
    tight = np.diag([(0.001 * v) ** 2 for v in truth.as_tuple()]).reshape(-1)
    record = replace(record, p=tuple(float(v) for v in tight))
    rate = replica.max_rate * 0.4
    ttft, itl, _ = replica.observe(rate)
    accepted = []
    for cycle in range(8):
        # The hardware got 40 % slower.
        step = kalman.step(record=record, obs=obs(rate, ttft * 1.4, itl * 1.4), now=float(cycle))
        record = step.record
        accepted.append(step.accepted)
    assert accepted[:3] == [False, False, False]
    assert any(accepted[3:])


@pytest.mark.parametrize(
    'bad',
    [
        {'arrival_rate': 0.0},
        {'ttft': math.nan},
        {'itl': -1.0},
        {'avg_output_tokens': 0.5},
        {'arrival_rate': 1e9},
    ],
)
def test_unusable_observations_leave_the_state(replica: Replica, bad: dict[str, float]) -> None:
    record = kalman.seed_record(seed=replica.effective(10, 130), engine='e', now=0.0)
    step = kalman.step(record=record, obs=obs(5.0, 100.0, 20.0)._replace(**bad), now=1.0)  # type: ignore[arg-type]
    assert not step.accepted
    assert step.record.x == record.x


def test_parameters_stay_within_the_bounds_of_their_seed() -> None:
    seed = PerfParams(alpha=10.0, beta=0.1, gamma=50.0, delta=0.002)
    record = kalman.seed_record(seed=seed, engine='e', now=0.0)
    for cycle in range(30):
        record = kalman.step(record=record, obs=obs(5.0, 5000.0, 900.0), now=float(cycle)).record
    for value, origin in zip(record.x, seed.as_tuple(), strict=True):
        assert origin / 100 <= value <= origin * 100


def test_guess_seed_is_positive_or_none() -> None:
    guess = kalman.guess_seed(ttft=400.0, itl=34.0, avg_input_tokens=1000.0, batch=116.0)
    assert guess is not None
    # Without a queue, the guess reproduces the observation at the observed batch.
    assert guess.gamma + guess.delta * 1000.0 * 116.0 == pytest.approx(400.0)
    assert guess.alpha + guess.beta * 116.0 == pytest.approx(34.0)
    unknown = kalman.guess_seed(ttft=400.0, itl=34.0, avg_input_tokens=1000.0, batch=None)
    assert unknown is not None
    assert unknown.alpha + unknown.beta == pytest.approx(34.0)
    assert kalman.guess_seed(ttft=0.0, itl=15.0, avg_input_tokens=600.0, batch=1.0) is None
    assert kalman.guess_seed(ttft=120.0, itl=15.0, avg_input_tokens=0.0, batch=1.0) is None


def _through_the_analyzer(
    replica: Replica,
    *,
    config: QueueingModelConfig,
    records: dict[str, KalmanRecord],
    rate: float,
    ttft: float,
    itl: float,
    cycle: int,
) -> dict[str, KalmanRecord]:
    """One cycle of the SLO analyzer on one A100 replica reporting (rate, TTFT ms, ITL ms)."""
    variant = Variant(
        name='v',
        namespace='ns',
        model_id='m',
        accelerator='A100',
        current_replicas=1,
        ready_replicas=1,
        min_replicas=1,
        max_replicas=8,
        engine=EngineParams(max_num_seqs=N),
    )
    metrics = ReplicaMetrics(
        pod='v-0',
        variant='v',
        namespace='ns',
        observed_at=float(cycle),
        kv_usage=0.5,
        queue_length=0.0,
        num_gpu_blocks=100_000,
        block_size=16,
        arrival_rate=rate,
        avg_input_tokens=IN,
        avg_output_tokens=OUT,
        avg_ttft=ttft / 1000,
        avg_itl=itl / 1000,
    )
    analysis = analyzer.analyze(
        variants=(variant,),
        replicas=(metrics,),
        pool=None,
        config=config,
        records=records,
        now=float(cycle),
        interval=30.0,
    )
    return dict(analysis.kalman_updates)


CONFIGURED_CONVERGED_BY = 20
"""Cycles after which a configured seed 30 % off is within 5 % (docs/decision-core.md)."""


@pytest.mark.parametrize('seed', [1, 2])
def test_a_configured_seed_30_percent_off_converges_and_a_restart_starts_there(
    replica: Replica, seed: int
) -> None:
    # The seed comes from the configuration (`perfParms` of the variant's accelerator), through
    # the SLO analyzer as the controller and the simulator run it; the observations are noisy.
    rates = varying_rates(replica)
    seen = [replica.observe(r) for r in rates]
    truth = replica.effective(min(s[2] for s in seen), max(s[2] for s in seen))
    configured = tuple(1.3 * v for v in truth.as_tuple())
    config = QueueingModelConfig(
        target_ttft=2000.0,
        target_itl=60.0,
        perf_parms=(('A100', configured),),
        performance_model=FOUR_PARAMETER,
    )
    rng = np.random.default_rng(seed)
    records: dict[str, KalmanRecord] = {}
    worst_after = 0.0
    for cycle, (rate, (ttft, itl, _)) in enumerate(zip(rates, seen, strict=True)):
        noise = rng.standard_normal(2)
        records = _through_the_analyzer(
            replica,
            config=config,
            records=records,
            rate=rate,
            ttft=ttft * (1 + 0.02 * noise[0]),
            itl=itl * (1 + 0.02 * noise[1]),
            cycle=cycle,
        )
        (record,) = records.values()
        assert record.seed == pytest.approx(configured, rel=1e-12)
        if cycle >= CONFIGURED_CONVERGED_BY:
            worst_after = max(worst_after, *errors(record.x, truth))
    assert worst_after < 0.05
    # A restart (no records) starts again from the configured values, not from what was learnt:
    # an idle replica takes no step, so its record is the configured seed itself.
    restarted = _through_the_analyzer(
        replica, config=config, records={}, rate=0.0, ttft=50.0, itl=10.0, cycle=CYCLES
    )
    (fresh,) = restarted.values()
    assert fresh.x == pytest.approx(configured, rel=1e-12)
    # Changed configured values restart a running tuner from them.
    moved = replace(config, perf_parms=(('A100', truth.as_tuple()),))
    again = _through_the_analyzer(
        replica, config=moved, records=records, rate=0.0, ttft=50.0, itl=10.0, cycle=CYCLES
    )
    assert next(iter(again.values())).x == pytest.approx(truth.as_tuple(), rel=1e-12)


@settings(max_examples=60, deadline=None)
@given(
    x=st.tuples(
        st.floats(2.0, 40.0), st.floats(0.005, 0.5), st.floats(5.0, 300.0), st.floats(1e-5, 1e-3)
    ),
    load=st.floats(0.05, 0.9),
    tokens=st.floats(50.0, 3000.0),
    out=st.floats(2.0, 600.0),
    n=st.integers(8, 256),
)
def test_the_chain_rule_jacobian_matches_differencing_each_parameter(
    x: tuple[float, float, float, float], load: float, tokens: float, out: float, n: int
) -> None:
    # Four queue solutions (wait and service time in base and slope, then the chain rule)
    # against WVA's eight (each of α, β, γ, δ differenced): the same derivatives, to the
    # accuracy of a 1 % central difference.
    probe = kalman.TunerObservation(
        arrival_rate=1.0, ttft=1.0, itl=1.0, avg_input_tokens=tokens, avg_output_tokens=out,
        max_batch_size=n,
    )  # fmt: skip
    top = n / (x[2] + (out - 1) * x[0] + (x[3] * tokens + (out - 1) * x[1]) * n) * 1000
    obs = probe._replace(arrival_rate=load * top)
    predicted = kalman.measure(x=x, obs=obs)
    assert predicted is not None
    fast = kalman._jacobian(x=x, obs=obs, predicted=predicted)
    plain = kalman._jacobian_plain(x=x, obs=obs)
    assert fast is not None
    assert plain is not None
    for row in range(2):
        # Compare each parameter's effect on the figure (derivative × parameter), against
        # the figure itself.
        for j in range(4):
            assert fast[row][j] * x[j] == pytest.approx(
                plain[row][j] * x[j], rel=0.02, abs=1e-3 * predicted[row]
            )


def test_records_built_whole_carry_every_other_field_over(replica: Replica) -> None:
    """`with_engine` and an accepted `step` build the KalmanRecord whole (every field named):
    a field they forget would be reset to its default."""
    truth = replica.effective(10, 130)
    seeded = kalman.seed_record(seed=truth, engine='e', now=0.0)
    before = KalmanRecord(
        x=seeded.x, p=seeded.p, seed=seeded.seed, engine='e', nis=2.5, rejected=1,
        updated_at=50.0,
    )  # fmt: skip
    # Every field differs from its default, so that a dropped one shows.
    assert all(
        getattr(before, f.name) != f.default
        for f in fields(KalmanRecord)
        if f.default is not MISSING
    )
    moved = kalman.with_engine(before, engine='other')
    assert moved.engine == 'other'
    for f in fields(KalmanRecord):
        if f.name != 'engine':
            assert getattr(moved, f.name) == getattr(before, f.name), f.name
    rate = replica.max_rate * 0.5
    ttft, itl, _ = replica.observe(rate)
    stepped = kalman.step(record=before, obs=obs(rate, ttft, itl), now=80.0)
    assert stepped.accepted
    changed = {'x', 'p', 'nis', 'rejected', 'updated_at'}
    for f in fields(KalmanRecord):
        if f.name not in changed:
            assert getattr(stepped.record, f.name) == getattr(before, f.name), f.name
    assert (stepped.record.rejected, stepped.record.updated_at) == (0, 80.0)
