"""Hardware presets: Llama-3.1 on common GPUs as simulator variants (reference/vllm.md §5).

Why: a scenario names a variant by its model and hardware (`llama-3.1-8b-h100`) instead of
spelling out a KV cache size, a step-time model and a price; this table holds those numbers and
where they come from.

Step model (`PerfModel`, seconds): step = α + β·decoding seqs + δ·prefill tokens + κ·context
tokens read. Sources: WVA's measured decode fits (α, β), Vidur's profiled linear-op times (which
exclude attention, sampling and CPU overhead, so about 1–2 ms of engine overhead is added), and
the roofline of §5.1 (weights or prefill FLOPs over 75 % of HBM bandwidth / 65 % of dense BF16;
KV read = KV bytes per token per GPU over 75 % of bandwidth: 128 KiB per token for 8B, 80 KiB
per GPU for 70B at TP4, 40 KiB at TP8).

| preset       | α ms | β ms/seq | δ µs/tok | κ ms/1k | derivation                               |
|--------------|------|----------|----------|---------|------------------------------------------|
| 8b-h100      | 7.0  | 0.042    | 24       | 0.052   | α, β: WVA demo fit (6.958, 0.042);       |
|              |      |          |          |         | δ: Vidur Llama-2-7B 20.2 × 1.19 (FLOPs); |
|              |      |          |          |         | κ: 128 KiB / (3.35 TB/s · 0.75)          |
| 8b-a100      | 11.0 | 0.029    | 66.8     | 0.086   | α: Vidur 9.7 + ≈1.5 overhead; β, δ:      |
|              |      |          |          |         | Vidur Llama-3-8B fits (512–4096 tokens); |
|              |      |          |          |         | κ: 128 KiB / (2.04 TB/s · 0.75)          |
| 8b-l40s      | 22.6 | 0.181    | 68       | 0.20    | α, β: WVA chart fit (22.619, 0.181);     |
|              |      |          |          |         | δ: 2 · 8.03 G / (362 TF · 0.65) = 68.3;  |
|              |      |          |          |         | κ: 128 KiB / (0.864 TB/s · 0.75)         |
| 8b-l4        | 70   | 0.5      | 200      | 0.58    | α: 16.06 GB / (0.30 TB/s · 0.75) = 71;   |
|              |      |          |          |         | β: L40S 0.181 × 2.9 (bandwidth ratio);   |
|              |      |          |          |         | δ: 2 · 8.03 G / (121 TF · 0.65) = 204;   |
|              |      |          |          |         | κ: 128 KiB / (0.30 TB/s · 0.75)          |
| 70b-h100-tp4 | 22   | 0.01     | 64       | 0.033   | α: Vidur 20.4 + ≈1.5 overhead; β: Vidur  |
|              |      |          |          |         | ≈0, kept small and positive; δ: Vidur    |
|              |      |          |          |         | 64.0; κ: 80 KiB / (3.35 TB/s · 0.75)     |
| 70b-h100-tp8 | 15   | 0.024    | 39.9     | 0.016   | α: Vidur 12.8 + ≈2 overhead; β, δ: Vidur |
|              |      |          |          |         | fits; κ: 40 KiB / (3.35 TB/s · 0.75)     |

KV cache (`num_gpu_blocks`, §5.2 estimates at gpu_memory_utilization 0.9): 8B 27,500 on
H100/A100-80GB, 11,500 on L40S, 1,700 on L4 (27k tokens, hence max_model_len 4096); 70B 29,000
at TP4, 86,000 at TP8. The other presets keep vLLM's default max_model_len, the model's 131,072
tokens, which their cache holds. Scheduler limits follow vLLM's `vllm serve` defaults (§1.5):
max_num_seqs 1024 / max_num_batched_tokens 8192 on H100, 256 / 2048 on A100, L40S and L4.
Prices (USD per GPU-hour, §5.3 suggested defaults): L4 0.80, L40S 1.90, A100-80GB 3.67, H100
3.90. Startup delay 90 s (8B), 180 s (70B: about 140 GB of weights to load).

What fails: `preset` raises ValueError for an unknown preset name (listing the valid ones) and
for an override that is not a VariantSpec field or is `preset` (the variant's name is
`variant_name`); override values are not checked here (the replica validates what it runs).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from llmscaler.sim.types import PerfModel, VariantSpec

MODEL_8B = 'meta-llama/Llama-3.1-8B-Instruct'
MODEL_70B = 'meta-llama/Llama-3.1-70B-Instruct'
NATIVE_CONTEXT = 131_072

PRICE_PER_GPU_HOUR: Mapping[str, float] = MappingProxyType(
    {'A100': 3.67, 'H100': 3.90, 'L4': 0.80, 'L40S': 1.90}
)


@dataclass(frozen=True, slots=True)
class _Preset:
    """Builds the VariantSpec of one preset for a variant name."""

    preset: str
    model_id: str
    accelerator: str
    gpus_per_replica: int
    num_gpu_blocks: int
    perf: PerfModel
    max_num_seqs: int
    max_num_batched_tokens: int
    max_model_len: int
    startup_delay: float

    def __call__(self, variant_name: str) -> VariantSpec:
        return VariantSpec(
            name=variant_name,
            preset=self.preset,
            model_id=self.model_id,
            accelerator=self.accelerator,
            gpus_per_replica=self.gpus_per_replica,
            price_per_gpu_hour=PRICE_PER_GPU_HOUR[self.accelerator],
            num_gpu_blocks=self.num_gpu_blocks,
            perf=self.perf,
            max_num_seqs=self.max_num_seqs,
            max_num_batched_tokens=self.max_num_batched_tokens,
            max_model_len=self.max_model_len,
            startup_delay=self.startup_delay,
        )


def _make(
    name: str,
    *,
    model_id: str,
    accelerator: str,
    gpus: int,
    blocks: int,
    perf: PerfModel,
    max_model_len: int = NATIVE_CONTEXT,
    startup_delay: float = 90.0,
) -> tuple[str, _Preset]:
    big = accelerator == 'H100'
    return name, _Preset(
        preset=name,
        model_id=model_id,
        accelerator=accelerator,
        gpus_per_replica=gpus,
        num_gpu_blocks=blocks,
        perf=perf,
        max_num_seqs=1024 if big else 256,
        max_num_batched_tokens=8192 if big else 2048,
        max_model_len=max_model_len,
        startup_delay=startup_delay,
    )


PRESETS: Mapping[str, Callable[[str], VariantSpec]] = MappingProxyType(
    dict(
        [
            _make(
                'llama-3.1-8b-h100',
                model_id=MODEL_8B,
                accelerator='H100',
                gpus=1,
                blocks=27_500,
                perf=PerfModel(
                    step_overhead=7.0e-3,
                    decode_per_seq=0.042e-3,
                    prefill_per_token=24.0e-6,
                    kv_read_per_token=0.052e-6,
                ),
            ),
            _make(
                'llama-3.1-8b-a100',
                model_id=MODEL_8B,
                accelerator='A100',
                gpus=1,
                blocks=27_500,
                perf=PerfModel(
                    step_overhead=11.0e-3,
                    decode_per_seq=0.029e-3,
                    prefill_per_token=66.8e-6,
                    kv_read_per_token=0.086e-6,
                ),
            ),
            _make(
                'llama-3.1-8b-l40s',
                model_id=MODEL_8B,
                accelerator='L40S',
                gpus=1,
                blocks=11_500,
                perf=PerfModel(
                    step_overhead=22.6e-3,
                    decode_per_seq=0.181e-3,
                    prefill_per_token=68.0e-6,
                    kv_read_per_token=0.20e-6,
                ),
            ),
            _make(
                'llama-3.1-8b-l4',
                model_id=MODEL_8B,
                accelerator='L4',
                gpus=1,
                blocks=1_700,
                perf=PerfModel(
                    step_overhead=70.0e-3,
                    decode_per_seq=0.5e-3,
                    prefill_per_token=200.0e-6,
                    kv_read_per_token=0.58e-6,
                ),
                max_model_len=4096,
            ),
            _make(
                'llama-3.1-70b-h100-tp4',
                model_id=MODEL_70B,
                accelerator='H100',
                gpus=4,
                blocks=29_000,
                perf=PerfModel(
                    step_overhead=22.0e-3,
                    decode_per_seq=0.01e-3,
                    prefill_per_token=64.0e-6,
                    kv_read_per_token=0.033e-6,
                ),
                startup_delay=180.0,
            ),
            _make(
                'llama-3.1-70b-h100-tp8',
                model_id=MODEL_70B,
                accelerator='H100',
                gpus=8,
                blocks=86_000,
                perf=PerfModel(
                    step_overhead=15.0e-3,
                    decode_per_seq=0.024e-3,
                    prefill_per_token=39.9e-6,
                    kv_read_per_token=0.016e-6,
                ),
                startup_delay=180.0,
            ),
        ]
    )
)

_FIELDS = frozenset(f.name for f in dataclasses.fields(VariantSpec)) - {'name', 'preset'}


def names() -> tuple[str, ...]:
    """The preset names, sorted."""
    return tuple(sorted(PRESETS))


def preset(*, name: str, variant_name: str | None = None, **overrides: Any) -> VariantSpec:
    """The VariantSpec of preset `name`, named `variant_name` (default: the preset's name).

    `overrides` replace VariantSpec fields (e.g. price_per_gpu_hour=2.5, num_gpu_blocks=4000).
    """
    build = PRESETS.get(name)
    if build is None:
        raise ValueError(f'unknown preset {name!r}; valid: {", ".join(names())}')
    unknown = sorted(set(overrides) - _FIELDS)
    if unknown:
        raise ValueError(
            f'unknown override {", ".join(unknown)} for preset {name!r}; '
            f'valid: {", ".join(sorted(_FIELDS))}'
        )
    spec = build(name if variant_name is None else variant_name)
    return dataclasses.replace(spec, **overrides) if overrides else spec
