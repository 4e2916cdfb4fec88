"""The command line and environment of `llmscaler run`, resolved into one `RunOptions` value.

Why: users move from WVA with their Deployment manifests, so `llmscaler run` takes WVA's flags,
environment variables and manager settings (WVA v0.9.0, cmd/main.go and internal/config/) with WVA's
precedence: command line > environment > config file > default. A controller that runs with a
setting other than the one written (`ACTUATION_MODE=metrcs` running as `direct`, then fighting the
HPA it was meant to feed) is worse than one that does not start, so every value is checked and any
invalid one stops the process.

Which option reads which layer (`table.OPTIONS` lists them, `table.build_parser()` shows
them):
- every option has a flag and an environment variable (`--leader-elect` / `LEADER_ELECT`, ...);
- the config file (`--config-file`, the format of `llmscaler.config.file`) holds manager keys
  only, as WVA's does: the core settings (`llmscaler.config.settings`, among them `--interval` /
  `GLOBAL_OPT_INTERVAL`), the Prometheus connection (`PROMETHEUS_*` of WVA) and
  `SCALE_FROM_ZERO_ENGINE_MAX_CONCURRENCY`, in its `settings:` mapping or in
  `wva-manager-config` / `llmscaler-config` of the controller namespace; any other key there is
  an unknown setting. Its scaling ConfigMaps become `base_configmaps`
  (`controller.cluster.configwatch` lays the cluster's over them). The controller namespace
  (`--namespace` / `POD_NAMESPACE`) is resolved before the file, which uses it for ConfigMaps
  without a namespace;
- the other core settings (`PROMETHEUS_METRICS_CACHE_*_THRESHOLD`, `LLMSCALER_*`) are read from
  the environment and the file.
An empty environment value counts as unset. Formats are `controller.options.values`'; how each
value is looked for in the layers and checked is `controller.options.layers`'. The metric read
deadlines (`--prometheus-read-deadline`, `--scrape-deadline`) default to 15 s, or half the
interval when that is shorter; given explicitly, they must be below the interval. The leader
identity is `--identity` / `POD_NAME` as it is, else `<hostname>_<8 random hex digits>`.

What fails: nothing raises, except `-h`/`--help`, which prints the help and exits as argparse
does. Every problem is a `ConfigError` (one line: the layer — `command line` with the flag,
`environment` with the variable, `<path>: settings` or `<namespace>/<ConfigMap>` with the key —
the value and what is accepted); all of them but warnings (`ConfigError.warning`) stop the
controller (`fatal_errors`). A value is checked in every layer that holds it, even one a higher
layer overrides. Problems: a value that does not parse, an unknown argument (its value is never
shown: it may be a misspelt secret), a config file that cannot be read or holds an unknown or bad
key or a bad scaling ConfigMap, metrics source `prometheus` without a URL, a token that would go
to an `http://` Prometheus or EPP without the opt-in (`PROMETHEUS_ALLOW_HTTP`,
`SCRAPE_ALLOW_HTTP`), a client key without its certificate, a metric read deadline not below the
interval, a renew deadline not below the lease duration, a retry period not below the renew
deadline. The values of secret options and secret-looking keys are never part of a message.

I/O: only the config file is read (once, by `config.file.read_config_file`, which also serves
`llmscaler decide --config`); `env` is a parameter, never `os.environ`.
"""

from __future__ import annotations

import secrets
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from llmscaler.collect.http import MiB
from llmscaler.collect.prometheus.source import PrometheusConfig
from llmscaler.collect.scrape.source import ScrapeConfig
from llmscaler.config.configmap_entries import ConfigMapSource
from llmscaler.config.durations import format_duration
from llmscaler.config.errors import ConfigError, ConfigFileError, show_setting, sort_errors
from llmscaler.config.file import read_config_file
from llmscaler.config.resolved import CoreSettings
from llmscaler.config.settings import SETTINGS, load_settings
from llmscaler.controller.cluster.caches import DEFAULT_EPP_SELECTOR, DEFAULT_POD_NAMESPACE_LIMIT
from llmscaler.controller.options import values
from llmscaler.controller.options.layers import Layers, read_argv
from llmscaler.controller.options.table import BY_DEST, OPTIONS
from llmscaler.kube.nextstatus import RUN_TIME_REFRESH

