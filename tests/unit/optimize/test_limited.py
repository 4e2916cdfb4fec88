"""Tests of the greedy-by-score optimizer (WVA v0.9.0, greedy_score_optimizer.go): fair share,
budgets, ties."""

from __future__ import annotations

import dataclasses
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from llmscaler.domain.basics import Role
from llmscaler.domain.signals import AnalyzerSignal, RoleSignal, ScalingRequest, VariantCapacity
from llmscaler.domain.snapshot import GpuLimit
from llmscaler.optimize.constraints import Budgets, merge_constraints
from llmscaler.optimize.limited import LimitedOutcome, optimize_limited


def vc(
    name: str,
    *,
    namespace: str = 'ns',
    cost: float = 10.0,
    prc: float = 15_000.0,
    current: int = 1,
    max_replicas: int = 100,
    accelerator: str = 'A100',
    gpus: int = 1,
    role: Role = 'both',
) -> VariantCapacity:
    return VariantCapacity(
        variant=name,
        namespace=namespace,
        role=role,
        cost=cost,
        accelerator=accelerator,
        gpus_per_replica=gpus,
        min_replicas=0,
        max_replicas=max_replicas,
        current_replicas=current,
        per_replica_capacity=prc,
        replica_count=current,
        pending=0,
        total_demand=0.0,
        reason='P1-obs',
    )


def request(
    model: str,
    variants: list[VariantCapacity],
    *,
    required: float,
    spare: float = 0.0,
    priority: float = 1.0,
    namespace: str = 'ns',
) -> ScalingRequest:
    signal = AnalyzerSignal(
        analyzer='saturation',
        live=True,
        score=1.0,
        roles=(RoleSignal(role='both', required=required, spare=spare),),
        capacity=tuple(sorted((v.variant, v.per_replica_capacity) for v in variants)),
    )
    return ScalingRequest(
        model_id=model,
        namespace=namespace,
        variants=tuple(variants),
        signals=(signal,),
        priority=priority,
    )


def gpus(free: int, accelerator: str = 'A100') -> Budgets:
    return merge_constraints(
        limits=(GpuLimit(provider='inventory', accelerator=accelerator, limit=free),)
    )


def targets(outcome: LimitedOutcome) -> dict[str, int]:
    return {f'{m.model_id}/{t.variant}': t.target for m in outcome.models for t in m.targets}


def test_gs03_the_starved_model_is_served_first_down_to_the_mean() -> None:
    # Demands 50k and 10k, PRC 15k, room for four more replicas: +3 / +1 (WVA's gs-03).
    outcome = optimize_limited(
        requests=[
            request('a', [vc('a-v', current=0)], required=50_000),
            request('b', [vc('b-v', current=0)], required=10_000),
        ],
        budgets=gpus(4),
    )
    assert targets(outcome) == {'a/a-v': 3, 'b/b-v': 1}
    assert dict(outcome.left.cluster) == {'A100': 0}
    limited = {m.model_id: m.limited for m in outcome.models}
    assert limited == {'a': True, 'b': False}


def test_without_a_binding_budget_every_model_gets_what_the_cost_aware_path_gives() -> None:
    outcome = optimize_limited(
        requests=[
            request('a', [vc('a-v', current=1)], required=50_000),
            request('b', [vc('b-v', current=1)], required=10_000),
        ],
        budgets=gpus(100),
    )
    # ⌈50k/15k⌉ = 4 and ⌈10k/15k⌉ = 1, from one replica each.
    assert targets(outcome) == {'a/a-v': 5, 'b/b-v': 2}
    assert not any(m.limited for m in outcome.models)


def test_the_cheapest_variant_whose_type_has_room_is_picked() -> None:
    # The cheap H100 variant has no GPUs left; the dearer A100 one takes the demand.
    variants = [
        vc('cheap', cost=1.0, accelerator='H100', current=0),
        vc('dear', cost=5.0, accelerator='A100', current=0),
    ]
    budgets = merge_constraints(
        limits=(
            GpuLimit(provider='inventory', accelerator='H100', limit=0),
            GpuLimit(provider='inventory', accelerator='A100', limit=8),
        )
    )
    outcome = optimize_limited(requests=[request('m', variants, required=30_000)], budgets=budgets)
    assert targets(outcome) == {'m/cheap': 0, 'm/dear': 2}


def test_priority_weights_the_fair_share() -> None:
    # Equal demands; the model of priority 4 is served first and takes the only replica.
    outcome = optimize_limited(
        requests=[
            request('a', [vc('a-v', current=0)], required=15_000, priority=1.0),
            request('b', [vc('b-v', current=0)], required=15_000, priority=4.0),
        ],
        budgets=gpus(1),
    )
    assert targets(outcome) == {'a/a-v': 0, 'b/b-v': 1}


def test_equal_models_tie_by_namespace_then_model_id() -> None:
    outcome = optimize_limited(
        requests=[
            request('zeta', [vc('z', current=0)], required=15_000),
            request('alpha', [vc('a', current=0)], required=15_000),
        ],
        budgets=gpus(1),
    )
    assert targets(outcome) == {'alpha/a': 1, 'zeta/z': 0}


def test_a_model_without_demand_scales_down_as_the_cost_aware_optimizer_does() -> None:
    outcome = optimize_limited(
        requests=[request('m', [vc('v', current=4)], required=0.0, spare=31_000)],
        budgets=gpus(0),
    )
    assert targets(outcome) == {'m/v': 2}


