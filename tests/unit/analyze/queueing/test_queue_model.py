"""`analyze.queueing.queue_model`: performance-model times, the state-dependent queue and its
validity.

The chain is checked against an independent oracle: WVA's own product loop (p_{n+1} = p_n·λ/μ_n,
then normalised) written out in plain Python, and the plain M/M/1/K model against its closed
form. The vectors of the performance-model times are WVA's (`queueanalyzer_test.go`).
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmscaler.analyze.queueing import queue_chain
from llmscaler.analyze.queueing.perf_model import PerfParams, service_rates
from llmscaler.analyze.queueing.queue_model import (
    QueueAnalyzer,
    QueueError,
    mm1k_valid,
    solve_mm1k,
    state_dependent_valid,
)

WVA = PerfParams(alpha=1.0, beta=0.01, gamma=10.0, delta=0.001)
"""WVA's test configuration (max batch 8, max queue 16)."""


def build(
    params: PerfParams = WVA, *, n: int = 8, q: int = 16, i: float = 100, o: float = 10
) -> QueueAnalyzer:
    built = QueueAnalyzer.build(
        params=params, max_batch_size=n, max_queue_size=q, avg_input_tokens=i, avg_output_tokens=o
    )
    assert not isinstance(built, QueueError), built
    return built


@pytest.mark.parametrize(
    ('i', 'o', 'ok'),
    [
        (0, 10, True),
        (0, 1, True),
        (100, 1, True),
        (200, 20, True),
        (0, 0, False),
        (-1, -1, False),
        (50, 0, False),
    ],
)
def test_request_size_checks_as_wva(i: float, o: float, ok: bool) -> None:
    built = QueueAnalyzer.build(
        params=WVA, max_batch_size=8, max_queue_size=16, avg_input_tokens=i, avg_output_tokens=o
    )
    assert isinstance(built, QueueError) is not ok


@pytest.mark.parametrize(('n', 'q'), [(0, 16), (-1, 16), (8, -1)])
def test_bad_configuration_is_an_error_value(n: int, q: int) -> None:
    built = QueueAnalyzer.build(
        params=WVA, max_batch_size=n, max_queue_size=q, avg_input_tokens=100, avg_output_tokens=10
    )
    assert isinstance(built, QueueError)


def test_rate_range_is_epsilon_inside_the_service_rates() -> None:
    qa = build()
    rates = service_rates(params=WVA, max_batch_size=8, avg_input_tokens=100, avg_output_tokens=10)
    assert qa.rate_range.min == pytest.approx(rates[0] * 0.001 * 1000)
    assert qa.rate_range.max == pytest.approx(rates[-1] * 0.999 * 1000)


def _oracle(lam: float, rates: list[float], k: int) -> list[float]:
    """WVA's loop: p_{n+1} = p_n·λ/μ_n (μ_N beyond N), normalised."""
    p = [1.0]
    for n in range(k):
        mu = rates[min(n, len(rates) - 1)]
        p.append(p[-1] * lam / mu)
    total = math.fsum(p)
    return [v / total for v in p]


@settings(max_examples=150, deadline=None)
@given(
    # Beyond 1: arrivals faster than the fullest batch serves (the queue fills; K is finite).
    load=st.one_of(st.floats(0.0005, 0.999), st.floats(0.999, 4.0)),
    n=st.integers(1, 16),
    q=st.integers(0, 300),
    i=st.integers(0, 3000),
    o=st.integers(1, 500),
)
def test_chain_statistics_match_the_product_form(
    load: float, n: int, q: int, i: int, o: int
) -> None:
    qa = build(n=n, q=q, i=i, o=o)
    lam = load * qa.rate_range.max / 1000
    stats = qa.solve(lam=lam)
    assert not isinstance(stats, QueueError)
    rates = list(
        service_rates(params=WVA, max_batch_size=n, avg_input_tokens=i, avg_output_tokens=o)
    )
    p = _oracle(lam, rates, n + q)
    in_system = math.fsum(j * v for j, v in enumerate(p))
    in_servers = math.fsum(j * v for j, v in enumerate(p[: n + 1])) + n * (
        1 - math.fsum(p[: n + 1])
    )
    x = lam * (1 - p[-1])
    assert stats.throughput == pytest.approx(x, rel=1e-9)
    assert stats.avg_num_in_system == pytest.approx(in_system, rel=1e-9, abs=1e-12)
    assert stats.avg_num_in_servers == pytest.approx(in_servers, rel=1e-9, abs=1e-12)
    assert stats.avg_wait_time == pytest.approx(max(0.0, (in_system - in_servers) / x), abs=1e-6)
    assert stats.rho == pytest.approx(1 - p[0], abs=1e-12)


def test_chain_does_not_overflow_where_a_plain_product_would() -> None:
    # μ tiny, K large: λ/μ products reach 1e300+; the log form normalises without overflow.
    qa = build(PerfParams(alpha=500.0, beta=5.0, gamma=2000.0, delta=0.5), n=512, q=5000, o=400)
    stats = qa.solve(lam=qa.rate_range.max / 1000)
    assert not isinstance(stats, QueueError)
    assert math.isfinite(stats.avg_wait_time)
    assert stats.avg_wait_time > 0


