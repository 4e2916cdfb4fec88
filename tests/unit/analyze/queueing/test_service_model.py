"""`analyze.queueing.service_model`: WVA main's three-parameter service model (pkg/analyzer/
queueanalyzer.go at b08b1c7): the queue's service line, the latencies read from a solution, the
inferred targets; the fast sizing agrees with WVA's bisection on it."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmscaler.analyze.queueing import service_model
from llmscaler.analyze.queueing.queue_model import QueueAnalyzer
from llmscaler.analyze.queueing.search import SearchError, TargetPerf, max_rate, size
from llmscaler.analyze.queueing.service_model import ServiceParams
from llmscaler.analyze.queueing.targets import choose

P = ServiceParams(alpha=5.0, beta=0.05, gamma=0.00005)


@pytest.mark.parametrize(('i', 'o'), [(0.0, 1.0), (0.0, 50.0), (100.0, 1.0), (1000.0, 200.0)])
@pytest.mark.parametrize('n', [1.0, 7.0, 256.0])
def test_the_service_line_is_one_prefill_and_o_decodes(i: float, o: float, n: float) -> None:
    base, slope = service_model.service_line(params=P, avg_input_tokens=i, avg_output_tokens=o)
    prefill = service_model.prefill_time(
        params=P, avg_input_tokens=i, avg_output_tokens=o, batch_size=n
    )
    decode = service_model.decode_time(
        params=P, avg_input_tokens=i, avg_output_tokens=o, batch_size=n
    )
    assert base + slope * n == pytest.approx(prefill + o * decode, rel=1e-12)


def test_latencies_read_the_prefill_at_the_mean_in_service() -> None:
    ttft, itl = service_model.latencies(
        params=P,
        avg_input_tokens=1000,
        avg_output_tokens=200,
        wait=7.0,
        service=3000.0,
        in_service=10.0,
    )
    prefill = service_model.prefill_time(
        params=P, avg_input_tokens=1000, avg_output_tokens=200, batch_size=10.0
    )
    assert ttft == pytest.approx(7.0 + prefill)
    assert itl == pytest.approx((3000.0 - prefill) / 200)


def test_inferred_targets_are_wva_mains() -> None:
    # k·α + (β + γ)·I and k·α + β + γ·(I + (O + 1)/2), WVA's (O + 1)/2 kept.
    ttft, itl = service_model.inferred_targets(
        params=P, avg_input_tokens=1000, avg_output_tokens=199, multiplier=3.0
    )
    assert ttft == pytest.approx(15.0 + 0.05005 * 1000)
    assert itl == pytest.approx(15.0 + 0.05 + 0.00005 * 1100)
    other = ServiceParams(alpha=9.0, beta=0.01, gamma=0.00001)
    chosen = choose(
        explicit_ttft=None,
        explicit_itl=None,
        learned=[P, other],
        avg_input_tokens=1000,
        avg_output_tokens=199,
        multiplier=3.0,
        observed_ttft=None,
        observed_itl=None,
    )
    assert chosen is not None
    assert chosen.source == 'inferred'
    # The largest over the variants, figure by figure.
    assert chosen.ttft == pytest.approx(max(ttft, 27.0 + 0.011 * 1000))
    assert chosen.itl == pytest.approx(max(itl, 27.0 + 0.01 + 0.00001 * 1100))


@settings(max_examples=60, deadline=None)
@given(
    alpha=st.floats(1.0, 20.0),
    beta=st.floats(1e-3, 0.2),
    gamma=st.floats(1e-6, 1e-3),
    i=st.floats(10.0, 4000.0),
    o=st.floats(1.0, 1000.0),
    n=st.integers(1, 512),
    ttft_k=st.floats(1.05, 20.0),
    itl_k=st.floats(1.05, 20.0),
)
def test_fast_sizing_agrees_with_wva_bisection(
    alpha: float, beta: float, gamma: float, i: float, o: float, n: int, ttft_k: float, itl_k: float
) -> None:
    params = ServiceParams(alpha, beta, gamma)
    qa = QueueAnalyzer.build(
        params=params, max_batch_size=n, max_queue_size=100, avg_input_tokens=i, avg_output_tokens=o
    )
    assert isinstance(qa, QueueAnalyzer)
    idle_ttft, idle_itl = service_model.inferred_targets(
        params=params, avg_input_tokens=i, avg_output_tokens=o, multiplier=1.0
    )
    targets = TargetPerf(ttft=ttft_k * idle_ttft, itl=itl_k * idle_itl)
    wva = size(analyzer=qa, targets=targets, bisection=True)
    fast = max_rate(analyzer=qa, targets=targets)
    if isinstance(wva, SearchError):
        assert isinstance(fast, SearchError)
        return
    assert not isinstance(fast, SearchError)
    assert fast == pytest.approx(wva.max_rate, rel=1e-3)
