"""Hostile configuration text: every failure is one bounded line, found before the cost grows.

The inputs below each made PyYAML's SafeLoader raise something other than `YAMLError` (a date
out of range, a tagged scalar that is not its tag, a 5,000-digit integer, 20,000 `[`), or cost
without bound (aliases). They must be one-line errors of the ConfigMap entry, or of the config
file, and the valid rest must still load.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from llmscaler.config.configmap_entries import ConfigMapSource
from llmscaler.config.configmaps import (
    SATURATION_CONFIGMAP,
    SaturationOverrides,
    parse_saturation_configmap,
)
from llmscaler.config.errors import ConfigFileError
from llmscaler.config.file import load_config_file
from llmscaler.config.yaml_loader import (
    CONFIGMAP_MAX_BYTES,
    CONFIGMAP_MAX_NODES,
    ENTRY_LIMITS,
    FILE_LIMITS,
    MAX_NUMBER_CHARS,
    YamlProblem,
    load_yaml,
    load_yaml_documents,
)

NS = 'wva-system'

# Nine levels of nine aliases: 9**9 leaves once expanded, in 430 bytes.
ALIAS_BOMB = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + ''.join(
    f'{b}: &{b} [{", ".join([f"*{a}"] * 9)}]\n' for a, b in zip('abcdefgh', 'bcdefghi', strict=True)
)

# Field text → the problem named in the entry's error (the reader's or the field's).
HOSTILE = {
    'date out of range': ('kvCacheThreshold: 2001-13-45', 'must be a number, not a string'),
    'tagged float': ('kvCacheThreshold: !!float 0.5-', 'not a valid !!float value'),
    'tagged int': ('queueLengthThreshold: !!int "7x"', 'not a valid !!int value'),
    '5,000 digits': (f'queueLengthThreshold: {"9" * 5000}', 'a number longer than 64 characters'),
    '20,000 [': ('[' * 20_000, 'nested deeper than 32 levels'),
    'alias bomb': (ALIAS_BOMB, 'anchors (&name) are not accepted'),
    'alias': ('kvCacheThreshold: *x', 'aliases (*name) are not accepted'),
    'timestamp tag': ('kvCacheThreshold: !!timestamp 2001-12-14', 'tag !!timestamp'),
    'binary tag': ('kvCacheThreshold: !!binary aGk=', 'tag !!binary'),
    'python tag': ('kvCacheThreshold: !!python/name:os.system', 'tag !!python/name:os.system'),
    'set': ('!!set {a, b}', 'tag !!set'),
    'deep blocks': (''.join(f'{" " * i}k:\n' for i in range(40)), 'nested deeper than 32'),
    'many nodes': ('[' + '1,' * 12_000 + ']', 'more than 10000 YAML nodes'),
    'long entry': ('#' * (ENTRY_LIMITS.max_bytes + 1), f'longer than {ENTRY_LIMITS.max_bytes}'),
    'control character': ('kvCacheThreshold: "\x07"', 'unacceptable character'),
}


def saturation(data: dict[str, str]) -> ConfigMapSource:
    return ConfigMapSource(name=SATURATION_CONFIGMAP, namespace=NS, data=data)


@pytest.mark.parametrize('name', sorted(HOSTILE))
def test_hostile_entry_is_one_short_line_and_the_others_load(name: str) -> None:
    text, problem = HOSTILE[name]
    data = {'bad#ns': text, 'good#ns': 'kvCacheThreshold: 0.5'}
    entries, errors = parse_saturation_configmap(source=saturation(data))
    assert [(e.key, e.values) for e in entries] == [
        ('good#ns', SaturationOverrides(kv_cache_threshold=0.5))
    ]
    (error,) = errors
    line = str(error)
    assert error.key == 'bad#ns'
    assert problem in line
    assert '\n' not in line
    assert len(line) < 300  # never the value itself, whatever its size


def test_refused_yaml_names_line_and_column() -> None:
    with pytest.raises(YamlProblem) as caught:
        load_yaml(text='a: 1\nb: !!int "7x"\n')
    assert (caught.value.where, caught.value.problem) == (
        'line 2, column 4',
        'not a valid !!int value',
    )


def test_plain_data_and_yaml_12_floats_still_read() -> None:
    text = 'a: 1\nb: 1e-3\nc: [true, null, "x", 0.5]\nd: {e: no}\nf: 2001-12-14\n<<: {g: 1}\n'
    assert load_yaml(text=text) == {
        'a': 1,
        'b': 0.001,
        'c': [True, None, 'x', 0.5],
        'd': {'e': False},
        'f': '2001-12-14',  # timestamps are text: no field of ours is a date
        '<<': {'g': 1},  # merge keys need aliases to be useful: plain text too
    }
    number = '9' * MAX_NUMBER_CHARS
    assert load_yaml(text=f'n: {number}') == {'n': int(number)}


def test_documents_share_one_node_limit() -> None:
    text = '---\n'.join('[1, 2, 3]\n' for _ in range(10))
    assert len(load_yaml_documents(text=text, limits=FILE_LIMITS)) == 10
    with pytest.raises(YamlProblem, match='more than 10000 YAML nodes'):
        load_yaml_documents(text='---\n'.join('[1, 2, 3, 4]\n' for _ in range(2001)))


def test_a_configmap_over_its_node_budget_is_rejected_whole() -> None:
    # Each entry is under the per-entry cap; together they are over the ConfigMap's.
    per_entry = ENTRY_LIMITS.max_nodes // 2
    analyzers = ', '.join(f'{{name: a{i}}}' for i in range(per_entry // 3))
    count = CONFIGMAP_MAX_NODES // per_entry + 1
    data = {f'e{i}': f'model_id: m{i}\nanalyzers: [{analyzers}]' for i in range(count)}
    entries, errors = parse_saturation_configmap(source=saturation(data))
    assert entries == ()
    assert f'more than {CONFIGMAP_MAX_NODES} YAML nodes in all entries; rejected' in str(errors[-1])


def test_a_configmap_over_its_size_is_rejected_whole() -> None:
    data = {f'e{i}': '#' * 60_000 for i in range(CONFIGMAP_MAX_BYTES // 60_000 + 1)}
    data['default'] = 'kvCacheThreshold: 0.5'
    entries, errors = parse_saturation_configmap(source=saturation(data))
    assert entries == ()
    (error,) = errors
    assert f'over the limit of {CONFIGMAP_MAX_BYTES}; rejected' in str(error)


def test_secret_looking_field_value_is_never_shown() -> None:
    data = {'default': 'analyzers: [{name: a, parameters: {apiKey: [sk-live-123]}}]'}
    (error,) = parse_saturation_configmap(source=saturation(data))[1]
    assert 'analyzers[0].parameters.apiKey' in str(error)
    assert 'sk-live' not in str(error)


# --- the config file -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ('text', 'why'),
    [
        ('settings: {GLOBAL_OPT_INTERVAL: !!float 0.5-}', 'not a valid !!float value'),
        ('settings: {LLMSCALER_K2_WINDOW: !!int "7x"}', 'not a valid !!int value'),
        (f'settings: {{LLMSCALER_K2_WINDOW: {"9" * 5000}}}', 'a number longer than 64'),
        ('[' * 20_000, 'nested deeper than 64 levels'),
        (ALIAS_BOMB, 'anchors (&name) are not accepted'),
        ('settings: {x: !!timestamp 2001-13-45}', 'tag !!timestamp is not accepted'),
    ],
)
def test_hostile_config_file_is_one_config_file_error(tmp_path: Path, text: str, why: str) -> None:
    path = tmp_path / 'config.yaml'
    path.write_text(text, encoding='utf-8')
    with pytest.raises(ConfigFileError) as caught:
        load_config_file(path=str(path), env={})
    line = str(caught.value)
    assert line.startswith(f'{path}: line 1, column ')
    assert why in line
    assert '\n' not in line
    assert len(line) < len(str(path)) + 300


def test_config_file_over_its_size_is_refused_unread(tmp_path: Path) -> None:
    path = tmp_path / 'config.yaml'
    path.write_bytes(b'#' * (FILE_LIMITS.max_bytes + 1))
    with pytest.raises(ConfigFileError) as caught:
        load_config_file(path=str(path), env={})
    assert str(caught.value) == f'{path}: size: larger than {FILE_LIMITS.max_bytes} bytes'


def test_date_out_of_range_in_the_file_is_text_and_a_setting_error(tmp_path: Path) -> None:
    path = tmp_path / 'config.yaml'
    path.write_text('settings: {GLOBAL_OPT_INTERVAL: 2001-13-45}', encoding='utf-8')
    config, errors = load_config_file(path=str(path), env={})
    assert [str(e) for e in errors] == [
        f"{path}: settings: key 'GLOBAL_OPT_INTERVAL', value '2001-13-45': "
        "duration '2001-13-45': unknown unit '-' (ns, us, ms, s, m, h)"
    ]
    assert config.settings.interval == 30.0


def test_hostile_entry_inside_the_file_is_an_entry_error(tmp_path: Path) -> None:
    path = tmp_path / 'config.yaml'
    path.write_text(
        f"""\
