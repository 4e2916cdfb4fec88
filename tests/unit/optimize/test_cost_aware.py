"""Tests of the cost-aware optimizer against worked cases of WVA's (v0.9.0,
internal/engines/pipeline/cost_aware_optimizer.go)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmscaler.domain.basics import Role
from llmscaler.domain.signals import (
    AnalyzerSignal,
    RoleSignal,
    ScalingRequest,
    VariantCapacity,
    VariantTarget,
)
from llmscaler.optimize.cost_aware import joint_commit, joint_sizes, optimize


def vc(
    name: str,
    *,
    cost: float = 10.0,
    prc: float = 100.0,
    current: int = 1,
    min_replicas: int = 0,
    max_replicas: int = 10,
    role: Role = 'both',
    pending: int = 0,
    demand: float = 0.0,
) -> VariantCapacity:
    return VariantCapacity(
        variant=name,
        namespace='ns',
        role=role,
        cost=cost,
        accelerator='X',
        gpus_per_replica=1,
        min_replicas=min_replicas,
        max_replicas=max_replicas,
        current_replicas=current,
        per_replica_capacity=prc,
        replica_count=max(0, current - pending),
        pending=pending,
        total_demand=demand,
        reason='P1-obs',
    )


def sig(
    variants: list[VariantCapacity],
    *,
    analyzer: str = 'saturation',
    live: bool = True,
    score: float = 1.0,
    roles: dict[Role, tuple[float, float]] | None = None,
    capacity: dict[str, float] | None = None,
) -> AnalyzerSignal:
    """A signal; `roles` maps role → (RC, SC); capacity defaults to the anchor's PRCs."""
    scopes: dict[Role, tuple[float, float]] = roles if roles is not None else both(0.0)
    prcs = (
        capacity if capacity is not None else {v.variant: v.per_replica_capacity for v in variants}
    )
    return AnalyzerSignal(
        analyzer=analyzer,
        live=live,
        score=score,
        roles=tuple(RoleSignal(role=r, required=rc, spare=sc) for r, (rc, sc) in scopes.items()),
        capacity=tuple(sorted(prcs.items())),
    )


def run(variants: list[VariantCapacity], *signals: AnalyzerSignal) -> dict[str, int]:
    result = optimize(
        request=ScalingRequest(
            model_id='m', namespace='ns', variants=tuple(variants), signals=tuple(signals)
        )
    )
    return {t.variant: t.target for t in result}


def both(rc: float, sc: float = 0.0) -> dict[Role, tuple[float, float]]:
    return {'both': (rc, sc)}


# ------------------------------------------------------------------------------ scale-up


def test_single_variant_adds_ceil_of_required_over_prc() -> None:
    # RC 250, PRC 100: n = ⌈2.5⌉ = 3, util = 300/250 = 1.2, k = max(⌊1.2·250/100⌋, 1) = 3.
    variants = [vc('a', current=1)]
    assert run(variants, sig(variants, roles=both(250.0))) == {'a': 4}


def test_overpay_rc100_picks_a_by_efficiency() -> None:
    # Known weakness (#1251), kept: A costs 10/200 = 0.05 per unit, B 6/100 = 0.06, so one A is
    # bought (10) although one B (6) would cover RC = 100 as well.
    variants = [vc('a', cost=10.0, prc=200.0), vc('b', cost=6.0, prc=100.0)]
    assert run(variants, sig(variants, roles=both(100.0))) == {'a': 2, 'b': 1}


def test_spill_to_next_variant_at_max_replicas() -> None:
    # a: cost 5/100 = 0.05 (best), headroom 3 − 2 = 1; b: 10/100 = 0.1. RC = 350.
    # Round 1: a: n = min(⌈3.5⌉, 1) = 1, util = 100/350, Δ = 0.2857,
    #          k = max(⌊0.2857·350/100⌋, 1) = 1 → a = 3, remaining 250.
    # Round 2: a at max → b: n = ⌈2.5⌉ = 3, util 1.2, k = ⌊1.2·250/100⌋ = 3 → b = 4.
    variants = [vc('a', cost=5.0, current=2, max_replicas=3), vc('b', cost=10.0, current=1)]
    assert run(variants, sig(variants, roles=both(350.0))) == {'a': 3, 'b': 4}


