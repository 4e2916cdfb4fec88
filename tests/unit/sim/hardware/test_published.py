"""Published measurements: every record is complete and consistent, none is duplicated, they
cover the presets and regimes the validation table needs, and a malformed record is refused."""

from __future__ import annotations

import dataclasses
from collections import Counter

import pytest

from llmscaler.sim.hardware import presets, published
from llmscaler.sim.hardware.datasheets import GPUS, MODELS
from llmscaler.sim.hardware.measurement import (
    PRESET_SETUPS,
    UNIT_OF,
    Basis,
    Figure,
    Load,
    LoadKind,
    Provenance,
    Regime,
    Unit,
    preset_match,
    regime,
)
from llmscaler.sim.hardware.published import MEASUREMENTS


def test_there_are_at_least_twenty_records_with_unique_keys() -> None:
    keys = [m.key for m in MEASUREMENTS]
    assert len(keys) >= 20
    assert len(set(keys)) == len(keys)


def test_no_record_is_a_duplicate_of_another() -> None:
    identity = Counter(
        (m.source.url, m.setup, m.workload, m.load, m.figure, m.statistic) for m in MEASUREMENTS
    )
    assert [k for k, n in identity.items() if n > 1] == []


def test_every_record_is_complete() -> None:
    for m in MEASUREMENTS:
        assert m.source.url.startswith('https://'), m.key
        assert m.source.title, m.key
        assert m.source.publisher, m.key
        assert m.source.date[:4].isdigit(), m.key
        assert m.setup.model_id in MODELS, m.key
        assert m.setup.gpu in GPUS, m.key
        assert m.setup.tp >= 1, m.key
        assert m.setup.engine, m.key
        MODELS[m.setup.model_id].kv_bytes_per_token(tp=m.setup.tp)  # a TP vLLM accepts
        assert m.value > 0, m.key
        assert m.unit is UNIT_OF[m.figure], m.key
        assert m.notes, m.key
        assert m.workload.name, m.key
        assert (m.workload.input_tokens is None) == (m.workload.input_basis is Basis.UNSTATED)
        assert (m.workload.output_tokens is None) == (m.workload.output_basis is Basis.UNSTATED)
        if m.provenance is Provenance.PRINTED:
            assert m.uncertainty == 0, m.key


def test_preset_setups_are_the_presets() -> None:
    assert sorted(PRESET_SETUPS) == list(presets.names())
    for name, (model_id, gpu, tp) in PRESET_SETUPS.items():
        spec = presets.preset(name=name)
        assert (spec.model_id, spec.accelerator, spec.gpus_per_replica) == (model_id, gpu, tp)


def test_lookup_by_key() -> None:
    first = MEASUREMENTS[0]
    assert published.measurement(first.key) is first
    with pytest.raises(ValueError, match="unknown published measurement 'nope'"):
        published.measurement('nope')


def test_the_12_3_and_17_7_ms_h100_itls_are_wva_fits_evaluated_at_128_and_256() -> None:
    at_128 = published.measurement('wva-fit-8b-h100-b128')
    at_256 = published.measurement('wva-fit-8b-h100-b256')
    assert at_128.provenance is Provenance.FIT
    assert at_128.value == pytest.approx(6.958 + 0.042 * 128)
    assert round(at_128.value, 1) == 12.3
    assert round(at_256.value, 1) == 17.7
    assert (at_128.load, at_256.load) == (Load(LoadKind.BATCH, 128), Load(LoadKind.BATCH, 256))


def test_records_cover_three_presets_exactly_and_every_regime_but_long_prompts() -> None:
    exact: dict[str, set[Regime]] = {}
    for m in MEASUREMENTS:
        match = preset_match(m)
        if match is not None and match[1]:
            exact.setdefault(match[0], set()).add(regime(m))
    assert len(exact) >= 3
    covered = set().union(*exact.values())
    assert {Regime.LIGHT, Regime.MODERATE, Regime.SATURATION} <= covered
    # No long-prompt (>= 8k input) vLLM figure with a usable setup was found; when one is
    # added, this documents it.
    assert Regime.LONG_PROMPT not in covered


def test_relatives_match_their_preset_inexactly() -> None:
    a100_40 = published.measurement('musgrave-8b-a100-40gb-c1-tpot')
    assert preset_match(a100_40) == ('llama-3.1-8b-a100', False)
    fp8 = published.measurement('lambda-v054-70b-fp8-h100tp8-itl')
    assert preset_match(fp8) == ('llama-3.1-70b-h100-tp8', False)
    llama3 = published.measurement('vllm060-blog-8b-h100-light-itl')
    assert preset_match(llama3) == ('llama-3.1-8b-h100', True)


def test_regimes() -> None:
    assert regime(published.measurement('wva-fit-8b-h100-b1')) is Regime.LIGHT
    assert regime(published.measurement('sglang060-8b-a100-rps4-ttft')) is Regime.MODERATE
    assert regime(published.measurement('sglang060-8b-a100-offline')) is Regime.SATURATION
    assert regime(published.measurement('redhat-mlperf51-8b-fp8-l40s-server')) is Regime.SATURATION
    long = dataclasses.replace(
        published.measurement('musgrave-8b-a100-40gb-c1-tpot'),
        workload=dataclasses.replace(
            published.measurement('musgrave-8b-a100-40gb-c1-tpot').workload, input_tokens=8192.0
        ),
    )
    assert regime(long) is Regime.LONG_PROMPT


def test_the_derived_sharegpt_output_mean_follows_from_the_printed_throughputs() -> None:
    tokens = published.measurement('sglang060-8b-a100-offline').value
    assert tokens / 21.27 == pytest.approx(
        published.measurement('sglang060-8b-a100-offline').workload.output_tokens, rel=1e-3
    )


BASE = published.measurement('sglang060-8b-a100-rps4-ttft')


@pytest.mark.parametrize(
    ('change', 'message'),
    [
        ({'value': 0.0}, 'not positive'),
        ({'value': float('nan')}, 'not positive'),
        ({'unit': Unit.TOKENS_PER_S}, 'is in ms'),
        ({'uncertainty': 0.1}, 'printed number'),
        ({'provenance': Provenance.DERIVED}, 'needs its reading uncertainty'),
        ({'notes': ''}, 'needs notes'),
        ({'load': Load(LoadKind.ALL_AT_ONCE)}, 'needs a positive value'),
        ({'load': Load(LoadKind.SINGLE, 3)}, 'needs no value'),
        ({'figure': Figure.OUTPUT_THROUGHPUT}, 'is in tokens/s'),
        (
            {'workload': dataclasses.replace(BASE.workload, input_basis=Basis.UNSTATED)},
            'does not match its basis',
        ),
        ({'setup': dataclasses.replace(BASE.setup, gpu='V100')}, "unknown GPU 'V100'"),
        ({'setup': dataclasses.replace(BASE.setup, model_id='gpt2')}, "unknown model 'gpt2'"),
        ({'source': dataclasses.replace(BASE.source, url='http://x')}, 'https URL'),
    ],
)
def test_a_malformed_record_is_refused(change: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        dataclasses.replace(BASE, **change)  # type: ignore[arg-type]
