"""The Kubernetes objects of the fake cluster, built as the real controllers would write them.

Why: the controller under test reads Deployments through `kube.targets.accessor`, VAs through
`kube.crd.parse_va` and pods through their owner chain and annotations, so the harness must
write exactly those shapes. Keeping the builders pure (no store, no clock) lets the reconciler in
`cluster` be about *when* objects change and this module about *what* they look like.

What: `deployment` (apps/v1, a `vllm serve` container whose flags carry the preset's scheduler
limits and KV cache size, GPU limits, a `nvidia.com/gpu.product` nodeSelector),
`variant_autoscaling` (llmd.ai/v1alpha1), `replica_pod` (owned by ReplicaSet `<deploy>-<hash>`
with `controller: true`, the template labels plus `pod-template-hash`; a pending pod has no IP
and no port annotation, so nothing scrapes a default port), `epp_pod` (label `llm-d.ai/epp`),
`deployment_status` (omitting zero counts, as the deployment controller's omitempty does),
`predictive_configmap` (`llmscaler-predictive-config` with the replica's α, β, γ, δ as a user
who measured them would give them), `kubeconfig` and the Prometheus configuration and file_sd
documents.

What fails: `cost_text` raises ValueError for a NaN, infinite or negative cost; everything else
takes its input as given (the harness builds it from checked values).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from llmscaler.config.predictive import PREDICTIVE_CONFIGMAP
from llmscaler.sim.hardware.perf_seed import fitted_seed
from llmscaler.sim.vocabulary import VariantSpec

Obj = dict[str, Any]

POD_TEMPLATE_HASH_LABEL: Final = 'pod-template-hash'
EPP_LABEL: Final = 'llm-d.ai/epp'
VARIANT_LABEL: Final = 'llm-d.ai/variant'
PORT_ANNOTATION: Final = 'prometheus.io/port'
PATH_ANNOTATION: Final = 'prometheus.io/path'
MODEL_ANNOTATION: Final = 'llm-d.ai/model-id'
GPU_PRODUCT_LABEL: Final = 'nvidia.com/gpu.product'
APP_LABEL: Final = 'app'
POD_IP: Final = '127.0.0.1'
NODE_NAME: Final = 'e2e-node-0'
VLLM_IMAGE: Final = 'vllm/vllm-openai:v0.10.1'
VLLM_PORT: Final = 8000
# The alphabet of Kubernetes' rand.SafeEncodeString (no vowels, no look-alike digits).
_SAFE: Final = 'bcdfghjklmnpqrstvwxz2456789'
_NOT_DNS: Final = re.compile(r'[^a-z0-9-]+')


def cost_text(cost: float) -> str:
    """`variantCost` as the CRD wants it (`^\\d+(\\.\\d+)?$`): 3.9 → '3.9', 10 → '10.0'."""
    if not (cost >= 0 and cost != float('inf')):
        raise ValueError(f'cost must be finite and >= 0, got {cost}')
    text = f'{cost:.6f}'.rstrip('0')
    return text + '0' if text.endswith('.') else text


def slug(text: str) -> str:
    """A DNS-1123 label made of `text`: 'meta-llama/Llama-3.1-8B' → 'meta-llama-llama-3-1-8b'."""
    cleaned = _NOT_DNS.sub('-', text.lower()).strip('-')[:50].strip('-')
    return cleaned or 'x'


def template_hash(template: Mapping[str, Any]) -> str:
    """A stable pod-template-hash of a pod template: 10 characters of the safe alphabet."""
    digest = hashlib.sha256(json.dumps(template, sort_keys=True).encode()).digest()
    return ''.join(_SAFE[b % len(_SAFE)] for b in digest[:10])


def deployment(
    *, name: str, namespace: str, model_id: str, spec: VariantSpec, replicas: int, accelerator: str
) -> Obj:
    """A vLLM Deployment: one `vllm serve` container the accessor parses, GPUs, nodeSelector."""
    gpus = spec.gpus_per_replica
    args = [
        model_id,
        '--port', str(VLLM_PORT),
        '--max-num-seqs', str(spec.max_num_seqs),
        '--max-num-batched-tokens', str(spec.max_num_batched_tokens),
        '--max-model-len', str(spec.max_model_len),
        '--block-size', str(spec.block_size),
        '--num-gpu-blocks-override', str(spec.num_gpu_blocks),
        '--tensor-parallel-size', str(gpus),
    ]  # fmt: skip
    container = {
        'name': 'vllm',
        'image': VLLM_IMAGE,
        'command': ['vllm', 'serve'],
        'args': args,
        'ports': [{'name': 'http', 'containerPort': VLLM_PORT, 'protocol': 'TCP'}],
        'resources': {
            'limits': {'nvidia.com/gpu': str(gpus)},
            'requests': {'nvidia.com/gpu': str(gpus)},
        },
    }
    return {
        'apiVersion': 'apps/v1',
        'kind': 'Deployment',
        'metadata': {'name': name, 'namespace': namespace, 'labels': {APP_LABEL: name}},
        'spec': {
            'replicas': replicas,
            'selector': {'matchLabels': {APP_LABEL: name}},
            'template': {
                'metadata': {'labels': {APP_LABEL: name}},
                'spec': {
                    'nodeSelector': {GPU_PRODUCT_LABEL: accelerator},
                    'containers': [container],
                },
            },
        },
    }


def variant_autoscaling(
    *,
    name: str,
    namespace: str,
    model_id: str,
    target: str,
    cost: float,
    min_replicas: int,
    max_replicas: int,
) -> Obj:
    """A VariantAutoscaling whose scaleTargetRef names Deployment `target`."""
    return {
        'apiVersion': 'llmd.ai/v1alpha1',
        'kind': 'VariantAutoscaling',
        'metadata': {'name': name, 'namespace': namespace},
        'spec': {
            'scaleTargetRef': {'apiVersion': 'apps/v1', 'kind': 'Deployment', 'name': target},
            'modelID': model_id,
            'minReplicas': min_replicas,
            'maxReplicas': max_replicas,
            'variantCost': cost_text(cost),
        },
    }


def replica_set_name(*, deployment_name: str, pod_hash: str) -> str:
    return f'{deployment_name}-{pod_hash}'


def replica_pod(
    *,
    deploy: Mapping[str, Any],
    pod_hash: str,
    replica_set_uid: str,
    slot: int,
    port: int | None,
) -> Obj:
    """Pod `slot` of the Deployment's ReplicaSet; ready and annotated with `port` unless None."""
    meta = deploy['metadata']
    template = deploy['spec']['template']
    owner = replica_set_name(deployment_name=meta['name'], pod_hash=pod_hash)
    labels = {**template.get('metadata', {}).get('labels', {}), POD_TEMPLATE_HASH_LABEL: pod_hash}
    pod_meta: Obj = {
        'name': f'{owner}-{slot}',
        'namespace': meta['namespace'],
        'labels': labels,
        'ownerReferences': [
            {
                'apiVersion': 'apps/v1',
                'kind': 'ReplicaSet',
                'name': owner,
                'uid': replica_set_uid,
                'controller': True,
                'blockOwnerDeletion': True,
            }
        ],
    }
    if port is not None:
        pod_meta['annotations'] = {PORT_ANNOTATION: str(port), PATH_ANNOTATION: '/metrics'}
    return {
        'apiVersion': 'v1',
        'kind': 'Pod',
        'metadata': pod_meta,
        'spec': {**template['spec'], 'nodeName': NODE_NAME},
        'status': pod_status(ready=port is not None),
    }


