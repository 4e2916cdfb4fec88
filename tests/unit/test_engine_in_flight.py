"""Scale-to-zero never takes a model to zero while requests are queued or running (a safety rule,
docs/decision-core.md).

The request count over the retention period counts completed requests only; these tests hand
`decide()` (and `llmscaler decide --config`) a model with none completed but requests held
somewhere, in each place the core can see them:

| requests held | where | expected |
|---|---|---|
| 3 in the gateway queue | `PoolMetrics.queue_size` | 1 -> 1, never 0 |
| gateway bytes, no size | `PoolMetrics.queue_bytes` | 1 -> 1 |
| 2 waiting on the replica | `ReplicaMetrics.queue_length` | 1 -> 1 |
| 1 running on the replica | `ReplicaMetrics.running_requests` | 1 -> 1 |
| on a stale replica | fresh one idle, stale one busy | 1 -> 1 |
| nothing | all idle, count 0 | 1 -> 0 (the reference) |
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmscaler.cli import main
from llmscaler.config.resolved import Config, CoreSettings, ModelConfig, SaturationConfig
from llmscaler.domain.snapshot import Decision, PoolMetrics, ReplicaMetrics, Snapshot, Variant
from llmscaler.domain.state import EMPTY_STATE
from llmscaler.engine import decide

NOW = 10_000.0
NS = 'ns'
MODEL = 'm'
ZERO_ON = Config(settings=CoreSettings(scale_to_zero=True))
TOKEN_ZERO_ON = Config(
    settings=CoreSettings(scale_to_zero=True),
    default=ModelConfig(saturation=SaturationConfig(analyzer_name='saturation')),
)


def variant(*, current: int = 1, name: str = 'v') -> Variant:
    return Variant(
        name=name,
        namespace=NS,
        model_id=MODEL,
        min_replicas=0,
        max_replicas=4,
        current_replicas=current,
        ready_replicas=current,
    )


def replica(pod: str, *, age: float = 5.0, name: str = 'v', **figures: Any) -> ReplicaMetrics:
    base: dict[str, Any] = {
        'kv_usage': 0.0,
        'queue_length': 0.0,
        'num_gpu_blocks': 1000,
        'block_size': 16,
    }
    return ReplicaMetrics(
        pod=pod, variant=name, namespace=NS, observed_at=NOW - age, **{**base, **figures}
    )


def pool(**figures: float) -> PoolMetrics:
    base = {'queue_size': 0.0, 'queue_bytes': 0.0, 'request_count': 0.0}
    return PoolMetrics(model_id=MODEL, namespace=NS, observed_at=NOW - 5, **{**base, **figures})


def one(snapshot: Snapshot, config: Config = ZERO_ON) -> Decision:
    (decision,) = decide(snapshot=snapshot, config=config, state=EMPTY_STATE, now=NOW).decisions
    return decision


@pytest.mark.parametrize('config', [ZERO_ON, TOKEN_ZERO_ON], ids=['percentage', 'token'])
def test_an_idle_model_with_no_completed_request_goes_to_zero(config: Config) -> None:
    # The reference case: nothing completed, nothing held.
    snapshot = Snapshot(variants=(variant(),), replicas=(replica('p'),), pools=(pool(),))
    decision = one(snapshot, config)
    assert (decision.current, decision.target) == (1, 0)
    assert decision.reason == 'scale_to_zero (enforced)'


@pytest.mark.parametrize('config', [ZERO_ON, TOKEN_ZERO_ON], ids=['percentage', 'token'])
@pytest.mark.parametrize(
    ('replica_figures', 'pool_figures'),
    [
        ({}, {'queue_size': 3.0}),
        ({}, {'queue_bytes': 4096.0}),
        ({'queue_length': 2.0}, {}),
        ({'running_requests': 1.0}, {}),
        ({'queue_length': 0.25}, {}),
    ],
    ids=['gateway-queue', 'gateway-bytes', 'waiting', 'running', 'fraction-waiting'],
)
def test_requests_held_keep_a_model_with_no_completed_request_running(
    config: Config, replica_figures: dict[str, Any], pool_figures: dict[str, float]
) -> None:
    snapshot = Snapshot(
        variants=(variant(),),
        replicas=(replica('p', **replica_figures),),
        pools=(pool(**pool_figures),),
    )
    decision = one(snapshot, config)
    assert decision.target == 1
    assert decision.metrics_available


def test_requests_on_a_stale_replica_keep_the_model_too() -> None:
    # The ready replica reports fresh metrics, idle; another (a pod that has gone, its series
    # still in a window) reported two waiting requests two and a half minutes ago.
    snapshot = Snapshot(
        variants=(variant(),),
        replicas=(replica('a'), replica('c', age=150.0, queue_length=2.0)),
        pools=(pool(),),
    )
    decision = one(snapshot)
    assert (decision.current, decision.target) == (1, 1)


def test_llmscaler_decide_keeps_a_model_with_a_gateway_queue(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    snapshot = {
        'now': NOW,
        'variants': [
            {
                'name': 'v',
                'namespace': NS,
                'model_id': MODEL,
                'min_replicas': 0,
                'max_replicas': 4,
                'current_replicas': 1,
                'ready_replicas': 1,
            }
        ],
        'replicas': [
            {
                'pod': 'p',
                'variant': 'v',
                'namespace': NS,
                'observed_at': NOW - 5,
                'kv_usage': 0.0,
                'queue_length': 0.0,
            }
        ],
        'pools': [
            {
                'model_id': MODEL,
                'namespace': NS,
                'observed_at': NOW - 5,
                'queue_size': 3.0,
                'request_count': 0.0,
            }
        ],
    }
    (tmp_path / 'snapshot.json').write_text(json.dumps(snapshot))
    (tmp_path / 'config.yaml').write_text('settings: {WVA_SCALE_TO_ZERO: "true"}\n')
    code = main(
        [
            'decide',
            '--snapshot',
            str(tmp_path / 'snapshot.json'),
            '--config',
            str(tmp_path / 'config.yaml'),
        ]
    )
    assert code == 0
    (decision,) = json.loads(capsys.readouterr().out)['decisions']
    assert (decision['current'], decision['target']) == (1, 1)


@settings(max_examples=200, deadline=None)
@given(
    currents=st.lists(st.integers(min_value=0, max_value=3), min_size=1, max_size=3),
    waiting=st.lists(st.sampled_from([0.0, 0.0, 1.0, 4.0]), min_size=3, max_size=3),
    running=st.lists(st.sampled_from([None, 0.0, 0.0, 2.0]), min_size=3, max_size=3),
    gateway=st.sampled_from([0.0, 0.0, 1.0, 6.0]),
    config=st.sampled_from([ZERO_ON, TOKEN_ZERO_ON]),
)
def test_a_running_model_never_goes_to_zero_while_requests_are_held(
    currents: list[int],
    waiting: list[float],
    running: list[float | None],
    gateway: float,
    config: Config,
) -> None:
    variants = tuple(variant(current=c, name=f'v{i}') for i, c in enumerate(currents))
    replicas = tuple(
        replica(f'v{i}-{k}', name=f'v{i}', queue_length=waiting[k], running_requests=running[k])
        for i, c in enumerate(currents)
        for k in range(c)
    )
    snapshot = Snapshot(variants=variants, replicas=replicas, pools=(pool(queue_size=gateway),))
    decisions = decide(snapshot=snapshot, config=config, state=EMPTY_STATE, now=NOW).decisions
    held = gateway + sum(r.queue_length or 0.0 for r in replicas)
    held += sum(r.running_requests or 0.0 for r in replicas)
    if sum(currents) > 0 and held > 0:
        assert sum(d.target for d in decisions) >= 1
