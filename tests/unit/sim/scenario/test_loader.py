"""Scenarios: the built-in default, files, command-line overrides, the derived SLO, bad input.

| case | expectation |
|---|---|
| built-in default | two 8B variants (H100, L40S), synthetic conv workload, 3 policies |
| file with overrides of a preset | the VariantSpec carries them |
| unknown preset / policy / static variant / setting / field | one line listing the valid names |
| malformed YAML | file, line and column |
| --trace / --rate-scale / --duration / --policy / --engine | applied to the document |
| derived SLO | 5 x idle prefill of the p90 prompt, 3 x idle decode step, slowest variant |
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from llmscaler.sim.scenario import loader
from llmscaler.sim.scenario.document import DEFAULT_DOCUMENT, ScenarioError, with_overrides
from llmscaler.sim.scenario.workloads import derive_slo, round_up
from llmscaler.sim.vocabulary import Trace


def test_the_default_scenario_has_two_variants_and_three_policies() -> None:
    setup = loader.default()
    assert [v.name for v in setup.variants] == ['h100', 'l40s']
    assert [v.preset for v in setup.variants] == ['llama-3.1-8b-h100', 'llama-3.1-8b-l40s']
    assert setup.policies == (
        'default',
        'predictive',
        'keda-queue',
        'hpa-kv',
        'kaito-realtime',
        'clairvoyant',
    )
    assert setup.workload.synthetic is not None
    assert setup.settings.cycle == 30.0
    # The L40S is cheaper per replica-hour than the H100.
    assert setup.variants[1].cost_per_hour < setup.variants[0].cost_per_hour


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / 'scenario.yaml'
    path.write_text(text)
    return path


def test_a_file_overrides_preset_fields(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        'name: mine\n'
        'variants:\n'
        '  - {name: fast, preset: llama-3.1-8b-h100, max_replicas: 3, price_per_gpu_hour: 2.5}\n'
        'policies: [saturation-token, static:fast=2]\n'
        'settings: {cycle: 15}\n'
        'slo: {ttft: 0.5, itl: 0.05}\n',
    )
    setup = loader.load(path=path)
    (spec,) = setup.variants
    assert (spec.name, spec.max_replicas, spec.price_per_gpu_hour) == ('fast', 3, 2.5)
    assert spec.cost_per_hour == 2.5
    assert setup.settings.cycle == 15.0
    assert setup.slo is not None
    assert (setup.slo.ttft, setup.slo.itl) == (0.5, 0.05)


@pytest.mark.parametrize(
    ('text', 'expected'),
    [
        ('variants: [{name: a, preset: nope}]\n', 'variants.0.preset: unknown preset'),
        ('variants: [{name: a, preset: llama-3.1-8b-h100}]\npolicies: [magic]\n',
         "unknown policy 'magic'; valid: default"),
        ('variants: [{name: a, preset: llama-3.1-8b-h100}]\npolicies: ["static:b=1"]\n',
         'a'),
        ('variants: [{name: a, preset: llama-3.1-8b-h100}]\nsettings: {cycles: 3}\n',
         'settings.cycles: unknown setting; valid:'),
        ('variants: [{name: a, preset: llama-3.1-8b-h100}]\nsettings: {router: random}\n',
         "settings.router: Input should be 'least-loaded', 'round-robin' or 'prefix-aware'"),
        ('variants: [{name: a, preset: llama-3.1-8b-h100}]\nsettings: {engine: turbo}\n',
         "settings.engine: Input should be 'fast' or 'reference'"),
        ('variants: [{name: a, preset: llama-3.1-8b-h100}]\nsettings: {cycle: -1}\n',
         'settings.cycle must be > 0 and finite'),
        ('variants: [{name: a, preset: llama-3.1-8b-h100}]\nsettings: {cycle: [1]}\n',
         'settings.cycle: Input should be a valid number'),
        ('variants: [{name: a, preset: llama-3.1-8b-h100, colour: red}]\n',
         'variants.0.colour: Extra inputs are not permitted'),
        ('variants: [{name: a, preset: llama-3.1-8b-h100}, {name: a, preset: llama-3.1-8b-l4}]\n',
         'duplicate variant names'),
        ('variants: []\n', 'at least one variant'),
        ('variants: [{name: a, preset: llama-3.1-8b-h100}, '
         '{name: b, preset: llama-3.1-70b-h100-tp4}]\n', 'one model'),
        ('variants: [\n', 'line 2 column 1'),
        ('- a\n', '(top level): a mapping is needed'),
    ],
)  # fmt: skip
def test_bad_scenarios_give_one_line(tmp_path: Path, text: str, expected: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ScenarioError) as caught:
        loader.load(path=path)
    message = str(caught.value)
    assert '\n' not in message
    assert str(path) in message
    assert expected in message


def test_unknown_preset_lists_the_valid_ones(tmp_path: Path) -> None:
    path = write(tmp_path, 'variants: [{name: a, preset: nope}]\n')
    with pytest.raises(ScenarioError, match=re.escape('llama-3.1-8b-l40s')):
        loader.load(path=path)


def test_command_line_overrides() -> None:
    document = with_overrides(
        document=DEFAULT_DOCUMENT,
        policies=['static:2'],
        rate_scale=2.0,
        duration=600.0,
        seed=7,
        engine='reference',
    )
    setup = loader.from_document(document=document)
    assert setup.policies == ('static:2',)
    assert setup.seed == 7
    assert setup.settings.engine == 'reference'
    assert setup.workload.synthetic is not None
    assert setup.workload.synthetic.duration == 600.0
    assert setup.workload.synthetic.rate == 26.0  # 13 req/s x 2
    traced = with_overrides(
        document=DEFAULT_DOCUMENT, trace_path='t.csv', rate_scale=3.0, start=60.0
    )
    assert traced['workload'] == {'trace': {'path': 't.csv', 'rate_scale': 3.0, 'start': 60.0}}
    with pytest.raises(ScenarioError, match='--start'):
        with_overrides(document=DEFAULT_DOCUMENT, start=60.0)


def test_the_derived_slo_follows_the_slowest_variant_at_idle() -> None:
    setup = loader.default()
    inputs = np.array([100, 200, 300, 400, 500, 600, 700, 800, 900, 1000], dtype=np.int64)
    outputs = np.full(10, 100, dtype=np.int64)
    workload = Trace(
        name='t', arrivals=np.arange(10, dtype=np.float64), input_tokens=inputs,
        output_tokens=outputs,
    )  # fmt: skip
    slo = derive_slo(variants=setup.variants, workload=workload)
    # p90 of the inputs (linear) = 910 tokens; mean context = 550 + 100/2 = 600 tokens.
    expected_ttft = max(
        5 * v.perf.step_seconds(decode_seqs=0, prefill_tokens=910, context_tokens=0)
        for v in setup.variants
    )
    expected_itl = max(
        3 * v.perf.step_seconds(decode_seqs=1, prefill_tokens=0, context_tokens=600)
        for v in setup.variants
    )
    assert expected_ttft <= slo.ttft < expected_ttft * 1.1
    assert expected_itl <= slo.itl < expected_itl * 1.1


def testround_up_keeps_two_significant_figures() -> None:
    assert round_up(0.0693) == pytest.approx(0.07)
    assert round_up(1.234) == pytest.approx(1.3)
    assert round_up(0.5) == pytest.approx(0.5)
