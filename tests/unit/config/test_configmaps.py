"""Parsing and validation of the three WVA ConfigMaps (WVA v0.9.0, internal/config/).

Also covers `llmscaler.config.errors`, whose one-line rendering every loader relies on.
"""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmscaler.config.configmap_entries import ConfigMapSource
from llmscaler.config.configmaps import (
    QUEUEING_CONFIGMAP,
    SATURATION_CONFIGMAP,
    SCALE_TO_ZERO_CONFIGMAP,
    QueueingOverrides,
    SaturationOverrides,
    parse_queueing_configmap,
    parse_saturation_configmap,
    parse_scale_to_zero_configmap,
)
from llmscaler.config.errors import ConfigError, ConfigFileError, show_value, sort_errors
from llmscaler.config.quota import Limiters
from llmscaler.config.resolved import AnalyzerSpec, ScaleToZeroConfig
from llmscaler.config.yaml_loader import load_yaml

NS = 'wva-system'

SEED_SATURATION = {
    'default': """\
analyzerName: "saturation"
kvCacheThreshold: 0.80
queueLengthThreshold: 5
kvSpareTrigger: 0.10
queueSpareTrigger: 3
scaleUpThreshold: 0.85
scaleDownBoundary: 0.70
enableLimiter: false
priority: 1.0
""",
    'llama-override': """\
model_id: "meta/llama-3.1-8b"
namespace: "llm-inference"
scaleUpThreshold: 0.90
scaleDownBoundary: 0.75
""",
}


def saturation(data: dict[str, str], namespace: str = NS) -> ConfigMapSource:
    return ConfigMapSource(name=SATURATION_CONFIGMAP, namespace=namespace, data=data)


def only_error(errors: tuple[ConfigError, ...]) -> ConfigError:
    assert len(errors) == 1, [str(e) for e in errors]
    return errors[0]


# --- errors -----------------------------------------------------------------------------------


def test_error_names_every_part_on_one_line() -> None:
    error = ConfigError(
        source='wva-system/wva-saturation-scaling-config',
        key='default',
        field='kvCacheThreshold',
        value=show_value(1.5),
        message='must be in [0, 1]',
    )
    assert str(error) == (
        "wva-system/wva-saturation-scaling-config: key 'default', "
        "field 'kvCacheThreshold' = '1.5': must be in [0, 1]"
    )


def test_error_parts_may_be_empty() -> None:
    assert str(ConfigError(source='environment', message='bad')) == 'environment: bad'
    error = ConfigError(source='s', key='K', value='x', message='bad')
    assert str(error) == "s: key 'K', value 'x': bad"


def test_error_newlines_are_escaped_and_warnings_marked() -> None:
    error = ConfigError(source='a\nb', key='k', message='line1\nline2', warning=True)
    assert str(error) == "a\\nb: key 'k': warning: line1\\nline2"


def test_show_value_is_short_and_single_line() -> None:
    assert show_value('abc') == 'abc'
    assert show_value([1, 2]) == '[1, 2]'
    long = show_value('x' * 500)
    assert len(long) == 80
    assert long.endswith('...')
    assert show_value('a\nb') == 'a\\nb'


def test_sort_errors_deduplicates_and_orders() -> None:
    b = ConfigError(source='b', message='m')
    a = ConfigError(source='a', message='m')
    assert sort_errors([b, a, b]) == (a, b)


def test_file_error_is_one_line_and_pickles() -> None:
    error = ConfigFileError(path='/etc/x.yaml', where='line 3, column 2', why='bad\nthing')
    assert str(error) == '/etc/x.yaml: line 3, column 2: bad\\nthing'
    copy = pickle.loads(pickle.dumps(error))
    assert isinstance(copy, ConfigFileError)
    assert copy.line == error.line


# --- saturation -------------------------------------------------------------------------------


def test_seed_000_saturation_example() -> None:
    entries, errors = parse_saturation_configmap(source=saturation(SEED_SATURATION))
    assert errors == ()
    default, override = entries
    assert default.key == 'default'
    assert default.model_id is None
    assert default.namespace is None
    assert default.source == 'wva-system/wva-saturation-scaling-config'
    assert default.values == SaturationOverrides(
        kv_cache_threshold=0.80,
        queue_length_threshold=5.0,
        kv_spare_trigger=0.10,
        queue_spare_trigger=3.0,
        scale_up_threshold=0.85,
        scale_down_boundary=0.70,
        priority=1.0,
        analyzer_name='saturation',
        enable_limiter=False,
    )
    assert override.model_id == 'meta/llama-3.1-8b'
    assert override.namespace == 'llm-inference'
    # Only the two fields the override set are present; the rest stay None for merging.
    assert override.values == SaturationOverrides(scale_up_threshold=0.90, scale_down_boundary=0.75)


