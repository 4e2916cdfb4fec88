"""`perfParms` and `performanceModel` in `wva-queueing-model-config`: the tuner's configured seed
per accelerator, in the form of the entry's performance model."""

from __future__ import annotations

import pytest

from llmscaler.config.build import build_config
from llmscaler.config.configmap_entries import ConfigMapSource
from llmscaler.config.configmaps import QUEUEING_CONFIGMAP
from llmscaler.config.resolved import CoreSettings, QueueingModelConfig

CTRL = 'wva-system'
H100 = (
    'perfParms:\n'
    '  - acc: H100\n'
    '    decodeParms: {alpha: 6.5, beta: 0.04}\n'
    '    prefillParms: {gamma: 21, delta: 0.0004}\n'
)


FOUR = 'performanceModel: four-parameter\n'
THREE = 'perfParms:\n  - acc: H100\n    serviceParms: {alpha: 5.0, beta: 0.05, gamma: 0.00005}\n'


def queueing_of(data: dict[str, str]) -> tuple[QueueingModelConfig, list[str]]:
    """Model `m`'s queueing configuration from these ConfigMap entries, and the errors."""
    config, errors = build_config(
        configmaps=[ConfigMapSource(name=QUEUEING_CONFIGMAP, namespace=CTRL, data=data)],
        settings=CoreSettings(),
        controller_namespace=CTRL,
    )
    queueing = config.model(model_id='m', namespace='ns').queueing
    assert queueing is not None
    return queueing, [str(e) for e in errors]


def resolve(data: dict[str, str]) -> tuple[object, list[str]]:
    queueing, errors = queueing_of(data)
    return queueing.perf_parms, errors


def test_default_and_per_model_entries_set_the_seed_per_accelerator() -> None:
    parms, errors = resolve({'default': FOUR + H100})
    assert (parms, errors) == ((('H100', (6.5, 0.04, 21.0, 0.0004)),), [])
    a100 = H100.replace('H100', 'A100').replace('6.5', '9')
    parms, errors = resolve({'default': FOUR + H100, 'm': f'model_id: m\n{FOUR}{a100}'})
    # A list is replaced whole by the more specific entry, as every field.
    assert (parms, errors) == ((('A100', (9.0, 0.04, 21.0, 0.0004)),), [])


@pytest.mark.parametrize(
    ('text', 'where'),
    [
        ('perfParms: {acc: H100}', "field 'perfParms'"),
        (H100.replace('beta: 0.04', 'beta: 0'), "field 'perfParms[0].decodeParms.beta' = '0'"),
        (H100.replace('beta: 0.04', 'beta: .nan'), "field 'perfParms[0].decodeParms.beta'"),
        (H100.replace(', beta: 0.04', ''), "field 'perfParms[0].decodeParms.beta': is required"),
        (H100.replace('gamma', 'gama'), "field 'perfParms[0].prefillParms.gama'"),
        (H100.replace('acc: H100', 'acc: ""'), "field 'perfParms[0].acc'"),
        (H100 + H100.split('\n', 1)[1], "field 'perfParms[1].acc' = 'H100': accelerator listed"),
        (
            H100.replace('acc: H100', 'acc: H100\n    maxBatchSize: 8'),
            "field 'perfParms[0].maxBatchSize' = '8': unknown field",
        ),
    ],
)
def test_a_malformed_seed_rejects_the_entry_with_one_line(text: str, where: str) -> None:
    parms, errors = resolve({'default': FOUR + text})
    assert parms is None
    assert len(errors) == 1
    assert '\n' not in errors[0]
    assert f"{CTRL}/{QUEUEING_CONFIGMAP}: key 'default', {where}" in errors[0]


def performance_model(data: dict[str, str]) -> tuple[object, list[str]]:
    queueing, errors = queueing_of(data)
    return queueing.performance_model, errors


def test_the_three_parameter_model_is_the_default_and_reads_service_parms() -> None:
    assert performance_model({'default': 'sloMultiplier: 3'}) == ('three-parameter', [])
    parms, errors = resolve({'default': THREE})
    assert (parms, errors) == ((('H100', (5.0, 0.05, 0.00005)),), [])
    assert performance_model({'default': FOUR}) == ('four-parameter', [])
    # A per-model entry chooses for its model alone.
    got = performance_model(
        {'default': FOUR, 'm': 'model_id: m\nperformanceModel: three-parameter'}
    )
    assert got == ('three-parameter', [])


@pytest.mark.parametrize(
    ('text', 'where'),
    [
        ('performanceModel: three', "field 'performanceModel' = 'three': must be one of"),
        ('performanceModel: 3', "field 'performanceModel' = '3': must be one of"),
        ('performanceModel: ""', "field 'performanceModel': must be one of"),
        (H100, "field 'perfParms': perfParms for 'H100' are not in the three-parameter form"),
        (FOUR + THREE, "perfParms for 'H100' are not in the four-parameter form"),
        (
            THREE.replace(
                'gamma: 0.00005}', 'gamma: 0.00005}\n    decodeParms: {alpha: 1, beta: 1}'
            ),
            "field 'perfParms[0]': give serviceParms (three-parameter) or decodeParms",
        ),
        (THREE.replace(', gamma: 0.00005', ''), "'perfParms[0].serviceParms.gamma': is required"),
        (THREE.replace('beta: 0.05', 'beta: -1'), "'perfParms[0].serviceParms.beta' = '-1'"),
    ],
)
def test_an_unknown_model_or_a_form_of_the_other_model_is_rejected(text: str, where: str) -> None:
    got, errors = performance_model({'default': text})
    assert got == 'three-parameter'  # the entry is rejected: nothing of it applies
    assert len(errors) == 1
    assert where in errors[0]
