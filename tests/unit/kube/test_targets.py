"""The scale-target accessor on realistic Deployment, StatefulSet and LeaderWorkerSet manifests."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmscaler.domain.snapshot import EngineParams, Variant
from llmscaler.kube.targets import (
    ScaleTarget,
    TargetProblem,
    accessor,
    to_variant,
)
from tests.support.workloads import LEADER_SCRIPT, deployment, lws, stateful_set


def ok(obj: object) -> ScaleTarget:
    result = accessor(obj)  # type: ignore[arg-type]
    assert isinstance(result, ScaleTarget), result
    return result


def problem(obj: object) -> TargetProblem:
    result = accessor(obj)  # type: ignore[arg-type]
    assert isinstance(result, TargetProblem), result
    return result


def test_deployment_with_one_gpu() -> None:
    target = ok(deployment())
    assert (target.kind, target.namespace, target.name) == ('Deployment', 'llm', 'llama-8b-a100')
    assert target.api_version == 'apps/v1'
    # pending = max(0, status.replicas 3 − ready 2) = 1
    assert (target.replicas, target.ready, target.pending) == (3, 2, 1)
    assert target.group_size == 1
    assert target.gpus_per_replica == 1
    assert target.leader_template == target.worker_template
    assert target.leader_template == deployment()['spec']['template']
    assert target.engine is not None
    assert target.engine.max_num_seqs == 128
    assert target.role == 'both'
    assert target.accelerator == 'NVIDIA-A100-SXM4-80GB'
    assert target.selector == 'app=llama-8b,variant=a100'


def test_stateful_set_role_affinity_and_expressions() -> None:
    target = ok(stateful_set())
    assert (target.kind, target.namespace, target.name) == ('StatefulSet', 'pd', 'qwen-decode')
    # pending = max(0, 4 − 1) = 3
    assert (target.replicas, target.ready, target.pending) == (2, 1, 3)
    # 2 GPUs on the vLLM container + 0 on the sidecar
    assert target.gpus_per_replica == 2
    assert target.engine is not None
    assert target.engine.tensor_parallel_size == 2
    assert target.role == 'decode'
    # The arch expression is not a GPU product label and is skipped.
    assert target.accelerator == 'NVIDIA-H100-80GB-HBM3'
    assert target.selector == 'app=qwen,llm-d.ai/role in (both,decode)'


def test_lws_with_leader_template() -> None:
    target = ok(lws())
    assert (target.kind, target.namespace, target.name) == ('LeaderWorkerSet', 'llm', 'vllm-405b')
    assert target.api_version == 'leaderworkerset.x-k8s.io/v1'
    # replicas are groups: 2 groups, 1 ready, pending max(0, 2 − 1) = 1
    assert (target.replicas, target.ready, target.pending) == (2, 1, 1)
    assert target.group_size == 4
    # leader 8 + (4 − 1) × worker 8 = 32
    assert target.gpus_per_replica == 32
    # Engine from the leader's `sh -c` script, not from the worker.
    assert target.engine is not None
    assert target.engine.tensor_parallel_size == 8
    assert target.engine.max_num_seqs == 64
    assert target.leader_template['metadata']['labels'] == {'role': 'leader'}
    assert target.worker_template['metadata']['labels'] == {'llm-d.ai/role': 'both'}
    # The role is read from the leader template, which has no role label.
    assert target.role == 'both'
    assert target.accelerator == 'NVIDIA-H100-80GB-HBM3'
    assert target.selector == (
        'leaderworkerset.sigs.k8s.io/name=vllm-405b,leaderworkerset.sigs.k8s.io/worker-index=0'
    )


def test_lws_with_different_leader_and_worker_gpus() -> None:
    obj = lws()
    leader = obj['spec']['leaderWorkerTemplate']['leaderTemplate']['spec']['containers'][0]
    leader['resources']['limits']['nvidia.com/gpu'] = '4'
    # leader 4 + (4 − 1) × worker 8 = 28
    assert ok(obj).gpus_per_replica == 28


def test_lws_without_leader_template_uses_the_worker_template() -> None:
    obj = lws(with_leader=False)
    worker = obj['spec']['leaderWorkerTemplate']['workerTemplate']
    worker['spec']['containers'][0]['command'] = ['sh', '-c', LEADER_SCRIPT]
    worker['metadata']['labels']['llm-d.ai/role'] = 'prefill'
    del obj['status']['hpaPodSelector']
    target = ok(obj)
    assert target.leader_template == target.worker_template == worker
    # 8 + (4 − 1) × 8 = 32
    assert target.gpus_per_replica == 32
    assert target.engine is not None
    assert target.engine.tensor_parallel_size == 8
    assert target.role == 'prefill'
    # Without hpaPodSelector: the leader pods' selector.
    assert target.selector == (
        'leaderworkerset.sigs.k8s.io/name=vllm-405b,leaderworkerset.sigs.k8s.io/worker-index=0'
    )


def test_lws_size_defaults_to_one() -> None:
    obj = lws()
    del obj['spec']['leaderWorkerTemplate']['size']
    target = ok(obj)
    assert target.group_size == 1
    # leader 8 + (1 − 1) × 8 = 8
    assert target.gpus_per_replica == 8


@pytest.mark.parametrize('make', [deployment, stateful_set, lws])
def test_nil_replicas_count_as_one(make: Any) -> None:
    obj = make()
    obj['spec']['replicas'] = None
    assert ok(obj).replicas == 1
    del obj['spec']['replicas']
    assert ok(obj).replicas == 1


@pytest.mark.parametrize('make', [deployment, stateful_set, lws])
def test_zero_replicas_stay_zero(make: Any) -> None:
    obj = make()
    obj['spec']['replicas'] = 0
    obj['status'] = {'replicas': 0}
    target = ok(obj)
    assert (target.replicas, target.ready, target.pending) == (0, 0, 0)


@pytest.mark.parametrize('make', [deployment, stateful_set, lws])
def test_missing_status_means_nothing_ready_or_pending(make: Any) -> None:
    obj = make()
    del obj['status']
    target = ok(obj)
    assert (target.ready, target.pending) == (0, 0)


def test_ready_above_status_replicas_clamps_pending_at_zero() -> None:
    obj = deployment()
    obj['status'] = {'replicas': 2, 'readyReplicas': 3}
    # max(0, 2 − 3) = 0
    assert ok(obj).pending == 0


def test_accelerator_label_fallbacks() -> None:
    obj = deployment()
    del obj['spec']['template']['spec']['nodeSelector']
    assert ok(obj).accelerator == 'unknown'
    obj['metadata']['labels'] = {'inference.optimization/acceleratorName': 'A100'}
    assert ok(obj).accelerator == 'A100'
    obj['spec']['template']['metadata']['labels']['inference.optimization/acceleratorName'] = 'L4'
    assert ok(obj).accelerator == 'L4'
    # nodeSelector beats the labels
    obj['spec']['template']['spec']['nodeSelector'] = {'amd.com/gpu.product-name': 'MI300X'}
    assert ok(obj).accelerator == 'MI300X'


def test_accelerator_ignores_odd_affinity_shapes() -> None:
    obj = deployment()
    spec = obj['spec']['template']['spec']
    del spec['nodeSelector']
    spec['affinity'] = {'nodeAffinity': {'requiredDuringSchedulingIgnoredDuringExecution': 7}}
    assert ok(obj).accelerator == 'unknown'
    spec['affinity'] = {
        'nodeAffinity': {
            'requiredDuringSchedulingIgnoredDuringExecution': {
                'nodeSelectorTerms': [
                    {
                        'matchExpressions': [
                            {'key': 'nvidia.com/gpu.product', 'operator': 'NotIn', 'values': ['T4']}
                        ]
                    }
                ]
            }
        }
    }
    assert ok(obj).accelerator == 'unknown'


def test_missing_namespace_is_default_and_engine_absent_without_vllm() -> None:
    obj = deployment()
    del obj['metadata']['namespace']
    obj['spec']['template']['spec']['containers'] = [
        {'name': 'web', 'image': 'nginx', 'command': ['nginx']}
    ]
    target = ok(obj)
    assert target.namespace == 'default'
    assert target.engine is None
    assert target.gpus_per_replica == 0


def test_templates_are_copies() -> None:
    obj = deployment()
    target = ok(obj)
    obj['spec']['template']['metadata']['labels']['app'] = 'changed'
    assert target.leader_template['metadata']['labels']['app'] == 'llama-8b'


def set_path(obj: dict[str, Any], path: tuple[str, ...], value: object) -> dict[str, Any]:
    node = obj
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return obj


def drop_path(obj: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
    node = obj
    for key in path[:-1]:
        node = node[key]
    del node[path[-1]]
    return obj


@pytest.mark.parametrize(
    ('obj', 'path'),
    [
        (set_path(deployment(), ('spec', 'replicas'), '3'), 'spec.replicas'),
        (set_path(deployment(), ('spec', 'replicas'), True), 'spec.replicas'),
        (set_path(deployment(), ('spec', 'replicas'), 1.5), 'spec.replicas'),
        (set_path(deployment(), ('spec', 'replicas'), -1), 'spec.replicas'),
        (set_path(deployment(), ('spec', 'replicas'), 2**31), 'spec.replicas'),
        (set_path(stateful_set(), ('spec', 'replicas'), '2'), 'spec.replicas'),
        (set_path(lws(), ('spec', 'replicas'), 'two'), 'spec.replicas'),
        (drop_path(deployment(), ('spec', 'template')), 'spec.template'),
        (drop_path(stateful_set(), ('spec', 'template')), 'spec.template'),
        (set_path(deployment(), ('spec', 'template'), []), 'spec.template'),
        (drop_path(deployment(), ('spec', 'template', 'spec')), 'spec.template.spec'),
        (
            set_path(deployment(), ('spec', 'template', 'spec', 'containers'), []),
            'spec.template.spec.containers',
        ),
        (
            set_path(deployment(), ('spec', 'template', 'spec', 'containers'), ['vllm']),
            'spec.template.spec.containers[0]',
        ),
        (
            set_path(deployment(), ('spec', 'template', 'metadata', 'labels'), ['a']),
            'spec.template.metadata.labels',
        ),
        (drop_path(deployment(), ('spec', 'selector')), 'spec.selector'),
        (set_path(deployment(), ('spec', 'selector'), {}), 'spec.selector'),
        (
            set_path(
                deployment(),
                ('spec', 'selector', 'matchExpressions'),
                [{'key': 'a', 'operator': 'Near'}],
            ),
            'spec.selector.matchExpressions[0].operator',
        ),
        (set_path(deployment(), ('status', 'readyReplicas'), '2'), 'status.readyReplicas'),
        (set_path(deployment(), ('status',), 'Running'), 'status'),
        (drop_path(deployment(), ('spec',)), 'spec'),
        (
            drop_path(lws(), ('spec', 'leaderWorkerTemplate', 'workerTemplate')),
            'spec.leaderWorkerTemplate.workerTemplate',
        ),
        (
            set_path(lws(), ('spec', 'leaderWorkerTemplate', 'leaderTemplate'), 'x'),
            'spec.leaderWorkerTemplate.leaderTemplate',
        ),
        (
            set_path(lws(), ('spec', 'leaderWorkerTemplate', 'size'), 0),
            'spec.leaderWorkerTemplate.size',
        ),
        (
            set_path(lws(), ('spec', 'leaderWorkerTemplate', 'size'), '4'),
            'spec.leaderWorkerTemplate.size',
        ),
        (drop_path(lws(), ('spec', 'leaderWorkerTemplate')), 'spec.leaderWorkerTemplate'),
        (drop_path(deployment(), ('metadata', 'name')), 'metadata.name'),
        (set_path(deployment(), ('metadata', 'namespace'), 5), 'metadata.namespace'),
        (set_path(deployment(), ('apiVersion',), 'apps/v1beta1'), 'apiVersion'),
        (set_path(lws(), ('apiVersion',), 'apps/v1'), 'apiVersion'),
    ],
)
def test_malformed_objects_name_the_path(obj: dict[str, Any], path: str) -> None:
    found = problem(obj)
    assert found.message.startswith(f'{path}:'), found.message
    assert '\n' not in found.message
    assert found.kind == obj['kind']


def test_problem_carries_identity() -> None:
    found = problem(set_path(deployment(), ('spec', 'replicas'), '3'))
    assert (found.kind, found.namespace, found.name) == ('Deployment', 'llm', 'llama-8b-a100')
    assert "'3'" in found.message


@pytest.mark.parametrize('kind', ['ReplicaSet', 'DaemonSet', 'deployment', None, 3])
def test_unsupported_kinds(kind: object) -> None:
    obj = set_path(deployment(), ('kind',), kind)
    found = problem(obj)
    assert found.message.startswith('kind:')
    assert 'Deployment, LeaderWorkerSet, StatefulSet' in found.message


@pytest.mark.parametrize('obj', [None, [], 'Deployment', 3])
def test_non_mapping_objects(obj: object) -> None:
    found = problem(obj)
    assert (found.kind, found.namespace, found.name) == ('', '', '')
    assert found.message.startswith('object:')


def test_missing_api_version_is_accepted() -> None:
    obj = deployment()
    del obj['apiVersion']
    assert ok(obj).api_version == 'apps/v1'


def test_to_variant_fills_the_core_variant() -> None:
    target = ok(lws())
    variant = to_variant(
        target=target,
        name='llama-405b-h100',
        model_id='meta-llama/Meta-Llama-3.1-405B-Instruct',
        cost=80.0,
        min_replicas=1,
        max_replicas=4,
        desired=3,
    )
    assert variant == Variant(
        name='llama-405b-h100',
        namespace='llm',
        model_id='meta-llama/Meta-Llama-3.1-405B-Instruct',
        cost=80.0,
        accelerator='NVIDIA-H100-80GB-HBM3',
        gpus_per_replica=32,
        role='both',
        min_replicas=1,
        max_replicas=4,
        current_replicas=2,
        ready_replicas=1,
        pending_replicas=1,
        desired_replicas=3,
        engine=target.engine,
    )
    assert isinstance(variant.engine, EngineParams)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=30,
)
PATHS = st.sampled_from(
    [
        ('kind',),
        ('apiVersion',),
        ('metadata',),
        ('metadata', 'name'),
        ('metadata', 'labels'),
        ('spec',),
        ('spec', 'replicas'),
        ('spec', 'selector'),
        ('spec', 'template'),
        ('spec', 'template', 'metadata'),
        ('spec', 'template', 'spec'),
        ('spec', 'template', 'spec', 'containers'),
        ('spec', 'template', 'spec', 'nodeSelector'),
        ('spec', 'template', 'spec', 'affinity'),
        ('spec', 'leaderWorkerTemplate'),
        ('spec', 'leaderWorkerTemplate', 'size'),
        ('spec', 'leaderWorkerTemplate', 'leaderTemplate'),
        ('spec', 'leaderWorkerTemplate', 'workerTemplate', 'spec'),
        ('status',),
        ('status', 'readyReplicas'),
        ('status', 'hpaPodSelector'),
    ]
)


@settings(max_examples=300)
@given(obj=JSON)
def test_never_raises_on_arbitrary_json(obj: object) -> None:
    assert isinstance(accessor(obj), (ScaleTarget, TargetProblem))  # type: ignore[arg-type]


@settings(max_examples=300)
@given(
    base=st.sampled_from([deployment, stateful_set, lws]),
    path=PATHS,
    value=JSON,
)
def test_never_raises_on_a_manifest_with_one_field_replaced(
    base: Any, path: tuple[str, ...], value: object
) -> None:
    obj = copy.deepcopy(base())
    node = obj
    for key in path[:-1]:
        if not isinstance(node.get(key), dict):
            node[key] = {}
        node = node[key]
    node[path[-1]] = value
    result = accessor(obj)
    assert isinstance(result, (ScaleTarget, TargetProblem))
    if isinstance(result, ScaleTarget):
        assert result.replicas >= 0
        assert result.pending >= 0
        assert result.gpus_per_replica >= 0
        assert result.group_size >= 1
        assert result.role in ('both', 'prefill', 'decode')