def test_hash_key_form_and_empty_namespace_part() -> None:
    data = {
        'meta/llama-3.1-8b#llm-inference': 'kvCacheThreshold: 0.9',
        'granite#': 'queueLengthThreshold: 0',
    }
    entries, errors = parse_saturation_configmap(source=saturation(data))
    assert errors == ()
    by_key = {entry.key: entry for entry in entries}
    hashed = by_key['meta/llama-3.1-8b#llm-inference']
    assert (hashed.model_id, hashed.namespace) == ('meta/llama-3.1-8b', 'llm-inference')
    every_ns = by_key['granite#']
    assert (every_ns.model_id, every_ns.namespace) == ('granite', None)
    # Explicit 0 is kept (deviation from WVA, where 0 means "not set").
    assert every_ns.values.queue_length_threshold == 0.0


def test_explicit_false_and_empty_list_are_kept() -> None:
    data = {'m#ns': 'enableLimiter: false\nanalyzers: []\nscaleToZero: {enabled: false}'}
    (entry,), errors = parse_saturation_configmap(source=saturation(data))
    assert errors == ()
    assert entry.values.enable_limiter is False
    assert entry.values.analyzers == ()
    assert entry.values.scale_to_zero_enabled is False


def test_model_id_field_wins_over_plain_key_and_namespace_is_optional() -> None:
    (entry,), errors = parse_saturation_configmap(
        source=saturation({'anything': 'model_id: m\npriority: 2'})
    )
    assert errors == ()
    assert (entry.model_id, entry.namespace, entry.values.priority) == ('m', None, 2.0)


def test_analyzers_list() -> None:
    text = """\
analyzers:
  - name: saturation
    score: 2
    scaleUpThreshold: 0.9
    scaleDownBoundary: 0.6
    parameters: {window: 5, flag: true, mode: fast}
  - type: queueing
    enabled: false
"""
    (entry,), errors = parse_saturation_configmap(source=saturation({'default': text}))
    assert errors == ()
    assert entry.values.analyzers == (
        AnalyzerSpec(
            name='saturation',
            score=2.0,
            scale_up_threshold=0.9,
            scale_down_boundary=0.6,
            parameters=(('flag', 'true'), ('mode', 'fast'), ('window', '5')),
        ),
        AnalyzerSpec(name='queueing', enabled=False),
    )


