"""The percentage-based saturation analyzer (WVA, internal/saturationv1/analyzer.go).

Defaults: T_kv 0.80, T_q 5, S_kv 0.10, S_q 3. Every expected value below is worked by hand from
those formulas; float noise (0.8 − 0.5 = 0.30000000000000004) is absorbed with pytest.approx.
"""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmscaler.analyze.saturation.percentage import (
    PercentageAnalysis,
    analyze,
    calculate_targets,
    decide_percentage,
)
from llmscaler.config.resolved import SaturationConfig
from llmscaler.domain.basics import Role
from llmscaler.domain.signals import VariantTarget
from llmscaler.domain.snapshot import ReplicaMetrics, Variant

DEFAULT = SaturationConfig()


def rep(variant: str, index: int, *, kv: float, queue: float = 0.0) -> ReplicaMetrics:
    return ReplicaMetrics(
        pod=f'{variant}-{index}',
        variant=variant,
        namespace='ns',
        observed_at=0.0,
        kv_usage=kv,
        queue_length=queue,
    )


def var(
    name: str,
    *,
    cost: float = 10.0,
    current: int = 1,
    pending: int = 0,
    min_replicas: int = 1,
    max_replicas: int = 10,
    role: Role = 'both',
) -> Variant:
    return Variant(
        name=name,
        namespace='ns',
        model_id='m',
        cost=cost,
        role=role,
        min_replicas=min_replicas,
        max_replicas=max_replicas,
        current_replicas=current,
        ready_replicas=current - pending,
        pending_replicas=pending,
    )


def neutral(*, scale_up: bool = False, scale_down_safe: bool = False) -> PercentageAnalysis:
    """An analysis of two replicas with the scaling flags set by hand."""
    return PercentageAnalysis(
        non_saturated_count=2,
        saturated_count=0,
        avg_spare_kv=0.5,
        avg_spare_queue=4.0,
        scale_up=scale_up,
        scale_down_safe=scale_down_safe,
    )


def targets_of(result: tuple[VariantTarget, ...]) -> dict[str, int]:
    return {t.variant: t.target for t in result}


# --- analyze -------------------------------------------------------------------------------------


def test_worked_example_with_one_saturated_replica() -> None:
    # kv 0.9 >= 0.8 → saturated. The others: spare kv 0.3, 0.2 → mean 0.25;
    # spare queue 5−1 = 4, 5−2 = 3 → mean 3.5. Scale-up: 0.25 < 0.10? no; 3.5 < 3? no.
    # Scale-down, N = 2: L_kv = 0.8 − 0.25 = 0.55, ×2/1 = 1.1, spare 0.8 − 1.1 = −0.3 < 0.1 → no.
    result = analyze(
        replicas=[rep('a', 0, kv=0.5, queue=1), rep('a', 1, kv=0.6, queue=2), rep('b', 0, kv=0.9)],
        config=DEFAULT,
    )
    assert result.non_saturated_count == 2
    assert result.saturated_count == 1
    assert result.avg_spare_kv == pytest.approx(0.25)
    assert result.avg_spare_queue == pytest.approx(3.5)
    assert result.scale_up is False
    assert result.scale_down_safe is False
    assert result.excluded_count == 0


def test_scale_down_is_safe_when_the_redistributed_load_keeps_both_spares() -> None:
    # Three replicas at kv 0.1, queue 0: avg spare kv 0.7, queue 5.
    # N = 3: L_kv = 0.1 × 3/2 = 0.15 → spare 0.65 >= 0.10; L_q = 0 → spare 5 >= 3 → safe.
    result = analyze(replicas=[rep('a', i, kv=0.1) for i in range(3)], config=DEFAULT)
    assert result.avg_spare_kv == pytest.approx(0.7)
    assert result.scale_down_safe is True
    assert result.scale_up is False


def test_scale_down_needs_the_queue_condition_too() -> None:
    # Two replicas kv 0.1, queue 2: KV after removal 0.8 − 0.1 × 2 = 0.6 >= 0.1 (fine), but
    # queue load 5 − 3 = 2 → ×2 = 4 → spare 1 < 3 → unsafe. Scale-up: 3 < 3 is false.
    result = analyze(replicas=[rep('a', i, kv=0.1, queue=2) for i in range(2)], config=DEFAULT)
    assert result.avg_spare_queue == 3.0
    assert result.scale_up is False
    assert result.scale_down_safe is False


