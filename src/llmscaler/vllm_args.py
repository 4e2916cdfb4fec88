"""Engine parameters (vLLM or SGLang) parsed from the containers of a pod template.

Why: the token-based analyzer prices a replica from its serving arguments when it has no live
metrics (reference/wva.md §4.1, P3 and the capacity store), and the optimizer needs the GPUs
per replica. For a LeaderWorkerSet the caller passes the leader template, which starts the API
server (seed 004).

The serving container is the first container whose command line runs `vllm serve`,
`python -m vllm.entrypoints...` or `python -m sglang.launch_server`; failing that, the first
whose image name contains `vllm` (its args then go to the image's entrypoint). The command line
is `command + args` after Kubernetes `$(VAR)` expansion from the container's literal `env`;
`sh -c`/`bash -c` scripts are split with shlex into commands (at `;`, `&&`, `||`, `|`, `&`,
newlines), `$VAR`, `${VAR}` and `${VAR:-default}` are expanded from the container env and from
`NAME=value`/`export NAME=value` earlier in the script. Flags are read in any of the spellings
`--flag-name`, `--flag_name`, `--flag=value`, `--flag value`; the last occurrence wins.

vLLM (defaults): max-num-seqs 256, max-num-batched-tokens, max-model-len (None; `auto`/-1 mean
unknown), tensor-parallel-size 1 (`-tp`), data-parallel-size 1 (`-dp`), block-size 16,
gpu-memory-utilization 0.9, kv-cache-dtype auto, num-gpu-blocks-override (None),
enable-chunked-prefill / no-enable-chunked-prefill (on). Token counts accept vLLM's
human-readable form (`32k` = 32000, `32K` = 32768). The effective `max_num_batched_tokens`
(§4.1): the explicit value; else with chunked prefill on, 8192 for the V1 engine (the default;
`VLLM_USE_V1=0` or `false` selects V0) and 2048 for V0; else (chunked prefill explicitly off)
max(max-model-len, 2048). When max-model-len is unknown we use 2048: the true value is
max(model context, 2048) ≥ 2048, so we under- rather than over-state capacity, which errs
towards more replicas.

SGLang: `--max-running-requests` → max_num_seqs, `--chunked-prefill-size` →
max_num_batched_tokens (8192 when absent; -1 turns chunked prefill off and then
`--max-prefill-tokens`, default 16384, is the budget), `--tp-size`/`--tp`, `--dp-size`/`--dp`,
`--page-size` → block_size (SGLang's default page size is 1), `--mem-fraction-static` →
gpu_memory_utilization, `--context-length` → max_model_len, `--kv-cache-dtype`, and
`--max-total-tokens` → num_gpu_blocks_override = ⌊max-total-tokens / page size⌋ (so that
blocks × block size is the KV token pool).

What fails: nothing raises. A malformed or out-of-range value (not a positive integer, a
utilization outside (0, 1], a flag missing its value) keeps that field's default and adds a
warning (see `parse_engine_args_report`); an unterminated quote in a script falls back to
splitting on whitespace. No recognised serving container → None.
"""

from __future__ import annotations

import math
import posixpath
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from llmscaler.model import EngineParams

GPU_RESOURCES = ('nvidia.com/gpu', 'amd.com/gpu', 'intel.com/gpu', 'google.com/tpu')

_SHELLS = frozenset({'sh', 'bash', 'dash', 'zsh', 'ash', 'ksh'})
_SEPARATOR_CHARS = ';&|()\n'
_REDIRECTS = frozenset({'>', '>>', '<', '<<', '>&', '&>', '<&', '>|', '&>>', '<>'})
_ASSIGNMENT = re.compile(r'^([A-Za-z_][A-Za-z0-9_]*)=(.*)$', re.DOTALL)
_K8S_VAR = re.compile(r'\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)')
_SHELL_VAR = re.compile(r'\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)')
_HUMAN_INT = re.compile(r'^(\d+(?:\.\d+)?)([kmgt])$|^(\d+)([KMGT])$')
_DECIMAL = {'k': 10**3, 'm': 10**6, 'g': 10**9, 't': 10**12}
_BINARY = {'K': 2**10, 'M': 2**20, 'G': 2**30, 'T': 2**40}
_BOOL_WORDS = {'true': True, 'false': False, '1': True, '0': False, 'yes': True, 'no': False}

