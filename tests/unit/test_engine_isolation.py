"""One model's arithmetic never takes down the decision of the others.

- `queueLengthThreshold: 1e308` (past the ConfigMap's range, built directly): decided, no raise;
  the same in a ConfigMap is refused with an error naming the field.
- Any configuration within the ranges, any figures within theirs, memory at its extremes: every
  model is decided by its analyzer (no `hold: analysis failed`), targets within bounds.
- An analysis that raises for one model (a fault injected: no input within range raises): that
  model holds at its current count within bounds, says why, keeps its metrics judgement and
  writes no memory; the other model is decided as usual.
"""

from __future__ import annotations

import sys
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llmscaler.analyze.saturation import percentage as saturation_percentage
from llmscaler.config import fields
from llmscaler.config.build import build_config
from llmscaler.config.configmap_entries import ConfigMapSource
from llmscaler.config.configmaps import SATURATION_CONFIGMAP
from llmscaler.config.resolved import (
    AnalyzerSpec,
    Config,
    CoreSettings,
    ModelConfig,
    SaturationConfig,
    ScaleToZeroConfig,
)
from llmscaler.domain.basics import COUNT_MAX
from llmscaler.domain.snapshot import PoolMetrics, ReplicaMetrics, Snapshot, Variant
from llmscaler.domain.state import EMPTY_STATE, CapacityRecord, K2Sample, State
from llmscaler.engine import ANALYSIS_FAILED, decide

NOW = 1_000_000.0
NS = 'ns'
HUGE = sys.float_info.max


def variant(name: str, model: str, *, current: int = 2, **more: Any) -> Variant:
    return Variant(
        name=name,
        namespace=NS,
        model_id=model,
        min_replicas=1,
        max_replicas=5,
        current_replicas=current,
        ready_replicas=current,
        **more,
    )


def replica(pod: str, name: str, **figures: Any) -> ReplicaMetrics:
    base: dict[str, Any] = {'kv_usage': 0.1, 'queue_length': 0.0}
    return ReplicaMetrics(
        pod=pod, variant=name, namespace=NS, observed_at=NOW - 5, **{**base, **figures}
    )


def idle_fleet(*models: str) -> Snapshot:
    variants = tuple(variant(f'{m}-v', m) for m in models)
    replicas = tuple(replica(f'{v.name}-{i}', v.name) for v in variants for i in range(2))
    return Snapshot(variants=variants, replicas=replicas)


def test_a_queue_threshold_near_the_float_maximum_is_decided_without_raising() -> None:
    # Two non-saturated replicas each have a spare queue of about 1e308: their exact sum
    # overflowed (OverflowError from decide(), every model of the cycle lost).
    config = Config(default=ModelConfig(saturation=SaturationConfig(queue_length_threshold=1e308)))
    (decision,) = decide(
        snapshot=idle_fleet('m'), config=config, state=EMPTY_STATE, now=NOW
    ).decisions
    assert not decision.reason.startswith(ANALYSIS_FAILED)
    assert dict(decision.figures)['avg_spare_queue'] == 1e308
    # Both idle replicas could absorb the other's load: the ordinary scale-down of V1.
    assert (decision.current, decision.target) == (2, 1)


def test_the_same_threshold_in_a_configmap_is_refused_naming_the_field() -> None:
    source = ConfigMapSource(
        name=SATURATION_CONFIGMAP,
        namespace='ctrl',
        data={'default': 'queueLengthThreshold: 1e308'},
    )
    config, errors = build_config(
        configmaps=[source], settings=CoreSettings(), controller_namespace='ctrl'
    )
    assert config.default.saturation.queue_length_threshold == 5.0
    (error,) = errors
    assert error.field == 'queueLengthThreshold'
    assert 'must be in [0, 1000000]' in error.message


