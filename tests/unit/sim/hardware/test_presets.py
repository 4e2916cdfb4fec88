"""Hardware presets: the table's numbers, their derivations, overrides."""

from __future__ import annotations

from typing import Any

import pytest

from llmscaler.sim.hardware import datasheets, presets, stepmodel

H100_8B = 'llama-3.1-8b-h100'
ALL = (
    'llama-3.1-70b-h100-tp4',
    'llama-3.1-70b-h100-tp8',
    'llama-3.1-8b-a100',
    'llama-3.1-8b-h100',
    'llama-3.1-8b-l4',
    'llama-3.1-8b-l40s',
)


def test_names_are_the_six_presets_sorted() -> None:
    assert presets.names() == ALL
    assert tuple(sorted(presets.PRESETS)) == ALL


@pytest.mark.parametrize(
    ('name', 'model', 'accelerator', 'gpus', 'price', 'blocks', 'startup'),
    [
        (H100_8B, presets.MODEL_8B, 'H100', 1, 3.90, 27_500, 90.0),
        ('llama-3.1-8b-a100', presets.MODEL_8B, 'A100', 1, 3.67, 27_500, 90.0),
        ('llama-3.1-8b-l40s', presets.MODEL_8B, 'L40S', 1, 1.90, 11_500, 90.0),
        ('llama-3.1-8b-l4', presets.MODEL_8B, 'L4', 1, 0.80, 1_700, 90.0),
        ('llama-3.1-70b-h100-tp4', presets.MODEL_70B, 'H100', 4, 3.90, 29_000, 180.0),
        ('llama-3.1-70b-h100-tp8', presets.MODEL_70B, 'H100', 8, 3.90, 86_000, 180.0),
    ],
)
def test_preset_table(
    name: str,
    model: str,
    accelerator: str,
    gpus: int,
    price: float,
    blocks: int,
    startup: float,
) -> None:
    spec = presets.preset(name=name)
    assert spec.name == name
    assert spec.preset == name
    assert spec.model_id == model
    assert spec.accelerator == accelerator
    assert spec.gpus_per_replica == gpus
    assert spec.price_per_gpu_hour == pytest.approx(price)
    assert spec.cost_per_hour == pytest.approx(price * gpus)
    assert spec.num_gpu_blocks == blocks
    assert spec.block_size == 16
    assert spec.startup_delay == startup
    # The step model is derived from the model, the GPU and TP
    # (tests/unit/sim/hardware/test_stepmodel.py).
    expected = stepmodel.derive(
        model=datasheets.model(model), gpu=datasheets.gpu(accelerator), tp=gpus
    )
    assert spec.perf == expected


def test_model_ids() -> None:
    assert presets.MODEL_8B == 'meta-llama/Llama-3.1-8B-Instruct'
    assert presets.MODEL_70B == 'meta-llama/Llama-3.1-70B-Instruct'


def test_cost_per_hour_worked_examples() -> None:
    # 70B TP8: 8 GPUs × $3.90 = $31.20 per replica-hour; L4: 1 × $0.80.
    assert presets.preset(name='llama-3.1-70b-h100-tp8').cost_per_hour == pytest.approx(31.2)
    assert presets.preset(name='llama-3.1-8b-l4').cost_per_hour == pytest.approx(0.8)


def test_scheduler_limits_follow_the_vllm_serve_defaults() -> None:
    # vLLM's `vllm serve` defaults (vllm/engine/arg_utils.py): H100 (≥ 70 GiB, not A100) 1024 seqs /
    # 8192 tokens; A100, L40S, L4 256 / 2048.
    for name in ALL:
        spec = presets.preset(name=name)
        expected = (1024, 8192) if spec.accelerator == 'H100' else (256, 2048)
        assert (spec.max_num_seqs, spec.max_num_batched_tokens) == expected, name


def test_max_model_len_fits_the_kv_cache() -> None:
    # L4: 1,700 blocks = 27,200 tokens, so 4096; the others keep Llama-3.1's 131,072.
    assert presets.preset(name='llama-3.1-8b-l4').max_model_len == 4096
    for name in ALL:
        spec = presets.preset(name=name)
        assert spec.max_model_len <= (spec.num_gpu_blocks - 1) * spec.block_size, name
        if name != 'llama-3.1-8b-l4':
            assert spec.max_model_len == 131_072


def test_every_preset_runs_on_the_fast_path() -> None:
    # The fast engine's lockstep needs max_num_seqs ≤ max_num_batched_tokens.
    for name in ALL:
        spec = presets.preset(name=name)
        assert spec.max_num_seqs <= spec.max_num_batched_tokens


def test_light_load_decode_steps_order_the_gpus_by_bandwidth() -> None:
    # One decoding sequence is weight-read bound: L4 (0.30 TB/s) > L40S (0.864) > A100 (2.04) >
    # H100 (3.35); 70B at TP8 reads a quarter of its weights per GPU but pays 160 all-reduces.
    def one(name: str) -> float:
        return presets.preset(name=name).perf.step_seconds(
            decode_seqs=1, prefill_tokens=0, context_tokens=1000
        )

    order = ['llama-3.1-8b-l4', 'llama-3.1-8b-l40s', 'llama-3.1-8b-a100', H100_8B]
    assert [one(n) for n in order] == sorted((one(n) for n in order), reverse=True)
    assert one('llama-3.1-70b-h100-tp4') > one('llama-3.1-70b-h100-tp8') > one(H100_8B)


def test_variant_name_and_overrides() -> None:
    spec = presets.preset(
        name=H100_8B, variant_name='fast-pool', price_per_gpu_hour=2.5, num_gpu_blocks=4000
    )
    assert spec.name == 'fast-pool'
    assert spec.preset == H100_8B
    assert spec.cost_per_hour == pytest.approx(2.5)
    assert spec.num_gpu_blocks == 4000
    # Untouched fields keep the preset's values.
    assert spec.perf == presets.preset(name=H100_8B).perf


def test_builders_in_the_table_name_the_variant() -> None:
    spec = presets.PRESETS['llama-3.1-8b-l40s']('cheap')
    assert spec.name == 'cheap'
    assert spec.preset == 'llama-3.1-8b-l40s'


def test_unknown_preset_lists_the_valid_ones() -> None:
    with pytest.raises(ValueError, match='unknown preset') as info:
        presets.preset(name='llama-3.1-8b-b200')
    message = str(info.value)
    assert "'llama-3.1-8b-b200'" in message
    for name in ALL:
        assert name in message


@pytest.mark.parametrize('field', ['nonsense', 'preset'])
def test_unknown_or_reserved_override_is_rejected(field: str) -> None:
    overrides: dict[str, Any] = {field: 1}
    with pytest.raises(ValueError, match=f'unknown override {field}'):
        presets.preset(name=H100_8B, **overrides)


def test_the_table_is_read_only() -> None:
    with pytest.raises(TypeError):
        presets.PRESETS['mine'] = presets.PRESETS[H100_8B]  # type: ignore[index]
