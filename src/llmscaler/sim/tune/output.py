"""The chosen configuration as objects to `kubectl apply`: a ConfigMap and VariantAutoscalings.

Why: a tuned configuration is worth only what reaches the cluster. The policy's settings go into
the ConfigMap the controller reads for that policy (its `space.PolicySpace` writes the entry;
`configmap` puts it in the model's namespace under a valid data key, labelled as the
controller finds its ConfigMaps). The variants offered go into VariantAutoscaling objects
(`llmd.ai/v1alpha1`, `kube.crd`): `modelID`, `minReplicas`, `maxReplicas` and `variantCost` as
simulated; each names its scale target as a Deployment of the variant's name, which a user
whose Deployments are named otherwise edits. A variant the chosen configuration does not offer
gets no object (a VariantAutoscaling cannot say "never": its `maxReplicas` is at least 1); the
report says to delete it.

What fails: `configmap` raises what the policy's `entry` raises (`ValueError` for a configuration it
cannot write); `variant_autoscalings` raises `ValueError` for an object the CRD's rules refuse
(`kube.crd.parse_va`), so nothing unappliable is written.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import yaml

from llmscaler.config.resolved import ModelConfig
from llmscaler.kube import crd
from llmscaler.kube.resource_model import InvalidObject
from llmscaler.sim.tune.space import PolicySpace
from llmscaler.sim.vocabulary import VariantSpec

LABELS = {'app.kubernetes.io/name': 'workload-variant-autoscaler'}
"""The label the controller finds its ConfigMaps by (deploy/base/configmaps.yaml)."""
HEADER = (
    '# Written by `llmscaler tune`: the settings it chose (report.md says on what and against\n'
    '# what). Keys and ranges: docs/configuration.md.\n'
)


def data_key(model_id: str) -> str:
    """A ConfigMap data key for the model's entry (keys allow `[-._a-zA-Z0-9]`)."""
    return re.sub(r'[^-._a-zA-Z0-9]+', '-', model_id).strip('-.') or 'model'


def configmap(
    *, policy: PolicySpace[Any], config: ModelConfig, model_id: str, namespace: str
) -> dict[str, Any]:
    """`policy`'s ConfigMap in `namespace`, holding the model's entry resolving to `config`."""
    fields = policy.entry(config=config, model_id=model_id, namespace=namespace)
    return {
        'apiVersion': 'v1',
        'kind': 'ConfigMap',
        'metadata': {'name': policy.configmap_name, 'namespace': namespace, 'labels': dict(LABELS)},
        'data': {data_key(model_id): yaml.safe_dump(fields, sort_keys=False)},
    }


def variant_autoscalings(*, variants: Sequence[VariantSpec]) -> list[dict[str, Any]]:
    """A VariantAutoscaling per variant, checked against the CRD's rules."""
    objects: list[dict[str, Any]] = []
    for spec in variants:
        obj = {
            'apiVersion': crd.API_VERSION,
            'kind': crd.KIND,
            'metadata': {'name': spec.name, 'namespace': spec.namespace},
            'spec': {
                'scaleTargetRef': {
                    'apiVersion': 'apps/v1',
                    'kind': 'Deployment',
                    'name': spec.name,
                },
                'modelID': spec.model_id,
                'minReplicas': spec.min_replicas,
                'maxReplicas': spec.max_replicas,
                'variantCost': f'{spec.cost_per_hour:.2f}',
            },
        }
        parsed = crd.parse_va(obj)
        if isinstance(parsed, InvalidObject):
            raise ValueError(f'VariantAutoscaling {spec.name}: {parsed.message}')
        objects.append(obj)
    return objects


class _Dumper(yaml.SafeDumper):
    """Safe YAML with multi-line strings as literal blocks, as people write ConfigMap entries."""


def _text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = '|' if '\n' in value else None
    return dumper.represent_scalar('tag:yaml.org,2002:str', value, style=style)


_Dumper.add_representer(str, _text)


def dump(objects: Sequence[dict[str, Any]]) -> str:
    """YAML documents for `kubectl apply -f`, under the header."""
    return HEADER + yaml.dump_all(
        objects, Dumper=_Dumper, sort_keys=False, default_flow_style=False, allow_unicode=True
    )
