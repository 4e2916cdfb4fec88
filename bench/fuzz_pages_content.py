"""What the pages of the `pages` campaign say, and the ways they are broken.

Why: `fuzz_pages` needs valid vLLM pages at any load (to break one of them and keep the others
sound) and a catalogue of the ways a page or its HTTP answer goes wrong. Kept apart from the
campaign itself so that each file says one thing.

- `Template`: a page as lines, with the lines whose value a load sets (KV usage, queue, running,
  request counters, token sums); `templates()` gives the example vLLM page (a `/metrics` page
  captured from a vLLM server, placed beside the repository, when it is there) and an emulator page.
- `epp_page`: the gateway's flow-control queue and scheduling attempts.
- `mutate_page`: one broken answer for a page: byte operators (`fuzz_mutate`), hostile numbers
  on the lines the autoscaler reads, broken labels and escapes, or a broken HTTP answer (status,
  content type, bad gzip, a gzip bomb, a body over the cap). `Answer.usable` is False when the
  answer cannot give a page at all.
"""

from __future__ import annotations

import gzip
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from fuzz_mutate import HOSTILE_NUMBERS, mutate_bytes
from llmscaler.emulate.exposition import CONTENT_TYPE, RequestStats, render_replica
from llmscaler.sim.hardware import presets
from llmscaler.sim.vllm.base import ReplicaCounters

EXAMPLE = Path(__file__).resolve().parents[2] / 'shared' / 'reference' / 'vllm_metrics_example.txt'
MODEL = 'meta-llama/Llama-3.1-8B-Instruct'
NAMESPACE = 'fuzz'
CREATED = 1_000_000.0 - 3600
CAP = 1024 * 1024
_SLOTS = {
    'kv': b'vllm:kv_cache_usage_perc{',
    'waiting': b'vllm:num_requests_waiting{',
    'running': b'vllm:num_requests_running{',
    'success': b'vllm:request_success_total{',
    'prompt_sum': b'vllm:request_prompt_tokens_sum{',
    'prompt_count': b'vllm:request_prompt_tokens_count{',
    'gen_sum': b'vllm:request_generation_tokens_sum{',
    'gen_count': b'vllm:request_generation_tokens_count{',
    'cache': b'vllm:cache_config_info{',
}
_COUNTERS = ('success', 'prompt_sum', 'prompt_count', 'gen_sum', 'gen_count')


@dataclass(frozen=True, slots=True)
class Template:
    """A page as lines, with the indexes of the lines whose value a load sets."""

    lines: tuple[bytes, ...]
    slots: Mapping[str, tuple[int, ...]]

    @classmethod
    def of(cls, page: bytes) -> Template:
        lines = tuple(page.rstrip(b'\n').split(b'\n'))
        slots = {
            name: tuple(i for i, line in enumerate(lines) if line.startswith(prefix))
            for name, prefix in _SLOTS.items()
        }
        return cls(lines=lines, slots=slots)

    def render(self, values: Mapping[str, bytes], *, counters_only: bool = False) -> bytes:
        lines = list(self.lines)
        for name, value in values.items():
            for i in self.slots[name]:
                lines[i] = lines[i].rpartition(b' ')[0] + b' ' + value
        if counters_only:
            keep = {i for name in _COUNTERS for i in self.slots[name]}
            lines = [line for i, line in enumerate(lines) if i in keep]
        return b'\n'.join(lines) + b'\n'


def templates() -> tuple[Template, ...]:
    """The example page (when the shared reference is there) and an emulator page."""
    spec = presets.preset(name=presets.names()[0], model_id=MODEL)
    stats = RequestStats(max_model_len=spec.max_model_len)
    for i in range(20):
        stats.finished(
            arrived=0.0,
            first_token=0.2,
            finished=3.0 + i,
            input_tokens=900,
            output_tokens=200,
            max_tokens=512,
            reason='stop' if i % 5 else 'length',
        )
    emulated = render_replica(
        model_name=MODEL,
        spec=spec,
        running=3,
        waiting=0,
        kv_usage=0.2,
        counters=ReplicaCounters(),
        stats=stats,
        created=CREATED,
    )
    found = [Template.of(emulated.encode())]
    if EXAMPLE.exists():
        found.append(Template.of(EXAMPLE.read_bytes()))
    return tuple(found)


