"""InferencePools, Deployments and VAs for the pool tests.

`v1_pool()` is pool `llm/chat` of inference.networking.k8s.io/v1, selecting the pods labelled
`pool=chat`, its picker the Service `chat-epp` at port 9002; `alpha_pool()` is the same pool in
v1alpha2. `world((namespace, name, labels), ...)` is the World of one VA per Deployment, each
Deployment's pod template carrying `labels`; every VA serves model `m`. `inference_pool_crds()`
are the Gateway API Inference Extension's own CRDs of both versions (tests/support/data), which
a real API server needs before it serves an InferencePool.
"""

from __future__ import annotations

from typing import Any

import yaml

from llmscaler.config.resolved import Config
from llmscaler.controller.cluster.world import World, build_world
from llmscaler.controller.pools.datastore import V1, V1ALPHA2
from tests.support.paths import DATA

NS = 'llm'
GA = '/'.join(V1)
ALPHA = '/'.join(V1ALPHA2)
CRDS = tuple(
    DATA / f'gaie-v1.2.0-{group}_inferencepools.yaml'
    for group in ('inference.networking.k8s.io', 'inference.networking.x-k8s.io')
)


def inference_pool_crds() -> list[dict[str, Any]]:
    """The InferencePool CustomResourceDefinitions, GA `v1` and `v1alpha2`, as released."""
    return [yaml.safe_load(path.read_text()) for path in CRDS]


def v1_pool(
    name: str = 'chat', *, namespace: str = NS, labels: dict[str, str] | None = None, **epp: Any
) -> dict[str, Any]:
    ref: dict[str, Any] = {'name': f'{name}-epp', 'port': {'number': 9002}, **epp}
    return {
        'apiVersion': GA,
        'kind': 'InferencePool',
        'metadata': {'name': name, 'namespace': namespace},
        'spec': {
            'selector': {'matchLabels': labels if labels is not None else {'pool': name}},
            'targetPorts': [{'number': 8000}],
            'endpointPickerRef': ref,
        },
    }


def alpha_pool(
    name: str = 'chat', *, namespace: str = NS, labels: dict[str, Any] | None = None, **ref: Any
) -> dict[str, Any]:
    return {
        'apiVersion': ALPHA,
        'kind': 'InferencePool',
        'metadata': {'name': name, 'namespace': namespace},
        'spec': {
            'selector': labels if labels is not None else {'pool': name},
            'targetPortNumber': 8000,
            'extensionRef': {'name': f'{name}-epp', **ref},
        },
    }


def deployment(name: str, *, namespace: str = NS, labels: dict[str, str]) -> dict[str, Any]:
    template_labels = {'app': name, **labels}
    return {
        'apiVersion': 'apps/v1',
        'kind': 'Deployment',
        'metadata': {'name': name, 'namespace': namespace},
        'spec': {
            'replicas': 0,
            'selector': {'matchLabels': {'app': name}},
            'template': {
                'metadata': {'labels': template_labels},
                'spec': {'containers': [{'name': 'vllm', 'image': 'vllm/vllm-openai'}]},
            },
        },
    }


def va(
    name: str, *, model: str = 'm', cost: str = '10', min_replicas: int = 0, namespace: str = NS
) -> dict[str, Any]:
    return {
        'apiVersion': 'llmd.ai/v1alpha1',
        'kind': 'VariantAutoscaling',
        'metadata': {'name': name, 'namespace': namespace},
        'spec': {
            'scaleTargetRef': {'kind': 'Deployment', 'name': name},
            'modelID': model,
            'minReplicas': min_replicas,
            'maxReplicas': 4,
            'variantCost': cost,
        },
    }


def world(*variants: tuple[str, str, dict[str, str]]) -> World:
    """VAs and Deployments of (namespace, name, template labels)."""
    deploys = [deployment(n, namespace=ns, labels=labels) for ns, n, labels in variants]
    return build_world(
        vas=[va(n, namespace=ns) for ns, n, _ in variants],
        targets={('Deployment', ns, n): d for (ns, n, _), d in zip(variants, deploys, strict=True)},
        pods=(),
        config=Config(),
    )
