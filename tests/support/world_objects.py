"""The objects of the controller-world tests: VAs, their scale targets and their pods.

The targets are those of `tests.support.workloads` (`TARGETS`): Deployment `llm/llama-8b-a100`,
StatefulSet `pd/qwen-decode` and LeaderWorkerSet `llm/vllm-405b`. `VA_DEPLOY`, `VA_STS` and
`VA_LWS` scale one each. The Deployment's pods carry `pod-template-hash=7c9f5d` and are owned by
ReplicaSet `llama-8b-a100-7c9f5d` (`deployment_pod`); the LeaderWorkerSet's pods carry its name
and worker index (`lws_pod`). `CONFIG`'s scale-to-zero ConfigMap gives `LLAMA` a retention period
of 20 min and `QWEN` in `pd` one of 90 s; other models take `DEFAULT_RETENTION`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from hypothesis import strategies as st

from llmscaler.config.build import build_config
from llmscaler.config.configmap_entries import ConfigMapSource
from llmscaler.config.configmaps import SCALE_TO_ZERO_CONFIGMAP
from llmscaler.config.resolved import Config, CoreSettings
from llmscaler.controller.cluster.world import World, build_world
from tests.support.workloads import deployment, lws, stateful_set

LLAMA = 'meta-llama/Llama-3.1-8B-Instruct'
LLAMA_405B = 'meta-llama/Meta-Llama-3.1-405B-Instruct'
QWEN = 'Qwen/Qwen3-32B'
CTRL = 'wva-system'
DEFAULT_RETENTION = 900.0
HASH = '7c9f5d'
LWS_NAME = 'leaderworkerset.sigs.k8s.io/name'
WORKER_INDEX = 'leaderworkerset.sigs.k8s.io/worker-index'


def make_config() -> Config:
    config, errors = build_config(
        configmaps=[
            ConfigMapSource(
                name=SCALE_TO_ZERO_CONFIGMAP,
                namespace=CTRL,
                data={
                    'llama': f'model_id: {LLAMA}\nretention_period: 20m',
                    'qwen': f'model_id: {QWEN}\nnamespace: pd\nretention_period: 90s',
                },
            )
        ],
        settings=CoreSettings(default_retention_period=DEFAULT_RETENTION),
        controller_namespace=CTRL,
    )
    assert errors == ()
    return config


CONFIG = make_config()


def va(
    name: str,
    namespace: str,
    *,
    kind: str,
    target: str,
    model: str = LLAMA,
    desired: int | None = None,
    **spec: Any,
) -> dict[str, Any]:
    obj: dict[str, Any] = {
        'apiVersion': 'llmd.ai/v1alpha1',
        'kind': 'VariantAutoscaling',
        'metadata': {'name': name, 'namespace': namespace, 'resourceVersion': '7'},
        'spec': {'scaleTargetRef': {'kind': kind, 'name': target}, 'modelID': model, **spec},
    }
    if desired is not None:
        obj['status'] = {'desiredOptimizedAlloc': {'numReplicas': desired}}
    return obj


def key_of(obj: Mapping[str, Any]) -> tuple[str, str, str]:
    return (obj['kind'], obj['metadata']['namespace'], obj['metadata']['name'])


def index(*objs: Mapping[str, Any]) -> dict[tuple[str, str, str], Mapping[str, Any]]:
    return {key_of(obj): obj for obj in objs}


TARGETS = index(deployment(), stateful_set(), lws())
VA_DEPLOY = va('llama-a100', 'llm', kind='Deployment', target='llama-8b-a100', maxReplicas=6)
VA_STS = va('qwen-h100', 'pd', kind='StatefulSet', target='qwen-decode', model=QWEN)
VA_LWS = va('llama-405b', 'llm', kind='LeaderWorkerSet', target='vllm-405b', model=LLAMA_405B)


def pod(
    name: str,
    namespace: str = 'llm',
    *,
    labels: Mapping[str, str] | None = None,
    owners: Sequence[tuple[str, str, bool]] = (),
    ip: str | None = '10.1.2.3',
    phase: str = 'Running',
    ready: bool = True,
    deleting: bool = False,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {'name': name, 'namespace': namespace, 'labels': dict(labels or {})}
    if owners:
        meta['ownerReferences'] = [
            {'apiVersion': 'apps/v1', 'kind': k, 'name': n, 'uid': f'u-{n}', 'controller': c}
            for k, n, c in owners
        ]
    if deleting:
        meta['deletionTimestamp'] = '2025-01-01T00:00:00Z'
    if annotations:
        meta['annotations'] = dict(annotations)
    status: dict[str, Any] = {
        'phase': phase,
        'conditions': [
            {'type': 'PodScheduled', 'status': 'True'},
            {'type': 'Ready', 'status': 'True' if ready else 'False'},
        ],
    }
    if ip is not None:
        status['podIP'] = ip
    return {'apiVersion': 'v1', 'kind': 'Pod', 'metadata': meta, 'status': status}


def deployment_pod(
    name: str, *, rs: str = f'llama-8b-a100-{HASH}', **kwargs: Any
) -> dict[str, Any]:
    labels = {'app': 'llama-8b', 'pod-template-hash': HASH, **kwargs.pop('labels', {})}
    return pod(name, labels=labels, owners=[('ReplicaSet', rs, True)], **kwargs)


def lws_pod(name: str, *, worker_index: str, **kwargs: Any) -> dict[str, Any]:
    labels = {LWS_NAME: 'vllm-405b', WORKER_INDEX: worker_index}
    sts = 'vllm-405b' if worker_index == '0' else 'vllm-405b-0'
    return pod(name, labels=labels, owners=[('StatefulSet', sts, True)], **kwargs)


def world(
    *vas: Mapping[str, Any],
    targets: Mapping[tuple[str, str, str], Mapping[str, Any]] = TARGETS,
    pods: Sequence[Mapping[str, Any]] = (),
) -> World:
    return build_world(vas=list(vas), targets=targets, pods=list(pods), config=CONFIG)


# Arbitrary JSON values (small: a few leaves).
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=8,
)


@st.composite
def with_json_at(
    draw: st.DrawFn, obj: dict[str, Any], *, paths: Sequence[tuple[str, ...]], at_most: int
) -> dict[str, Any]:
    """`obj`, changed in place: up to `at_most` of the fields at `paths` replaced by arbitrary
    JSON (a path under a field that is no longer an object is left alone)."""
    for path in draw(st.lists(st.sampled_from(paths), max_size=at_most)):
        node: Any = obj
        for part in path[:-1]:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node[path[-1]] = draw(JSON)
    return obj
