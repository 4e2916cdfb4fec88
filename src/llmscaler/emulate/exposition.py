"""The `/metrics` pages of the emulator: one vLLM V1 engine's, and the inference gateway's (EPP).

Why: the collectors and a real Prometheus must be tested against pages that look exactly like the
ones they will scrape in production: vLLM's wire names with their colons, types, labels
(`model_name`, `engine="0"`), `_created` series and histogram buckets (vLLM's
vllm/v1/metrics/loggers.py and buckets.py, and a page captured from a vLLM server), and the EPP's
flow-control and scheduler families (Gateway API Inference Extension, pkg/epp/metrics/metrics.go,
release-1.5). The numbers come from the simulator's replica model (`llmscaler.sim.vllm.reference`).

What it renders, in the plain text format 0.0.4 (which keeps the colons; serve it with
`CONTENT_TYPE` whatever the Accept header says, or Prometheus 2.42 gets underscores):

- gauges `vllm:num_requests_running`, `…_waiting`, `vllm:kv_cache_usage_perc` from the engine;
- counters `vllm:prompt_tokens_total`, `vllm:generation_tokens_total`,
  `vllm:num_preemptions_total` from the engine's counters; `vllm:prefix_cache_queries_total`
  and `vllm:prefix_cache_hits_total` (tokens) from the engine's prefix cache when the variant
  keeps one (`VariantSpec.prefix_caching`, `sim.vllm.prefix_cache`: every admission queries its
  tokens and hits its cached ones), else queries = prompt tokens and hits = 0 (a cache that
  never reuses a block: every prompt computed in full); `vllm:request_success_total` per
  finished_reason (stop, length, abort; all pre-created at 0, abort stays 0);
- histograms with vLLM's buckets: TTFT, ITL, per-request TPOT, e2e and decode time, prompt /
  generation / max-tokens lengths (1-2-5 series up to max_model_len) and `n` (always 1);
- `vllm:cache_config_info` = 1 with the example page's labels (block_size and num_gpu_blocks from
  the spec; no model_name, as in vLLM).

Every counter and histogram has its `<name>_created` gauge (the replica's start, Unix time), as a
single-API-server vLLM has. Families vLLM has but the replica model cannot fill are left out:
`vllm:iteration_tokens_total` (the fast engine jumps over steps) and the queue, prefill and
inference time histograms (admission times are not recorded).

When histograms are observed (`RequestStats`): TTFT when the request's first token is seen (as
vLLM observes it per iteration; so its count can exceed the success count); everything else when
the request finishes. ITL is an approximation: the replica model keeps only the sum and count of
the per-token gaps, so a request of n output tokens contributes its mean ITL n − 1 times, at its
finish. Its sum and count therefore equal the engine's ITL counters once the requests in flight
are done, but the buckets hold each request's mean, not its single gaps.

Bad input: an observation that is NaN, infinite or negative is not recorded (`dropped` counts
it); a gauge that is NaN renders as `NaN`. Label values are escaped (backslash, quote, newline).
Nothing here does I/O or reads a clock.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Final

from llmscaler.sim.vllm.base import ReplicaCounters
from llmscaler.sim.vllm.latency_buckets import ITL_BUCKETS, TTFT_BUCKETS
from llmscaler.sim.vocabulary import VariantSpec

CONTENT_TYPE: Final = 'text/plain; version=0.0.4; charset=utf-8'

LATENCY_BUCKETS: Final = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0,
    240.0, 480.0, 960.0, 1920.0, 7680.0,
)  # fmt: skip
N_BUCKETS: Final = (1.0, 2.0, 5.0, 10.0, 20.0)
FINISHED_REASONS: Final = ('stop', 'length', 'abort')

# name, help, bucket kind: the histogram families in the example page's order.
_HISTOGRAMS: Final = (
    ('vllm:request_prompt_tokens', 'Number of prefill tokens processed.', 'tokens'),
    ('vllm:request_generation_tokens', 'Number of generation tokens processed.', 'tokens'),
    (
        'vllm:request_max_num_generation_tokens',
        'Histogram of maximum number of requested generation tokens.',
        'tokens',
    ),
    ('vllm:request_params_n', 'Histogram of the n request parameter.', 'n'),
    ('vllm:request_params_max_tokens', 'Histogram of the max_tokens request parameter.', 'tokens'),
    ('vllm:time_to_first_token_seconds', 'Histogram of time to first token in seconds.', 'ttft'),
    ('vllm:inter_token_latency_seconds', 'Histogram of inter-token latency in seconds.', 'itl'),
    (
        'vllm:request_time_per_output_token_seconds',
        'Histogram of time_per_output_token_seconds per request.',
        'itl',
    ),
    ('vllm:e2e_request_latency_seconds', 'Histogram of e2e request latency in seconds.', 'lat'),
    (
        'vllm:request_decode_time_seconds',
        'Histogram of time spent in DECODE phase for request.',
        'lat',
    ),
)

# The example page's CacheConfig labels other than block_size, num_gpu_blocks and engine.
_CACHE_CONFIG: Final = (
    ('cache_dtype', 'auto'),
    ('calculate_kv_scales', 'False'),
    ('cpu_kvcache_space_bytes', 'None'),
    ('cpu_offload_gb', '0'),
    ('enable_prefix_caching', 'True'),
    ('gpu_memory_utilization', '0.9'),
    ('is_attention_free', 'False'),
    ('kv_cache_memory_bytes', 'None'),
    ('kv_offloading_backend', 'native'),
    ('kv_offloading_size', 'None'),
    ('kv_sharing_fast_prefill', 'False'),
    ('mamba_block_size', 'None'),
    ('mamba_cache_dtype', 'auto'),
    ('mamba_cache_mode', 'none'),
    ('mamba_page_size_padded', 'None'),
    ('mamba_ssm_cache_dtype', 'auto'),
    ('num_cpu_blocks', 'None'),
    ('num_gpu_blocks_override', 'None'),
    ('prefix_caching_hash_algo', 'sha256'),
    ('sliding_window', 'None'),
    ('swap_space', '4'),
)


def token_buckets(*, max_model_len: int) -> tuple[float, ...]:
    """vLLM's 1-2-5 series (1, 2, 5, 10, 20, …) up to max_model_len; (1,) below 2."""
    out: list[float] = []
    scale = 1
    while True:
        for mantissa in (1, 2, 5):
            value = mantissa * scale
            if value > max_model_len:
                return tuple(out) if out else (1.0,)
            out.append(float(value))
        scale *= 10