@pytest.mark.parametrize(
    ('rate_factor', 'ok'),
    [(0.0, False), (-1.0, False), (0.5e-3, True), (0.5, True), (0.9, True), (1.1, False)],
)
def test_analyze_accepts_rates_up_to_the_maximum(rate_factor: float, ok: bool) -> None:
    qa = build()
    metrics = qa.analyze(request_rate=rate_factor * qa.rate_range.max)
    assert isinstance(metrics, QueueError) is not ok
    if not isinstance(metrics, QueueError):
        assert 0 <= metrics.rho <= 1
        assert metrics.avg_prefill_time >= 0
        assert metrics.avg_token_time >= 0
        assert metrics.ttft == metrics.avg_wait_time + metrics.avg_prefill_time


def test_latency_grows_with_load() -> None:
    qa = build(n=64, q=100, i=500, o=100)
    figures = [qa.analyze(request_rate=f * qa.rate_range.max) for f in (0.1, 0.5, 0.9)]
    assert all(not isinstance(m, QueueError) for m in figures)
    ttfts = [m.ttft for m in figures if not isinstance(m, QueueError)]
    itls = [m.itl for m in figures if not isinstance(m, QueueError)]
    assert ttfts == sorted(ttfts)
    assert itls == sorted(itls)
    assert itls[0] < itls[-1]


@pytest.mark.parametrize(
    ('lam', 'mu', 'k', 'ok'),
    [
        (0.5, 1.0, 10, True),
        (1.0, 1.0, 10, True),
        (0.0, 1.0, 1, True),
        (-0.1, 1.0, 10, False),
        (1.0, 0.0, 10, False),
        (10.0, 1.0, 10, False),
        (9.9, 1.0, 10, True),
        (2.0, 1.0, 1, False),
    ],
)
def test_mm1k_validity(lam: float, mu: float, k: int, ok: bool) -> None:
    assert mm1k_valid(lam=lam, mu=mu, k=k) is ok
    assert isinstance(solve_mm1k(lam=lam, mu=mu, k=k), QueueError) is not ok


def test_state_dependent_validity() -> None:
    assert state_dependent_valid(lam=0.0, k=1)
    assert state_dependent_valid(lam=5.0, k=10)
    assert not state_dependent_valid(lam=-1e-9, k=10)
    assert not state_dependent_valid(lam=math.nan, k=10)
    assert isinstance(build().solve(lam=-1.0), QueueError)


@pytest.mark.parametrize('rho', [0.3, 1.0, 1.7])
def test_mm1k_matches_its_closed_form(rho: float) -> None:
    k = 12
    stats = solve_mm1k(lam=rho, mu=1.0, k=k)
    assert not isinstance(stats, QueueError)
    if rho == 1.0:
        p = [1 / (k + 1)] * (k + 1)
    else:
        p0 = (1 - rho) / (1 - rho ** (k + 1))
        p = [p0 * rho**j for j in range(k + 1)]
    assert stats.avg_num_in_system == pytest.approx(sum(j * v for j, v in enumerate(p)))
    assert stats.throughput == pytest.approx(rho * (1 - p[-1]))


def _log_oracle(lam: float, rates: list[float], k: int) -> list[float]:
    """The same chain summed state by state in log space (no overflow at any batch size)."""
    log_p = [0.0]
    for n in range(k):
        log_p.append(log_p[-1] + math.log(lam) - math.log(rates[min(n, len(rates) - 1)]))
    top = max(log_p)
    p = [math.exp(v - top) for v in log_p]
    total = math.fsum(p)
    return [v / total for v in p]


@settings(max_examples=200, deadline=None)
@given(
    params=st.builds(
        PerfParams,
        alpha=st.floats(0.5, 50.0),
        beta=st.one_of(st.just(0.0), st.floats(1e-4, 2.0)),
        gamma=st.floats(0.5, 500.0),
        delta=st.one_of(st.just(0.0), st.floats(1e-6, 0.05)),
    ),
    load=st.one_of(st.floats(1e-4, 1.0), st.floats(1.0, 3.0)),
    n=st.integers(1, 700),
    q=st.integers(0, 400),
    i=st.integers(0, 4000),
    o=st.integers(1, 800),
)
def test_fast_walk_equals_the_state_by_state_chain(
    params: PerfParams, load: float, n: int, q: int, i: int, o: int
) -> None:
    # The solver multiplies whole stretches of states at a time from a mode found in closed
    # form, and never tabulates μ; against the plain chain at any batch size and parameters.
    built = QueueAnalyzer.build(
        params=params, max_batch_size=n, max_queue_size=q, avg_input_tokens=i, avg_output_tokens=o
    )
    assert not isinstance(built, QueueError)
    lam = load * built.rate_range.max / 1000 / 0.999
    stats = built.solve(lam=lam)
    assert not isinstance(stats, QueueError)
    rates = list(
        service_rates(params=params, max_batch_size=n, avg_input_tokens=i, avg_output_tokens=o)
    )
    assert built.mu == pytest.approx(tuple(rates), rel=1e-12)
    p = _log_oracle(lam, rates, n + q)
    in_system = math.fsum(j * v for j, v in enumerate(p))
    in_servers = math.fsum(j * v for j, v in enumerate(p[: n + 1])) + n * (
        1 - math.fsum(p[: n + 1])
    )
    assert stats.throughput == pytest.approx(lam * (1 - p[-1]), rel=1e-9)
    assert stats.avg_num_in_system == pytest.approx(in_system, rel=1e-8, abs=1e-12)
    assert stats.avg_num_in_servers == pytest.approx(in_servers, rel=1e-8, abs=1e-12)
    assert stats.rho == pytest.approx(1 - p[0], abs=1e-12)


