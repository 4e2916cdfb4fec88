"""The command line and environment of `llmscaler run`, resolved into one `RunOptions` value.

Why: users move from WVA with their Deployment manifests, so `llmscaler run` takes WVA's flags,
environment variables and manager settings (seed 000 "CLI Flags", reference/wva.md §9.2–9.3)
with WVA's precedence: command line > environment > config file > default.

Which option reads which layer (`build_parser()` lists the flags and their variables):
- every flag has an environment variable (`--leader-elect` / `LEADER_ELECT`, ...);
- the config file (`--config-file`, the format of `llmscaler.config.file`) holds manager keys
  only, as WVA's does: the core settings (`llmscaler.config.settings`, among them `--interval` /
  `GLOBAL_OPT_INTERVAL` and `--scale-to-zero` / `WVA_SCALE_TO_ZERO`), the Prometheus connection
  (`PROMETHEUS_*`) and `SCALE_FROM_ZERO_ENGINE_MAX_CONCURRENCY`, in its `settings:` mapping or
  in `wva-manager-config` / `llmscaler-config` of the controller namespace (a `config.yaml` key
  as WVA mounts it, or plain keys); any other key there is reported as an unknown setting. Its
  scaling ConfigMaps become `base_configmaps` (`controller.configwatch` lays the cluster's over
  them). The controller namespace (`--namespace` / `POD_NAMESPACE`) is resolved before the file,
  which uses it for ConfigMaps without a namespace;
- the Prometheus TLS and token settings have no flag (environment > file).
An empty environment or file value counts as unset. Durations are Go strings (`60s`, `1m30s`).
A bind address is `[host]:port` or `0` (serving disabled, as in controller-runtime). The leader
identity is `--identity` / `POD_NAME` as it is, else `<hostname>_<8 random hex digits>`.

What fails: nothing raises, except `-h`/`--help`, which prints the help and exits as argparse
does. A bad value is a `ConfigError` naming its layer (`command line` with the flag,
`environment` with the variable, `<path>: settings` or `<namespace>/<ConfigMap>` with the key)
and the value; that layer is skipped, so the next lower one applies, finally the default (the
rule of `load_settings`). Errors the controller cannot start with are `FatalConfigError`s (a
`ConfigError` subclass; `fatal_errors()` selects them), for which the caller exits: a config file
that cannot be read or parsed, an unknown argument, an unparsable bind address, metrics source
`prometheus` without a usable URL, a renew deadline not below the lease duration, a retry period
not below the renew deadline, a scale-from-zero concurrency ≤ 0. Errors inside the config file
(a bad ConfigMap entry) are ordinary errors: the rest of the file applies.

I/O: only the config file is read (once, by `config.file.read_config_file`, which also serves
`llmscaler decide --config`); `env` is a parameter, never `os.environ`.
"""

from __future__ import annotations

import argparse
import ipaddress
import re
import secrets
import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, NoReturn
from urllib.parse import urlsplit

import yaml

from llmscaler.collect.prometheus import PrometheusConfig
from llmscaler.collect.scrape import ScrapeConfig
from llmscaler.config.configmaps import ConfigMapSource
from llmscaler.config.durations import format_duration, parse_duration
from llmscaler.config.errors import ConfigError, ConfigFileError, show_value, sort_errors
from llmscaler.config.file import read_config_file
from llmscaler.config.settings import load_settings, parse_bool
from llmscaler.config.types import Config, CoreSettings
from llmscaler.controller.pods import parse_selector


@dataclass(frozen=True, slots=True, kw_only=True)
class FatalConfigError(ConfigError):
    """A problem `llmscaler run` cannot start with: the caller reports it and exits."""

    @property
    def fatal(self) -> bool:
        """Always True (a plain `ConfigError` has no such attribute)."""
        return True