def test_scale_up_stops_when_every_variant_is_at_max() -> None:
    # 1000 needed, but a can reach 3 and b 2: both end at max, the rest is unserved.
    variants = [vc('a', cost=5.0, current=2, max_replicas=3), vc('b', current=1, max_replicas=2)]
    assert run(variants, sig(variants, roles=both(1000.0))) == {'a': 3, 'b': 2}


def test_pending_already_covering_demand_means_no_scale_up() -> None:
    # The analyzer counts the 2 pending replicas as anticipated supply, so RC is 0 here; with
    # no spare either nothing moves (no second scale-up while pods start).
    variants = [vc('a', current=3, pending=2)]
    assert run(variants, sig(variants, roles=both(0.0, 0.0))) == {'a': 3}


def test_pending_is_not_a_reason_to_skip_a_variant() -> None:
    # a is the most efficient (5/100) and has 2 pending; RC 150 still goes to it: ⌈1.5⌉ = 2.
    variants = [vc('a', cost=5.0, current=3, pending=2), vc('b', cost=10.0)]
    assert run(variants, sig(variants, roles=both(150.0))) == {'a': 5, 'b': 1}


def test_defect_fix_zero_replica_sibling_is_eligible() -> None:
    # Upstream never optimises a variant with spec.replicas == 0. Here the cheap one at zero
    # (5/100 = 0.05 vs 20/100 = 0.2, PRC from capacity knowledge) is woken: ⌈100/100⌉ = 1.
    variants = [vc('cheap', cost=5.0, current=0), vc('dear', cost=20.0, current=2)]
    assert run(variants, sig(variants, roles=both(100.0))) == {'cheap': 1, 'dear': 2}


def test_zero_replica_variant_without_capacity_knowledge_is_skipped() -> None:
    variants = [vc('cheap', cost=5.0, current=0, prc=0.0), vc('dear', cost=20.0, current=2)]
    assert run(variants, sig(variants, roles=both(100.0))) == {'cheap': 0, 'dear': 3}


def test_defect_fix_equal_efficiency_breaks_ties_by_name() -> None:
    # Identical cost and PRC: the choice is 'a' whatever the input order.
    forward = [vc('a', current=1), vc('b', current=1)]
    backward = list(reversed(forward))
    assert run(forward, sig(forward, roles=both(100.0))) == {'a': 2, 'b': 1}
    assert run(backward, sig(backward, roles=both(100.0))) == {'a': 2, 'b': 1}


def test_equal_efficiency_prefers_the_cheaper_replica() -> None:
    # x: 10/200 = 0.05, y: 5/100 = 0.05. The tie goes to y (absolute cost 5 < 10), then name.
    variants = [vc('x', cost=10.0, prc=200.0), vc('y', cost=5.0, prc=100.0)]
    assert run(variants, sig(variants, roles=both(100.0))) == {'x': 1, 'y': 2}


def test_any_up_takes_the_signal_needing_most_replicas() -> None:
    # saturation: 100 tokens / 100 per replica = 1; throughput: 3 req/s / 1 per replica = 3.
    # n = max = 3 → +3; both remainders then reach 0 (100 − 300 → 0, 3 − 3 = 0).
    variants = [vc('a', current=1)]
    saturation = sig(variants, roles=both(100.0))
    throughput = sig(variants, analyzer='throughput', roles=both(3.0), capacity={'a': 1.0})
    assert run(variants, saturation, throughput) == {'a': 4}


def test_non_live_signal_takes_no_part_in_scale_up() -> None:
    variants = [vc('a', current=1)]
    stale = sig(variants, analyzer='throughput', live=False, roles=both(900.0))
    assert run(variants, sig(variants, roles=both(100.0)), stale) == {'a': 2}


def test_signal_that_cannot_price_the_variant_abstains() -> None:
    # throughput has no PRC for 'a' (0): only saturation sizes it, ⌈200/100⌉ = 2.
    variants = [vc('a', current=1)]
    blind = sig(variants, analyzer='throughput', roles=both(50.0), capacity={})
    assert run(variants, sig(variants, roles=both(200.0)), blind) == {'a': 3}


# ---------------------------------------------------------------------- P/D joint commit


