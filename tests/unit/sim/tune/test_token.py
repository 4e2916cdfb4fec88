"""WVA's token-based saturation mode as the tuner searches it: the thresholds searched (no empty
hysteresis band), the ConfigMap read back through the controller's own loader as the very
settings simulated and as that mode, and a tuning of a small case in that mode."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from llmscaler.config.configmaps import SATURATION_CONFIGMAP
from llmscaler.config.file import load_config_file
from llmscaler.config.resolved import ModelConfig, SaturationConfig
from llmscaler.policies import registry
from llmscaler.policies.wva.token import NAME
from llmscaler.sim.scenario.setup import core_config
from llmscaler.sim.tune import output, tunables
from llmscaler.sim.tune.token import TokenSettings, TokenSpace
from tests.support.tune_fixtures import SMALL_TOKEN, Counted, tiny_tune, written_back

MODEL = 'meta-llama/Llama-3.1-8B-Instruct'
BASE = core_config(name=NAME).default


def test_the_recommended_settings_are_the_mode_as_simulate_runs_it() -> None:
    assert registry.select(BASE).name == NAME
    assert TokenSpace().resolve(settings=TokenSpace().recommended(), base=BASE) == BASE
    assert tunables.by_name(NAME) == TokenSpace()


def test_every_choice_keeps_a_hysteresis_band() -> None:
    found = TokenSpace().choices(goal=0.99, base=BASE)
    resolved = [TokenSpace().resolve(settings=s, base=BASE).saturation for s in found]
    assert all(c.scale_down_boundary < c.scale_up_threshold for c in resolved)
    # a boundary of 0.8 above a threshold of 0.75 would leave no band: refused by the ConfigMap
    assert TokenSettings(up=0.75, down=0.8, kv=0.8) not in found
    assert TokenSettings(up=0.95, down=0.8, kv=0.8) in found
    assert len(found) == (2 + 3 + 3) * 3  # (up, down) pairs with down < up, × kv
    assert len(set(found)) == len(found)
    with pytest.raises(ValueError, match='goal'):
        TokenSpace().choices(goal=0.5, base=BASE)


def test_a_choice_sets_the_keys_it_names_and_keeps_the_mode() -> None:
    got = TokenSpace().resolve(settings=TokenSettings(up=0.95, down=0.5, kv=0.9), base=BASE)
    assert got.saturation == SaturationConfig(
        scale_up_threshold=0.95,
        scale_down_boundary=0.5,
        kv_cache_threshold=0.9,
        analyzer_name='saturation',
    )
    assert registry.select(got).name == NAME


def test_the_configmap_reads_back_as_the_settings_and_the_mode(tmp_path: Path) -> None:
    settings = TokenSpace().resolve(settings=TokenSettings(up=0.75, down=0.5, kv=0.7), base=BASE)
    written = output.configmap(
        policy=TokenSpace(), config=settings, model_id=MODEL, namespace='llm'
    )
    assert written['metadata']['name'] == SATURATION_CONFIGMAP
    # a global default choosing the percentage mode, as a cluster may have
    percentage_default = {
        'apiVersion': 'v1',
        'kind': 'ConfigMap',
        'metadata': {'name': SATURATION_CONFIGMAP},
        'data': {'default': yaml.safe_dump({'analyzerName': '', 'scaleUpThreshold': 0.9})},
    }
    path = tmp_path / 'configmap.yaml'
    path.write_text(output.dump([written, percentage_default]))
    config, errors = load_config_file(path=str(path))
    assert errors == ()
    mine = config.model(model_id=MODEL, namespace='llm')
    assert mine.saturation == settings.saturation
    assert registry.select(mine).name == NAME
    # namespace-local: another namespace's model keeps the global choice
    other = config.model(model_id=MODEL, namespace='other')
    assert registry.select(other).name != NAME
    assert other.saturation.scale_up_threshold == 0.9
    assert registry.select(ModelConfig()).name != NAME


@pytest.fixture(scope='module')
def counted() -> Counted:
    return tiny_tune(budget=4, seeds=1, policy=SMALL_TOKEN)


def test_tuning_the_mode_picks_a_configuration_and_writes_its_configmap(
    counted: Counted, tmp_path: Path
) -> None:
    tuned = counted.tuned
    assert registry.select(tuned.settings).name == NAME  # the runs were the token mode's
    found = written_back(counted=counted, out=tmp_path)
    assert found.saturation == tuned.settings.saturation
    assert registry.select(found).name == NAME
    report = (tmp_path / 'report.md').read_text()
    assert '`scaleUpThreshold`' in report
