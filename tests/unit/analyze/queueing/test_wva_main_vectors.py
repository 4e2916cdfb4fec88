"""WVA main's unit-test vectors of its queue analyzer, replayed on the three-parameter model.

Upstream: llm-d workload-variant-autoscaler, commit b08b1c7 (main), pkg/analyzer/
queueanalyzer_test.go, queuemodel_test.go and utils_test.go (the queue analyzer's tests since
aff15ca, "enhance queueing model used by queue analyzer (#727)"). The numbers and expectations
are WVA's; the checks are written against our functions. Not replayed, as they test Go
internals with no counterpart here: the `String()` methods (TestStringMethods,
TestQueueModel_String, TestMM1ModelStateDependent_String), the stored K and rate slices of
TestMM1KModel_Creation and TestMM1ModelStateDependent_Creation, the "nil service parameters"
case of TestConfiguration_Check (a typed argument cannot be nil) and
TestMM1ModelStateDependent_UtilizationCalculation (ρ is 1 − p_0 by construction here). The
state-dependent models of queuemodel_test.go and utils_test.go with service rates μ_n = n, or
constant, are our queue with a service time base + slope·n (μ_n = n: base 1, slope 0;
μ constant c: base 0, slope 1/c).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest

from llmscaler.analyze.queueing.queue_model import (
    QueueAnalyzer,
    QueueError,
    QueueStats,
    RateRange,
    mm1k_valid,
    solve_mm1k,
)
from llmscaler.analyze.queueing.search import (
    SearchError,
    TargetPerf,
    binary_search,
    size,
    within_tolerance,
)
from llmscaler.analyze.queueing.service_model import (
    ServiceParams,
    decode_time,
    prefill_time,
)

TEST_PARMS = ServiceParams(alpha=1.0, beta=0.01, gamma=0.001)
"""queueanalyzer_test.go `testConfig`: max batch 8, max queue 16."""


def built(
    *, i: float = 100, o: float = 10, n: int = 8, q: int = 16, parms: ServiceParams = TEST_PARMS
) -> QueueAnalyzer | QueueError:
    return QueueAnalyzer.build(
        params=parms, max_batch_size=n, max_queue_size=q, avg_input_tokens=i, avg_output_tokens=o
    )


def analyzer(*, n: int = 8, q: int = 16, parms: ServiceParams = TEST_PARMS) -> QueueAnalyzer:
    made = built(n=n, q=q, parms=parms)
    assert isinstance(made, QueueAnalyzer)
    return made


# --- queueanalyzer_test.go -------------------------------------------------------------------


@pytest.mark.parametrize(
    ('i', 'o', 'error'),
    [
        (0, 10, False),  # no prefill
        (0, 1, False),  # no prefill, one output token
        (100, 1, False),  # no decode
        (200, 20, False),  # mixed prefill and decode
        (0, 0, True),  # zero input and output tokens
        (-1, -1, True),  # negative tokens
        (50, 0, True),  # no decode, no first output token
    ],
)
def test_new_queue_analyzer(i: float, o: float, error: bool) -> None:
    assert isinstance(built(i=i, o=o), QueueError) is error


@pytest.mark.parametrize(
    ('n', 'q', 'error'), [(8, 16, False), (0, 16, True), (-1, 16, True), (8, -1, True)]
)
def test_configuration_check(n: int, q: int, error: bool) -> None:
    assert isinstance(built(n=n, q=q), QueueError) is error


@pytest.mark.parametrize(
    ('i', 'o', 'error'),
    [
        (100, 10, False),
        (0, 10, False),
        (100, 1, False),
        (-1, 10, True),
        (100, 0, True),
        (100, -1, True),
    ],
)
def test_request_size_check(i: float, o: float, error: bool) -> None:
    assert isinstance(built(i=i, o=o), QueueError) is error


@pytest.mark.parametrize(
    ('tokens', 'batch', 'expected'),
    [(0, 4.0, 0.0), (1000, 1.0, 32.0), (2000, 8.0, 208.0), (500, 2.5, 29.25)],
)
def test_prefill_time(tokens: int, batch: float, expected: float) -> None:
    parms = ServiceParams(alpha=10.0, beta=0.01, gamma=0.001)
    got = prefill_time(params=parms, avg_input_tokens=tokens, avg_output_tokens=0, batch_size=batch)
    assert abs(got - expected) <= 1e-6


@pytest.mark.parametrize(
    ('batch', 'expected'), [(1.0, 1.23), (4.0, 1.575), (8.0, 2.035), (2.5, 1.4025)]
)
def test_decode_time(batch: float, expected: float) -> None:
    parms = ServiceParams(alpha=1.0, beta=0.1, gamma=0.01)
    got = decode_time(params=parms, avg_input_tokens=1, avg_output_tokens=1, batch_size=batch)
    assert abs(got - expected) <= 1e-6


def test_build_model() -> None:
    qa = analyzer()
    assert (qa.max_batch_size, qa.max_queue_size, qa.params) == (8, 16, TEST_PARMS)
    assert (qa.avg_input_tokens, qa.avg_output_tokens) == (100, 10)
    assert 0 < qa.rate_range.min < qa.rate_range.max


RANGE = analyzer().rate_range


@pytest.mark.parametrize(
    ('rate', 'error'),
    [
        (0.0, True),
        (-1.0, True),
        (RANGE.min * 0.5, False),
        ((RANGE.min + RANGE.max) * 0.5, False),
        (RANGE.max * 0.9, False),
        (RANGE.max * 1.1, True),
    ],
)
def test_analyze(rate: float, error: bool) -> None:
    metrics = analyzer().analyze(request_rate=rate)
    assert isinstance(metrics, QueueError) is error
    if isinstance(metrics, QueueError):
        return
    assert metrics.throughput >= 0
    assert metrics.avg_resp_time >= 0
    assert metrics.avg_wait_time >= 0
    assert metrics.avg_num_in_serv >= 0
    assert 0 <= metrics.rho <= 1
    assert metrics.avg_prefill_time >= 0
    assert metrics.avg_token_time >= 0


@pytest.mark.parametrize(
    ('targets', 'error'),
    [
        (TargetPerf(ttft=50.0, itl=5.0, tps=100.0), False),
        (TargetPerf(), False),
        (TargetPerf(ttft=-1.0, itl=5.0, tps=100.0), True),
        (TargetPerf(ttft=50.0, itl=-1.0, tps=100.0), True),
        (TargetPerf(ttft=50.0, itl=5.0, tps=-1.0), True),
    ],
)
def test_size(targets: TargetPerf, error: bool) -> None:
    for bisection in (True, False):
        sized = size(analyzer=analyzer(), targets=targets, bisection=bisection)
        assert isinstance(sized, SearchError) is error
        if isinstance(sized, SearchError):
            continue
        rates = sized.target_rate
        assert min(rates.rate_ttft, rates.rate_itl, rates.rate_tps) >= 0
        assert min(sized.achieved.ttft, sized.achieved.itl, sized.achieved.tps) >= 0


# --- queuemodel_test.go ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ('lam', 'mu', 'valid'),
    [
        (1.0, 2.0, True),
        (0.0, 2.0, True),
        (-1.0, 2.0, False),
        (1.0, 0.0, False),
        (1.0, -1.0, False),
        (9.9, 1.0, True),
        (11.0, 1.0, False),
    ],
)
def test_queue_model_basic(lam: float, mu: float, valid: bool) -> None:
    assert mm1k_valid(lam=lam, mu=mu, k=10) is valid
    stats = solve_mm1k(lam=lam, mu=mu, k=10)
    assert isinstance(stats, QueueError) is not valid
    if isinstance(stats, QueueError):
        return
    if lam > 0:
        assert stats.rho > 0
        assert stats.avg_resp_time > 0
    assert stats.avg_num_in_system >= 0
    assert stats.avg_queue_length >= 0
    assert stats.avg_wait_time >= 0
    assert stats.avg_serv_time > 0


@pytest.mark.parametrize(('lam', 'mu'), [(0.5, 2.0), (1.5, 2.0), (1.9, 2.0), (2.0, 2.0)])
def test_mm1k_probability_calculation(lam: float, mu: float) -> None:
    stats = solve_mm1k(lam=lam, mu=mu, k=3)
    assert isinstance(stats, QueueStats)
    assert 0 <= stats.throughput <= lam


@pytest.mark.parametrize(('k', 'lam', 'mu'), [(1, 0.5, 1.0), (10, 0.001, 1.0), (10, 1.0, 1000.0)])
def test_mm1k_edge_cases(k: int, lam: float, mu: float) -> None:
    stats = solve_mm1k(lam=lam, mu=mu, k=k)
    assert isinstance(stats, QueueStats)
    assert stats.avg_num_in_system >= 0
    assert stats.throughput >= 0


def chain(*, base: float, slope: float, n: int, k: int) -> QueueAnalyzer:
    """A state-dependent queue with μ_j = j/(base + slope·j) for j ≤ n, μ_n beyond, K = k."""
    return QueueAnalyzer(
        params=ServiceParams(1.0, 1.0, 1.0),  # not read by `solve`
        max_batch_size=n,
        max_queue_size=k - n,
        avg_input_tokens=0.0,
        avg_output_tokens=1.0,
        rate_range=RateRange(min=0.0, max=math.inf),
        base=base,
        slope=slope,
        monotone=base >= 0,
    )


@pytest.mark.parametrize(
    ('lam', 'valid'), [(0.5, True), (1.5, True), (2.8, True), (0.0, True), (-1.0, False)]
)
def test_mm1_state_dependent_solve(lam: float, valid: bool) -> None:
    stats = chain(base=1.0, slope=0.0, n=3, k=5).solve(lam=lam)  # μ = 1, 2, 3
    assert isinstance(stats, QueueError) is not valid
    if isinstance(stats, QueueError):
        return
    assert stats.avg_num_in_servers >= 0
    assert 0 <= stats.rho <= 1
    if stats.avg_resp_time > 0 and stats.throughput > 0:
        assert abs(stats.throughput * stats.avg_resp_time - stats.avg_num_in_system) <= 1e-4


def test_mm1_state_dependent_service_rate_extension() -> None:
    stats = chain(base=1.0, slope=0.0, n=2, k=5).solve(lam=0.5)  # μ = 1, 2, then 2
    assert isinstance(stats, QueueStats)
    assert stats.avg_num_in_system >= 0
    assert stats.throughput >= 0


def test_mm1_models_comparison() -> None:
    plain = solve_mm1k(lam=1.5, mu=3.0, k=5)
    constant = chain(base=0.0, slope=1 / 3, n=5, k=5).solve(lam=1.5)  # μ = 3 in every state
    assert isinstance(plain, QueueStats)
    assert isinstance(constant, QueueStats)
    assert abs(plain.avg_num_in_system - constant.avg_num_in_system) <= 1e-3
    assert abs(plain.throughput - constant.throughput) <= 1e-3


@pytest.mark.parametrize(('lam', 'mu'), [(0.5, 2.0), (1.5, 3.0), (2.8, 4.0)])
def test_queue_model_littles_law(lam: float, mu: float) -> None:
    stats = solve_mm1k(lam=lam, mu=mu, k=10)
    assert isinstance(stats, QueueStats)
    assert abs(stats.avg_num_in_system - stats.throughput * stats.avg_resp_time) <= 1e-4


# --- utils_test.go ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ('x', 'value', 'tolerance', 'expected'),
    [
        (1.0, 1.0, 0.01, True),
        (1.005, 1.0, 0.01, True),
        (1.02, 1.0, 0.01, False),
        (0.1, 0.0, 0.01, False),
        (1.0, 1.0, -0.01, True),
        (0.0, 0.0, 0.01, True),
    ],
)
def test_within_tolerance(x: float, value: float, tolerance: float, expected: bool) -> None:
    assert within_tolerance(x=x, value=value, tolerance=tolerance) is expected


def _error_above_five(x: float) -> float | None:
    return None if x > 5.0 else x


@pytest.mark.parametrize(
    ('x_min', 'x_max', 'target', 'f', 'error', 'indicator'),
    [
        (0.0, 10.0, 4.0, lambda x: x * x, False, 0),
        (1.0, 5.0, 6.0, lambda x: 2 * x, False, 0),
        (2.0, 5.0, 1.0, lambda x: 2 * x, False, -1),
        (1.0, 3.0, 10.0, lambda x: 2 * x, False, 1),
        (1.0, 5.0, -3.0, lambda x: -x, False, 0),
        (5.0, 1.0, 3.0, lambda x: 2 * x, True, 0),
        (4.0, 6.0, 5.0, _error_above_five, True, 0),
        (1.0, 5.0, 2.0, lambda x: 2 * x, False, 0),
    ],
)
def test_binary_search(
    x_min: float,
    x_max: float,
    target: float,
    f: Callable[[float], float | None],
    error: bool,
    indicator: int,
) -> None:
    evaluate = f
    found = binary_search(x_min=x_min, x_max=x_max, y_target=target, evaluate=evaluate)
    assert isinstance(found, SearchError) is error
    if isinstance(found, SearchError):
        return
    x, ind = found
    assert ind == indicator
    if ind == 0:
        value = evaluate(x)
        assert value is not None
        assert abs(value - target) <= 0.1
    if ind == -1:
        assert x == x_min
    if ind == 1:
        assert x == x_max


@pytest.mark.parametrize(
    ('x_min', 'x_max', 'target', 'f'),
    [
        (1.0, 10.0, 5.0, lambda x: 5.0),
        (1.0, 10.0, 3.0, lambda x: 5.0),
        (1.0, 5.0, 5.0, lambda x: 1.0 if x < 3.0 else 10.0),
        (3.0, 3.0, 6.0, lambda x: 2 * x),
    ],
)
def test_binary_search_edge_cases(
    x_min: float, x_max: float, target: float, f: Callable[[float], float | None]
) -> None:
    found = binary_search(x_min=x_min, x_max=x_max, y_target=target, evaluate=f)
    assert not isinstance(found, SearchError)


def test_binary_search_precision() -> None:
    found = binary_search(x_min=1.0, x_max=5.0, y_target=9.0, evaluate=lambda x: 2 * x + 3)
    assert not isinstance(found, SearchError)
    x, ind = found
    assert ind == 0
    assert abs(x - 3.0) <= 1e-3
    assert abs(2 * x + 3 - 9.0) <= 1e-3


@pytest.mark.parametrize('lam', [0.5, 0.0, 10.0])
def test_eval_serv_time(lam: float) -> None:
    stats = chain(base=1.0, slope=0.0, n=5, k=5).solve(lam=lam)  # μ = 1..5
    assert isinstance(stats, QueueStats)
    assert stats.avg_serv_time >= 0


@pytest.mark.parametrize('lam', [0.1, 1.0, 10.0])
def test_eval_waiting_time(lam: float) -> None:
    stats = chain(base=1.0, slope=0.0, n=5, k=5).solve(lam=lam)
    assert isinstance(stats, QueueStats)
    assert stats.avg_wait_time >= 0


EVAL = analyzer(n=4, q=8)
"""utils_test.go's TestEvalTTFT/TestEvalITL queue: α 1, β 0.01, γ 0.001, N 4, queue 8."""