@pytest.mark.parametrize(
    ('n', 'load', 'path'),
    [
        (256, 0.4, 'closed'),
        (200, 0.85, 'sums'),
        (256, 0.88, 'sums'),
        (256, 0.95, 'sums'),
        (16, 0.99, 'sums'),
        (256, 1.05, 'walk'),
    ],
)
def test_closed_form_and_its_truncation_equal_the_chain(n: int, load: float, path: str) -> None:
    # A replica that seldom fills its batch is the negative binomial's closed form; one that
    # fills it now and then is that form less the states beyond N plus the queue; above the
    # top rate (λ > μ_N) the chain is walked. Each against WVA's product loop.
    params = PerfParams(alpha=15.0, beta=0.57, gamma=71.0, delta=0.0033)
    qa = build(params, n=n, q=100, i=820, o=200)
    lam = load * qa.rate_range.max / 1000
    closed = queue_chain.closed(base=qa.base, slope=qa.slope, nb=n, k=qa.k, lam=lam)
    taken = (
        'walk'
        if closed is None
        else 'closed'
        if isinstance(closed, queue_chain.Unqueued)
        else 'sums'
    )
    assert taken == path
    stats = qa.solve(lam=lam)
    assert not isinstance(stats, QueueError)
    rates = list(
        service_rates(params=params, max_batch_size=n, avg_input_tokens=820, avg_output_tokens=200)
    )
    p = _log_oracle(lam, rates, n + 100)
    in_system = math.fsum(j * v for j, v in enumerate(p))
    in_servers = math.fsum(j * v for j, v in enumerate(p[: n + 1])) + n * (
        1 - math.fsum(p[: n + 1])
    )
    assert stats.throughput == pytest.approx(lam * (1 - p[-1]), rel=1e-12)
    assert stats.avg_num_in_system == pytest.approx(in_system, rel=1e-11)
    assert stats.avg_num_in_servers == pytest.approx(in_servers, rel=1e-11)
    assert stats.avg_wait_time == pytest.approx(
        (in_system - in_servers) / (lam * (1 - p[-1])), rel=1e-6, abs=1e-9
    )
    assert stats.rho == pytest.approx(1 - p[0], abs=1e-12)


def _statistics(sums: queue_chain.Sums, lam: float, n: int) -> tuple[float, float, float]:
    p0, pk, total, first, total_n, first_n = sums
    del p0
    return first / total, first_n / total + n * (1 - total_n / total), lam * (1 - pk / total)


@settings(max_examples=300, deadline=None)
@given(
    params=st.builds(
        PerfParams,
        alpha=st.floats(0.5, 50.0),
        beta=st.one_of(st.floats(1e-6, 1e-3), st.floats(1e-3, 2.0)),
        gamma=st.floats(0.5, 500.0),
        delta=st.one_of(st.just(0.0), st.floats(1e-6, 0.05)),
    ),
    load=st.floats(0.3, 0.99),
    n=st.integers(1, 700),
    q=st.sampled_from([0, 1, 10, 100, 400]),
    i=st.integers(0, 4000),
    o=st.integers(2, 800),
)
def test_closed_sums_equal_the_walk(
    params: PerfParams, load: float, n: int, q: int, i: int, o: int
) -> None:
    # Where the batch fills now and then, `closed` takes the batch states' sums from the
    # incomplete beta functions' continued fractions and p_N from Stirling's series (shapes
    # up to 1e6 with a decode slope near 0): the walk's statistics to 1e-12.
    qa = build(params, n=n, q=q, i=i, o=o)
    lam = load * qa.rate_range.max / 1000
    sums = queue_chain.closed(base=qa.base, slope=qa.slope, nb=n, k=qa.k, lam=lam)
    if sums is None or isinstance(sums, queue_chain.Unqueued):
        return
    walked = queue_chain.walk(base=qa.base, slope=qa.slope, nb=n, k=qa.k, lam=lam)
    for got, want in zip(_statistics(sums, lam, n), _statistics(walked, lam, n), strict=True):
        assert got == pytest.approx(want, rel=1e-12)
