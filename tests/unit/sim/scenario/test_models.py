"""Scenarios of several models: the `models` list, the GPU inventory, P/D roles, the runs.

| case | expectation |
|---|---|
| a two-model document | variants named by model, a workload and SLO each, the inventory |
| malformed multi-model documents, roles, inventories | one line naming the field |
| `--trace`, `--rate-scale`, `--duration` on a multi-model document | applied per model |
| workloads | synthetic per model (own seed); a shared trace split by its model column |
| `static:N` | N on the first variant of each model |
| a warm start with an inventory | each model's warm fleet within what the ones before left |
| one model written as `models: [...]` | the very run of the one-model document |
| the example scenario through the CLI | a row per model and policy, GPU lines, deterministic |
| a one-model run | no model column, no GPU or model keys in summary.json |
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from llmscaler.cli import main
from llmscaler.sim import simulate
from llmscaler.sim.scenario import loader
from llmscaler.sim.scenario.document import DEFAULT_DOCUMENT, ScenarioError, with_overrides
from llmscaler.sim.scenario.setup import build_policies, warm_start_fleet
from llmscaler.sim.scenario.workloads import Workloads, build_workloads
from llmscaler.sim.vocabulary import Trace
from tests.support.paths import ROOT

EXAMPLE = ROOT / 'examples' / 'multi-model.yaml'

TWO: dict[str, Any] = {
    'name': 'two',
    'models': [
        {
            'name': 'chat',
            'variants': [
                {'name': 'chat-h100', 'preset': 'llama-3.1-8b-h100', 'max_replicas': 4},
                {'name': 'chat-l40s', 'preset': 'llama-3.1-8b-l40s', 'max_replicas': 4},
            ],
            'workload': {'synthetic': {'preset': 'azure-conv', 'duration': 300, 'rate': 4}},
            'slo': {'ttft': 2.0, 'itl': 0.1},
        },
        {
            'name': 'code',
            'variants': [{'name': 'code-h100', 'preset': 'llama-3.1-70b-h100-tp4'}],
            'workload': {'synthetic': {'preset': 'azure-code', 'duration': 300, 'rate': 0.5}},
        },
    ],
    'inventory': {'H100': 9, 'L40S': 2},
    'policies': ['static:2'],
}


def two(**changes: Any) -> dict[str, Any]:
    document = copy.deepcopy(TWO)
    document.update(changes)
    return document


def test_a_two_model_document() -> None:
    setup = loader.from_document(document=two(slo={'ttft': 3.0, 'itl': 0.2}))
    assert [(m.name, m.model_id) for m in setup.models] == [
        ('chat', 'meta-llama/Llama-3.1-8B-Instruct'),
        ('code', 'meta-llama/Llama-3.1-70B-Instruct'),
    ]
    assert [(v.name, v.model) for v in setup.variants] == [
        ('chat-h100', 'chat'),
        ('chat-l40s', 'chat'),
        ('code-h100', 'code'),
    ]
    # A model's own SLO, else the scenario's.
    assert [(m.slo.ttft if m.slo else None) for m in setup.models] == [2.0, 3.0]
    assert setup.inventory == {'H100': 9, 'L40S': 2}
    assert setup.first_variants == ('chat-h100', 'code-h100')
    assert setup.workload_text == (
        'chat: synthetic azure-conv at 4 req/s; code: synthetic azure-code at 0.5 req/s'
    )
    assert setup.document['models'][1]['name'] == 'code'
    static = build_policies(
        scenario=setup,
        workloads=build_workloads(scenario=setup),
        slos={},
    )[0]
    assert static.targets(view=None) == {'chat-h100': 2, 'chat-l40s': 0, 'code-h100': 2}  # type: ignore[arg-type]


def _models(changes: dict[str, Any]) -> dict[str, Any]:
    document = two()
    for index, change in changes.items():
        document['models'][int(index)].update(change)
    return document


@pytest.mark.parametrize(
    ('document', 'expected'),
    [
        (two(variants=[{'name': 'x', 'preset': 'llama-3.1-8b-h100'}]),
         'variants: with models, give each model its variants'),
        (two(model_id='org/m'), 'model_id: with models, give each model its model_id'),
        (_models({'1': {'name': 'chat'}}), "models: duplicate model names ['chat', 'chat']"),
        (_models({'1': {'variants': [{'name': 'chat-h100', 'preset': 'llama-3.1-8b-h100'}],
                        'model_id': 'org/other'}}),
         'models.0.variants: duplicate variant names'),
        (_models({'1': {'variants': [{'name': 'small', 'preset': 'llama-3.1-8b-l4'}]}}),
         "models.1.model_id: 'meta-llama/Llama-3.1-8B-Instruct' is also the model id of model "
         'chat'),
        (_models({'0': {'variants': [{'name': 'a', 'preset': 'llama-3.1-8b-h100'},
                                     {'name': 'b', 'preset': 'llama-3.1-70b-h100-tp4'}]}}),
         'models.0.variants: all variants must serve one model'),
        (_models({'1': {'workload': None}}), 'models.1.workload: every model needs a workload'),
        (two(workload={'synthetic': {'rate': 3}}), 'workload.synthetic: with models'),
        (two(workload={'trace': {'path': 'x.csv'}}),
         'models.0.workload: give a workload per model or one shared trace, not both'),
        (two(models=[{**m, 'workload': None} for m in TWO['models']],
             workload={'trace': {'path': 'x.csv', 'model': 'chat'}}),
         'workload.trace.model: a shared trace is split by its model column'),
        (_models({'0': {'variants': [{'name': 'p', 'preset': 'llama-3.1-8b-h100',
                                      'role': 'prefill'}]}}),
         'models.0.variants: roles prefill: a model is served whole (role both) or '
         'disaggregated (prefill and decode variants, no other)'),
        (_models({'0': {'variants': [{'name': 'p', 'preset': 'llama-3.1-8b-h100',
                                      'role': 'mixed'}]}}),
         "models.0.variants.0.role: Input should be 'both', 'prefill' or 'decode'"),
        (_models({'1': {'variants': [{'name': 'code-h100', 'preset': 'nope'}]}}),
         "models.1.variants.0.preset: unknown preset 'nope'"),
        (_models({'0': {'variants': [{'name': 'a', 'preset': 'llama-3.1-8b-h100',
                                      'max_replicas': 2, 'initial_replicas': 3}]}}),
         'models.0.variants.0.initial_replicas: 3 is outside [0, 2]'),
        (two(inventory={'H100': 9, 'A100': 4}),
         'inventory.A100: no variant runs on it; accelerators: H100, L40S'),
        (two(inventory={'H100': 4}),
         'inventory.H100: the start fleet needs 5 GPUs, more than the 4 there are'),
        (two(inventory={'H100': -1}), 'inventory.H100: Input should be greater than or equal to 0'),
        (two(models=[]), 'variants: at least one variant is needed'),
    ],
)  # fmt: skip
def test_bad_multi_model_documents_give_one_line(document: dict[str, Any], expected: str) -> None:
    with pytest.raises(ScenarioError) as caught:
        loader.from_document(document=document, where='f.yaml')
    message = str(caught.value)
    assert '\n' not in message
    assert message.startswith('f.yaml: ')
    assert expected in message


def test_roles_are_all_both_or_prefill_and_decode_for_one_model_too() -> None:
    document = copy.deepcopy(DEFAULT_DOCUMENT)
    document['variants'][0] = {**document['variants'][0], 'role': 'decode'}
    with pytest.raises(ScenarioError, match=r'variants: roles both, decode: a model is served'):
        loader.from_document(document=document)
    document['variants'][1] = {**document['variants'][1], 'role': 'prefill'}
    with pytest.raises(ScenarioError, match=r'policies: clairvoyant calibrates whole requests'):
        loader.from_document(document=document)
    document['policies'] = ['default', 'saturation-token']
    roles = {v.name: v.role for v in loader.from_document(document=document).variants}
    assert sorted(roles.values()) == ['decode', 'prefill']
    document['variants'][0]['role'] = document['variants'][1]['role'] = 'both'
    assert loader.from_document(document=document).variants[0].role == 'both'


def test_the_command_line_applies_to_every_model() -> None:
    scaled = with_overrides(document=TWO, rate_scale=2.0, duration=120.0)
    rates = [m['workload']['synthetic']['rate'] for m in scaled['models']]
    assert rates == [8.0, 1.0]
    assert {m['workload']['synthetic']['duration'] for m in scaled['models']} == {120.0}
    traced = with_overrides(document=TWO, trace_path='mixed.csv', start=5.0)
    assert traced['workload'] == {'trace': {'path': 'mixed.csv', 'start': 5.0}}
    assert all('workload' not in m for m in traced['models'])
    with pytest.raises(ScenarioError, match='--start: applies to a trace'):
        with_overrides(document=TWO, start=5.0)
    assert TWO['models'][0]['workload']['synthetic']['rate'] == 4  # the input is left alone


def test_each_model_draws_its_own_synthetic_workload() -> None:
    same = two()
    same['models'][1]['workload'] = copy.deepcopy(same['models'][0]['workload'])
    workloads = build_workloads(scenario=loader.from_document(document=same))
    chat, code = workloads.traces['chat'], workloads.traces['code']
    assert len(chat) > 100
    assert len(code) > 100
    assert chat.arrivals[:50].tolist() != code.arrivals[:50].tolist()


def test_a_shared_trace_is_split_by_name_or_model_id(tmp_path: Path) -> None:
    rows = ['time,input_tokens,output_tokens,model']
    for i in range(60):
        model = 'chat' if i % 3 else 'meta-llama/Llama-3.1-70B-Instruct'
        rows.append(f'{i * 0.5},{100 + i},{10 + i},{model}')
    path = tmp_path / 'mixed.csv'
    path.write_text('\n'.join(rows) + '\n')
    document = with_overrides(document=TWO, trace_path=str(path))
    setup = loader.from_document(document=document)
    assert setup.workload_text == 'trace mixed.csv, split by model'
    workloads = build_workloads(scenario=setup)
    assert (len(workloads.traces['chat']), len(workloads.traces['code'])) == (40, 20)
    assert workloads.traces['code'].arrivals[:2].tolist() == [0.0, 1.5]
    # One model's rows of the same file, as its own workload.
    alone = _models({'1': {'workload': {'trace': {'path': str(path), 'model': 'chat'}}}})
    traces = build_workloads(scenario=loader.from_document(document=alone)).traces
    assert len(traces['code']) == 40


def test_a_warm_start_fits_the_inventory_models_in_name_order() -> None:
    setup = loader.from_document(document=two(inventory={'H100': 6, 'L40S': 2}))
    burst = Trace(
        name='burst',
        arrivals=np.linspace(0.0, 59.0, 600),
        input_tokens=np.full(600, 500, dtype=np.int64),
        output_tokens=np.full(600, 100, dtype=np.int64),
    )
    workloads = Workloads(traces={'chat': burst, 'code': burst})
    capacities = {'chat-h100': 1.0, 'chat-l40s': 0.5, 'code-h100': 1.0}
    fleet = warm_start_fleet(scenario=setup, workloads=workloads, capacities=capacities)
    # chat wants 4 + 4 (at its maxima); it may take 2 L40S and 4 H100; code the 2 H100 left: none.
    assert fleet == {'chat-h100': 4, 'chat-l40s': 2, 'code-h100': 0}


def test_one_model_written_as_a_models_list_runs_as_the_one_model_document() -> None:
    plain = with_overrides(
        document=DEFAULT_DOCUMENT, duration=300.0, policies=['default', 'static:1']
    )
    listed = {
        'name': plain['name'],
        'models': [{'name': 'llama', 'variants': plain['variants'], 'workload': plain['workload']}],
        'policies': plain['policies'],
        'seed': plain['seed'],
    }
    one = simulate.run(setup=loader.from_document(document=plain), out=None, progress=False)
    other = simulate.run(setup=loader.from_document(document=listed), out=None, progress=False)
    assert other.model_summaries is None
    for a, b in zip(one.summaries, other.summaries, strict=True):
        assert a == b


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_the_example_runs_with_a_row_per_model_and_the_gpu_lines(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    argv = ['simulate', '--scenario', str(EXAMPLE), '--duration', '600', '--policy', 'default',
            '--policy', 'static:chat-h100=4,chat-l40s=6,code-h100=3', '--no-progress',
            '--requests-csv', 'plain']  # fmt: skip
    code, stdout, stderr = run_cli(capsys, *argv, '--out', str(tmp_path / 'a'))
    assert code == 0, stderr
    assert 'Model' in stdout
    assert stdout.count(' all ') >= 2
    assert 'static:chat-h100=4,chat-l40s=6,code-h100=3: peak GPUs H100 12/12, L40S 4/4; 3 ' in (
        stdout.replace('\n', ' ')
    )
    summary = json.loads((tmp_path / 'a' / 'summary.json').read_text())
    assert [(m['policy'], m['model']) for m in summary['models']] == [
        ('default', 'chat'),
        ('default', 'code'),
        ('static:chat-h100=4,chat-l40s=6,code-h100=3', 'chat'),
        ('static:chat-h100=4,chat-l40s=6,code-h100=3', 'code'),
    ]
    static = summary['gpus'][1]
    assert static['peak'] == {'H100': 12, 'L40S': 4}
    assert static['never_bound'] == 3  # 2 chat-l40s and 1 chat-h100 never got GPUs
    assert set(summary['slos']) == {'chat', 'code'}
    assert (tmp_path / 'a' / 'gpus.png').read_bytes().startswith(b'\x89PNG')
    header = (tmp_path / 'a' / 'requests-default.csv').read_text().splitlines()[0]
    assert header.endswith(',failure,model')
    code, _, stderr = run_cli(capsys, *argv, '--out', str(tmp_path / 'b'))
    assert code == 0, stderr
    again = json.loads((tmp_path / 'b' / 'summary.json').read_text())
    assert again['models'] == summary['models']
    assert again['policies'] == summary['policies']
    for name in ('timeline-default.csv', 'requests-default.csv'):
        assert (tmp_path / 'a' / name).read_bytes() == (tmp_path / 'b' / name).read_bytes()


def test_a_one_model_run_reports_as_it_always_did(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, stdout, stderr = run_cli(
        capsys, 'simulate', '--duration', '300', '--policy', 'static:1', '--no-progress',
        '--out', str(tmp_path),
    )  # fmt: skip
    assert code == 0, stderr
    table_head = next(line for line in stdout.splitlines() if 'Policy' in line)
    assert 'Model' not in table_head
    assert 'GPU' not in stdout.split('Policy')[1].split('report:')[0].replace('GPU  ', '')
    summary = json.loads((tmp_path / 'summary.json').read_text())
    assert not {'models', 'gpus', 'slos', 'notes'} & set(summary)
    assert not {'models', 'inventory'} & set(summary['scenario'])
    assert all('role' not in v for v in summary['scenario']['variants'])
    header = (tmp_path / 'timeline-static_1.csv').read_text().splitlines()[0]
    assert header.endswith(',kv_usage,waiting,running,gateway_queue')
    assert not (tmp_path / 'gpus.png').exists()
