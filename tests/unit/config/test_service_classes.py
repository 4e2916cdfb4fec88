"""`service-classes-config` (WVA v0.4): parsing, precedence against the queueing-model
ConfigMap's targets, live reload keeping the last good copy, and the decision's reason."""

from __future__ import annotations

from typing import Any

import pytest

from llmscaler.config.build import build_config
from llmscaler.config.configmap_entries import ConfigMapSource
from llmscaler.config.configmaps import QUEUEING_CONFIGMAP
from llmscaler.config.resolved import CoreSettings
from llmscaler.config.service_classes import SERVICE_CLASSES_CONFIGMAP, parse_service_classes
from llmscaler.controller.cluster.configwatch import ConfigWatch
from llmscaler.domain.snapshot import Snapshot
from llmscaler.domain.state import EMPTY_STATE
from llmscaler.engine import decide
from llmscaler.io import load_snapshot
from tests.support.paths import ROOT

CTRL = 'workload-variant-autoscaler-system'

WVA_SHIPPED = {
    # WVA's deploy/configmap-serviceclass.yaml, as shipped.
    'premium.yaml': (
        'name: Premium\npriority: 1\ndata:\n'
        '  - model: default/default\n    slo-tpot: 24\n    slo-ttft: 500\n'
        '  - model: test-scale-to-zero-model\n    slo-tpot: 24\n    slo-ttft: 500\n'
        '  - model: meta/llama0-70b\n    slo-tpot: 80\n    slo-ttft: 500\n'
    ),
    'freemium.yaml': (
        'name: Freemium\npriority: 10\ndata:\n'
        '  - model: ibm/granite-13b\n    slo-tpot: 200\n    slo-ttft: 2000\n'
        '  - model: meta/llama0-7b\n    slo-tpot: 150\n    slo-ttft: 1500\n'
    ),
}


def classes(data: dict[str, str], namespace: str = CTRL) -> ConfigMapSource:
    return ConfigMapSource(name=SERVICE_CLASSES_CONFIGMAP, namespace=namespace, data=data)


def queueing(data: dict[str, str], namespace: str = CTRL) -> ConfigMapSource:
    return ConfigMapSource(name=QUEUEING_CONFIGMAP, namespace=namespace, data=data)


def test_wva_shipped_configmap_gives_each_model_its_class_targets() -> None:
    targets, errors = parse_service_classes(source=classes(WVA_SHIPPED))
    assert errors == ()
    got = {t.model_id: (t.ttft, t.itl, t.service_class, t.priority) for t in targets}
    assert got == {
        'default/default': (500.0, 24.0, 'Premium', 1),
        'test-scale-to-zero-model': (500.0, 24.0, 'Premium', 1),
        'meta/llama0-70b': (500.0, 80.0, 'Premium', 1),
        'ibm/granite-13b': (2000.0, 200.0, 'Freemium', 10),
        'meta/llama0-7b': (1500.0, 150.0, 'Freemium', 10),
    }


def test_a_model_in_two_classes_takes_the_most_important_and_warns() -> None:
    data = {
        'a.yaml': 'name: Bulk\npriority: 10\ndata:\n  - {model: m, slo-ttft: 3000, slo-tpot: 90}',
        'b.yaml': 'name: Gold\npriority: 1\ndata:\n  - {model: m, slo-ttft: 400, slo-tpot: 30}',
    }
    targets, errors = parse_service_classes(source=classes(data))
    assert [(t.service_class, t.ttft, t.itl) for t in targets] == [('Gold', 400.0, 30.0)]
    assert len(errors) == 1
    assert errors[0].warning
    assert "class 'Gold' (priority 1)" in str(errors[0])


@pytest.mark.parametrize(
    ('text', 'field', 'words'),
    [
        ('name: X\npriority: 1\ndata: [{model: m, slo-ttft: 5}]', 'data[0].slo-tpot', 'required'),
        (
            'name: X\npriority: 1\ndata: [{model: m, slo-ttft: -5, slo-tpot: 5}]',
            'data[0].slo-ttft',
            'must be in',
        ),
        (
            'name: X\npriority: 1\ndata: [{model: m, slo-ttft: 5, slo-tpot: .nan}]',
            'data[0].slo-tpot',
            'finite',
        ),
        ('name: X\npriority: true\ndata: []', 'priority', 'integer'),
        ('name: X\npriority: 1.5\ndata: []', 'priority', 'integer'),
        ('name: X\npriority: 1\ndata: []\ncolour: red', 'colour', 'unknown field'),
        (
            'name: X\npriority: 1\ndata: [{model: m, slo-ttft: 5, slo-tpot: 5, tps: 1}]',
            'data[0].tps',
            'unknown',
        ),
        ('name: ""\npriority: 1\ndata: []', 'name', 'non-empty'),
        ('priority: 1\ndata: []', 'name', 'required'),
        ('name: X\npriority: 1\ndata: {model: m}', 'data', 'must be a list'),
        (
            'name: X\npriority: 1\ndata: [{model: m, slo-ttft: 5, slo-tpot: 5}, '
            '{model: m, slo-ttft: 5, slo-tpot: 5}]',
            'data[1].model',
            'twice',
        ),
        ('name: X\npriority: [1', '', 'YAML not accepted'),
    ],
)
def test_a_malformed_class_is_one_line_naming_the_field_and_the_others_load(
    text: str, field: str, words: str
) -> None:
    data = {'bad.yaml': text, 'good.yaml': WVA_SHIPPED['freemium.yaml']}
    targets, errors = parse_service_classes(source=classes(data))
    assert {t.model_id for t in targets} == {'ibm/granite-13b', 'meta/llama0-7b'}
    assert len(errors) == 1
    assert not errors[0].warning
    line = str(errors[0])
    assert '\n' not in line
    assert line.startswith(f"{CTRL}/{SERVICE_CLASSES_CONFIGMAP}: key 'bad.yaml'")
    assert (errors[0].field, words in line) == (field, True)


