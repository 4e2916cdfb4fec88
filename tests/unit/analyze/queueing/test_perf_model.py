"""`analyze.queueing.perf_model`: the WVA design paper's decode and prefill times, service rates and
effective batch (the vectors are WVA's `queueanalyzer_test.go`)."""

from __future__ import annotations

import pytest

from llmscaler.analyze.queueing.perf_model import (
    PerfParams,
    decode_time,
    effective_concurrency,
    prefill_time,
    service_rates,
)

WVA = PerfParams(alpha=1.0, beta=0.01, gamma=10.0, delta=0.001)


@pytest.mark.parametrize(
    ('tokens', 'batch', 'expected'),
    [(0, 4.0, 0.0), (1000, 1.0, 11.0), (2000, 8.0, 26.0), (500, 2.5, 11.25)],
)
def test_prefill_time_matches_wva_vectors(tokens: int, batch: float, expected: float) -> None:
    got = prefill_time(params=WVA, avg_input_tokens=tokens, batch_size=batch)
    assert got == pytest.approx(expected, abs=1e-9)


@pytest.mark.parametrize(
    ('batch', 'expected'), [(1.0, 1.01), (4.0, 1.04), (8.0, 1.08), (2.5, 1.025)]
)
def test_decode_time_matches_wva_vectors(batch: float, expected: float) -> None:
    assert decode_time(params=WVA, batch_size=batch) == pytest.approx(expected, abs=1e-9)


def test_service_rates_one_prefill_and_o_minus_one_decodes() -> None:
    rates = service_rates(params=WVA, max_batch_size=3, avg_input_tokens=100, avg_output_tokens=10)
    for n, mu in enumerate(rates, start=1):
        expected = n / ((10.0 + 0.001 * 100 * n) + 9 * (1.0 + 0.01 * n))
        assert mu == pytest.approx(expected, rel=1e-12)
    # Decode only, one token: one decode step (WVA's special case).
    (single,) = service_rates(params=WVA, max_batch_size=1, avg_input_tokens=0, avg_output_tokens=1)
    assert single == pytest.approx(1 / 1.01)


@pytest.mark.parametrize('service', [20.0, 50.0, 100.0, 1e9, -5.0])
def test_effective_concurrency_stays_in_the_batch_range(service: float) -> None:
    got = effective_concurrency(
        avg_service_time=service,
        params=WVA,
        avg_input_tokens=100,
        avg_output_tokens=10,
        max_batch_size=8,
    )
    assert 0 <= got <= 8
    if 0 < got < 8:
        # It solves prefill(b) + (O-1)·ITL(b) = S.
        assert prefill_time(params=WVA, avg_input_tokens=100, batch_size=got) + 9 * decode_time(
            params=WVA, batch_size=got
        ) == pytest.approx(service)
