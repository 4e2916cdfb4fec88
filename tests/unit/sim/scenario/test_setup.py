"""`sim.scenario.setup`'s `predictive:TARGET`: the predictive policy at another attainment
target, checked as a policy name and built with what the target implies."""

from __future__ import annotations

from typing import Any

import pytest

from llmscaler.config.predictive import sizing_for
from llmscaler.config.resolved import Config, ModelConfig, PredictiveConfig
from llmscaler.sim.policies.core import CorePolicy
from llmscaler.sim.scenario import loader
from llmscaler.sim.scenario.document import ScenarioError
from llmscaler.sim.scenario.setup import (
    attainment_target,
    build_policies,
    check_policy_name,
    with_target,
)
from llmscaler.sim.scenario.workloads import build_workloads, model_slos


def document(*policies: str) -> dict[str, Any]:
    return {
        'variants': [{'name': 'h100', 'preset': 'llama-3.1-8b-h100'}],
        'workload': {'synthetic': {'preset': 'azure-conv', 'rate': 2.0, 'duration': 60.0}},
        'policies': list(policies),
    }


@pytest.mark.parametrize('name', ['predictive:0.95', 'predictive:0.999', 'predictive:0.51'])
def test_a_target_in_range_is_a_policy(name: str) -> None:
    check_policy_name(name=name, variants=['h100'], where='policies.0')
    assert attainment_target(name) == float(name.split(':')[1])


@pytest.mark.parametrize(
    'name', ['predictive:1', 'predictive:0.5', 'predictive:high', 'predictive:']
)
def test_a_target_out_of_range_is_one_line(name: str) -> None:
    with pytest.raises(ScenarioError, match=r'^policies\.0: predictive:.* must be a number in'):
        check_policy_name(name=name, variants=['h100'], where='policies.0')


def test_every_layer_of_a_predictive_configuration_gets_the_target() -> None:
    predictive = ModelConfig(predictive=PredictiveConfig())
    config = Config(
        default=predictive,
        by_namespace=(('ns', predictive),),
        by_model=(('m', predictive),),
        by_group=(('m|ns', predictive), ('wva|ns', ModelConfig())),
    )
    targeted = with_target(config, 0.95)
    quantile, margin = sizing_for(0.95)
    for model in (targeted.default, *(m for _, m in targeted.by_namespace + targeted.by_model)):
        assert model.predictive is not None
        assert (model.predictive.attainment, model.predictive.quantile) == (0.95, quantile)
        assert model.predictive.latency_margin == margin
    assert targeted.model(model_id='wva', namespace='ns').predictive is None


def test_the_policy_runs_predictive_at_its_target() -> None:
    setup = loader.from_document(document=document('predictive', 'predictive:0.95'))
    workloads = build_workloads(scenario=setup)
    plain, lax = build_policies(
        scenario=setup, workloads=workloads, slos=model_slos(scenario=setup, workloads=workloads)
    )
    assert isinstance(plain, CorePolicy)
    assert isinstance(lax, CorePolicy)
    assert lax.name == 'predictive:0.95'
    found = lax.config.model(model_id=setup.variants[0].model_id, namespace='default').predictive
    before = plain.config.model(model_id=setup.variants[0].model_id, namespace='default')
    assert found is not None
    assert before.predictive is not None
    assert found.attainment == 0.95
    assert found.quantile < before.predictive.quantile
    # The rest of what the user stated (the SLO, the start-up) is the plain policy's.
    assert found.slo == before.predictive.slo
    assert found.startup_seconds == before.predictive.startup_seconds