@pytest.mark.parametrize(
    ('text', 'field', 'value', 'message'),
    [
        ('kvCacheThreshold: 1.5', 'kvCacheThreshold', '1.5', 'must be in [0, 1]'),
        ('kvCacheThreshold: -0.1', 'kvCacheThreshold', '-0.1', 'must be in [0, 1]'),
        ('kvCacheThreshold: .nan', 'kvCacheThreshold', 'nan', 'finite'),
        ('kvSpareTrigger: .inf', 'kvSpareTrigger', 'inf', 'finite'),
        ('queueLengthThreshold: -1', 'queueLengthThreshold', '-1', 'must be in [0, 1000000]'),
        ('queueSpareTrigger: -3', 'queueSpareTrigger', '-3', 'must be in [0, 1000000]'),
        ('priority: -1', 'priority', '-1', 'must be in [0, 1000000]'),
        # Finite but absurd: each once overflowed the analyzers' sums (decide() raised).
        ('queueLengthThreshold: 1e308', 'queueLengthThreshold', '1e+308', 'in [0, 1000000]'),
        ('queueLengthThreshold: 1000001', 'queueLengthThreshold', '1000001', 'in [0, 1000000]'),
        ('queueSpareTrigger: 2000000', 'queueSpareTrigger', '2000000', 'in [0, 1000000]'),
        ('priority: 1e300', 'priority', '1e+300', 'in [0, 1000000]'),
        (
            'analyzers: [{name: a, score: 1e308}]',
            'analyzers[0].score',
            '1e+308',
            'in [0, 1000000]',
        ),
        ('scaleUpThreshold: 0', 'scaleUpThreshold', '0', 'must be in (0, 1]'),
        ('scaleDownBoundary: 1.2', 'scaleDownBoundary', '1.2', 'must be in (0, 1]'),
        ('kvCacheThreshold: "0.8"', 'kvCacheThreshold', '0.8', 'not a string'),
        ('kvCacheThreshold: true', 'kvCacheThreshold', 'True', 'not a boolean'),
        ('enableLimiter: "yes"', 'enableLimiter', 'yes', 'true or false'),
        ('enableLimiter: 1', 'enableLimiter', '1', 'true or false'),
        ('analyzerName: 3', 'analyzerName', '3', 'must be a string'),
        ('kvCacheTreshold: 0.8', 'kvCacheTreshold', '0.8', 'unknown field'),
        ('scaleToZero: true', 'scaleToZero', 'True', 'must be a mapping'),
        ('scaleToZero: {enable: true}', 'scaleToZero.enable', 'True', 'unknown field'),
        ('scaleToZero: {enabled: 1}', 'scaleToZero.enabled', '1', 'true or false'),
        ('analyzers: {name: x}', 'analyzers', "{'name': 'x'}", 'must be a list'),
        ('analyzers: [{score: 1}]', 'analyzers[0]', "{'score': 1}", 'non-empty name'),
        ('analyzers: [{name: a, type: b}]', 'analyzers[0]', '', 'name and type differ'),
        ('analyzers: [{name: a, weight: 1}]', 'analyzers[0].weight', '1', 'unknown field'),
        ('analyzers: [{name: a, score: x}]', 'analyzers[0].score', 'x', 'must be a number'),
        ('analyzers: [{name: a}, {name: a}]', 'analyzers[1]', 'a', 'duplicate analyzer'),
        (
            'analyzers: [{name: a, parameters: {p: [1]}}]',
            'analyzers[0].parameters.p',
            '[1]',
            'string, number or boolean',
        ),
        (
            'analyzers: [{name: a, scaleUpThreshold: 0.5, scaleDownBoundary: 0.5}]',
            'analyzers[0]',
            '',
            'must be greater than scaleDownBoundary',
        ),
        (
            'kvCacheThreshold: 0.05\nkvSpareTrigger: 0.10',
            'kvCacheThreshold',
            '0.05',
            'must be >= kvSpareTrigger',
        ),
        (
            'scaleUpThreshold: 0.7\nscaleDownBoundary: 0.7',
            'scaleUpThreshold',
            '0.7',
            'must be greater than scaleDownBoundary 0.7',
        ),
        ('limiters: []', 'limiters', '[]', 'only in the default entry'),
        ('model_id: ""', 'model_id', '', 'non-empty string'),
        ('model_id: m\nnamespace: 3', 'namespace', '3', 'must be a string'),
    ],
)
def test_invalid_entry_is_rejected_whole_and_named(
    text: str, field: str, value: str, message: str
) -> None:
    # The bad entry sits next to a valid one, which must still load.
    data = {'bad#ns': text, 'default': 'priority: 2'}
    entries, errors = parse_saturation_configmap(source=saturation(data))
    assert [entry.key for entry in entries] == ['default']
    error = only_error(errors)
    assert error.source == 'wva-system/wva-saturation-scaling-config'
    assert error.key == 'bad#ns'
    assert error.field == field
    if value:
        assert error.value == value
    assert message in error.message
    assert '\n' not in str(error)


def test_every_bad_field_of_an_entry_is_reported() -> None:
    entries, errors = parse_saturation_configmap(
        source=saturation({'default': 'kvCacheThreshold: 2\nfoo: 1\npriority: -1'})
    )
    assert entries == ()
    assert [e.field for e in errors] == ['foo', 'kvCacheThreshold', 'priority']


def test_yaml_that_does_not_parse_and_non_mappings() -> None:
    data = {
        'a#ns': 'kvCacheThreshold: [0.8',
        'b#ns': '- 1\n- 2',
        'c#ns': 'just text',
        'd#ns': '',  # an empty entry is valid and sets nothing
    }
    entries, errors = parse_saturation_configmap(source=saturation(data))
    assert [entry.key for entry in entries] == ['d#ns']
    assert entries[0].values == SaturationOverrides()
    assert [e.key for e in errors] == ['a#ns', 'b#ns', 'c#ns']
    assert 'YAML not accepted (line 1' in errors[0].message
    assert 'must be a YAML mapping, not a list' in errors[1].message
    assert 'not a string' in errors[2].message