def pd_variants(*, prefill_max: int = 10, decode_max: int = 10) -> list[VariantCapacity]:
    return [
        vc('d', role='decode', max_replicas=decode_max),
        vc('p', role='prefill', max_replicas=prefill_max),
    ]


def test_joint_commit_gs22_prefill_plus_1_decode_plus_3() -> None:
    # prefill RC 200, decode RC 600, PRC 100 each; prefill headroom 2 − 1 = 1.
    # prefill: n = min(⌈2⌉, 1) = 1, util = 100/200 = 0.5; decode: n = 6, util = 600/600 = 1.
    # Δ = 0.5 → k_p = max(⌊0.5·200/100⌋, 1) = 1, k_d = max(⌊0.5·600/100⌋, 1) = 3.
    # Next round prefill (still 100 short) has no eligible variant: the pair stops there.
    variants = pd_variants(prefill_max=2)
    signal = sig(variants, roles={'prefill': (200.0, 0.0), 'decode': (600.0, 0.0)})
    assert run(variants, signal) == {'p': 2, 'd': 4}


def test_joint_commit_advances_roles_by_the_same_fraction() -> None:
    # prefill RC 150: n = 2, util = 200/150 = 1.333; decode RC 250: n = 3, util = 300/250 = 1.2.
    # Δ = 1.2 → k_p = max(⌊1.2·150/100⌋ = ⌊1.8⌋, 1) = 1, k_d = ⌊1.2·250/100⌋ = 3.
    # Round 2: prefill 50 left: n = 1, util = 2; decode has no demand (util 1) → Δ = 1,
    # k_p = max(⌊50/100⌋, 1) = 1. Totals: prefill +2, decode +3.
    variants = pd_variants()
    signal = sig(variants, roles={'prefill': (150.0, 0.0), 'decode': (250.0, 0.0)})
    assert run(variants, signal) == {'p': 3, 'd': 4}


def test_role_with_demand_and_no_eligible_variant_blocks_the_pair() -> None:
    # decode needs 300 but is at max: nothing commits, prefill included.
    variants = pd_variants(decode_max=1)
    signal = sig(variants, roles={'prefill': (100.0, 0.0), 'decode': (300.0, 0.0)})
    assert run(variants, signal) == {'p': 1, 'd': 1}


def test_role_without_demand_does_not_need_an_eligible_variant() -> None:
    variants = pd_variants(decode_max=1)
    signal = sig(variants, roles={'prefill': (100.0, 0.0), 'decode': (0.0, 500.0)})
    assert run(variants, signal) == {'p': 2, 'd': 1}


def test_a_model_never_scales_one_role_up_and_another_down() -> None:
    # decode has 500 spare but prefill needs 100: scale-up-only mode, decode keeps its 3.
    variants = [vc('d', role='decode', current=3), vc('p', role='prefill')]
    signal = sig(variants, roles={'prefill': (100.0, 0.0), 'decode': (0.0, 500.0)})
    assert run(variants, signal) == {'p': 2, 'd': 3}


# ---------------------------------------------------------------------------- scale-down


def test_ca09_spare_below_expensive_prc_removes_a_cheaper_replica() -> None:
    # Order: h (cost 20) then a (cost 5). h: ⌊250/300⌋ = 0, kept at 2.
    # a: ⌊250/100⌋ = 2, removable 3 − 0 = 3 → n = 2; a ends at 1 (not below 1) → a = 1.
    variants = [vc('a', cost=5.0, prc=100.0, current=3), vc('h', cost=20.0, prc=300.0, current=2)]
    assert run(variants, sig(variants, roles=both(0.0, 250.0))) == {'a': 1, 'h': 2}


def test_scale_down_spends_spare_across_variants() -> None:
    # h first: ⌊250/100⌋ = 2 = removable → h = 0, spare 250 − 200 = 50; a: ⌊50/100⌋ = 0.
    variants = [vc('a', cost=5.0, current=2), vc('h', cost=20.0, current=2)]
    assert run(variants, sig(variants, roles=both(0.0, 250.0))) == {'a': 2, 'h': 0}


