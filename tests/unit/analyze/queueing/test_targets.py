"""`analyze.queueing.targets`: explicit, inferred (k × unloaded), fallback, none."""

from __future__ import annotations

import pytest

from llmscaler.analyze.queueing.perf_model import PerfParams
from llmscaler.analyze.queueing.targets import SloTargets, choose

A = PerfParams(alpha=10.0, beta=0.1, gamma=30.0, delta=0.02)
B = PerfParams(alpha=6.0, beta=0.5, gamma=50.0, delta=0.01)


def pick(**kw: object) -> SloTargets | None:
    args: dict[str, object] = {
        'explicit_ttft': None,
        'explicit_itl': None,
        'learned': (),
        'avg_input_tokens': 1000.0,
        'avg_output_tokens': 100.0,
        'multiplier': 3.0,
        'observed_ttft': None,
        'observed_itl': None,
    }
    args.update(kw)
    return choose(**args)  # type: ignore[arg-type]


def test_explicit_wins_over_everything() -> None:
    got = pick(
        explicit_ttft=500.0, explicit_itl=40.0, learned=(A,), observed_ttft=9.0, observed_itl=1.0
    )
    assert got is not None
    assert (got.ttft, got.itl, got.source) == (500.0, 40.0, 'explicit')


def test_one_explicit_target_alone_is_not_explicit() -> None:
    got = pick(explicit_ttft=500.0, learned=(A,))
    assert got is not None
    assert got.source == 'inferred'


def test_inferred_is_k_times_the_unloaded_figures_max_over_variants() -> None:
    got = pick(learned=(A, B), multiplier=3.0)
    assert got is not None
    assert got.source == 'inferred'
    # A: TTFT 3·(30 + 0.02·1000) = 150, ITL 3·(10 + 0.1) = 30.3; B: 3·(50 + 10) = 180, 3·6.5 = 19.5.
    assert got.ttft == pytest.approx(180.0)
    assert got.itl == pytest.approx(30.3)


def test_parameters_that_are_not_positive_are_ignored() -> None:
    bad = PerfParams(alpha=-1.0, beta=0.1, gamma=30.0, delta=0.02)
    got = pick(learned=(bad,), observed_ttft=100.0, observed_itl=20.0)
    assert got is not None
    assert got.source == 'fallback'


def test_fallback_is_one_and_a_half_times_observed_capped() -> None:
    got = pick(observed_ttft=200.0, observed_itl=20.0)
    assert got is not None
    assert (got.ttft, got.itl, got.source) == (300.0, 30.0, 'fallback')
    capped = pick(observed_ttft=9000.0, observed_itl=400.0)
    assert capped is not None
    assert (capped.ttft, capped.itl) == (10_000.0, 500.0)


def test_nothing_to_go_on_is_none() -> None:
    assert pick() is None
    assert pick(observed_ttft=100.0) is None
    assert pick(learned=(A,), avg_input_tokens=None) is None