DEADLINE = 15.0
"""Default metric read deadline (seconds), when half the interval is not shorter."""


@dataclass(frozen=True, slots=True)
class RunOptions:
    """Everything `llmscaler run` is configured with; durations are seconds."""

    config_file: str | None = None
    metrics_bind_address: str = ':8080'
    health_probe_bind_address: str = ':8081'
    liveness_intervals: int = 3
    """`/healthz` fails after this many intervals (plus the read deadline and the API timeout)
    without a finished cycle of the leading loop."""
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
    shadow: bool = False
    """Decide and publish, write nothing (`controller.va.shadow`); `actuation` does not apply."""
    status_refresh_interval: float = RUN_TIME_REFRESH
    metrics_source: Literal['prometheus', 'pods'] = 'prometheus'
    prometheus: PrometheusConfig | None = None
    scrape: ScrapeConfig = field(default_factory=ScrapeConfig)
    pod_selector: str = ''
    pod_namespace_limit: int = DEFAULT_POD_NAMESPACE_LIMIT
    pod_metrics_port: int = 8000
    epp_selector: str = DEFAULT_EPP_SELECTOR
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
    log_format: str = 'text'
    http_log_level: str = 'warning'

    @property
    def read_deadline(self) -> float:
        """How long a cycle waits for its metrics: the deadline of the source in use."""
        if self.metrics_source == 'prometheus' and self.prometheus is not None:
            return self.prometheus.read_deadline
        return self.scrape.scrape_deadline


def fatal_errors(*, errors: Sequence[ConfigError]) -> tuple[ConfigError, ...]:
    """The errors the controller cannot start with: every one but warnings."""
    return tuple(error for error in errors if not error.warning)


def _core_settings(
    *, layers: Layers, path: str | None, namespace: str
) -> tuple[CoreSettings, tuple[ConfigMapSource, ...], dict[str, tuple[str, str]]]:
    """The core settings (CLI > env > file > defaults), the file's scaling ConfigMaps and its
    manager keys as key → (text, source); every value of every layer is checked."""
    env = dict(layers.env)
    for option in OPTIONS:
        if option.core:  # the valid text of the flag or the variable goes in as the variable
            env.pop(option.env, None)
            chosen = layers.pick(option.dest)
            if chosen is not None:
                env[option.env] = chosen[1]
    for key in sorted(SETTINGS):
        if key in env and not any(o.core and o.env == key for o in OPTIONS):
            _check_setting(layers, source='environment', key=key, text=env[key], env=env)
    if path is None:
        settings, errors = load_settings(cli={}, env=env, file={}, configmap={})
        layers.errors.extend(errors)
        return settings, (), {}
    try:
        read = read_config_file(path=path, controller_namespace=namespace, env=env)
    except ConfigFileError as exc:
        message = ': '.join(part for part in (exc.where, exc.why) if part)
        layers.errors.append(ConfigError(source=exc.path, message=message))
        settings, _ = load_settings(cli={}, env=env, file={}, configmap={})
        return settings, (), {}
    # The file's core settings are checked below, each where it is written (the loader stops at
    # the first valid layer); the loader's own error for one of them would say it twice.
    checked = {(source, key) for key, (_, source) in read.manager.items() if key in SETTINGS}
    layers.errors.extend(e for e in read.errors if (e.source, e.key) not in checked)
    for key, (text, source) in read.manager.items():
        if key in SETTINGS:  # also the values a higher layer overrides
            _check_setting(layers, source=source, key=key, text=text, env=None)
    scaling = sorted(read.scaling, key=lambda cm: (cm.namespace, cm.name, sorted(cm.data.items())))
    manager = {key: item for key, item in read.manager.items() if item[0].strip()}
    return read.config.settings, tuple(scaling), manager


def _check_setting(
    layers: Layers, *, source: str, key: str, text: str, env: dict[str, str] | None
) -> None:
    """A ConfigError for a core setting's bad value; dropped from `env` when given."""
    try:
        values.setting(key)(text)
    except ValueError as exc:
        shown = show_setting(key, text)
        layers.errors.append(ConfigError(source=source, key=key, value=shown, message=str(exc)))
        if env is not None:
            env.pop(key, None)