def test_non_string_data_value() -> None:
    source = ConfigMapSource(name=SATURATION_CONFIGMAP, namespace=NS, data={'default': 3})  # type: ignore[dict-item]
    entries, errors = parse_saturation_configmap(source=source)
    assert entries == ()
    assert 'data value must be a string' in only_error(errors).message


def test_default_entry_cannot_name_a_model_and_other_keys_need_one() -> None:
    data = {'default': 'model_id: m', 'plain': 'priority: 1', 'x#y': 'namespace: z'}
    entries, errors = parse_saturation_configmap(source=saturation(data))
    assert entries == ()
    messages = {(e.key, e.field): e.message for e in errors}
    assert messages[('default', 'model_id')] == 'not allowed in the default entry'
    assert 'neither' in messages[('plain', '')]
    assert 'differs from the namespace' in messages[('x#y', 'namespace')]


def test_limiters_read_in_default_only() -> None:
    (entry,), errors = parse_saturation_configmap(
        source=saturation({'default': 'limiters: [{type: inventory}]'})
    )
    assert errors == ()
    assert entry.values == SaturationOverrides(limiters=Limiters(inventory=True))
    _, errors = parse_saturation_configmap(source=saturation({'default': 'limiters: gpu'}))
    assert 'must be a list' in only_error(errors).message
    _, errors = parse_saturation_configmap(
        source=saturation({'default': 'limiters: [{type: gpu}]'})
    )
    assert only_error(errors).field == 'limiters[0].type'


def test_duplicate_model_first_key_in_sort_order_wins() -> None:
    data = {
        'z-entry': 'model_id: m\nnamespace: ns\npriority: 3',
        'a-entry': 'model_id: m\nnamespace: ns\npriority: 1',
        'm#ns': 'priority: 2',
        'other-ns': 'model_id: m\nnamespace: ns2\npriority: 4',
    }
    entries, errors = parse_saturation_configmap(source=saturation(data))
    assert [(e.key, e.values.priority) for e in entries] == [('a-entry', 1.0), ('other-ns', 4.0)]
    assert [e.key for e in errors] == ['m#ns', 'z-entry']
    assert all("key 'a-entry' (first in sort order) is used" in e.message for e in errors)


def test_yaml_12_exponent_floats_are_numbers() -> None:
    (entry,), errors = parse_saturation_configmap(source=saturation({'default': 'priority: 1e-3'}))
    assert errors == ()
    assert entry.values.priority == pytest.approx(0.001)
    assert load_yaml(text='a: 15') == {'a': 15}


@given(st.dictionaries(st.text(max_size=12), st.text(max_size=60), max_size=5))
def test_never_raises_and_accounts_for_every_key(data: dict[str, str]) -> None:
    entries, errors = parse_saturation_configmap(source=saturation(data))
    accepted = {entry.key for entry in entries}
    rejected = {error.key for error in errors}
    assert accepted | rejected == set(data)
    assert accepted.isdisjoint(rejected)
    assert [entry.key for entry in entries] == sorted(accepted)


# --- scale to zero ----------------------------------------------------------------------------


def scale_to_zero(data: dict[str, str]) -> ConfigMapSource:
    return ConfigMapSource(name=SCALE_TO_ZERO_CONFIGMAP, namespace=NS, data=data)


def test_seed_000_scale_to_zero_example() -> None:
    data = {
        'default': 'enable_scale_to_zero: true\nretention_period: "10m"',
        'llama-override': 'model_id: "meta/llama-3.1-8b"\nenable_scale_to_zero: false',
    }
    entries, errors = parse_scale_to_zero_configmap(source=scale_to_zero(data))
    assert errors == ()
    default, override = entries
    assert default.values == ScaleToZeroConfig(enabled=True, retention_period=600.0)
    assert (override.model_id, override.namespace) == ('meta/llama-3.1-8b', None)
    assert override.values == ScaleToZeroConfig(enabled=False, retention_period=None)


