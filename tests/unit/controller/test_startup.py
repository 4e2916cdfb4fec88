"""The start-up line names the settings without a secret; the liveness limit is intervals plus the
read deadline plus the API timeout; TLS files that cannot be loaded are named."""

from __future__ import annotations

from pathlib import Path

from llmscaler.controller.options.resolve import RunOptions, fatal_errors, resolve_options
from llmscaler.controller.startup import liveness_limit, settings_line, tls_problems

SECRET = 'sk-live-0123456789'


def options(*argv: str, **env: str) -> RunOptions:
    resolved, errors = resolve_options(argv=list(argv), env=env)
    assert fatal_errors(errors=errors) == ()
    return resolved


def test_the_settings_line_shows_no_secret() -> None:
    line = settings_line(
        options(
            '--identity', 'ctl-0', '--prometheus-url', 'https://prom:9090',
            PROMETHEUS_BEARER_TOKEN=SECRET, SCRAPE_BEARER_TOKEN=SECRET,
            EPP_METRICS_SCHEME='https',
        )
    )  # fmt: skip
    assert SECRET not in line
    assert '\n' not in line
    assert line.startswith('identity ctl-0, namespace llmscaler-system, watching all namespaces')
    assert 'metrics from Prometheus https://prom:9090 (token set), read deadline 15s' in line
    assert 'not live after 2m45s without a cycle' in line
    assert line.endswith(', not live after 2m45s without a cycle')


def test_the_liveness_limit() -> None:
    assert liveness_limit(options('--metrics-source', 'pods')) == 3 * 30 + 15 + 60
    assert liveness_limit(
        options('--metrics-source=pods', '--interval=10s', '--liveness-intervals=5',
                '--rest-client-timeout=20s')
    ) == 5 * 10 + 5 + 20  # fmt: skip


def test_tls_files_that_cannot_be_loaded_are_named(tmp_path: Path) -> None:
    assert tls_problems(options('--metrics-source', 'pods')) == ()
    bogus = tmp_path / 'bundle.pem'
    bogus.write_text('-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n')
    found = tls_problems(
        options('--prometheus-url', 'https://p', '--prometheus-ca-cert-path', str(bogus),
                '--scrape-client-cert-path', str(tmp_path / 'none.pem'))
    )  # fmt: skip
    assert [line.split(':')[0] for line in found] == [
        f'PROMETHEUS_CA_CERT_PATH {bogus}',
        f'SCRAPE_CLIENT_CERT_PATH {tmp_path / "none.pem"}',
    ]
    # Prometheus files are not loaded when Prometheus is not the source.
    unused = options('--metrics-source=pods', '--prometheus-url=https://p',
                     f'--prometheus-ca-cert-path={bogus}')  # fmt: skip
    assert tls_problems(unused) == ()
