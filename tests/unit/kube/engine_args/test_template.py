"""Engine parameters from pod-template containers, a LeaderWorkerSet's from its leader."""

from __future__ import annotations

import shlex

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmscaler.domain.snapshot import EngineParams
from llmscaler.kube.engine_args.template import (
    gpus_per_replica,
    parse_engine_args,
    parse_engine_args_report,
)

Container = dict[str, object]


def vllm(*args: str, env: dict[str, str] | None = None) -> list[Container]:
    container: Container = {
        'name': 'vllm',
        'image': 'registry/serving:1',
        'command': ['vllm', 'serve', 'meta/llama'],
        'args': list(args),
    }
    if env is not None:
        container['env'] = [{'name': k, 'value': v} for k, v in env.items()]
    return [container]


DEFAULT = EngineParams()

CASES: list[tuple[str, list[Container], EngineParams]] = [
    ('defaults: V1 chunked → 8192', vllm(), DEFAULT),
    (
        'all flags, dash spelling',
        vllm(
            '--max-num-seqs',
            '128',
            '--max-num-batched-tokens',
            '4096',
            '--max-model-len',
            '8192',
            '--tensor-parallel-size',
            '4',
            '--data-parallel-size',
            '2',
            '--block-size',
            '32',
            '--gpu-memory-utilization',
            '0.85',
            '--kv-cache-dtype',
            'fp8',
            '--num-gpu-blocks-override',
            '1000',
        ),
        EngineParams(
            max_num_seqs=128,
            max_num_batched_tokens=4096,
            max_model_len=8192,
            tensor_parallel_size=4,
            data_parallel_size=2,
            block_size=32,
            gpu_memory_utilization=0.85,
            kv_cache_dtype='fp8',
            num_gpu_blocks_override=1000,
        ),
    ),
    (
        'underscore and = spelling, short -tp/-dp',
        vllm('--max_num_seqs=64', '-tp=2', '-dp', '3', '--gpu_memory_utilization=0.8'),
        EngineParams(
            max_num_seqs=64,
            tensor_parallel_size=2,
            data_parallel_size=3,
            gpu_memory_utilization=0.8,
        ),
    ),
    # WVA (saturation_v2/deployment_parser.go at b08b1c7): V0 chunks only with the flag.
    (
        'V0 engine via env, chunked prefill off by default → max(max-model-len, 2048)',
        vllm('--max-model-len', '32768', env={'VLLM_USE_V1': '0'}),
        EngineParams(
            max_num_batched_tokens=32768, max_model_len=32768, enable_chunked_prefill=False
        ),
    ),
    (
        'V0 engine, max-model-len unknown → 2048, chunked prefill off',
        vllm(env={'VLLM_USE_V1': '0'}),
        EngineParams(max_num_batched_tokens=2048, enable_chunked_prefill=False),
    ),
    (
        'V0 engine with --enable-chunked-prefill → 2048',
        vllm('--enable-chunked-prefill', '--max-model-len', '32768', env={'VLLM_USE_V1': '0'}),
        EngineParams(max_num_batched_tokens=2048, max_model_len=32768),
    ),
    (
        'VLLM_USE_V1=1 is the V1 engine: chunked → 8192',
        vllm('--max-model-len', '32768', env={'VLLM_USE_V1': '1'}),
        EngineParams(max_num_batched_tokens=8192, max_model_len=32768),
    ),
    (
        'chunked off, max-model-len 4096 → max(4096, 2048) = 4096',
        vllm('--no-enable-chunked-prefill', '--max-model-len', '4096'),
        EngineParams(max_num_batched_tokens=4096, max_model_len=4096, enable_chunked_prefill=False),
    ),
    (
        'chunked off, max-model-len 1024 → max(1024, 2048) = 2048',
        vllm('--enable-chunked-prefill=false', '--max-model-len=1024'),
        EngineParams(max_num_batched_tokens=2048, max_model_len=1024, enable_chunked_prefill=False),
    ),
    (
        'chunked off, max-model-len unknown → 2048',
        vllm('--enable-chunked-prefill', 'False'),
        EngineParams(max_num_batched_tokens=2048, enable_chunked_prefill=False),
    ),
    (
        'explicit budget wins over chunked off',
        vllm(
            '--no-enable-chunked-prefill',
            '--max-num-batched-tokens',
            '16384',
            '--max-model-len',
            '32768',
        ),
        EngineParams(
            max_num_batched_tokens=16384, max_model_len=32768, enable_chunked_prefill=False
        ),
    ),
    (
        'human-readable lengths: 32k = 32000, 16K = 16384',
        vllm('--max-model-len', '32k', '--max-num-batched-tokens', '16K'),
        EngineParams(max_model_len=32000, max_num_batched_tokens=16384),
    ),
    ('max-model-len auto → unknown', vllm('--max-model-len', 'auto'), DEFAULT),
    (
        'last occurrence wins',
        vllm('--max-num-seqs', '8', '--max-num-seqs=16'),
        EngineParams(max_num_seqs=16),
    ),
    (
        'python -m api_server',
        [
            {
                'name': 'srv',
                'image': 'x',
                'command': [
                    'python3',
                    '-m',
                    'vllm.entrypoints.openai.api_server',
                    '--model',
                    'm',
                    '--max-num-seqs',
                    '32',
                ],
            }
        ],
        EngineParams(max_num_seqs=32),
    ),
    (
        'image containing vllm, args only',
        [
            {
                'name': 'srv',
                'image': 'vllm/vllm-openai:v0.10.0',
                'args': ['--model', 'm', '--block-size', '8'],
            }
        ],
        EngineParams(block_size=8),
    ),
    (
        'sh -c with command and args split',
        [
            {
                'name': 'srv',
                'image': 'x',
                'command': ['/bin/sh', '-c'],
                'args': ['exec vllm serve m --max-num-seqs 48 -tp 2'],
            }
        ],
        EngineParams(max_num_seqs=48, tensor_parallel_size=2),
    ),
    (
        'LWS leader: ray start; python -m api_server',
        [
            {
                'name': 'vllm-leader',
                'image': 'vllm/vllm-openai:latest',
                'command': ['sh', '-c'],
                'args': [
                    'bash /vllm-workspace/examples/online_serving/multi-node-serving.sh leader '
                    '--ray_cluster_size=$(LWS_GROUP_SIZE); '
                    'python3 -m vllm.entrypoints.openai.api_server '
                    '--port 8080 --model meta-llama/Meta-Llama-3.1-405B-Instruct '
                    '--tensor-parallel-size 8 --pipeline_parallel_size 2'
                ],
            }
        ],
        EngineParams(tensor_parallel_size=8),
    ),
    (
        'bash -ec script: export V0, comment, continuation, ${VAR:-default}, $(VAR), redirect',
        [
            {
                'name': 'srv',
                'image': 'x',
                'command': [
                    '/bin/bash',
                    '-ec',
                    'export VLLM_USE_V1=0\n'
                    '# vllm serve --max-num-seqs 3 is only a comment\n'
                    'exec vllm serve m \\\n'
                    '  --max-num-seqs ${SEQS:-64} --gpu-memory-utilization=$(GMU) '
                    '2>&1 | tee /tmp/log',
                ],
                'env': [{'name': 'GMU', 'value': '0.85'}, {'name': 'SECRET', 'valueFrom': {}}],
            }
        ],
        EngineParams(
            max_num_seqs=64,
            gpu_memory_utilization=0.85,
            max_num_batched_tokens=2048,
            enable_chunked_prefill=False,  # V0: chunked prefill off by default
        ),
    ),
    (
        'shell variable from the container env',
        [
            {
                'name': 's',
                'image': 'x',
                'command': ['sh', '-c', 'vllm serve m --max-num-seqs "$SEQS"'],
                'env': [{'name': 'SEQS', 'value': '12'}],
            }
        ],
        EngineParams(max_num_seqs=12),
    ),
    (
        'inline assignment before the command',
        [{'name': 's', 'image': 'x', 'command': ['sh', '-c', 'VLLM_USE_V1=0 vllm serve m']}],
        EngineParams(max_num_batched_tokens=2048, enable_chunked_prefill=False),
    ),
    (
        'sidecar first, server second',
        [
            {'name': 'proxy', 'image': 'ghcr.io/llm-d/routing-sidecar', 'args': ['--port', '8000']},
            {'name': 'srv', 'image': 'x', 'command': ['vllm', 'serve', 'm', '--max-num-seqs', '5']},
        ],
        EngineParams(max_num_seqs=5),
    ),
    (
        'SGLang flags',
        [
            {
                'name': 'sgl',
                'image': 'lmsysorg/sglang',
                'command': [
                    'python3',
                    '-m',
                    'sglang.launch_server',
                    '--model-path',
                    'm',
                    '--max-running-requests',
                    '100',
                    '--chunked-prefill-size',
                    '4096',
                    '--tp-size',
                    '2',
                    '--dp',
                    '2',
                    '--page-size',
                    '16',
                    '--mem-fraction-static',
                    '0.8',
                    '--context-length',
                    '8192',
                    '--max-total-tokens',
                    '160000',
                ],
            }
        ],
        # 160000 tokens / page 16 = 10000 blocks
        EngineParams(
            engine='sglang',
            max_num_seqs=100,
            max_num_batched_tokens=4096,
            tensor_parallel_size=2,
            data_parallel_size=2,
            block_size=16,
            gpu_memory_utilization=0.8,
            max_model_len=8192,
            num_gpu_blocks_override=10000,
        ),
    ),
    (
        'SGLang defaults and chunked prefill off',
        [
            {
                'name': 'sgl',
                'image': 'x',
                'command': ['python', '-m', 'sglang.launch_server', '--chunked-prefill-size', '-1'],
            }
        ],
        EngineParams(
            engine='sglang',
            block_size=1,
            max_num_batched_tokens=16384,
            enable_chunked_prefill=False,
        ),
    ),
]