def number(value: float) -> bytes:
    return repr(float(value)).encode()


def epp_page(*, queue: float, attempts: Mapping[str, float]) -> bytes:
    labels = (
        f'fairness_id="default",inference_pool="pool",model_name="{MODEL}",priority="0",'
        f'target_model_name="{MODEL}"'
    )
    lines = [
        '# TYPE inference_extension_flow_control_queue_size gauge',
        f'inference_extension_flow_control_queue_size{{{labels}}} {queue:g}',
        '# TYPE inference_extension_flow_control_queue_bytes gauge',
        f'inference_extension_flow_control_queue_bytes{{{labels}}} {queue * 4000:g}',
        '# TYPE inference_extension_scheduler_attempts_total counter',
    ]
    lines.extend(
        f'inference_extension_scheduler_attempts_total{{namespace="{NAMESPACE}",pod_name="{pod}",'
        f'port="8000",status="success",target_model_name="{MODEL}"}} {count:g}'
        for pod, count in sorted(attempts.items())
    )
    return ('\n'.join(lines) + '\n').encode()


@dataclass(slots=True)
class Answer:
    """What the pod's server answers: status, headers and body (in chunks)."""

    body: bytes
    status: int = 200
    headers: dict[str, str] = field(default_factory=lambda: {'content-type': CONTENT_TYPE})
    usable: bool = True
    """False when the answer cannot give a page (status, type, encoding, size)."""


_EPP_SLOTS = {
    'queue_size': b'inference_extension_flow_control_queue_size{',
    'queue_bytes': b'inference_extension_flow_control_queue_bytes{',
    'attempts': b'inference_extension_scheduler_attempts_total{',
}


def _break_value(rng: random.Random, page: bytes, *, epp: bool) -> tuple[bytes, str]:
    slot = rng.choice(
        tuple(_EPP_SLOTS)
        if epp
        else ('kv', 'kv', 'waiting', 'waiting', 'running', 'success', 'cache', 'gen_sum')
    )
    value = rng.choice(HOSTILE_NUMBERS).encode()
    lines = page.split(b'\n')
    prefix = {**_SLOTS, **_EPP_SLOTS}[slot]
    hits = [i for i, line in enumerate(lines) if line.startswith(prefix)]
    if slot == 'cache' and hits:
        i = rng.choice(hits)
        label = rng.choice((b'num_gpu_blocks="', b'block_size="'))
        lines[i] = lines[i].replace(label, label + value + b'" x="', 1)
    for i in hits:
        lines[i] = lines[i].rpartition(b' ')[0] + b' ' + value
    return b'\n'.join(lines), f'{slot}={value[:20]!r}'


_LABEL_BREAKS: tuple[tuple[bytes, bytes], ...] = (
    (b'{', b'{engine="0",'),
    (b'}', b''),
    (b'"}', b'\\"}'),
    (b'"}', b'\\x"}'),
    (b'",', b'\\",'),
    (b'{', b'{0bad="x",'),
    (b'{', b'{a-b="x",'),
    (b'}', b',}'),
    (b'"', b"'"),
    (b'{', b'{ '),
    (b'engine="0"', b'engine="1"'),
    (b'model_name="', b'model_name="other/'),
    (b'model_name="' + MODEL.encode() + b'"', b'model_name=""'),
    (b'{', b'{big="' + b'x' * 100_000 + b'",'),
    (b'{', '{lbl="\u00e9\u202e\u0000",'.encode()),
)