def test_cheapest_variant_is_kept_at_one() -> None:
    # ⌊1000/100⌋ = 10, removable 3 → 0 would remain; no dearer variant holds replicas → n = 2.
    variants = [vc('a', current=3)]
    assert run(variants, sig(variants, roles=both(0.0, 1000.0))) == {'a': 1}


def test_cheapest_may_reach_zero_while_a_dearer_variant_holds_replicas() -> None:
    # h: removable 1 − 1 = 0 (min 1), keeps its replica; a: n = min(10, 2) = 2 → 0 is allowed.
    variants = [vc('a', cost=5.0, current=2), vc('h', cost=20.0, current=1, min_replicas=1)]
    assert run(variants, sig(variants, roles=both(0.0, 1000.0))) == {'a': 0, 'h': 1}


def test_a_cheaper_variant_at_zero_does_not_lift_the_last_replica_protection() -> None:
    # WVA never sees a variant at zero (its engine lists only active ones), so h, the only one
    # holding replicas, is its last variant and keeps one. Eligible here, a at zero must not let h
    # go: the model would be left with no replica while the minimum-one rule starts one of a (a
    # swap, and a gap).
    variants = [vc('a', cost=5.0, current=0), vc('h', cost=20.0, current=1)]
    assert run(variants, sig(variants, roles=both(0.0, 1000.0))) == {'a': 0, 'h': 1}


def test_the_protection_keeps_one_of_the_cheapest_variant_holding_replicas() -> None:
    # h: ⌊1000/100⌋ = 10, removable 2, a cheaper m still holds → h = 0; m is then the cheapest
    # holding replicas (a is at zero) and keeps one.
    variants = [
        vc('a', cost=5.0, current=0),
        vc('m', cost=10.0, current=2),
        vc('h', cost=20.0, current=2),
    ]
    assert run(variants, sig(variants, roles=both(0.0, 1000.0))) == {'a': 0, 'm': 1, 'h': 0}


def test_scale_down_respects_min_replicas() -> None:
    variants = [vc('a', current=5, min_replicas=2)]
    assert run(variants, sig(variants, roles=both(0.0, 10_000.0))) == {'a': 2}


def test_equal_cost_sheds_the_smaller_capacity_first() -> None:
    # Same cost: small (PRC 100) before big (PRC 200). small: ⌊250/100⌋ = 2 → 0, spare 50;
    # big: ⌊50/200⌋ = 0 → stays 2.
    variants = [vc('big', prc=200.0, current=2), vc('small', prc=100.0, current=2)]
    assert run(variants, sig(variants, roles=both(0.0, 250.0))) == {'big': 2, 'small': 0}


def test_equal_cost_and_capacity_sheds_by_name() -> None:
    # a before b: a: ⌊150/100⌋ = 1 → a = 1, spare 50; b: ⌊0.5⌋ = 0.
    variants = [vc('b', current=2), vc('a', current=2)]
    assert run(variants, sig(variants, roles=both(0.0, 150.0))) == {'a': 1, 'b': 2}


@pytest.mark.parametrize(
    ('throughput_score', 'expected'),
    [
        # Weights x = 1·100 + 1·10 = 110, y = 1·200 + 1·1 = 201 → x first:
        # x: min(⌊250/100⌋, ⌊25/10⌋) = 2 → 0; spares 50 and 5; y: min(⌊50/200⌋, ⌊5/1⌋) = 0.
        (1.0, {'x': 0, 'y': 2}),
        # Weights x = 100 + 50·10 = 600, y = 200 + 50·1 = 250 → y first:
        # y: min(⌊250/200⌋, ⌊25/1⌋) = 1 → 1; spares 50 and 24; x: min(⌊50/100⌋, ⌊24/10⌋) = 0.
        (50.0, {'x': 2, 'y': 1}),
    ],
)
def test_equal_cost_order_is_score_weighted_over_live_signals(
    throughput_score: float, expected: dict[str, int]
) -> None:
    variants = [vc('x', prc=100.0, current=2), vc('y', prc=200.0, current=2)]
    throughput = sig(
        variants,
        analyzer='throughput',
        score=throughput_score,
        roles=both(0.0, 25.0),
        capacity={'x': 10.0, 'y': 1.0},
    )
    assert run(variants, sig(variants, roles=both(0.0, 250.0)), throughput) == expected


