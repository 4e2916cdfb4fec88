"""The replica calculator against cases of Kubernetes' replica_calculator_test.go (their names,
inputs and expected results), plus properties: within tolerance nothing changes; outside it an
AverageValue External proposal is ⌈Σ/target⌉ whatever the replica count."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from llmscaler.hpa.pods import Pod, PodMetric
from llmscaler.hpa.replica_calculator import (
    CalcError,
    Proposal,
    Tolerances,
    external_metric_replicas,
    external_per_pod_metric_replicas,
    object_metric_replicas,
    object_per_pod_metric_replicas,
    plain_metric_replicas,
    resource_replicas,
)

NOW = 10_000.0
# Upstream's test pods started long ago with their Ready condition's last transition at the
# start (an unready one has never been ready), and report a sample taken after that.
OLD = 0.0


def cpu_pods(n: int, *, request: int = 1000, **overrides: list[object]) -> tuple[Pod, ...]:
    pods = []
    for i in range(n):
        fields: dict[str, object] = {'name': f'p{i}', 'request': request, 'start_time': OLD}
        for key, values in overrides.items():
            fields[key] = values[i]
        pods.append(Pod(**fields))  # type: ignore[arg-type]
    return tuple(pods)


def samples(levels: list[int], *, first: int = 0) -> dict[str, PodMetric]:
    return {f'p{first + i}': PodMetric(value=v, timestamp=NOW - 60) for i, v in enumerate(levels)}


def cpu(current: int, pods: tuple[Pod, ...], levels: dict[str, PodMetric], target: int) -> Proposal:
    result = resource_replicas(
        current_replicas=current,
        target_utilization=target,
        resource='cpu',
        pods=pods,
        metrics=levels,
        now=NOW,
    )
    assert isinstance(result, Proposal)
    return result


def test_scale_up() -> None:
    # TestReplicaCalcScaleUp: 1500m of 3000m requested is 50 % against 30 %.
    result = cpu(3, cpu_pods(3), samples([300, 500, 700]), 30)
    assert (result.replicas, result.usage) == (5, 50)


def test_scale_down() -> None:
    # TestReplicaCalcScaleDown: 28 % against 50 %: ⌈0.56 · 5⌉.
    result = cpu(5, cpu_pods(5), samples([100, 300, 500, 250, 250]), 50)
    assert (result.replicas, result.usage) == (3, 28)


def test_utilization_is_truncated_before_the_ratio() -> None:
    # 4990m of 8000m is 62.375 %, used as 62 %: with no tolerance that is exactly on target
    # (the untruncated ratio would ask for ⌈1.006 · 8⌉ = 9).
    result = resource_replicas(
        current_replicas=8,
        target_utilization=62,
        resource='cpu',
        pods=cpu_pods(8),
        metrics=samples([624] * 7 + [622]),
        now=NOW,
        tolerances=Tolerances(scale_down=0.0, scale_up=0.0),
    )
    assert isinstance(result, Proposal)
    assert (result.replicas, result.usage) == (8, 62)


def test_scale_up_unready_less_scale() -> None:
    # TestReplicaCalcScaleUpUnreadyLessScale: the unready pod is re-added at 0 on scale-up.
    pods = cpu_pods(3, ready=[False, True, True], ready_transition=[OLD, OLD, OLD])
    result = cpu(3, pods, samples([300, 500, 700]), 30)
    assert (result.replicas, result.usage) == (4, 60)


def test_scale_up_unready_no_scale() -> None:
    # TestReplicaCalcScaleUpUnreadyNoScale: re-adding two unready pods at 0 flips the direction.
    pods = cpu_pods(3, ready=[True, False, False], ready_transition=[OLD, OLD, OLD])
    result = cpu(3, pods, samples([400, 500, 700]), 30)
    assert (result.replicas, result.usage) == (3, 40)


def test_scale_up_ignores_failed_and_deleted_pods() -> None:
    # TestReplicaCalcScaleUpIgnoresFailedPods / ...DeletionPods.
    failed = cpu_pods(4, phase=['Running', 'Running', 'Failed', 'Failed'])
    assert cpu(2, failed, samples([500, 700]), 30).replicas == 4
    deleted = cpu_pods(4, deleting=[False, False, True, True])
    assert cpu(2, deleted, samples([500, 700, 100, 100]), 30).replicas == 4


def test_missing_pod_counts_at_target_on_scale_down_and_zero_on_scale_up() -> None:
    pods = cpu_pods(4)
    # Scale-down: 3 pods at 10 % and one without a sample, assumed at 100 % of its request.
    down = cpu(4, pods, samples([100, 100, 100]), 50)
    assert down.replicas == math.ceil((300 + 1000) * 100 // 4000 / 50 * 4)
    # Scale-up: the missing pod is assumed idle.
    up = cpu(4, pods, samples([900, 900, 900]), 50)
    assert up.replicas == math.ceil((2700 * 100 // 4000) / 50 * 4)


def pods_metric(current: int, levels: list[int], target: int, **kw: list[bool]) -> Proposal:
    result = plain_metric_replicas(
        current_replicas=current,
        target_usage=target,
        resource='',
        pods=cpu_pods(len(levels), **kw),  # type: ignore[arg-type]
        metrics=samples(levels),
        now=NOW,
    )
    assert isinstance(result, Proposal)
    return result


def test_pods_metric_cases() -> None:
    # TestReplicaCalcScaleUpCM, TestReplicaCalcScaleDownCM, TestReplicaCalcToleranceCM.
    assert pods_metric(3, [20000, 10000, 30000], 15000).replicas == 4
    assert pods_metric(5, [12000] * 5, 20000).replicas == 3
    within = pods_metric(3, [20000, 21000, 21000], 20000)
    assert (within.replicas, within.usage) == (3, 20666)


def test_pods_metric_counts_unready_running_pods() -> None:
    # rc-pods-unready-not-excluded: a Running pod with a sample counts, Ready or not.
    result = pods_metric(3, [20000, 10000, 30000], 15000, ready=[False, True, True])
    assert result.replicas == 4


def test_external_and_object_cases() -> None:
    pods = cpu_pods(1)
    # TestReplicaCalcScaleUpCMExternal: Value target, ⌈1.95 · 1 ready pod⌉.
    value = external_metric_replicas(
        current_replicas=1, target_usage=4400, values=[8600], pods=pods
    )
    assert isinstance(value, Proposal)
    assert value.replicas == 2
    # TestReplicaCalcScaleUpPerPodCMExternal: AverageValue, ⌈8600 / 2150⌉.
    per_pod = external_per_pod_metric_replicas(
        status_replicas=3, target_usage_per_pod=2150, values=[8600]
    )
    assert (per_pod.replicas, per_pod.usage) == (4, 2867)
    # rc-object-value-from-zero: from 0 replicas the tolerance is skipped.
    zero = object_metric_replicas(current_replicas=0, target_usage=1000, usage=1050, pods=())
    assert isinstance(zero, Proposal)
    assert zero.replicas == 2
    obj = object_per_pod_metric_replicas(status_replicas=2, target_average_usage=500, usage=3000)
    assert obj.replicas == 6


def test_errors_are_values() -> None:
    no_metrics = plain_metric_replicas(
        current_replicas=1, target_usage=1, resource='', pods=cpu_pods(1), metrics={}, now=NOW
    )
    assert isinstance(no_metrics, CalcError)
    no_request = resource_replicas(
        current_replicas=1,
        target_utilization=50,
        resource='cpu',
        pods=(Pod(name='p0'),),
        metrics=samples([10]),
        now=NOW,
    )
    assert isinstance(no_request, CalcError)
    no_pods = external_metric_replicas(current_replicas=2, target_usage=1, values=[9], pods=())
    assert isinstance(no_pods, CalcError)


@given(
    status=st.integers(1, 50),
    target=st.integers(1, 100_000),
    ratio=st.floats(0.9, 1.1),
)
def test_within_tolerance_no_change(status: int, target: int, ratio: float) -> None:
    total = int(target * status * ratio)
    if not Tolerances().is_within(total / (target * status)):
        return
    result = external_per_pod_metric_replicas(
        status_replicas=status, target_usage_per_pod=target, values=[total]
    )
    assert result.replicas == status
    value = external_metric_replicas(
        current_replicas=status, target_usage=target * status, values=[total], pods=cpu_pods(status)
    )
    assert isinstance(value, Proposal)
    assert value.replicas == status


@given(
    status=st.integers(0, 50),
    target=st.integers(1, 100_000),
    values=st.lists(st.integers(0, 10**7), max_size=4),
)
def test_average_value_outside_tolerance_is_total_over_target(
    status: int, target: int, values: list[int]
) -> None:
    result = external_per_pod_metric_replicas(
        status_replicas=status, target_usage_per_pod=target, values=values
    )
    total = sum(values)
    if status and Tolerances().is_within(total / (target * status)):
        assert result.replicas == status
    else:
        assert result.replicas == math.ceil(total / target)