@pytest.mark.parametrize(
    ('containers', 'expected'), [(c, e) for _, c, e in CASES], ids=[n for n, _, _ in CASES]
)
def test_parse_engine_args(containers: list[Container], expected: EngineParams) -> None:
    params, warnings = parse_engine_args_report(containers=containers)
    assert warnings == ()
    assert params == expected
    assert parse_engine_args(containers=containers) == expected


@pytest.mark.parametrize(
    'containers',
    [
        [],
        [{'name': 'proxy', 'image': 'envoy', 'args': ['--port', '80']}],
        [{'name': 'script', 'image': 'x', 'command': ['bash', '/start.sh']}],
        [{'name': 'ray', 'image': 'x', 'command': ['sh', '-c', 'ray start --block']}],
    ],
)
def test_no_serving_container(containers: list[Container]) -> None:
    assert parse_engine_args(containers=containers) is None


@pytest.mark.parametrize(
    ('args', 'field', 'warning'),
    [
        (
            ('--max-num-seqs', 'abc'),
            'max_num_seqs',
            "--max-num-seqs 'abc' is not a positive integer; using the default 256",
        ),
        (('--max-num-seqs', '0'), 'max_num_seqs', 'is not a positive integer'),
        (('--tensor-parallel-size', '1.5'), 'tensor_parallel_size', 'is not a positive integer'),
        (
            ('--gpu-memory-utilization', '1.5'),
            'gpu_memory_utilization',
            'is not a fraction in (0, 1]',
        ),
        (('--gpu-memory-utilization', 'nan'), 'gpu_memory_utilization', 'is not a fraction'),
        (('--block-size',), 'block_size', "--block-size '' is not a positive integer"),
        (('--block-size', '--max-num-seqs', '7'), 'block_size', "--block-size ''"),
        (('--kv-cache-dtype=',), 'kv_cache_dtype', 'is empty'),
        (('--max-num-batched-tokens', '8x'), 'max_num_batched_tokens', 'is not a positive integer'),
    ],
)
def test_malformed_values_keep_defaults(args: tuple[str, ...], field: str, warning: str) -> None:
    params, warnings = parse_engine_args_report(containers=vllm(*args))
    assert params is not None
    assert getattr(params, field) == getattr(DEFAULT, field)
    assert len(warnings) == 1
    assert warning in warnings[0]
    assert warnings[0].startswith("container 'vllm': ")