def test_an_analysis_that_raises_holds_its_model_and_spares_the_others(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # No input within the ranges raises any more; the last line of defence is tested by making
    # the analyzer raise for one model (the real one runs for the other).
    real = saturation_percentage.decide_percentage

    def failing(**kwargs: Any) -> Any:
        if kwargs['variants'][0].model_id == 'broken':
            raise OverflowError('intermediate overflow in fsum')
        return real(**kwargs)

    monkeypatch.setattr(saturation_percentage, 'decide_percentage', failing)
    snapshot = idle_fleet('broken', 'fine')
    state = State(last_desired=(('ns/broken-v', 2),))
    outcome = decide(snapshot=snapshot, config=Config(), state=state, now=NOW)
    broken, fine = sorted(outcome.decisions, key=lambda d: d.model_id)
    assert (broken.model_id, broken.current, broken.target) == ('broken', 2, 2)
    assert broken.reason == (
        'hold: analysis failed (OverflowError: intermediate overflow in fsum); targets kept'
    )
    assert (broken.metrics_available, broken.metrics_reason) == (True, 'MetricsFound')
    assert broken.figures == ()
    # The other model scales down on its idle replicas, as it does alone.
    alone = decide(snapshot=idle_fleet('fine'), config=Config(), state=EMPTY_STATE, now=NOW)
    assert fine == alone.decisions[0]
    assert (fine.current, fine.target) == (2, 1)
    assert dict(outcome.state.last_desired) == {'ns/broken-v': 2, 'ns/fine-v': 1}


def test_a_failed_model_holds_within_its_bounds_and_keeps_its_metrics_judgement(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def failing(**kwargs: Any) -> Any:
        raise ZeroDivisionError('float division by zero')

    monkeypatch.setattr(saturation_percentage, 'decide_percentage', failing)
    above = Variant(
        name='v', namespace=NS, model_id='m', min_replicas=1, max_replicas=3,
        current_replicas=5, ready_replicas=5,
    )  # fmt: skip
    snapshot = Snapshot(variants=(above,), replicas=(replica('v-0', 'v'),))
    (decision,) = decide(snapshot=snapshot, config=Config(), state=EMPTY_STATE, now=NOW).decisions
    assert decision.target == 3
    assert decision.reason.startswith(f'{ANALYSIS_FAILED} (ZeroDivisionError: ')
    assert (decision.metrics_available, decision.metrics_reason) == (False, 'MetricsMissing')
    assert decision.message == '1 of 5 ready replicas report metrics'


# --- property: nothing within the ranges makes an analysis raise -------------------------------

QUEUES = st.sampled_from([0.0, 1e-300, 1.0, 5.0, 999_999.5, fields.QUEUE_LENGTH_MAX])
FRACTIONS = st.sampled_from([0.0, 5e-324, 0.1, 0.8, 1.0])
THRESHOLDS = st.sampled_from([5e-324, 1e-9, 0.5, 0.85, 1.0])
WEIGHTS = st.sampled_from([0.0, 1e-300, 1.0, fields.WEIGHT_MAX])
VALUES = st.sampled_from([0.0, 1e-300, 1.0, 1e15, 1e300, HUGE])
FIGURES = st.one_of(st.none(), VALUES)
COUNTS = st.sampled_from([None, 1, 16, COUNT_MAX])


@st.composite
def configs(draw: st.DrawFn) -> Config:
    kv, spare = sorted((draw(FRACTIONS), draw(FRACTIONS)), reverse=True)
    down = draw(THRESHOLDS.filter(lambda x: x < 1.0))
    up = draw(THRESHOLDS.filter(lambda x: x > down))
    analyzers = (
        (AnalyzerSpec(name='saturation', score=draw(WEIGHTS)),) if draw(st.booleans()) else ()
    )
    saturation = SaturationConfig(
        kv_cache_threshold=kv,
        queue_length_threshold=draw(QUEUES),
        kv_spare_trigger=spare,
        queue_spare_trigger=draw(QUEUES),
        scale_up_threshold=up,
        scale_down_boundary=down,
        priority=draw(WEIGHTS),
        analyzer_name=draw(st.sampled_from(['', 'saturation'])),
        analyzers=analyzers,
    )
    core = CoreSettings(
        interval=draw(st.sampled_from([1.0, 30.0, 3600.0])),
        k2_window=draw(st.sampled_from([1, 10, 10_000])),
        k2_history_ttl=draw(st.sampled_from([1e-9, 30 * 86400.0])),
        capacity_ttl=draw(st.sampled_from([1e-9, 365 * 86400.0])),
        scale_to_zero=draw(st.booleans()),
        default_retention_period=7 * 86400.0,
    )
    return Config(
        settings=core,
        default=ModelConfig(
            saturation=saturation,
            scale_to_zero=ScaleToZeroConfig(
                retention_period=draw(st.sampled_from([1.0, 604800.0]))
            ),
        ),
    )


@st.composite
def fleets(draw: st.DrawFn) -> tuple[Snapshot, State]:
    variants = []
    replicas = []
    for index in range(draw(st.integers(min_value=1, max_value=3))):
        current = draw(st.integers(min_value=0, max_value=3))
        name = f'v{index}'
        variants.append(
            Variant(
                name=name,
                namespace=NS,
                model_id='m',
                cost=draw(st.sampled_from([0.0, 1e-300, 3.9, HUGE])),
                accelerator='H100',
                role=draw(st.sampled_from(['both', 'both', 'prefill', 'decode'])),
                min_replicas=draw(st.sampled_from([0, 1])),
                max_replicas=draw(st.sampled_from([1, 4, COUNT_MAX])),
                current_replicas=current,
                ready_replicas=current,
            )
        )
        for pod in range(current):
            replicas.append(
                ReplicaMetrics(
                    pod=f'{name}-{pod}',
                    variant=name,
                    namespace=NS,
                    observed_at=NOW - 5,
                    kv_usage=draw(FRACTIONS),
                    queue_length=draw(VALUES),
                    num_gpu_blocks=draw(COUNTS),
                    block_size=draw(COUNTS),
                    avg_input_tokens=draw(FIGURES),
                    avg_output_tokens=draw(FIGURES),
                    prefix_cache_hit_rate=draw(st.sampled_from([None, 0.0, 1.0])),
                    arrival_rate=draw(FIGURES),
                    running_requests=draw(FIGURES),
                )
            )
    pool = PoolMetrics(
        model_id='m',
        namespace=NS,
        observed_at=NOW - 5,
        queue_size=draw(VALUES),
        queue_bytes=draw(VALUES),
        request_count=draw(FIGURES),
        arrival_rate=draw(FIGURES),
    )
    record = CapacityRecord(
        namespace=NS,
        model_id='m',
        variant='v0',
        accelerator='H100',
        gpus_per_replica=1,
        effective_capacity=draw(st.sampled_from([0.0, 1.0, 1e18, HUGE])),
        total_kv_capacity_tokens=draw(st.sampled_from([0, 1, 2**63 - 1])),
        source='live',
        updated_at=NOW - 10,
    )
    samples = tuple(K2Sample(value=draw(st.sampled_from([1.0, HUGE])), at=NOW - 1) for _ in '123')
    state = State(
        k2_history=(('m|H100|1|short', samples),),
        capacity=(('ns|m|v0', record),),
        last_desired=(('ns/v0', draw(st.sampled_from([0, 3, COUNT_MAX]))),),
        last_informative=(('m|ns|saturation-token', NOW - 1),),
    )
    return Snapshot(variants=tuple(variants), replicas=tuple(replicas), pools=(pool,)), state


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(config=configs(), fleet=fleets())
def test_no_configuration_or_figure_within_range_makes_an_analysis_raise(
    config: Config, fleet: tuple[Snapshot, State]
) -> None:
    snapshot, state = fleet
    outcome = decide(snapshot=snapshot, config=config, state=state, now=NOW)
    by_name = {v.name: v for v in snapshot.variants}
    assert len(outcome.decisions) == len(snapshot.variants)
    for decision in outcome.decisions:
        assert not decision.reason.startswith(ANALYSIS_FAILED), decision.reason
        bounds = by_name[decision.variant]
        assert bounds.min_replicas <= decision.target <= bounds.max_replicas
    again = decide(snapshot=snapshot, config=config, state=outcome.state, now=NOW + 30)
    assert not any(d.reason.startswith(ANALYSIS_FAILED) for d in again.decisions)
