"""Realistic scale-target manifests: a Deployment, a StatefulSet and a LeaderWorkerSet of vLLM.

`deployment()`: `llm/llama-8b-a100`, 3 replicas (2 ready), one A100 GPU per pod. `stateful_set()`:
`pd/qwen-decode`, 2 replicas, a decode role and 2 H100 GPUs per pod. `lws()`: `llm/vllm-405b`,
2 groups of 4 pods with 8 H100 GPUs each. Each call returns a fresh copy.
"""

from __future__ import annotations

from typing import Any


def container(
    *, gpus: int | None, command: list[str] | None = None, name: str = 'vllm'
) -> dict[str, Any]:
    body: dict[str, Any] = {'name': name, 'image': 'vllm/vllm-openai:v0.10.0'}
    if command is not None:
        body['command'] = command
    if gpus is not None:
        body['resources'] = {
            'limits': {'nvidia.com/gpu': str(gpus), 'memory': '64Gi'},
            'requests': {'nvidia.com/gpu': str(gpus), 'cpu': '8'},
        }
    return body


VLLM_1GPU = ['vllm', 'serve', 'meta-llama/Llama-3.1-8B-Instruct', '--max-num-seqs', '128']


def deployment() -> dict[str, Any]:
    return {
        'apiVersion': 'apps/v1',
        'kind': 'Deployment',
        'metadata': {'name': 'llama-8b-a100', 'namespace': 'llm'},
        'spec': {
            'replicas': 3,
            'selector': {'matchLabels': {'app': 'llama-8b', 'variant': 'a100'}},
            'template': {
                'metadata': {'labels': {'app': 'llama-8b', 'variant': 'a100'}},
                'spec': {
                    'nodeSelector': {'nvidia.com/gpu.product': 'NVIDIA-A100-SXM4-80GB'},
                    'containers': [container(gpus=1, command=VLLM_1GPU)],
                },
            },
        },
        'status': {'replicas': 3, 'readyReplicas': 2, 'updatedReplicas': 3},
    }


def stateful_set() -> dict[str, Any]:
    return {
        'apiVersion': 'apps/v1',
        'kind': 'StatefulSet',
        'metadata': {'name': 'qwen-decode', 'namespace': 'pd'},
        'spec': {
            'replicas': 2,
            'serviceName': 'qwen-decode',
            'selector': {
                'matchLabels': {'app': 'qwen'},
                'matchExpressions': [
                    {'key': 'llm-d.ai/role', 'operator': 'In', 'values': ['decode', 'both']}
                ],
            },
            'template': {
                'metadata': {'labels': {'app': 'qwen', 'llm-d.ai/role': 'decode'}},
                'spec': {
                    'affinity': {
                        'nodeAffinity': {
                            'requiredDuringSchedulingIgnoredDuringExecution': {
                                'nodeSelectorTerms': [
                                    {
                                        'matchExpressions': [
                                            {
                                                'key': 'kubernetes.io/arch',
                                                'operator': 'In',
                                                'values': ['amd64'],
                                            },
                                            {
                                                'key': 'nvidia.com/gpu.product',
                                                'operator': 'In',
                                                'values': ['NVIDIA-H100-80GB-HBM3'],
                                            },
                                        ]
                                    }
                                ]
                            }
                        }
                    },
                    'containers': [
                        container(
                            gpus=2,
                            command=['python3', '-m', 'vllm.entrypoints.openai.api_server'],
                        )
                        | {'args': ['--model', 'Qwen/Qwen3-32B', '--tensor-parallel-size', '2']},
                        {'name': 'sidecar', 'image': 'busybox', 'command': ['sleep', 'inf']},
                    ],
                },
            },
        },
        'status': {'replicas': 4, 'readyReplicas': 1},
    }


LEADER_SCRIPT = (
    'bash /vllm-workspace/examples/online_serving/multi-node-serving.sh leader '
    '--ray_cluster_size=$(LWS_GROUP_SIZE); '
    'python3 -m vllm.entrypoints.openai.api_server --port 8080 '
    '--model meta-llama/Meta-Llama-3.1-405B-Instruct '
    '--tensor-parallel-size 8 --pipeline_parallel_size 4 --max-num-seqs 64'
)
WORKER_SCRIPT = (
    'bash /vllm-workspace/examples/online_serving/multi-node-serving.sh worker '
    '--ray_address=$(LWS_LEADER_ADDRESS)'
)


def lws(*, with_leader: bool = True) -> dict[str, Any]:
    worker = {
        'metadata': {'labels': {'llm-d.ai/role': 'both'}},
        'spec': {
            'nodeSelector': {'nvidia.com/gpu.product': 'NVIDIA-H100-80GB-HBM3'},
            'containers': [
                container(gpus=8, command=['sh', '-c', WORKER_SCRIPT], name='vllm-worker')
            ],
        },
    }
    template: dict[str, Any] = {'size': 4, 'workerTemplate': worker}
    if with_leader:
        template['leaderTemplate'] = {
            'metadata': {'labels': {'role': 'leader'}},
            'spec': {
                'nodeSelector': {'nvidia.com/gpu.product': 'NVIDIA-H100-80GB-HBM3'},
                'containers': [
                    container(gpus=8, command=['sh', '-c', LEADER_SCRIPT], name='vllm-leader')
                    | {'env': [{'name': 'LWS_GROUP_SIZE', 'value': '4'}]}
                ],
            },
        }
    return {
        'apiVersion': 'leaderworkerset.x-k8s.io/v1',
        'kind': 'LeaderWorkerSet',
        'metadata': {'name': 'vllm-405b', 'namespace': 'llm'},
        'spec': {
            'replicas': 2,
            'leaderWorkerTemplate': template,
            'startupPolicy': 'LeaderCreated',
        },
        'status': {
            'replicas': 2,
            'readyReplicas': 1,
            'hpaPodSelector': (
                'leaderworkerset.sigs.k8s.io/name=vllm-405b,'
                'leaderworkerset.sigs.k8s.io/worker-index=0'
            ),
        },
    }
