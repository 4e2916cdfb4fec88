"""`--config FILE`: the {settings, configMaps} form, ConfigMap streams/Lists, and file errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmscaler.config.errors import ConfigFileError
from llmscaler.config.file import load_config_file
from llmscaler.config.resolved import Config, CoreSettings, QueueingModelConfig

CTRL = 'workload-variant-autoscaler-system'

SATURATION_CM = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: wva-saturation-scaling-config
  labels:
    app.kubernetes.io/name: workload-variant-autoscaler
data:
  default: |
    kvCacheThreshold: 0.75
  llama-override: |
    model_id: "meta/llama-3.1-8b"
    namespace: "llm-inference"
    scaleUpThreshold: 0.90
    scaleDownBoundary: 0.75
"""


def write(tmp_path: Path, text: str, name: str = 'config.yaml') -> str:
    path = tmp_path / name
    path.write_text(text, encoding='utf-8')
    return str(path)


def test_settings_and_configmaps_form(tmp_path: Path) -> None:
    text = """\
settings:
  GLOBAL_OPT_INTERVAL: 1m
  WVA_SCALE_TO_ZERO: true
  LLMSCALER_K2_WINDOW: 4
configMaps:
  - metadata: {name: wva-saturation-scaling-config}
    data:
      default: "priority: 2"
  - metadata: {name: wva-model-scale-to-zero-config, namespace: team}
    data:
      default: "enable_scale_to_zero: true"
"""
    config, errors = load_config_file(path=write(tmp_path, text), env={})
    assert errors == ()
    assert config.settings == CoreSettings(interval=60.0, scale_to_zero=True, k2_window=4)
    assert config.default.saturation.priority == 2.0  # no namespace → controller namespace
    assert config.model(model_id='m', namespace='team').scale_to_zero.enabled is True
    assert config.model(model_id='m', namespace='other').scale_to_zero.enabled is None


def test_service_classes_in_a_file_give_a_model_its_targets(tmp_path: Path) -> None:
    text = """\
configMaps:
  - metadata: {name: wva-queueing-model-config}
    data:
      default: "sloMultiplier: 3"
  - metadata: {name: service-classes-config}
    data:
      gold.yaml: |
        name: Gold
        priority: 1
        data:
          - model: m
            slo-ttft: 400
            slo-tpot: 30
"""
    config, errors = load_config_file(path=write(tmp_path, text), env={})
    assert errors == ()
    queueing = config.model(model_id='m', namespace='team').queueing
    assert queueing is not None
    assert (queueing.target_ttft, queueing.target_itl, queueing.service_class) == (
        400.0,
        30.0,
        'Gold',
    )


def test_multi_document_configmap_stream(tmp_path: Path) -> None:
    text = (
        SATURATION_CM
        + """\
---
apiVersion: v1
kind: ConfigMap
metadata: {name: kube-root-ca.crt, namespace: workload-variant-autoscaler-system}
data: {ca.crt: "-----BEGIN CERTIFICATE-----"}
---
kind: ConfigMap
metadata: {name: wva-queueing-model-config}
data:
  default: "sloMultiplier: 2.5"
"""
    )
    config, errors = load_config_file(
        path=write(tmp_path, text), env={'GLOBAL_OPT_INTERVAL': '20s'}
    )
    assert errors == ()
    assert config.settings.interval == 20.0
    assert config.default.saturation.kv_cache_threshold == 0.75
    llama = config.model(model_id='meta/llama-3.1-8b', namespace='llm-inference').saturation
    assert (llama.scale_up_threshold, llama.scale_down_boundary) == (0.90, 0.75)
    assert llama.kv_cache_threshold == 0.75
    assert config.default.queueing == QueueingModelConfig(slo_multiplier=2.5)


def test_kubectl_list_and_manager_configmap(tmp_path: Path) -> None:
    text = """\
apiVersion: v1
kind: List
items:
  - kind: ConfigMap
    metadata: {name: wva-manager-config, namespace: workload-variant-autoscaler-system}
    data:
      config.yaml: |
        GLOBAL_OPT_INTERVAL: 45s
        WVA_SCALE_TO_ZERO: true
        PROMETHEUS_BASE_URL: https://prometheus:9090
      LLMSCALER_K2_WINDOW: "7"
  - kind: ConfigMap
    metadata: {name: llmscaler-config, namespace: workload-variant-autoscaler-system}
    data: {GLOBAL_OPT_INTERVAL: 50s}
"""
    config, errors = load_config_file(path=write(tmp_path, text), env={'LLMSCALER_K2_WINDOW': '8'})
    assert errors == ()
    # llmscaler-config beats wva-manager-config; env beats both.
    assert config.settings.interval == 50.0
    assert config.settings.scale_to_zero is True
    assert config.settings.k2_window == 8