def _path(text: str | None) -> Path | None:
    return None if text is None else Path(text)


def _deadline(layers: Layers, dest: str, interval: float) -> float:
    """An explicit deadline below the interval, else the default (see the module docstring)."""
    given = layers.get(dest)
    if given is None:
        return min(DEADLINE, interval / 2)
    if given >= interval:
        option = BY_DEST[dest]
        message = (
            f'must be below the cycle interval ({format_duration(interval)}): a cycle waits for '
            f'its metrics at most this long (--interval / GLOBAL_OPT_INTERVAL sets the interval)'
        )
        layers.problem(key=option.env, value=format_duration(given), message=message)
        return min(DEADLINE, interval / 2)
    return float(given)


def _tls_files(layers: Layers, prefix: str) -> tuple[Path | None, Path | None, Path | None]:
    """(CA, client certificate, client key) of `prefix` ('prometheus' or 'scrape')."""
    ca, cert, key = (layers.get(f'{prefix}_{name}') for name in ('ca', 'cert', 'key'))
    if key is not None and cert is None:
        option, cert_option = BY_DEST[f'{prefix}_key'], BY_DEST[f'{prefix}_cert']
        message = f'a client key needs its certificate: set {cert_option.env} too'
        layers.problem(key=option.env, message=message)
        key = None
    return _path(ca), _path(cert), _path(key)


def _in_clear(layers: Layers, *, prefix: str, where: str, fix: str, allow: str) -> None:
    """A problem when a token of `prefix` would go to plain-http `where` without `allow`."""
    for name in ('token', 'token_path'):
        option = BY_DEST[f'{prefix}_{name}']
        if layers.found(option):
            message = f'would be sent in clear to {where}: {fix}, or opt in with {allow}=true'
            layers.problem(key=option.env, message=message)
            return


def _prometheus(layers: Layers, *, interval: float, used: bool) -> PrometheusConfig | None:
    url = layers.get('prometheus_url')
    ca, cert, key = _tls_files(layers, 'prometheus')
    timeout = layers.get('prometheus_timeout')
    deadline = _deadline(layers, 'prometheus_read_deadline', interval)
    answer_bytes = layers.get('prometheus_max_answer_bytes')
    allow = bool(layers.get('prometheus_allow_http'))
    token = layers.get('prometheus_token')
    token_file = layers.get('prometheus_token_path')
    server_name = layers.get('prometheus_server_name')
    skip_verify = bool(layers.get('prometheus_skip_verify'))
    if url is None:
        return None
    if used and not allow and not url.lower().startswith('https://'):
        _in_clear(
            layers,
            prefix='prometheus',
            where=values.redact_url(url),
            fix='use an https:// URL',
            allow='PROMETHEUS_ALLOW_HTTP',
        )
    return PrometheusConfig(
        base_url=url,
        bearer_token=token,
        token_file=_path(token_file),
        ca_file=ca,
        client_cert_file=cert,
        client_key_file=key,
        server_name=server_name,
        insecure_skip_verify=skip_verify,
        timeout=timeout if timeout is not None else 10.0,
        read_deadline=deadline,
        max_answer_bytes=answer_bytes if answer_bytes is not None else 32 * MiB,
        allow_http_credentials=allow,
    )


def _scrape(layers: Layers, *, interval: float) -> ScrapeConfig:
    defaults = ScrapeConfig()
    ca, cert, key = _tls_files(layers, 'scrape')
    got = {
        name: layers.get(f'scrape_{name}')
        for name in ('timeout', 'max_page_bytes', 'concurrency', 'server_name', *_CAPS)
    }
    vllm_scheme = layers.get('pod_metrics_scheme') or defaults.vllm_scheme
    epp_scheme = layers.get('epp_metrics_scheme') or defaults.epp_scheme
    allow = bool(layers.get('scrape_allow_http'))
    if epp_scheme == 'http' and not allow:
        _in_clear(
            layers,
            prefix='scrape',
            where='the EPP pages over http',
            fix='read them over https (EPP_METRICS_SCHEME=https)',
            allow='SCRAPE_ALLOW_HTTP',
        )
    return ScrapeConfig(
        timeout=got['timeout'] or defaults.timeout,
        concurrency=got['concurrency'] or defaults.concurrency,
        bearer_token=layers.get('scrape_token'),
        token_file=_path(layers.get('scrape_token_path')),
        ca_file=ca,
        insecure_skip_verify=bool(layers.get('scrape_skip_verify')),
        max_page_bytes=got['max_page_bytes'] or defaults.max_page_bytes,
        scrape_deadline=_deadline(layers, 'scrape_deadline', interval),
        vllm_scheme=vllm_scheme,
        epp_scheme=epp_scheme,
        client_cert_file=cert,
        client_key_file=key,
        server_name=got['server_name'],
        allow_http_credentials=allow,
        **{cap: got[cap] or getattr(defaults, cap) for cap in _CAPS},
    )


