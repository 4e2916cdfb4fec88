"""GPU and model-shape data for a first-principles step-time model, each figure with its source.

Why: a step time derived from a roofline (weights and KV bytes over HBM bandwidth, linear and
attention FLOPs over tensor-core FLOP rate, all-reduce bytes over the interconnect) needs the
hardware figures and the model shapes as data, with where each figure comes from, so that the
efficiency factors fitted against published measurements (sim/hardware/published.py) can be stated
against a known peak. This module is data plus pure arithmetic on it; it models no step time.

Units: the GPU figures are kept in the datasheet's own units (GB, TB/s, dense TFLOPS, GB/s per
direction) so a reader can check them against the datasheet; the helpers return SI units
(bytes, FLOPs). Dense means without 2:4 structured sparsity: NVIDIA datasheets print the
sparse figure with an asterisk, and the dense one is half of it.

Model shapes come from each model's config.json on Hugging Face; the parameter counts are the
exact totals of the released safetensors, and `ModelShape.computed_parameters` recomputes them
from the shape (the tests check that the two agree, which checks the shape figures too).

What fails: `gpu` and `model` raise ValueError for an unknown name (listing the valid ones);
`kv_bytes_per_token` and `weight_bytes_per_gpu` raise ValueError for a tensor-parallel size
vLLM refuses (not a divisor or multiple of the KV heads, or not dividing the attention heads).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType


class Precision(StrEnum):
    """A weight or KV-cache number format."""

    BF16 = 'bf16'
    FP8 = 'fp8'

    @property
    def bytes(self) -> int:
        return 2 if self is Precision.BF16 else 1


@dataclass(frozen=True, slots=True)
class GpuSpec:
    """One GPU's datasheet figures (per GPU; TP groups multiply them)."""

    name: str
    memory_gb: float
    """Device memory, decimal GB as printed."""
    memory_bandwidth_tb_s: float
    """HBM/GDDR bandwidth, TB/s (10^12 bytes/s)."""
    bf16_dense_tflops: float
    """Dense BF16 tensor-core peak, TFLOPS."""
    fp8_dense_tflops: float | None
    """Dense FP8 tensor-core peak, TFLOPS; None where the GPU has no FP8 tensor cores."""
    interconnect: str
    """The GPU-to-GPU link tensor parallelism uses."""
    interconnect_gb_s_per_direction: float
    """That link's bandwidth in one direction, GB/s (the datasheets print both directions)."""
    source: str
    """Datasheet name and URL."""

    @property
    def memory_bandwidth_bytes_s(self) -> float:
        return self.memory_bandwidth_tb_s * 1e12

    def dense_flops(self, precision: Precision) -> float:
        """Dense tensor-core peak in FLOP/s for `precision`; ValueError if the GPU has none."""
        if precision is Precision.BF16:
            return self.bf16_dense_tflops * 1e12
        if self.fp8_dense_tflops is None:
            raise ValueError(f'{self.name} has no FP8 tensor cores')
        return self.fp8_dense_tflops * 1e12

    @property
    def interconnect_bytes_s_per_direction(self) -> float:
        return self.interconnect_gb_s_per_direction * 1e9


_H100_SHEET = (
    'NVIDIA H100 Tensor Core GPU datasheet, https://www.nvidia.com/en-us/data-center/h100/ '
    '(SXM: 80 GB HBM3, 3.35 TB/s, BF16 1,979 / FP8 3,958 TFLOPS with sparsity, NVLink 900 GB/s; '
    'PCIe: 80 GB HBM2e, 2 TB/s, BF16 1,513 / FP8 3,026 with sparsity, NVLink bridge 600 GB/s)'
)
_A100_SHEET = (
    'NVIDIA A100 Tensor Core GPU datasheet, https://www.nvidia.com/content/dam/en-zz/Solutions/'
    'Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf (BF16 312 / 624 '
    'with sparsity; 80 GB SXM 2,039 GB/s; 40 GB 1,555 GB/s; NVLink 600 GB/s; no FP8)'
)

