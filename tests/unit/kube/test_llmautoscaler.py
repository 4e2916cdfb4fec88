"""The LLMAutoScaler models against the CRD YAML they mirror (Kaito's proposal, kaito-project/kaito,
docs/proposals/20250602-auto-scaler-for-inference-workloads.md), and kubectl's view of it.

As for the VariantAutoscaling (test_kube_crd.py): every node of the CRD's schema under spec and
status is compared with the same node of the models' JSON schema, so a field added, renamed or
re-defaulted on one side only fails here. A nested object the CRD defaults to `{}` (so that its
own fields' defaults apply) is a `default_factory` in the model: both mean "absent is all
defaults", which `test_absent_objects_take_every_default` checks on parsed objects.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from typing import Any

import pytest
import yaml

from llmscaler.devcluster.fakeapi.server import FakeAPI
from llmscaler.kube.llmautoscaler import (
    LLMAutoScaler,
    core_spec,
    parse_llmautoscaler,
)
from llmscaler.kube.resource_model import InvalidObject
from llmscaler.policies.kaito.realtime import ScalerRule
from tests.support.crd_compare import crd_schema, differences, drift, load_crd, only_version
from tests.support.paths import ROOT
from tests.support.prerequisites import need_program

CRD_PATH = ROOT / 'deploy' / 'base' / 'crds' / 'kaito.sh_llmautoscalers.yaml'

# The proposal's example policies ("Cron Scaler"), on a Kaito InferenceSet, with one metric.
SEED_EXAMPLE = """
apiVersion: kaito.sh/v1alpha1
kind: LLMAutoScaler
metadata:
  name: phi-4
  namespace: kaito
spec:
  scaleTargetRef:
    apiVersion: kaito.sh/v1beta1
    kind: InferenceSet
    name: phi-4
  maxReplicas: 6
  scaler:
    realtime:
      metrics:
        - threshold:
            high: 10
            low: 2
    cron:
      policies:
        - name: scale-up
          schedule: "0 8 * * *"
          targetReplicas: 5
          timeZone: America/New_York
        - name: scale-down
          schedule: "1 0 * * *"
          targetReplicas: 1
          timeZone: America/New_York
