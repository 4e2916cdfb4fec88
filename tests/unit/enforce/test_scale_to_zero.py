"""Tests of the enforcer: WVA's (v0.9.0, internal/engines/pipeline/enforcer.go) plus the safety
rules of docs/decision-core.md."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmscaler.config.resolved import CoreSettings, ModelConfig, SaturationConfig, ScaleToZeroConfig
from llmscaler.domain.basics import EngineKind
from llmscaler.domain.snapshot import EngineParams, Variant
from llmscaler.enforce.scale_to_zero import (
    Enforcement,
    enforce,
    enforced_reason,
    retention_period,
    scale_to_zero_enabled,
)

ON = ModelConfig(scale_to_zero=ScaleToZeroConfig(enabled=True))
OFF = ModelConfig(scale_to_zero=ScaleToZeroConfig(enabled=False))
SETTINGS = CoreSettings()


def variant(
    name: str,
    *,
    cost: float = 10.0,
    current: int = 1,
    min_replicas: int = 0,
    engine: EngineKind | None = None,
) -> Variant:
    return Variant(
        name=name,
        namespace='ns',
        model_id='m',
        cost=cost,
        min_replicas=min_replicas,
        max_replicas=5,
        current_replicas=current,
        engine=None if engine is None else EngineParams(engine=engine),
    )


def run(
    variants: list[Variant],
    targets: dict[str, int],
    *,
    config: ModelConfig = ON,
    settings: CoreSettings = SETTINGS,
    count: float | None = 0.0,
    in_flight: float = 0.0,
    complete: bool = True,
) -> Enforcement:
    return enforce(
        variants=variants,
        targets=targets,
        config=config,
        settings=settings,
        request_count=count,
        in_flight=in_flight,
        metrics_complete=complete,
    )


# ------------------------------------------------------------------- enabled / retention


def test_enabled_precedence_inline_then_configmap_then_env_then_false() -> None:
    inline_on = ModelConfig(
        saturation=SaturationConfig(scale_to_zero_enabled=True),
        scale_to_zero=ScaleToZeroConfig(enabled=False),
    )
    assert scale_to_zero_enabled(config=inline_on, settings=SETTINGS) is True
    inline_off = ModelConfig(
        saturation=SaturationConfig(scale_to_zero_enabled=False),
        scale_to_zero=ScaleToZeroConfig(enabled=True),
    )
    assert scale_to_zero_enabled(config=inline_off, settings=SETTINGS) is False
    env_on = CoreSettings(scale_to_zero=True)
    assert scale_to_zero_enabled(config=OFF, settings=env_on) is False
    assert scale_to_zero_enabled(config=ModelConfig(), settings=env_on) is True
    assert scale_to_zero_enabled(config=ModelConfig(), settings=SETTINGS) is False


@pytest.mark.parametrize(
    ('model_period', 'default_period', 'expected'),
    [
        (120.0, 900.0, 120.0),
        (None, 900.0, 900.0),
        (None, 600.0, 600.0),
        (0.0, 900.0, 900.0),
        (-5.0, 900.0, 900.0),
        (math.nan, 900.0, 900.0),
        (math.inf, 900.0, 900.0),
        (None, math.nan, 600.0),
        (None, 0.0, 600.0),
    ],
)
def test_retention_period(
    model_period: float | None, default_period: float, expected: float
) -> None:
    config = ModelConfig(scale_to_zero=ScaleToZeroConfig(retention_period=model_period))
    settings = CoreSettings(default_retention_period=default_period)
    assert retention_period(config=config, settings=settings) == expected


def test_default_retention_is_ten_minutes_and_reported() -> None:
    assert retention_period(config=ModelConfig(), settings=SETTINGS) == 600.0
    result = run([variant('a')], {'a': 1}, count=3.0)
    assert '600 s' in result.message


# ---------------------------------------------------------------------------- skipping


def test_skipped_when_any_variant_has_min_replicas_above_zero() -> None:
    # Even with a zero count and zero targets nothing changes: the floor wins (bounds clamp).
    variants = [variant('a', min_replicas=1), variant('b')]
    result = run(variants, {'a': 0, 'b': 0}, config=OFF)
    assert result.targets == (('a', 0), ('b', 0))
    assert (result.policy, result.reason, result.modified) == ('', '', ())
    assert 'minReplicas' in result.message


def test_skipped_for_a_non_vllm_engine() -> None:
    variants = [variant('a', engine='sglang', current=2), variant('b', current=2)]
    result = run(variants, {'a': 2, 'b': 2}, count=0.0)
    assert result.targets == (('a', 2), ('b', 2))
    assert result.policy == ''
    assert 'sglang' in result.message


def test_missing_engine_parameters_count_as_vllm() -> None:
    variants = [variant('a', engine=None, current=1), variant('b', engine='vllm', current=1)]
    assert run(variants, {'a': 1, 'b': 1}).targets == (('a', 0), ('b', 0))


# ------------------------------------------------------------------------------ enabled


def test_zero_requests_scale_every_variant_to_zero() -> None:
    variants = [variant('b', current=1), variant('a', current=0)]
    result = run(variants, {'a': 0, 'b': 1})
    assert result.targets == (('a', 0), ('b', 0))
    assert result.policy == 'scale_to_zero'
    assert result.reason == 'scale_to_zero (enforced)'
    assert result.modified == ('b',)


def test_step_down_to_one_before_zero() -> None:
    # Deviation from upstream (straight to 0): 3 → 1 this cycle, 1 → 0 the next.
    variants = [variant('a', current=3), variant('b', current=1)]
    first = run(variants, {'a': 2, 'b': 1})
    assert first.targets == (('a', 1), ('b', 0))
    assert first.modified == ('a', 'b')
    assert 'stepping down to 1 first: a' in first.message
    after = [variant('a', current=1), variant('b', current=0)]
    second = run(after, {'a': 1, 'b': 0})
    assert second.targets == (('a', 0), ('b', 0))
    assert second.modified == ('a',)


def test_zero_requests_with_incomplete_metrics_keep_targets() -> None:
    result = run([variant('a', current=2)], {'a': 2}, complete=False)
    assert result.targets == (('a', 2),)
    assert result.policy == ''
    assert 'incomplete' in result.message


def test_failed_count_query_keeps_targets() -> None:
    result = run([variant('a', current=2)], {'a': 3}, count=None)
    assert result.targets == (('a', 3),)
    assert result.policy == ''
    assert 'unavailable' in result.message


@pytest.mark.parametrize('count', [math.nan, math.inf, -1.0])
def test_bad_count_is_treated_as_unknown(count: float) -> None:
    result = run([variant('a', current=2)], {'a': 2}, count=count)
    assert result.targets == (('a', 2),)
    assert 'unavailable' in result.message


def test_requests_in_window_keep_targets() -> None:
    result = run([variant('a', current=2)], {'a': 1}, count=12.0)
    assert result.targets == (('a', 1),)
    assert result.policy == ''
    assert '12 requests in the last 600 s' in result.message


def test_requests_in_window_never_leave_a_running_model_at_zero() -> None:
    # Safety rule: never to zero while requests arrived within the retention period. The
    # optimizer's targets sum to 0 here, so the cheapest variant (b, cost 4) keeps 1.
    variants = [variant('a', cost=9.0, current=1), variant('b', cost=4.0, current=1)]
    result = run(variants, {'a': 0, 'b': 0}, count=5.0)
    assert result.targets == (('a', 0), ('b', 1))
    assert result.policy == 'minimum_replicas'
    assert result.modified == ('b',)


@pytest.mark.parametrize('in_flight', [1.0, 3.0, 0.5, 1e308])
def test_requests_queued_or_running_keep_a_model_with_no_completed_request_running(
    in_flight: float,
) -> None:
    # A zero count covers completed requests only: one still queued or running is not in it.
    variants = [variant('a', cost=9.0, current=1), variant('b', cost=4.0, current=2)]
    result = run(variants, {'a': 0, 'b': 0}, count=0.0, in_flight=in_flight)
    assert result.targets == (('a', 0), ('b', 1))
    assert result.policy == 'minimum_replicas'
    assert f'{in_flight:g} requests queued or running; targets kept' in result.message


@pytest.mark.parametrize('in_flight', [math.nan, math.inf, -1.0])
def test_requests_in_flight_that_are_not_a_count_keep_targets(in_flight: float) -> None:
    result = run([variant('a', current=1)], {'a': 1}, count=0.0, in_flight=in_flight)
    assert result.targets == (('a', 1),)
    assert result.policy == ''
    assert 'queued or running unknown' in result.message


def test_an_idle_model_at_zero_stays_there_when_the_count_is_unknown() -> None:
    result = run([variant('a', current=0)], {'a': 0}, count=None)
    assert result.targets == (('a', 0),)
    assert result.policy == ''


def test_already_at_zero_changes_nothing() -> None:
    result = run([variant('a', current=0)], {'a': 0}, count=0.0)
    assert (result.targets, result.policy, result.modified) == ((('a', 0),), '', ())


# ----------------------------------------------------------------------------- disabled


def test_disabled_gives_the_cheapest_variant_one_replica() -> None:
    variants = [variant('a', cost=9.5), variant('b', cost=3.0), variant('c', cost=20.0)]
    result = run(variants, {'a': 0, 'b': 0, 'c': 0}, config=OFF)
    assert result.targets == (('a', 0), ('b', 1), ('c', 0))
    assert result.policy == 'minimum_replicas'
    assert result.reason == 'minimum_replicas (enforced)'
    assert result.modified == ('b',)


def test_disabled_non_positive_cost_counts_as_ten_and_ties_go_to_first_name() -> None:
    # b: 0 → 10, c: -1 → 10, a: 10 — a three-way tie at 10, 'a' first alphabetically.
    variants = [variant('c', cost=-1.0), variant('b', cost=0.0), variant('a', cost=10.0)]
    result = run(variants, {'a': 0, 'b': 0, 'c': 0}, config=OFF)
    assert result.targets == (('a', 1), ('b', 0), ('c', 0))
    # d: NaN → 10 ties with e at 10 and wins by name; f at 10.5 is dearer.
    variants = [variant('f', cost=10.5), variant('e', cost=10.0), variant('d', cost=math.nan)]
    result = run(variants, {'d': 0, 'e': 0, 'f': 0}, config=OFF)
    assert result.target_map() == {'d': 1, 'e': 0, 'f': 0}


def test_disabled_with_replicas_left_changes_nothing() -> None:
    result = run([variant('a'), variant('b')], {'a': 0, 'b': 2}, config=OFF, count=0.0)
    assert result.targets == (('a', 0), ('b', 2))
    assert (result.policy, result.reason, result.modified) == ('', '', ())
    assert 'disabled' in result.message


def test_disabled_is_the_default() -> None:
    result = run([variant('a', current=3)], {'a': 0}, config=ModelConfig(), count=0.0)
    assert result.targets == (('a', 1),)
    assert result.policy == 'minimum_replicas'


# ---------------------------------------------------------------------------- bad input


def test_no_variants() -> None:
    result = run([], {'a': 3})
    assert (result.targets, result.policy, result.modified) == ((), '', ())


def test_missing_target_keeps_current_and_negative_reads_as_zero() -> None:
    variants = [variant('a', current=2), variant('b', current=1)]
    result = run(variants, {'b': -4}, config=OFF)
    assert result.targets == (('a', 2), ('b', 0))
    assert result.modified == ()


def test_enforced_reason_appends_once() -> None:
    assert enforced_reason(reason='V2 scale-down') == 'V2 scale-down (enforced)'
    assert enforced_reason(reason='V2 (enforced)') == 'V2 (enforced)'


# ---------------------------------------------------------------------------- properties


@st.composite
def models(draw: st.DrawFn) -> tuple[list[Variant], dict[str, int]]:
    names = draw(st.lists(st.sampled_from(['a', 'b', 'c', 'd']), min_size=1, unique=True))
    variants = [
        variant(
            name,
            cost=draw(st.sampled_from([0.0, 2.0, 10.0, 15.0])),
            current=draw(st.integers(min_value=0, max_value=4)),
            min_replicas=draw(st.sampled_from([0, 0, 0, 1])),
        )
        for name in names
    ]
    targets = {v.name: draw(st.integers(min_value=0, max_value=4)) for v in variants}
    return variants, targets


@given(
    model=models(),
    enabled=st.sampled_from([None, True, False]),
    count=st.sampled_from([None, 0.0, 1.0, math.nan]),
    in_flight=st.sampled_from([0.0, 0.0, 1.0, 7.5, math.nan]),
    complete=st.booleans(),
)
def test_safety_properties(
    model: tuple[list[Variant], dict[str, int]],
    enabled: bool | None,
    count: float | None,
    in_flight: float,
    complete: bool,
) -> None:
    variants, targets = model
    config = ModelConfig(scale_to_zero=ScaleToZeroConfig(enabled=enabled))
    result = run(
        variants, targets, config=config, count=count, in_flight=in_flight, complete=complete
    )
    final = result.target_map()
    assert sorted(final) == sorted(targets)
    assert result.modified == tuple(n for n in sorted(final) if final[n] != targets[n])
    assert (result.policy == '') == (result.modified == ())
    running = sum(v.current_replicas for v in variants) > 0
    skipped = any(v.min_replicas > 0 for v in variants)
    if running and not skipped and sum(final.values()) == 0:
        # Only a confirmed idle window with complete metrics may leave a running model at 0.
        assert enabled is True
        assert count == 0.0
        assert in_flight == 0.0
        assert complete
    for v in variants:
        if result.policy == 'scale_to_zero':
            # N → 1 before 1 → 0.
            assert final[v.name] == (1 if v.current_replicas > 1 else 0)
        elif result.policy == 'minimum_replicas':
            assert final[v.name] >= targets[v.name]