def fatal_errors(*, errors: Sequence[ConfigError]) -> tuple[ConfigError, ...]:
    """The `FatalConfigError`s among `errors`."""
    return tuple(error for error in errors if isinstance(error, FatalConfigError))


@dataclass(frozen=True, slots=True)
class RunOptions:
    """Everything `llmscaler run` is configured with; durations are seconds."""

    config_file: str | None = None
    metrics_bind_address: str = ':8080'
    health_probe_bind_address: str = ':8081'
    leader_elect: bool = False
    watch_namespace: str = ''
    """'' = all namespaces."""
    lease_duration: float = 60.0
    renew_deadline: float = 50.0
    retry_period: float = 10.0
    rest_client_timeout: float = 60.0
    kubeconfig: str | None = None
    server: str | None = None
    """A plain API server URL, no authentication (tests, `kubectl proxy`)."""
    namespace: str = 'llmscaler-system'
    """The controller's own namespace: global ConfigMaps, the Lease."""
    identity: str = ''
    actuation: Literal['direct', 'metrics', 'both'] = 'direct'
    metrics_source: Literal['prometheus', 'pods'] = 'prometheus'
    prometheus: PrometheusConfig | None = None
    scrape: ScrapeConfig = field(default_factory=ScrapeConfig)
    pod_metrics_port: int = 8000
    epp_selector: str = 'llm-d.ai/epp=true'
    epp_metrics_port: int = 9090
    scale_from_zero_interval: float = 0.1
    scale_from_zero_concurrency: int = 10
    configmap_labels: tuple[str, ...] = (
        'app.kubernetes.io/name=workload-variant-autoscaler',
        'app.kubernetes.io/name=llmscaler',
    )
    settings: CoreSettings = field(default_factory=CoreSettings)
    base_configmaps: tuple[ConfigMapSource, ...] = ()
    log_level: str = 'info'


class _Unusable(ValueError):
    """A value the controller cannot start with (a fatal error, not a skipped layer)."""


def split_bind_address(*, address: str) -> tuple[str, int] | None:
    """(host, port) of `:8080`, `0.0.0.0:8080`, `[::1]:8080`, `localhost:0`; None for `0`.

    Raises ValueError for anything else. An empty host means every interface.
    """
    text = address.strip()
    if text == '0':
        return None
    host, colon, port = text.rpartition(':')
    if not colon:
        raise ValueError('must be host:port, :port, or 0 to disable')
    if host.startswith('[') and host.endswith(']'):
        try:
            ipaddress.IPv6Address(host[1:-1])
        except ValueError:
            raise ValueError(f'{host} is not an IPv6 address') from None
        host = host[1:-1]
    elif ':' in host or not re.fullmatch(r'[A-Za-z0-9.-]*', host):
        raise ValueError('the host must be a name or an address (IPv6 in brackets: [::1]:8080)')
    if not re.fullmatch(r'[0-9]{1,5}', port) or int(port) > 65535:
        raise ValueError('the port must be a number from 0 to 65535')
    return host, int(port)


def _bind_address(text: str) -> str:
    try:
        split_bind_address(address=text)
    except ValueError as exc:
        raise _Unusable(str(exc)) from None
    return text.strip()


def _nonempty(text: str) -> str:
    if not text.strip():
        raise ValueError('must not be empty')
    return text.strip()


_LABEL = re.compile(r'[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?')


def _namespace(text: str) -> str:
    if not _LABEL.fullmatch(text.strip()):
        raise ValueError('must be a namespace name (lower-case letters, digits, "-"; ≤ 63)')
    return text.strip()


def _watch_namespace(text: str) -> str:
    return _namespace(text) if text.strip() else ''


def _duration(text: str) -> float:
    seconds = parse_duration(text)
    if seconds <= 0:
        raise ValueError('must be a positive duration')
    return seconds


def _integer(text: str) -> int:
    if not re.fullmatch(r'[-+]?[0-9]{1,18}', text.strip()):
        raise ValueError('must be a whole number')
    return int(text.strip())


