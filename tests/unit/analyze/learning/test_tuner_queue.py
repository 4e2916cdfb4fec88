"""`analyze.learning.tuner_queue`: where it answers, the tuner's queue is `QueueAnalyzer`'s to the
bit.

The fast path exists only for speed: a step of the tuner must not move by a last bit because
its queue was solved the short way. Where the closed form does not hold, or the inputs are
outside the fast path, it answers None and the analyzer decides.
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmscaler.analyze.learning import tuner_queue
from llmscaler.analyze.queueing.perf_model import PerfParams
from llmscaler.analyze.queueing.queue_model import EPSILON, QueueAnalyzer, QueueError, RateRange


def _analyzer(
    x: tuple[float, float, float, float], n: int, tokens: float, out: float
) -> QueueAnalyzer:
    built = QueueAnalyzer.build(
        params=PerfParams(*x),
        max_batch_size=n,
        max_queue_size=10 * n,
        avg_input_tokens=tokens,
        avg_output_tokens=out,
    )
    assert isinstance(built, QueueAnalyzer)
    return built


def _latencies(
    x: tuple[float, float, float, float], n: int, tokens: float, out: float, *, rate: float
) -> tuple[float, float] | None:
    """The fast path for the queue `_analyzer` builds, at `rate` requests/s."""
    return tuner_queue.latencies(
        x=x,
        batch=n,
        queue=10 * n,
        input_tokens=tokens,
        output_tokens=out,
        rate=rate,
        epsilon=EPSILON,
    )


@settings(max_examples=200, deadline=None)
@given(
    x=st.tuples(
        st.floats(2.0, 40.0), st.floats(0.005, 0.5), st.floats(5.0, 300.0), st.floats(1e-5, 1e-3)
    ),
    load=st.floats(0.01, 1.1),
    tokens=st.floats(1.0, 3000.0),
    out=st.floats(1.0, 600.0),
    n=st.integers(1, 512),
)
def test_latencies_are_the_analyzers_where_given(
    x: tuple[float, float, float, float], load: float, tokens: float, out: float, n: int
) -> None:
    analyzer = _analyzer(x, n, tokens, out)
    rate = load * analyzer.rate_range.max
    fast = _latencies(x, n, tokens, out, rate=rate)
    if fast is None:
        return
    solved = analyzer.latencies(lam=rate / 1000)
    assert not isinstance(solved, QueueError)
    assert fast == (solved[1], solved[2])
    assert solved[0].avg_wait_time == 0.0


@settings(max_examples=200, deadline=None)
@given(
    base=st.floats(0.0, 5e4),
    slope=st.floats(1e-3, 200.0),
    load=st.floats(0.01, 1.1),
    n=st.integers(1, 512),
)
def test_service_is_the_solved_chains_where_given(
    base: float, slope: float, load: float, n: int
) -> None:
    analyzer = QueueAnalyzer(
        params=PerfParams(1.0, 1.0, 1.0, 1.0),  # not read by `solve`
        max_batch_size=n,
        max_queue_size=10 * n,
        avg_input_tokens=1.0,
        avg_output_tokens=2.0,
        rate_range=_analyzer((1.0, 1.0, 1.0, 1.0), n, 1.0, 2.0).rate_range,
        base=base,
        slope=slope,
        monotone=True,
    )
    lam = load * n / (base + slope * n)
    serv = tuner_queue.service(base=base, slope=slope, batch=n, queue=10 * n, lam=lam)
    if serv is None:
        return
    stats = analyzer.solve(lam=lam)
    assert not isinstance(stats, QueueError)
    assert (stats.avg_wait_time, stats.avg_serv_time) == (0.0, serv)


def test_light_load_is_answered_and_a_full_batch_is_left_to_the_analyzer() -> None:
    x, n, tokens, out = (10.0, 0.1, 50.0, 1e-4), 64, 600.0, 150.0
    top = _analyzer(x, n, tokens, out).rate_range.max
    light = _latencies(x, n, tokens, out, rate=0.1 * top)
    full = _latencies(x, n, tokens, out, rate=0.999 * top)
    assert light is not None
    assert light[1] > x[0]
    assert full is None


@pytest.mark.parametrize(
    ('tokens', 'out', 'rate'), [(0.0, 150.0, 1.0), (600.0, 0.5, 1.0), (600.0, 150.0, -1.0)]
)
def test_inputs_outside_the_fast_path_are_left_to_the_analyzer(
    tokens: float, out: float, rate: float
) -> None:
    assert _latencies((10.0, 0.1, 50.0, 1e-4), 64, tokens, out, rate=rate) is None


@settings(max_examples=200, deadline=None)
@given(
    x=st.tuples(
        st.floats(2.0, 40.0), st.floats(0.005, 0.5), st.floats(5.0, 300.0), st.floats(1e-5, 1e-3)
    ),
    scale=st.tuples(st.floats(0.9, 1.1), st.floats(0.9, 1.1)),
    load=st.floats(0.01, 1.1),
    tokens=st.floats(1.0, 3000.0),
    out=st.floats(1.0, 600.0),
    n=st.integers(1, 512),
)
def test_wait_and_service_at_a_perturbed_queue_are_the_analyzers(
    x: tuple[float, float, float, float],
    scale: tuple[float, float],
    load: float,
    tokens: float,
    out: float,
    n: int,
) -> None:
    # The Jacobian's queues: the analyzer of x with its base and slope moved, solved in full.
    analyzer = _analyzer(x, n, tokens, out)
    base, slope = analyzer.base * scale[0], analyzer.slope * scale[1]
    moved = dataclasses.replace(
        analyzer,
        base=base,
        slope=slope,
        rate_range=RateRange(
            min=EPSILON * 1000 / (base + slope),
            max=n / (base + slope * n) * (1 - EPSILON) * 1000,
        ),
    )
    rate = load * analyzer.rate_range.max
    got = tuner_queue.wait_and_service(
        x=x,
        base=base,
        slope=slope,
        batch=n,
        queue=10 * n,
        input_tokens=tokens,
        output_tokens=out,
        rate=rate,
        epsilon=EPSILON,
    )
    if rate > moved.rate_range.max:
        assert got is None
        return
    stats = moved.solve(lam=rate / 1000)
    assert not isinstance(stats, QueueError)
    assert got == (stats.avg_wait_time, stats.avg_serv_time)


@settings(max_examples=200, deadline=None)
@given(
    x=st.tuples(
        st.floats(2.0, 40.0), st.floats(0.005, 0.5), st.floats(5.0, 300.0), st.floats(1e-5, 1e-3)
    ),
    scales=st.lists(st.tuples(st.floats(0.9, 1.1), st.floats(0.9, 1.1)), min_size=1, max_size=4),
    load=st.floats(0.01, 1.1),
    tokens=st.floats(1.0, 3000.0),
    out=st.floats(1.0, 600.0),
    n=st.integers(1, 512),
)
def test_waits_and_services_are_wait_and_service_at_each_point(
    x: tuple[float, float, float, float],
    scales: list[tuple[float, float]],
    load: float,
    tokens: float,
    out: float,
    n: int,
) -> None:
    # The Jacobian's four queues at once: the same answers to the bit as one at a time, and
    # None exactly when one of them is None.
    analyzer = _analyzer(x, n, tokens, out)
    points = tuple((analyzer.base * b, analyzer.slope * s) for b, s in scales)
    common = {
        'x': x,
        'batch': n,
        'queue': 10 * n,
        'input_tokens': tokens,
        'output_tokens': out,
        'rate': load * analyzer.rate_range.max,
        'epsilon': EPSILON,
    }
    one_by_one = [tuner_queue.wait_and_service(base=b, slope=s, **common) for b, s in points]  # type: ignore[arg-type]
    together = tuner_queue.waits_and_services(points=points, **common)  # type: ignore[arg-type]
    if any(answer is None for answer in one_by_one):
        assert together is None
    else:
        assert together == one_by_one
