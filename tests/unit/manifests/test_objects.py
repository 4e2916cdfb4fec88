"""`llmscaler manifests` output validates and says what the common queue-based KEDA setup says.

ScaledObjects are checked against a JSON schema of KEDA's CRD fields (tests/unit/data, sources
cited there), HPAs with kubernetes-validate (Kubernetes 1.34, strict). The behaviour written for
the record is the one the simulator's `keda-queue` runs (read back into `llmscaler.hpa`), and
the tolerance written for metrics actuation lets the exact HPA follow a ±1 step at 10 replicas.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import pytest
import yaml

from llmscaler.hpa.behavior import (
    DEFAULT_SCALE_DOWN,
    DEFAULT_SCALE_UP,
    Behavior,
    ScalingPolicy,
    ScalingRules,
)
from llmscaler.hpa.pods import Pod
from llmscaler.hpa.reconcile import HpaSpec, HpaState, MetricSpec, Scale, reconcile
from llmscaler.manifests import command
from tests.support.paths import DATA, ROOT

SAMPLES = sorted((ROOT / 'deploy' / 'samples').glob('llama-*.yaml'))
SCHEMA = json.loads((DATA / 'keda-scaledobject.schema.json').read_text())
BIN = Path(sys.executable).parent


def generate(*argv: str) -> list[dict[str, Any]]:
    args = command._parser().parse_args(list(argv))
    text = command.render(command.build(args))
    return [d for d in yaml.safe_load_all(text) if d is not None]


def va_args() -> list[str]:
    return [arg for path in SAMPLES for arg in ('--va', str(path))]


@pytest.mark.parametrize(('profile', 'floor'), [('prod', 2), ('dev', 1), ('cost', 0)])
def test_queue_scaled_objects_follow_the_record(profile: str, floor: int) -> None:
    docs = generate(*va_args(), '--profile', profile)
    assert len(docs) == len(SAMPLES) >= 2
    for doc in docs:
        jsonschema.validate(doc, SCHEMA)
        spec = doc['spec']
        assert doc['metadata']['annotations'] == {'autoscaling.keda.sh/paused': 'true'}
        assert spec['minReplicaCount'] == floor
        queue, kv = spec['triggers']
        assert queue['metricType'] == kv['metricType'] == 'AverageValue'
        assert queue['metadata']['query'].startswith('sum(vllm:num_requests_waiting{')
        assert kv['metadata']['query'].startswith('sum(vllm:kv_cache_usage_perc{')
        assert (queue['metadata']['threshold'], kv['metadata']['threshold']) == ('5', '0.8')
        assert ('initialCooldownPeriod' in spec) == (floor == 0)


def test_cost_profile_spells_out_the_caveats() -> None:
    args = command._parser().parse_args([*va_args(), '--profile', 'cost'])
    text = command.render(command.build(args))
    for caveat in ('HTTP add-on', '503', 'node pool', 'cold', 'keda#7770'):
        assert caveat in text


def rules_of(wire: dict[str, Any]) -> ScalingRules:
    return ScalingRules(
        policies=tuple(
            ScalingPolicy(p['type'], p['value'], p['periodSeconds']) for p in wire['policies']
        ),
        select_policy=wire['selectPolicy'],
        stabilization_window_seconds=wire['stabilizationWindowSeconds'],
    )


def test_record_behaviour_is_what_the_simulator_runs() -> None:
    (doc, *_) = generate(*va_args())
    behavior = doc['spec']['advanced']['horizontalPodAutoscalerConfig']['behavior']
    assert rules_of(behavior['scaleUp']) == DEFAULT_SCALE_UP
    down = rules_of(behavior['scaleDown'])
    assert down.policies == DEFAULT_SCALE_DOWN.policies
    assert down.stabilization_window_seconds == 300


def test_unpaused_and_flags() -> None:
    (doc,) = generate(
        '--target', 'StatefulSet/big', '--namespace', 'serving', '--max-replicas', '6',
        '--profile', 'dev', '--unpaused', '--queue-per-replica', '2.5', '--kv-target', '0.75',
    )  # fmt: skip
    jsonschema.validate(doc, SCHEMA)
    assert 'annotations' not in doc['metadata']
    assert doc['spec']['scaleTargetRef'] == {
        'apiVersion': 'apps/v1',
        'kind': 'StatefulSet',
        'name': 'big',
    }
    assert doc['spec']['maxReplicaCount'] == 6
    queue, kv = doc['spec']['triggers']
    assert (queue['metadata']['threshold'], kv['metadata']['threshold']) == ('2.5', '0.75')
    assert 'namespace="serving",pod=~"big-.*"' in queue['metadata']['query']


def test_metrics_hpas_validate_with_kubernetes_validate(tmp_path: Path) -> None:
    docs = generate(*va_args(), '--actuation', 'metrics')
    docs += generate('--target', 'LeaderWorkerSet/lws', '--actuation', 'metrics')
    files = []
    for index, doc in enumerate(docs):
        assert doc['kind'] == 'HorizontalPodAutoscaler'
        files.append(tmp_path / f'{index}.yaml')
        files[-1].write_text(yaml.safe_dump(doc), encoding='utf-8')
    run = subprocess.run(
        [str(BIN / 'kubernetes-validate'), '-k', '1.34.0', '--strict', *map(str, files)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.count(' passed for ') == len(files), run.stdout


def test_metrics_scaled_object_validates() -> None:
    docs = generate(*va_args(), '--actuation', 'metrics', '--via', 'keda')
    for doc in docs:
        jsonschema.validate(doc, SCHEMA)
        (trigger,) = doc['spec']['triggers']
        assert trigger['metricType'] == 'AverageValue'
        assert trigger['metadata']['threshold'] == '1'
        assert trigger['metadata']['query'].startswith('max(wva_desired_replicas{')
    assert {d['spec']['minReplicaCount'] for d in docs} == {0, 1}  # the samples' VA bounds


def test_schema_refuses_a_misspelt_field() -> None:
    (doc,) = generate('--target', 'Deployment/x')
    doc['spec']['minReplicas'] = 1
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, SCHEMA)


def follow(spec_doc: dict[str, Any], *, current: int, desired: int) -> int:
    """Run the exact HPA on an HPA manifest whose gauge says `desired`."""
    spec = spec_doc['spec']
    wire = spec.get('behavior')
    behavior = None
    if wire is not None:
        up, down = wire['scaleUp'], wire['scaleDown']
        behavior = Behavior(
            scale_up=ScalingRules(
                stabilization_window_seconds=up['stabilizationWindowSeconds'],
                tolerance=float(up['tolerance']),
            ),
            scale_down=ScalingRules(
                stabilization_window_seconds=down['stabilizationWindowSeconds'],
                tolerance=float(down['tolerance']),
            ),
        )
    hpa = HpaSpec(
        max_replicas=spec['maxReplicas'],
        min_replicas=spec['minReplicas'],
        metrics=(MetricSpec('External', 'wva_desired_replicas', 'AverageValue', 1000),),
        behavior=behavior,
    )
    pods = tuple(Pod(name=f'p{i}') for i in range(current))
    return reconcile(
        spec=hpa,
        scale=Scale(spec_replicas=current, status_replicas=current, pods=pods),
        values=[[1000 * desired]],
        state=HpaState(),
        now=0.0,
    ).desired_replicas


def test_metrics_tolerance_does_not_swallow_one_replica_steps() -> None:
    (doc,) = generate('--target', 'Deployment/x', '--max-replicas', '20', '--actuation', 'metrics')
    assert follow(doc, current=10, desired=11) == 11
    # The same HPA without the per-HPA tolerance (the 10 % default) would stay at 10.
    del doc['spec']['behavior']
    assert follow(doc, current=10, desired=11) == 10
