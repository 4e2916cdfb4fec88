"""Every option of `llmscaler run`: its flag, its environment variable, its format and default.

Why: one table serves the argument parser, `--help`, the resolver (`controller.options.resolve`) and
the documentation (docs/controller.md lists the same rows), so a flag cannot exist without its
variable, its format check or its help line.

Each `Option` has a flag and an environment variable (the names WVA uses where WVA has the
setting); `in_file` ones are also manager keys of the config file; `core` ones are settings of
the decision core (`config.settings`), resolved with the other core keys; `secret` ones (tokens)
are never shown in a message or a log, and their help says to prefer the variable (a command line
is visible to every process of the node). `default` is the default as the help shows it; a
deadline's default depends on the interval and is described in its help.

What fails: nothing here raises once imported; `build_parser` makes an argparse parser whose
values are all text, checked afterwards by each option's `parse`.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from llmscaler.controller.options import values as v

ACTUATIONS = ('direct', 'metrics', 'both')
SOURCES = ('prometheus', 'pods')
LEVELS = ('debug', 'info', 'warning', 'error')
LOG_FORMATS = ('text', 'json')
SCHEMES = ('http', 'https')


@dataclass(frozen=True, slots=True)
class Option:
    """One option (see the module docstring)."""

    dest: str
    flag: str
    env: str
    parse: v.Parse
    help: str
    group: str
    default: str = ''
    in_file: bool = False
    core: bool = False
    secret: bool = False
    boolean: bool = False


_KUBE, _LEADER, _LOOP = 'Kubernetes', 'leader election', 'decisions'
_HTTP, _PROM, _PODS = 'endpoints and probes', 'Prometheus', 'pods and EPP'
_ZERO, _LOGS = 'scale from zero', 'logs'
_HALF = ' (default: 15s, or half the interval when that is shorter)'
_SECRET = '; prefer the variable or a token file, a command line is visible on the node'


def _bool(dest: str, flag: str, env: str, text: str, group: str, **more: bool) -> Option:
    return Option(dest, flag, env, v.boolean, text, group, 'false', boolean=True, **more)


OPTIONS: tuple[Option, ...] = (
    Option('config_file', '--config-file', 'CONFIG_FILE', v.nonempty,
           'configuration file: manager settings and scaling ConfigMaps', _KUBE),
    Option('kubeconfig', '--kubeconfig', 'KUBECONFIG', v.nonempty,
           'kubeconfig file (default: in-cluster, then ~/.kube/config)', _KUBE),
    Option('server', '--server', 'KUBE_SERVER', v.url,
           'API server URL without authentication (kubectl proxy, tests)', _KUBE),
    Option('rest_client_timeout', '--rest-client-timeout', 'REST_CLIENT_TIMEOUT', v.duration,
           'timeout of every API request but watches', _KUBE, '60s'),
    Option('namespace', '--namespace', 'POD_NAMESPACE', v.namespace,
           "the controller's namespace: Lease, global ConfigMaps", _KUBE, 'llmscaler-system'),
    Option('watch_namespace', '--watch-namespace', 'WATCH_NAMESPACE', v.namespace_or_all,
           'watch only this namespace (default: all)', _KUBE),
    _bool('leader_elect', '--leader-elect', 'LEADER_ELECT', 'Lease-based leader election',
          _LEADER),
    Option('lease_duration', '--leader-election-lease-duration',
           'LEADER_ELECTION_LEASE_DURATION', v.duration, 'leader lease duration', _LEADER, '60s'),
    Option('renew_deadline', '--leader-election-renew-deadline',
           'LEADER_ELECTION_RENEW_DEADLINE', v.duration,
           'leader renew deadline, below the lease duration', _LEADER, '50s'),
    Option('retry_period', '--leader-election-retry-period', 'LEADER_ELECTION_RETRY_PERIOD',
           v.duration, 'leader election retry period, below the renew deadline', _LEADER, '10s'),
    Option('identity', '--identity', 'POD_NAME', v.nonempty,
           'leader identity (default: hostname and a random suffix)', _LEADER),
    Option('interval', '--interval', 'GLOBAL_OPT_INTERVAL', v.setting('GLOBAL_OPT_INTERVAL'),
           'decision cycle period, at least 1s', _LOOP, '30s', core=True),
    Option('scale_to_zero', '--scale-to-zero', 'WVA_SCALE_TO_ZERO',
           v.setting('WVA_SCALE_TO_ZERO'), 'scale to zero (ConfigMaps override it per model)',
           _LOOP, 'false', core=True, boolean=True),
    Option('actuation', '--actuation', 'ACTUATION_MODE', v.choice(*ACTUATIONS),
           'direct (write /scale), metrics (gauges for an HPA or KEDA) or both', _LOOP, 'direct'),
    _bool('shadow', '--shadow', 'SHADOW_MODE', 'decide every cycle and publish '
          'llmscaler_shadow_* beside the running counts and another autoscaler\'s '
          'wva_desired_replicas; write nothing to the cluster but the Lease', _LOOP),
    Option('status_refresh_interval', '--status-refresh-interval', 'STATUS_REFRESH_INTERVAL',
           v.duration_or_zero, 'rewrite an unchanged VA status to move lastRunTime this often '
           '(0s: every cycle)', _LOOP, '5m0s'),
    Option('metrics_source', '--metrics-source', 'METRICS_SOURCE', v.choice(*SOURCES),
           'prometheus, or pods (scrape the pods, no Prometheus)', _LOOP, 'prometheus'),
    Option('metrics_bind_address', '--metrics-bind-address', 'METRICS_BIND_ADDRESS',
           v.bind_address, '/metrics: [host]:port, or 0 to turn it off', _HTTP, ':8080'),
    Option('health_probe_bind_address', '--health-probe-bind-address',
           'HEALTH_PROBE_BIND_ADDRESS', v.bind_address,
           '/healthz and /readyz: [host]:port, or 0 to turn it off', _HTTP, ':8081'),
    Option('liveness_intervals', '--liveness-intervals', 'LIVENESS_INTERVALS',
           v.whole(minimum=1), '/healthz fails when the leading loop has not finished a cycle '
           'for this many intervals plus the metric read deadline and the API timeout',
           _HTTP, '3'),
    Option('prometheus_url', '--prometheus-url', 'PROMETHEUS_BASE_URL', v.url,
           'Prometheus base URL', _PROM, in_file=True),
    Option('prometheus_token', '--prometheus-bearer-token', 'PROMETHEUS_BEARER_TOKEN',
           v.nonempty, 'bearer token' + _SECRET, _PROM, in_file=True, secret=True),
    Option('prometheus_token_path', '--prometheus-token-path', 'PROMETHEUS_TOKEN_PATH',
           v.nonempty, 'bearer token file, re-read every cycle', _PROM, in_file=True),
    Option('prometheus_ca', '--prometheus-ca-cert-path', 'PROMETHEUS_CA_CERT_PATH', v.nonempty,
           'CA bundle (default: the system store)', _PROM, in_file=True),
    Option('prometheus_cert', '--prometheus-client-cert-path', 'PROMETHEUS_CLIENT_CERT_PATH',
           v.nonempty, 'client certificate', _PROM, in_file=True),
    Option('prometheus_key', '--prometheus-client-key-path', 'PROMETHEUS_CLIENT_KEY_PATH',
           v.nonempty, 'client key, with the client certificate', _PROM, in_file=True),
    Option('prometheus_server_name', '--prometheus-server-name', 'PROMETHEUS_SERVER_NAME',
           v.nonempty, 'name for SNI and the certificate check', _PROM, in_file=True),
    _bool('prometheus_skip_verify', '--prometheus-tls-insecure-skip-verify',
          'PROMETHEUS_TLS_INSECURE_SKIP_VERIFY', 'skip the certificate check', _PROM,
          in_file=True),
    _bool('prometheus_allow_http', '--prometheus-allow-http', 'PROMETHEUS_ALLOW_HTTP',
          'send the token to an http:// Prometheus (in clear)', _PROM, in_file=True),
    Option('prometheus_timeout', '--prometheus-timeout', 'PROMETHEUS_TIMEOUT', v.duration,
           'one query, connecting to the last byte', _PROM, '10s'),
    Option('prometheus_read_deadline', '--prometheus-read-deadline', 'PROMETHEUS_READ_DEADLINE',
           v.duration, 'all queries of a cycle, below the interval' + _HALF, _PROM),
    Option('prometheus_max_answer_bytes', '--prometheus-max-answer-bytes',
           'PROMETHEUS_MAX_ANSWER_BYTES', v.byte_size, 'largest answer (bytes, or 512Ki, 32Mi)',
           _PROM, '32Mi'),
    Option('pod_selector', '--pod-selector', 'POD_SELECTOR', v.selector_or_none,
           'watch only the pods with these labels, key=value[,...] (default: the pods of '
           'namespaces that hold a VA)', _PODS),
    Option('pod_namespace_limit', '--pod-namespace-limit', 'POD_NAMESPACE_LIMIT',
           v.whole(minimum=0), 'watch pods per VA namespace up to this many namespaces, then '
           'cluster-wide (0: always cluster-wide)', _PODS, '20'),
    Option('pod_metrics_port', '--pod-metrics-port', 'POD_METRICS_PORT', v.port,
           'vLLM metrics port (the prometheus.io/port annotation wins)', _PODS, '8000'),
    Option('pod_metrics_scheme', '--pod-metrics-scheme', 'POD_METRICS_SCHEME', v.choice(*SCHEMES),
           'http or https for the vLLM pages', _PODS, 'http'),
    Option('epp_selector', '--epp-selector', 'EPP_POD_SELECTOR', v.selector,
           'label selector of the EPP pods, used only while no InferencePool exists', _PODS,
           'llm-d.ai/epp=true'),
    Option('epp_metrics_port', '--epp-metrics-port', 'EPP_METRICS_PORT', v.port,
           'EPP metrics port (a prometheus.io/port annotation or an http-metrics slice port wins)',
           _PODS, '9090'),
    Option('epp_metrics_scheme', '--epp-metrics-scheme', 'EPP_METRICS_SCHEME', v.choice(*SCHEMES),
           'http or https for the EPP pages', _PODS, 'http'),
    Option('scrape_timeout', '--scrape-timeout', 'SCRAPE_TIMEOUT', v.duration,
           'one page, connecting to the last byte', _PODS, '2s'),
    Option('scrape_deadline', '--scrape-deadline', 'SCRAPE_DEADLINE', v.duration,
           'all pages of a scrape, below the interval' + _HALF, _PODS),
    Option('scrape_max_page_bytes', '--scrape-max-page-bytes', 'SCRAPE_MAX_PAGE_BYTES',
           v.byte_size, 'largest page (bytes, or 512Ki, 16Mi)', _PODS, '16Mi'),
    Option('scrape_concurrency', '--scrape-concurrency', 'SCRAPE_CONCURRENCY',
           v.whole(minimum=1), 'pages read at once', _PODS, '32'),
    Option('scrape_max_line_length', '--scrape-max-line-length', 'SCRAPE_MAX_LINE_LENGTH',
           v.byte_size, 'longest line of a page (characters, or 64Ki)', _PODS, '64Ki'),
    Option('scrape_max_labels', '--scrape-max-labels', 'SCRAPE_MAX_LABELS',
           v.whole(minimum=1), 'most labels of one sample', _PODS, '128'),
    Option('scrape_max_series_per_page', '--scrape-max-series-per-page',
           'SCRAPE_MAX_SERIES_PER_PAGE', v.whole(minimum=1), 'most series kept from one page',
           _PODS, '10000'),
    Option('scrape_max_series_per_pod', '--scrape-max-series-per-pod',
           'SCRAPE_MAX_SERIES_PER_POD', v.whole(minimum=1), 'most series kept for one pod',
           _PODS, '20000'),
    Option('scrape_max_series_chars_per_pod', '--scrape-max-series-chars-per-pod',
           'SCRAPE_MAX_SERIES_CHARS_PER_POD', v.byte_size,
           "characters of one pod's series names and labels (or 4Mi)", _PODS, '4Mi'),
    Option('scrape_token', '--scrape-bearer-token', 'SCRAPE_BEARER_TOKEN', v.nonempty,
           'bearer token for the EPP pages' + _SECRET, _PODS, secret=True),
    Option('scrape_token_path', '--scrape-token-path', 'SCRAPE_TOKEN_PATH', v.nonempty,
           'bearer token file for the EPP pages, re-read every scrape', _PODS),
    Option('scrape_ca', '--scrape-ca-cert-path', 'SCRAPE_CA_CERT_PATH', v.nonempty,
           'CA bundle for https pages (default: the system store)', _PODS),
    Option('scrape_cert', '--scrape-client-cert-path', 'SCRAPE_CLIENT_CERT_PATH', v.nonempty,
           'client certificate for https pages', _PODS),
    Option('scrape_key', '--scrape-client-key-path', 'SCRAPE_CLIENT_KEY_PATH', v.nonempty,
           'client key, with the client certificate', _PODS),
    Option('scrape_server_name', '--scrape-server-name', 'SCRAPE_SERVER_NAME', v.nonempty,
           'name for SNI and the certificate check of https pages', _PODS),
    _bool('scrape_skip_verify', '--scrape-tls-insecure-skip-verify',
          'SCRAPE_TLS_INSECURE_SKIP_VERIFY', 'skip the certificate check of https pages', _PODS),
    _bool('scrape_allow_http', '--scrape-allow-http', 'SCRAPE_ALLOW_HTTP',
          'send the token to http:// EPP pages (in clear)', _PODS),
    Option('scale_from_zero_interval', '--scale-from-zero-interval', 'SCALE_FROM_ZERO_INTERVAL',
           v.duration, 'how often the EPP queues of idle models are read', _ZERO, '100ms'),
    Option('scale_from_zero_concurrency', '--scale-from-zero-concurrency',
           'SCALE_FROM_ZERO_ENGINE_MAX_CONCURRENCY', v.whole(minimum=1),
           'variants woken at once', _ZERO, '10', in_file=True),
    Option('log_level', '--log-level', 'LOG_LEVEL', v.choice(*LEVELS), ', '.join(LEVELS),
           _LOGS, 'info'),
    Option('log_format', '--log-format', 'LOG_FORMAT', v.choice(*LOG_FORMATS),
           'text, or json (one object per line)', _LOGS, 'text'),
    Option('http_log_level', '--http-log-level', 'HTTP_LOG_LEVEL', v.choice(*LEVELS),
           'level of the HTTP libraries (httpx, httpcore, h2, hpack), apart from --log-level',
           _LOGS, 'warning'),
)  # fmt: skip
"""Every option, in the order `--help` and docs/controller.md list them."""

BY_DEST = {option.dest: option for option in OPTIONS}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """One argument per option, every value read as text (boolean flags take an optional one)."""
    groups: dict[str, argparse._ArgumentGroup] = {}
    for option in OPTIONS:
        group = groups.get(option.group)
        if group is None:
            group = groups[option.group] = parser.add_argument_group(option.group)
        shown = f'; default {option.default}' if option.default else ''
        text = f'{option.help} (env {option.env}{shown})'.replace('%', '%%')
        if option.boolean:
            group.add_argument(
                option.flag, dest=option.dest, nargs='?', const='true', metavar='BOOL', help=text
            )
        else:
            group.add_argument(option.flag, dest=option.dest, metavar=option.env, help=text)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of `llmscaler run` (every value is text, validated afterwards)."""
    parser = argparse.ArgumentParser(
        prog='llmscaler run',
        description='Run the controller. Every flag has an environment variable; an invalid '
        'value of either stops the controller with exit status 2.',
        allow_abbrev=False,
    )
    add_arguments(parser)
    return parser
