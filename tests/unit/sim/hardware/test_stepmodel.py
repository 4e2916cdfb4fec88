"""The step-time model: the roofline's arithmetic, its derivation from datasheet figures and
model shapes, the decode-run line the fast engine jumps along, and the KV-cache estimate."""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmscaler.sim.hardware import datasheets, presets, stepmodel
from llmscaler.sim.hardware.datasheets import Precision
from llmscaler.sim.hardware.stepmodel import FITTED, Efficiency
from llmscaler.sim.vocabulary import PerfModel

L8 = datasheets.model('meta-llama/Llama-3.1-8B-Instruct')
L70 = datasheets.model('meta-llama/Llama-3.1-70B-Instruct')
H100, A100, L40S = datasheets.gpu('H100'), datasheets.gpu('A100'), datasheets.gpu('L40S')

# Round numbers so the arithmetic below can be checked by hand.
ROOF = PerfModel(
    step_overhead=0.001,
    decode_per_seq=20e-6,
    prefill_per_token=18e-6,
    kv_read_per_token=50e-9,
    weight_read=0.005,
    token_traffic=2e-6,
    attention_per_pair=1e-9,
    comm_per_token=3e-6,
)


def test_a_decode_step_is_memory_bound_at_small_batches() -> None:
    # 4 decoding sequences reading 4000 tokens: linear max(5 + 0.008, 0.08) ms, attention
    # max(0.2, 0.004004) ms; plus 1 ms and 4 · 3 µs of all-reduce.
    t = ROOF.step_seconds(decode_seqs=4, prefill_tokens=0, context_tokens=4000)
    assert t == pytest.approx(0.001 + 12e-6 + 0.005008 + 0.0002)


def test_a_large_prefill_is_compute_bound_and_its_attention_quadratic() -> None:
    # 8192 prompt tokens, nothing cached: linear max(5 + 16.384, 147.456) ms; attention pairs
    # 8192 · 8193 / 2 = 33,558,528 → 33.56 ms of compute, nothing read.
    t = ROOF.step_seconds(decode_seqs=0, prefill_tokens=8192, context_tokens=0)
    assert t == pytest.approx(0.001 + 8192 * 3e-6 + 0.147456 + 0.033558528)
    # The next chunk of the same prompt attends to the 8192 cached tokens too: its attention
    # costs 8192 · 8192 more pairs; twice the prompt, more than twice the attention.
    second = ROOF.step_seconds(
        decode_seqs=0, prefill_tokens=8192, context_tokens=8192, attention_pairs=None
    )
    assert second - t == pytest.approx(8192 * 8192 * 1e-9)


def test_attention_is_counted_once() -> None:
    # Decode attention at a long context: the KV read bounds it; the pair FLOPs run inside it.
    t = ROOF.step_seconds(decode_seqs=100, prefill_tokens=0, context_tokens=200_000)
    linear = max(0.005 + 100 * 2e-6, 100 * 20e-6)
    assert t == pytest.approx(0.001 + 100 * 3e-6 + linear + 200_000 * 50e-9)


def test_the_four_linear_terms_alone_are_the_linear_step() -> None:
    linear = PerfModel(
        step_overhead=0.007, decode_per_seq=42e-6, prefill_per_token=24e-6, kv_read_per_token=5e-8
    )
    t = linear.step_seconds(decode_seqs=3, prefill_tokens=100, context_tokens=2000)
    assert t == pytest.approx(0.007 + 3 * 42e-6 + 100 * 24e-6 + 2000 * 5e-8)


def test_sharpness_blends_the_linear_layers_bounds() -> None:
    # 250 decoding sequences: memory 5 + 0.5 = 5.5 ms, compute 5 ms.
    kw = {'decode_seqs': 250, 'prefill_tokens': 0, 'context_tokens': 0, 'attention_pairs': 0}
    plain = ROOF.step_seconds(**kw)
    added = dataclasses.replace(ROOF, sharpness=1.0).step_seconds(**kw)
    square = dataclasses.replace(ROOF, sharpness=2.0).step_seconds(**kw)
    rest = 0.001 + 250 * 3e-6
    assert plain - rest == pytest.approx(0.0055)
    assert added - rest == pytest.approx(0.0105)
    assert square - rest == pytest.approx(math.hypot(0.0055, 0.005))