def _resolved(*configmaps: ConfigMapSource, model: str = 'm', namespace: str = 'ns') -> Any:
    config, errors = build_config(
        configmaps=configmaps, settings=CoreSettings(), controller_namespace=CTRL
    )
    assert [e for e in errors if not e.warning] == []
    return config.model(model_id=model, namespace=namespace).queueing


CLASS = {'gold.yaml': 'name: Gold\npriority: 1\ndata: [{model: m, slo-ttft: 400, slo-tpot: 30}]'}


def test_precedence_model_entry_over_class_over_default_entry() -> None:
    default_targets = queueing({'default': 'targetTTFT: 2000\ntargetITL: 100'})
    # The class is more specific than the queueing default's global SLO.
    q = _resolved(default_targets, classes(CLASS))
    assert (q.target_ttft, q.target_itl, q.service_class) == (400.0, 30.0, 'Gold')
    # A model the class does not name keeps the default's targets.
    other = _resolved(default_targets, classes(CLASS), model='other')
    assert (other.target_ttft, other.target_itl, other.service_class) == (2000.0, 100.0, None)
    # A per-model queueing entry wins over the class.
    entry = queueing(
        {
            'default': 'targetTTFT: 2000\ntargetITL: 100',
            'm': 'model_id: m\ntargetTTFT: 900\ntargetITL: 70',
        }
    )
    q = _resolved(entry, classes(CLASS))
    assert (q.target_ttft, q.target_itl, q.service_class) == (900.0, 70.0, None)
    # A per-model entry without targets leaves the class's in force.
    q = _resolved(queueing({'default': '', 'm': 'model_id: m\nsloMultiplier: 2'}), classes(CLASS))
    assert (q.target_ttft, q.slo_multiplier, q.service_class) == (400.0, 2.0, 'Gold')


def test_classes_select_nothing_without_the_queueing_configmap() -> None:
    assert _resolved(classes(CLASS)) is None


def test_a_namespace_local_class_wins_in_its_namespace_only() -> None:
    local = {'l.yaml': 'name: Team\npriority: 5\ndata: [{model: m, slo-ttft: 700, slo-tpot: 45}]'}
    qm = queueing({'default': ''})
    here = _resolved(qm, classes(CLASS), classes(local, namespace='team'), namespace='team')
    there = _resolved(qm, classes(CLASS), classes(local, namespace='team'), namespace='ns')
    assert (here.target_ttft, here.service_class) == (700.0, 'Team')
    assert (there.target_ttft, there.service_class) == (400.0, 'Gold')


def _obj(name: str, data: dict[str, str]) -> dict[str, Any]:
    return {
        'apiVersion': 'v1',
        'kind': 'ConfigMap',
        'metadata': {'name': name, 'namespace': CTRL, 'resourceVersion': '1'},
        'data': data,
    }


def test_a_malformed_configmap_is_reported_and_the_last_good_one_stays() -> None:
    watch = ConfigWatch(settings=CoreSettings(), controller_namespace=CTRL, base=())
    qm = _obj(QUEUEING_CONFIGMAP, {'default': ''})
    good = watch.update(configmaps=[qm, _obj(SERVICE_CLASSES_CONFIGMAP, CLASS)])
    assert good.problems == ()
    first = good.config.model(model_id='m', namespace='ns').queueing
    assert first is not None
    assert first.target_ttft == 400.0
    broken = dict(CLASS, **{'new.yaml': 'name: New\npriority: -1\ndata: []'})
    bad = watch.update(configmaps=[qm, _obj(SERVICE_CLASSES_CONFIGMAP, broken)])
    assert bad.kept == (f'{CTRL}/{SERVICE_CLASSES_CONFIGMAP}',)
    assert len(bad.problems) == 1
    assert bad.problems[0].message == (
        "key 'new.yaml', field 'priority' = '-1': must be in [0, 1000000]"
    )
    queue = bad.config.model(model_id='m', namespace='ns').queueing
    assert queue is not None
    assert (queue.target_ttft, queue.service_class) == (400.0, 'Gold')
    fixed = dict(
        CLASS,
        **{'new.yaml': 'name: New\npriority: 0\ndata: [{model: m, slo-ttft: 600, slo-tpot: 40}]'},
    )
    again = watch.update(configmaps=[qm, _obj(SERVICE_CLASSES_CONFIGMAP, fixed)])
    assert (again.problems, again.kept) == ((), ())
    queue = again.config.model(model_id='m', namespace='ns').queueing
    assert queue is not None
    assert (queue.target_ttft, queue.service_class) == (600.0, 'New')


def test_the_decision_says_which_class_gave_the_targets() -> None:
    document = load_snapshot(path=ROOT / 'examples' / 'snapshot-slo.json')
    model = document.variants[0].model_id
    text = (
        f'name: Interactive\npriority: 1\ndata: [{{model: {model}, slo-ttft: 900, slo-tpot: 50}}]'
    )
    config, _ = build_config(
        configmaps=[queueing({'default': ''}), classes({'i.yaml': text})],
        settings=CoreSettings(),
        controller_namespace=CTRL,
    )
    snapshot = Snapshot(
        variants=document.variants, replicas=document.replicas, pools=document.pools
    )
    outcome = decide(snapshot=snapshot, config=config, state=EMPTY_STATE, now=document.now or 0.0)
    reasons = {d.reason for d in outcome.decisions}
    assert reasons
    assert all(
        r.startswith('slo targets explicit (service class Interactive): TTFT 900 ms, ITL 50 ms')
        for r in reasons
    ), reasons