def pod_status(*, ready: bool) -> Obj:
    """Running and Ready with the loopback IP, or Pending (scheduled, no IP yet)."""
    flag = 'True' if ready else 'False'
    conditions = [
        {'type': 'PodScheduled', 'status': 'True'},
        {'type': 'Initialized', 'status': 'True'},
        {'type': 'ContainersReady', 'status': flag},
        {'type': 'Ready', 'status': flag},
    ]
    if not ready:
        return {'phase': 'Pending', 'conditions': conditions}
    return {
        'phase': 'Running',
        'podIP': POD_IP,
        'podIPs': [{'ip': POD_IP}],
        'conditions': conditions,
    }


def epp_pod(*, namespace: str, model_id: str, port: int) -> Obj:
    """The gateway (EPP) pod of one model; its page is served on `port`."""
    name = f'{slug(model_id)}-epp'
    return {
        'apiVersion': 'v1',
        'kind': 'Pod',
        'metadata': {
            'name': name,
            'namespace': namespace,
            'labels': {EPP_LABEL: 'true', APP_LABEL: name},
            'annotations': {
                PORT_ANNOTATION: str(port),
                PATH_ANNOTATION: '/metrics',
                MODEL_ANNOTATION: model_id,
            },
        },
        'spec': {
            'nodeName': NODE_NAME,
            'containers': [{'name': 'epp', 'image': 'llm-d/inference-scheduler:e2e'}],
        },
        'status': pod_status(ready=True),
    }


def deployment_status(*, generation: int, replicas: int, ready: int) -> Obj:
    """The deployment controller's status: zero counts omitted (omitempty), as it writes them."""
    status: Obj = {'observedGeneration': generation}
    for key, value in (
        ('replicas', replicas),
        ('updatedReplicas', replicas),
        ('readyReplicas', ready),
        ('availableReplicas', ready),
        ('unavailableReplicas', replicas - ready),
    ):
        if value:
            status[key] = value
    return status


def kubeconfig(*, server: str, namespace: str, token: str | None = None) -> Obj:
    """A kubeconfig with one context: `server`, `namespace` default, no authentication.

    `token`, when given, is sent as a bearer token: the fake API checks none, but records it as
    the request's client.
    """
    return {
        'apiVersion': 'v1',
        'kind': 'Config',
        'clusters': [{'name': 'e2e', 'cluster': {'server': server}}],
        'users': [{'name': 'e2e', 'user': {'token': token} if token else {}}],
        'contexts': [
            {'name': 'e2e', 'context': {'cluster': 'e2e', 'user': 'e2e', 'namespace': namespace}}
        ],
        'current-context': 'e2e',
    }


