"""GPU and model-shape data: the shapes reproduce the checkpoints' parameter counts and the known
KV sizes, the derived helpers do the arithmetic they say, and bad names or TP sizes are refused."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmscaler.sim.hardware import datasheets, presets
from llmscaler.sim.hardware.datasheets import GPUS, MODELS, Precision

L8 = datasheets.model('meta-llama/Llama-3.1-8B-Instruct')
L70 = datasheets.model('meta-llama/Llama-3.1-70B-Instruct')


@pytest.mark.parametrize(
    ('model_id', 'parameters'),
    [
        ('meta-llama/Llama-3.1-8B-Instruct', 8_030_261_248),
        ('meta-llama/Meta-Llama-3-8B-Instruct', 8_030_261_248),
        ('meta-llama/Llama-3.1-70B-Instruct', 70_553_706_496),
        ('meta-llama/Meta-Llama-3-70B-Instruct', 70_553_706_496),
    ],
)
def test_the_shape_recomputes_the_checkpoint_parameter_count(
    model_id: str, parameters: int
) -> None:
    shape = datasheets.model(model_id)
    assert shape.parameters == parameters
    assert shape.computed_parameters == parameters


@pytest.mark.parametrize(
    ('shape', 'tp', 'kv', 'expected'),
    [
        (L8, 1, Precision.BF16, 131_072),  # 128 KiB
        (L8, 1, Precision.FP8, 65_536),
        (L8, 2, Precision.BF16, 65_536),
        (L70, 1, Precision.BF16, 327_680),  # 320 KiB
        (L70, 4, Precision.BF16, 81_920),  # 80 KiB per GPU (320 KiB per token over 4)
        (L70, 8, Precision.BF16, 40_960),
        # TP 16 > 8 KV heads: vLLM replicates them, one head per GPU as at TP 8.
        (L70, 16, Precision.BF16, 40_960),
    ],
)
def test_kv_bytes_per_token(
    shape: datasheets.ModelShape, tp: int, kv: Precision, expected: int
) -> None:
    assert shape.kv_bytes_per_token(kv=kv, tp=tp) == expected


def test_a_16_token_block_matches_vllms_physical_block_sizes() -> None:
    # vLLM's offloading-connector post lists 2 MB per block for Llama-3.1-8B and 1.25 MB for
    # Llama-3.1-70B (as served at TP 4): 16 tokens × the per-GPU KV bytes.
    assert 16 * L8.kv_bytes_per_token() == 2 * 1024 * 1024
    assert 16 * L70.kv_bytes_per_token(tp=4) == 1.25 * 1024 * 1024


def test_linear_flops_are_twice_the_matmul_weights() -> None:
    assert L8.linear_parameters == 6_979_321_856
    assert L8.linear_flops_per_token == 2 * 6_979_321_856
    # The non-embedding parameters less the norms: the same count another way.
    assert L8.linear_parameters == L8.parameters - L8.embedding_parameters - L8.norm_parameters
    assert L70.linear_flops_per_token == 2 * 68_451_041_280
    assert L8.lm_head_flops_per_sampled_token == 2 * 128_256 * 4096


def test_attention_flops_per_pair_count_qk_and_av_for_every_query_head() -> None:
    # 32 layers × 32 heads × (2 × 128 for Q·Kᵀ + 2 × 128 for the weighted V sum)
    assert L8.attention_flops_per_token_pair == 32 * 32 * 4 * 128
    assert L70.attention_flops_per_token_pair == 80 * 64 * 4 * 128


def test_prefill_attention_pairs_are_causal() -> None:
    assert L8.prefill_attention_pairs(new_tokens=4) == 1 + 2 + 3 + 4
    assert L8.prefill_attention_pairs(new_tokens=2, cached_tokens=3) == 4 + 5
    assert L8.prefill_attention_pairs(new_tokens=0, cached_tokens=7) == 0
    with pytest.raises(ValueError, match='>= 0'):
        L8.prefill_attention_pairs(new_tokens=-1)


@given(
    first=st.integers(min_value=0, max_value=20_000),
    second=st.integers(min_value=0, max_value=20_000),
    cached=st.integers(min_value=0, max_value=100_000),
)
def test_chunked_prefill_costs_the_same_pairs_as_one_prefill(
    first: int, second: int, cached: int
) -> None:
    whole = L8.prefill_attention_pairs(new_tokens=first + second, cached_tokens=cached)
    chunks = L8.prefill_attention_pairs(
        new_tokens=first, cached_tokens=cached
    ) + L8.prefill_attention_pairs(new_tokens=second, cached_tokens=cached + first)
    assert whole == chunks
    assert whole == sum(cached + i for i in range(1, first + second + 1))


def test_weight_bytes() -> None:
    assert L8.weight_bytes(Precision.BF16) == 2 * 8_030_261_248  # 16.06 GB
    # FP8 checkpoints keep embeddings, LM head and norms in BF16.
    rest = 8_030_261_248 - 6_979_321_856
    assert L8.weight_bytes(Precision.FP8) == 6_979_321_856 + 2 * rest
    assert L70.weight_bytes_per_gpu(weights=Precision.BF16, tp=4) == 2 * 70_553_706_496 / 4


def test_allreduce_bytes_are_two_hidden_vectors_per_layer() -> None:
    assert L70.allreduce_bytes_per_token() == 2 * 80 * 8192 * 2


@pytest.mark.parametrize('tp', [0, 3, 5, 128])
def test_a_tp_size_vllm_refuses_is_refused(tp: int) -> None:
    with pytest.raises(ValueError, match=r'TP|tensor-parallel'):
        L70.kv_bytes_per_token(tp=tp)
    with pytest.raises(ValueError, match=r'TP|tensor-parallel'):
        L70.weight_bytes_per_gpu(weights=Precision.BF16, tp=tp)


def test_unknown_names_are_refused_listing_the_valid_ones() -> None:
    with pytest.raises(ValueError, match=r"unknown GPU 'V100'.*A100.*L4"):
        datasheets.gpu('V100')
    with pytest.raises(ValueError, match=r"unknown model 'gpt2'.*Llama-3\.1-8B"):
        datasheets.model('gpt2')


@pytest.mark.parametrize(
    ('name', 'bandwidth', 'bf16', 'fp8'),
    [
        # the datasheet figures (each source named in sim.hardware.datasheets) the presets stand on
        ('H100', 3.35e12, 989.5e12, 1979e12),
        ('A100', 2.039e12, 312e12, None),
        ('L40S', 0.864e12, 362.05e12, 733e12),
        ('L4', 0.300e12, 121e12, 242.5e12),
    ],
)
def test_preset_gpus_carry_the_reference_figures(
    name: str, bandwidth: float, bf16: float, fp8: float | None
) -> None:
    spec = datasheets.gpu(name)
    assert spec.memory_bandwidth_bytes_s == pytest.approx(bandwidth)
    assert spec.dense_flops(Precision.BF16) == pytest.approx(bf16)
    if fp8 is None:
        with pytest.raises(ValueError, match='no FP8'):
            spec.dense_flops(Precision.FP8)
    else:
        assert spec.dense_flops(Precision.FP8) == pytest.approx(fp8)


def test_every_gpu_is_complete_and_sourced() -> None:
    for key, spec in GPUS.items():
        assert spec.name, key
        assert spec.interconnect, key
        assert 'https://' in spec.source, key
        assert 'datasheet' in spec.source, key
        assert spec.memory_gb > 0, key
        assert spec.memory_bandwidth_tb_s > 0, key
        assert spec.bf16_dense_tflops > 0, key
        assert spec.interconnect_bytes_s_per_direction > 0, key
        if spec.fp8_dense_tflops is not None:
            # Where FP8 tensor cores exist they run at twice the BF16 rate.
            assert spec.fp8_dense_tflops == pytest.approx(2 * spec.bf16_dense_tflops, rel=0.02)


def test_every_model_is_sourced_from_its_config() -> None:
    for model_id, shape in MODELS.items():
        assert shape.model_id == model_id
        assert shape.source == f'https://huggingface.co/{model_id}/blob/main/config.json'
        assert shape.attention_heads * shape.head_dim == shape.hidden_size


def test_every_preset_names_a_known_gpu_and_model() -> None:
    for name in presets.names():
        spec = presets.preset(name=name)
        assert spec.accelerator in GPUS, name
        assert spec.model_id in MODELS, name
        MODELS[spec.model_id].kv_bytes_per_token(tp=spec.gpus_per_replica)


def test_llama_3_and_3_1_share_a_shape_and_8b_and_70b_do_not() -> None:
    assert datasheets.same_shape(L8, datasheets.model('meta-llama/Meta-Llama-3-8B-Instruct'))
    assert datasheets.same_shape(L70, datasheets.model('meta-llama/Meta-Llama-3-70B-Instruct'))
    assert not datasheets.same_shape(L8, L70)
