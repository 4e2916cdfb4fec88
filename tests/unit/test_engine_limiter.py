"""The GPU limiter stage of `decide()` (`optimize.limiter`): budgets bind, decisions say so."""

from __future__ import annotations

import dataclasses
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from llmscaler.config.quota import Limiters, Quota
from llmscaler.config.resolved import Config, ModelConfig, SaturationConfig
from llmscaler.domain.basics import Action
from llmscaler.domain.snapshot import Decision, GpuLimit, Snapshot
from llmscaler.domain.state import EMPTY_STATE
from llmscaler.engine import decide
from llmscaler.optimize.limiter import NO_LIMITS, limited_decision
from tests.support.limiter_fixtures import NS, config, hot_model, two_hot_models
from tests.support.strategies import NOW, snapshots


def test_without_the_limiter_both_models_grow_beyond_the_budget() -> None:
    # The control case: the same snapshot, the limiter off, asks for more than 4 free GPUs.
    snapshot = two_hot_models((GpuLimit(provider='inventory', accelerator='A100', limit=12),))
    outcome = decide(snapshot=snapshot, config=config(limiter=False), state=EMPTY_STATE, now=NOW)
    added = sum(d.target - d.current for d in outcome.decisions)
    assert added * 2 > 12 - 8
    assert all(d.limited == 0 and d.limiter == '' for d in outcome.decisions)


def test_budgets_bind_and_the_decisions_say_which_model_was_limited_and_by_how_much() -> None:
    # 12 A100s, 8 held by the four current replicas (2 GPUs each): room for two more replicas.
    snapshot = two_hot_models((GpuLimit(provider='inventory', accelerator='A100', limit=12),))
    unlimited = decide(snapshot=snapshot, config=config(limiter=False), state=EMPTY_STATE, now=NOW)
    wanted = {d.variant: d.target for d in unlimited.decisions}
    outcome = decide(snapshot=snapshot, config=config(limiter=True), state=EMPTY_STATE, now=NOW)
    decisions = {d.variant: d for d in outcome.decisions}
    assert sum((d.target - d.current) * 2 for d in outcome.decisions) == 4
    # WVA's fair share with equal demands (8 replicas each): the first by name is served down
    # to half its demand (mean − rem/|active| = 4 replicas), which the two free replicas of
    # budget cannot even cover; the other model gets nothing this cycle.
    assert decisions['alpha-a100'].target == 4
    assert decisions['beta-a100'].target == 2
    for name, decision in decisions.items():
        assert decision.limited == wanted[name] - decision.target > 0
        assert decision.reason.endswith(f'; limited by GPU budget: -{decision.limited}')
        assert 'A100 0 GPUs free' in decision.limiter
    assert decisions['alpha-a100'].limiter.startswith('limited by GPU budget: +2 of +8')
    assert decisions['beta-a100'].limiter.startswith('limited by GPU budget: +0 of +8')
    assert decisions['beta-a100'].action is Action.NO_CHANGE
    # The memory holds what was granted, not what was wanted.
    assert dict(outcome.state.last_desired) == {f'{NS}/alpha-a100': 4, f'{NS}/beta-a100': 2}


def test_priority_lets_one_model_take_the_last_replica() -> None:
    snapshot = two_hot_models((GpuLimit(provider='inventory', accelerator='A100', limit=10),))
    base = config(limiter=True)
    favoured = dataclasses.replace(
        base,
        by_group=(
            (
                f'beta|{NS}',
                ModelConfig(
                    saturation=SaturationConfig(
                        analyzer_name='saturation', enable_limiter=True, priority=5.0
                    )
                ),
            ),
        ),
    )
    outcome = decide(snapshot=snapshot, config=favoured, state=EMPTY_STATE, now=NOW)
    targets = {d.variant: d.target for d in outcome.decisions}
    assert targets == {'alpha-a100': 2, 'beta-a100': 3}


def test_one_model_under_a_type_limit_is_limited_too() -> None:
    snapshot = dataclasses.replace(
        hot_model('alpha', gpus=1),
        gpu_limits=(GpuLimit(provider='scenario', accelerator='A100', limit=3),),
    )
    outcome = decide(
        snapshot=snapshot, config=config(limiter=True, analyzer=''), state=EMPTY_STATE, now=NOW
    )
    (decision,) = outcome.decisions
    # V1 asks for +1 (3 replicas); 3 GPUs with 2 held leave room for exactly that.
    assert decision.target == 3
    assert decision.limited == 0
    assert decision.limiter.startswith('+1 replicas granted, within GPU budget')
    tight = dataclasses.replace(
        snapshot, gpu_limits=(GpuLimit(provider='scenario', accelerator='A100', limit=2),)
    )
    (held,) = decide(
        snapshot=tight, config=config(limiter=True, analyzer=''), state=EMPTY_STATE, now=NOW
    ).decisions
    assert held.target == 2
    assert held.limited == 1
    assert held.action is Action.NO_CHANGE


def test_with_no_gpu_limits_known_the_limiter_falls_back_to_unlimited_targets() -> None:
    snapshot = two_hot_models(())
    unlimited = decide(snapshot=snapshot, config=config(limiter=False), state=EMPTY_STATE, now=NOW)
    outcome = decide(snapshot=snapshot, config=config(limiter=True), state=EMPTY_STATE, now=NOW)
    assert [d.target for d in outcome.decisions] == [d.target for d in unlimited.decisions]
    assert all(d.limiter == NO_LIMITS and d.limited == 0 for d in outcome.decisions)