@pytest.mark.parametrize('lam', [0.001, 0.01, 1.0])
def test_eval_ttft(lam: float) -> None:
    solved = EVAL.latencies(lam=lam)
    assert not isinstance(solved, QueueError)
    # WVA's EvalTTFT adds one ITL; either way at least the base prefill time (α).
    assert solved[1] >= 1.0
    assert solved[1] + solved[2] >= 1.0


@pytest.mark.parametrize('lam', [0.001, 0.01, 1.0])
def test_eval_itl(lam: float) -> None:
    solved = EVAL.latencies(lam=lam)
    assert not isinstance(solved, QueueError)
    assert solved[2] >= 1.0  # at least the base decode time (α)


@pytest.mark.parametrize(('index', 'target'), [(0, 25.0), (1, 2.0), (2, 50.0), (3, 10.0)])
def test_binary_search_with_analyzer_functions(index: int, target: float) -> None:
    """TTFT 25 ms, ITL 2 ms, service time 50 ms, wait 10 ms on α 1, β 0.01, γ 10 (N 4, queue
    8): where the search finds the target inside the rate range, the figure there is within
    0.1 ms of it (WVA logs an unreachable target and passes)."""
    qa = analyzer(n=4, q=8, parms=ServiceParams(alpha=1.0, beta=0.01, gamma=10.0))

    def evaluate(lam: float) -> float | None:
        solved = qa.latencies(lam=lam)
        if isinstance(solved, QueueError):
            return None
        stats, ttft, itl = solved
        return (ttft, itl, stats.avg_serv_time, stats.avg_wait_time)[index]

    found = binary_search(
        x_min=qa.rate_range.min / 1000,
        x_max=qa.rate_range.max / 1000,
        y_target=target,
        evaluate=evaluate,
    )
    if isinstance(found, SearchError):
        return
    x, ind = found
    if ind == 0:
        value = evaluate(x)
        assert value is not None
        assert abs(value - target) <= 0.1