_CAPS = (
    'max_line_length',
    'max_labels',
    'max_series_per_page',
    'max_series_per_pod',
    'max_series_chars_per_pod',
)
"""The scrape settings that cap one page or one pod (`scrape_` + the `ScrapeConfig` field)."""


_APART = frozenset(
    {'namespace', 'config_file', 'identity', 'interval', 'scale_to_zero', 'pod_metrics_scheme',
     'epp_metrics_scheme'}
)  # fmt: skip
_NESTED = ('prometheus_', 'scrape_')


def _hostname(env: Mapping[str, str]) -> str:
    return env.get('HOSTNAME', '').strip() or socket.gethostname() or 'llmscaler'


def _leader_timings(layers: Layers, got: Mapping[str, Any]) -> None:
    lease, renew, retry = got['lease_duration'], got['renew_deadline'], got['retry_period']
    if renew >= lease:
        message = f'must be shorter than the lease duration ({format_duration(lease)})'
        layers.problem(key='--leader-election-renew-deadline', value=format_duration(renew),
                       message=message)  # fmt: skip
    if retry >= renew:
        message = f'must be shorter than the renew deadline ({format_duration(renew)})'
        layers.problem(key='--leader-election-retry-period', value=format_duration(retry),
                       message=message)  # fmt: skip


def resolve_options(
    *, argv: Sequence[str], env: Mapping[str, str]
) -> tuple[RunOptions, tuple[ConfigError, ...]]:
    """The options of `llmscaler run` and every problem found, sorted; the controller starts
    only when `fatal_errors` finds none. See the module docstring for the rules."""
    cli, argv_errors = read_argv(argv)
    layers = Layers(cli=cli, env={k: v for k, v in env.items() if v.strip()})
    layers.errors.extend(argv_errors)
    defaults = RunOptions()
    namespace = layers.get('namespace') or defaults.namespace
    config_file = layers.get('config_file')
    settings, base, layers.file = _core_settings(
        layers=layers, path=config_file, namespace=namespace
    )
    got: dict[str, Any] = {}
    for option in OPTIONS:
        if option.dest not in _APART and not option.dest.startswith(_NESTED):
            value = layers.get(option.dest)
            got[option.dest] = getattr(defaults, option.dest) if value is None else value
    used = got['metrics_source'] == 'prometheus'
    # In shadow mode Prometheus also gives the other autoscaler's published decisions.
    prometheus = _prometheus(layers, interval=settings.interval, used=used or got['shadow'])
    if used and prometheus is None:
        message = (
            'metrics source prometheus needs a Prometheus URL (this flag, or PROMETHEUS_BASE_URL '
            'in the environment or the config file), or --metrics-source pods'
        )
        layers.problem(key='--prometheus-url', message=message)
    scrape = _scrape(layers, interval=settings.interval)
    _leader_timings(layers, got)
    if got['shadow'] and layers.found(BY_DEST['actuation']):
        message = 'does not apply with --shadow, which writes nothing and publishes no wva_* gauge'
        layers.problem(key='--actuation', value=str(got['actuation']), message=message)
    identity = layers.get('identity') or f'{_hostname(layers.env)}_{secrets.token_hex(4)}'
    options = RunOptions(
        **got,
        config_file=config_file,
        namespace=namespace,
        identity=identity,
        prometheus=prometheus,
        scrape=scrape,
        settings=settings,
        base_configmaps=base,
    )
    return options, sort_errors(layers.errors)
