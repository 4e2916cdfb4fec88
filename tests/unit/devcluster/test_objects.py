"""The development cluster's object builders, read back by the code that reads them in a cluster."""

from __future__ import annotations

from llmscaler.config.configmap_entries import ConfigMapSource
from llmscaler.config.predictive import PREDICTIVE_CONFIGMAP, parse_predictive_configmap
from llmscaler.devcluster import objects
from llmscaler.sim.hardware.perf_seed import fitted_seed
from llmscaler.sim.hardware.presets import preset


def test_the_predictive_configmap_is_accepted_with_the_fitted_parameters() -> None:
    spec = preset(name='llama-3.1-8b-l4', max_num_seqs=4)
    built = objects.predictive_configmap(
        namespace='ctl',
        spec=spec,
        input_tokens=64,
        output_tokens=32,
        settings={
            'startupSeconds': 5,
            'scaleDownDelaySeconds': 20.5,
            'targetTTFT': 2000,
            'targetITL': 200.0,
        },
    )
    assert built['metadata']['name'] == PREDICTIVE_CONFIGMAP
    assert built['metadata']['labels'] == {'app.kubernetes.io/name': 'llmscaler'}
    (entry,), errors = parse_predictive_configmap(
        source=ConfigMapSource(name=PREDICTIVE_CONFIGMAP, namespace='ctl', data=built['data'])
    )
    assert errors == ()
    assert (entry.key, entry.model_id) == ('default', None)
    assert (entry.values.startup_seconds, entry.values.scale_down_delay) == (5.0, 20.5)
    assert (entry.values.slo.target_ttft, entry.values.slo.target_itl) == (2000.0, 200.0)
    seed = fitted_seed(spec=spec, avg_input_tokens=64, avg_output_tokens=32)
    assert seed is not None
    parms = entry.values.slo.perf_parms
    assert parms is not None
    ((accelerator, given),) = parms
    assert accelerator == spec.accelerator
    assert given == seed
