"""The objects written apply: the VariantAutoscalings pass the CRD's rules with the bounds the
chosen configuration ran with, and ConfigMap data keys are valid (each policy's ConfigMap is
read back in its own space's tests)."""

from __future__ import annotations

from dataclasses import replace

import pytest
import yaml

from llmscaler.kube import crd
from llmscaler.sim.hardware.presets import preset
from llmscaler.sim.tune import output
from llmscaler.sim.tune.saturation import SaturationSettings
from llmscaler.sim.tune.space import Candidate, bounded


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
        settings=SaturationSettings(kv=0.9), offered=('h100', 'l40s'), floor=1, cap=0.5
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
