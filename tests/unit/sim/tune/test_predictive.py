"""The predictive policy's space: targets from the goal's error budget, what a choice sets, and
its ConfigMap read back through the controller's own loader as the very settings simulated."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from llmscaler.config.file import load_config_file
from llmscaler.config.resolved import (
    PERIODIC_OFF,
    ModelConfig,
    PredictiveConfig,
    QueueingModelConfig,
)
from llmscaler.sim.tune import output
from llmscaler.sim.tune.predictive import (
    PredictiveSettings,
    PredictiveSpace,
    margin_targets,
    over,
)

MODEL = 'meta-llama/Llama-3.1-8B-Instruct'


def test_targets_scale_the_error_budget() -> None:
    assert margin_targets(goal=0.99, margins=(2.0, 1.0, 0.5)) == (0.98, 0.99, 0.995)
    assert margin_targets(goal=0.9, margins=(10.0, 1.0)) == (0.9,)  # 0 is out of (0.5, 1)
    with pytest.raises(ValueError, match='goal'):
        margin_targets(goal=1.0, margins=(1.0,))


def test_a_choice_sets_the_keys_it_names() -> None:
    base = PredictiveConfig(startup_seconds=90.0)
    got = over(settings=PredictiveSettings(target=0.995, delay=120.0, horizon=1.5), base=base)
    assert (got.attainment, got.scale_down_delay, got.startup_seconds) == (0.995, 120.0, 135.0)
    assert got.quantile > base.quantile  # a higher target sizes for a higher quantile
    assert got.history_seconds == base.history_seconds
    assert over(settings=PredictiveSettings(), base=base) == base


def _settings() -> ModelConfig:
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
    tuned = PredictiveSettings(target=0.995, delay=120.0, horizon=1.5)
    return PredictiveSpace().resolve(settings=tuned, base=ModelConfig(predictive=base))


def test_the_configmap_reads_back_as_the_settings(tmp_path: Path) -> None:
    settings = _settings()
    path = tmp_path / 'configmap.yaml'
    written = output.configmap(
        policy=PredictiveSpace(), config=settings, model_id=MODEL, namespace='llm'
    )
    path.write_text(output.dump([written]))
    config, errors = load_config_file(path=str(path))
    assert errors == ()
    assert config.model(model_id=MODEL, namespace='llm').predictive == settings.predictive
    # namespace-local: another namespace's model keeps its analyzer
    assert config.model(model_id=MODEL, namespace='other').predictive is None


@pytest.mark.parametrize(
    'recurrence', [{'periodic': PERIODIC_OFF}, {'period_seconds': 600.0}], ids=['off', 'fixed']
)
def test_the_recurrence_reads_back_as_simulated(tmp_path: Path, recurrence: dict[str, Any]) -> None:
    settings = _settings()
    assert settings.predictive is not None
    settings = replace(settings, predictive=replace(settings.predictive, **recurrence))
    written = output.configmap(
        policy=PredictiveSpace(), config=settings, model_id=MODEL, namespace='llm'
    )
    path = tmp_path / 'configmap.yaml'
    path.write_text(output.dump([written]))
    config, errors = load_config_file(path=str(path))
    assert errors == ()
    assert config.model(model_id=MODEL, namespace='llm').predictive == settings.predictive


def test_a_three_parameter_model_is_refused() -> None:
    settings = _settings()
    assert settings.predictive is not None
    three = replace(
        settings,
        predictive=replace(
            settings.predictive, slo=QueueingModelConfig(perf_parms=(('H100', (1.0, 2.0, 3.0)),))
        ),
    )
    with pytest.raises(ValueError, match='four parameters'):
        output.configmap(policy=PredictiveSpace(), config=three, model_id=MODEL, namespace='llm')