_VLLM_VALUES = {
    'max-num-seqs': 'max-num-seqs',
    'max-num-batched-tokens': 'max-num-batched-tokens',
    'max-model-len': 'max-model-len',
    'tensor-parallel-size': 'tensor-parallel-size',
    'tp': 'tensor-parallel-size',
    'data-parallel-size': 'data-parallel-size',
    'dp': 'data-parallel-size',
    'block-size': 'block-size',
    'gpu-memory-utilization': 'gpu-memory-utilization',
    'kv-cache-dtype': 'kv-cache-dtype',
    'num-gpu-blocks-override': 'num-gpu-blocks-override',
    'config': 'config',
}
_SGLANG_VALUES = {
    'max-running-requests': 'max-num-seqs',
    'chunked-prefill-size': 'chunked-prefill-size',
    'max-prefill-tokens': 'max-prefill-tokens',
    'context-length': 'max-model-len',
    'tp-size': 'tensor-parallel-size',
    'tp': 'tensor-parallel-size',
    'tensor-parallel-size': 'tensor-parallel-size',
    'dp-size': 'data-parallel-size',
    'dp': 'data-parallel-size',
    'data-parallel-size': 'data-parallel-size',
    'page-size': 'block-size',
    'mem-fraction-static': 'gpu-memory-utilization',
    'kv-cache-dtype': 'kv-cache-dtype',
    'max-total-tokens': 'max-total-tokens',
}


@dataclass(slots=True)
class _Found:
    engine: str
    args: list[str]
    env: dict[str, str]
    container: str
    warnings: list[str] = field(default_factory=list)


def _literal_env(container: Mapping[str, object]) -> dict[str, str]:
    env: dict[str, str] = {}
    raw = container.get('env')
    if isinstance(raw, list):
        for item in raw:
            if isinstance(item, Mapping) and isinstance(item.get('name'), str):
                value = item.get('value')
                if isinstance(value, str):
                    env[str(item['name'])] = value
    return env


def _k8s_expand(text: str, env: Mapping[str, str]) -> str:
    def sub(match: re.Match[str]) -> str:
        if match.group(0) == '$$':
            return '$'
        name = match.group(1)
        return env.get(name, match.group(0))

    return _K8S_VAR.sub(sub, text)