@given(
    seqs=st.integers(1, 600),
    per_seq=st.integers(1, 4000),
    kv=st.sampled_from([50e-9, 3e-9, 1.05e-9, 1e-9, 0.5e-9]),
)
def test_decode_line_is_the_step_time_along_a_run(seqs: int, per_seq: int, kv: float) -> None:
    perf = dataclasses.replace(ROOF, kv_read_per_token=kv)
    context = seqs * per_seq
    t0, slope, horizon = perf.decode_line(seqs=seqs, context=context)
    steps = 50 if horizon < 0 else horizon + 3
    for j in range(steps):
        c = context + j * seqs
        exact = perf.step_seconds(
            decode_seqs=seqs, prefill_tokens=0, context_tokens=c, attention_pairs=c + seqs
        )
        if horizon < 0 or j < horizon:
            assert t0 + slope * j == pytest.approx(exact, rel=1e-12)
        elif j == horizon:  # the first step on the memory bound
            assert kv * c >= perf.attention_per_pair * (c + seqs)
            assert t0 + slope * j < exact or t0 + slope * j == pytest.approx(exact, rel=1e-12)


def test_a_run_that_starts_compute_bound_turns_memory_bound() -> None:
    # kv 1.3 ns per token against 1 ns per pair: with 10 sequences memory wins once
    # 1.3·C ≥ C + 10, i.e. C ≥ 33.3: from the third step on (context 10 + 3 · 10 = 40).
    perf = dataclasses.replace(ROOF, kv_read_per_token=1.3e-9)
    _, slope, horizon = perf.decode_line(seqs=10, context=10)
    assert slope == pytest.approx(10 * 1e-9)  # the compute bound: 10 more pairs per step
    assert horizon == 3
    _, slope, horizon = perf.decode_line(seqs=10, context=40)
    assert slope == pytest.approx(10 * 1.3e-9)
    assert horizon == -1


# ---- derivation ---------------------------------------------------------------------------------


def test_8b_on_h100_from_the_datasheet() -> None:
    perf = stepmodel.derive(model=L8, gpu=H100, tp=1)
    bandwidth = 3.35e12 * FITTED.memory
    flops = 989.5e12 * FITTED.flops
    assert perf.weight_read == pytest.approx(L8.weight_bytes(Precision.BF16) / bandwidth)
    assert perf.weight_read == pytest.approx(16.06e9 / bandwidth, rel=1e-3)
    assert perf.kv_read_per_token == pytest.approx(131_072 / bandwidth)
    assert perf.prefill_per_token == pytest.approx(2 * 6_979_321_856 / flops)
    assert perf.decode_per_seq == pytest.approx((2 * 6_979_321_856 + 2 * 128_256 * 4096) / flops)
    assert perf.attention_per_pair == pytest.approx(4 * 32 * 32 * 128 / flops)
    assert (perf.comm_per_token, perf.step_overhead) == (0.0, FITTED.step_overhead)
    assert perf.sharpness == FITTED.sharpness


def test_tensor_parallelism_splits_the_work_and_adds_all_reduces() -> None:
    one = stepmodel.derive(model=L70, gpu=H100, tp=1)
    four = stepmodel.derive(model=L70, gpu=H100, tp=4)
    assert four.weight_read == pytest.approx(one.weight_read / 4)
    assert four.prefill_per_token == pytest.approx(one.prefill_per_token / 4)
    assert four.kv_read_per_token == pytest.approx(one.kv_read_per_token / 4)
    # Two all-reduces per layer of 8192 BF16 activations, ring factor 2 · 3/4, over 450 GB/s.
    link = 450e9 * FITTED.link
    assert four.comm_per_token == pytest.approx(2 * 80 * 8192 * 2 * 1.5 / link)
    assert four.step_overhead == pytest.approx(
        FITTED.step_overhead + 160 * FITTED.allreduce_latency
    )