def test_all_down_takes_the_smallest_removable_count() -> None:
    # saturation: ⌊500/100⌋ = 5; throughput: ⌊2/1⌋ = 2 → n = 2.
    variants = [vc('a', current=5)]
    throughput = sig(variants, analyzer='throughput', roles=both(0.0, 2.0), capacity={'a': 1.0})
    assert run(variants, sig(variants, roles=both(0.0, 500.0)), throughput) == {'a': 3}


def test_a_live_signal_without_spare_vetoes_scale_down() -> None:
    variants = [vc('a', current=5)]
    veto = sig(variants, analyzer='throughput', roles=both(0.0, 0.0), capacity={'a': 1.0})
    assert run(variants, sig(variants, roles=both(0.0, 500.0)), veto) == {'a': 5}


def test_a_non_live_signal_neither_vetoes_nor_constrains() -> None:
    variants = [vc('a', current=5)]
    stale = sig(variants, analyzer='throughput', live=False, roles=both(0.0, 0.0))
    assert run(variants, sig(variants, roles=both(0.0, 200.0)), stale) == {'a': 3}


def test_no_live_signal_means_no_scale_down() -> None:
    variants = [vc('a', current=5)]
    assert run(variants, sig(variants, live=False, roles=both(0.0, 500.0))) == {'a': 5}


def test_ca14_role_without_signal_is_never_touched() -> None:
    # Signals only carry decode: prefill keeps 3 although the decode spare is large;
    # decode: ⌊150/100⌋ = 1 → 3 − 1 = 2.
    variants = [vc('d', role='decode', current=3), vc('p', role='prefill', current=3)]
    assert run(variants, sig(variants, roles={'decode': (0.0, 150.0)})) == {'d': 2, 'p': 3}


def test_pd_scale_down_runs_per_role() -> None:
    # decode: ⌊200/100⌋ = 2 → 4 − 2 = 2; prefill: ⌊100/100⌋ = 1 → 2 − 1 = 1.
    variants = [vc('d', role='decode', current=4), vc('p', role='prefill', current=2)]
    signal = sig(variants, roles={'decode': (0.0, 200.0), 'prefill': (0.0, 100.0)})
    assert run(variants, signal) == {'d': 2, 'p': 1}


# ----------------------------------------------------------------- figures and bad input


def test_targets_carry_reason_and_figures() -> None:
    variants = [vc('a', current=1, demand=90.0), vc('b', cost=20.0, current=1)]
    result = optimize(
        request=ScalingRequest(
            model_id='m',
            namespace='ns',
            variants=tuple(reversed(variants)),
            signals=(sig(variants, roles=both(100.0, 0.0)),),
        )
    )
    # a: utilization = 90 / (1 · 100) = 0.9; one more replica of a covers RC 100.
    assert result == (
        VariantTarget(
            variant='a',
            target=2,
            reason='V2 scale-up',
            figures=(
                ('per_replica_capacity', 100.0),
                ('required', 100.0),
                ('spare', 0.0),
                ('utilization', 0.9),
            ),
        ),
        VariantTarget(
            variant='b',
            target=1,
            reason='V2',
            figures=(
                ('per_replica_capacity', 100.0),
                ('required', 100.0),
                ('spare', 0.0),
                ('utilization', 0.0),
            ),
        ),
    )


def test_scale_down_reason() -> None:
    variants = [vc('a', current=3)]
    (target,) = optimize(
        request=ScalingRequest(
            model_id='m',
            namespace='ns',
            variants=tuple(variants),
            signals=(sig(variants, roles=both(0.0, 100.0)),),
        )
    )
    assert (target.target, target.reason) == (2, 'V2 scale-down')


def test_empty_request_gives_no_targets() -> None:
    empty = ScalingRequest(model_id='m', namespace='ns', variants=(), signals=())
    assert optimize(request=empty) == ()


def test_no_signals_keeps_current_replicas() -> None:
    assert run([vc('a', current=2), vc('b', current=0)]) == {'a': 2, 'b': 0}