def _shell_expand(token: str, env: Mapping[str, str]) -> str:
    def sub(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(3)
        if name in env:
            return env[name]
        if match.group(2) is not None:
            return match.group(2)
        return match.group(0)

    return _SHELL_VAR.sub(sub, token)


def _split_script(script: str, warnings: list[str]) -> list[list[str]]:
    """A shell script as a list of simple commands (lists of words)."""
    text = script.replace('\\\r\n', ' ').replace('\\\n', ' ')
    lexer = shlex.shlex(text, posix=True, punctuation_chars=_SEPARATOR_CHARS + '<>')
    lexer.whitespace = ' \t\r'
    lexer.whitespace_split = True
    lexer.commenters = ''
    try:
        tokens = list(lexer)
    except ValueError as exc:
        warnings.append(f'shell script does not split ({exc}); split on whitespace instead')
        tokens = text.split()
    commands: list[list[str]] = [[]]
    skip_next = False
    in_comment = False
    for token in tokens:
        is_punct = bool(token) and all(ch in _SEPARATOR_CHARS + '<>' for ch in token)
        if in_comment:
            if is_punct and '\n' in token:
                in_comment = False
                commands.append([])
            continue
        if skip_next:
            skip_next = False
            continue
        if is_punct and token in _REDIRECTS:
            skip_next = True
        elif is_punct:
            commands.append([])
        elif token.startswith('#'):
            in_comment = True
        else:
            commands[-1].append(token)
    return [command for command in commands if command]


def _script_of(argv: Sequence[str]) -> str | None:
    """The script of `sh -c SCRIPT` (any listed shell, option clusters like `-ec`), or None."""
    if not argv or posixpath.basename(argv[0]) not in _SHELLS:
        return None
    for index in range(1, len(argv)):
        token = argv[index]
        if re.fullmatch(r'-[a-zA-Z]*c[a-zA-Z]*', token):
            rest = [t for t in argv[index + 1 :] if not t.startswith('-')]
            return rest[0] if rest else None
    return None


def _server(command: Sequence[str]) -> tuple[str, list[str]] | None:
    """(engine, flags) when the command starts a vLLM or SGLang server."""
    for index, token in enumerate(command):
        following = command[index + 1] if index + 1 < len(command) else ''
        if posixpath.basename(token) == 'vllm' and following == 'serve':
            return 'vllm', list(command[index + 2 :])
        if token == '-m' and following.startswith('vllm.entrypoints'):
            rest = list(command[index + 2 :])
            return 'vllm', rest[1:] if rest[:1] == ['serve'] else rest
        if token == '-m' and following == 'sglang.launch_server':
            return 'sglang', list(command[index + 2 :])
    return None


def _find_in(
    argv: list[str], env: dict[str, str], depth: int, warnings: list[str]
) -> _Found | None:
    script = _script_of(argv)
    commands = [argv] if script is None else _split_script(script, warnings)
    for raw in commands:
        command = [_shell_expand(token, env) for token in raw] if script is not None else raw
        words = command[1:] if command[:1] in (['export'], ['env']) else command
        for word in words:
            match = _ASSIGNMENT.match(word)
            if match is None:
                break
            env[match.group(1)] = match.group(2)
        if depth < 3 and _script_of(command) is not None:
            found = _find_in(command, env, depth + 1, warnings)
            if found is not None:
                return found
        server = _server(command)
        if server is not None:
            return _Found(engine=server[0], args=server[1], env=dict(env), container='')
    return None


def _argv(container: Mapping[str, object], env: Mapping[str, str]) -> list[str]:
    argv: list[str] = []
    for key in ('command', 'args'):
        raw = container.get(key)
        if isinstance(raw, list):
            argv.extend(_k8s_expand(str(item), env) for item in raw if item is not None)
    return argv


def _flags(args: Sequence[str], names: Mapping[str, str]) -> tuple[dict[str, str], bool | None]:
    """Last value of each known flag (by canonical name), and the chunked-prefill switch."""
    values: dict[str, str] = {}
    chunked: bool | None = None
    index = 0
    while index < len(args):
        token = args[index]
        index += 1
        if not token.startswith('-') or re.fullmatch(r'-[\d.]+', token):
            continue
        name, has_value, value = token.lstrip('-').partition('=')
        name = name.replace('_', '-')
        if name in names:
            if not has_value:
                if index >= len(args) or args[index].startswith('--'):
                    values[names[name]] = ''
                    continue
                value = args[index]
                index += 1
            values[names[name]] = value
        elif name == 'no-enable-chunked-prefill':
            chunked = False
        elif name == 'enable-chunked-prefill':
            if has_value:
                chunked = _BOOL_WORDS.get(value.lower(), True)
            elif index < len(args) and args[index].lower() in _BOOL_WORDS:
                chunked = _BOOL_WORDS[args[index].lower()]
                index += 1
            else:
                chunked = True
    return values, chunked


def _whole(text: str, *, human: bool = False) -> int | None:
    body = text.strip().lstrip('+')
    if body.isdecimal():
        return int(body)
    match = _HUMAN_INT.match(body) if human else None
    if match is None:
        return None
    if match.group(1) is not None:
        return int(float(match.group(1)) * _DECIMAL[match.group(2)])
    return int(match.group(3)) * _BINARY[match.group(4)]


class _Reader:
    def __init__(self, values: Mapping[str, str], found: _Found) -> None:
        self.values = values
        self.found = found

    def warn(self, flag: str, text: str, why: str, default: object) -> None:
        self.found.warnings.append(
            f'container {self.found.container!r}: --{flag} {text!r} {why}; '
            f'using the default {default!r}'
        )

    def positive_int(self, flag: str, default: int | None, *, human: bool = False) -> int | None:
        if flag not in self.values:
            return default
        text = self.values[flag]
        if human and text.strip().lower() in ('auto', '-1'):
            return default
        number = _whole(text, human=human)
        if number is None or number < 1:
            self.warn(flag, text, 'is not a positive integer', default)
            return default
        return number

    def fraction(self, flag: str, default: float) -> float:
        if flag not in self.values:
            return default
        text = self.values[flag]
        try:
            number = float(text)
        except ValueError:
            number = math.nan
        if not 0 < number <= 1:
            self.warn(flag, text, 'is not a fraction in (0, 1]', default)
            return default
        return number

    def string(self, flag: str, default: str) -> str:
        text = self.values.get(flag, default).strip()
        if not text:
            self.warn(flag, text, 'is empty', default)
            return default
        return text


def _int_or(value: int | None, default: int) -> int:
    return default if value is None else value


def _vllm_params(found: _Found) -> EngineParams:
    values, chunked = _flags(found.args, _VLLM_VALUES)
    read = _Reader(values, found)
    if 'config' in values:
        found.warnings.append(
            f'container {found.container!r}: --config {values["config"]!r} is not read; '
            'settings made only in that file are not seen'
        )
    max_model_len = read.positive_int('max-model-len', None, human=True)
    explicit = read.positive_int('max-num-batched-tokens', None, human=True)
    chunked_on = True if chunked is None else chunked
    v1 = found.env.get('VLLM_USE_V1', '1').strip().lower() not in ('0', 'false')
    if explicit is not None:
        batched = explicit
    elif chunked_on:
        batched = 8192 if v1 else 2048
    else:
        batched = max(max_model_len or 0, 2048)
    return EngineParams(
        engine='vllm',
        max_num_seqs=_int_or(read.positive_int('max-num-seqs', 256), 256),
        max_num_batched_tokens=batched,
        max_model_len=max_model_len,
        tensor_parallel_size=_int_or(read.positive_int('tensor-parallel-size', 1), 1),
        data_parallel_size=_int_or(read.positive_int('data-parallel-size', 1), 1),
        block_size=_int_or(read.positive_int('block-size', 16), 16),
        gpu_memory_utilization=read.fraction('gpu-memory-utilization', 0.9),
        kv_cache_dtype=read.string('kv-cache-dtype', 'auto'),
        num_gpu_blocks_override=read.positive_int('num-gpu-blocks-override', None),
        enable_chunked_prefill=chunked_on,
    )


def _sglang_params(found: _Found) -> EngineParams:
    values, _ = _flags(found.args, _SGLANG_VALUES)
    read = _Reader(values, found)
    chunked_on = True
    batched = 8192
    text = values.get('chunked-prefill-size')
    if text is not None and text.strip() == '-1':
        chunked_on = False
        batched = _int_or(read.positive_int('max-prefill-tokens', 16384), 16384)
    elif text is not None:
        batched = _int_or(read.positive_int('chunked-prefill-size', 8192), 8192)
    block_size = _int_or(read.positive_int('block-size', 1), 1)
    total = read.positive_int('max-total-tokens', None)
    return EngineParams(
        engine='sglang',
        max_num_seqs=_int_or(read.positive_int('max-num-seqs', 256), 256),
        max_num_batched_tokens=batched,
        max_model_len=read.positive_int('max-model-len', None),
        tensor_parallel_size=_int_or(read.positive_int('tensor-parallel-size', 1), 1),
        data_parallel_size=_int_or(read.positive_int('data-parallel-size', 1), 1),
        block_size=block_size,
        gpu_memory_utilization=read.fraction('gpu-memory-utilization', 0.9),
        kv_cache_dtype=read.string('kv-cache-dtype', 'auto'),
        num_gpu_blocks_override=None if total is None else max(1, total // block_size),
        enable_chunked_prefill=chunked_on,
    )


def _serving_container(
    containers: Sequence[Mapping[str, object]], warnings: list[str]
) -> _Found | None:
    by_command: list[_Found] = []
    by_image: _Found | None = None
    for index, container in enumerate(containers):
        if not isinstance(container, Mapping):
            continue
        name = container.get('name')
        label = name if isinstance(name, str) and name else f'#{index}'
        env = _literal_env(container)
        argv = _argv(container, env)
        found = _find_in(argv, dict(env), 0, warnings)
        if found is not None:
            by_command.append(replace(found, container=label))
            continue
        image = container.get('image')
        if by_image is None and isinstance(image, str) and 'vllm' in image.lower():
            by_image = _Found(engine='vllm', args=argv, env=env, container=label)
    if len(by_command) > 1:
        names = ', '.join(repr(found.container) for found in by_command)
        warnings.append(f'several serving containers ({names}); using the first')
    return by_command[0] if by_command else by_image


def parse_engine_args_report(
    *, containers: Sequence[Mapping[str, object]]
) -> tuple[EngineParams | None, tuple[str, ...]]:
    """The serving parameters of a pod template's containers, and the warnings about them."""
    warnings: list[str] = []
    found = _serving_container(containers, warnings)
    if found is None:
        return None, tuple(warnings)
    found.warnings = warnings
    params = _sglang_params(found) if found.engine == 'sglang' else _vllm_params(found)
    return params, tuple(warnings)


def parse_engine_args(*, containers: Sequence[Mapping[str, object]]) -> EngineParams | None:
    """The serving parameters of a pod template's containers; None if none serves a model."""
    params, _ = parse_engine_args_report(containers=containers)
    return params


def _count(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, float) and math.isfinite(value) and value.is_integer() and value >= 0:
        return int(value)
    if isinstance(value, str):
        body = value.strip()
        return int(body) if body.isdecimal() else None
    return None


def gpus_per_replica(*, containers: Sequence[Mapping[str, object]]) -> int:
    """Accelerators requested by the containers of one pod template (limits win over requests).

    Sums `nvidia.com/gpu`, `amd.com/gpu`, `intel.com/gpu` and `google.com/tpu`; per container and
    resource the limit is used when present, else the request. Values that are not whole
    non-negative numbers (`1.5`, `500m`, `abc`) are ignored. For a LeaderWorkerSet replica the
    caller adds leader GPUs + (size − 1) × worker GPUs (seed 004).
    """
    total = 0
    for container in containers:
        if not isinstance(container, Mapping):
            continue
        resources = container.get('resources')
        if not isinstance(resources, Mapping):
            continue
        limits = resources.get('limits')
        requests = resources.get('requests')
        for resource in GPU_RESOURCES:
            for source in (limits, requests):
                if isinstance(source, Mapping) and resource in source:
                    count = _count(source[resource])
                    if count is not None:
                        total += count
                    break
    return total
