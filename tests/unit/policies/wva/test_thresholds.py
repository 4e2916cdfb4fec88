"""The universal threshold post-step (WVA v0.9.0, internal/engines/saturation/).

RC = max(0, demand / up − anticipated supply); SC = max(0, supply − demand / down).
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmscaler.domain.signals import AnalyzerResult, Totals
from llmscaler.policies.wva.thresholds import required_capacity, signal, spare_capacity
from tests.support.analyze_fixtures import capacity


def test_required_capacity_worked_example() -> None:
    # 850 / 0.85 = 1000; 1000 − 900 = 100.
    assert required_capacity(
        demand=850.0, anticipated_supply=900.0, scale_up_threshold=0.85
    ) == pytest.approx(100.0)


def test_spare_capacity_worked_example() -> None:
    # 560 / 0.7 = 800; 1000 − 800 = 200.
    assert spare_capacity(demand=560.0, supply=1000.0, scale_down_boundary=0.7) == pytest.approx(
        200.0
    )


def test_both_are_floored_at_zero() -> None:
    # 100 / 0.85 ≈ 117.6 < 900 → 0; 1000 − 900 / 0.7 ≈ −285.7 → 0.
    assert required_capacity(demand=100.0, anticipated_supply=900.0, scale_up_threshold=0.85) == 0
    assert spare_capacity(demand=900.0, supply=1000.0, scale_down_boundary=0.7) == 0


def test_pending_counts_against_required_but_not_in_spare() -> None:
    # Ready supply 800 plus 200 pending: anticipated 1000. Demand 765: 765 / 0.85 = 900.
    # RC counts the pending replicas: 900 − 1000 → 0; without them it would be 900 − 800 = 100.
    assert required_capacity(demand=765.0, anticipated_supply=1000.0, scale_up_threshold=0.85) == 0
    assert required_capacity(
        demand=765.0, anticipated_supply=800.0, scale_up_threshold=0.85
    ) == pytest.approx(100.0)
    # SC uses the ready 800 only: demand 280 / 0.7 = 400 → 800 − 400 = 400 (not 1000 − 400).
    assert spare_capacity(demand=280.0, supply=800.0, scale_down_boundary=0.7) == pytest.approx(
        400.0
    )


def test_anticipated_supply_of_zero_is_taken_literally() -> None:
    # 170 / 0.85 = 200 − 0 = 200.
    assert required_capacity(
        demand=170.0, anticipated_supply=0.0, scale_up_threshold=0.85
    ) == pytest.approx(200.0)


@pytest.mark.parametrize('threshold', [0.0, -0.5, math.nan, math.inf])
def test_an_unusable_threshold_leaves_the_fresh_value_zero(threshold: float) -> None:
    # 0, negative, NaN: as WVA main (saturation_v2/analyzer.go at b08b1c7 computes RC and SC
    # only for a threshold > 0). +inf: a documented deviation (see the next test).
    assert (
        required_capacity(demand=850.0, anticipated_supply=0.0, scale_up_threshold=threshold) == 0
    )
    assert spare_capacity(demand=0.0, supply=1000.0, scale_down_boundary=threshold) == 0


@pytest.mark.parametrize('bad', [math.nan, math.inf, -math.inf, -1.0])
def test_bad_figures_give_zero(bad: float) -> None:
    assert required_capacity(demand=bad, anticipated_supply=10.0, scale_up_threshold=0.85) == 0
    assert required_capacity(demand=850.0, anticipated_supply=bad, scale_up_threshold=0.85) == 0
    assert spare_capacity(demand=bad, supply=1000.0, scale_down_boundary=0.7) == 0
    assert spare_capacity(demand=10.0, supply=bad, scale_down_boundary=0.7) == 0


def test_overflow_gives_zero() -> None:
    assert required_capacity(demand=1e308, anticipated_supply=0.0, scale_up_threshold=1e-10) == 0


@given(
    supply=st.floats(min_value=1.0, max_value=1e9),
    utilization=st.floats(min_value=0.70 + 1e-6, max_value=0.85 - 1e-6),
)
def test_the_hysteresis_band_gives_neither_signal(supply: float, utilization: float) -> None:
    demand = utilization * supply
    assert required_capacity(demand=demand, anticipated_supply=supply, scale_up_threshold=0.85) == 0
    assert spare_capacity(demand=demand, supply=supply, scale_down_boundary=0.70) == 0


@given(
    demand=st.floats(min_value=0.0, max_value=1e9),
    supply=st.floats(min_value=0.0, max_value=1e9),
    down=st.floats(min_value=0.05, max_value=0.95),
    gap=st.floats(min_value=0.01, max_value=0.5),
)
def test_required_and_spare_are_never_both_positive(
    demand: float, supply: float, down: float, gap: float
) -> None:
    # With up > down, demand/up < demand/down, so supply cannot lie strictly between.
    up = min(1.0, down + gap)
    rc = required_capacity(demand=demand, anticipated_supply=supply, scale_up_threshold=up)
    sc = spare_capacity(demand=demand, supply=supply, scale_down_boundary=down)
    assert rc >= 0
    assert sc >= 0
    assert rc == 0 or sc == 0


def test_signal_at_model_scope_uses_totals_and_the_results_thresholds() -> None:
    # supply 1000, anticipated 1200, demand 560 with up 0.5 / down 0.7:
    # RC = 560 / 0.5 − 1200 = 1120 − 1200 → 0; SC = 1000 − 560 / 0.7 = 200.
    result = AnalyzerResult(
        analyzer='saturation',
        variants=(capacity('b', 300.0), capacity('a', 200.0)),
        totals=Totals(supply=1000.0, anticipated_supply=1200.0, demand=560.0),
        scale_up_threshold=0.5,
        scale_down_boundary=0.7,
        score=2.0,
    )
    out = signal(result=result, live=True)
    assert out.analyzer == 'saturation'
    assert out.live is True
    assert out.score == 2.0
    assert len(out.roles) == 1
    assert out.roles[0].role == 'both'
    assert out.roles[0].required == 0.0
    assert out.roles[0].spare == pytest.approx(200.0)
    assert out.capacity == (('a', 200.0), ('b', 300.0))


def test_signal_with_a_lower_threshold_asks_for_more() -> None:
    # Same totals, up 0.4: 560 / 0.4 = 1400 − 1200 = 200.
    result = AnalyzerResult(
        analyzer='saturation',
        variants=(),
        totals=Totals(supply=1000.0, anticipated_supply=1200.0, demand=560.0),
        scale_up_threshold=0.4,
    )
    assert signal(result=result, live=False).roles[0].required == pytest.approx(200.0)


def test_signal_per_role_is_sorted_and_ignores_model_totals() -> None:
    # prefill: 850 / 0.85 − 900 = 100, SC = 900 − 850 / 0.7 < 0 → 0.
    # decode: RC = 140 / 0.85 − 500 < 0 → 0; SC = 500 − 140 / 0.7 = 500 − 200 = 300.
    result = AnalyzerResult(
        analyzer='saturation',
        variants=(capacity('p', 100.0, 'prefill'), capacity('d', 50.0, 'decode')),
        totals=Totals(supply=1.0, anticipated_supply=1.0, demand=1e6),
        roles=(
            ('prefill', Totals(supply=900.0, anticipated_supply=900.0, demand=850.0)),
            ('decode', Totals(supply=500.0, anticipated_supply=500.0, demand=140.0)),
        ),
    )
    out = signal(result=result, live=True)
    assert [r.role for r in out.roles] == ['decode', 'prefill']
    decode, prefill = out.roles
    assert decode.required == 0.0
    assert decode.spare == pytest.approx(300.0)
    assert prefill.required == pytest.approx(100.0)
    assert prefill.spare == 0.0
    assert out.role('both') is None


@pytest.mark.parametrize('bad', [math.nan, math.inf, -5.0])
def test_unusable_per_replica_capacity_is_reported_as_zero(bad: float) -> None:
    result = AnalyzerResult(analyzer='x', variants=(capacity('a', bad),), totals=Totals())
    assert signal(result=result, live=True).capacity == (('a', 0.0),)


def test_an_infinite_scale_down_boundary_frees_nothing_where_wva_frees_everything() -> None:
    """Deviation (docs/decision-core.md): WVA's formula reads demand / +inf as 0 and calls the
    whole supply spare; here an infinite threshold is unusable and frees nothing."""
    supply, demand = 1000.0, 900.0
    wva = max(0.0, supply - demand / math.inf)  # WVA's arithmetic for a threshold > 0
    assert wva == supply
    assert spare_capacity(demand=demand, supply=supply, scale_down_boundary=math.inf) == 0