def test_scale_down_needs_the_kv_condition_too() -> None:
    # Two replicas kv 0.4, queue 0: queue after removal 5 >= 3 (fine), but KV load 0.4 → ×2 = 0.8
    # → spare 0.0 < 0.1 → unsafe.
    result = analyze(replicas=[rep('a', i, kv=0.4) for i in range(2)], config=DEFAULT)
    assert result.scale_down_safe is False


def test_scale_down_queue_boundary_is_inclusive() -> None:
    # Two replicas queue 1: load 1 → ×2 = 2 → spare 5 − 2 = 3 >= 3 → safe (>=, not >).
    result = analyze(replicas=[rep('a', i, kv=0.0, queue=1) for i in range(2)], config=DEFAULT)
    assert result.scale_down_safe is True


def test_one_non_saturated_replica_never_approves_scale_down() -> None:
    # N = 1 < 2, however idle; saturated replicas do not count towards N.
    result = analyze(replicas=[rep('a', 0, kv=0.0), rep('a', 1, kv=0.95)], config=DEFAULT)
    assert result.non_saturated_count == 1
    assert result.scale_down_safe is False


def test_scale_up_triggers_are_strict() -> None:
    # Exact binary numbers: T_kv 0.75, S_kv 0.25. kv 0.5 → spare 0.25, not < 0.25 → no scale-up;
    # kv 0.625 → spare 0.125 < 0.25 → scale-up.
    config = SaturationConfig(kv_cache_threshold=0.75, kv_spare_trigger=0.25)
    assert analyze(replicas=[rep('a', 0, kv=0.5)], config=config).scale_up is False
    assert analyze(replicas=[rep('a', 0, kv=0.625)], config=config).scale_up is True
    # Queue: 5 − 2 = 3, not < 3; 5 − 3 = 2 < 3.
    assert analyze(replicas=[rep('a', 0, kv=0.0, queue=2)], config=DEFAULT).scale_up is False
    assert analyze(replicas=[rep('a', 0, kv=0.0, queue=3)], config=DEFAULT).scale_up is True


def test_either_trigger_alone_fires_scale_up() -> None:
    # kv 0.75 → spare 0.05 < 0.10 (KV fires) while the queue spare is 5.
    assert analyze(replicas=[rep('a', 0, kv=0.75)], config=DEFAULT).scale_up is True


def test_all_saturated_gives_zero_averages_and_scale_up() -> None:
    result = analyze(replicas=[rep('a', 0, kv=0.8), rep('a', 1, kv=0.1, queue=5)], config=DEFAULT)
    assert result.saturated_count == 2  # kv 0.8 >= 0.8; queue 5 >= 5: both bounds inclusive
    assert (result.avg_spare_kv, result.avg_spare_queue) == (0.0, 0.0)
    assert result.scale_up is True  # 0 < 0.10


def test_all_saturated_with_zero_triggers_does_not_scale_up() -> None:
    config = SaturationConfig(kv_spare_trigger=0.0, queue_spare_trigger=0.0)
    assert analyze(replicas=[rep('a', 0, kv=0.9)], config=config).scale_up is False  # 0 < 0


def test_no_replicas_means_no_signal() -> None:
    result = analyze(replicas=[], config=DEFAULT)
    assert result == PercentageAnalysis(
        non_saturated_count=0,
        saturated_count=0,
        avg_spare_kv=0.0,
        avg_spare_queue=0.0,
        scale_up=False,
        scale_down_safe=False,
    )


def test_queue_length_is_truncated_to_an_integer() -> None:
    # 4.9 → 4 < 5: not saturated, spare 5 − 4 = 1 (not 0.1).
    result = analyze(replicas=[rep('a', 0, kv=0.0, queue=4.9)], config=DEFAULT)
    assert result.saturated_count == 0
    assert result.avg_spare_queue == 1.0


@pytest.mark.parametrize(
    ('kv', 'queue'),
    [(math.nan, 0.0), (math.inf, 0.0), (0.1, math.nan), (0.1, -math.inf), (-0.1, 0.0), (0.1, -1)],
)
def test_unusable_readings_exclude_the_replica(kv: float, queue: float) -> None:
    # The bad replica is dropped: one good idle replica stays, N = 1.
    result = analyze(
        replicas=[rep('a', 0, kv=kv, queue=queue), rep('a', 1, kv=0.2)], config=DEFAULT
    )
    assert result.excluded_count == 1
    assert result.non_saturated_count == 1
    assert result.avg_spare_kv == pytest.approx(0.6)  # 0.8 − 0.2
    assert result.avg_kv_usage == (('a', 0.2),)


def test_only_unusable_replicas_is_the_same_as_none() -> None:
    result = analyze(replicas=[rep('a', 0, kv=math.nan)], config=DEFAULT)
    assert result.analyzed_count == 0
    assert result.scale_up is False


