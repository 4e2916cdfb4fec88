"""What `llmscaler run` checks and says before it starts: its TLS files, and its settings.

Why: a CA bundle or a client certificate that cannot be loaded would otherwise surface as a
traceback from deep inside the HTTP client; and an operator reading the log of a running
controller wants to see, once, with which settings it runs (without a secret in the log).

- `tls_problems(options)`: one line per TLS file set that cannot be used (missing, unreadable,
  not PEM, a key that does not match its certificate), naming its variables. The Prometheus files
  are checked when Prometheus is the metric source; the scrape files whenever they are set (the
  scale-from-zero loop reads the EPP pages with them).
- `settings_line(options)`: the settings in one line. Tokens appear as `set`; URLs without
  user:password.

What fails: nothing raises; the files are read, nothing else.
"""

from __future__ import annotations

import ssl
from pathlib import Path

from llmscaler.collect.http import client_ssl_context, seconds
from llmscaler.config.durations import format_duration
from llmscaler.controller.options.resolve import RunOptions
from llmscaler.controller.options.values import redact_url


def _tls(*, name: str, ca: Path | None, cert: Path | None, key: Path | None) -> tuple[str, ...]:
    problems: list[str] = []
    if ca is not None:
        try:
            client_ssl_context(ca_file=ca)
        except (OSError, ssl.SSLError, ValueError) as exc:
            problems.append(f'{name}_CA_CERT_PATH {ca}: cannot be used as a CA bundle: {_why(exc)}')
    if cert is not None:
        try:
            client_ssl_context(ca_file=None, client_cert_file=cert, client_key_file=key)
        except (OSError, ssl.SSLError, ValueError) as exc:
            files = f'{cert}' if key is None else f'{cert} and {name}_CLIENT_KEY_PATH {key}'
            problems.append(
                f'{name}_CLIENT_CERT_PATH {files}: cannot be used as a client certificate: '
                f'{_why(exc)}'
            )
    return tuple(problems)


def _why(exc: BaseException) -> str:
    text = ' '.join(str(getattr(exc, 'strerror', None) or exc).split())
    return text or type(exc).__name__


def tls_problems(options: RunOptions) -> tuple[str, ...]:
    """Why the configured TLS files cannot be used, one line each (see the module docstring)."""
    problems: list[str] = []
    prometheus = options.prometheus
    if options.metrics_source == 'prometheus' and prometheus is not None:
        problems += _tls(
            name='PROMETHEUS',
            ca=prometheus.ca_file,
            cert=prometheus.client_cert_file,
            key=prometheus.client_key_file,
        )
    scrape = options.scrape
    problems += _tls(
        name='SCRAPE', ca=scrape.ca_file, cert=scrape.client_cert_file, key=scrape.client_key_file
    )
    return tuple(problems)


def liveness_limit(options: RunOptions) -> float:
    """Seconds without a finished cycle after which the leader is not live: `liveness_intervals`
    intervals, plus the metric read deadline and the API timeout a slow cycle may spend."""
    return (
        options.liveness_intervals * options.settings.interval
        + options.read_deadline
        + options.rest_client_timeout
    )


def settings_line(options: RunOptions) -> str:
    """The settings the controller runs with, in one line, without secrets."""
    parts = [
        f'identity {options.identity}',
        f'namespace {options.namespace}',
        f'watching {options.watch_namespace or "all namespaces"}',
        f'leader election {"on" if options.leader_elect else "off"}',
        f'interval {format_duration(options.settings.interval)}',
        'shadow: nothing written' if options.shadow else f'actuation {options.actuation}',
        f'scale to zero {"on" if options.settings.scale_to_zero else "off"} by default',
    ]
    prometheus = options.prometheus
    if options.metrics_source == 'prometheus' and prometheus is not None:
        token = (
            'token file'
            if prometheus.token_file
            else 'token set'
            if prometheus.bearer_token
            else ''
        )
        tls = 'custom CA' if prometheus.ca_file else ''
        extras = ', '.join(x for x in (token, tls) if x)
        parts.append(
            f'metrics from Prometheus {redact_url(prometheus.base_url)}'
            + (f' ({extras})' if extras else '')
            + f', read deadline {seconds(prometheus.read_deadline)}s'
        )
    else:
        parts.append(
            f'metrics scraped from the pods ({options.scrape.vllm_scheme}, port '
            f'{options.pod_metrics_port}), deadline {seconds(options.scrape.scrape_deadline)}s'
        )
    if options.pod_selector:
        parts.append(f'pods selected by {options.pod_selector}')
    parts += [
        f'EPP pods {options.epp_selector} ({options.scrape.epp_scheme}, port '
        f'{options.epp_metrics_port})',
        f'status refresh {format_duration(options.status_refresh_interval)}',
        f'not live after {format_duration(liveness_limit(options))} without a cycle',
    ]
    if options.config_file:
        parts.append(f'config file {options.config_file}')
    return ', '.join(parts)
