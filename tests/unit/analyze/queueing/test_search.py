"""`analyze.queueing.search`: WVA's tolerance test, binary search and `Size`."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from llmscaler.analyze.queueing.perf_model import PerfParams
from llmscaler.analyze.queueing.queue_model import QueueAnalyzer, QueueError
from llmscaler.analyze.queueing.search import (
    SearchError,
    TargetPerf,
    binary_search,
    max_rate,
    size,
    within_tolerance,
)


def analyzer(**kw: float) -> QueueAnalyzer:
    built = QueueAnalyzer.build(
        params=PerfParams(alpha=8.0, beta=0.05, gamma=20.0, delta=0.01),
        max_batch_size=int(kw.get('n', 64)),
        max_queue_size=100,
        avg_input_tokens=kw.get('i', 500.0),
        avg_output_tokens=kw.get('o', 100.0),
    )
    assert not isinstance(built, QueueError)
    return built


def against_idle(
    params: PerfParams,
    n: int,
    i: float,
    o: float,
    *,
    ttft_factor: float,
    itl_factor: float,
    tps: float = 0.0,
) -> tuple[QueueAnalyzer, TargetPerf]:
    """A replica's analyzer (a queue of 100), and targets at the given multiples of its latencies
    at the lowest rate (a TTFT of 0 there counts as 1 ms)."""
    qa = QueueAnalyzer.build(
        params=params, max_batch_size=n, max_queue_size=100, avg_input_tokens=i, avg_output_tokens=o
    )
    assert not isinstance(qa, QueueError)
    idle = qa.latencies(lam=qa.rate_range.min / 1000)
    assert not isinstance(idle, QueueError)
    return qa, TargetPerf(ttft=ttft_factor * (idle[1] or 1.0), itl=itl_factor * idle[2], tps=tps)


@pytest.mark.parametrize(
    ('x', 'value', 'tol', 'ok'),
    [
        (1.0, 1.0, 0.0, True),
        (0.0, 0.0, -1.0, True),
        (1.0, 0.0, 1.0, False),
        (1.0000005, 1.0, 1e-6, True),
        (1.000002, 1.0, 1e-6, False),
        (0.9, 1.0, -0.1, False),
        (-1.05, -1.0, 0.1, True),
    ],
)
def test_within_tolerance(x: float, value: float, tol: float, ok: bool) -> None:
    assert within_tolerance(x=x, value=value, tolerance=tol) is ok


def test_binary_search_finds_a_root_either_direction() -> None:
    up = binary_search(x_min=0.0, x_max=10.0, y_target=49.0, evaluate=lambda x: x * x)
    assert not isinstance(up, SearchError)
    assert up[1] == 0
    assert up[0] == pytest.approx(7.0, rel=1e-6)
    down = binary_search(x_min=0.0, x_max=10.0, y_target=3.0, evaluate=lambda x: 10 - x)
    assert not isinstance(down, SearchError)
    assert down[1] == 0
    assert down[0] == pytest.approx(7.0, rel=1e-6)


def test_binary_search_reports_outside_targets_with_indicators() -> None:
    assert binary_search(x_min=1.0, x_max=2.0, y_target=0.5, evaluate=lambda x: x) == (1.0, -1)
    assert binary_search(x_min=1.0, x_max=2.0, y_target=5.0, evaluate=lambda x: x) == (2.0, 1)
    # Decreasing: a target above the curve at x_min is below the bounded region.
    assert binary_search(x_min=1.0, x_max=2.0, y_target=5.0, evaluate=lambda x: -x) == (1.0, -1)
    # At an endpoint within tolerance.
    assert binary_search(x_min=1.0, x_max=2.0, y_target=2.0, evaluate=lambda x: x) == (2.0, 0)


def test_binary_search_errors_are_values() -> None:
    assert isinstance(
        binary_search(x_min=2.0, x_max=1.0, y_target=1.0, evaluate=lambda x: x), SearchError
    )
    assert isinstance(
        binary_search(x_min=0.0, x_max=1.0, y_target=0.5, evaluate=lambda x: None), SearchError
    )


def test_binary_search_stops_after_100_halvings() -> None:
    calls: list[float] = []

    def step(x: float) -> float:
        calls.append(x)
        return 0.0 if x < 0.5 else 1.0

    found = binary_search(x_min=0.0, x_max=1.0, y_target=0.5, evaluate=step)
    assert not isinstance(found, SearchError)
    assert len(calls) == 2 + 100


@settings(max_examples=40, deadline=None)
@given(ttft=st.floats(60.0, 5000.0), itl=st.floats(8.5, 40.0))
def test_size_meets_both_targets_at_the_rate_it_returns(ttft: float, itl: float) -> None:
    qa = analyzer()
    sized = size(analyzer=qa, targets=TargetPerf(ttft=ttft, itl=itl))
    if isinstance(sized, SearchError):
        assert 'below the bounded region' in sized.message
        return
    assert sized.achieved.ttft <= ttft * (1 + 1e-5)
    assert sized.achieved.itl <= itl * (1 + 1e-5)
    # Largest: a bit more load breaks a target, unless λ* is the maximum rate.
    if sized.max_rate < qa.rate_range.max / 1.01:
        more = qa.analyze(request_rate=sized.max_rate * 1.01)
        assert not isinstance(more, QueueError)
        assert more.ttft > ttft or more.itl > itl


def test_size_a_target_below_the_idle_figure_is_an_error() -> None:
    sized = size(analyzer=analyzer(), targets=TargetPerf(ttft=1.0, itl=20.0))
    assert isinstance(sized, SearchError)
    assert 'TTFT' in sized.message
    assert 'below the bounded region' in sized.message


def test_size_targets_zero_mean_not_considered_and_tps_takes_ninety_percent() -> None:
    qa = analyzer()
    open_ = size(analyzer=qa, targets=TargetPerf())
    assert not isinstance(open_, SearchError)
    assert open_.target_rate.rate_ttft == pytest.approx(qa.rate_range.max)
    tps = size(analyzer=qa, targets=TargetPerf(tps=100.0))
    assert not isinstance(tps, SearchError)
    assert tps.target_rate.rate_tps == pytest.approx(0.9 * qa.rate_range.max)
    assert tps.max_rate == pytest.approx(0.9 * qa.rate_range.max, rel=1e-3)


@pytest.mark.parametrize('targets', [TargetPerf(ttft=-1), TargetPerf(itl=-1), TargetPerf(tps=-1)])
def test_size_refuses_negative_targets(targets: TargetPerf) -> None:
    assert isinstance(size(analyzer=analyzer(), targets=targets), SearchError)


def test_looser_targets_never_give_a_smaller_rate() -> None:
    qa = analyzer()
    rates = []
    for ttft in (200.0, 400.0, 800.0):
        sized = size(analyzer=qa, targets=TargetPerf(ttft=ttft, itl=30.0))
        assert not isinstance(sized, SearchError)
        rates.append(sized.max_rate)
    assert rates == sorted(rates)
    assert rates[0] < rates[-1]


PARAMS = st.builds(
    PerfParams,
    alpha=st.floats(1.0, 40.0),
    beta=st.floats(1e-3, 1.0),
    gamma=st.floats(1.0, 300.0),
    delta=st.floats(1e-6, 0.02),
)
"""α, β, γ, δ over the ranges a served model shows (ms)."""


@settings(max_examples=150, deadline=None)
@given(
    params=PARAMS,
    n=st.integers(1, 512),
    i=st.floats(0.0, 4000.0),
    o=st.floats(1.0, 800.0),
    ttft_factor=st.one_of(st.just(0.0), st.floats(0.5, 50.0)),
    itl_factor=st.one_of(st.just(0.0), st.floats(0.9, 10.0)),
)
def test_fast_size_equals_wva_bisection(
    params: PerfParams, n: int, i: float, o: float, ttft_factor: float, itl_factor: float
) -> None:
    # The analyzer's sizing (both ends solved once, regula falsi) against WVA's bisection:
    # the same errors, the same answers at the ends, and rates whose latencies both lie within
    # the search's tolerance of the target.
    qa, targets = against_idle(params, n, i, o, ttft_factor=ttft_factor, itl_factor=itl_factor)
    fast = size(analyzer=qa, targets=targets)
    slow = size(analyzer=qa, targets=targets, bisection=True)
    assert isinstance(fast, SearchError) == isinstance(slow, SearchError)
    if isinstance(fast, SearchError) or isinstance(slow, SearchError):
        assert str(fast).split(':')[0] == str(slow).split(':')[0]
        return
    for index, (target, a, b) in enumerate(
        (
            (targets.ttft, fast.target_rate.rate_ttft, slow.target_rate.rate_ttft),
            (targets.itl, fast.target_rate.rate_itl, slow.target_rate.rate_itl),
        )
    ):
        ends = (qa.rate_range.min, qa.rate_range.max)
        if target == 0 or any(b == pytest.approx(end, rel=1e-12) for end in ends):
            # Not considered, or beyond the range (the end itself, WVA's indicator ±1).
            assert a == pytest.approx(b, rel=1e-12)
            continue
        met = []
        for rate in (a, b):
            solved = qa.latencies(lam=rate / 1000)
            assert not isinstance(solved, QueueError)
            figure = solved[2] if index else solved[1]
            met.append(within_tolerance(x=figure, value=target, tolerance=1e-6))
        if not met[1]:
            # A curve with a jump across the target (a batch clamped at 0 or N: no prefill
            # slope, one token out): WVA's bisection ends on its last midpoint; nothing to match.
            continue
        assert met[0]
        assert a == pytest.approx(b, rel=1e-3)


@settings(max_examples=200, deadline=None)
@given(
    params=PARAMS,
    n=st.integers(1, 512),
    i=st.one_of(st.just(0.0), st.floats(1.0, 4000.0)),
    o=st.floats(1.0, 800.0),
    ttft_factor=st.one_of(st.just(0.0), st.floats(0.5, 50.0)),
    itl_factor=st.one_of(st.just(0.0), st.floats(0.9, 10.0)),
    tps=st.sampled_from([0.0, 100.0]),
)
# An ITL flat at the full batch of 1 throughout: WVA takes a target below it as met at the top.
@example(
    params=PerfParams(alpha=1.0, beta=1.0, gamma=1.0, delta=0.015625),
    n=1,
    i=0.0,
    o=1.0,
    ttft_factor=0.0,
    itl_factor=0.9375,
    tps=0.0,
)
def test_max_rate_equals_the_rate_of_wva_bisection(
    params: PerfParams,
    n: int,
    i: float,
    o: float,
    ttft_factor: float,
    itl_factor: float,
    tps: float,
) -> None:
    # The analyzer's sizing looks for the binding target only, from the unqueued model's rate:
    # the same errors as WVA's `Size`, and the same rate one replica sustains wherever WVA's
    # bisection meets its own tolerance test.
    qa, targets = against_idle(
        params, n, i, o, ttft_factor=ttft_factor, itl_factor=itl_factor, tps=tps
    )
    fast = max_rate(analyzer=qa, targets=targets)
    slow = size(analyzer=qa, targets=targets, bisection=True)
    assert isinstance(fast, SearchError) == isinstance(slow, SearchError)
    if isinstance(fast, SearchError) or isinstance(slow, SearchError):
        assert str(fast).split(':')[0] == str(slow).split(':')[0]
        return
    binding = min(slow.target_rate.rate_ttft, slow.target_rate.rate_itl, slow.target_rate.rate_tps)
    solved = qa.latencies(lam=binding / 1000)
    assert not isinstance(solved, QueueError)
    met = [
        target == 0 or figure <= target or within_tolerance(x=figure, value=target, tolerance=1e-6)
        for figure, target in ((solved[1], targets.ttft), (solved[2], targets.itl))
    ]
    if not all(met):
        # WVA's bisection ended on its last midpoint (a latency of rounding noise, or a jump
        # across the target): nothing to match.
        return
    if i == 0 and targets.ttft > 0:
        # Without prefill the TTFT is the wait alone, rounding noise at light load: `size`
        # sizes that (its own test compares it with the bisection rate by rate).
        regula = size(analyzer=qa, targets=targets)
        assert not isinstance(regula, SearchError)
        assert fast == regula.max_rate
        return
    assert fast == pytest.approx(slow.max_rate, rel=1e-3)


def test_max_rate_solves_the_queue_once_where_the_batch_seldom_fills(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Light targets on a large batch: the first rate tried (the unqueued model's) is the answer.
    qa = analyzer(n=256)
    targets = TargetPerf(ttft=5000.0, itl=9.0)
    slow = size(analyzer=qa, targets=targets, bisection=True)
    calls: list[float] = []
    original = QueueAnalyzer.latencies

    def counting(self: QueueAnalyzer, *, lam: float) -> object:
        calls.append(lam)
        return original(self, lam=lam)

    monkeypatch.setattr(QueueAnalyzer, 'latencies', counting)
    fast = max_rate(analyzer=qa, targets=targets)
    assert not isinstance(slow, SearchError)
    assert fast == pytest.approx(slow.max_rate, rel=1e-6)
    assert len(calls) == 2  # the smallest rate (the error rules) and the answer