def _break_labels(rng: random.Random, page: bytes) -> tuple[bytes, str]:
    lines = page.split(b'\n')
    prefix = rng.choice(tuple(_SLOTS.values()))
    hits = [i for i, line in enumerate(lines) if line.startswith(prefix)]
    old, new = rng.choice(_LABEL_BREAKS)
    for i in hits if rng.random() < 0.5 else hits[:1]:
        lines[i] = lines[i].replace(old, new, 1)
    return b'\n'.join(lines), f'labels {prefix[:-1]!r}: {old[:12]!r}->{new[:12]!r}'


_BOMB = gzip.compress(b'#' * (3 * CAP), compresslevel=9)
"""A small gzip body that inflates past the cap."""


def _hostile(rng: random.Random, page: bytes) -> tuple[Answer, str]:
    """The page with a hostile shape added (reliability.md, "Hostile pages"): over a cap of the
    scraper, so that the whole page is refused and its model must hold."""
    kind = rng.randrange(3)
    if kind == 0:  # one line over 64 KiB of repeated labels, the shape that took 1.25 GB
        line = b'vllm:num_requests_waiting{' + b','.join([b'a="b"'] * 13_200) + b'} 1\n'
        return Answer(body=page + line, usable=False), 'hostile: a line over the cap'
    if kind == 1:  # one sample of 129 labels
        labels = b','.join(b'l%d="%d"' % (i, i) for i in range(129))
        line = b'vllm:kv_cache_usage_perc{' + labels + b'} 0.5\n'
        return Answer(body=page + line, usable=False), 'hostile: 129 labels'
    series = b''.join(b'vllm:num_requests_waiting{engine="%d"} 1\n' % i for i in range(10_001))
    return Answer(body=page + series, usable=False), 'hostile: 10,001 series'


def _break_answer(rng: random.Random, page: bytes) -> tuple[Answer, str]:
    kind = rng.randrange(8)
    if kind == 7:
        return _hostile(rng, page)
    if kind == 0:
        status = rng.choice((500, 404, 204, 301, 429, 503))
        body = b'' if status == 204 else page
        return Answer(body=body, status=status, usable=False), f'status {status}'
    if kind == 1:
        media = rng.choice(('application/json', 'text/html', 'application/octet-stream'))
        return Answer(body=page, headers={'content-type': media}, usable=False), media
    if kind == 2:
        headers = {'content-type': CONTENT_TYPE, 'content-encoding': 'gzip'}
        return Answer(body=page[: len(page) // 2], headers=headers, usable=False), 'bad gzip'
    if kind == 3:
        headers = {'content-type': CONTENT_TYPE, 'content-encoding': 'gzip'}
        return Answer(body=_BOMB, headers=headers, usable=False), 'gzip bomb'
    if kind == 4:
        headers = {'content-type': CONTENT_TYPE, 'content-encoding': 'gzip'}
        return Answer(body=gzip.compress(page), headers=headers), 'gzip'
    if kind == 5:
        return Answer(body=page + b'#' * CAP, usable=False), 'over the cap'
    media = rng.choice(('', 'text/plain; charset=latin-1', 'application/openmetrics-text'))
    return Answer(body=page, headers={'content-type': media} if media else {}), f'type {media!r}'


def mutate_page(rng: random.Random, page: bytes, *, epp: bool = False) -> tuple[Answer, str]:
    """One mutated answer for a vLLM (or EPP) page, and what was done."""
    roll = rng.random()
    if roll < 0.35:
        body, what = mutate_bytes(rng, page, heavy=rng.random() < 0.2)
        return Answer(body=body), what
    if roll < 0.7:
        body, what = _break_value(rng, page, epp=epp)
        if rng.random() < 0.3:
            body, more = _break_value(rng, body, epp=epp)
            what += ' ' + more
        return Answer(body=body), what
    if roll < 0.85:
        body, what = _break_labels(rng, page)
        return Answer(body=body), what
    return _break_answer(rng, page)
