"""One HPA's reconcile: the decision order of upstream's reconcileAutoscaler (disabled at 0,
out-of-range without metrics, invalid metrics, both normalization paths) and its memory."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmscaler.hpa.behavior import Behavior, ScaleEvent, ScalingRules
from llmscaler.hpa.pods import Pod, PodMetric
from llmscaler.hpa.reconcile import (
    HpaSpec,
    HpaState,
    MetricInput,
    MetricSpec,
    Scale,
    reconcile,
)
from llmscaler.hpa.stabilization import Recommendation

QUEUE = MetricSpec(type='External', name='s0-prometheus', target_type='AverageValue', target=5000)
KV = MetricSpec(type='External', name='s1-prometheus', target_type='AverageValue', target=800)


def scale(n: int) -> Scale:
    return Scale(
        spec_replicas=n, status_replicas=n, pods=tuple(Pod(name=f'p{i}') for i in range(n))
    )


def test_first_scale_down_waits_for_the_whole_window() -> None:
    # full-TestScaleDownStabilizeInitialSize: the log is seeded with the current count.
    spec = HpaSpec(max_replicas=10, metrics=(QUEUE,))
    first = reconcile(spec=spec, scale=scale(5), values=[[15000]], state=HpaState(), now=0.0)
    assert (first.desired_replicas, first.rescale, first.metric_replicas) == (5, False, 3)
    later = reconcile(spec=spec, scale=scale(5), values=[[15000]], state=first.state, now=300.5)
    assert (later.desired_replicas, later.rescale) == (3, True)
    assert later.state.scale_down_events == ()  # no behavior, no history


def test_disabled_at_zero_and_out_of_range_without_metrics() -> None:
    spec = HpaSpec(max_replicas=4, min_replicas=2, metrics=(QUEUE,))
    disabled = reconcile(spec=spec, scale=scale(0), values=[None], state=HpaState(), now=0.0)
    assert (disabled.rescale, disabled.reason) == (False, 'ScalingDisabled')
    high = reconcile(spec=spec, scale=scale(7), values=[None], state=HpaState(), now=0.0)
    assert (high.desired_replicas, high.rescale, high.metric_replicas) == (4, True, None)
    low = reconcile(spec=spec, scale=scale(1), values=[None], state=HpaState(), now=0.0)
    assert low.desired_replicas == 2


def test_an_invalid_metric_blocks_scale_down_but_not_scale_up() -> None:
    spec = HpaSpec(max_replicas=20, metrics=(QUEUE, KV))
    # full-TestScaleUpOneMetricInvalid.
    up = reconcile(spec=spec, scale=scale(3), values=[[30000], None], state=HpaState(), now=0.0)
    assert (up.desired_replicas, up.error is not None) == (6, True)
    # full-TestNoScaleDownOneMetricInvalid.
    down = reconcile(spec=spec, scale=scale(5), values=[[5000], None], state=HpaState(), now=0.0)
    assert (down.rescale, down.reason) == (False, 'FailedComputeMetricsReplicas')
    both = reconcile(spec=spec, scale=scale(3), values=[None, None], state=HpaState(), now=0.0)
    assert both.rescale is False


def test_the_max_over_metrics_wins() -> None:
    spec = HpaSpec(max_replicas=20, metrics=(QUEUE, KV))
    result = reconcile(
        spec=spec, scale=scale(2), values=[[10000], [2400]], state=HpaState(), now=0.0
    )
    assert result.metric_replicas == 3


def test_behavior_limits_and_records_scale_up() -> None:
    spec = HpaSpec(max_replicas=50, metrics=(QUEUE,), behavior=Behavior())
    first = reconcile(spec=spec, scale=scale(2), values=[[200000]], state=HpaState(), now=0.0)
    # Default scale-up: max(+4 pods, +100 %) per 15 s.
    assert (first.desired_replicas, first.limited) == (6, 'ScaleUpLimit')
    assert first.state.scale_up_events == (ScaleEvent(4, 0.0),)
    held = reconcile(spec=spec, scale=scale(6), values=[[200000]], state=first.state, now=10.0)
    assert held.desired_replicas == 6
    again = reconcile(spec=spec, scale=scale(6), values=[[200000]], state=held.state, now=15.0)
    assert again.desired_replicas == 12


def test_scale_to_zero_with_an_external_metric() -> None:
    spec = HpaSpec(
        max_replicas=5,
        min_replicas=0,
        metrics=(QUEUE,),
        behavior=Behavior(scale_down=ScalingRules(stabilization_window_seconds=0)),
    )
    result = reconcile(spec=spec, scale=scale(2), values=[[0]], state=HpaState(), now=0.0)
    assert result.desired_replicas == 0


def test_per_hpa_tolerance() -> None:
    # A 5 % scale-up tolerance sees 10 % over target as a step.
    loose = HpaSpec(max_replicas=20, metrics=(QUEUE,))
    tight = HpaSpec(
        max_replicas=20,
        metrics=(QUEUE,),
        behavior=Behavior(scale_up=ScalingRules(tolerance=0.05)),
    )
    values: list[MetricInput] = [[55000]]
    assert (
        reconcile(spec=loose, scale=scale(10), values=values, state=HpaState(), now=0).rescale
        is False
    )
    assert (
        reconcile(
            spec=tight, scale=scale(10), values=values, state=HpaState(), now=0
        ).desired_replicas
        == 11
    )


@pytest.mark.parametrize(
    ('kwargs', 'match'),
    [
        ({'max_replicas': 0, 'metrics': (QUEUE,)}, 'maxReplicas'),
        ({'max_replicas': 2, 'min_replicas': 3, 'metrics': (QUEUE,)}, 'minReplicas'),
        ({'max_replicas': 2, 'metrics': ()}, 'metric'),
        (
            {
                'max_replicas': 2,
                'min_replicas': 0,
                'metrics': (MetricSpec('Pods', 'q', 'AverageValue', 1),),
            },
            'Object or External',
        ),
    ],
)
def test_invalid_specs_are_refused(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        HpaSpec(**kwargs)  # type: ignore[arg-type]


def test_invalid_metric_specs_are_refused() -> None:
    with pytest.raises(ValueError, match='target type'):
        MetricSpec('Pods', 'q', 'Value', 1)
    with pytest.raises(ValueError, match='> 0'):
        MetricSpec('External', 'q', 'AverageValue', 0)


@given(
    lower=st.integers(1, 5),
    extra=st.integers(0, 20),
    loads=st.lists(st.integers(0, 200_000), min_size=1, max_size=30),
    behavior=st.booleans(),
)
def test_replicas_stay_within_bounds(
    lower: int, extra: int, loads: list[int], behavior: bool
) -> None:
    spec = HpaSpec(
        max_replicas=lower + extra,
        min_replicas=lower,
        metrics=(QUEUE,),
        behavior=Behavior() if behavior else None,
    )
    state, current = HpaState(), lower
    for step, load in enumerate(loads):
        result = reconcile(
            spec=spec, scale=scale(current), values=[[load]], state=state, now=15.0 * step
        )
        state, current = result.state, result.desired_replicas
        assert lower <= current <= lower + extra


# ---- cases of Kubernetes' horizontal_test.go (full reconcile, legacy path) -------------------

NOW = 10_000.0


def cpu_case(
    *,
    spec_replicas: int,
    levels: list[int],
    target: int,
    min_replicas: int,
    max_replicas: int,
    recommendations: tuple[Recommendation, ...] | None,
) -> int:
    pods = tuple(Pod(name=f'p{i}', request=1000) for i in range(len(levels)))
    samples = {f'p{i}': PodMetric(value=v, timestamp=NOW - 60) for i, v in enumerate(levels)}
    spec = HpaSpec(
        max_replicas=max_replicas,
        min_replicas=min_replicas,
        metrics=(MetricSpec('Resource', 'cpu', 'Utilization', target),),
    )
    return reconcile(
        spec=spec,
        scale=Scale(spec_replicas=spec_replicas, status_replicas=spec_replicas, pods=pods),
        values=[samples],
        state=HpaState(recommendations=recommendations),
        now=NOW,
    ).desired_replicas


def test_upstream_full_cases() -> None:
    # TestScaleUp: 50 % against 30 % on 3 pods.
    assert cpu_case(spec_replicas=3, levels=[300, 500, 700], target=30, min_replicas=2,
                    max_replicas=6, recommendations=()) == 5  # fmt: skip
    # TestScaleDown: the 10 @ -10 min has expired, 2 @ -1 min is below the proposal 3.
    recent = (Recommendation(10, NOW - 600), Recommendation(2, NOW - 60))
    assert cpu_case(spec_replicas=5, levels=[100, 300, 500, 250, 250], target=50,
                    min_replicas=2, max_replicas=6, recommendations=recent) == 3  # fmt: skip
    # TestScaleDownStabilizeInitialSize: no log yet, seeded with 5: held.
    assert cpu_case(spec_replicas=5, levels=[100, 300, 500, 250, 250], target=50,
                    min_replicas=2, max_replicas=6, recommendations=None) == 5  # fmt: skip
    # TestTolerance: 102 % against 100 %.
    assert cpu_case(spec_replicas=3, levels=[1010, 1030, 1020], target=100, min_replicas=1,
                    max_replicas=5, recommendations=()) == 3  # fmt: skip
    # TestMinReplicas: the proposal 1 is raised to minReplicas 2.
    assert cpu_case(spec_replicas=3, levels=[10, 95, 10], target=90, min_replicas=2,
                    max_replicas=5, recommendations=()) == 2  # fmt: skip


def test_upstream_scale_up_cm() -> None:
    # TestScaleUpCM: a Pods metric "qps", AverageValue 15 (15000 m), 20 on average: ⌈4⌉.
    pods = tuple(Pod(name=f'p{i}') for i in range(3))
    samples = {f'p{i}': PodMetric(value=v) for i, v in enumerate([20000, 10000, 30000])}
    spec = HpaSpec(
        max_replicas=6, min_replicas=2, metrics=(MetricSpec('Pods', 'qps', 'AverageValue', 15000),)
    )
    result = reconcile(
        spec=spec, scale=Scale(3, 3, pods), values=[samples], state=HpaState(), now=NOW
    )
    assert result.desired_replicas == 4
