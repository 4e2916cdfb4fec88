"""The multi-analyzer ballot (WVA v0.9.0, internal/engines/saturation/engine_v2.go): liveness,
anchor, any-up / all-down."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmscaler.domain.signals import (
    AnalyzerResult,
    AnalyzerSignal,
    RoleSignal,
    ScalingRequest,
    Totals,
)
from llmscaler.policies.wva.ballot import (
    LIVENESS_INTERVALS,
    Hold,
    Vote,
    cast,
    is_live,
    needed_replicas,
    removable_replicas,
)
from tests.support.analyze_fixtures import capacity


def result(name: str, *, informative: bool = True, prc: float = 100.0) -> AnalyzerResult:
    reason = 'P1-obs' if informative else 'no-data'
    return AnalyzerResult(
        analyzer=name,
        variants=(capacity('v2', prc, reason=reason), capacity('v1', prc, reason=reason)),
        # 170 / 0.85 − 100 = 100 required; spare 0.
        totals=Totals(supply=100.0, anticipated_supply=100.0, demand=170.0),
    )


def vote(name: str, *, voting: bool = True, live: bool = True, informative: bool = True) -> Vote:
    return Vote(result=result(name, informative=informative), voting=voting, live=live)


def sig(
    name: str, *, live: bool = True, required: float = 0.0, spare: float = 0.0, prc: float = 100.0
) -> AnalyzerSignal:
    return AnalyzerSignal(
        analyzer=name,
        live=live,
        score=1.0,
        roles=(RoleSignal(role='both', required=required, spare=spare),),
        capacity=(('v', prc),),
    )


# --- liveness ------------------------------------------------------------------------------------


def test_liveness_window_is_three_intervals_inclusive() -> None:
    assert LIVENESS_INTERVALS == 3
    # interval 30 → window 90 s: age 90 is live, 90.5 is not.
    assert is_live(last_informative=10.0, now=100.0, interval=30.0) is True
    assert is_live(last_informative=9.5, now=100.0, interval=30.0) is False


@pytest.mark.parametrize('interval', [0.0, -5.0, math.nan])
def test_a_non_positive_interval_is_taken_as_thirty_seconds(interval: float) -> None:
    # Window 3 × 30 = 90 s.
    assert is_live(last_informative=10.0, now=100.0, interval=interval) is True
    assert is_live(last_informative=9.0, now=100.0, interval=interval) is False


def test_never_informative_or_bad_times_are_not_live() -> None:
    assert is_live(last_informative=None, now=100.0, interval=30.0) is False
    assert is_live(last_informative=math.nan, now=100.0, interval=30.0) is False
    assert is_live(last_informative=90.0, now=math.inf, interval=30.0) is False


# --- cast ----------------------------------------------------------------------------------------


def test_saturation_anchors_when_it_votes_live_and_informative() -> None:
    request = cast(
        model_id='m',
        namespace='ns',
        votes=[vote('throughput'), vote('saturation')],
        priority=2.0,
    )
    assert isinstance(request, ScalingRequest)
    assert [v.variant for v in request.variants] == ['v1', 'v2']
    assert [s.analyzer for s in request.signals] == ['saturation', 'throughput']
    assert request.signals[0].roles[0].required == pytest.approx(100.0)
    assert request.priority == 2.0
    assert (request.model_id, request.namespace) == ('m', 'ns')


def test_variants_come_from_the_anchor() -> None:
    sat = Vote(result=result('saturation', prc=500.0), voting=True, live=True)
    other = Vote(result=result('throughput', prc=7.0), voting=True, live=True)
    request = cast(model_id='m', namespace='ns', votes=[other, sat], priority=1.0)
    assert isinstance(request, ScalingRequest)
    assert {v.per_replica_capacity for v in request.variants} == {500.0}


@pytest.mark.parametrize(
    'saturation',
    [
        vote('saturation', live=False),
        vote('saturation', voting=False),
        vote('saturation', informative=False),
    ],
)
def test_the_single_qualifying_other_analyzer_anchors_otherwise(saturation: Vote) -> None:
    other = Vote(result=result('throughput', prc=7.0), voting=True, live=True)
    request = cast(model_id='m', namespace='ns', votes=[saturation, other], priority=1.0)
    assert isinstance(request, ScalingRequest)
    assert {v.per_replica_capacity for v in request.variants} == {7.0}


def test_a_non_voting_analyzer_sends_no_signal() -> None:
    request = cast(
        model_id='m',
        namespace='ns',
        votes=[vote('saturation', voting=False), vote('throughput')],
        priority=1.0,
    )
    assert isinstance(request, ScalingRequest)
    assert [s.analyzer for s in request.signals] == ['throughput']


def test_a_voting_analyzer_that_is_not_live_still_sends_its_signal_marked_not_live() -> None:
    request = cast(
        model_id='m',
        namespace='ns',
        votes=[vote('saturation'), vote('throughput', live=False)],
        priority=1.0,
    )
    assert isinstance(request, ScalingRequest)
    assert [(s.analyzer, s.live) for s in request.signals] == [
        ('saturation', True),
        ('throughput', False),
    ]


def test_no_qualifying_analyzer_holds() -> None:
    verdict = cast(
        model_id='m',
        namespace='ns',
        votes=[vote('saturation', live=False), vote('throughput', informative=False)],
        priority=1.0,
    )
    assert isinstance(verdict, Hold)
    assert verdict.reason == 'NoLiveAnalyzer'
    assert 'ns/m' in verdict.message


def test_no_votes_at_all_holds() -> None:
    verdict = cast(model_id='m', namespace='ns', votes=[], priority=1.0)
    assert isinstance(verdict, Hold)
    assert verdict.reason == 'NoLiveAnalyzer'


def test_two_qualifying_non_saturation_analyzers_hold() -> None:
    verdict = cast(
        model_id='m',
        namespace='ns',
        votes=[vote('saturation', live=False), vote('throughput'), vote('queueing-model')],
        priority=1.0,
    )
    assert isinstance(verdict, Hold)
    assert verdict.reason == 'AmbiguousAnchor'
    assert 'queueing-model, throughput' in verdict.message


def test_two_non_saturation_analyzers_do_not_matter_when_saturation_anchors() -> None:
    request = cast(
        model_id='m',
        namespace='ns',
        votes=[vote('saturation'), vote('throughput'), vote('queueing-model')],
        priority=1.0,
    )
    assert isinstance(request, ScalingRequest)
    assert [s.analyzer for s in request.signals] == ['queueing-model', 'saturation', 'throughput']


def test_a_non_finite_priority_becomes_the_default() -> None:
    request = cast(model_id='m', namespace='ns', votes=[vote('saturation')], priority=math.nan)
    assert isinstance(request, ScalingRequest)
    assert request.priority == 1.0


# --- any-up / all-down helpers -------------------------------------------------------------------


def test_needed_is_the_largest_ceiling_over_live_signals() -> None:
    # a: ⌈1000 / 400⌉ = ⌈2.5⌉ = 3; b: ⌈100 / 30⌉ = ⌈3.33⌉ = 4 → 4.
    signals = [sig('a', required=1000.0, prc=400.0), sig('b', required=100.0, prc=30.0)]
    assert needed_replicas(signals=signals, role='both', variant='v') == 4


def test_needed_ignores_signals_that_are_not_live() -> None:
    signals = [sig('a', required=1000.0, prc=400.0), sig('b', live=False, required=100.0, prc=30.0)]
    assert needed_replicas(signals=signals, role='both', variant='v') == 3


@pytest.mark.parametrize('prc', [0.0, -1.0, math.nan])
def test_needed_skips_a_signal_that_cannot_price_the_variant(prc: float) -> None:
    signals = [sig('a', required=1000.0, prc=400.0), sig('b', required=100.0, prc=prc)]
    assert needed_replicas(signals=signals, role='both', variant='v') == 3


def test_needed_is_zero_without_a_usable_signal() -> None:
    assert needed_replicas(signals=[], role='both', variant='v') == 0
    assert needed_replicas(signals=[sig('a', required=500.0)], role='prefill', variant='v') == 0
    assert needed_replicas(signals=[sig('a', required=500.0)], role='both', variant='w') == 0
    assert needed_replicas(signals=[sig('a', required=math.inf)], role='both', variant='v') == 0


def test_removable_is_the_smallest_floor_over_live_signals() -> None:
    # a: ⌊1000 / 400⌋ = ⌊2.5⌋ = 2; b: ⌊100 / 30⌋ = 3 → 2.
    signals = [sig('a', spare=1000.0, prc=400.0), sig('b', spare=100.0, prc=30.0)]
    assert removable_replicas(signals=signals, role='both', variant='v') == 2


def test_a_live_signal_without_spare_vetoes_even_if_it_cannot_price_the_variant() -> None:
    signals = [sig('a', spare=1000.0, prc=400.0), sig('b', spare=0.0, prc=0.0)]
    assert removable_replicas(signals=signals, role='both', variant='v') == 0


def test_a_signal_that_is_not_live_neither_vetoes_nor_constrains() -> None:
    signals = [
        sig('a', spare=1000.0, prc=400.0),
        sig('b', live=False, spare=0.0),
        sig('c', live=False, spare=10.0, prc=30.0),
    ]
    assert removable_replicas(signals=signals, role='both', variant='v') == 2


def test_a_signal_that_cannot_price_the_variant_does_not_constrain() -> None:
    signals = [sig('a', spare=1000.0, prc=400.0), sig('b', spare=5.0, prc=0.0)]
    assert removable_replicas(signals=signals, role='both', variant='v') == 2


def test_removable_is_zero_without_a_live_signal() -> None:
    assert removable_replicas(signals=[], role='both', variant='v') == 0
    assert (
        removable_replicas(signals=[sig('a', live=False, spare=900.0)], role='both', variant='v')
        == 0
    )
    # A live signal without an entry for the role abstains; nothing is left to decide.
    assert removable_replicas(signals=[sig('a', spare=900.0)], role='decode', variant='v') == 0


def test_nan_spare_is_a_veto() -> None:
    signals = [sig('a', spare=1000.0, prc=400.0), sig('b', spare=math.nan)]
    assert removable_replicas(signals=signals, role='both', variant='v') == 0


live_signal = st.builds(
    lambda name, rc, sc, prc: sig(name, required=rc, spare=sc, prc=prc),
    st.sampled_from(['a', 'b', 'c']),
    st.floats(min_value=0.0, max_value=1e6, allow_subnormal=False),
    st.floats(min_value=0.0, max_value=1e6, allow_subnormal=False),
    st.floats(min_value=0.5, max_value=1e4),
)


@given(st.lists(live_signal, min_size=1, max_size=4))
def test_any_up_covers_and_all_down_respects_every_live_signal(
    signals: list[AnalyzerSignal],
) -> None:
    needed = needed_replicas(signals=signals, role='both', variant='v')
    removable = removable_replicas(signals=signals, role='both', variant='v')
    for entry in signals:
        scope = entry.roles[0]
        prc = entry.capacity_of('v')
        assert needed * prc >= scope.required * (1 - 1e-12)
        assert removable * prc <= scope.spare * (1 + 1e-12)
    assert removable >= 0
