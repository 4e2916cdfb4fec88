"""`analyze.learning.kalman` on WVA main's three-parameter model (tuner/ at b08b1c7; defaults and
cold-start guess of main after it, read at commit 42ce1a7): a step, convergence, the fallback
when a step fails, and the seeds."""

from __future__ import annotations

import numpy as np
import pytest

from llmscaler.analyze.learning import kalman
from llmscaler.analyze.queueing.service_model import ServiceParams

TRUTH = ServiceParams(alpha=6.0, beta=0.04, gamma=0.0001)


def observe(rate: float, rng: np.random.Generator | None = None) -> kalman.TunerObservation:
    """What a replica on TRUTH shows at `rate` req/s (1000/200 tokens, N 256), with 2 % noise."""
    base = kalman.TunerObservation(
        arrival_rate=rate,
        ttft=1.0,
        itl=1.0,
        avg_input_tokens=1000.0,
        avg_output_tokens=200.0,
        max_batch_size=256,
    )
    predicted = kalman.measure(x=TRUTH.as_tuple(), obs=base)
    assert predicted is not None
    noise = (1.0, 1.0) if rng is None else tuple(1 + 0.02 * rng.standard_normal(2))
    return base._replace(ttft=predicted[0] * noise[0], itl=predicted[1] * noise[1])


def test_the_defaults_are_wva_mains() -> None:
    assert ServiceParams(5.0, 0.05, 0.00005) == kalman.DEFAULT_SERVICE_SEED
    record = kalman.seed_record(seed=kalman.DEFAULT_SERVICE_SEED, engine='e', now=0.0)
    assert len(record.p) == 9
    assert record.p[0] == pytest.approx((0.5 * 5.0) ** 2)
    assert kalman.model_params_of(record) == kalman.DEFAULT_SERVICE_SEED


def test_wva_mains_guess_from_one_observation() -> None:
    # α = 0.9·ITL = 18; β + γ = (100 − 18)/1000; γ = ((20 − 18) − 0.082) / (1000 + 100.5 − 1).
    got = kalman.wva_service_guess(
        ttft=100.0, itl=20.0, avg_input_tokens=1000, avg_output_tokens=200
    )
    assert got is not None
    gamma = (2.0 - 0.082) / 1099.5
    assert got == pytest.approx(ServiceParams(18.0, 0.082 - gamma, gamma))
    assert (
        kalman.wva_service_guess(ttft=10.0, itl=20.0, avg_input_tokens=1000, avg_output_tokens=200)
        is None
    )


def test_the_guess_at_the_observed_batch_can_serve_what_was_observed() -> None:
    # A replica running ~116 requests at 14 req/s (examples/snapshot-slo.json's): WVA's guess
    # cannot serve the rate, the batch-aware guess can.
    obs = kalman.TunerObservation(14.0, 395.0, 33.0, 1000.0, 250.0, 256)
    wva = kalman.wva_service_guess(
        ttft=395.0, itl=33.0, avg_input_tokens=1000, avg_output_tokens=250
    )
    ours = kalman.guess_service_seed(
        ttft=395.0, itl=33.0, avg_input_tokens=1000, avg_output_tokens=250, batch=116.0
    )
    assert wva is not None
    assert ours is not None
    assert kalman.measure(x=wva.as_tuple(), obs=obs) is None
    assert kalman.measure(x=ours.as_tuple(), obs=obs) is not None


@pytest.mark.parametrize('seed', [0, 1])
def test_a_seed_30_percent_off_converges(seed: int) -> None:
    rng = np.random.default_rng(seed)
    start = ServiceParams(*(1.3 * v for v in TRUTH.as_tuple()))
    record = kalman.seed_record(seed=start, engine='e', now=0.0)
    errors = []
    for cycle in range(80):
        rate = 2.0 + 6.0 * (1 + np.sin(cycle / 5)) / 2
        record = kalman.step(record=record, obs=observe(rate, rng), now=float(cycle)).record
        errors.append(max(abs(x / t - 1) for x, t in zip(record.x, TRUTH.as_tuple(), strict=True)))
    assert errors[0] > 0.2
    assert max(errors[-20:]) < 0.1


def test_a_failed_step_keeps_the_previous_state() -> None:
    record = kalman.seed_record(seed=TRUTH, engine='e', now=0.0)
    wild = observe(4.0)._replace(ttft=50_000.0)  # far outside the innovation gate
    result = kalman.step(record=record, obs=wild, now=1.0)
    assert not result.accepted
    assert (result.record.x, result.record.p) == (record.x, record.p)
    assert result.record.rejected == 1
