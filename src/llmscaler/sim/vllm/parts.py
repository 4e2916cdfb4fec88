"""The parts of a vLLM engine both engines build on: request states, the entry of a request
inside an engine, the counters, and the checks of a spec.

Why: `sim.vllm.base` holds what the two engines share in behaviour; these are the plain data
and arithmetic under it, kept apart so that module stays about stepping and admission. The
counters, entries and checks are documented in `sim.vllm.base` and `sim.vllm.reference`.

What fails: `check_spec` raises ValueError as `sim.vllm.base` says.
"""

from __future__ import annotations

import dataclasses
import math

from llmscaler.sim.vllm.latency_buckets import ITL_BUCKETS, TTFT_BUCKETS
from llmscaler.sim.vocabulary import PerfModel, SimRequest, VariantSpec

WAITING = 0
PREFILL = 1
DECODING = 2
DONE = 3

_PERF_FIELDS = tuple(f.name for f in dataclasses.fields(PerfModel))


@dataclasses.dataclass(slots=True)
class ReplicaCounters:
    """Cumulative counters of one engine, as its `/metrics` page would show them."""

    prompt_tokens_sum: int = 0
    generation_tokens_sum: int = 0
    request_success_total: int = 0
    ttft_sum: float = 0.0
    ttft_count: int = 0
    itl_sum: float = 0.0
    itl_count: int = 0
    preemptions_total: int = 0
    prompt_tokens_total: int = 0
    generation_tokens_total: int = 0
    prefix_cache_queries_total: int = 0
    prefix_cache_hits_total: int = 0
    # Per-bucket (not cumulative) counts over `TTFT_BUCKETS` / `ITL_BUCKETS`, the last one
    # past every bound (+Inf): TTFT at the first token, each request's mean TPOT at its finish.
    ttft_buckets: list[int] = dataclasses.field(
        default_factory=lambda: [0] * (len(TTFT_BUCKETS) + 1)
    )
    tpot_buckets: list[int] = dataclasses.field(
        default_factory=lambda: [0] * (len(ITL_BUCKETS) + 1)
    )


class Entry:
    """A request inside one engine (shared by both engines).

    `tokens` = input + generated so far; `prompt` = what the current admission prefills (tokens
    at admission); the request decodes once `computed` reached `prompt`. The fast engine keeps
    decoding entries lazily: their `computed`/`g` are only exact at registration (`d_reg`,
    `c_reg`, `g_reg`) and are advanced by the engine's step counter.
    """

    __slots__ = (
        'arrival',
        'blocks',
        'c_reg',
        'computed',
        'd_reg',
        'g',
        'g_reg',
        'keys',
        'last_emit',
        'prompt',
        'r',
        'refs',
        'seq',
        'state',
        'target',
        'tokens',
    )

    def __init__(self, *, request: SimRequest, arrival: float, target: int) -> None:
        self.r = request
        self.arrival = arrival
        self.target = target
        self.g = 0
        self.tokens = request.input_tokens
        self.computed = 0
        self.prompt = request.input_tokens
        self.blocks = 0
        self.last_emit = math.nan
        self.seq = -1
        self.state = WAITING
        self.d_reg = 0
        self.c_reg = 0
        self.g_reg = 0
        self.keys: list[int] | None = None
        self.refs: list[int] = []


def check_spec(spec: VariantSpec) -> None:
    """Raise ValueError for a spec no engine can run (see the module docstring)."""
    if spec.num_gpu_blocks < 2:
        raise ValueError(f'{spec.name}: num_gpu_blocks must be >= 2, got {spec.num_gpu_blocks}')
    for field in ('block_size', 'max_num_seqs', 'max_num_batched_tokens', 'max_model_len'):
        if getattr(spec, field) < 1:
            raise ValueError(f'{spec.name}: {field} must be >= 1, got {getattr(spec, field)}')
    perf = spec.perf
    for field in _PERF_FIELDS:
        value = getattr(perf, field)
        if field == 'sharpness':
            if not value >= 1:  # inf is the plain max
                raise ValueError(f'{spec.name}: perf.sharpness must be >= 1, got {value}')
        elif not (math.isfinite(value) and value >= 0):
            raise ValueError(f'{spec.name}: perf.{field} must be finite and >= 0, got {value}')
    if perf.step_overhead <= 0:
        raise ValueError(f'{spec.name}: perf.step_overhead must be > 0, got {perf.step_overhead}')


def blocks_for(tokens: int, block_size: int) -> int:
    return -(-tokens // block_size)


def prefill_pairs(new: int, cached: int) -> int:
    """Attention (query, key) pairs of a causal prefill chunk of `new` tokens after `cached`."""
    return new * cached + new * (new + 1) // 2
