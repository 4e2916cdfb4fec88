"""The objects written apply: the ConfigMap reads back through the controller's own loader as
the very settings simulated, and the VariantAutoscalings pass the CRD's rules."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from llmscaler.config.file import load_config_file
from llmscaler.config.resolved import PredictiveConfig, QueueingModelConfig
from llmscaler.kube import crd
from llmscaler.sim.hardware.presets import preset
from llmscaler.sim.tune import output
from llmscaler.sim.tune.space import Candidate, bounded, resolve

MODEL = 'meta-llama/Llama-3.1-8B-Instruct'


def _settings() -> PredictiveConfig:
    base = PredictiveConfig(
        slo=QueueingModelConfig(
            target_ttft=1300.0,
            target_itl=71.00000000000001,
            perf_parms=(
                ('H100', (5.39, 2.34, 121.7, 0.00177)),
                ('L40S', (17.1, 6.8, 312.8, 0.0055)),
            ),
        ),
        startup_seconds=90.0,
    )
    tuned = Candidate(target=0.995, delay=120.0, horizon=1.5, offered=('h100',))
    return resolve(candidate=tuned, base=base)


def test_the_configmap_reads_back_as_the_settings(tmp_path: Path) -> None:
    settings = _settings()
    path = tmp_path / 'configmap.yaml'
    path.write_text(
        output.dump([output.configmap(settings=settings, model_id=MODEL, namespace='llm')])
    )
    config, errors = load_config_file(path=str(path))
    assert errors == ()
    assert config.model(model_id=MODEL, namespace='llm').predictive == settings
    # namespace-local: another namespace's model keeps its analyzer
    assert config.model(model_id=MODEL, namespace='other').predictive is None


def test_a_three_parameter_model_is_refused() -> None:
    settings = replace(
        _settings(), slo=QueueingModelConfig(perf_parms=(('H100', (1.0, 2.0, 3.0)),))
    )
    with pytest.raises(ValueError, match='four parameters'):
        output.configmap(settings=settings, model_id=MODEL, namespace='llm')


def test_data_keys_are_valid() -> None:
    assert output.data_key('meta-llama/Llama 3.1:8B') == 'meta-llama-Llama-3.1-8B'


def test_variant_autoscalings_pass_the_crd() -> None:
    spec = preset(name='llama-3.1-8b-h100', variant_name='h100')
    objects = output.variant_autoscalings(variants=[replace(spec, min_replicas=1, max_replicas=6)])
    parsed = crd.parse_va(yaml.safe_load(output.dump(objects)))
    assert isinstance(parsed, crd.VariantAutoscaling)
    assert (parsed.spec.min_replicas, parsed.spec.max_replicas) == (1, 6)
    assert parsed.spec.cost == pytest.approx(spec.cost_per_hour, abs=0.005)
    with pytest.raises(ValueError, match='maxReplicas'):
        output.variant_autoscalings(variants=[replace(spec, min_replicas=3, max_replicas=2)])


def test_the_chosen_bounds_are_the_objects_bounds() -> None:
    specs = [
        preset(name='llama-3.1-8b-h100', variant_name='h100', max_replicas=8),
        preset(name='llama-3.1-8b-l40s', variant_name='l40s', max_replicas=12),
    ]
    chosen = Candidate(
        target=0.995, delay=120.0, horizon=1.0, offered=('h100', 'l40s'), floor=1, cap=0.5
    )
    ran = bounded(candidate=chosen, variants=specs)
    objects = output.variant_autoscalings(variants=ran)
    found = {}
    for document in yaml.safe_load_all(output.dump(objects)):
        parsed = crd.parse_va(document)
        assert isinstance(parsed, crd.VariantAutoscaling)
        found[document['metadata']['name']] = (parsed.spec.min_replicas, parsed.spec.max_replicas)
    assert found == {'h100': (0, 4), 'l40s': (1, 6)}
    assert found == {v.name: (v.min_replicas, v.max_replicas) for v in ran}
