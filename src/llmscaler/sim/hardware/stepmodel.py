"""The step-time model: a per-kernel roofline from datasheet figures, with fitted efficiencies.

Why: the simulator's policy comparisons are only as good as its step time. A step time built
from first principles (weights and KV bytes over HBM bandwidth, linear and attention FLOPs over
the tensor-core rate, all-reduce bytes over the interconnect) has the right shape in every
regime, memory-bound small batches, compute-bound large ones, the quadratic attention of long
prompts, and extends to a GPU or model no measurement covers. What the datasheets cannot say is
how close vLLM gets to those peaks and what a step costs besides the GPU work; those few
efficiency factors are fitted to published vLLM measurements (`sim.hardware.published`) by
`bench/fidelity.py` and kept here as `FITTED`.

The model (`PerfModel.step_seconds` evaluates it):

    step = overhead + comm·T
         + max_p(weights + traffic·T, linear FLOPs·T)      (the linear layers)
         + max(KV bytes·C, attention FLOPs·A)              (attention)

(T batched tokens, C context tokens read, A attention pairs; `PerfModel` defines them), with
every byte count over `memory` × the HBM bandwidth and every FLOP count over `flops` ×
the dense tensor-core peak of the weights' format (FP8 weights on a GPU with FP8 tensor cores
run their GEMMs in FP8; attention runs in BF16). Tensor parallelism divides the weights, the
KV heads and the FLOPs over the GPUs and adds two all-reduces per layer, each moving
2(tp − 1)/tp × the step's activations over the link at `link` × its bandwidth, plus a fixed
latency per all-reduce (`allreduce_latency`, folded into the step overhead). max_p is the
smooth maximum (m^p + c^p)^(1/p) of `PerfModel.sharpness`: the fit lets the data say how far
the weight reads and the FLOPs of the linear layers overlap, from not at all (p = 1, a sum) to
fully (p = inf, the plain roofline); it finds p = 1 (docs/fidelity.md).

What fails: `derive` raises ValueError for a TP size the model cannot be split over
(`hardware`), a precision the GPU lacks is run at BF16 (vLLM runs FP8 checkpoints weight-only
where there are no FP8 tensor cores), and an `Efficiency` with a factor outside (0, 1] or a
negative overhead is refused when built.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from llmscaler.sim.hardware.datasheets import GpuSpec, ModelShape, Precision
from llmscaler.sim.vocabulary import PerfModel


@dataclass(frozen=True, slots=True)
class Efficiency:
    """How close vLLM gets to the peaks, and what a step costs besides GPU work."""

    memory: float
    """Fraction of the HBM bandwidth achieved by weight and KV reads."""
    flops: float
    """Fraction of the dense tensor-core peak achieved by GEMMs and attention."""
    link: float
    """Fraction of the interconnect's per-direction bandwidth achieved by all-reduces."""
    step_overhead: float
    """Seconds per step besides GPU work: scheduling, input preparation, kernel launches."""
    allreduce_latency: float
    """Seconds per all-reduce besides its bytes (two per layer under tensor parallelism)."""
    sharpness: float = math.inf
    """How sharply the linear layers' memory and compute bounds meet (`PerfModel.sharpness`)."""

    def __post_init__(self) -> None:
        for name in ('memory', 'flops', 'link'):
            value = getattr(self, name)
            if not (math.isfinite(value) and 0 < value <= 1):
                raise ValueError(f'efficiency {name} must be in (0, 1], got {value}')
        for name in ('step_overhead', 'allreduce_latency'):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f'{name} must be finite and >= 0, got {value}')
        if not self.sharpness >= 1:
            raise ValueError(f'sharpness must be >= 1, got {self.sharpness}')


FITTED = Efficiency(
    memory=0.870,
    flops=0.640,
    link=0.7,
    step_overhead=1.68e-3,
    allreduce_latency=45.7e-6,
    sharpness=1.0,
)
"""Fitted by `bench/fidelity.py` (least squares on log(simulated / published) over the
weighted records of `sim.hardware.published`); docs/fidelity.md states the fit and its residuals."""