def test_a_model_without_the_limiter_is_charged_first_and_never_limited() -> None:
    snapshot = two_hot_models((GpuLimit(provider='inventory', accelerator='A100', limit=12),))
    mixed = dataclasses.replace(
        config(limiter=True),
        by_group=(
            (f'alpha|{NS}', ModelConfig(saturation=SaturationConfig(analyzer_name='saturation'))),
        ),
    )
    unlimited = decide(snapshot=snapshot, config=config(limiter=False), state=EMPTY_STATE, now=NOW)
    outcome = decide(snapshot=snapshot, config=mixed, state=EMPTY_STATE, now=NOW)
    free = {d.variant: d for d in outcome.decisions}
    assert free['alpha-a100'] == {d.variant: d for d in unlimited.decisions}['alpha-a100']
    # alpha's scale-up takes the 4 free GPUs: nothing is left for beta.
    assert free['beta-a100'].target == free['beta-a100'].current
    assert free['beta-a100'].limited > 0


# --- properties ---------------------------------------------------------------------------

_TYPES = ('A100', 'H100', 'L40S', 'L4', 'A10G')


@st.composite
def limited_snapshots(draw: st.DrawFn) -> Snapshot:
    snapshot = draw(snapshots())
    limits = tuple(
        GpuLimit(
            provider='inventory',
            accelerator=acc,
            limit=draw(st.integers(-1, 12)),
            used=draw(st.integers(0, 3)),
        )
        for acc in _TYPES
        if draw(st.booleans())
    )
    return dataclasses.replace(snapshot, gpu_limits=limits)


CONFIGS = st.sampled_from([config(limiter=True), config(limiter=True, analyzer='')])


@settings(max_examples=150, deadline=None)
@given(snapshot=limited_snapshots(), cfg=CONFIGS)
def test_with_budgets_binding_targets_never_exceed_them(snapshot: Snapshot, cfg: Config) -> None:
    outcome = decide(snapshot=snapshot, config=cfg, state=EMPTY_STATE, now=NOW)
    variants = {v.name: v for v in snapshot.variants}
    added: dict[str, int] = {}
    for decision in outcome.decisions:
        variant = variants[decision.variant]
        assert variant.min_replicas <= decision.target <= variant.max_replicas
        floor = max(decision.current, variant.min_replicas)
        added[variant.accelerator] = (
            added.get(variant.accelerator, 0)
            + max(0, decision.target - floor) * variant.gpus_per_replica
        )
    for limit in snapshot.gpu_limits:
        if limit.limit < 0:
            continue
        held = sum(
            v.current_replicas * v.gpus_per_replica
            for v in snapshot.variants
            if v.accelerator == limit.accelerator
        )
        assert added.get(limit.accelerator, 0) <= max(0, limit.limit - limit.used - held)


@settings(max_examples=60, deadline=None)
@given(snapshot=limited_snapshots(), cfg=CONFIGS, shuffle=st.randoms(use_true_random=False))
def test_the_limited_decisions_do_not_depend_on_input_order(
    snapshot: Snapshot, cfg: Config, shuffle: random.Random
) -> None:
    first = decide(snapshot=snapshot, config=cfg, state=EMPTY_STATE, now=NOW)
    shuffled = dataclasses.replace(
        snapshot,
        variants=tuple(shuffle.sample(snapshot.variants, len(snapshot.variants))),
        replicas=tuple(shuffle.sample(snapshot.replicas, len(snapshot.replicas))),
        gpu_limits=tuple(shuffle.sample(snapshot.gpu_limits, len(snapshot.gpu_limits))),
    )
    assert decide(snapshot=shuffled, config=cfg, state=EMPTY_STATE, now=NOW) == first


def test_a_quota_from_the_configuration_binds_without_any_inventory() -> None:
    snapshot = two_hot_models(())
    quota = Limiters(inventory=False, quota=Quota(quotas=(('A100', 10),)))
    cfg = dataclasses.replace(
        config(limiter=True),
        default=ModelConfig(
            saturation=SaturationConfig(
                analyzer_name='saturation', enable_limiter=True, limiters=quota
            )
        ),
    )
    outcome = decide(snapshot=snapshot, config=cfg, state=EMPTY_STATE, now=NOW)
    # 10 quota GPUs, 8 held: one more 2-GPU replica in all.
    assert sum(d.target - d.current for d in outcome.decisions) == 1
    # Naming no inventory drops the snapshot's inventory limits: the quota alone binds.
    loose = dataclasses.replace(
        snapshot, gpu_limits=(GpuLimit(provider='inventory', accelerator='A100', limit=8),)
    )
    again = decide(snapshot=loose, config=cfg, state=EMPTY_STATE, now=NOW)
    assert sum(d.target - d.current for d in again.decisions) == 1


def test_a_limited_decision_carries_every_other_field_over() -> None:
    """`limited_decision` builds the Decision whole: a field it forgets would be reset."""
    before = Decision(
        variant='v',
        namespace='ns',
        model_id='m',
        accelerator='H100',
        current=3,
        target=7,
        action=Action.SCALE_UP,
        reason='why',
        analyzer='saturation',
        figures=(('required', 1.5),),
        metrics_available=False,
        metrics_reason='MetricsStale',
        message='1 of 3 ready replicas have fresh metrics',
        limited=4,
        limiter='earlier verdict',
    )
    # Every field differs from its default, so that a dropped one shows.
    assert all(
        getattr(before, f.name) != f.default
        for f in dataclasses.fields(Decision)
        if f.default is not dataclasses.MISSING
    )
    after = limited_decision(
        before, target=5, action=Action.SCALE_UP, reason='why; limited', limited=2, limiter='l'
    )
    changed = {'target', 'action', 'reason', 'limited', 'limiter'}
    for field in dataclasses.fields(Decision):
        if field.name not in changed:
            assert getattr(after, field.name) == getattr(before, field.name), field.name
    assert (after.target, after.reason, after.limited, after.limiter) == (5, 'why; limited', 2, 'l')
