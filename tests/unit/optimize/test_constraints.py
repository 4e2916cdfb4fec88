"""Tests of the GPU constraint merge (WVA v0.9.0's budgets, internal/engines/pipeline/)."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from llmscaler.domain.snapshot import UNLIMITED_GPUS, GpuLimit, Variant
from llmscaler.optimize.constraints import Ledger, charge_variants, merge_constraints


def gl(acc: str, limit: int, *, used: int = 0, ns: str = '', provider: str = 'p') -> GpuLimit:
    return GpuLimit(provider=provider, accelerator=acc, limit=limit, used=used, namespace=ns)


def test_the_tightest_provider_wins_and_used_is_subtracted() -> None:
    budgets = merge_constraints(
        limits=(
            gl('A100', 16, used=4, provider='inventory'),
            gl('A100', 10, used=1, provider='quota'),
        )
    )
    assert budgets.available(accelerator='A100', namespace='x') == 9


def test_minus_one_is_unlimited_and_a_finite_limit_wins_over_it() -> None:
    alone = merge_constraints(limits=(gl('A100', UNLIMITED_GPUS),))
    assert alone.available(accelerator='A100', namespace='x') is None
    both = merge_constraints(limits=(gl('A100', UNLIMITED_GPUS), gl('A100', 3)))
    assert both.available(accelerator='A100', namespace='x') == 3


def test_used_above_the_limit_leaves_zero_not_a_negative_budget() -> None:
    budgets = merge_constraints(limits=(gl('A100', 2, used=5),))
    assert budgets.available(accelerator='A100', namespace='x') == 0


def test_a_type_no_provider_names_is_not_limited() -> None:
    budgets = merge_constraints(limits=(gl('A100', 2),))
    assert budgets.available(accelerator='L4', namespace='x') is None


def test_a_namespace_pool_caps_listed_types_and_denies_the_others() -> None:
    budgets = merge_constraints(
        limits=(gl('A100', 8), gl('A100', 2, ns='team'), gl('L4', UNLIMITED_GPUS, ns='team'))
    )
    assert budgets.available(accelerator='A100', namespace='team') == 2
    assert budgets.available(accelerator='L4', namespace='team') is None
    assert budgets.available(accelerator='H100', namespace='team') == 0
    # Other namespaces see the cluster budget only.
    assert budgets.available(accelerator='A100', namespace='other') == 8


def test_charging_takes_from_cluster_and_namespace_budgets() -> None:
    ledger = Ledger(budgets=merge_constraints(limits=(gl('A100', 8), gl('A100', 4, ns='team'))))
    ledger.charge(accelerator='A100', namespace='team', gpus=3)
    assert ledger.free(accelerator='A100', namespace='team') == 1
    assert ledger.free(accelerator='A100', namespace='other') == 5
    assert ledger.fits(accelerator='A100', namespace='other', gpus=2) == 2
    assert ledger.fits(accelerator='A100', namespace='other', gpus=0) is None


def test_charge_variants_adds_current_replicas_in_scope() -> None:
    variants = [
        Variant(
            name='a',
            namespace='team',
            model_id='m',
            accelerator='A100',
            gpus_per_replica=2,
            current_replicas=3,
        ),
        Variant(
            name='b',
            namespace='other',
            model_id='m',
            accelerator='A100',
            gpus_per_replica=1,
            current_replicas=1,
        ),
        Variant(
            name='c',
            namespace='team',
            model_id='m',
            accelerator='L4',
            gpus_per_replica=1,
            current_replicas=5,
        ),
    ]
    charged = charge_variants(
        limits=(gl('A100', 16, used=1), gl('A100', 8, ns='team')), variants=variants
    )
    assert [limit.used for limit in charged] == [1 + 6 + 1, 6]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.builds(
            gl,
            st.sampled_from(['A100', 'H100']),
            st.integers(-1, 20),
            used=st.integers(0, 25),
            ns=st.sampled_from(['', '', 'team']),
            provider=st.sampled_from(['inventory', 'quota']),
        ),
        max_size=8,
    ),
    st.randoms(use_true_random=False),
)
def test_merging_is_order_free_and_never_above_any_finite_provider(
    limits: list[GpuLimit], shuffle: random.Random
) -> None:
    budgets = merge_constraints(limits=limits)
    shuffled = list(limits)
    shuffle.shuffle(shuffled)
    assert merge_constraints(limits=shuffled) == budgets
    for limit in limits:
        if limit.limit < 0:
            continue
        namespace = limit.namespace or 'elsewhere'
        free = budgets.available(accelerator=limit.accelerator, namespace=namespace)
        assert free is not None
        assert free <= max(0, limit.limit - limit.used)