configMaps:
- metadata: {{name: {SATURATION_CONFIGMAP}, namespace: {NS}}}
  data:
    default: 'kvCacheThreshold: !!int 7x'
    m#ns: 'kvCacheThreshold: 0.5'
""",
        encoding='utf-8',
    )
    config, errors = load_config_file(path=str(path), env={}, controller_namespace=NS)
    assert [str(e) for e in errors] == [
        f"{NS}/{SATURATION_CONFIGMAP}: key 'default': YAML not accepted (line 1, column 19): "
        'not a valid !!int value'
    ]
    assert config.model(model_id='m', namespace='ns').saturation.kv_cache_threshold == 0.5


def test_secret_in_an_embedded_manager_file_is_never_shown(tmp_path: Path) -> None:
    path = tmp_path / 'config.yaml'
    path.write_text(
        f"""\
configMaps:
- metadata: {{name: wva-manager-config, namespace: {NS}}}
  data:
    config.yaml: 'PROMETHEUS_BEARER_TOKN: sk-live-123'
    PROMETHEUS_PASSWORD: [sk-live-456]
""",
        encoding='utf-8',
    )
    _, errors = load_config_file(path=str(path), env={}, controller_namespace=NS)
    text = '\n'.join(str(e) for e in errors)
    assert "key 'PROMETHEUS_BEARER_TOKN': unknown setting" in text
    assert "key 'PROMETHEUS_PASSWORD': ConfigMap data keys and values must be strings" in text
    assert 'sk-live' not in text
