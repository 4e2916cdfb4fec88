"""Hardware presets: Llama-3.1 on common GPUs as simulator variants.

Why: a scenario names a variant by its model and hardware (`llama-3.1-8b-h100`) instead of
spelling out a KV cache size, a step-time model and a price; this table holds the model, the GPU,
the tensor-parallel size, the serving limits and the price, and derives the rest.

Step model: `sim.hardware.stepmodel.derive` from the model's shape and the GPU's datasheet figures
(`sim.hardware.datasheets`, each with its source) and the efficiencies fitted to published vLLM
measurements (`sim.hardware.stepmodel.FITTED`; docs/fidelity.md gives the fit and how well each
preset reproduces the published figures). Nothing here is a hand-set step time.

| preset       | model        | GPU          | TP | blocks | max_num_seqs / batched | $/GPU-h |
|--------------|--------------|--------------|----|--------|------------------------|---------|
| 8b-h100      | Llama-3.1-8B | H100 SXM5    | 1  | 27,500 | 1024 / 8192            | 3.90    |
| 8b-a100      | Llama-3.1-8B | A100 SXM4 80 | 1  | 27,500 | 256 / 2048             | 3.67    |
| 8b-l40s      | Llama-3.1-8B | L40S         | 1  | 11,500 | 256 / 2048             | 1.90    |
| 8b-l4        | Llama-3.1-8B | L4           | 1  | 1,700  | 256 / 2048             | 0.80    |
| 70b-h100-tp4 | Llama-3.1-70B| H100 SXM5    | 4  | 29,000 | 1024 / 8192            | 3.90    |
| 70b-h100-tp8 | Llama-3.1-70B| H100 SXM5    | 8  | 86,000 | 1024 / 8192            | 3.90    |

KV cache (`num_gpu_blocks`, estimated as vLLM sizes its cache: gpu_memory_utilization 0.9 × the
GPU's memory, less the weights and about 2.5 GiB of activations and overhead, over 2 · layers ·
kv_heads · head_dim · 2 bytes per token; real caches run 10–20 % smaller): 8B 27,500 on
H100/A100-80GB, 11,500 on L40S, 1,700 on L4 (27k tokens, hence max_model_len 4096); 70B 29,000 at
TP4, 86,000 at TP8. The other presets keep vLLM's default max_model_len, the model's 131,072 tokens,
which their cache holds. Scheduler limits follow vLLM's `vllm serve` defaults
(vllm/engine/arg_utils.py, the same tiers since about 0.9): max_num_seqs 1024 /
max_num_batched_tokens 8192 on H100, 256 / 2048 on A100, L40S and L4. Prices (USD per GPU-hour,
on-demand, 2026; configuration, not facts): L4 0.80 (GCP g2-standard-4), L40S 1.90, A100-80GB 3.67
(the Mélange example configuration, tyler-griggs/melange-release, melange/config/example.json), H100
3.90 (AWS P5 after its June 2025 price cut). Startup delay 90 s (8B), 180 s (70B: about 140 GB of
weights to load).

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

from llmscaler.sim.hardware import datasheets, stepmodel
from llmscaler.sim.vocabulary import PerfModel, VariantSpec

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
    max_model_len: int = NATIVE_CONTEXT,
    startup_delay: float = 90.0,
) -> tuple[str, _Preset]:
    big = accelerator == 'H100'
    perf = stepmodel.derive(
        model=datasheets.model(model_id), gpu=datasheets.gpu(accelerator), tp=gpus
    )
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
            ),
            _make(
                'llama-3.1-8b-a100',
                model_id=MODEL_8B,
                accelerator='A100',
                gpus=1,
                blocks=27_500,
            ),
            _make(
                'llama-3.1-8b-l40s',
                model_id=MODEL_8B,
                accelerator='L40S',
                gpus=1,
                blocks=11_500,
            ),
            _make(
                'llama-3.1-8b-l4',
                model_id=MODEL_8B,
                accelerator='L4',
                gpus=1,
                blocks=1_700,
                max_model_len=4096,
            ),
            _make(
                'llama-3.1-70b-h100-tp4',
                model_id=MODEL_70B,
                accelerator='H100',
                gpus=4,
                blocks=29_000,
                startup_delay=180.0,
            ),
            _make(
                'llama-3.1-70b-h100-tp8',
                model_id=MODEL_70B,
                accelerator='H100',
                gpus=8,
                blocks=86_000,
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
