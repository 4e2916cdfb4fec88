"""`llmscaler run` options: precedence CLI > env > config file > default for valid values, and
every invalid value (in any layer, even one a higher layer overrides) an error that stops the
controller, one line naming the flag, variable or key and what it accepts; secrets never shown.

The config file below holds the manager settings in WVA's shape: `wva-manager-config` with a
`config.yaml` key, next to a scaling ConfigMap that becomes a base ConfigMap.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmscaler.collect.http import MiB
from llmscaler.collect.prometheus.source import PrometheusConfig
from llmscaler.collect.scrape.source import ScrapeConfig
from llmscaler.config.configmap_entries import ConfigMapSource
from llmscaler.config.errors import ConfigError
from llmscaler.config.resolved import CoreSettings
from llmscaler.controller.options.resolve import RunOptions, fatal_errors, resolve_options
from llmscaler.controller.options.table import OPTIONS, build_parser
from llmscaler.controller.options.values import split_bind_address
from tests.support.paths import ROOT

URL = 'http://prometheus:9090'
BASE = {'PROMETHEUS_BASE_URL': URL}  # metrics source prometheus needs a URL
CTRL = 'llmscaler-system'


def resolve(*argv: str, **env: str) -> tuple[RunOptions, list[ConfigError]]:
    options, errors = resolve_options(argv=list(argv), env={**BASE, **env})
    return options, list(errors)


def clean(*argv: str, **env: str) -> RunOptions:
    options, errors = resolve(*argv, **env)
    assert errors == []
    return options


def write_file(tmp_path: Path, settings: dict[str, str], manager: dict[str, str]) -> str:
    """A kubectl-style dump: the manager ConfigMap (config.yaml) and a scaling ConfigMap."""
    embedded = ''.join(f'      {key}: {value}\n' for key, value in manager.items())
    top = ''.join(f'  {key}: "{value}"\n' for key, value in settings.items())
    text = f"""\
settings:
{top or '  {}'}
configMaps:
- apiVersion: v1
  kind: ConfigMap
  metadata: {{name: wva-manager-config}}
  data:
    config.yaml: |
{embedded or '      {}'}
- metadata: {{name: wva-saturation-scaling-config}}
  data:
    default: "kvCacheThreshold: 0.7"
- metadata: {{name: unrelated, namespace: other}}
  data: {{x: y}}