GPUS: Mapping[str, GpuSpec] = MappingProxyType(
    {
        # The presets' accelerator names ('H100', 'A100', 'L40S', 'L4') are the SKUs vLLM's own
        # benchmarks and the preset sources use: H100 SXM5 80 GB and A100 SXM4 80 GB.
        'H100': GpuSpec(
            name='H100 SXM5 80GB',
            memory_gb=80,
            memory_bandwidth_tb_s=3.35,
            bf16_dense_tflops=989.5,  # 1,979 with sparsity / 2
            fp8_dense_tflops=1979.0,  # 3,958 with sparsity / 2
            interconnect='NVLink 4',
            interconnect_gb_s_per_direction=450,  # 900 GB/s total, both directions
            source=_H100_SHEET,
        ),
        'H100-PCIe': GpuSpec(
            name='H100 PCIe 80GB',
            memory_gb=80,
            memory_bandwidth_tb_s=2.0,
            bf16_dense_tflops=756.5,  # 1,513 with sparsity / 2
            fp8_dense_tflops=1513.0,  # 3,026 with sparsity / 2
            interconnect='NVLink bridge (pairs); PCIe Gen5 x16 otherwise (64 GB/s per direction)',
            interconnect_gb_s_per_direction=300,  # 600 GB/s bridge, both directions
            source=_H100_SHEET,
        ),
        'H200': GpuSpec(
            name='H200 SXM 141GB',
            memory_gb=141,
            memory_bandwidth_tb_s=4.8,
            bf16_dense_tflops=989.5,  # 1,979 with sparsity / 2
            fp8_dense_tflops=1979.0,  # 3,958 with sparsity / 2
            interconnect='NVLink 4',
            interconnect_gb_s_per_direction=450,  # 900 GB/s total
            source=(
                'NVIDIA H200 Tensor Core GPU datasheet, https://www.nvidia.com/en-us/data-center/'
                'h200/ (141 GB HBM3e, 4.8 TB/s, BF16 1,979 / FP8 3,958 TFLOPS with sparsity, '
                'NVLink 900 GB/s)'
            ),
        ),
        'A100': GpuSpec(
            name='A100 SXM4 80GB',
            memory_gb=80,
            memory_bandwidth_tb_s=2.039,
            bf16_dense_tflops=312,
            fp8_dense_tflops=None,
            interconnect='NVLink 3',
            interconnect_gb_s_per_direction=300,  # 600 GB/s total
            source=_A100_SHEET,
        ),
        'A100-40GB': GpuSpec(
            name='A100 SXM4 40GB',
            memory_gb=40,
            memory_bandwidth_tb_s=1.555,
            bf16_dense_tflops=312,
            fp8_dense_tflops=None,
            interconnect='NVLink 3',
            interconnect_gb_s_per_direction=300,
            source=_A100_SHEET,
        ),
        'L40S': GpuSpec(
            name='L40S 48GB',
            memory_gb=48,
            memory_bandwidth_tb_s=0.864,
            bf16_dense_tflops=362.05,  # 733 with sparsity, printed dense as 362.05
            fp8_dense_tflops=733.0,  # 1,466 with sparsity / 2
            interconnect='PCIe Gen4 x16 (no NVLink)',
            interconnect_gb_s_per_direction=32,  # 64 GB/s bidirectional
            source=(
                'NVIDIA L40S GPU datasheet, https://www.nvidia.com/en-us/data-center/l40s/ '
                '(48 GB GDDR6, 864 GB/s, BF16 362.05 | 733 with sparsity, FP8 733 | 1,466 with '
                'sparsity, PCIe Gen4 x16 64 GB/s bidirectional)'
            ),
        ),
        'L4': GpuSpec(
            name='L4 24GB',
            memory_gb=24,
            memory_bandwidth_tb_s=0.300,
            bf16_dense_tflops=121.0,  # 242 with sparsity / 2
            fp8_dense_tflops=242.5,  # 485 with sparsity / 2
            interconnect='PCIe Gen4 x16 (no NVLink)',
            interconnect_gb_s_per_direction=32,  # 64 GB/s bidirectional
            source=(
                'NVIDIA L4 Tensor Core GPU datasheet, https://www.nvidia.com/en-us/data-center/l4/'
                ' (24 GB GDDR6, 300 GB/s, BF16 242 / FP8 485 TFLOPS with sparsity, PCIe Gen4 x16 '
                '64 GB/s)'
            ),
        ),
    }
)