class Histogram:
    """A cumulative histogram accumulator with fixed upper bounds (+Inf implied)."""

    __slots__ = ('bounds', 'count', 'counts', 'dropped', 'total')

    def __init__(self, *, bounds: Sequence[float]) -> None:
        self.bounds = tuple(float(b) for b in bounds)
        if list(self.bounds) != sorted(set(self.bounds)) or not all(
            math.isfinite(b) for b in self.bounds
        ):
            raise ValueError(f'bounds must be finite and strictly increasing, got {bounds}')
        self.counts = [0] * (len(self.bounds) + 1)
        self.total = 0.0
        self.count = 0
        self.dropped = 0

    def observe(self, *, value: float, times: int = 1) -> bool:
        """Record `value` `times` times; False (and `dropped` += 1) for a NaN/Inf/negative one."""
        if times < 1:
            return False
        if not (math.isfinite(value) and value >= 0):
            self.dropped += 1
            return False
        # bisect_left finds the first bound >= value: Prometheus buckets are `le` (<=).
        self.counts[bisect_left(self.bounds, value)] += times
        self.total += value * times
        self.count += times
        return True

    def cumulative(self) -> list[int]:
        """Counts of the `le` buckets, the last one (+Inf) equal to `count`."""
        out: list[int] = []
        running = 0
        for c in self.counts:
            running += c
            out.append(running)
        return out


class RequestStats:
    """The request-level families of one replica: histograms and success counts by reason."""

    __slots__ = ('histograms', 'success')

    def __init__(self, *, max_model_len: int) -> None:
        tokens = token_buckets(max_model_len=max_model_len)
        bounds = {
            'tokens': tokens,
            'n': N_BUCKETS,
            'ttft': TTFT_BUCKETS,
            'itl': ITL_BUCKETS,
            'lat': LATENCY_BUCKETS,
        }
        self.histograms = {name: Histogram(bounds=bounds[kind]) for name, _, kind in _HISTOGRAMS}
        self.success = dict.fromkeys(FINISHED_REASONS, 0)

    def first_token(self, *, ttft: float) -> None:
        self.histograms['vllm:time_to_first_token_seconds'].observe(value=ttft)

    def finished(
        self,
        *,
        arrived: float,
        first_token: float,
        finished: float,
        input_tokens: int,
        output_tokens: int,
        max_tokens: int,
        reason: str,
    ) -> None:
        """A request that reached the engine at `arrived` produced its last token at `finished`."""
        h = self.histograms
        self.success[reason] = self.success.get(reason, 0) + 1
        h['vllm:request_prompt_tokens'].observe(value=input_tokens)
        h['vllm:request_generation_tokens'].observe(value=output_tokens)
        h['vllm:request_max_num_generation_tokens'].observe(value=max_tokens)
        h['vllm:request_params_max_tokens'].observe(value=max_tokens)
        h['vllm:request_params_n'].observe(value=1)
        h['vllm:e2e_request_latency_seconds'].observe(value=finished - arrived)
        decode = finished - first_token
        h['vllm:request_decode_time_seconds'].observe(value=decode)
        gaps = output_tokens - 1
        # vLLM reports a TPOT of 0 for a single-token output.
        mean_itl = decode / gaps if gaps > 0 else 0.0
        h['vllm:request_time_per_output_token_seconds'].observe(value=mean_itl)
        h['vllm:inter_token_latency_seconds'].observe(value=mean_itl, times=gaps)