"""
    path = tmp_path / 'config.yaml'
    path.write_text(text.replace('config.yaml: |\n      {}', 'config.yaml: "{}"'))
    return str(path)


# -- precedence -----------------------------------------------------------------------------------

# (flag, env/file key, values for CLI / env / file, expected for each, default, getter)
PRECEDENCE: list[tuple[str, str, tuple[str, str, str | None], tuple[Any, Any, Any], Any, str]] = [
    ('--interval', 'GLOBAL_OPT_INTERVAL', ('10s', '20s', '40s'), (10.0, 20.0, 40.0), 30.0,
     'settings.interval'),
    ('--scale-to-zero', 'WVA_SCALE_TO_ZERO', ('false', 'true', 'false'), (False, True, False),
     False, 'settings.scale_to_zero'),
    ('--prometheus-url', 'PROMETHEUS_BASE_URL', ('http://a:1', 'http://b:2', 'http://c:3'),
     ('http://a:1', 'http://b:2', 'http://c:3'), None, 'prometheus.base_url'),
    ('--scale-from-zero-concurrency', 'SCALE_FROM_ZERO_ENGINE_MAX_CONCURRENCY', ('3', '4', '5'),
     (3, 4, 5), 10, 'scale_from_zero_concurrency'),
    ('--metrics-bind-address', 'METRICS_BIND_ADDRESS', (':9000', '127.0.0.1:9001', None),
     (':9000', '127.0.0.1:9001', None), ':8080', 'metrics_bind_address'),
    ('--leader-election-lease-duration', 'LEADER_ELECTION_LEASE_DURATION', ('90s', '2m', None),
     (90.0, 120.0, None), 60.0, 'lease_duration'),
    ('--watch-namespace', 'WATCH_NAMESPACE', ('a', 'b', None), ('a', 'b', None), '',
     'watch_namespace'),
    ('--actuation', 'ACTUATION_MODE', ('both', 'metrics', None), ('both', 'metrics', None),
     'direct', 'actuation'),
    ('--prometheus-allow-http', 'PROMETHEUS_ALLOW_HTTP', ('false', 'true', 'false'),
     (False, True, False), False, 'prometheus.allow_http_credentials'),
    ('--prometheus-server-name', 'PROMETHEUS_SERVER_NAME', ('a', 'b', 'c'), ('a', 'b', 'c'), None,
     'prometheus.server_name'),
    ('--scrape-deadline', 'SCRAPE_DEADLINE', ('3s', '4s', None), (3.0, 4.0, None), 15.0,
     'scrape.scrape_deadline'),
]  # fmt: skip


def attr(options: RunOptions, path: str) -> Any:
    value: Any = options
    for name in path.split('.'):
        value = None if value is None else getattr(value, name)
    return value


@pytest.mark.parametrize('case', PRECEDENCE, ids=[case[0] for case in PRECEDENCE])
@pytest.mark.parametrize('layers', ['cli+env+file', 'env+file', 'file', 'none'])
def test_precedence(tmp_path: Path, case: tuple[Any, ...], layers: str) -> None:
    flag, key, (cli, env, file), (from_cli, from_env, from_file), default, getter = case
    # Metrics from pods: no Prometheus URL is needed, so each layer can leave it out.
    argv = ['--metrics-source=pods']
    environ: dict[str, str] = {}
    settings: dict[str, str] = {}
    expected = default
    if 'file' in layers and file is not None:
        settings[key] = file
        expected = from_file
    if 'env' in layers:
        environ[key] = env
        expected = from_env
    if 'cli' in layers:
        argv.append(f'{flag}={cli}')
        expected = from_cli
    # The Prometheus settings other than the URL need one, given by the file's manager settings.
    manager = {} if key == 'PROMETHEUS_BASE_URL' else {'PROMETHEUS_BASE_URL': URL}
    argv += ['--config-file', write_file(tmp_path, settings, manager)]
    options, errors = resolve_options(argv=argv, env=environ)
    assert errors == ()
    assert attr(options, getter) == expected


def test_options_without_a_file_form_are_unknown_settings_there(tmp_path: Path) -> None:
    path = write_file(tmp_path, {'METRICS_BIND_ADDRESS': ':1'}, {})
    _, errors = resolve('--config-file', path)
    assert [(e.source, e.key, e.message) for e in errors] == [
        (f'{path}: settings', 'METRICS_BIND_ADDRESS', 'unknown setting')
    ]
    assert fatal_errors(errors=errors) == tuple(errors)


def test_file_manager_configmap_under_file_settings(tmp_path: Path) -> None:
    path = write_file(
        tmp_path,
        {'GLOBAL_OPT_INTERVAL': '45s'},
        {'GLOBAL_OPT_INTERVAL': '1m', 'PROMETHEUS_BASE_URL': 'https://p:9091',
         'PROMETHEUS_TLS_INSECURE_SKIP_VERIFY': 'true', 'WVA_SCALE_TO_ZERO': 'true'},
    )  # fmt: skip
    options, errors = resolve_options(argv=['--config-file', path], env={})
    assert errors == ()
    assert options.settings == CoreSettings(interval=45.0, scale_to_zero=True)
    assert options.prometheus == PrometheusConfig(
        base_url='https://p:9091', insecure_skip_verify=True
    )
    assert options.config_file == path
    assert options.base_configmaps == (
        ConfigMapSource(
            name='wva-saturation-scaling-config',
            namespace=CTRL,
            data={'default': 'kvCacheThreshold: 0.7'},
        ),
    )


def test_file_configmaps_default_to_the_resolved_namespace(tmp_path: Path) -> None:
    path = write_file(tmp_path, {}, {'PROMETHEUS_BASE_URL': URL})
    options, errors = resolve_options(argv=[], env={'CONFIG_FILE': path, 'POD_NAMESPACE': 'wva'})
    assert errors == ()
    assert options.namespace == 'wva'
    assert options.prometheus is not None  # the manager ConfigMap is in the controller namespace
    assert [cm.namespace for cm in options.base_configmaps] == ['wva']


def test_prometheus_tls_from_the_environment_and_the_file(tmp_path: Path) -> None:
    path = write_file(tmp_path, {'PROMETHEUS_SERVER_NAME': 'from-file'}, {})
    options = clean(
        '--config-file',
        path,
        PROMETHEUS_BASE_URL='https://prometheus:9090',
        PROMETHEUS_BEARER_TOKEN='tok',
        PROMETHEUS_TOKEN_PATH='/var/run/token',
        PROMETHEUS_CA_CERT_PATH='/ca.pem',
        PROMETHEUS_CLIENT_CERT_PATH='/c.pem',
        PROMETHEUS_CLIENT_KEY_PATH='/k.pem',
        PROMETHEUS_TLS_INSECURE_SKIP_VERIFY='no',
    )
    assert options.prometheus == PrometheusConfig(
        base_url='https://prometheus:9090',
        bearer_token='tok',
        token_file=Path('/var/run/token'),
        ca_file=Path('/ca.pem'),
        client_cert_file=Path('/c.pem'),
        client_key_file=Path('/k.pem'),
        server_name='from-file',
    )


def test_defaults() -> None:
    options = clean(POD_NAME='me')
    expected = RunOptions(identity='me', prometheus=PrometheusConfig(base_url=URL))
    assert options == expected


def test_empty_environment_values_count_as_unset() -> None:
    options = clean(LEADER_ELECTION_LEASE_DURATION='', GLOBAL_OPT_INTERVAL=' ', POD_NAME='')
    assert (options.lease_duration, options.settings.interval) == (60.0, 30.0)
    assert options.identity != ''


# -- every flag -----------------------------------------------------------------------------------

FLAGS: list[tuple[list[str], str, Any]] = [
    (['--metrics-bind-address', '0'], 'metrics_bind_address', '0'),
    (['--health-probe-bind-address', '[::1]:8082'], 'health_probe_bind_address', '[::1]:8082'),
    (['--leader-elect'], 'leader_elect', True),
    (['--leader-elect', 'yes'], 'leader_elect', True),
    (['--watch-namespace', 'team-a'], 'watch_namespace', 'team-a'),
    (['--leader-election-lease-duration', '1m30s'], 'lease_duration', 90.0),
    (['--leader-election-renew-deadline', '20s'], 'renew_deadline', 20.0),
    (['--leader-election-retry-period', '500ms'], 'retry_period', 0.5),
    (['--rest-client-timeout', '15s'], 'rest_client_timeout', 15.0),
    (['--kubeconfig', '/k/config'], 'kubeconfig', '/k/config'),
    (['--server', 'http://127.0.0.1:8001'], 'server', 'http://127.0.0.1:8001'),
    (['--namespace', 'wva-system'], 'namespace', 'wva-system'),
    (['--identity', 'pod-0'], 'identity', 'pod-0'),
    (['--actuation', 'METRICS'], 'actuation', 'metrics'),
    (['--shadow'], 'shadow', True),
    (['--metrics-source', 'pods'], 'metrics_source', 'pods'),
    (['--pod-metrics-port', '8200'], 'pod_metrics_port', 8200),
    (['--epp-selector', 'app=epp,tier=gw'], 'epp_selector', 'app=epp,tier=gw'),
    (['--epp-metrics-port', '9091'], 'epp_metrics_port', 9091),
    (['--scale-from-zero-interval', '250ms'], 'scale_from_zero_interval', 0.25),
    (['--scale-from-zero-concurrency', '2'], 'scale_from_zero_concurrency', 2),
    (['--log-level', 'DEBUG'], 'log_level', 'debug'),
    (['--interval', '1m'], 'settings.interval', 60.0),
    (['--scale-to-zero'], 'settings.scale_to_zero', True),
    (['--prometheus-url', 'https://x:1/prom'], 'prometheus.base_url', 'https://x:1/prom'),
    (['--prometheus-timeout', '3s'], 'prometheus.timeout', 3.0),
    (['--prometheus-read-deadline', '20s'], 'prometheus.read_deadline', 20.0),
    (['--prometheus-max-answer-bytes', '4Mi'], 'prometheus.max_answer_bytes', 4 * MiB),
    (['--prometheus-allow-http'], 'prometheus.allow_http_credentials', True),
    (['--prometheus-tls-insecure-skip-verify'], 'prometheus.insecure_skip_verify', True),
    (['--prometheus-ca-cert-path', '/ca'], 'prometheus.ca_file', Path('/ca')),
    (['--prometheus-token-path', '/t', '--prometheus-allow-http'], 'prometheus.token_file',
     Path('/t')),
    (['--scrape-timeout', '1s'], 'scrape.timeout', 1.0),
    (['--scrape-deadline', '5s'], 'scrape.scrape_deadline', 5.0),
    (['--scrape-max-page-bytes', '512Ki'], 'scrape.max_page_bytes', 512 * 1024),
    (['--scrape-concurrency', '4'], 'scrape.concurrency', 4),
    (['--scrape-max-line-length', '8Ki'], 'scrape.max_line_length', 8 * 1024),
    (['--scrape-max-labels', '40'], 'scrape.max_labels', 40),
    (['--scrape-max-series-per-page', '500'], 'scrape.max_series_per_page', 500),
    (['--scrape-max-series-per-pod', '900'], 'scrape.max_series_per_pod', 900),
    (['--scrape-max-series-chars-per-pod', '1Mi'], 'scrape.max_series_chars_per_pod', MiB),
    (['--pod-metrics-scheme', 'https'], 'scrape.vllm_scheme', 'https'),
    (['--epp-metrics-scheme', 'HTTPS'], 'scrape.epp_scheme', 'https'),
    (['--scrape-ca-cert-path', '/ca'], 'scrape.ca_file', Path('/ca')),
    (['--scrape-client-cert-path', '/c'], 'scrape.client_cert_file', Path('/c')),
    (['--scrape-server-name', 'vllm.svc'], 'scrape.server_name', 'vllm.svc'),
    (['--scrape-tls-insecure-skip-verify'], 'scrape.insecure_skip_verify', True),
    (['--scrape-allow-http'], 'scrape.allow_http_credentials', True),
    (['--scrape-token-path', '/t', '--epp-metrics-scheme', 'https'], 'scrape.token_file',
     Path('/t')),
    (['--pod-selector', 'app=vllm'], 'pod_selector', 'app=vllm'),
    (['--pod-namespace-limit', '0'], 'pod_namespace_limit', 0),
    (['--status-refresh-interval', '1m'], 'status_refresh_interval', 60.0),
    (['--liveness-intervals', '5'], 'liveness_intervals', 5),
    (['--log-format', 'json'], 'log_format', 'json'),
    (['--http-log-level', 'debug'], 'http_log_level', 'debug'),
]  # fmt: skip


@pytest.mark.parametrize(('argv', 'getter', 'expected'), FLAGS, ids=[f[0][0] for f in FLAGS])
def test_every_flag_parses(argv: list[str], getter: str, expected: Any) -> None:
    assert attr(clean(*argv), getter) == expected
    assert attr(clean(), getter) != expected


def test_bool_flags_take_an_optional_value() -> None:
    assert clean('--leader-elect=false', LEADER_ELECT='true').leader_elect is False
    assert clean('--scale-to-zero=0', WVA_SCALE_TO_ZERO='true').settings.scale_to_zero is False
    assert clean('--leader-elect', '--scale-to-zero').leader_elect is True


def test_parser_lists_every_flag_with_its_environment_variable() -> None:
    text = ' '.join(build_parser().format_help().split())
    assert build_parser().prog == 'llmscaler run'
    for argv, _, _ in FLAGS:
        assert argv[0].split('=')[0] in text
    for option in OPTIONS:
        assert f'{option.flag} ' in text
        assert f'(env {option.env}' in text


def test_docs_list_every_flag_and_variable() -> None:
    docs = (ROOT / 'docs' / 'controller.md').read_text()
    for option in OPTIONS:
        assert f'| `{option.flag}` | `{option.env}` |' in docs, option.flag


# -- bad values: every one stops the controller ------------------------------------------------


@pytest.mark.parametrize(
    ('argv', 'env', 'line'),
    [
        ([], {'ACTUATION_MODE': 'metrcs'},
         "environment: key 'ACTUATION_MODE', value 'metrcs': must be one of direct, metrics, both"),
        (['--interval', '30'], {},
         "command line: key '--interval', value '30': must be a duration with a unit, such as "
         '30s, 1m30s or 500ms: duration \'30\' has no unit'),
        (['--pod-metrics-port', 'http'], {'POD_METRICS_PORT': '8100'},
         "command line: key '--pod-metrics-port', value 'http': must be a whole number from 1 to "
         '65535'),
        ([], {'LEADER_ELECT': 'maybe'},
         "environment: key 'LEADER_ELECT', value 'maybe': must be one of true, false, 1, 0, yes, "
         'no'),
        ([], {'PROMETHEUS_MAX_ANSWER_BYTES': '32MB'},
         "environment: key 'PROMETHEUS_MAX_ANSWER_BYTES', value '32MB': must be a size of at "
         'least 1 byte: a whole number of bytes, or with Ki, Mi or Gi (512Ki, 32Mi)'),
        ([], {'POD_NAMESPACE_LIMIT': '-1'},
         "environment: key 'POD_NAMESPACE_LIMIT', value '-1': must be a whole number of 0 or more"),
        ([], {'LOG_FORMAT': 'yaml'},
         "environment: key 'LOG_FORMAT', value 'yaml': must be one of text, json"),
    ],
)  # fmt: skip
def test_a_bad_value_stops_the_controller_with_one_line(
    argv: list[str], env: dict[str, str], line: str
) -> None:
    _, errors = resolve(*argv, **env)
    assert len(errors) == 1
    assert fatal_errors(errors=errors) == tuple(errors)
    assert str(errors[0]).startswith(line)
    assert '\n' not in str(errors[0])


@pytest.mark.parametrize(
    ('env', 'problem'),
    [
        ({'POD_NAMESPACE': 'Not_A_Namespace'}, 'namespace name'),
        ({'WATCH_NAMESPACE': '-x'}, 'namespace name'),
        ({'KUBE_SERVER': 'ftp://x'}, 'http:// or https://'),
        ({'KUBE_SERVER': 'http://[::1'}, 'http:// or https:// URL with a host'),
        ({'EPP_POD_SELECTOR': 'a in (b)'}, 'not key=value'),
        ({'POD_SELECTOR': 'app=a,app=b'}, 'given twice'),
        ({'EPP_METRICS_PORT': '0'}, 'from 1 to 65535'),
        ({'POD_METRICS_PORT': '٨٠'}, 'whole number'),  # non-ASCII digits are not a port
        ({'SCALE_FROM_ZERO_INTERVAL': '0s'}, 'above 0'),
        ({'REST_CLIENT_TIMEOUT': '-1s'}, 'negative'),
        ({'LOG_LEVEL': 'loud'}, 'debug, info, warning, error'),
        ({'HTTP_LOG_LEVEL': 'all'}, 'debug, info, warning, error'),
        ({'POD_METRICS_SCHEME': 'ftp'}, 'one of http, https'),
        ({'SCRAPE_CONCURRENCY': '0'}, '1 or more'),
        ({'SCRAPE_MAX_LABELS': '0'}, '1 or more'),
        ({'SCRAPE_MAX_SERIES_PER_POD': '-5'}, '1 or more'),
        ({'SCRAPE_MAX_LINE_LENGTH': '0'}, 'at least 1 byte'),
        ({'LIVENESS_INTERVALS': '0'}, '1 or more'),
        ({'STATUS_REFRESH_INTERVAL': '5'}, 'no unit'),
        ({'PROMETHEUS_CLIENT_KEY_PATH': '/k.pem'}, 'set PROMETHEUS_CLIENT_CERT_PATH too'),
        ({'SCRAPE_CLIENT_KEY_PATH': '/k.pem'}, 'set SCRAPE_CLIENT_CERT_PATH too'),
        ({'PROMETHEUS_METRICS_CACHE_FRESH_THRESHOLD': '1'}, 'no unit'),
        ({'LLMSCALER_K2_WINDOW': 'x'}, 'whole number'),
        ({'PROMETHEUS_METRICS_CACHE_STALE_THRESHOLD': '10s'}, 'must increase'),
        ({'METRICS_BIND_ADDRESS': '::1:80'}, 'brackets'),
        ({'HEALTH_PROBE_BIND_ADDRESS': ':99999'}, 'port must be'),
        ({'SCALE_FROM_ZERO_ENGINE_MAX_CONCURRENCY': '0'}, '1 or more'),
        ({'CONFIG_FILE': '/'}, 'is a directory'),
        ({'CONFIG_FILE': 'a\x00b'}, 'cannot be read'),
        ({'SHADOW_MODE': 'true', 'ACTUATION_MODE': 'metrics'}, 'does not apply with --shadow'),
    ],
)
def test_every_kind_of_bad_value_is_fatal(env: dict[str, str], problem: str) -> None:
    _, errors = resolve(**env)
    assert len(errors) == 1, errors
    assert problem in str(errors[0])
    assert fatal_errors(errors=errors) == tuple(errors)


def test_a_bad_value_is_fatal_even_where_a_higher_layer_overrides_it(tmp_path: Path) -> None:
    _, errors = resolve('--actuation', 'metrics', ACTUATION_MODE='metrcs')
    assert [(e.source, e.key) for e in errors] == [('environment', 'ACTUATION_MODE')]
    _, errors = resolve('--interval', '10s', GLOBAL_OPT_INTERVAL='soon')
    assert [(e.source, e.key) for e in errors] == [('environment', 'GLOBAL_OPT_INTERVAL')]
    path = write_file(tmp_path, {'GLOBAL_OPT_INTERVAL': '10'}, {'PROMETHEUS_BASE_URL': 'x'})
    _, errors = resolve('--config-file', path, GLOBAL_OPT_INTERVAL='20s')
    assert sorted((e.source, e.key) for e in errors) == [
        (f'{path}: settings', 'GLOBAL_OPT_INTERVAL'),
        (f'{CTRL}/wva-manager-config', 'PROMETHEUS_BASE_URL'),
    ]


def test_bad_core_setting_on_the_command_line_names_the_flag() -> None:
    _, errors = resolve('--interval', '10', GLOBAL_OPT_INTERVAL='20s')
    assert [(e.source, e.key) for e in errors] == [('command line', '--interval')]
    assert 'unit' in errors[0].message


def test_bad_file_values_name_the_file_and_the_configmap(tmp_path: Path) -> None:
    path = write_file(
        tmp_path, {'GLOBAL_OPT_INTERVAL': 'soon'}, {'SCALE_FROM_ZERO_ENGINE_MAX_CONCURRENCY': 'x'}
    )
    _, errors = resolve('--config-file', path)
    assert sorted((e.source, e.key) for e in errors) == [
        (f'{path}: settings', 'GLOBAL_OPT_INTERVAL'),
        (f'{CTRL}/wva-manager-config', 'SCALE_FROM_ZERO_ENGINE_MAX_CONCURRENCY'),
    ]
    assert fatal_errors(errors=errors) == tuple(errors)
    assert 'must be a duration with a unit' in str(errors[0]) + str(errors[1])


def test_bad_scaling_configmap_in_the_file_is_fatal(tmp_path: Path) -> None:
    path = tmp_path / 'cm.yaml'
    path.write_text(
        'kind: ConfigMap\nmetadata: {name: wva-saturation-scaling-config}\n'
        'data: {default: "priority: -1", m: "model_id: m\\npriority: 2"}\n'
    )
    _, errors = resolve('--config-file', str(path))
    assert [(e.source, e.key) for e in errors] == [
        (f'{CTRL}/wva-saturation-scaling-config', 'default')
    ]
    assert fatal_errors(errors=errors) == tuple(errors)


def test_a_warning_does_not_stop_the_controller(tmp_path: Path) -> None:
    path = tmp_path / 'cm.yaml'
    path.write_text(
        'kind: ConfigMap\nmetadata: {name: wva-model-scale-to-zero-config}\n'
        'data: {default: "enable_scale_to_zero: true\\nretention_period: 48h"}\n'
    )
    options, errors = resolve('--config-file', str(path))
    assert [e.warning for e in errors] == [True]
    assert fatal_errors(errors=errors) == ()
    assert len(options.base_configmaps) == 1


# -- secrets are never shown -------------------------------------------------------------------

SECRET = 'sk-live-0123456789'


@pytest.mark.parametrize(
    'argv',
    [
        [f'--prometheus-bearer-tokn={SECRET}'],
        ['--prometheus-bearer-tokn', SECRET],
        [SECRET],
        ['--prometheus-bearer-token='],
        ['--prometheus-url', f'http://user:{SECRET}@p:9090'],
    ],
)
def test_no_error_shows_a_secret_or_an_unknown_value(argv: list[str]) -> None:
    _, errors = resolve(*argv)
    assert fatal_errors(errors=errors)
    for error in errors:
        assert SECRET not in str(error)
        assert '\n' not in str(error)
    if argv[0].startswith('--prometheus-bearer-tokn'):
        assert '--prometheus-bearer-tokn' in [e.key for e in errors]


def test_a_misspelt_secret_in_the_file_is_not_shown(tmp_path: Path) -> None:
    path = write_file(tmp_path, {'PROMETHEUS_BEARER_TOKN': SECRET}, {'SCRAPE_TOKN': SECRET})
    _, errors = resolve('--config-file', path)
    assert [e.message for e in errors] == ['unknown setting', 'unknown setting']
    assert all(SECRET not in str(error) for error in errors)


# -- credentials over plain http --------------------------------------------------------------


def test_a_prometheus_token_over_http_needs_the_opt_in(tmp_path: Path) -> None:
    for token in ({'PROMETHEUS_BEARER_TOKEN': SECRET}, {'PROMETHEUS_TOKEN_PATH': '/t'}):
        _, errors = resolve(**token)
        assert [(e.key, e.message) for e in errors] == [
            (
                next(iter(token)),
                'would be sent in clear to http://prometheus:9090: use an https:// URL, or opt '
                'in with PROMETHEUS_ALLOW_HTTP=true',
            )
        ]
        options = clean(PROMETHEUS_ALLOW_HTTP='true', **token)
        assert options.prometheus is not None
        assert options.prometheus.allow_http_credentials is True
        assert clean(PROMETHEUS_BASE_URL='https://p', **token).prometheus is not None
    path = write_file(tmp_path, {}, {'PROMETHEUS_ALLOW_HTTP': 'true'})
    options = clean('--config-file', path, PROMETHEUS_BEARER_TOKEN=SECRET)
    assert options.prometheus is not None
    assert options.prometheus.allow_http_credentials is True
    # Unused (metrics from the pods): nothing would be sent, so nothing to refuse.
    assert clean('--metrics-source=pods', PROMETHEUS_BEARER_TOKEN=SECRET).prometheus is not None


def test_a_scrape_token_over_http_needs_the_opt_in() -> None:
    _, errors = resolve(SCRAPE_BEARER_TOKEN=SECRET)
    assert [e.key for e in errors] == ['SCRAPE_BEARER_TOKEN']
    assert 'EPP_METRICS_SCHEME=https' in errors[0].message
    assert 'SCRAPE_ALLOW_HTTP=true' in errors[0].message
    assert clean(SCRAPE_BEARER_TOKEN=SECRET, SCRAPE_ALLOW_HTTP='yes').scrape.bearer_token == SECRET
    options = clean(SCRAPE_TOKEN_PATH='/t', EPP_METRICS_SCHEME='https')
    assert options.scrape.token_file == Path('/t')
    assert options.scrape.allow_http_credentials is False


def test_every_scrape_setting_reaches_the_scrape_config() -> None:
    options = clean(
        SCRAPE_TIMEOUT='1s',
        SCRAPE_DEADLINE='9s',
        SCRAPE_MAX_PAGE_BYTES='1Mi',
        SCRAPE_CONCURRENCY='7',
        POD_METRICS_SCHEME='https',
        EPP_METRICS_SCHEME='https',
        SCRAPE_BEARER_TOKEN=SECRET,
        SCRAPE_TOKEN_PATH='/t',
        SCRAPE_CA_CERT_PATH='/ca',
        SCRAPE_CLIENT_CERT_PATH='/c',
        SCRAPE_CLIENT_KEY_PATH='/k',
        SCRAPE_SERVER_NAME='pods.local',
        SCRAPE_TLS_INSECURE_SKIP_VERIFY='true',
        SCRAPE_ALLOW_HTTP='false',
    )
    assert options.scrape == ScrapeConfig(
        timeout=1.0,
        scrape_deadline=9.0,
        max_page_bytes=MiB,
        concurrency=7,
        vllm_scheme='https',
        epp_scheme='https',
        bearer_token=SECRET,
        token_file=Path('/t'),
        ca_file=Path('/ca'),
        client_cert_file=Path('/c'),
        client_key_file=Path('/k'),
        server_name='pods.local',
        insecure_skip_verify=True,
    )


# -- read deadlines and the interval ----------------------------------------------------------


def test_read_deadlines_default_below_the_interval() -> None:
    options = clean()
    assert options.prometheus is not None
    assert (options.prometheus.read_deadline, options.scrape.scrape_deadline) == (15.0, 15.0)
    options = clean('--interval', '10s')
    assert options.prometheus is not None
    assert (options.prometheus.read_deadline, options.scrape.scrape_deadline) == (5.0, 5.0)
    assert options.read_deadline == 5.0


@pytest.mark.parametrize(
    ('flag', 'variable'),
    [('--prometheus-read-deadline', 'PROMETHEUS_READ_DEADLINE'),
     ('--scrape-deadline', 'SCRAPE_DEADLINE')],
)  # fmt: skip
def test_a_read_deadline_not_below_the_interval_is_fatal(flag: str, variable: str) -> None:
    _, errors = resolve('--interval', '20s', flag, '20s')
    assert [str(e) for e in errors] == [
        f"options: key '{variable}', value '20s': must be below the cycle interval (20s): a cycle "
        'waits for its metrics at most this long (--interval / GLOBAL_OPT_INTERVAL sets the '
        'interval)'
    ]
    assert clean('--interval', '20s', flag, '19s') is not None


def test_unparsable_file_is_fatal(tmp_path: Path) -> None:
    path = tmp_path / 'bad.yaml'
    path.write_text('settings: [unclosed\n')
    options, errors = resolve('--config-file', str(path), GLOBAL_OPT_INTERVAL='20s')
    assert len(fatal_errors(errors=errors)) == 1
    assert str(errors[0]).startswith(f'{path}: line 2, column 1: does not parse as YAML')
    assert options.settings.interval == 20.0  # the other layers still resolve


def test_metrics_from_pods_need_no_prometheus() -> None:
    options, errors = resolve_options(argv=['--metrics-source', 'pods'], env={})
    assert (options.prometheus, errors) == (None, ())


def test_split_bind_address() -> None:
    assert split_bind_address(address=':8080') == ('', 8080)
    assert split_bind_address(address='0.0.0.0:0') == ('0.0.0.0', 0)
    assert split_bind_address(address='[::]:9') == ('::', 9)
    assert split_bind_address(address='0') is None
    for bad in ('', '8080', 'host:', 'a b:1', '[::1:80', '[zz]:80', 'h:65536', 'h:+1'):
        with pytest.raises(ValueError, match=r'.'):
            split_bind_address(address=bad)


# -- identity -------------------------------------------------------------------------------------


def test_identity_is_pod_name_as_is() -> None:
    assert clean(POD_NAME='llmscaler-7d9f-x2').identity == 'llmscaler-7d9f-x2'
    assert clean('--identity', 'cli', POD_NAME='env').identity == 'cli'


def test_identity_default_is_hostname_and_random_hex() -> None:
    first, second = clean(HOSTNAME='node-1').identity, clean(HOSTNAME='node-1').identity
    assert re.fullmatch(r'node-1_[0-9a-f]{8}', first)
    assert re.fullmatch(r'node-1_[0-9a-f]{8}', second)
    assert first != second
    assert re.fullmatch(r'.+_[0-9a-f]{8}', clean().identity)


# -- properties -----------------------------------------------------------------------------------

ENV_NAMES = sorted(
    {
        'CONFIG_FILE', 'METRICS_BIND_ADDRESS', 'HEALTH_PROBE_BIND_ADDRESS', 'LEADER_ELECT',
        'WATCH_NAMESPACE', 'LEADER_ELECTION_LEASE_DURATION', 'LEADER_ELECTION_RENEW_DEADLINE',
        'LEADER_ELECTION_RETRY_PERIOD', 'REST_CLIENT_TIMEOUT', 'KUBECONFIG', 'KUBE_SERVER',
        'POD_NAMESPACE', 'POD_NAME', 'HOSTNAME', 'ACTUATION_MODE', 'METRICS_SOURCE',
        'PROMETHEUS_BASE_URL', 'PROMETHEUS_BEARER_TOKEN', 'PROMETHEUS_TOKEN_PATH',
        'PROMETHEUS_CA_CERT_PATH', 'PROMETHEUS_CLIENT_CERT_PATH', 'PROMETHEUS_CLIENT_KEY_PATH',
        'PROMETHEUS_SERVER_NAME', 'PROMETHEUS_TLS_INSECURE_SKIP_VERIFY', 'GLOBAL_OPT_INTERVAL',
        'WVA_SCALE_TO_ZERO', 'POD_METRICS_PORT', 'EPP_POD_SELECTOR', 'EPP_METRICS_PORT',
        'SCALE_FROM_ZERO_INTERVAL', 'SCALE_FROM_ZERO_ENGINE_MAX_CONCURRENCY', 'LOG_LEVEL',
        'PROMETHEUS_METRICS_CACHE_FRESH_THRESHOLD', 'LLMSCALER_K2_WINDOW',
    }
)  # fmt: skip
VALUES = st.one_of(
    st.text(max_size=12),
    st.sampled_from(['0', '-1', '1s', '0s', 'true', 'no', ':80', '[::]:1', 'http://h:1', 'pods']),
)


@settings(max_examples=200, deadline=None)
@given(env=st.dictionaries(st.sampled_from(ENV_NAMES), VALUES))
def test_resolve_never_raises_for_any_environment(env: dict[str, str]) -> None:
    options, errors = resolve_options(argv=[], env=env)
    assert isinstance(options, RunOptions)
    assert options.lease_duration > options.renew_deadline or fatal_errors(errors=errors)
    assert options.scale_from_zero_concurrency > 0
    assert 1 <= options.pod_metrics_port <= 65535
    assert options.actuation in ('direct', 'metrics', 'both')
    for error in errors:
        assert '\n' not in str(error)
        # 'settings': the cache thresholds out of order (load_settings' cross-check)
        layers = ('command line', 'environment', 'options', 'settings')
        path = env.get('CONFIG_FILE', '').strip()
        assert error.source in layers or (path and error.source == path)


@settings(max_examples=100, deadline=None)
@given(
    pairs=st.lists(
        st.tuples(st.sampled_from([f for f, _, _ in FLAGS] + [['--config-file']]), VALUES),
        max_size=4,
    )
)
def test_resolve_never_raises_for_any_flag_value(pairs: list[tuple[list[str], str]]) -> None:
    argv = [f'{flag[0].split("=")[0]}={value}' for flag, value in pairs]
    options, errors = resolve_options(argv=argv, env=BASE)
    assert isinstance(options, RunOptions)
    assert all(error.source != 'environment' for error in errors)


@settings(max_examples=200, deadline=None)
@given(
    env=st.dictionaries(
        st.sampled_from(sorted(option.env for option in OPTIONS if not option.core)), VALUES
    ),
    on_command_line=st.booleans(),
)
def test_no_invalid_value_passes_silently(env: dict[str, str], on_command_line: bool) -> None:
    """Every value its option's format refuses is an error naming that flag or variable."""
    by_env = {option.env: option for option in OPTIONS}
    if on_command_line:
        argv = [f'{by_env[key].flag}={text}' for key, text in sorted(env.items())]
        options, errors = resolve_options(argv=argv, env=BASE)
    else:
        options, errors = resolve_options(argv=[], env={**BASE, **env})
    named = {error.key for error in errors}
    for key, text in env.items():
        option = by_env[key]
        if not on_command_line and not text.strip():
            continue  # an empty variable is unset
        try:
            option.parse(text)
        except ValueError:
            assert (option.flag if on_command_line else key) in named, (key, text, errors)
    assert all(not error.warning for error in errors)
    assert isinstance(options, RunOptions)