def _port(text: str) -> int:
    number = _integer(text)
    if not 1 <= number <= 65535:
        raise ValueError('must be a port number from 1 to 65535')
    return number


def _concurrency(text: str) -> int:
    number = _integer(text)
    if number <= 0:
        raise _Unusable('must be greater than 0')
    return number


def _selector(text: str) -> str:
    parse_selector(_nonempty(text))
    return text.strip()


def _url(text: str) -> str:
    try:
        parts = urlsplit(text.strip())
        _ = parts.port  # raises ValueError when out of range or not a number
    except ValueError as exc:
        raise ValueError(f'not a URL: {exc}') from None
    if parts.scheme not in ('http', 'https') or not parts.hostname:
        raise ValueError('must be an http:// or https:// URL with a host')
    return text.strip()


def _choice(*names: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        if text.strip().lower() not in names:
            raise ValueError(f'must be one of {", ".join(names)}')
        return text.strip().lower()

    return parse


@dataclass(frozen=True, slots=True)
class _Option:
    dest: str
    """The RunOptions field, or a name of this module for the Prometheus keys."""
    flag: str | None
    env: str
    parse: Callable[[str], object]
    help: str
    in_file: bool = False
    """Also read from the config file's manager settings."""


_ACTUATIONS = ('direct', 'metrics', 'both')
_SOURCES = ('prometheus', 'pods')
_LEVELS = ('debug', 'info', 'warning', 'error')

_OPTIONS = (
    _Option('config_file', '--config-file', 'CONFIG_FILE', _nonempty, 'configuration file'),
    _Option('namespace', '--namespace', 'POD_NAMESPACE', _namespace, "controller's namespace"),
    _Option('metrics_bind_address', '--metrics-bind-address', 'METRICS_BIND_ADDRESS',
            _bind_address, 'metrics endpoint, [host]:port or 0 (off)'),
    _Option('health_probe_bind_address', '--health-probe-bind-address',
            'HEALTH_PROBE_BIND_ADDRESS', _bind_address, 'health probes, [host]:port or 0 (off)'),
    _Option('leader_elect', '--leader-elect', 'LEADER_ELECT', parse_bool, 'leader election'),
    _Option('watch_namespace', '--watch-namespace', 'WATCH_NAMESPACE', _watch_namespace,
            'watch only this namespace (default: all)'),
    _Option('lease_duration', '--leader-election-lease-duration',
            'LEADER_ELECTION_LEASE_DURATION', _duration, 'leader lease duration'),
    _Option('renew_deadline', '--leader-election-renew-deadline',
            'LEADER_ELECTION_RENEW_DEADLINE', _duration, 'leader renew deadline'),
    _Option('retry_period', '--leader-election-retry-period', 'LEADER_ELECTION_RETRY_PERIOD',
            _duration, 'leader election retry period'),
    _Option('rest_client_timeout', '--rest-client-timeout', 'REST_CLIENT_TIMEOUT', _duration,
            'API request timeout'),
    _Option('kubeconfig', '--kubeconfig', 'KUBECONFIG', _nonempty, 'kubeconfig file'),
    _Option('server', '--server', 'KUBE_SERVER', _url, 'API server URL, no auth'),
    _Option('identity', '--identity', 'POD_NAME', _nonempty, 'leader election identity'),
    _Option('actuation', '--actuation', 'ACTUATION_MODE', _choice(*_ACTUATIONS),
            'direct (patch /scale), metrics (gauges for HPA/KEDA) or both'),
    _Option('metrics_source', '--metrics-source', 'METRICS_SOURCE', _choice(*_SOURCES),
            'prometheus or pods (scrape the pods)'),
    _Option('prometheus_url', '--prometheus-url', 'PROMETHEUS_BASE_URL', _url,
            'Prometheus base URL', in_file=True),
    _Option('pod_metrics_port', '--pod-metrics-port', 'POD_METRICS_PORT', _port,
            'metrics port of the inference pods'),
    _Option('epp_selector', '--epp-selector', 'EPP_POD_SELECTOR', _selector,
            'label selector of the EPP pods'),
    _Option('epp_metrics_port', '--epp-metrics-port', 'EPP_METRICS_PORT', _port,
            'metrics port of the EPP pods'),
    _Option('scale_from_zero_interval', '--scale-from-zero-interval', 'SCALE_FROM_ZERO_INTERVAL',
            _duration, 'scale-from-zero poll period'),
    _Option('scale_from_zero_concurrency', '--scale-from-zero-concurrency',
            'SCALE_FROM_ZERO_ENGINE_MAX_CONCURRENCY', _concurrency,
            'variants woken at once (> 0)', in_file=True),
    _Option('log_level', '--log-level', 'LOG_LEVEL', _choice(*_LEVELS), ', '.join(_LEVELS)),
    _Option('token', None, 'PROMETHEUS_BEARER_TOKEN', _nonempty, '', in_file=True),
    _Option('token_path', None, 'PROMETHEUS_TOKEN_PATH', _nonempty, '', in_file=True),
    _Option('ca', None, 'PROMETHEUS_CA_CERT_PATH', _nonempty, '', in_file=True),
    _Option('cert', None, 'PROMETHEUS_CLIENT_CERT_PATH', _nonempty, '', in_file=True),
    _Option('key', None, 'PROMETHEUS_CLIENT_KEY_PATH', _nonempty, '', in_file=True),
    _Option('server_name', None, 'PROMETHEUS_SERVER_NAME', _nonempty, '', in_file=True),
    _Option('skip_verify', None, 'PROMETHEUS_TLS_INSECURE_SKIP_VERIFY', parse_bool, '',
            in_file=True),
)  # fmt: skip
_BY_DEST = {option.dest: option for option in _OPTIONS}
_FILE_KEYS = frozenset(option.env for option in _OPTIONS if option.in_file)
_BOOL_FLAGS = frozenset({'leader_elect'})
_RESOLVED_APART = frozenset({'namespace', 'config_file', 'prometheus_url'})
# Core settings with a flag of their own; their values go to load_settings under these keys.
_SETTING_FLAGS = (
    ('interval', '--interval', 'GLOBAL_OPT_INTERVAL', 'decision cycle period; default 30s'),
    ('scale_to_zero', '--scale-to-zero', 'WVA_SCALE_TO_ZERO', 'scale to zero; default false'),
)


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    defaults = RunOptions()
    for option in _OPTIONS:
        if option.flag is None:
            continue
        default = getattr(defaults, option.dest, None)
        if isinstance(default, float):
            default = format_duration(default)
        shown = '' if default in (None, '') else f'; default {str(default).lower()}'
        text = f'{option.help} (env {option.env}{shown})'
        if option.dest in _BOOL_FLAGS:
            parser.add_argument(
                option.flag, dest=option.dest, nargs='?', const='true', metavar='BOOL', help=text
            )
        else:
            parser.add_argument(option.flag, dest=option.dest, metavar=option.env, help=text)
    for dest, flag, key, text in _SETTING_FLAGS:
        more: dict[str, Any] = {'metavar': key}
        if dest == 'scale_to_zero':
            more = {'nargs': '?', 'const': 'true', 'metavar': 'BOOL'}
        parser.add_argument(
            flag, dest=dest, help=text.replace('; ', f' (env {key}; ') + ')', **more
        )


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of `llmscaler run` (every value is text, validated afterwards)."""
    parser = argparse.ArgumentParser(
        prog='llmscaler run', description='Run the controller.', allow_abbrev=False
    )
    _add_arguments(parser)
    return parser


class _ArgvError(Exception):
    pass


class _QuietParser(argparse.ArgumentParser):
    """Reports an argument error as a value instead of printing it and exiting."""

    def error(self, message: str) -> NoReturn:
        raise _ArgvError(message)


def _read_file(
    *, path: str, namespace: str, env: Mapping[str, str]
) -> tuple[
    Config, tuple[ConfigError, ...], dict[str, tuple[str, str]], tuple[ConfigMapSource, ...]
]:
    """The file's config and problems, its manager keys of `_FILE_KEYS` as key → (text, source),
    and its scaling ConfigMaps."""
    read = read_config_file(path=path, controller_namespace=namespace, env=env)
    values = {
        key: (text, source)
        for key, (text, source) in read.manager.items()
        if key in _FILE_KEYS and text.strip()
    }
    scaling = sorted(read.scaling, key=lambda cm: (cm.namespace, cm.name, sorted(cm.data.items())))
    return read.config, read.errors, values, tuple(scaling)


class _Layers:
    """Picks each option's value from the layers, recording a problem per bad value."""

    def __init__(self, *, cli: Mapping[str, str], env: Mapping[str, str]) -> None:
        self.cli = cli
        self.env = env
        self.file: Mapping[str, tuple[str, str]] = {}
        self.errors: list[ConfigError] = []

    def get(self, dest: str) -> Any:
        option = _BY_DEST[dest]
        found: list[tuple[str, str, str]] = []
        if option.flag is not None and dest in self.cli:
            found.append(('command line', option.flag, self.cli[dest]))
        if option.env in self.env:
            found.append(('environment', option.env, self.env[option.env]))
        if option.in_file and option.env in self.file:
            text, source = self.file[option.env]
            found.append((source, option.env, text))
        for source, key, text in found:
            kind = ConfigError
            try:
                return option.parse(text)
            except _Unusable as exc:
                kind, message = FatalConfigError, str(exc)
            except ValueError as exc:
                message = str(exc)
            self.errors.append(
                kind(source=source, key=key, value=show_value(text), message=message)
            )
        return None

    def fatal(self, *, key: str, value: str = '', message: str) -> None:
        self.errors.append(
            FatalConfigError(source='options', key=key, value=value, message=message)
        )


def _file_error(path: str, exc: Exception) -> ConfigError:
    if isinstance(exc, ConfigFileError):
        return FatalConfigError(source=exc.path, message=': '.join((exc.where, exc.why)))
    return FatalConfigError(source=path, message=f'cannot be read: {exc}')


def _settings_and_file(
    *, layers: _Layers, cli_settings: Mapping[str, str], path: str | None, namespace: str
) -> tuple[CoreSettings, tuple[ConfigMapSource, ...]]:
    """The core settings (CLI > env > file > defaults) and the file's scaling ConfigMaps."""
    if path is not None:
        # load_config_file has no CLI layer: the valid CLI values go in over the environment.
        _, cli_errors = load_settings(cli=cli_settings, env={}, file={}, configmap={})
        bad = {error.key for error in cli_errors}
        env = {**layers.env, **{k: v for k, v in cli_settings.items() if k not in bad}}
        try:
            config, errors, layers.file, base = _read_file(path=path, namespace=namespace, env=env)
        except (ConfigFileError, OSError, ValueError, yaml.YAMLError) as exc:
            layers.errors.append(_file_error(path, exc))
        else:
            layers.errors.extend((*cli_errors, *errors))
            return config.settings, base
    settings, errors = load_settings(cli=cli_settings, env=layers.env, file={}, configmap={})
    layers.errors.extend(errors)
    return settings, ()


def _path(text: str | None) -> Path | None:
    return None if text is None else Path(text)


def _prometheus(layers: _Layers) -> PrometheusConfig | None:
    url, cert, key = layers.get('prometheus_url'), layers.get('cert'), layers.get('key')
    token, token_path, ca = layers.get('token'), layers.get('token_path'), layers.get('ca')
    server_name, skip_verify = layers.get('server_name'), layers.get('skip_verify')
    if key is not None and cert is None:
        message = 'ignored without PROMETHEUS_CLIENT_CERT_PATH'
        layers.errors.append(
            ConfigError(source='options', key=_BY_DEST['key'].env, message=message)
        )
    if url is None:
        return None
    return PrometheusConfig(
        base_url=url,
        bearer_token=token,
        token_file=_path(token_path),
        ca_file=_path(ca),
        client_cert_file=_path(cert),
        client_key_file=_path(key) if cert is not None else None,
        server_name=server_name,
        insecure_skip_verify=bool(skip_verify),
    )


def _hostname(env: Mapping[str, str]) -> str:
    return env.get('HOSTNAME', '').strip() or socket.gethostname() or 'llmscaler'


def resolve_options(
    *, argv: Sequence[str], env: Mapping[str, str]
) -> tuple[RunOptions, tuple[ConfigError, ...]]:
    """The options of `llmscaler run` and every problem found, sorted (`fatal_errors` picks the
    ones the controller cannot start with). See the module docstring for the rules."""
    parser = _QuietParser(prog='llmscaler run', allow_abbrev=False)
    _add_arguments(parser)
    cli: dict[str, str] = {}
    argv_errors: list[ConfigError] = []
    try:
        parsed, extra = parser.parse_known_args(list(argv))
    except _ArgvError as exc:
        argv_errors.append(FatalConfigError(source='command line', message=str(exc)))
    else:
        cli = {dest: value for dest, value in vars(parsed).items() if value is not None}
        argv_errors.extend(
            FatalConfigError(
                source='command line', value=show_value(arg), message='unknown argument'
            )
            for arg in extra
        )
    layers = _Layers(cli=cli, env={k: v for k, v in env.items() if v.strip()})
    layers.errors.extend(argv_errors)
    defaults = RunOptions()
    namespace = layers.get('namespace') or defaults.namespace
    config_file = layers.get('config_file')
    cli_settings = {key: cli[dest] for dest, _, key, _ in _SETTING_FLAGS if dest in cli}
    settings, base = _settings_and_file(
        layers=layers, cli_settings=cli_settings, path=config_file, namespace=namespace
    )
    got: dict[str, Any] = {}
    for option in _OPTIONS:
        if option.flag is not None and option.dest not in _RESOLVED_APART:
            value = layers.get(option.dest)
            got[option.dest] = getattr(defaults, option.dest, None) if value is None else value
    prometheus = _prometheus(layers)
    if got['metrics_source'] == 'prometheus' and prometheus is None:
        message = (
            'metrics source prometheus needs a usable Prometheus URL (this flag, or '
            'PROMETHEUS_BASE_URL in the environment or the config file), or --metrics-source pods'
        )
        layers.fatal(key='--prometheus-url', message=message)
    lease, renew, retry = got['lease_duration'], got['renew_deadline'], got['retry_period']
    if renew >= lease:
        message = f'must be shorter than the lease duration ({format_duration(lease)})'
        layers.fatal(key='--leader-election-renew-deadline', value=format_duration(renew),
                     message=message)  # fmt: skip
    if retry >= renew:
        message = f'must be shorter than the renew deadline ({format_duration(renew)})'
        layers.fatal(key='--leader-election-retry-period', value=format_duration(retry),
                     message=message)  # fmt: skip
    identity = got.pop('identity') or f'{_hostname(layers.env)}_{secrets.token_hex(4)}'
    options = RunOptions(
        **got,
        config_file=config_file,
        namespace=namespace,
        identity=identity,
        prometheus=prometheus,
        settings=settings,
        base_configmaps=base,
    )
    flags = {key: flag for _, flag, key, _ in _SETTING_FLAGS}
    errors = [
        replace(e, key=flags[e.key]) if e.source == 'command line' and e.key in flags else e
        for e in layers.errors
    ]
    return options, sort_errors(errors)
