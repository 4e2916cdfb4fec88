"""Manager settings: precedence CLI > env > file > ConfigMap > defaults, per key."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmscaler.config.resolved import CoreSettings
from llmscaler.config.settings import PASSTHROUGH_KEYS, SETTINGS, load_settings, parse_bool


def load(
    *,
    cli: dict[str, str] | None = None,
    env: dict[str, str] | None = None,
    file: dict[str, object] | None = None,
    configmap: dict[str, str] | None = None,
) -> tuple[CoreSettings, list[str]]:
    settings, errors = load_settings(
        cli=cli or {}, env=env or {}, file=file or {}, configmap=configmap or {}
    )
    return settings, [str(e) for e in errors]


def test_defaults() -> None:
    settings, errors = load()
    assert errors == []
    assert settings == CoreSettings()
    assert settings.interval == 30.0
    assert (settings.fresh_threshold, settings.stale_threshold) == (60.0, 120.0)
    assert settings.unavailable_threshold == 300.0
    assert settings.k2_window == 10
    assert settings.k2_history_ttl == 86400.0  # 24 h
    assert settings.capacity_ttl == 604800.0  # 168 h
    assert settings.scale_to_zero is False
    assert settings.default_retention_period == 600.0


def test_every_key_parses() -> None:
    settings, errors = load(
        env={
            'GLOBAL_OPT_INTERVAL': '15s',
            'WVA_SCALE_TO_ZERO': 'TRUE',
            'PROMETHEUS_METRICS_CACHE_FRESH_THRESHOLD': '30s',
            'PROMETHEUS_METRICS_CACHE_STALE_THRESHOLD': '90s',
            'PROMETHEUS_METRICS_CACHE_UNAVAILABLE_THRESHOLD': '10m',
            'LLMSCALER_K2_WINDOW': '20',
            'LLMSCALER_K2_HISTORY_TTL': '12h',
            'LLMSCALER_CAPACITY_TTL': '48h',
            'LLMSCALER_SCALE_TO_ZERO_RETENTION': '1h30m',
        }
    )
    assert errors == []
    assert settings == CoreSettings(
        interval=15.0,
        scale_to_zero=True,
        fresh_threshold=30.0,
        stale_threshold=90.0,
        unavailable_threshold=600.0,
        k2_window=20,
        k2_history_ttl=43200.0,  # 12 · 3600
        capacity_ttl=172800.0,  # 48 · 3600
        default_retention_period=5400.0,  # 3600 + 30 · 60
    )


def test_precedence_cli_env_file_configmap() -> None:
    key = 'GLOBAL_OPT_INTERVAL'
    layers = {'cli': '1m', 'env': '2m', 'file': '3m', 'configmap': '4m'}
    settings, _ = load(
        cli={key: layers['cli']},
        env={key: layers['env']},
        file={key: layers['file']},
        configmap={key: layers['configmap']},
    )
    assert settings.interval == 60.0
    settings, _ = load(env={key: '2m'}, file={key: '3m'}, configmap={key: '4m'})
    assert settings.interval == 120.0
    settings, _ = load(file={key: '3m'}, configmap={key: '4m'})
    assert settings.interval == 180.0
    settings, _ = load(configmap={key: '4m'})
    assert settings.interval == 240.0


def test_invalid_value_falls_through_to_the_next_layer() -> None:
    settings, errors = load(
        cli={'GLOBAL_OPT_INTERVAL': '15'},
        env={'GLOBAL_OPT_INTERVAL': '500ms'},
        file={'GLOBAL_OPT_INTERVAL': '45s'},
    )
    assert settings.interval == 45.0
    assert errors == [
        "command line: key 'GLOBAL_OPT_INTERVAL', value '15': duration '15' has no unit; "
        'a unit is required (ns, us, ms, s, m, h), e.g. "15s"',
        "environment: key 'GLOBAL_OPT_INTERVAL', value '500ms': must be at least 1s",
    ]


def test_invalid_everywhere_gives_the_default() -> None:
    settings, errors = load(
        env={'LLMSCALER_K2_WINDOW': '0'}, configmap={'LLMSCALER_K2_WINDOW': 'x'}
    )
    assert settings.k2_window == 10
    assert len(errors) == 2


def test_unknown_keys() -> None:
    settings, errors = load(
        cli={'GLOBAL_OPT_INTERVALL': '1m'},
        env={'PATH': '/usr/bin', 'HOME': '/root'},
        file={'FOO': 1, 'PROMETHEUS_BASE_URL': 'https://prom:9090'},
        configmap={'BAR': 'x', 'WVA_LIMITED_MODE': 'true'},
    )
    assert settings == CoreSettings()
    assert errors == [
        "command line: key 'GLOBAL_OPT_INTERVALL': unknown setting",
        "config file: key 'FOO': unknown setting",
        "wva-manager-config: key 'BAR': unknown setting",
    ]


def test_file_layer_native_yaml_types() -> None:
    settings, errors = load(
        file={'WVA_SCALE_TO_ZERO': True, 'LLMSCALER_K2_WINDOW': 5, 'GLOBAL_OPT_INTERVAL': 30}
    )
    assert settings.scale_to_zero is True
    assert settings.k2_window == 5
    assert settings.interval == 30.0  # the default: an integer has no unit
    assert errors == [
        "config file: key 'GLOBAL_OPT_INTERVAL', value '30': a unit is required: "
        'write a Go duration such as "30s"'
    ]


@pytest.mark.parametrize(
    ('value', 'expected'),
    [
        ('true', True),
        ('True', True),
        (' YES ', True),
        ('1', True),
        ('false', False),
        ('No', False),
        ('0', False),
        (True, True),
        (0, False),
    ],
)
def test_parse_bool(value: object, expected: bool) -> None:
    assert parse_bool(value) is expected


@pytest.mark.parametrize('value', ['on', 'off', 'y', '', '2', 2, 1.0, None])
def test_parse_bool_rejects(value: object) -> None:
    with pytest.raises(ValueError, match='true, false'):
        parse_bool(value)


@pytest.mark.parametrize(
    ('key', 'value', 'message'),
    [
        ('WVA_SCALE_TO_ZERO', 'maybe', 'must be one of'),
        ('LLMSCALER_K2_WINDOW', '2.5', 'whole number'),
        ('LLMSCALER_K2_WINDOW', '-3', 'whole number'),
        ('LLMSCALER_K2_WINDOW', '0', 'from 1 to 10000'),
        ('LLMSCALER_K2_WINDOW', '10001', 'from 1 to 10000'),
        ('LLMSCALER_K2_WINDOW', '9' * 5000, 'from 1 to 10000'),
        ('LLMSCALER_K2_HISTORY_TTL', '0s', 'positive'),
        # Every setting has a finite maximum (values just past it; Go's limit, 292 years).
        ('GLOBAL_OPT_INTERVAL', '1h0m1s', 'at most 1h0m0s'),
        ('PROMETHEUS_METRICS_CACHE_FRESH_THRESHOLD', '24h1s', 'at most 24h0m0s'),
        ('PROMETHEUS_METRICS_CACHE_STALE_THRESHOLD', '2562047h', 'at most 24h0m0s'),
        ('PROMETHEUS_METRICS_CACHE_UNAVAILABLE_THRESHOLD', '25h', 'at most 24h0m0s'),
        ('LLMSCALER_K2_HISTORY_TTL', '721h', 'at most 720h0m0s'),
        ('LLMSCALER_CAPACITY_TTL', '8761h', 'at most 8760h0m0s'),
        ('LLMSCALER_SCALE_TO_ZERO_RETENTION', '169h', 'at most 168h0m0s'),
        ('LLMSCALER_CAPACITY_TTL', '-1h', 'negative'),
        ('LLMSCALER_SCALE_TO_ZERO_RETENTION', '10', 'unit is required'),
        ('PROMETHEUS_METRICS_CACHE_FRESH_THRESHOLD', '', 'empty'),
    ],
)
def test_invalid_values(key: str, value: str, message: str) -> None:
    settings, errors = load(env={key: value})
    assert settings == CoreSettings()
    assert len(errors) == 1
    assert message in errors[0]


def test_every_maximum_is_accepted() -> None:
    settings, errors = load(
        env={
            'GLOBAL_OPT_INTERVAL': '1h',
            'PROMETHEUS_METRICS_CACHE_FRESH_THRESHOLD': '22h',
            'PROMETHEUS_METRICS_CACHE_STALE_THRESHOLD': '23h',
            'PROMETHEUS_METRICS_CACHE_UNAVAILABLE_THRESHOLD': '24h',
            'LLMSCALER_K2_WINDOW': '10000',
            'LLMSCALER_K2_HISTORY_TTL': '720h',
            'LLMSCALER_CAPACITY_TTL': '8760h',
            'LLMSCALER_SCALE_TO_ZERO_RETENTION': '168h',
        }
    )
    assert errors == []
    assert (settings.interval, settings.unavailable_threshold) == (3600.0, 86400.0)
    assert (settings.k2_window, settings.k2_history_ttl) == (10000, 720 * 3600.0)
    assert (settings.capacity_ttl, settings.default_retention_period) == (
        8760 * 3600.0,
        168 * 3600.0,
    )


def test_thresholds_must_increase() -> None:
    # fresh 3m > stale 2m (default): all three fall back to 1m / 2m / 5m.
    settings, errors = load(env={'PROMETHEUS_METRICS_CACHE_FRESH_THRESHOLD': '3m'})
    assert (settings.fresh_threshold, settings.stale_threshold) == (60.0, 120.0)
    assert settings.unavailable_threshold == 300.0
    assert errors == [
        "settings: key 'PROMETHEUS_METRICS_CACHE_FRESH_THRESHOLD': cache thresholds must "
        'increase (fresh < stale < unavailable), got 3m0s / 2m0s / 5m0s; all three reset to '
        '1m0s / 2m0s / 5m0s'
    ]
    settings, errors = load(
        env={
            'PROMETHEUS_METRICS_CACHE_FRESH_THRESHOLD': '3m',
            'PROMETHEUS_METRICS_CACHE_STALE_THRESHOLD': '4m',
        }
    )
    assert errors == []
    assert (settings.fresh_threshold, settings.stale_threshold) == (180.0, 240.0)


def test_custom_layer_names_in_errors() -> None:
    _, errors = load_settings(
        cli={},
        env={},
        file={'X': 1},
        configmap={'Y': '1'},
        file_source='/etc/llmscaler.yaml: settings',
        configmap_source='ns/llmscaler-config',
    )
    assert [e.source for e in errors] == ['/etc/llmscaler.yaml: settings', 'ns/llmscaler-config']


def test_key_sets_do_not_overlap() -> None:
    assert set(SETTINGS).isdisjoint(PASSTHROUGH_KEYS)
    assert len(SETTINGS) == 9


@given(
    st.dictionaries(
        st.sampled_from(sorted(SETTINGS)),
        st.text(max_size=10),
        max_size=9,
    ),
    st.dictionaries(st.sampled_from(sorted(SETTINGS)), st.text(max_size=10), max_size=9),
)
def test_never_raises_and_result_is_valid(env: dict[str, str], configmap: dict[str, str]) -> None:
    settings, _ = load_settings(cli={}, env=env, file={}, configmap=configmap)
    assert settings.interval >= 1.0
    assert 0 < settings.fresh_threshold < settings.stale_threshold < settings.unavailable_threshold
    assert settings.k2_window >= 1
    assert settings.k2_history_ttl > 0
    assert settings.capacity_ttl > 0
    assert settings.default_retention_period > 0
