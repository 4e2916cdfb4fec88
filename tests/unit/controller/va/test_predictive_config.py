"""`llmscaler-predictive-config` in the controller: watched by label like WVA's maps, and a bad
edit is a Warning Event on the ConfigMap, a log line and a counted error, while the last good
copy stays in force (a safety rule). The harness is the main cycle's (test_controller_cycle)."""

from __future__ import annotations

import pytest

from llmscaler.config.predictive import PREDICTIVE_CONFIGMAP
from llmscaler.config.resolved import PredictiveConfig
from llmscaler.devcluster.fakeapi.server import FakeAPI
from tests.support.controller_harness import (
    CTL,
    IDLE,
    MODEL,
    NS,
    FakeSource,
    about,
    configmap,
    configmaps_changed,
    events,
    informed,
    samples,
    seed_variant,
    update,
)
from tests.support.waiting import eventually


async def test_a_bad_edit_is_an_event_and_the_last_good_copy_stays(
    api: FakeAPI, caplog: pytest.LogCaptureFixture
) -> None:
    good = configmap(PREDICTIVE_CONFIGMAP, {'default': 'startupSeconds: 90'})
    api.seed(good)
    seed_variant(api, 'a')
    source = FakeSource(api, load={'a': IDLE})
    expected = PredictiveConfig(startup_seconds=90.0)
    async with informed(api, source) as controller:
        await controller.cycle.run_once()
        in_force = controller.cycle.current_config()
        assert in_force.model(model_id=MODEL, namespace=NS).predictive == expected
        assert events(api, reason='InvalidConfiguration') == []

        broken = api.get(
            api_version='v1', kind='ConfigMap', namespace=CTL, name=PREDICTIVE_CONFIGMAP
        )
        broken['data'] = {
            'default': 'startupSeconds: 30',
            'llama': f'model_id: {MODEL}\nforecastQuantile: 1.5',
        }
        await configmaps_changed(controller, lambda: update(api, broken), 'the edit')
        with caplog.at_level('WARNING', logger='llmscaler.controller.va.cycle'):
            await controller.cycle.run_once()
        in_force = controller.cycle.current_config()
        assert in_force.model(model_id=MODEL, namespace=NS).predictive == expected

        await eventually(lambda: len(events(api, reason='InvalidConfiguration')) == 1, 'the Event')
        (event,) = events(api, reason='InvalidConfiguration')
        assert about(event) == (
            'Warning',
            f'ConfigMap/{PREDICTIVE_CONFIGMAP}',
            'InvalidConfiguration',
        )
        assert event['regarding']['namespace'] == CTL
        assert event['note'] == (
            "not applied, last good configuration kept: key 'llama', field 'forecastQuantile' "
            f"= '1.5': must be in (0.5, 1) (model '{MODEL}')"
        )
        assert f'ConfigMap {CTL}/{PREDICTIVE_CONFIGMAP} rejected' in caplog.text
        page = samples(controller.metrics.render().decode())
        key = (('component', 'config'), ('error_type', 'InvalidConfiguration'))
        assert page[('wva_errors_total', key)] == 1