@dataclass(frozen=True, slots=True)
class ModelShape:
    """A dense Llama-architecture decoder (GQA attention, SwiGLU MLP, RMSNorm), from config.json."""

    model_id: str
    parameters: int
    """Exact parameter count of the released checkpoint (safetensors total)."""
    layers: int
    hidden_size: int
    intermediate_size: int
    attention_heads: int
    kv_heads: int
    head_dim: int
    vocab_size: int
    tied_embeddings: bool
    max_position_embeddings: int
    source: str
    """The config.json the shape was read from."""

    @property
    def attention_matmul_parameters_per_layer(self) -> int:
        """q, k, v and o projections (no biases in Llama)."""
        q_and_o = 2 * self.hidden_size * self.attention_heads * self.head_dim
        k_and_v = 2 * self.hidden_size * self.kv_heads * self.head_dim
        return q_and_o + k_and_v

    @property
    def mlp_parameters_per_layer(self) -> int:
        """gate, up and down projections."""
        return 3 * self.hidden_size * self.intermediate_size

    @property
    def linear_parameters(self) -> int:
        """The transformer blocks' matmul weights: every token's FLOPs go through these."""
        per_layer = self.attention_matmul_parameters_per_layer + self.mlp_parameters_per_layer
        return self.layers * per_layer

    @property
    def embedding_parameters(self) -> int:
        """Input embedding plus the LM head (one table when they are tied)."""
        return self.vocab_size * self.hidden_size * (1 if self.tied_embeddings else 2)

    @property
    def norm_parameters(self) -> int:
        """Two RMSNorms per layer plus the final one."""
        return (2 * self.layers + 1) * self.hidden_size

    @property
    def computed_parameters(self) -> int:
        return self.linear_parameters + self.embedding_parameters + self.norm_parameters

    @property
    def linear_flops_per_token(self) -> int:
        """2 FLOPs per linear weight for every token a step computes (prefill or decode).

        This is 2 × the non-embedding parameters less the norms; the embedding lookup costs no
        FLOPs and the LM head is counted separately because vLLM runs it only for the tokens it
        samples (the last token of a prompt, every decode token).
        """
        return 2 * self.linear_parameters

    @property
    def lm_head_flops_per_sampled_token(self) -> int:
        return 2 * self.vocab_size * self.hidden_size

    @property
    def attention_flops_per_token_pair(self) -> int:
        """FLOPs for one query token attending to one context token, all layers.

        Q·Kᵀ and the weighted sum over V are 2 × head_dim FLOPs each, per query head.
        """
        return 4 * self.layers * self.attention_heads * self.head_dim

    def kv_bytes_per_token(self, *, kv: Precision = Precision.BF16, tp: int = 1) -> int:
        """KV-cache bytes one token occupies on one GPU of a TP group.

        2 (K and V) × layers × KV heads on this GPU × head_dim × bytes. vLLM shards KV heads
        across ranks and replicates them when TP exceeds their number, so each GPU holds at
        least one head.
        """
        heads = self._kv_heads_per_gpu(tp)
        return 2 * self.layers * heads * self.head_dim * kv.bytes

    def weight_bytes(self, weights: Precision) -> int:
        """Checkpoint bytes. FP8 checkpoints quantise only the linear layers: vLLM's FP8 models
        keep the embeddings, LM head and norms in BF16 (their quantization_config ignores
        lm_head), so those stay at 2 bytes."""
        rest = self.parameters - self.linear_parameters
        return self.linear_parameters * weights.bytes + rest * Precision.BF16.bytes

    def weight_bytes_per_gpu(self, *, weights: Precision, tp: int) -> float:
        """Weight bytes one GPU of a TP group reads per step: linear layers and the vocabulary
        tables are split across ranks; the norms (< 0.01 % of the bytes) are counted as split
        too."""
        self._kv_heads_per_gpu(tp)
        return self.weight_bytes(weights) / tp

    def allreduce_bytes_per_token(self, *, activation: Precision = Precision.BF16) -> int:
        """Bytes one token adds to the TP all-reduces of a step: two per layer (after attention
        and after the MLP), each of hidden_size activations."""
        return 2 * self.layers * self.hidden_size * activation.bytes

    def prefill_attention_pairs(self, *, new_tokens: int, cached_tokens: int = 0) -> int:
        """(query, key) pairs of a causal prefill of `new_tokens` after `cached_tokens` already
        in the KV cache: token i (1-based) attends to cached_tokens + i keys."""
        if new_tokens < 0 or cached_tokens < 0:
            raise ValueError('token counts must be >= 0')
        return new_tokens * cached_tokens + new_tokens * (new_tokens + 1) // 2

    def _kv_heads_per_gpu(self, tp: int) -> int:
        if tp < 1:
            raise ValueError(f'tensor-parallel size must be >= 1, got {tp}')
        if self.attention_heads % tp:
            raise ValueError(
                f'{self.model_id}: {self.attention_heads} attention heads do not split over TP {tp}'
            )
        if self.kv_heads % tp and tp % self.kv_heads:
            raise ValueError(f'{self.model_id}: {self.kv_heads} KV heads do not split over TP {tp}')
        return max(self.kv_heads // tp, 1)


def _hf(repo: str) -> str:
    return f'https://huggingface.co/{repo}/blob/main/config.json'


def _llama3_8b(model_id: str, *, max_position: int) -> ModelShape:
    return ModelShape(
        model_id=model_id,
        parameters=8_030_261_248,
        layers=32,
        hidden_size=4096,
        intermediate_size=14336,
        attention_heads=32,
        kv_heads=8,
        head_dim=128,
        vocab_size=128256,
        tied_embeddings=False,
        max_position_embeddings=max_position,
        source=_hf(model_id),
    )


def _llama3_70b(model_id: str, *, max_position: int) -> ModelShape:
    return ModelShape(
        model_id=model_id,
        parameters=70_553_706_496,
        layers=80,
        hidden_size=8192,
        intermediate_size=28672,
        attention_heads=64,
        kv_heads=8,
        head_dim=128,
        vocab_size=128256,
        tied_embeddings=False,
        max_position_embeddings=max_position,
        source=_hf(model_id),
    )


# Llama 3 and 3.1 share their shapes; 3.1 only extends RoPE to 131,072 positions. Published
# measurements on Llama 3 therefore stand for the 3.1 presets at their lengths (< 8k).
MODELS: Mapping[str, ModelShape] = MappingProxyType(
    {
        m.model_id: m
        for m in (
            _llama3_8b('meta-llama/Llama-3.1-8B-Instruct', max_position=131_072),
            _llama3_8b('meta-llama/Meta-Llama-3-8B-Instruct', max_position=8192),
            _llama3_70b('meta-llama/Llama-3.1-70B-Instruct', max_position=131_072),
            _llama3_70b('meta-llama/Meta-Llama-3-70B-Instruct', max_position=8192),
        )
    }
)


def gpu(name: str) -> GpuSpec:
    """The GPU named `name` (a key of GPUS)."""
    spec = GPUS.get(name)
    if spec is None:
        raise ValueError(f'unknown GPU {name!r}; valid: {", ".join(sorted(GPUS))}')
    return spec


def model(model_id: str) -> ModelShape:
    """The shape of `model_id` (a key of MODELS)."""
    shape = MODELS.get(model_id)
    if shape is None:
        raise ValueError(f'unknown model {model_id!r}; valid: {", ".join(sorted(MODELS))}')
    return shape


def same_shape(a: ModelShape, b: ModelShape) -> bool:
    """True when the two models cost the same per token (all but name and context length)."""
    return (
        a.parameters,
        a.layers,
        a.hidden_size,
        a.intermediate_size,
        a.attention_heads,
        a.kv_heads,
        a.head_dim,
        a.vocab_size,
        a.tied_embeddings,
    ) == (
        b.parameters,
        b.layers,
        b.hidden_size,
        b.intermediate_size,
        b.attention_heads,
        b.kv_heads,
        b.head_dim,
        b.vocab_size,
        b.tied_embeddings,
    )
