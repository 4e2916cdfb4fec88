"""`perfParms` in `wva-queueing-model-config`: the tuner's configured seed per accelerator."""

from __future__ import annotations

import pytest

from llmscaler.config.build import build_config
from llmscaler.config.configmap_entries import ConfigMapSource
from llmscaler.config.configmaps import QUEUEING_CONFIGMAP
from llmscaler.config.resolved import CoreSettings

CTRL = 'wva-system'
H100 = (
    'perfParms:\n'
    '  - acc: H100\n'
    '    decodeParms: {alpha: 6.5, beta: 0.04}\n'
    '    prefillParms: {gamma: 21, delta: 0.0004}\n'
)


def resolve(data: dict[str, str]) -> tuple[object, list[str]]:
    config, errors = build_config(
        configmaps=[ConfigMapSource(name=QUEUEING_CONFIGMAP, namespace=CTRL, data=data)],
        settings=CoreSettings(),
        controller_namespace=CTRL,
    )
    queueing = config.model(model_id='m', namespace='ns').queueing
    assert queueing is not None
    return queueing.perf_parms, [str(e) for e in errors]


def test_default_and_per_model_entries_set_the_seed_per_accelerator() -> None:
    parms, errors = resolve({'default': H100})
    assert (parms, errors) == ((('H100', (6.5, 0.04, 21.0, 0.0004)),), [])
    a100 = H100.replace('H100', 'A100').replace('6.5', '9')
    parms, errors = resolve({'default': H100, 'm': f'model_id: m\n{a100}'})
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
    parms, errors = resolve({'default': text})
    assert parms is None
    assert len(errors) == 1
    assert '\n' not in errors[0]
    assert f"{CTRL}/{QUEUEING_CONFIGMAP}: key 'default', {where}" in errors[0]