def activation_bytes_per_token(model: ModelShape, *, tp: int) -> float:
    """Bytes one token moves between kernels in one forward pass on one GPU (BF16).

    Per layer, with vLLM's fused kernels (add + RMSNorm, SiLU-and-mul): twelve hidden-size
    vectors (two fused norms read and write two each, the QKV and gate-up projections read one,
    the output and down projections write one) stay whole on every GPU; the query, key and
    value heads (written by QKV, read and written by attention, read by the output projection:
    four query-sized and two KV-sized) and six MLP-sized vectors (gate-up out, SiLU in and out,
    down in) are split over TP. An estimate of the traffic, not a profile: it only matters
    where a step is memory-bound, beside the weights.
    """
    q = model.attention_heads * model.head_dim
    kv = model.kv_heads * model.head_dim
    split = (4 * q + 2 * kv + 6 * model.intermediate_size) / tp
    return 2.0 * model.layers * (12 * model.hidden_size + split)


def derive(
    *,
    model: ModelShape,
    gpu: GpuSpec,
    tp: int,
    weights: Precision = Precision.BF16,
    kv: Precision = Precision.BF16,
    efficiency: Efficiency = FITTED,
) -> PerfModel:
    """The step model of `model` served at tensor parallelism `tp` on `gpu`s."""
    eff = efficiency
    bandwidth = gpu.memory_bandwidth_bytes_s * eff.memory
    gemm_format = (
        weights if weights is Precision.FP8 and gpu.fp8_dense_tflops is not None else Precision.BF16
    )
    gemm_rate = gpu.dense_flops(gemm_format) * eff.flops
    attention_rate = gpu.dense_flops(Precision.BF16) * eff.flops
    kv_bytes = model.kv_bytes_per_token(kv=kv, tp=tp)
    comm_per_token = 0.0
    overhead = eff.step_overhead
    if tp > 1:
        link = gpu.interconnect_bytes_s_per_direction * eff.link
        ring = 2.0 * (tp - 1) / tp
        comm_per_token = model.allreduce_bytes_per_token() * ring / link
        overhead += 2 * model.layers * eff.allreduce_latency
    return PerfModel(
        step_overhead=overhead,
        decode_per_seq=(model.linear_flops_per_token + model.lm_head_flops_per_sampled_token)
        / tp
        / gemm_rate,
        prefill_per_token=model.linear_flops_per_token / tp / gemm_rate,
        kv_read_per_token=kv_bytes / bandwidth,
        weight_read=model.weight_bytes_per_gpu(weights=weights, tp=tp) / bandwidth,
        token_traffic=(activation_bytes_per_token(model, tp=tp) + kv_bytes) / bandwidth,
        attention_per_pair=model.attention_flops_per_token_pair / tp / attention_rate,
        comm_per_token=comm_per_token,
        sharpness=eff.sharpness,
    )


def kv_blocks(
    *,
    model: ModelShape,
    gpu: GpuSpec,
    tp: int,
    weights: Precision = Precision.BF16,
    kv: Precision = Precision.BF16,
    gpu_memory_utilization: float = 0.9,
    block_size: int = 16,
    reserve_gb: float = 3.0,
) -> int:
    """KV-cache blocks vLLM would allocate: the memory share less the weights and a reserve.

    vLLM sizes its cache as gpu_memory_utilization × device memory, less the weights, the peak
    activations of a profiling step and the non-torch allocations (CUDA graphs, NCCL buffers);
    `reserve_gb` stands for the last two (a few GB for these models). The device memory is the
    datasheet's decimal GB, so this is a little under what vLLM reports (it sees GiB).
    """
    free = (
        gpu.memory_gb * 1e9 * gpu_memory_utilization
        - model.weight_bytes_per_gpu(weights=weights, tp=tp)
        - reserve_gb * 1e9
    )
    blocks = int(free // (model.kv_bytes_per_token(kv=kv, tp=tp) * block_size))
    if blocks < 2:
        raise ValueError(f'{model.model_id} at TP {tp} leaves no KV cache on {gpu.name}')
    return blocks