def test_nan_and_inf_required_are_no_demand() -> None:
    variants = [vc('a', current=2)]
    assert run(variants, sig(variants, roles=both(math.nan, 0.0))) == {'a': 2}
    assert run(variants, sig(variants, roles=both(math.inf, 0.0))) == {'a': 2}
    assert run(variants, sig(variants, roles=both(-5.0, 0.0))) == {'a': 2}


def test_nan_spare_vetoes_and_infinite_spare_alone_removes_nothing() -> None:
    variants = [vc('a', current=4)]
    assert run(variants, sig(variants, roles=both(0.0, math.nan))) == {'a': 4}
    assert run(variants, sig(variants, roles=both(0.0, math.inf))) == {'a': 4}
    # With a finite companion the infinite one sets no bound: ⌊200/100⌋ = 2.
    other = sig(variants, analyzer='throughput', roles=both(0.0, 200.0))
    assert run(variants, sig(variants, roles=both(0.0, math.inf)), other) == {'a': 2}


def test_bad_cost_counts_as_ten_and_bad_prc_as_unpriceable() -> None:
    # nan-cost reads as 10/100 = 0.1; b costs 8/100 = 0.08 → b wins. c has NaN PRC: skipped.
    variants = [
        vc('a', cost=math.nan),
        vc('b', cost=8.0),
        vc('c', cost=1.0, prc=math.nan),
    ]
    assert run(variants, sig(variants, roles=both(100.0))) == {'a': 1, 'b': 2, 'c': 1}


def test_overflowing_ratio_is_capped_by_headroom() -> None:
    # 1e308 / 1e-300 overflows to inf: n is the headroom, 5 − 1 = 4.
    variants = [vc('a', current=1, prc=1e-300, max_replicas=5)]
    assert run(variants, sig(variants, roles=both(1e308))) == {'a': 5}


def test_negative_current_replicas_read_as_zero() -> None:
    variants = [vc('a', current=-3)]
    assert run(variants, sig(variants, roles=both(100.0))) == {'a': 1}


# ---------------------------------------------------------------------------- properties

NAMES = ['a100', 'b200', 'h100', 'l40s', 'mi300']


@st.composite
def requests(draw: st.DrawFn) -> ScalingRequest:
    disaggregated = draw(st.booleans())
    roles: list[Role] = ['decode', 'prefill'] if disaggregated else ['both']
    names = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=4, unique=True))
    variants = []
    for name in names:
        max_replicas = draw(st.integers(min_value=1, max_value=8))
        variants.append(
            vc(
                name,
                cost=draw(st.sampled_from([1.0, 5.0, 10.0, 20.0])),
                prc=draw(st.sampled_from([0.0, 50.0, 100.0, 200.0])),
                current=draw(st.integers(min_value=0, max_value=max_replicas)),
                min_replicas=draw(st.integers(min_value=0, max_value=1)),
                max_replicas=max_replicas,
                role=draw(st.sampled_from(roles)),
            )
        )
    analyzers = draw(
        st.lists(st.sampled_from(['saturation', 'slo', 'throughput']), max_size=3, unique=True)
    )
    amount = st.sampled_from([0.0, 40.0, 100.0, 250.0, 700.0])
    signals = []
    for analyzer in analyzers:
        carried = draw(st.lists(st.sampled_from(roles), min_size=1, unique=True))
        signals.append(
            sig(
                variants,
                analyzer=analyzer,
                live=draw(st.booleans()),
                score=draw(st.sampled_from([1.0, 2.0])),
                roles={role: (draw(amount), draw(amount)) for role in carried},
                capacity={
                    v.variant: v.per_replica_capacity * draw(st.sampled_from([1.0, 0.5]))
                    for v in variants
                },
            )
        )
    return ScalingRequest(
        model_id='m', namespace='ns', variants=tuple(variants), signals=tuple(signals)
    )


@settings(max_examples=300)
@given(request=requests(), data=st.data())
def test_shuffling_variants_and_signals_changes_nothing(
    request: ScalingRequest, data: st.DataObject
) -> None:
    shuffled = ScalingRequest(
        model_id='m',
        namespace='ns',
        variants=tuple(data.draw(st.permutations(request.variants))),
        signals=tuple(data.draw(st.permutations(request.signals))),
    )
    assert optimize(request=shuffled) == optimize(request=request)