def test_fp8_weights_use_fp8_tensor_cores_only_where_there_are_some() -> None:
    h_bf16 = stepmodel.derive(model=L8, gpu=H100, tp=1)
    h_fp8 = stepmodel.derive(model=L8, gpu=H100, tp=1, weights=Precision.FP8)
    a_bf16 = stepmodel.derive(model=L8, gpu=A100, tp=1)
    a_fp8 = stepmodel.derive(model=L8, gpu=A100, tp=1, weights=Precision.FP8)
    assert h_fp8.prefill_per_token == pytest.approx(h_bf16.prefill_per_token / 2)
    assert a_fp8.prefill_per_token == pytest.approx(a_bf16.prefill_per_token)
    # Both read half the linear weights (embeddings and LM head stay BF16).
    assert h_fp8.weight_read < 0.6 * h_bf16.weight_read
    assert a_fp8.weight_read == pytest.approx(
        a_bf16.weight_read * h_fp8.weight_read / h_bf16.weight_read
    )


def test_every_preset_is_derived_from_its_hardware() -> None:
    for name in presets.names():
        spec = presets.preset(name=name)
        expected = stepmodel.derive(
            model=datasheets.model(spec.model_id),
            gpu=datasheets.gpu(spec.accelerator),
            tp=spec.gpus_per_replica,
        )
        assert spec.perf == expected, name


@pytest.mark.parametrize(
    ('change', 'message'),
    [
        ({'memory': 0.0}, 'memory'),
        ({'flops': 1.2}, 'flops'),
        ({'link': math.nan}, 'link'),
        ({'step_overhead': -1e-3}, 'step_overhead'),
        ({'allreduce_latency': math.inf}, 'allreduce_latency'),
        ({'sharpness': 0.5}, 'sharpness'),
    ],
)
def test_bad_efficiencies_are_refused(change: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        dataclasses.replace(FITTED, **change)


def test_an_efficiency_of_one_is_the_datasheet_peak() -> None:
    peak = Efficiency(memory=1, flops=1, link=1, step_overhead=0, allreduce_latency=0)
    perf = stepmodel.derive(model=L8, gpu=L40S, tp=1, efficiency=peak)
    assert perf.weight_read == pytest.approx(L8.weight_bytes(Precision.BF16) / 0.864e12)
    assert perf.prefill_per_token == pytest.approx(2 * 6_979_321_856 / 362.05e12)


@pytest.mark.parametrize(
    ('name', 'weights'),
    [
        ('llama-3.1-8b-h100', Precision.BF16),
        ('llama-3.1-8b-a100', Precision.BF16),
        ('llama-3.1-8b-l40s', Precision.BF16),
        ('llama-3.1-70b-h100-tp4', Precision.BF16),
        ('llama-3.1-70b-h100-tp8', Precision.BF16),
    ],
)
def test_kv_blocks_are_near_the_presets_estimates(name: str, weights: Precision) -> None:
    # The presets' counts were estimated in GiB; the datasheets' decimal GB give ≤ 12 % fewer.
    spec = presets.preset(name=name)
    blocks = stepmodel.kv_blocks(
        model=datasheets.model(spec.model_id),
        gpu=datasheets.gpu(spec.accelerator),
        tp=spec.gpus_per_replica,
        weights=weights,
    )
    assert 0.88 * spec.num_gpu_blocks <= blocks <= 1.01 * spec.num_gpu_blocks


def test_no_room_for_a_kv_cache_is_refused() -> None:
    with pytest.raises(ValueError, match='no KV cache'):
        stepmodel.kv_blocks(model=L70, gpu=H100, tp=1)
