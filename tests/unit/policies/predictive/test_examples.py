"""`llmscaler decide` on the predictive examples: examples/snapshot-predictive.json with
examples/config-predictive.yaml.

The snapshot: model meta/llama-3.1-8b on 2 H100 ($3.90/h) and 1 L40S ($1.90/h), 42 req/s
arriving (19.4 + 18.6 + 4 per replica, 1000/250 tokens), the H100s near their ITL target
(56 ms, the 80 ms target × latencyMargin 0.7), 20 requests waiting at the gateway. The load the
next replicas will see exceeds what the fleet serves within the targets, so the H100 variant
scales up, and the decision says why: the forecast, the need and the mix bought.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from llmscaler.cli import main
from llmscaler.config.file import load_config_file
from llmscaler.config.resolved import PredictiveConfig
from tests.support.paths import ROOT

SNAPSHOT = ROOT / 'examples' / 'snapshot-predictive.json'
CONFIG = ROOT / 'examples' / 'config-predictive.yaml'
MODEL, NAMESPACE = 'meta/llama-3.1-8b', 'llm-inference'


def _decide(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, dict[str, Any]]:
    code = main(['decide', *args])
    out, err = capsys.readouterr()
    assert (code, err) == (0, '')
    return {d['variant']: d for d in json.loads(out)['decisions']}


def test_the_config_example_loads_clean_and_selects_the_predictive_analyzer() -> None:
    config, errors = load_config_file(path=str(CONFIG), env={})
    assert errors == ()
    predictive = config.model(model_id=MODEL, namespace=NAMESPACE).predictive
    assert isinstance(predictive, PredictiveConfig)
    assert (predictive.slo.target_ttft, predictive.slo.target_itl) == (1000.0, 80.0)
    assert [acc for acc, _ in predictive.slo.perf_parms or ()] == ['H100-80GB', 'L40S']
    assert (predictive.startup_seconds, predictive.scale_down_delay) == (90.0, 180.0)
    # Another model gets the default entry's settings and no targets of its own.
    other = config.model(model_id='other', namespace=NAMESPACE).predictive
    assert other is not None
    assert other.slo.target_ttft is None


def test_the_example_scales_up_in_one_step_and_explains_itself(
    capsys: pytest.CaptureFixture[str],
) -> None:
    decisions = _decide(capsys, '--snapshot', str(SNAPSHOT), '--config', str(CONFIG))
    assert sorted(decisions) == ['llama-8b-h100', 'llama-8b-l40s']
    h100, l40s = decisions['llama-8b-h100'], decisions['llama-8b-l40s']
    for decision in (h100, l40s):
        assert decision['analyzer'] == 'predictive'
        assert (decision['metrics_available'], decision['metrics_reason']) == (
            True,
            'MetricsFound',
        )
        figures = decision['figures']
        reason = decision['reason']
        # The forecast (its upper quantile over start-up + two cycles) and what it needs...
        assert figures['forecast_horizon_s'] == 90 + 2 * 30
        assert reason.startswith(f'forecast {figures["forecast_rate"]:.3g} req/s')
        assert f'over {figures["forecast_horizon_s"]:.0f} s' in reason
        assert f'need {figures["need_rate"]:.3g} req/s' in reason
        # ... above the 42 req/s arriving now, with the 20 waiting at the gateway on top.
        assert figures['need_rate'] > figures['forecast_rate'] > figures['arrival_rate'] == 42.0
        # The mix priced, with its cost per hour and capacity.
        assert '; mix llama-8b-h100=' in reason
        assert ', llama-8b-l40s=' in reason
        assert f'costs {figures["mix_cost"]:.4g} for {figures["mix_capacity"]:.3g} req/s' in reason
        assert figures['mix_capacity'] >= figures['need_rate']
        # What the fleet serves within the targets today does not cover the need.
        assert figures['fleet_capacity'] < figures['need_rate']
        assert (figures['slo_ttft_ms'], figures['slo_itl_ms']) == (700.0, 56.0)
    # The H100 variant scales up now, in one step; the L40S replica that serves stays.
    assert (h100['current'], l40s['current']) == (2, 1)
    assert h100['target'] > h100['current']
    assert h100['action'] == 'scale_up'
    assert l40s['target'] >= l40s['current']
    # Each variant's capacity at the SLO is in its figures: an H100 serves far more than an L40S.
    assert h100['figures']['capacity_alone'] > 4 * l40s['figures']['capacity_alone'] > 0


@pytest.mark.parametrize('pod', ['llama-8b-h100-7c9f-abcde', 'llama-8b-l40s-5b6d-pqrst'])
def test_a_busy_replica_without_its_itl_holds(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, pod: str
) -> None:
    snapshot = json.loads(SNAPSHOT.read_text())
    (replica,) = [r for r in snapshot['replicas'] if r['pod'] == pod]
    assert replica['arrival_rate'] > 0  # busy
    del replica['avg_itl']
    copy = tmp_path / 'snapshot.json'
    copy.write_text(json.dumps(snapshot))
    decisions = _decide(capsys, '--snapshot', str(copy), '--config', str(CONFIG))
    for decision in decisions.values():
        assert decision['analyzer'] == 'predictive'
        assert (decision['target'], decision['action']) == (decision['current'], 'no_change')
        assert 'hold' in decision['reason']
        assert 'avg_itl' in decision['reason']


def test_a_fleet_short_of_the_need_scales_up(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The example at 70 % of its arrivals and with no queue: about 30 req/s needed, which the
    fleet (2 H100 + 1 L40S, coupled by the router) serves about 24 of within the targets, and
    2 H100 alone (the cheapest mix from scratch) would serve. The fleet already holds that mix,
    and its surplus L40S drags the H100s down behind the router: the fleet becomes the mix."""
    snapshot = json.loads(SNAPSHOT.read_text())
    for replica in snapshot['replicas']:
        replica['arrival_rate'] = round(replica['arrival_rate'] * 0.7, 2)
        replica['queue_length'] = 0
    (pool,) = snapshot['pools']
    pool.update(
        arrival_rate=round(sum(r['arrival_rate'] for r in snapshot['replicas']), 2),
        queue_size=0,
        queue_bytes=0,
    )
    copy = tmp_path / 'snapshot.json'
    copy.write_text(json.dumps(snapshot))
    decisions = _decide(capsys, '--snapshot', str(copy), '--config', str(CONFIG))
    figures = decisions['llama-8b-h100']['figures']
    assert figures['fleet_capacity'] < figures['need_rate'] <= figures['mix_capacity']
    # The mix chosen covers the need, the targets hold it, and something changes.
    targets = {name: d['target'] for name, d in decisions.items()}
    assert targets != {name: d['current'] for name, d in decisions.items()}
    reason = decisions['llama-8b-h100']['reason']
    mix = reason.split('; mix ', 1)[1].split(' costs ', 1)[0]
    counts = {name: int(count) for name, count in (part.split('=') for part in mix.split(', '))}
    # Every replica of the mix is in the targets (a switch to it, or it added to the fleet).
    assert all(targets[name] >= count for name, count in counts.items())