def prom_float(value: float) -> str:
    """A sample value as prometheus_client writes it (its `floatToGoString`): 0.0, 1.5e+07."""
    value = float(value)
    if not math.isfinite(value):
        return _non_finite(value)
    text = repr(value)
    dot = text.find('.')
    # Go writes an exponent from 1e6 on; Python's repr only from 1e16.
    if value > 0 and dot > 6:
        mantissa = f'{text[0]}.{text[1:dot]}{text[dot + 1 :]}'.rstrip('0.')
        return f'{mantissa}e+{dot - 1:02d}'
    return text


def _non_finite(value: float) -> str:
    # Both clients spell these the same way.
    return 'NaN' if math.isnan(value) else '+Inf' if value > 0 else '-Inf'


def _escape(value: str) -> str:
    return value.replace('\\', '\\\\').replace('\n', '\\n').replace('"', '\\"')


def _labels(pairs: Sequence[tuple[str, str]]) -> str:
    return '{' + ','.join(f'{k}="{_escape(v)}"' for k, v in sorted(pairs)) + '}'


def _family(out: list[str], name: str, doc: str, kind: str) -> None:
    out.append(f'# HELP {name} {doc}')
    out.append(f'# TYPE {name} {kind}')


def render_replica(
    *,
    model_name: str,
    spec: VariantSpec,
    running: int,
    waiting: int,
    kv_usage: float,
    counters: ReplicaCounters,
    stats: RequestStats,
    created: float,
) -> str:
    """The `/metrics` page of one vLLM engine (DP rank 0) serving `model_name`."""
    base = (('engine', '0'), ('model_name', model_name))
    lab = _labels(base)
    num = prom_float
    out: list[str] = []

    def created_gauge(name: str, doc: str, extra: Sequence[tuple[str, str]] = ()) -> None:
        _family(out, f'{name}_created', doc, 'gauge')
        out.append(f'{name}_created{_labels((*base, *extra))} {num(created)}')

    for name, doc, value in (
        ('vllm:num_requests_running', 'Number of requests in model execution batches.', running),
        ('vllm:num_requests_waiting', 'Number of requests waiting to be processed.', waiting),
        ('vllm:kv_cache_usage_perc', 'KV-cache usage. 1 means 100 percent usage.', kv_usage),
    ):
        _family(out, name, doc, 'gauge')
        out.append(f'{name}{lab} {num(value)}')
    for name, doc, total in (
        (
            'vllm:prefix_cache_queries',
            'Prefix cache queries, in terms of number of queried tokens.',
            counters.prefix_cache_queries_total
            if spec.prefix_caching
            else counters.prompt_tokens_total,
        ),
        (
            'vllm:prefix_cache_hits',
            'Prefix cache hits, in terms of number of cached tokens.',
            counters.prefix_cache_hits_total if spec.prefix_caching else 0,
        ),
        (
            'vllm:num_preemptions',
            'Cumulative number of preemption from the engine.',
            counters.preemptions_total,
        ),
        ('vllm:prompt_tokens', 'Number of prefill tokens processed.', counters.prompt_tokens_total),
        (
            'vllm:generation_tokens',
            'Number of generation tokens processed.',
            counters.generation_tokens_total,
        ),
    ):
        _family(out, f'{name}_total', doc, 'counter')
        out.append(f'{name}_total{lab} {num(total)}')
        created_gauge(name, doc)
    doc = 'Count of successfully processed requests.'
    _family(out, 'vllm:request_success_total', doc, 'counter')
    reasons = (*FINISHED_REASONS, *sorted(set(stats.success) - set(FINISHED_REASONS)))
    by_reason = [(r, _labels((*base, ('finished_reason', r)))) for r in reasons]
    for reason, labels in by_reason:
        out.append(f'vllm:request_success_total{labels} {num(stats.success.get(reason, 0))}')
    _family(out, 'vllm:request_success_created', doc, 'gauge')
    for _, labels in by_reason:
        out.append(f'vllm:request_success_created{labels} {num(created)}')
    for name, doc, _ in _HISTOGRAMS:
        h = stats.histograms[name]
        _family(out, name, doc, 'histogram')
        bounds = (*(num(b) for b in h.bounds), '+Inf')
        for le, count in zip(bounds, h.cumulative(), strict=True):
            out.append(f'{name}_bucket{_labels((*base, ("le", le)))} {num(count)}')
        out.append(f'{name}_count{lab} {num(h.count)}')
        out.append(f'{name}_sum{lab} {num(h.total)}')
        created_gauge(name, doc)
    config = (
        *_CACHE_CONFIG,
        ('block_size', str(spec.block_size)),
        ('engine', '0'),
        ('num_gpu_blocks', str(spec.num_gpu_blocks)),
    )
    _family(out, 'vllm:cache_config_info', 'Information of the LLMEngine CacheConfig', 'gauge')
    out.append(f'vllm:cache_config_info{_labels(config)} 1.0')
    return '\n'.join(out) + '\n'


