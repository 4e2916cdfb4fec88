"""Kaito's LLMAutoScaler in the simulator: `kaito-realtime` and `kaito-cron` (sim.policies.kaito).

| case | expectation |
|---|---|
| defaults, queue 20 on one pod | up one step after 2 periods (30 s), then the 600 s cooldown |
| defaults, idle | down one step after 20 periods (300 s, the cooldown long over) |
| a pending pod | no scale-down while it has no value; bounds [max(1, min), max] |
| inline cron in Europe/Berlin | fires at 07:00 CET (06:00 UTC) on the Monday of SIM_EPOCH |
| an LLMAutoScaler file | scales the variant its scaleTargetRef names, the others untouched |
| bad names and files | one-line ValueError |
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmscaler.cli import main
from llmscaler.domain.snapshot import Variant
from llmscaler.sim.policies.kaito import KaitoPolicy, is_kaito, parse_kaito
from tests.support.engine_fixtures import variant
from tests.support.sim_fixtures import replica, running, view


def fleet(count: int, *, pending: int = 0) -> list[Variant]:
    """`count` replicas of which `pending` are still starting."""
    return [
        variant(
            'h100', current_replicas=count, ready_replicas=count - pending, pending_replicas=pending
        )
    ]


def test_realtime_defaults_step_up_after_two_periods_then_cool_down() -> None:
    policy = parse_kaito(text='kaito-realtime', variants=['h100'])
    assert policy.name == 'kaito-realtime'
    busy = [replica('h100', 0, queue=20.0)]
    # t = 0: the first reading (the up window is not full); t = 30: steps at 15 and 30 s.
    assert policy.targets(view=view(fleet(1), busy, now=0.0)) == {'h100': 1}
    assert policy.targets(view=view(fleet(1), busy, now=30.0)) == {'h100': 2}
    # The 600 s cooldown from t = 15 holds it at 2 while the queue stays long (one pod reads 20,
    # the new one counts 0 while pending: 10 is not above High 10, so make both busy).
    both = [replica('h100', 0, queue=20.0), replica('h100', 1, queue=20.0)]
    for t in range(60, 615, 30):
        assert policy.targets(view=view(fleet(2), both, now=float(t))) == {'h100': 2}, t
    assert policy.targets(view=view(fleet(2), both, now=630.0)) == {'h100': 3}


def test_realtime_defaults_step_down_after_twenty_periods() -> None:
    policy = KaitoPolicy(name='kaito-realtime')
    idle = [replica('h100', i) for i in range(3)]
    results = [
        policy.targets(view=view(fleet(3), idle, now=float(t)))['h100'] for t in range(0, 301, 30)
    ]
    # Readings at 0, 15, ..., 285 s are 20 consecutive periods below Low 5: down at 285 s.
    assert results == [3] * 10 + [2]


def test_a_pending_pod_forbids_the_scale_down() -> None:
    policy = KaitoPolicy(name='kaito-realtime')
    idle = [replica('h100', i) for i in range(2)]
    for t in range(0, 601, 30):
        assert policy.targets(view=view(fleet(3, pending=1), idle, now=float(t))) == {'h100': 3}


def test_inline_cron_in_berlin() -> None:
    policy = parse_kaito(
        text='kaito-cron:0 7 * * 1-5=4@Europe/Berlin;0 19 * * *=1@Europe/Berlin',
        variants=['h100'],
    )
    counts = {}
    current = 1
    for t in range(0, 24 * 3600, 30):
        got = policy.targets(view=view(fleet(current), now=float(t)))['h100']
        if got != current:
            counts[t] = got
            current = got
    # Monday 5 January 2026 is winter time (UTC+1): 07:00 is 06:00 UTC, 19:00 is 18:00 UTC.
    assert counts == {6 * 3600: 4, 18 * 3600: 1}


def test_a_file_scales_the_variant_it_names(tmp_path: Path) -> None:
    path = tmp_path / 'llmas.yaml'
    path.write_text(
        """
apiVersion: kaito.sh/v1alpha1
kind: LLMAutoScaler
metadata: {name: a}
spec:
  scaleTargetRef: {kind: Deployment, name: l40s}
  maxReplicas: 4
  scaler:
    realtime:
      metrics:
        - threshold: {high: 3, low: 1}
      scaleUpRule: {cooldownSeconds: 0, stabilizationWindowSeconds: 0}
""",
        encoding='utf-8',
    )
    policy = parse_kaito(text=f'kaito-realtime:{path}', variants=['h100', 'l40s'])
    variants = [running('h100', 1), running('l40s', 1)]
    busy = [replica('h100', 0, queue=50.0), replica('l40s', 0, queue=5.0)]
    assert policy.targets(view=view(variants, busy, now=0.0)) == {'l40s': 2}


@pytest.mark.parametrize(
    ('text', 'message'),
    [
        ('kaito-cron:', 'expected kaito-realtime'),
        ('kaito-cron:0 7 * * *', 'is not SCHEDULE=REPLICAS'),
        ('kaito-cron:0 25 * * *=3', 'not a valid cron expression'),
        ('kaito-cron:0 7 * * *=3@Mars/Base', 'not an IANA time zone'),
        ('kaito-realtime:/no/such/file.yaml', 'no such file'),
    ],
)
def test_bad_names_are_refused(text: str, message: str) -> None:
    assert is_kaito(text)
    with pytest.raises(ValueError, match=message):
        parse_kaito(text=text, variants=['h100'])


def test_bad_files_are_refused(tmp_path: Path) -> None:
    path = tmp_path / 'bad.yaml'
    path.write_text(
        'apiVersion: kaito.sh/v1alpha1\nkind: LLMAutoScaler\nmetadata: {name: a}\n'
        'spec: {scaleTargetRef: {kind: Deployment, name: other}, maxReplicas: 2, '
        'scaler: {cron: {policies: [{name: p, schedule: "@daily", targetReplicas: 1}]}}}\n',
        encoding='utf-8',
    )
    with pytest.raises(ValueError, match="scaleTargetRef 'other' is no variant"):
        parse_kaito(text=f'kaito-cron:{path}', variants=['h100'])
    path.write_text(
        path.read_text()
        .replace('name: other', 'name: h100')
        .replace('maxReplicas: 2', 'maxReplicas: 0')
    )
    with pytest.raises(ValueError, match='maxReplicas'):
        parse_kaito(text=f'kaito-cron:{path}', variants=['h100'])
    assert not is_kaito('keda-queue')


def test_simulate_runs_both_peers(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = tmp_path / 'report'
    code = main(
        [
            'simulate', '--duration', '600', '--policy', 'kaito-realtime',
            '--policy', 'kaito-cron:5 0 * * *=3', '--out', str(out), '--no-progress',
        ]
    )  # fmt: skip
    _, err = capsys.readouterr()
    assert code == 0, err
    summary = json.loads((out / 'summary.json').read_text())
    assert [p['policy'] for p in summary['policies']] == [
        'kaito-realtime',
        'kaito-cron:5 0 * * *=3',
    ]
    code = main(
        ['simulate', '--policy', 'kaito-cron:5 0 * * *', '--out', str(out), '--no-progress']
    )
    _, err = capsys.readouterr()
    assert code == 2
    assert 'is not SCHEDULE=REPLICAS' in err
    assert 'Traceback' not in err