def prometheus_config(*, files: Mapping[str, Path]) -> Obj:
    """One job per file_sd file (job name → file), scraped every second."""
    return {
        'global': {'scrape_interval': '1s', 'evaluation_interval': '1s'},
        'scrape_configs': [
            {
                'job_name': job,
                'scrape_timeout': '900ms',
                'file_sd_configs': [{'files': [str(path)], 'refresh_interval': '1s'}],
            }
            for job, path in sorted(files.items())
        ],
    }


def file_sd(*, targets: Sequence[tuple[str, str, int]]) -> list[Obj]:
    """A file_sd document: one group per (namespace, pod, port), labelled as kube SD would."""
    return [
        {'targets': [f'{POD_IP}:{port}'], 'labels': {'namespace': namespace, 'pod': pod}}
        for namespace, pod, port in sorted(targets)
    ]


POOL_LABEL: Final = 'llm-d.ai/inference-pool'
"""The pod-template label the InferencePools of the fake cluster select on."""


def inference_pool(
    *, name: str, namespace: str, service: str, api_version: str = 'inference.networking.k8s.io/v1'
) -> Obj:
    """An InferencePool selecting `POOL_LABEL=<name>`, its picker the Service `service`.

    `api_version` is the GA `inference.networking.k8s.io/v1` (spec.selector.matchLabels,
    targetPorts, endpointPickerRef) or the older `inference.networking.x-k8s.io/v1alpha2`
    (spec.selector, targetPortNumber, extensionRef).
    """
    if api_version.startswith('inference.networking.x-k8s.io/'):
        spec: Obj = {
            'selector': {POOL_LABEL: name},
            'targetPortNumber': VLLM_PORT,
            'extensionRef': {'name': service, 'portNumber': 9002, 'failureMode': 'FailClose'},
        }
    else:
        spec = {
            'selector': {'matchLabels': {POOL_LABEL: name}},
            'targetPorts': [{'number': VLLM_PORT}],
            'endpointPickerRef': {
                'name': service,
                'port': {'number': 9002},
                'failureMode': 'FailClose',
            },
        }
    return {
        'apiVersion': api_version,
        'kind': 'InferencePool',
        'metadata': {'name': name, 'namespace': namespace},
        'spec': spec,
    }


def endpoint_slice(*, service: str, namespace: str, pod: str, ip: str, metrics_port: int) -> Obj:
    """The EndpointSlice of an EPP Service: one ready endpoint, the `http-metrics` port."""
    return {
        'apiVersion': 'discovery.k8s.io/v1',
        'kind': 'EndpointSlice',
        'metadata': {
            'name': f'{service}-1',
            'namespace': namespace,
            'labels': {'kubernetes.io/service-name': service},
        },
        'addressType': 'IPv4',
        'endpoints': [
            {
                'addresses': [ip],
                'conditions': {'ready': True},
                'targetRef': {'kind': 'Pod', 'name': pod, 'namespace': namespace},
            }
        ],
        'ports': [
            {'name': 'grpc-ext-proc', 'port': 9002, 'protocol': 'TCP'},
            {'name': 'http-metrics', 'port': metrics_port, 'protocol': 'TCP'},
        ],
    }


def predictive_configmap(
    *,
    namespace: str,
    spec: VariantSpec,
    input_tokens: int,
    output_tokens: int,
    settings: Mapping[str, float],
) -> Obj:
    """`llmscaler-predictive-config` with one `default` entry: `settings` (key → number: the
    delays, the SLO targets), and as `perfParms` the α, β, γ, δ the simulator fits to `spec` at
    the token mix (`sim.hardware.perf_seed`), so that the sizing does not wait for the tuner.

    ValueError when the preset gives no finite, positive fit."""
    seed = fitted_seed(spec=spec, avg_input_tokens=input_tokens, avg_output_tokens=output_tokens)
    if seed is None:
        raise ValueError(f'no performance model fits preset {spec.name}')
    alpha, beta, gamma, delta = seed
    lines = [f'{key}: {value!r}' for key, value in sorted(settings.items())]
    lines += [
        'perfParms:',
        f'  - acc: {spec.accelerator}',
        f'    decodeParms: {{alpha: {alpha!r}, beta: {beta!r}}}',
        f'    prefillParms: {{gamma: {gamma!r}, delta: {delta!r}}}',
    ]
    return {
        'apiVersion': 'v1',
        'kind': 'ConfigMap',
        'metadata': {
            'name': PREDICTIVE_CONFIGMAP,
            'namespace': namespace,
            'labels': {'app.kubernetes.io/name': 'llmscaler'},
        },
        'data': {'default': '\n'.join(lines) + '\n'},
    }
