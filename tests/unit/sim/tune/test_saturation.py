"""WVA's percentage-based saturation mode as the tuner searches it: the thresholds searched, the
ConfigMap read back through the controller's own loader as the very settings simulated (and
as that mode), and a tuning of a small case in that mode."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from llmscaler.config.configmaps import SATURATION_CONFIGMAP
from llmscaler.config.file import load_config_file
from llmscaler.config.resolved import ModelConfig, SaturationConfig
from llmscaler.policies import registry
from llmscaler.policies.wva.percentage import NAME
from llmscaler.sim.tune import output
from llmscaler.sim.tune.saturation import SaturationSettings, SaturationSpace
from tests.support.tune_fixtures import SMALL_SATURATION, Counted, tiny_tune, written_back

MODEL = 'meta-llama/Llama-3.1-8B-Instruct'


def test_no_choice_has_a_trigger_its_spare_room_cannot_reach() -> None:
    found = SaturationSpace().choices(goal=0.99, base=ModelConfig())
    resolved = [SaturationSpace().resolve(settings=s, base=ModelConfig()) for s in found]
    assert all(
        c.saturation.queue_spare_trigger <= c.saturation.queue_length_threshold
        and c.saturation.kv_spare_trigger <= c.saturation.kv_cache_threshold
        for c in resolved
    )
    # a queue threshold of 3 with a trigger of 6 (spare ×2) would add a replica every cycle
    assert SaturationSettings(kv=0.8, queue=3.0, spare=2.0) not in found
    assert SaturationSettings(kv=0.8, queue=10.0, spare=2.0) in found
    assert len(found) == 3 * 3 * 3 - 3 * 2  # less queue 3 and 5 with spare ×2
    with pytest.raises(ValueError, match='goal'):
        SaturationSpace().choices(goal=1.0, base=ModelConfig())


def test_a_choice_sets_the_keys_it_names() -> None:
    got = SaturationSpace().resolve(
        settings=SaturationSettings(kv=0.9, queue=10.0, spare=0.5), base=ModelConfig()
    )
    assert got.saturation == SaturationConfig(
        kv_cache_threshold=0.9,
        queue_length_threshold=10.0,
        kv_spare_trigger=0.05,
        queue_spare_trigger=1.5,
    )
    assert got.predictive is None
    assert got.queueing is None


def test_the_configmap_reads_back_as_the_settings_and_the_mode(tmp_path: Path) -> None:
    settings = SaturationSpace().resolve(
        settings=SaturationSettings(kv=0.7, queue=3.0, spare=0.5), base=ModelConfig()
    )
    written = output.configmap(
        policy=SaturationSpace(), config=settings, model_id=MODEL, namespace='llm'
    )
    assert written['metadata'] == {
        'name': SATURATION_CONFIGMAP,
        'namespace': 'llm',
        'labels': output.LABELS,
    }
    # a global default choosing the token analyzer, as a cluster may have
    token_default = {
        'apiVersion': 'v1',
        'kind': 'ConfigMap',
        'metadata': {'name': SATURATION_CONFIGMAP},
        'data': {'default': yaml.safe_dump({'analyzerName': 'saturation'})},
    }
    path = tmp_path / 'configmap.yaml'
    path.write_text(output.dump([written, token_default]))
    config, errors = load_config_file(path=str(path))
    assert errors == ()
    mine = config.model(model_id=MODEL, namespace='llm')
    assert mine.saturation == settings.saturation
    assert registry.select(mine).name == NAME
    # namespace-local: another namespace's model keeps the global choice
    assert registry.select(config.model(model_id=MODEL, namespace='other')).name != NAME


@pytest.fixture(scope='module')
def counted() -> Counted:
    return tiny_tune(budget=4, seeds=1, policy=SMALL_SATURATION)


def test_tuning_the_mode_picks_a_configuration_and_writes_its_configmap(
    counted: Counted, tmp_path: Path
) -> None:
    tuned = counted.tuned
    assert tuned.settings.predictive is None  # the runs were the saturation mode's
    found = written_back(counted=counted, out=tmp_path)
    assert found.saturation == tuned.settings.saturation
    assert found.predictive is None
    assert registry.select(found).name == NAME
    report = (tmp_path / 'report.md').read_text()
    assert f'`{SATURATION_CONFIGMAP}`' in report
    assert '`kvCacheThreshold`' in report