def test_per_variant_kv_usage_includes_saturated_replicas() -> None:
    # a: (0.9 + 0.5) / 2 = 0.7 even though 0.9 is saturated; b: 0.2. Sorted by name.
    result = analyze(
        replicas=[rep('b', 0, kv=0.2), rep('a', 0, kv=0.9), rep('a', 1, kv=0.5)], config=DEFAULT
    )
    assert [name for name, _ in result.avg_kv_usage] == ['a', 'b']
    assert dict(result.avg_kv_usage)['a'] == pytest.approx(0.7)


readings = st.tuples(
    st.floats(min_value=0.0, max_value=1.2, allow_nan=False),
    st.integers(min_value=0, max_value=12),
)


@given(st.lists(readings, max_size=12), st.data())
def test_analysis_does_not_depend_on_replica_order(
    values: list[tuple[float, int]], data: st.DataObject
) -> None:
    replicas = [rep(f'v{i % 3}', i, kv=kv, queue=q) for i, (kv, q) in enumerate(values)]
    shuffled = data.draw(st.permutations(replicas))
    assert analyze(replicas=shuffled, config=DEFAULT) == analyze(replicas=replicas, config=DEFAULT)


@given(st.lists(readings, min_size=1, max_size=12), st.floats(min_value=0.8, max_value=1.5))
def test_saturated_replicas_do_not_move_spares_or_scale_down(
    values: list[tuple[float, int]], saturated_kv: float
) -> None:
    replicas = [rep('a', i, kv=kv, queue=q) for i, (kv, q) in enumerate(values)]
    before = analyze(replicas=replicas, config=DEFAULT)
    after = analyze(replicas=[*replicas, rep('b', 0, kv=saturated_kv)], config=DEFAULT)
    assert after.saturated_count == before.saturated_count + 1
    assert (after.avg_spare_kv, after.avg_spare_queue) == (
        before.avg_spare_kv,
        before.avg_spare_queue,
    )
    assert after.scale_down_safe == before.scale_down_safe


# --- calculate_targets ---------------------------------------------------------------------------


def test_scale_up_adds_one_to_the_cheapest_ties_by_lowest_name() -> None:
    variants = [var('c', cost=10.0), var('a', cost=20.0, current=2), var('b', cost=10.0)]
    result = calculate_targets(variants=variants, analysis=neutral(scale_up=True), desired={})
    assert [t.variant for t in result] == ['a', 'b', 'c']
    assert targets_of(result) == {'a': 2, 'b': 2, 'c': 1}
    assert {t.reason for t in result} == {'saturation-only mode'}


def test_scale_down_removes_one_from_the_most_expensive_above_one_ties_by_last_name() -> None:
    # a is the most expensive but at 1 replica, so it is not a candidate; b and c tie at 20 →
    # the alphabetically last name (c) loses one.
    variants = [
        var('a', cost=30.0, current=1),
        var('b', cost=20.0, current=3),
        var('c', cost=20.0, current=2),
    ]
    result = calculate_targets(
        variants=variants, analysis=neutral(scale_down_safe=True), desired={}
    )
    assert targets_of(result) == {'a': 1, 'b': 3, 'c': 1}


def test_scale_up_wins_over_scale_down() -> None:
    variants = [var('a', cost=1.0, current=2), var('b', cost=2.0, current=2)]
    both = neutral(scale_up=True, scale_down_safe=True)
    assert targets_of(calculate_targets(variants=variants, analysis=both, desired={})) == {
        'a': 3,
        'b': 2,
    }


def test_no_signal_keeps_current() -> None:
    variants = [var('a', current=2), var('b', current=3)]
    result = calculate_targets(variants=variants, analysis=neutral(), desired={})
    assert targets_of(result) == {'a': 2, 'b': 3}


def test_a_cheapest_variant_at_zero_replicas_is_chosen_for_scale_up() -> None:
    # Deviation from upstream (which cannot see variants at 0): the cheap one wakes.
    variants = [
        var('cheap', cost=5.0, current=0, min_replicas=0),
        var('dear', cost=10.0, current=2),
    ]
    result = calculate_targets(variants=variants, analysis=neutral(scale_up=True), desired={})
    assert targets_of(result) == {'cheap': 1, 'dear': 2}


