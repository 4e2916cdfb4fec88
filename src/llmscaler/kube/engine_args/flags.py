"""The engine flags of a serving command line, read into `EngineParams` with the defaults.

Why: the analyzers price a replica from these numbers, so every flag has the engine's own
default when absent, and a value that cannot be read keeps the default rather than a guess.
Flags are read in any of the spellings `--flag-name`, `--flag_name`, `--flag=value`, `--flag
value`; the last occurrence wins.

vLLM (defaults): max-num-seqs 256, max-num-batched-tokens, max-model-len (None; `auto`/-1 mean
unknown), tensor-parallel-size 1 (`-tp`), data-parallel-size 1 (`-dp`), block-size 16,
gpu-memory-utilization 0.9, kv-cache-dtype auto, num-gpu-blocks-override (None),
enable-chunked-prefill / no-enable-chunked-prefill. Token counts accept vLLM's human-readable
form (`32k` = 32000, `32K` = 32768). The engine and its chunked prefill as WVA reads them
(internal/engines/analyzers/saturation_v2/deployment_parser.go, main at b08b1c7 and v0.9.0):
the V1 engine unless the container's env sets `VLLM_USE_V1=0` (vLLM reads the variable as an
integer); V1 chunks its prefills by default, V0 only with `--enable-chunked-prefill`. The
effective `max_num_batched_tokens` (WVA's `resolveEffectiveMaxBatchedTokens`): the explicit
value; else with chunked prefill on, 8192 for V1 and 2048 for V0; else max(max-model-len,
2048), which is the V0 default. When max-model-len is unknown we use 2048: the true value is
max(model context, 2048) ≥ 2048, so we under- rather than over-state capacity, which errs
towards more replicas. One difference: WVA holds chunked prefill on for V1 whatever the flags
say and reads any `--enable-chunked-prefill` as on; here `--no-enable-chunked-prefill` (or
`--enable-chunked-prefill=false`) turns it off, as vLLM's scheduler configuration does (its
budget is then max(max-model-len, 2048) on either engine).

SGLang: `--max-running-requests` → max_num_seqs, `--chunked-prefill-size` →
max_num_batched_tokens (8192 when absent; -1 turns chunked prefill off and then
`--max-prefill-tokens`, default 16384, is the budget), `--tp-size`/`--tp`, `--dp-size`/`--dp`,
`--page-size` → block_size (SGLang's default page size is 1), `--mem-fraction-static` →
gpu_memory_utilization, `--context-length` → max_model_len, `--kv-cache-dtype`, and
`--max-total-tokens` → num_gpu_blocks_override = ⌊max-total-tokens / page size⌋ (so that
blocks × block size is the KV token pool).

What fails: nothing raises. A malformed or out-of-range value (not a positive integer, a
utilization outside (0, 1], an empty string, a flag missing its value) keeps that field's
default and adds a warning to the `Found`; vLLM's `--config` file is not read (a warning says
so).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence

from llmscaler.domain.snapshot import EngineParams
from llmscaler.kube.engine_args.command import Found

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
    def __init__(self, values: Mapping[str, str], found: Found) -> None:
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


def vllm_params(*, found: Found) -> EngineParams:
    """The parameters of a vLLM command line (warnings go to `found.warnings`)."""
    values, chunked = _flags(found.args, _VLLM_VALUES)
    read = _Reader(values, found)
    if 'config' in values:
        found.warnings.append(
            f'container {found.container!r}: --config {values["config"]!r} is not read; '
            'settings made only in that file are not seen'
        )
    max_model_len = read.positive_int('max-model-len', None, human=True)
    explicit = read.positive_int('max-num-batched-tokens', None, human=True)
    v1 = found.env.get('VLLM_USE_V1', '1').strip() != '0'
    # V1 chunks prefills unless told not to; V0 only when told to.
    chunked_on = chunked if chunked is not None else v1
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


def sglang_params(*, found: Found) -> EngineParams:
    """The parameters of an SGLang command line (warnings go to `found.warnings`)."""
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