def test_flag_after_missing_value_is_still_read() -> None:
    params = parse_engine_args(containers=vllm('--block-size', '--max-num-seqs', '7'))
    assert params is not None
    assert params.max_num_seqs == 7


def test_several_serving_containers_warn_and_use_the_first() -> None:
    containers: list[Container] = [
        {'name': 'a', 'image': 'x', 'command': ['vllm', 'serve', 'm', '--max-num-seqs', '1']},
        {'name': 'b', 'image': 'x', 'command': ['vllm', 'serve', 'm', '--max-num-seqs', '2']},
    ]
    params, warnings = parse_engine_args_report(containers=containers)
    assert params is not None
    assert params.max_num_seqs == 1
    assert warnings == ("several serving containers ('a', 'b'); using the first",)


def test_unterminated_quote_falls_back_to_whitespace() -> None:
    containers: list[Container] = [
        {'name': 's', 'image': 'x', 'command': ['sh', '-c', "vllm serve 'm --max-num-seqs 9"]}
    ]
    params, warnings = parse_engine_args_report(containers=containers)
    assert params is not None
    assert params.max_num_seqs == 9
    assert 'split on whitespace' in warnings[0]


def test_vllm_config_file_is_reported() -> None:
    _, warnings = parse_engine_args_report(containers=vllm('--config', '/etc/vllm.yaml'))
    assert warnings == (
        "container 'vllm': --config '/etc/vllm.yaml' is not read; "
        'settings made only in that file are not seen',
    )


