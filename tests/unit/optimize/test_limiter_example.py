"""`llmscaler decide` on the limiter example: budgets bind, a full type spills, it is explained."""

from __future__ import annotations

import json

import pytest

from llmscaler.cli import main
from tests.support.paths import ROOT

SNAPSHOT = ROOT / 'examples' / 'snapshot-limiter.json'
CONFIG = ROOT / 'examples' / 'config-limiter.yaml'


def test_the_limiter_example_stays_within_the_gpus_and_says_who_was_limited(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(['decide', '--snapshot', str(SNAPSHOT), '--config', str(CONFIG)])
    out, err = capsys.readouterr()
    assert (code, err) == (0, '')
    decisions = {d['variant']: d for d in json.loads(out)['decisions']}
    snapshot = json.loads(SNAPSHOT.read_text())
    # The GPUs each type had free: limit - other pods - the variants' current replicas.
    free = {}
    for limit in snapshot['gpu_limits']:
        held = sum(
            v['current_replicas'] * v['gpus_per_replica']
            for v in snapshot['variants']
            if v['accelerator'] == limit['accelerator']
        )
        free[limit['accelerator']] = limit['limit'] - limit['used'] - held
    added = dict.fromkeys(free, 0)
    for variant in snapshot['variants']:
        decision = decisions[variant['name']]
        added[variant['accelerator']] += (decision['target'] - decision['current']) * variant[
            'gpus_per_replica'
        ]
    assert all(added[acc] <= free[acc] for acc in free)
    # chat (priority 2) takes its two L40S replicas; code gets the last L40S and, the L40S
    # being full, one H100 in place of the other.
    assert (decisions['chat-l40s']['target'], decisions['chat-l40s']['limited']) == (4, 0)
    assert (decisions['code-l40s']['target'], decisions['code-l40s']['limited']) == (3, 1)
    assert decisions['code-l40s']['reason'].endswith('; limited by GPU budget: -1')
    assert decisions['code-h100']['target'] == 2
    assert 'in place of replicas a full GPU type holds back' in decisions['code-h100']['reason']
    assert decisions['code-h100']['limiter'].startswith('capacity asked for met on other')
    assert 'NVIDIA-L40S 0 GPUs free' in decisions['chat-l40s']['limiter']
