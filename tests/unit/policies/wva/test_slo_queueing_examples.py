"""`llmscaler decide` on the SLO examples: each path runs from the shipped files.

examples/snapshot-slo.json with config-slo.yaml takes the queueing-model path, with
config-slo-hybrid.yaml WVA v0.4.2's hybrid arbitration; a load step in the same snapshot adds
replicas (sized from needed vs current), and the tuner's records survive `--state-out`.
(examples/snapshot-limiter.json is run by tests/unit/optimize/test_limiter_example.py.)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from llmscaler.cli import main
from tests.support.paths import ROOT

SNAPSHOT = ROOT / 'examples' / 'snapshot-slo.json'
SLO = ROOT / 'examples' / 'config-slo.yaml'
HYBRID = ROOT / 'examples' / 'config-slo-hybrid.yaml'


def _decide(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    code = main(['decide', *args])
    out, err = capsys.readouterr()
    assert (code, err) == (0, '')
    result: dict[str, Any] = json.loads(out)
    return result


def _by_variant(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {d['variant']: d for d in result['decisions']}


@pytest.mark.parametrize(('config', 'analyzer'), [(SLO, 'queueing-model'), (HYBRID, 'hybrid')])
def test_each_slo_example_takes_its_path_with_explicit_targets(
    capsys: pytest.CaptureFixture[str], config: Path, analyzer: str
) -> None:
    decisions = _by_variant(_decide(capsys, '--snapshot', str(SNAPSHOT), '--config', str(config)))
    h100 = decisions['llama-8b-h100']
    assert h100['analyzer'] == analyzer
    assert 'slo targets explicit: TTFT 1300 ms, ITL 71 ms' in h100['reason']
    assert (h100['figures']['slo_ttft_ms'], h100['figures']['slo_itl_ms']) == (1300.0, 71.0)
    assert h100['figures']['max_rate_per_replica'] > 0
    assert h100['metrics_available'] is True


def test_a_load_step_in_the_example_adds_replicas(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    before = _by_variant(_decide(capsys, '--snapshot', str(SNAPSHOT), '--config', str(SLO)))
    snapshot = json.loads(SNAPSHOT.read_text())
    for pool in snapshot['pools']:
        pool['arrival_rate'] *= 4
    stepped = tmp_path / 'stepped.json'
    stepped.write_text(json.dumps(snapshot))
    after = _by_variant(_decide(capsys, '--snapshot', str(stepped), '--config', str(SLO)))
    total = {
        name: sum(d['target'] for d in decisions.values())
        for name, decisions in (('before', before), ('after', after))
    }
    rate = after['llama-8b-h100']['figures']['max_rate_per_replica']
    # Four times the load needs at least ⌈4 × 27.5 / rate⌉ replicas in all (within max).
    assert total['after'] > total['before']
    assert total['after'] >= min(
        sum(v['max_replicas'] for v in snapshot['variants']), -(-4 * 27.5 // rate)
    )


def test_the_tuner_state_of_the_example_is_kept_between_runs(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    state = tmp_path / 'state.json'
    first = _decide(
        capsys, '--snapshot', str(SNAPSHOT), '--config', str(SLO), '--state-out', str(state)
    )
    kept = json.loads(state.read_text())
    assert kept['kalman'], 'the tuner records are written with the state'
    again = tmp_path / 'again.json'
    second = _decide(
        capsys,
        '--snapshot',
        str(SNAPSHOT),
        '--config',
        str(SLO),
        '--state',
        str(state),
        '--state-out',
        str(again),
    )
    learnt = [
        {k: v for k, v in _by_variant(r)['llama-8b-h100']['figures'].items() if k[:5] == 'perf_'}
        for r in (first, second)
    ]
    # The second run starts from the first run's record: the same parameters (the guess's
    # TTFT is far from the observed one, and the innovation gate refuses the step), one more
    # rejection in a row in the record it keeps; a fresh start would count one.
    assert (
        learnt[0].keys()
        == learnt[1].keys()
        == {f'perf_{p}' for p in ('alpha', 'beta', 'gamma')}  # the three-parameter default
    )
    records = [
        dict(json.loads(f.read_text())['kalman'])['llm-inference/llama-8b-h100']
        for f in (state, again)
    ]
    assert (
        records[1]['x']
        == records[0]['x']
        == [learnt[1][f'perf_{p}'] for p in ('alpha', 'beta', 'gamma')]
    )
    assert records[1]['rejected'] == records[0]['rejected'] + 1