def test_odd_container_values_never_raise() -> None:
    containers: list[Container] = [
        {'name': 3, 'image': None, 'command': 'vllm serve', 'args': [None, 5], 'env': 'x'}
    ]
    assert parse_engine_args(containers=containers) is None


# --- hypothesis: orderings and spellings -------------------------------------------------------

FLAG_VALUES: dict[str, tuple[list[str], st.SearchStrategy[str]]] = {
    'max_num_seqs': (['max-num-seqs'], st.integers(1, 4096).map(str)),
    'max_num_batched_tokens': (['max-num-batched-tokens'], st.integers(1, 65536).map(str)),
    'max_model_len': (['max-model-len'], st.integers(1, 131072).map(str)),
    'tensor_parallel_size': (['tensor-parallel-size', 'tp'], st.integers(1, 8).map(str)),
    'data_parallel_size': (['data-parallel-size', 'dp'], st.integers(1, 8).map(str)),
    'block_size': (['block-size'], st.sampled_from(['8', '16', '32'])),
    'gpu_memory_utilization': (['gpu-memory-utilization'], st.sampled_from(['0.5', '0.9', '0.95'])),
    'kv_cache_dtype': (['kv-cache-dtype'], st.sampled_from(['auto', 'fp8', 'fp8_e5m2'])),
    'num_gpu_blocks_override': (['num-gpu-blocks-override'], st.integers(1, 100000).map(str)),
}


@st.composite
def spelled(draw: st.DrawFn, name: str, value: str) -> list[str]:
    flag = draw(st.sampled_from(name.split('|')))
    if flag in ('tp', 'dp'):
        dashes = draw(st.sampled_from(['-', '--']))
    else:
        dashes = '--'
        if draw(st.booleans()):
            flag = flag.replace('-', '_')
    if draw(st.booleans()):
        return [f'{dashes}{flag}={value}']
    return [f'{dashes}{flag}', value]


@st.composite
def argument_lists(draw: st.DrawFn) -> tuple[dict[str, str], bool | None, list[list[str]]]:
    chosen = draw(st.lists(st.sampled_from(sorted(FLAG_VALUES)), unique=True))
    values: dict[str, str] = {}
    groups: list[list[str]] = []
    for field in chosen:
        names, strategy = FLAG_VALUES[field]
        value = draw(strategy)
        values[field] = value
        groups.append(draw(spelled('|'.join(names), value)))
    chunked = draw(st.sampled_from([None, True, False]))
    if chunked is not None:
        groups.append(
            draw(
                st.sampled_from(
                    [['--enable-chunked-prefill'], ['--enable_chunked_prefill=true']]
                    if chunked
                    else [['--no-enable-chunked-prefill'], ['--enable-chunked-prefill=false']]
                )
            )
        )
    groups.append(['--port', '8000'])
    groups = draw(st.permutations(groups))
    return values, chunked, groups