def test_a_cheapest_variant_at_its_maximum_passes_the_scale_up_to_the_next_cheapest() -> None:
    # Upstream gives the +1 to `cheap` and the clamp takes it back: the model never grows.
    variants = [
        var('cheap', cost=1.0, current=4, max_replicas=4),
        var('dear', cost=5.0, current=1, max_replicas=4),
    ]
    result = calculate_targets(variants=variants, analysis=neutral(scale_up=True), desired={})
    assert targets_of(result) == {'cheap': 4, 'dear': 2}


def test_every_variant_at_its_maximum_means_no_change() -> None:
    variants = [var('a', current=2, max_replicas=2), var('b', cost=20.0, current=3, max_replicas=3)]
    result = calculate_targets(variants=variants, analysis=neutral(scale_up=True), desired={})
    assert targets_of(result) == {'a': 2, 'b': 3}


def test_nan_cost_is_never_the_cheapest() -> None:
    variants = [var('a', cost=math.nan), var('b', cost=50.0)]
    result = calculate_targets(variants=variants, analysis=neutral(scale_up=True), desired={})
    assert targets_of(result) == {'a': 1, 'b': 2}


def test_desired_differing_from_current_freezes_the_group_at_desired() -> None:
    variants = [var('a', cost=1.0, current=2), var('b', cost=2.0, current=1)]
    result = calculate_targets(
        variants=variants, analysis=neutral(scale_up=True), desired={'a': 3, 'b': 1}
    )
    assert targets_of(result) == {'a': 3, 'b': 1}
    assert {t.reason for t in result} == {'in-transition'}


def test_pending_replicas_freeze_the_group_at_current() -> None:
    variants = [var('a', cost=1.0, current=2), var('b', cost=2.0, current=3, pending=1)]
    result = calculate_targets(variants=variants, analysis=neutral(scale_up=True), desired={})
    assert targets_of(result) == {'a': 2, 'b': 3}
    assert {t.reason for t in result} == {'in-transition'}


@pytest.mark.parametrize('wanted', [0, 2, -1])
def test_desired_zero_equal_or_negative_is_not_a_transition(wanted: int) -> None:
    variants = [var('a', cost=1.0, current=2)]
    result = calculate_targets(
        variants=variants, analysis=neutral(scale_up=True), desired={'a': wanted}
    )
    assert result[0].target == 3
    assert result[0].reason == 'saturation-only mode'


def test_transition_skips_the_bounds_as_upstream_returns_early() -> None:
    variants = [var('a', current=5, max_replicas=3), var('b', current=1, pending=1)]
    result = calculate_targets(variants=variants, analysis=neutral(), desired={})
    assert targets_of(result) == {'a': 5, 'b': 1}


def test_bounds_apply_after_the_decision() -> None:
    # a is at its max 2, so the scale-up goes to the next cheapest, b (upstream would give it to
    # a and clamp it away); c at 0 with min 1 is raised to 1; d with max 0 has no upper bound.
    variants = [
        var('a', cost=1.0, current=2, max_replicas=2),
        var('b', cost=2.0, current=1),
        var('c', cost=3.0, current=0, min_replicas=1),
        var('d', cost=4.0, current=7, max_replicas=0),
    ]
    result = calculate_targets(variants=variants, analysis=neutral(scale_up=True), desired={})
    assert targets_of(result) == {'a': 2, 'b': 2, 'c': 1, 'd': 7}


def test_max_check_uses_the_pre_min_target() -> None:
    # Only inverted bounds (min > max) show the quirk. min 3, max 2, target 1: the min check
    # raises it to 3, the max check compares the pre-min 1 with 2 and does nothing → 3 (> max).
    # min 5, max 2, target 3: the min check raises it to 5, the max check sees 3 > 2 → 2.
    low = calculate_targets(
        variants=[var('a', current=1, min_replicas=3, max_replicas=2)],
        analysis=neutral(),
        desired={},
    )
    assert low[0].target == 3
    middle = calculate_targets(
        variants=[var('a', current=3, min_replicas=5, max_replicas=2)],
        analysis=neutral(),
        desired={},
    )
    assert middle[0].target == 2


def test_no_analyzed_replica_holds_at_desired_or_current() -> None:
    empty = analyze(replicas=[], config=DEFAULT)
    variants = [var('a', current=2, max_replicas=1), var('b', current=1), var('c', current=4)]
    result = calculate_targets(variants=variants, analysis=empty, desired={'b': 3, 'c': 0})
    # Not clamped (no decision was made): a stays at 2; b holds its positive desired 3; c at 4.
    assert targets_of(result) == {'a': 2, 'b': 3, 'c': 4}
    assert {t.reason for t in result} == {'no-metrics'}