def test_precedence_env_over_file_settings_over_manager_configmap(tmp_path: Path) -> None:
    text = """\
settings: {GLOBAL_OPT_INTERVAL: 2m, LLMSCALER_CAPACITY_TTL: 1h}
configMaps:
  - metadata: {name: wva-manager-config}
    data: {GLOBAL_OPT_INTERVAL: 3m, LLMSCALER_CAPACITY_TTL: 2h, LLMSCALER_K2_HISTORY_TTL: 3h}
"""
    path = write(tmp_path, text)
    config, errors = load_config_file(path=path, env={'GLOBAL_OPT_INTERVAL': '1m'})
    assert errors == ()
    assert config.settings.interval == 60.0  # env
    assert config.settings.capacity_ttl == 3600.0  # file settings
    assert config.settings.k2_history_ttl == 10800.0  # manager ConfigMap, 3 · 3600


def test_json_and_top_level_list(tmp_path: Path) -> None:
    document = {
        'configMaps': [
            {
                'metadata': {'name': 'wva-saturation-scaling-config'},
                'data': {'default': 'priority: 4'},
            }
        ]
    }
    config, errors = load_config_file(path=write(tmp_path, json.dumps(document), 'c.json'), env={})
    assert errors == ()
    assert config.default.saturation.priority == 4.0
    items = json.dumps(document['configMaps'])
    config, errors = load_config_file(path=write(tmp_path, items, 'l.json'), env={})
    assert errors == ()
    assert config.default.saturation.priority == 4.0


def test_empty_file_is_an_empty_configuration(tmp_path: Path) -> None:
    config, errors = load_config_file(path=write(tmp_path, '# nothing\n'), env={})
    assert errors == ()
    assert config == Config()


def test_env_none_reads_the_process_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv('GLOBAL_OPT_INTERVAL', '25s')
    config, _ = load_config_file(path=write(tmp_path, '{}'))
    assert config.settings.interval == 25.0


def test_entry_level_problems_are_returned(tmp_path: Path) -> None:
    text = """\
configMaps:
  - metadata: {namespace: x}
    data: {}
  - kind: Secret
    metadata: {name: s}
  - metadata: {name: wva-saturation-scaling-config}
    data:
      default: "priority: 3"
      "m#ns": "kvCacheThreshold: 2"
      broken: 5
  - metadata: {name: wva-manager-config, namespace: elsewhere}
    data: {GLOBAL_OPT_INTERVAL: 5m}
  - "not an object"
settings: {NOPE: 1}
"""
    path = write(tmp_path, text)
    config, errors = load_config_file(path=path, env={})
    assert config.default.saturation.priority == 3.0
    assert config.settings.interval == 30.0
    lines = [str(e) for e in errors]
    assert lines == [
        f"{path}: key 'configMaps[0]': metadata.name is missing",
        f"{path}: key 'configMaps[1]': not a ConfigMap (kind 'Secret'); ignored",
        f"{CTRL}/wva-saturation-scaling-config: key 'broken', value '5': ConfigMap data keys "
        'and values must be strings (quote the value)',
        f"elsewhere/wva-manager-config: manager settings are read only from namespace '{CTRL}'; "
        'ignored',
        f"{path}: key 'configMaps[4]', value 'not an object': not a ConfigMap object "
        '(expected a mapping)',
        f"{path}: settings: key 'NOPE': unknown setting",
        f"{CTRL}/wva-saturation-scaling-config: key 'm#ns', field 'kvCacheThreshold' = '2': "
        'must be in [0, 1]',
    ]


def test_missing_file(tmp_path: Path) -> None:
    path = str(tmp_path / 'absent.yaml')
    with pytest.raises(ConfigFileError) as info:
        load_config_file(path=path, env={})
    assert str(info.value) == f'{path}: open: no such file'


def test_directory(tmp_path: Path) -> None:
    with pytest.raises(ConfigFileError, match='open: is a directory'):
        load_config_file(path=str(tmp_path), env={})


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / 'latin1.yaml'
    path.write_bytes(b'settings: {X: "caf\xe9"}\n')
    with pytest.raises(ConfigFileError) as info:
        load_config_file(path=str(path), env={})
    # 'settings: {X: "caf' is 18 bytes, so the bad byte is at offset 18 (counting from 0).
    assert str(info.value) == f'{path}: byte offset 18: not UTF-8 text'


def test_yaml_error_names_line_and_column(tmp_path: Path) -> None:
    path = write(tmp_path, 'settings:\n  a: [1, 2\n')
    with pytest.raises(ConfigFileError) as info:
        load_config_file(path=path, env={})
    text = str(info.value)
    assert text.startswith(f'{path}: line 3, column 1: does not parse as YAML: ')
    assert '\n' not in text


@pytest.mark.parametrize(
    ('text', 'where_why'),
    [
        ('42', 'document 1: expected a ConfigMap, a List of ConfigMaps, or {settings, configMaps}'),
        ('setting: {}', "top level: unknown top-level key 'setting'"),
        ('settings: [1]', 'settings: must be a mapping'),
        ('configMaps: {a: 1}', 'configMaps: must be a list'),
        ('kind: List\nitems: 3', 'document 1: items: must be a list'),
        ('kind: ConfigMap\n---\nfoo: 1', 'document 2: expected a ConfigMap'),
    ],
)
def test_wrong_shapes_raise(tmp_path: Path, text: str, where_why: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigFileError) as info:
        load_config_file(path=path, env={})
    assert str(info.value).startswith(f'{path}: {where_why}')