"""


def model_schema() -> dict[str, Any]:
    return LLMAutoScaler.model_json_schema(by_alias=True, mode='validation')


def example() -> dict[str, Any]:
    obj = yaml.safe_load(SEED_EXAMPLE)
    assert isinstance(obj, dict)
    return obj


def test_crd_names_group_and_version() -> None:
    crd = load_crd(CRD_PATH)
    assert crd['metadata']['name'] == 'llmautoscalers.kaito.sh'
    assert crd['spec']['group'] == 'kaito.sh'
    assert crd['spec']['scope'] == 'Namespaced'
    names = crd['spec']['names']
    assert (names['kind'], names['plural'], names['shortNames']) == (
        'LLMAutoScaler',
        'llmautoscalers',
        ['llmas'],
    )
    v = only_version(CRD_PATH)
    assert (v['name'], v['served'], v['storage']) == ('v1alpha1', True, True)
    assert v['subresources'] == {'status': {}}


def test_model_matches_the_crd() -> None:
    assert (
        differences(crd_schema(CRD_PATH), model_schema(), empty_object_default_is_absent=True) == []
    )


@pytest.mark.parametrize(
    ('path', 'key', 'value'),
    [
        (('spec', 'minReplicas'), 'default', 0),
        (('spec', 'minReplicas'), 'minimum', 0),
        (('spec', 'scaler', 'realtime', 'scaleUpRule', 'cooldownSeconds'), 'default', 300),
        (
            ('spec', 'scaler', 'realtime', 'scaleDownRule', 'stabilizationWindowSeconds'),
            'default',
            30,
        ),
        (('status', 'lastScaleTime'), 'format', 'date'),
    ],
)
def test_the_comparison_catches_a_drift(path: tuple[str, ...], key: str, value: Any) -> None:
    schema = crd_schema(CRD_PATH)
    drift(schema, path=path, key=key, value=value)
    assert differences(schema, model_schema(), empty_object_default_is_absent=True) != []


def test_seed_defaults_apply() -> None:
    parsed = parse_llmautoscaler(example())
    assert isinstance(parsed, LLMAutoScaler)
    assert parsed.spec.min_replicas == 1
    realtime = parsed.spec.scaler.realtime
    assert realtime is not None
    source = realtime.metrics[0].source
    assert (source.name, source.protocol, source.port, source.path) == (
        'vllm:num_requests_waiting',
        'http',
        '5000',
        '/metrics',
    )
    core = core_spec(parsed.spec)
    assert core.realtime is not None
    assert core.realtime.scale_up == ScalerRule(
        step=1, cooldown_seconds=600, stabilization_window_seconds=30
    )
    assert core.realtime.scale_down == ScalerRule(
        step=1, cooldown_seconds=1800, stabilization_window_seconds=300
    )
    assert core.cron is not None
    assert [(p.name, p.schedule.time_zone, p.target_replicas) for p in core.cron] == [
        ('scale-up', 'America/New_York', 5),
        ('scale-down', 'America/New_York', 1),
    ]


def test_absent_objects_take_every_default() -> None:
    obj = example()
    obj['spec']['scaler']['cron']['policies'][0].pop('timeZone')
    parsed = parse_llmautoscaler(obj)
    assert isinstance(parsed, LLMAutoScaler)
    stored = parsed.to_object()
    realtime = stored['spec']['scaler']['realtime']
    assert realtime['scaleUpRule'] == {
        'cooldownSeconds': 600,
        'stabilizationWindowSeconds': 30,
        'scaleStep': 1,
    }
    assert realtime['scaleDownRule'] == {
        'cooldownSeconds': 1800,
        'stabilizationWindowSeconds': 300,
        'scaleStep': 1,
    }
    assert stored['spec']['scaler']['cron']['policies'][0]['timeZone'] == 'Etc/UTC'
    # The CRD's defaults are the same values.
    spec = crd_schema(CRD_PATH)['properties']['spec']['properties']
    rules = spec['scaler']['properties']['realtime']['properties']
    for rule, expected in (('scaleUpRule', (600, 30, 1)), ('scaleDownRule', (1800, 300, 1))):
        fields = rules[rule]['properties']
        assert (
            tuple(
                fields[f]['default']
                for f in ('cooldownSeconds', 'stabilizationWindowSeconds', 'scaleStep')
            )
            == expected
        )


def edit(path: str, value: Any) -> dict[str, Any]:
    obj = example()
    node: Any = obj
    *parents, last = path.split('.')
    for part in parents:
        node = node[int(part)] if part.isdigit() else node[part]
    if value is None:
        del node[last]
    else:
        node[last] = value
    return obj


@pytest.mark.parametrize(
    ('path', 'value', 'message'),
    [
        ('spec.minReplicas', 0, 'spec.minReplicas: Input should be greater than or equal to 1'),
        ('spec.minReplicas', 7, 'spec.minReplicas: must be <= maxReplicas (7 > 6)'),
        ('spec.maxReplicas', None, 'spec.maxReplicas: Field required'),
        ('spec.scaler.realtime.metrics.0.threshold.low', 11, 'threshold.low: must be <= high'),
        ('spec.scaler.realtime.metrics.0.threshold.high', -1, 'greater than or equal to 0'),
        ('spec.scaler.realtime.metrics', [], 'at least 1 item'),
        ('spec.scaler.realtime.metrics.0.source', {'port': '70000'}, 'a port number'),
        ('spec.scaler.realtime.metrics.0.source', {'protocol': 'grpc'}, "'http' or 'https'"),
        ('spec.scaler.realtime.metrics.0.source', {'path': 'metrics'}, "pattern '^/'"),
        ('spec.scaler.realtime.scaleUpRule', {'scaleStep': 0}, 'greater than or equal to 1'),
        ('spec.scaler.cron.policies.0.timeZone', 'Mars/Base', 'timeZone: time zone'),
        ('spec.scaler.cron.policies.0.schedule', '0 25 * * *', 'schedule: schedule'),
        ('spec.scaler.cron.policies.1.name', 'scale-up', "repeated name ['scale-up']"),
        ('spec.scaler', {}, 'set realtime, cron or both'),
        ('spec.maxReplicas', '6', 'valid integer'),
    ],
)
def test_bad_objects_are_refused_with_one_line(path: str, value: Any, message: str) -> None:
    refused = parse_llmautoscaler(edit(path, value))
    assert isinstance(refused, InvalidObject)
    assert message in refused.message
    assert '\n' not in refused.message
    assert (refused.name, refused.namespace) == ('phi-4', 'kaito')


def test_two_metrics_from_one_source_are_refused() -> None:
    obj = example()
    metrics = obj['spec']['scaler']['realtime']['metrics']
    metrics.append({'source': {'port': '5000'}, 'threshold': {'high': 3, 'low': 1}})
    refused = parse_llmautoscaler(obj)
    assert isinstance(refused, InvalidObject)
    assert 'metrics[1] reads the same metric as metrics[0]' in refused.message


def test_parse_never_raises_on_odd_input() -> None:
    assert isinstance(parse_llmautoscaler([]), InvalidObject)  # type: ignore[arg-type]
    deep: Any = 'x'
    for _ in range(5000):
        deep = {'a': deep}
    assert isinstance(parse_llmautoscaler({'spec': deep}), InvalidObject)


# --- kubectl against the fake API server, which serves the CRD's printer columns ------------


@pytest.fixture
async def api() -> AsyncIterator[FakeAPI]:
    need_program('kubectl')
    async with FakeAPI() as running:
        obj = example()
        parsed = parse_llmautoscaler(obj)
        assert isinstance(parsed, LLMAutoScaler)
        stored = parsed.to_object()
        stored['status'] = {
            'currentReplicas': 2,
            'desiredReplicas': 3,
            'lastScaleTime': '2026-01-01T00:00:00Z',
            'conditions': [
                {
                    'type': 'AbleToScale',
                    'status': 'True',
                    'reason': 'SucceededRescale',
                    'message': 'scaled',
                    'lastTransitionTime': '2026-01-01T00:00:00Z',
                }
            ],
        }
        assert isinstance(parse_llmautoscaler(stored), LLMAutoScaler)
        running.seed(stored)
        yield running


async def kubectl(api: FakeAPI, *args: str) -> str:
    process = await asyncio.create_subprocess_exec(
        'kubectl',
        '--server',
        api.url,
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout=30)
    assert process.returncode == 0, err.decode()
    return out.decode()


def columns(out: str) -> list[dict[str, str]]:
    header, *lines = out.rstrip('\n').splitlines()
    starts = [m.start() for m in re.finditer(r'\S+', header)]
    names = header.split()
    ends = [*starts[1:], None]
    return [
        {n: line[s:e].strip() for n, s, e in zip(names, starts, ends, strict=True)}
        for line in lines
    ]


async def test_kubectl_get_llmas_shows_the_printer_columns(api: FakeAPI) -> None:
    [row] = columns(await kubectl(api, 'get', 'llmas', '-n', 'kaito'))
    assert re.fullmatch(r'\d+[smhdy].*', row.pop('LASTSCALE'))
    assert re.fullmatch(r'\d+[smhdy].*', row.pop('AGE'))
    assert row == {
        'NAME': 'phi-4',
        'TARGET': 'phi-4',
        'MIN': '1',
        'MAX': '6',
        'CURRENT': '2',
        'DESIRED': '3',
        'ABLE': 'True',
    }
    [wide] = columns(await kubectl(api, 'get', 'llmautoscalers.kaito.sh', '-A', '-o', 'wide'))
    assert (wide['NAMESPACE'], wide['KIND'], wide['REASON']) == (
        'kaito',
        'InferenceSet',
        'SucceededRescale',
    )