@settings(max_examples=300)
@given(request=requests())
def test_one_direction_per_model_within_bounds(request: ScalingRequest) -> None:
    result = optimize(request=request)
    assert [t.variant for t in result] == sorted(v.variant for v in request.variants)
    by_name = {v.variant: v for v in request.variants}
    ups = [t for t in result if t.target > by_name[t.variant].current_replicas]
    downs = [t for t in result if t.target < by_name[t.variant].current_replicas]
    assert not (ups and downs)
    for t in ups:
        assert t.target <= by_name[t.variant].max_replicas
    for t in downs:
        assert t.target >= by_name[t.variant].min_replicas


@settings(max_examples=200)
@given(
    rc=st.floats(min_value=1.0, max_value=5_000.0),
    costs=st.lists(st.sampled_from([1.0, 3.0, 7.0]), min_size=2, max_size=2),
    prcs=st.lists(st.sampled_from([60.0, 100.0, 250.0]), min_size=2, max_size=2),
)
def test_unbounded_single_role_scale_up_covers_demand_on_the_best_variant(
    rc: float, costs: list[float], prcs: list[float]
) -> None:
    variants = [
        vc('a', cost=costs[0], prc=prcs[0], max_replicas=1000),
        vc('b', cost=costs[1], prc=prcs[1], max_replicas=1000),
    ]
    targets = run(variants, sig(variants, roles=both(rc)))
    best = min(variants, key=lambda v: (v.cost / v.per_replica_capacity, v.cost, v.variant))
    added = targets[best.variant] - 1
    # Exactly ⌈RC/PRC⌉ on the best variant, nothing on the other.
    assert added == math.ceil(rc / best.per_replica_capacity - 1e-9)
    assert added * best.per_replica_capacity >= rc - 1e-6
    assert sum(targets.values()) - 2 == added


# --- one round of the joint scale-up, as the cost-aware and the limited optimizers share it ---


def test_joint_sizes_takes_the_smallest_covered_share_over_roles() -> None:
    # Prefill needs 250 at PRC 100 (3, covering 1.2 of it), decode 150 at 100 within a headroom
    # of 1 (covering 2/3): δ is the decode's share.
    picks: dict[Role, tuple[VariantCapacity, int]] = {
        'prefill': (vc('p', role='prefill'), 10),
        'decode': (vc('d', role='decode'), 1),
    }
    sizes, delta = joint_sizes(
        picks=picks, binders={'prefill': (250.0, 100.0), 'decode': (150.0, 100.0)}, roles=2
    )
    assert sizes == {'prefill': (3, 250.0, 100.0), 'decode': (1, 150.0, 100.0)}
    assert delta == pytest.approx(100.0 / 150.0)
    assert joint_commit(n=3, demand=250.0, prc=100.0, delta=delta) == 1
    assert joint_commit(n=1, demand=150.0, prc=100.0, delta=delta) == 1


def test_joint_sizes_a_role_without_a_pick_bounds_delta_at_one() -> None:
    sizes, delta = joint_sizes(
        picks={'both': (vc('a'), 10)}, binders={'both': (50.0, 100.0)}, roles=2
    )
    assert sizes == {'both': (1, 50.0, 100.0)}
    assert delta == 1.0
    alone, unbounded = joint_sizes(
        picks={'both': (vc('a'), 10)}, binders={'both': (50.0, 100.0)}, roles=1
    )
    assert alone == sizes
    assert unbounded == 2.0


def test_joint_sizes_no_demand_or_no_price_sizes_nothing() -> None:
    for binder in ((0.0, 100.0), (100.0, 0.0), (0.0, 0.0)):
        sizes, delta = joint_sizes(picks={'both': (vc('a'), 10)}, binders={'both': binder}, roles=1)
        assert sizes['both'][0] == 0
        assert delta == (1.0 if binder[0] <= 0 else 0.0)


def test_joint_sizes_an_underflowing_share_still_commits_one() -> None:
    sizes, delta = joint_sizes(
        picks={'both': (vc('a'), 1)}, binders={'both': (1e308, 1e-308)}, roles=1
    )
    assert sizes['both'][0] == 1
    assert delta == math.ulp(0.0)
    assert joint_commit(n=1, demand=1e308, prc=1e-308, delta=delta) == 1
