"""`policies.registry`: which policy a model's configuration selects, and each policy's own
configuration for what a user states."""

from __future__ import annotations

import dataclasses

import pytest

from llmscaler.config.resolved import (
    FOUR_PARAMETER,
    AnalyzerSpec,
    ModelConfig,
    PredictiveConfig,
    QueueingModelConfig,
    SaturationConfig,
)
from llmscaler.domain.basics import STRICT_KEYS
from llmscaler.policies import registry
from llmscaler.policies.predictive.state import PredictiveState
from llmscaler.policies.protocol import Intent

TOKEN = SaturationConfig(analyzer_name='saturation')
INTENTS = (
    Intent(),
    Intent(ttft=1.3, itl=0.071),
    Intent(
        ttft=0.5, itl=0.02, startup_seconds=45.0, perf_parms=(('H100', (7.0, 0.2, 40.0, 3e-4)),)
    ),
)


@pytest.mark.parametrize(
    ('config', 'expected'),
    [
        (ModelConfig(), 'saturation-percentage'),
        (ModelConfig(saturation=TOKEN), 'saturation-token'),
        (
            ModelConfig(saturation=SaturationConfig(analyzers=(AnalyzerSpec(name='saturation'),))),
            'saturation-token',
        ),
        (ModelConfig(queueing=QueueingModelConfig()), 'slo-queueing'),
        (ModelConfig(saturation=TOKEN, queueing=QueueingModelConfig()), 'slo-queueing'),
        (ModelConfig(predictive=PredictiveConfig()), 'predictive'),
        # llmscaler-predictive-config wins over wva-queueing-model-config.
        (
            ModelConfig(queueing=QueueingModelConfig(), predictive=PredictiveConfig()),
            'predictive',
        ),
    ],
)
def test_the_first_policy_that_selects_a_configuration_decides(
    config: ModelConfig, expected: str
) -> None:
    assert registry.select(config).name == expected


def test_names_are_unique_and_each_is_found_by_name() -> None:
    names = registry.names()
    assert len(set(names)) == len(names)
    assert {'saturation-percentage', 'saturation-token', 'slo-queueing', 'predictive'} <= set(names)
    assert [registry.by_name(name) for name in names] == list(registry.POLICIES)
    assert registry.by_name('kaito-realtime') is None


@pytest.mark.parametrize('name', registry.names())
@pytest.mark.parametrize('intent', INTENTS)
def test_the_configuration_a_policy_writes_selects_it(name: str, intent: Intent) -> None:
    policy = registry.by_name(name)
    assert policy is not None
    assert registry.select(policy.configure(intent=intent)) is policy


def test_the_slo_policies_take_the_stated_slo_as_explicit_targets() -> None:
    stated = INTENTS[2]
    slo_queueing = registry.by_name('slo-queueing')
    predictive = registry.by_name('predictive')
    assert slo_queueing is not None
    assert predictive is not None
    queueing = slo_queueing.configure(intent=stated).queueing
    # The stated α, β, γ, δ are four-parameter: the entry asks for that model.
    assert queueing == QueueingModelConfig(
        target_ttft=500.0,
        target_itl=20.0,
        perf_parms=stated.perf_parms,
        performance_model=FOUR_PARAMETER,
    )
    settings = predictive.configure(intent=stated).predictive
    assert settings == PredictiveConfig(slo=queueing, startup_seconds=45.0)
    # Nothing stated: WVA infers the targets, and the predictive policy keeps its defaults.
    assert slo_queueing.configure(intent=Intent()).queueing == QueueingModelConfig()
    assert predictive.configure(intent=Intent()).predictive == PredictiveConfig()


@pytest.mark.parametrize('name', registry.names())
def test_a_policy_state_is_frozen_and_read_strictly(name: str) -> None:
    policy = registry.by_name(name)
    assert policy is not None
    if policy.state_type is None:
        return
    assert dataclasses.is_dataclass(policy.state_type)
    assert policy.state_type.__dataclass_params__.frozen  # type: ignore[attr-defined]
    assert policy.state_type.__pydantic_config__ == STRICT_KEYS  # type: ignore[attr-defined]


def test_the_predictive_policy_keeps_its_samples_and_learning() -> None:
    predictive = registry.by_name('predictive')
    assert predictive is not None
    assert predictive.state_type is PredictiveState