@dataclass(frozen=True, slots=True)
class SchedulerAttempts:
    """Requests the EPP scheduled onto one pod (successful attempts)."""

    pod_name: str
    namespace: str
    port: int
    success: int


def go_float(value: float) -> str:
    """A sample value as Go's client writes it (strconv 'g', shortest): 0, 1, 2.5, 1.5e+06."""
    if not math.isfinite(value):
        return _non_finite(value)
    if value == 0:
        return '0'
    sign, digits, exponent = Decimal(repr(float(value))).normalize().as_tuple()
    assert isinstance(exponent, int)  # finite values only past this point
    text = ''.join(str(d) for d in digits)
    exp10 = len(digits) - 1 + exponent
    prefix = '-' if sign else ''
    # Shortest 'g' in Go switches to an exponent below 1e-4 and from 1e6 (eprec = 6).
    if exp10 < -4 or exp10 >= 6:
        mantissa = text[0] + ('.' + text[1:] if len(text) > 1 else '')
        return f'{prefix}{mantissa}e{"+" if exp10 >= 0 else "-"}{abs(exp10):02d}'
    return prefix + format(abs(Decimal(repr(float(value)))).normalize(), 'f')


def render_epp(
    *,
    model_name: str,
    pool: str,
    queue_size: int,
    queue_bytes: int,
    attempts: Sequence[SchedulerAttempts],
    fairness_id: str = 'default',
    priority: int = 0,
) -> str:
    """The EPP's `/metrics` families an autoscaler reads (flow control queue, scheduling).

    `model_name` is also the `target_model_name` (no model rewrite). Attempts are rendered in
    (namespace, pod_name) order; the queue series are present even when the queue is empty.
    """
    queue = _labels(
        (
            ('fairness_id', fairness_id),
            ('inference_pool', pool),
            ('model_name', model_name),
            ('priority', str(priority)),
            ('target_model_name', model_name),
        )
    )
    out: list[str] = []
    for name, doc, value in (
        (
            'inference_extension_flow_control_queue_size',
            '[ALPHA] Current number of requests being actively managed by the EPP flow control '
            'layer, from the start of the EnqueueAndWait call until a final outcome is reached.',
            queue_size,
        ),
        (
            'inference_extension_flow_control_queue_bytes',
            '[ALPHA] Current size in bytes of all requests being actively managed by the EPP flow '
            'control layer, from the start of the EnqueueAndWait call until a final outcome is '
            'reached.',
            queue_bytes,
        ),
    ):
        _family(out, name, doc, 'gauge')
        out.append(f'{name}{queue} {go_float(value)}')
    name = 'inference_extension_scheduler_attempts_total'
    _family(out, name, '[ALPHA] Total number of scheduling attempts.', 'counter')
    for a in sorted(attempts, key=lambda a: (a.namespace, a.pod_name)):
        labels = _labels(
            (
                ('namespace', a.namespace),
                ('pod_name', a.pod_name),
                ('port', str(a.port)),
                ('status', 'success'),
                ('target_model_name', model_name),
            )
        )
        out.append(f'{name}{labels} {go_float(a.success)}')
    return '\n'.join(out) + '\n'