def expected_params(values: dict[str, str], chunked: bool | None) -> EngineParams:
    ints = {
        k: int(v)
        for k, v in values.items()
        if k not in ('gpu_memory_utilization', 'kv_cache_dtype')
    }
    max_model_len = ints.get('max_model_len')
    on = chunked is not False
    budget = ints.get('max_num_batched_tokens', 8192 if on else max(max_model_len or 0, 2048))
    return EngineParams(
        max_num_seqs=ints.get('max_num_seqs', 256),
        max_num_batched_tokens=budget,
        max_model_len=max_model_len,
        tensor_parallel_size=ints.get('tensor_parallel_size', 1),
        data_parallel_size=ints.get('data_parallel_size', 1),
        block_size=ints.get('block_size', 16),
        gpu_memory_utilization=float(values.get('gpu_memory_utilization', '0.9')),
        kv_cache_dtype=values.get('kv_cache_dtype', 'auto'),
        num_gpu_blocks_override=ints.get('num_gpu_blocks_override'),
        enable_chunked_prefill=on,
    )


@given(argument_lists(), st.sampled_from(['args', 'split', 'sh-c', 'module', 'image']))
def test_orderings_and_spellings_give_the_same_params(
    drawn: tuple[dict[str, str], bool | None, list[list[str]]], wrapping: str
) -> None:
    values, chunked, groups = drawn
    flags = [token for group in groups for token in group]
    container: Container
    if wrapping == 'args':
        container = {'name': 'c', 'image': 'x', 'command': ['vllm', 'serve', 'm', *flags]}
    elif wrapping == 'split':
        container = {'name': 'c', 'image': 'x', 'command': ['vllm', 'serve'], 'args': ['m', *flags]}
    elif wrapping == 'sh-c':
        script = 'ray start --head && exec ' + shlex.join(['vllm', 'serve', 'm', *flags])
        container = {'name': 'c', 'image': 'x', 'command': ['/bin/bash', '-c', script]}
    elif wrapping == 'module':
        container = {
            'name': 'c',
            'image': 'x',
            'command': ['python3', '-m', 'vllm.entrypoints.openai.api_server'],
            'args': flags,
        }
    else:
        container = {'name': 'c', 'image': 'docker.io/vllm/vllm-openai:v0.9', 'args': flags}
    params, warnings = parse_engine_args_report(containers=[container])
    assert warnings == ()
    assert params == expected_params(values, chunked)


# --- GPUs per replica --------------------------------------------------------------------------


def with_resources(
    limits: dict[str, object] | None = None, requests: dict[str, object] | None = None
) -> Container:
    resources: dict[str, object] = {}
    if limits is not None:
        resources['limits'] = limits
    if requests is not None:
        resources['requests'] = requests
    return {'name': 'c', 'resources': resources}


@pytest.mark.parametrize(
    ('containers', 'gpus'),
    [
        ([], 0),
        ([{'name': 'c'}], 0),
        ([with_resources(limits={'nvidia.com/gpu': 2})], 2),
        ([with_resources(limits={'nvidia.com/gpu': '4'})], 4),
        ([with_resources(requests={'amd.com/gpu': 1})], 1),
        # limits win over requests in the same container: 2, not 3
        ([with_resources(limits={'nvidia.com/gpu': 2}, requests={'nvidia.com/gpu': 3})], 2),
        # two containers: 2 + 1 = 3
        (
            [
                with_resources(limits={'nvidia.com/gpu': 2}),
                with_resources(requests={'intel.com/gpu': 1}),
            ],
            3,
        ),
        ([with_resources(limits={'google.com/tpu': 4, 'cpu': '8', 'memory': '32Gi'})], 4),
        # non-integers ignored
        ([with_resources(limits={'nvidia.com/gpu': '1.5'})], 0),
        ([with_resources(limits={'nvidia.com/gpu': '500m'})], 0),
        ([with_resources(limits={'nvidia.com/gpu': True})], 0),
        ([with_resources(limits={'nvidia.com/gpu': -1})], 0),
        ([with_resources(limits={'nvidia.com/gpu': 2.0})], 2),
        ([{'name': 'c', 'resources': 'lots'}], 0),
    ],
)
def test_gpus_per_replica(containers: list[Container], gpus: int) -> None:
    assert gpus_per_replica(containers=containers) == gpus