def test_targets_carry_the_analysis_figures() -> None:
    analysis = analyze(replicas=[rep('a', 0, kv=0.5, queue=1), rep('a', 1, kv=0.9)], config=DEFAULT)
    result = calculate_targets(variants=[var('a'), var('b')], analysis=analysis, desired={})
    figures = dict(result[0].figures)
    assert figures['avg_spare_kv'] == pytest.approx(0.3)
    assert figures['avg_spare_queue'] == 4.0
    assert (figures['saturated'], figures['non_saturated']) == (1.0, 1.0)
    assert figures['avg_kv_usage'] == pytest.approx(0.7)  # (0.5 + 0.9) / 2
    assert 'avg_kv_usage' not in dict(result[1].figures)  # b had no reading
    assert [name for name, _ in result[0].figures] == sorted(name for name, _ in result[0].figures)


@given(
    st.lists(
        st.tuples(st.integers(0, 6), st.integers(0, 3), st.integers(1, 8)), min_size=1, max_size=4
    ),
    st.booleans(),
    st.booleans(),
)
def test_targets_move_at_most_one_variant_by_one_within_bounds(
    specs: list[tuple[int, int, int]], up: bool, down: bool
) -> None:
    variants = [
        var(f'v{i}', cost=float(i % 2), current=cur, min_replicas=lo, max_replicas=max(lo, hi))
        for i, (cur, lo, hi) in enumerate(specs)
    ]
    result = calculate_targets(
        variants=variants, analysis=neutral(scale_up=up, scale_down_safe=down), desired={}
    )
    moved = 0
    for variant, target in zip(variants, result, strict=True):
        assert variant.min_replicas <= target.target <= variant.max_replicas
        clamped = min(max(variant.current_replicas, variant.min_replicas), variant.max_replicas)
        if target.target != clamped:
            moved += 1
            assert abs(target.target - clamped) == 1
    assert moved <= 1


# --- decide_percentage ---------------------------------------------------------------------------


def test_each_role_group_is_analysed_and_decided_on_its_own() -> None:
    # prefill p: saturated → +1. decode d: two idle replicas → N = 2, L_kv 0.1 × 2 = 0.2 →
    # spare 0.6 >= 0.1, queue spare 5 → safe → 2 − 1 = 1. both b: no replicas → no-metrics hold.
    variants = [
        var('p', role='prefill', current=1),
        var('d', role='decode', current=2),
        var('b', role='both', current=2),
    ]
    replicas = [
        rep('p', 0, kv=0.95),
        rep('d', 0, kv=0.1),
        rep('d', 1, kv=0.1),
        rep('stranger', 0, kv=0.99),
    ]
    result = decide_percentage(variants=variants, replicas=replicas, config=DEFAULT, desired={})
    assert [t.variant for t in result] == ['b', 'd', 'p']
    assert targets_of(result) == {'b': 2, 'd': 1, 'p': 2}
    assert [t.reason for t in result] == [
        'no-metrics',
        'saturation-only mode',
        'saturation-only mode',
    ]


def test_a_transition_in_one_role_does_not_block_another() -> None:
    variants = [var('p', role='prefill', current=1, pending=1), var('d', role='decode')]
    replicas = [rep('p', 0, kv=0.95), rep('d', 0, kv=0.95)]
    result = decide_percentage(variants=variants, replicas=replicas, config=DEFAULT, desired={})
    assert targets_of(result) == {'d': 2, 'p': 1}


def test_unknown_role_counts_as_both() -> None:
    odd = dataclasses.replace(var('x', cost=1.0), role='sidecar')  # type: ignore[arg-type]
    variants = [odd, var('y', cost=2.0)]
    replicas = [rep('y', 0, kv=0.95)]
    # One group: y's saturated replica drives scale-up of the cheapest of both, x.
    result = decide_percentage(variants=variants, replicas=replicas, config=DEFAULT, desired={})
    assert targets_of(result) == {'x': 2, 'y': 1}


def test_engine_matrix_case_cheap_saturated_expensive_near_saturated() -> None:
    # cheap: kv 0.85 and 0.86 → saturated; expensive: kv 0.75 → spare 0.05 < 0.10 → scale-up
    # on the cheapest: 2 → 3.
    variants = [var('cheap', cost=2.0, current=2), var('expensive', cost=4.0, current=1)]
    replicas = [
        rep('cheap', 0, kv=0.85, queue=6),
        rep('cheap', 1, kv=0.86, queue=2),
        rep('expensive', 0, kv=0.75, queue=1),
    ]
    result = decide_percentage(variants=variants, replicas=replicas, config=DEFAULT, desired={})
    assert targets_of(result) == {'cheap': 3, 'expensive': 1}