def test_a_namespace_pool_is_a_closed_allow_list() -> None:
    budgets = merge_constraints(
        limits=(
            GpuLimit(provider='inventory', accelerator='A100', limit=10),
            GpuLimit(provider='quota', accelerator='A100', limit=1, namespace='team-a'),
        )
    )
    outcome = optimize_limited(
        requests=[
            request(
                'a', [vc('a-v', namespace='team-a', current=0)], required=45_000, namespace='team-a'
            ),
            request(
                'b',
                [vc('b-v', namespace='team-a', current=0, accelerator='H100')],
                required=15_000,
                namespace='team-a',
            ),
        ],
        budgets=budgets,
    )
    # team-a may use one A100 and no H100 (not listed), though the cluster has more.
    assert targets(outcome) == {'a/a-v': 1, 'b/b-v': 0}


# --- properties ---------------------------------------------------------------------------

_ACCELERATORS = ('A100', 'H100', 'L4')


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[list[ScalingRequest], Budgets, dict[str, int]]:
    free = {acc: draw(st.integers(0, 12)) for acc in _ACCELERATORS}
    models = draw(st.integers(1, 6))
    requests = []
    for m in range(models):
        count = draw(st.integers(1, 3))
        variants = [
            vc(
                f'm{m}-v{i}',
                cost=draw(st.sampled_from([1.0, 2.0, 5.0, 10.0])),
                prc=draw(st.sampled_from([50.0, 100.0, 150.0])),
                current=draw(st.integers(0, 3)),
                max_replicas=draw(st.integers(1, 12)),
                accelerator=draw(st.sampled_from(_ACCELERATORS)),
                gpus=draw(st.integers(0, 4)),
            )
            for i in range(count)
        ]
        made = request(
            f'm{m}',
            variants,
            required=draw(st.sampled_from([0.0, 30.0, 100.0, 450.0, 2000.0])),
            spare=draw(st.sampled_from([0.0, 120.0])),
            priority=draw(st.sampled_from([0.0, 0.5, 1.0, 3.0])),
        )
        if count >= 2 and draw(st.booleans()):
            # A P/D model: roles alternate; each role asks for its own capacity.
            roles: tuple[Role, Role] = ('prefill', 'decode')
            pd = [dataclasses.replace(v, role=roles[i % 2]) for i, v in enumerate(variants)]
            asks = tuple(
                RoleSignal(
                    role=role, required=draw(st.sampled_from([0.0, 100.0, 900.0])), spare=0.0
                )
                for role in sorted(roles)
            )
            signal = dataclasses.replace(made.signals[0], roles=asks)
            made = dataclasses.replace(made, variants=tuple(pd), signals=(signal,))
        requests.append(made)
    budgets = merge_constraints(
        limits=tuple(
            GpuLimit(provider='inventory', accelerator=acc, limit=n) for acc, n in free.items()
        )
    )
    return requests, budgets, free


@settings(max_examples=200, deadline=None)
@given(scenarios())
def test_with_budgets_binding_new_replicas_never_exceed_them(
    case: tuple[list[ScalingRequest], Budgets, dict[str, int]],
) -> None:
    requests, budgets, free = case
    outcome = optimize_limited(requests=requests, budgets=budgets)
    variants = {v.variant: v for r in requests for v in r.variants}
    taken = dict.fromkeys(free, 0)
    for model in outcome.models:
        for target in model.targets:
            variant = variants[target.variant]
            assert target.target >= 0
            added = target.target - variant.current_replicas
            if added > 0:
                assert target.target <= variant.max_replicas
                taken[variant.accelerator] += added * variant.gpus_per_replica
    for acc, n in free.items():
        assert taken[acc] <= n
        assert dict(outcome.left.cluster)[acc] == n - taken[acc]


@settings(max_examples=100, deadline=None)
@given(scenarios(), st.randoms(use_true_random=False))
def test_the_outcome_does_not_depend_on_the_order_of_the_requests(
    case: tuple[list[ScalingRequest], Budgets, dict[str, int]], shuffle: random.Random
) -> None:
    requests, budgets, _ = case
    first = optimize_limited(requests=requests, budgets=budgets)
    shuffled = list(requests)
    shuffle.shuffle(shuffled)
    shuffled = [
        ScalingRequest(
            model_id=r.model_id,
            namespace=r.namespace,
            variants=tuple(shuffle.sample(r.variants, len(r.variants))),
            signals=r.signals,
            priority=r.priority,
        )
        for r in shuffled
    ]
    assert optimize_limited(requests=shuffled, budgets=budgets) == first


def test_pd_roles_sharing_one_gpu_type_never_overcommit_it() -> None:
    # Prefill and decode each want two replicas; the type has room for two in all. Both roles'
    # counts are sized before either commits, so the second must see what the first took.
    variants = [
        vc('prefill', role='prefill', current=0),
        vc('decode', role='decode', current=0),
    ]
    signal = AnalyzerSignal(
        analyzer='saturation',
        live=True,
        score=1.0,
        roles=(
            RoleSignal(role='decode', required=30_000, spare=0.0),
            RoleSignal(role='prefill', required=30_000, spare=0.0),
        ),
        capacity=(('decode', 15_000.0), ('prefill', 15_000.0)),
    )
    pd = ScalingRequest(model_id='m', namespace='ns', variants=tuple(variants), signals=(signal,))
    outcome = optimize_limited(requests=[pd], budgets=gpus(2))
    got = targets(outcome)
    assert got['m/prefill'] + got['m/decode'] == 2
    assert dict(outcome.left.cluster) == {'A100': 0}
