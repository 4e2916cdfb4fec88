"""The simulator's `slo-queueing` policy: the core on the SLO path with the scenario's SLO."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmscaler.cli import main
from llmscaler.policies.protocol import Intent
from llmscaler.sim.scenario.setup import FIXED_POLICIES, check_policy_name, core_config


def test_the_scenario_slo_becomes_each_models_explicit_targets() -> None:
    config = core_config(name='slo-queueing', intents={'llama': Intent(ttft=1.3, itl=0.071)})
    queueing = config.model(model_id='llama', namespace='sim').queueing
    assert queueing is not None
    assert queueing.target_ttft == pytest.approx(1300.0)
    assert queueing.target_itl == pytest.approx(71.0)
    other = config.model(model_id='other', namespace='sim').queueing
    assert other is not None
    assert (other.target_ttft, other.target_itl) == (None, None)


def test_it_is_a_policy_name() -> None:
    assert 'slo-queueing' in FIXED_POLICIES
    check_policy_name(name='slo-queueing', variants=['h100'], where='policies')


def test_a_load_step_on_the_simulator_adds_replicas(tmp_path: Path) -> None:
    # 5 req/s for 5 minutes, then 60 req/s: one H100 cannot hold the second part.
    rows = [f'{i * 0.2:.3f},1000,200' for i in range(1500)]
    rows += [f'{300 + i / 60:.4f},1000,200' for i in range(60 * 300)]
    trace = tmp_path / 'step.csv'
    trace.write_text('timestamp,input_length,output_length\n' + '\n'.join(rows) + '\n')
    out = tmp_path / 'out'
    code = main(
        [
            'simulate', '--trace', str(trace), '--policy', 'slo-queueing',
            '--initial', 'h100=1,l40s=0', '--requests-csv', 'none', '--out', str(out),
            '--no-progress',
        ]
    )  # fmt: skip
    assert code == 0
    summary = json.loads((out / 'summary.json').read_text())
    (row,) = summary['policies']
    assert row['policy'] == 'slo-queueing'
    assert row['scale_events'] > 0
    assert row['gpu_hours'] > 600 / 3600 * 1.5  # more than one replica for a good while