@pytest.mark.parametrize(
    ('text', 'message'),
    [
        ('retention_period: 15', 'a unit is required'),  # WVA would read 15 ns
        ('retention_period: "15"', 'a unit is required'),
        ('retention_period: "0s"', 'must be a positive duration'),
        ('retention_period: "-5m"', 'negative'),
        ('retention_period: [1]', 'Go duration string'),
        ('retention_period: 168h1s', 'at most 168h (7 days)'),
        ('retention_period: 2562047h', 'at most 168h (7 days)'),
        ('enable_scale_to_zero: "true"', 'true or false'),
        ('enable_scale_to_zero: true\nretention: 5m', 'unknown field'),
    ],
)
def test_scale_to_zero_invalid(text: str, message: str) -> None:
    entries, errors = parse_scale_to_zero_configmap(source=scale_to_zero({'default': text}))
    assert entries == ()
    assert message in only_error(errors).message


def test_retention_of_seven_days_is_the_longest_accepted() -> None:
    (entry,), _ = parse_scale_to_zero_configmap(
        source=scale_to_zero({'default': 'retention_period: 168h'})
    )
    assert entry.values.retention_period == 7 * 24 * 3600.0


def test_retention_over_24h_warns_but_loads() -> None:
    (entry,), errors = parse_scale_to_zero_configmap(
        source=scale_to_zero({'default': 'retention_period: 25h'})
    )
    assert entry.values.retention_period == 90000.0  # 25 · 3600
    warning = only_error(errors)
    assert warning.warning
    assert warning.field == 'retention_period'
    assert str(warning).endswith('warning: longer than 24h')


def test_scale_to_zero_duplicate_model_ids() -> None:
    data = {
        'b': 'model_id: m\nenable_scale_to_zero: true',
        'a': 'model_id: m\nenable_scale_to_zero: false',
    }
    (entry,), errors = parse_scale_to_zero_configmap(source=scale_to_zero(data))
    assert (entry.key, entry.values.enabled) == ('a', False)
    assert only_error(errors).key == 'b'


# --- queueing ---------------------------------------------------------------------------------


def queueing(data: dict[str, str]) -> ConfigMapSource:
    return ConfigMapSource(name=QUEUEING_CONFIGMAP, namespace=NS, data=data)


def test_seed_000_queueing_example() -> None:
    data = {
        'default': 'sloMultiplier: 3.0\ntuningEnabled: true',
        'llama-slo': (
            'model_id: "meta/llama-3.1-8b"\nnamespace: "llm-inference"\n'
            'targetTTFT: 500\ntargetITL: 100'
        ),
    }
    (default, slo), errors = parse_queueing_configmap(source=queueing(data))
    assert errors == ()
    assert default.values == QueueingOverrides(slo_multiplier=3.0, tuning_enabled=True)
    assert slo.values == QueueingOverrides(target_ttft=500.0, target_itl=100.0)
    assert (slo.model_id, slo.namespace) == ('meta/llama-3.1-8b', 'llm-inference')


@pytest.mark.parametrize(
    ('text', 'field', 'message'),
    [
        ('sloMultiplier: 1', 'sloMultiplier', 'must be in (1, 100]'),
        ('sloMultiplier: 0.5', 'sloMultiplier', 'must be in (1, 100]'),
        ('sloMultiplier: 101', 'sloMultiplier', 'must be in (1, 100]'),
        ('tuningEnabled: "no"', 'tuningEnabled', 'true or false'),
        ('targetTTFT: 500', 'targetTTFT', 'set together'),
        ('targetITL: 100', 'targetITL', 'set together'),
        ('targetTTFT: 0\ntargetITL: 100', 'targetTTFT', 'must be in (0, 3600000]'),
        ('targetTTFT: 500\ntargetITL: 3600001', 'targetITL', 'must be in (0, 3600000]'),
        ('targetTTFT: 500\ntargetITL: .inf', 'targetITL', 'finite'),
    ],
)
def test_queueing_invalid(text: str, field: str, message: str) -> None:
    entries, errors = parse_queueing_configmap(source=queueing({'m#ns': text}))
    assert entries == ()
    error = only_error(errors)
    assert (error.key, error.field) == ('m#ns', field)
    assert message in error.message


def test_queueing_huge_numbers_are_refused() -> None:
    # 401 digits are refused by the YAML reader; 1e999 reads as +Inf, which is not finite.
    text = f'targetTTFT: {10**400}\ntargetITL: 1'
    _, errors = parse_queueing_configmap(source=queueing({'m#ns': text}))
    assert 'a number longer than 64 characters' in only_error(errors).message
    _, errors = parse_queueing_configmap(
        source=queueing({'m#ns': 'targetTTFT: 1e999\ntargetITL: 1'})
    )
    assert 'finite' in only_error(errors).message
