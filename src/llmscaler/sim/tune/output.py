"""The chosen configuration as objects to `kubectl apply`: a ConfigMap and VariantAutoscalings.

Why: a tuned configuration is worth only what reaches the cluster. The settings go into
`llmscaler-predictive-config` with the keys the controller reads (`config.predictive`), one
per-model entry in the model's namespace (a namespace-local map: it applies to that model only
and, by its presence, puts it on the predictive analyzer), every key written out, so that what the
controller resolves is exactly the `PredictiveConfig` the simulations ran (a test reads the file
back through `config.file.load_config_file` and compares). The variants offered go into
VariantAutoscaling objects (`llmd.ai/v1alpha1`, `kube.crd`): `modelID`, `minReplicas`,
`maxReplicas` and `variantCost` as simulated; each names its scale target as a Deployment of the
variant's name, which a user whose Deployments are named otherwise edits. A variant the chosen
configuration does not offer gets no object (a VariantAutoscaling cannot say "never": its
`maxReplicas` is at least 1); the report says to delete it.

What fails: `configmap` raises `ValueError` for a configuration whose performance parameters are
not the four-parameter form the predictive map takes; `variant_autoscalings` raises `ValueError`
for an object the CRD's rules refuse (`kube.crd.parse_va`), so nothing unappliable is written.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import yaml

from llmscaler.config.predictive import PREDICTIVE_CONFIGMAP
from llmscaler.config.resolved import PredictiveConfig
from llmscaler.kube import crd
from llmscaler.kube.resource_model import InvalidObject
from llmscaler.sim.vocabulary import VariantSpec

LABELS = {'app.kubernetes.io/name': 'workload-variant-autoscaler'}
"""The label the controller finds its ConfigMaps by (deploy/base/configmaps.yaml)."""
HEADER = (
    '# Written by `llmscaler tune`: the predictive policy settings it chose (report.md says on\n'
    '# what and against what). Keys and ranges: docs/configuration.md.\n'
)


def entry(*, settings: PredictiveConfig, model_id: str, namespace: str) -> dict[str, Any]:
    """The per-model entry of `llmscaler-predictive-config` that resolves to `settings`."""
    slo = settings.slo
    fields: dict[str, Any] = {'model_id': model_id, 'namespace': namespace}
    if slo.target_ttft is not None and slo.target_itl is not None:
        fields['targetTTFT'] = slo.target_ttft
        fields['targetITL'] = slo.target_itl
    fields['sloMultiplier'] = slo.slo_multiplier
    fields['tuningEnabled'] = slo.tuning_enabled
    if slo.perf_parms is not None:
        fields['perfParms'] = [_perf_parms(acc, values) for acc, values in slo.perf_parms]
    fields |= {
        'startupSeconds': settings.startup_seconds,
        'forecastQuantile': settings.quantile,
        'scaleDownDelaySeconds': settings.scale_down_delay,
        'latencyMargin': settings.latency_margin,
        'historySeconds': settings.history_seconds,
        'sloAttainment': settings.attainment,
        'fastPath': settings.fast_path,
    }
    return fields


def _perf_parms(accelerator: str, values: Sequence[float]) -> dict[str, Any]:
    if len(values) != 4:
        raise ValueError(
            f'perfParms of {accelerator}: the predictive map takes four parameters, '
            f'got {len(values)}'
        )
    alpha, beta, gamma, delta = values
    return {
        'acc': accelerator,
        'decodeParms': {'alpha': alpha, 'beta': beta},
        'prefillParms': {'gamma': gamma, 'delta': delta},
    }


def data_key(model_id: str) -> str:
    """A ConfigMap data key for the model's entry (keys allow `[-._a-zA-Z0-9]`)."""
    return re.sub(r'[^-._a-zA-Z0-9]+', '-', model_id).strip('-.') or 'model'


def configmap(*, settings: PredictiveConfig, model_id: str, namespace: str) -> dict[str, Any]:
    """The `llmscaler-predictive-config` object in `namespace` holding the model's entry."""
    body = yaml.safe_dump(
        entry(settings=settings, model_id=model_id, namespace=namespace), sort_keys=False
    )
    return {
        'apiVersion': 'v1',
        'kind': 'ConfigMap',
        'metadata': {'name': PREDICTIVE_CONFIGMAP, 'namespace': namespace, 'labels': dict(LABELS)},
        'data': {data_key(model_id): body},
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
