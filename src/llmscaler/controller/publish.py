"""The controller's own outputs over HTTP: its Prometheus metrics, health and readiness.

Why: `wva_desired_replicas` is the scaling signal an HPA or KEDA reads through Prometheus when
the controller does not write `/scale` itself (as llm-d workload-variant-autoscaler publishes
it); the `inferno_*` aliases keep dashboards and adapters written for its older names
(inferno-autoscaler) working. The other families say how the controller itself is doing. The
kubelet probes `/healthz` and `/readyz`. They are served with the standard library's asyncio
streams, so the controller's image needs no HTTP server package.

What: `ControllerMetrics` owns a private `CollectorRegistry` (never the process-wide default, so
two controllers in one test process do not clash) with these families:

- gauges `wva_desired_replicas`, `wva_current_replicas`, `wva_desired_ratio` (desired/current,
  or desired when current is 0) and the same as `inferno_*`, labelled variant_name, namespace,
  accelerator_type (`unresolved` for '' or `unknown`). `set_replicas` publishes the whole set:
  series of variants no longer listed are removed, and so is the old series when a variant's
  accelerator changes, so an adapter never reads a stale signal;
- `wva_replica_scaling_total{variant_name,namespace,direction,reason}`,
  `llmscaler_decisions_total{action}`, `wva_errors_total{component,error_type}` counters;
- `wva_optimization_duration_seconds{status}` (0.01-10 s) and
  `llmscaler_scale_from_zero_seconds` (0.01-5 s: queued request seen → `/scale` written)
  histograms; `llmscaler_leader` and `wva_models_processed` gauges;
- the GPU limiter's: `wva_decisions_limited_total{variant_name,namespace,limiter_name}` (a
  variant the GPU budget held back in a cycle; `limiter_name` is `gpu-limiter`, the one limiter,
  whose providers the decision's verdict names) and
  `wva_available_gpus{accelerator_vendor,accelerator_model,accelerator_type}` (the allocatable
  GPUs of the schedulable Nodes per type, the inventory the limiter budgets from;
  `available_gpu_rows` builds the rows). `set_available_gpus` publishes the whole set, so a type
  gone, or the limiter turned off (no inventory read), removes its series;
- `llmscaler_build_info{version,python}` (always 1) and the process's own `process_*` families
  (CPU seconds, resident memory, open file descriptors, start time), as prometheus-client's
  process collector reads them from /proc;
- `llmscaler_metrics_available{variant_name,namespace,model_id}`: 1 when every ready replica of
  the variant had fresh, valid metrics in the last cycle, 0 when the core held it for missing,
  stale or invalid ones (its `MetricsAvailable` condition, as a series an alert can read per
  model). `set_metrics_available` publishes the whole set, like `set_replicas`;
- in shadow mode (`llmscaler run --shadow`) instead of the `wva_*`/`inferno_*` replica gauges,
  which the autoscaler running beside it publishes: `llmscaler_shadow_desired_replicas` and
  `llmscaler_shadow_current_replicas{variant_name,namespace,accelerator_type}`,
  `llmscaler_shadow_peer_desired_replicas{variant_name,namespace}` (the other autoscaler's
  `wva_desired_replicas`, where read), and the counter
  `llmscaler_shadow_comparisons_total{variant_name,namespace,against,result}`: one per variant
  and cycle, `against` `current` or `peer`, `result` `equal`, `above` or `below` (llmscaler's
  count against theirs). `set_shadow` publishes the whole set.

`HttpEndpoints` serves fixed routes (path → function returning status, content type and body)
on one socket, one request per connection (`Connection: close`); `parse_bind_address` reads
controller-runtime style flags (`:8080`, `127.0.0.1:0`, `[::1]:9`; `0` or '' disables the
endpoint). What a client can make it hold is bounded: `MAX_HEAD` bytes of request line and
headers, a body of at most `MAX_BODY` bytes (read and dropped), `read_timeout` seconds to send
the request and `write_timeout` seconds to take the answer.

What fails: `parse_bind_address` raises ValueError for text it cannot read, and entering
`HttpEndpoints` raises OSError when the address cannot be bound: both are startup errors the
caller reports. Once serving, an unknown path is 404, a method other than GET or HEAD 405, and a
route function that raises is logged and answered with 500; the server keeps running. A request
it cannot read is answered and its connection closed: 400 (malformed), 411 (Transfer-Encoding),
413 (body over `MAX_BODY`), 431 (head over `MAX_HEAD`), 505 (not HTTP/1.0 or 1.1), 408 (not sent
within `read_timeout`); a client that does not take its answer within `write_timeout`, or goes
away, is dropped. A health
check that raises counts as failing (503). A negative `count` to `decisions` is a programming
error (ValueError, as prometheus-client raises for a negative increment).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import platform
import re
import socket
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from http import HTTPStatus
from types import TracebackType
from typing import Any, Final
from urllib.parse import unquote, urlsplit

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    Info,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4

from llmscaler.controller.cluster.inventory import node_accelerator
from llmscaler.domain.snapshot import Decision, GpuLimit
from llmscaler.optimize.limiter import INVENTORY_PROVIDER
from llmscaler.version import version

_log = logging.getLogger(__name__)

METRICS_CONTENT_TYPE: Final = CONTENT_TYPE_PLAIN_0_0_4
"""Text format 0.0.4, which every Prometheus version reads."""
TEXT_CONTENT_TYPE: Final = 'text/plain; charset=utf-8'
UNRESOLVED: Final = 'unresolved'
UNKNOWN: Final = 'unknown'
REPLICA_LABELS: Final = ('variant_name', 'namespace', 'accelerator_type')
OPTIMIZATION_BUCKETS: Final = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
FROM_ZERO_BUCKETS: Final = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
RENEWAL_LATENESS_BUCKETS: Final = (0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0)
"""Seconds: on time is well below 10 ms; a second late means the event loop was held that long."""
MAX_HEAD: Final = 8192
"""Bytes of request line and headers a client may send (blank line included)."""
MAX_BODY: Final = 64 * 1024
"""Bytes of request body read and dropped: a route is never given a body."""
READ_TIMEOUT: Final = 5.0
"""Seconds a client has, from its connection, to send its whole request (by default)."""
WRITE_TIMEOUT: Final = 10.0
"""Seconds a client has to take the answer, a large /metrics page on a slow link (by default)."""
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_REQUEST_LINE = re.compile(
    r"(?P<method>[!#$%&'*+.^_`|~0-9A-Za-z-]+) (?P<target>[!-~]+) (?P<version>HTTP/[0-9]\.[0-9])"
)

Route = Callable[[], tuple[int, str, bytes]]


@dataclass(frozen=True, slots=True)
class ReplicaRow:
    """One variant's published replica signal."""

    variant: str
    namespace: str
    accelerator: str
    current: int
    desired: int


@dataclass(frozen=True, slots=True)
class ShadowRow:
    """One variant in shadow mode: what llmscaler would set and what runs, what a peer publishes."""

    replicas: ReplicaRow
    peer: int | None
    """Another autoscaler's `wva_desired_replicas` for the variant; None when none is read."""


def replica_rows(*, decisions: Iterable[Decision]) -> list[ReplicaRow]:
    """The replica signal of each decision (current and desired counts), in key order."""
    return [
        ReplicaRow(
            variant=d.variant,
            namespace=d.namespace,
            accelerator=d.accelerator,
            current=d.current,
            desired=d.target,
        )
        for d in sorted(decisions, key=lambda d: d.key)
    ]


@dataclass(frozen=True, slots=True)
class AvailabilityRow:
    """One variant's `MetricsAvailable` judgement of the last cycle."""

    variant: str
    namespace: str
    model_id: str
    available: bool


@dataclass(frozen=True, slots=True)
class GpuRow:
    """One accelerator type's allocatable GPUs, as `wva_available_gpus` labels it."""

    vendor: str
    model: str
    type: str
    gpus: int


LIMITER_NAME: Final = 'gpu-limiter'
GPU_VENDORS: Final = (
    ('nvidia.com/', 'nvidia'),
    ('amd.com/', 'amd'),
    ('intel.com/', 'intel'),
    ('google.com/', 'google'),
)
"""The vendor of a Node's GPUs by the prefix of their allocatable resource name."""


def available_gpu_rows(
    *, limits: Sequence[GpuLimit], vendors: Mapping[str, str]
) -> tuple[GpuRow, ...]:
    """`wva_available_gpus` rows from the inventory's cluster-wide limits, sorted by type.

    `vendors` maps an accelerator type to its vendor (`gpu_vendor` of its Nodes' allocatable
    resource); `unknown` when absent. The model label is the type itself: the Node's GPU
    product label (`NVIDIA-A100-SXM4-80GB`), which is both. Quota limits, per-namespace pools
    and unlimited figures are not GPUs that exist, so they are left out.
    """
    rows = {
        limit.accelerator: GpuRow(
            vendor=vendors.get(limit.accelerator, UNKNOWN),
            model=limit.accelerator,
            type=limit.accelerator,
            gpus=limit.limit,
        )
        for limit in limits
        if limit.provider == INVENTORY_PROVIDER and not limit.namespace and limit.limit >= 0
    }
    return tuple(row for _, row in sorted(rows.items()))


def node_gpu_vendors(nodes: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """Accelerator type → vendor, from Nodes (full or as the inventory keeps them): the type as
    `controller.cluster.inventory` reads it, the vendor from an allocatable GPU resource it has some
    of (a Node with none adds nothing, as in the inventory). Where Nodes
    of one type disagree, the first vendor in name order is kept."""
    found: dict[str, str] = {}
    for node in nodes:
        meta, status = node.get('metadata'), node.get('status')
        labels = meta.get('labels') if isinstance(meta, Mapping) else None
        allocatable = status.get('allocatable') if isinstance(status, Mapping) else None
        accelerator = node_accelerator(labels if isinstance(labels, Mapping) else {})
        held = allocatable if isinstance(allocatable, Mapping) else {}
        vendor = gpu_vendor(k for k, v in held.items() if str(v).strip() not in ('', '0'))
        if vendor != UNKNOWN and vendor < found.get(accelerator, '~'):
            found[accelerator] = vendor
    return found


def gpu_vendor(resources: Iterable[str]) -> str:
    """The vendor of a Node's GPUs from its allocatable resource names; `unknown` if none."""
    for name in sorted(resources):
        for prefix, vendor in GPU_VENDORS:
            if name.startswith(prefix):
                return vendor
    return UNKNOWN


def accelerator_label(accelerator: str) -> str:
    """The `accelerator_type` label: `unresolved` when the accelerator is not known."""
    return UNRESOLVED if accelerator in ('', 'unknown') else accelerator


class ControllerMetrics:
    """The controller's metric families in a private registry (see the module docstring)."""

    def __init__(self) -> None:
        self._registry = CollectorRegistry(auto_describe=True)
        registry = self._registry

        def gauge(name: str, doc: str) -> Gauge:
            return Gauge(name, doc, REPLICA_LABELS, registry=registry)

        self._desired = (
            gauge('wva_desired_replicas', 'Desired replicas per variant'),
            gauge('inferno_desired_replicas', 'Desired replicas per variant (older name)'),
        )
        self._current = (
            gauge('wva_current_replicas', 'Current replicas per variant'),
            gauge('inferno_current_replicas', 'Current replicas per variant (older name)'),
        )
        self._ratio = (
            gauge('wva_desired_ratio', 'Desired over current replicas (desired when current=0)'),
            gauge('inferno_desired_ratio', 'Desired over current replicas (older name)'),
        )
        self._series: set[tuple[str, ...]] = set()
        self._scaling = Counter(
            'wva_replica_scaling_total',
            'Replica changes decided, by direction and reason',
            ('variant_name', 'namespace', 'direction', 'reason'),
            registry=registry,
        )
        self._duration = Histogram(
            'wva_optimization_duration_seconds',
            'Duration of one decision cycle',
            ('status',),
            buckets=OPTIMIZATION_BUCKETS,
            registry=registry,
        )
        self._decisions = Counter(
            'llmscaler_decisions_total', 'Decisions made, by action', ('action',), registry=registry
        )
        self._errors = Counter(
            'wva_errors_total',
            'Errors by component and type',
            ('component', 'error_type'),
            registry=registry,
        )
        self._from_zero = Histogram(
            'llmscaler_scale_from_zero_seconds',
            'Time from a queued request of a model at zero replicas to its /scale write',
            buckets=FROM_ZERO_BUCKETS,
            registry=registry,
        )
        self._leader = Gauge(
            'llmscaler_leader', '1 while this instance holds the leader lease', registry=registry
        )
        self._renewals = Counter(
            'llmscaler_lease_renewals_total',
            'Lease renewal attempts by outcome (renewed, failed)',
            ('outcome',),
            registry=registry,
        )
        self._renewal_late = Histogram(
            'llmscaler_lease_renewal_lateness_seconds',
            'How late each Lease renewal attempt started against its schedule (a held event loop)',
            buckets=RENEWAL_LATENESS_BUCKETS,
            registry=registry,
        )
        self._models = Gauge(
            'wva_models_processed', 'Models processed in the last cycle', registry=registry
        )
        self._limited = Counter(
            'wva_decisions_limited_total',
            'Decisions whose target the GPU budget held back',
            ('variant_name', 'namespace', 'limiter_name'),
            registry=registry,
        )
        self._gpus = Gauge(
            'wva_available_gpus',
            'Allocatable GPUs of the schedulable Nodes, per accelerator type',
            ('accelerator_vendor', 'accelerator_model', 'accelerator_type'),
            registry=registry,
        )
        self._gpu_series: set[tuple[str, ...]] = set()
        self._available = Gauge(
            'llmscaler_metrics_available',
            '1 when every ready replica of the variant had fresh, valid metrics in the last cycle',
            ('variant_name', 'namespace', 'model_id'),
            registry=registry,
        )
        self._available_series: set[tuple[str, ...]] = set()
        self._shadow = (
            gauge('llmscaler_shadow_desired_replicas', 'Replicas llmscaler would set (shadow)'),
            gauge('llmscaler_shadow_current_replicas', 'Replicas running (shadow)'),
        )
        self._shadow_series: set[tuple[str, ...]] = set()
        self._peer = Gauge(
            'llmscaler_shadow_peer_desired_replicas',
            "Another autoscaler's wva_desired_replicas for the variant (shadow)",
            ('variant_name', 'namespace'),
            registry=registry,
        )
        self._peer_series: set[tuple[str, ...]] = set()
        self._compared = Counter(
            'llmscaler_shadow_comparisons_total',
            "Shadow decisions compared with the running count or a peer's, by result",
            ('variant_name', 'namespace', 'against', 'result'),
            registry=registry,
        )
        # The process (CPU, memory, open files, start time) and what is running, as every
        # Kubernetes controller reports them; an alert needs them to tell a restart from a hang.
        ProcessCollector(registry=registry)
        Info('llmscaler_build', 'The running llmscaler', registry=registry).info(
            {'version': version(), 'python': platform.python_version()}
        )

    @property
    def registry(self) -> CollectorRegistry:
        return self._registry

    def set_replicas(self, *, rows: Sequence[ReplicaRow]) -> None:
        """Publish exactly these variants' signals; every other replica series is removed."""
        chosen: dict[tuple[str, str], ReplicaRow] = {}
        # One series per variant, whatever the order of duplicate rows.
        order = sorted(
            rows, key=lambda r: (r.namespace, r.variant, r.accelerator, r.current, r.desired)
        )
        for row in order:
            chosen.setdefault((row.namespace, row.variant), row)
        values: dict[tuple[str, ...], tuple[float, ...]] = {}
        for (namespace, variant), row in sorted(chosen.items()):
            ratio = row.desired / row.current if row.current > 0 else float(row.desired)
            desired, current = float(row.desired), float(row.current)
            values[(variant, namespace, accelerator_label(row.accelerator))] = (
                desired,
                desired,
                current,
                current,
                ratio,
                ratio,
            )
        self._series = _publish_exactly(
            families=(*self._desired, *self._current, *self._ratio),
            values=values,
            previous=self._series,
        )

    def scaled(self, *, variant: str, namespace: str, direction: str, reason: str) -> None:
        self._scaling.labels(variant, namespace, direction, reason).inc()

    def cycle(self, *, seconds: float, status: str) -> None:
        """One decision cycle took `seconds`; `status` is 'success' or 'error'."""
        self._duration.labels(status).observe(seconds)

    def decisions(self, *, action: str, count: int) -> None:
        """`count` decisions of `action` (0 shows the series)."""
        self._decisions.labels(action).inc(count)

    def error(self, *, component: str, error_type: str) -> None:
        self._errors.labels(component, error_type).inc()

    def from_zero(self, *, seconds: float) -> None:
        """A scale-from-zero took `seconds` from the queued request seen to `/scale` written."""
        self._from_zero.observe(seconds)

    def leader(self, *, is_leader: bool) -> None:
        self._leader.set(1.0 if is_leader else 0.0)

    def lease_renewal(self, *, late: float, ok: bool) -> None:
        """A Lease renewal attempt that started `late` seconds after its schedule."""
        self._renewals.labels('renewed' if ok else 'failed').inc()
        self._renewal_late.observe(late)

    def models(self, *, count: int) -> None:
        self._models.set(count)

    def limited(self, *, variant: str, namespace: str) -> None:
        """The GPU budget held back this variant's target in one cycle."""
        self._limited.labels(variant, namespace, LIMITER_NAME).inc()

    def set_available_gpus(self, *, rows: Sequence[GpuRow]) -> None:
        """Publish exactly these types' GPUs; every other `wva_available_gpus` series goes."""
        values: dict[tuple[str, ...], tuple[float, ...]] = {}
        for row in sorted(rows, key=lambda r: (r.type, r.vendor, r.model, r.gpus)):
            values.setdefault((row.vendor, row.model, row.type), (float(row.gpus),))
        self._gpu_series = _publish_exactly(
            families=(self._gpus,), values=values, previous=self._gpu_series
        )

    def set_metrics_available(self, *, rows: Sequence[AvailabilityRow]) -> None:
        """Publish exactly these variants' judgements; a variant listed twice is unavailable if
        either row says so (never report fresh metrics the core did not have)."""
        values: dict[tuple[str, ...], tuple[float, ...]] = {}
        for row in sorted(rows, key=lambda r: (r.namespace, r.variant, r.model_id, r.available)):
            values.setdefault((row.variant, row.namespace, row.model_id), (float(row.available),))
        self._available_series = _publish_exactly(
            families=(self._available,), values=values, previous=self._available_series
        )

    def set_shadow(self, *, rows: Sequence[ShadowRow]) -> None:
        """Publish exactly these variants' shadow gauges and count one comparison of each
        (against the running count, and the peer's where there is one)."""
        chosen: dict[tuple[str, str], ShadowRow] = {}
        for row in sorted(rows, key=lambda r: (r.replicas.namespace, r.replicas.variant)):
            chosen.setdefault((row.replicas.namespace, row.replicas.variant), row)
        counts: dict[tuple[str, ...], tuple[float, ...]] = {}
        peers: dict[tuple[str, ...], tuple[float, ...]] = {}
        for (namespace, variant), row in sorted(chosen.items()):
            ours = row.replicas
            labels = (variant, namespace, accelerator_label(ours.accelerator))
            counts[labels] = (float(ours.desired), float(ours.current))
            self._compared.labels(
                variant, namespace, 'current', _against(ours.desired, ours.current)
            ).inc()
            if row.peer is not None:
                peers[(variant, namespace)] = (float(row.peer),)
                self._compared.labels(
                    variant, namespace, 'peer', _against(ours.desired, row.peer)
                ).inc()
        self._shadow_series = _publish_exactly(
            families=self._shadow, values=counts, previous=self._shadow_series
        )
        self._peer_series = _publish_exactly(
            families=(self._peer,), values=peers, previous=self._peer_series
        )

    def render(self) -> bytes:
        """The registry in the text exposition format (`METRICS_CONTENT_TYPE`)."""
        return generate_latest(self._registry)


def _against(ours: int, theirs: int) -> str:
    return 'equal' if ours == theirs else 'above' if ours > theirs else 'below'


def _publish_exactly(
    *,
    families: Sequence[Gauge],
    values: Mapping[tuple[str, ...], Sequence[float]],
    previous: set[tuple[str, ...]],
) -> set[tuple[str, ...]]:
    """Set `values` (label values → one value per family) and remove the series of `previous`
    not among them, so a reader never sees a signal of something no longer there; returns the
    label values now published."""
    for labels, row in sorted(values.items()):
        for family, value in zip(families, row, strict=True):
            family.labels(*labels).set(value)
    for labels in sorted(previous - values.keys()):
        for family in families:
            family.remove(*labels)
    return set(values)


def metrics_route(*, metrics: ControllerMetrics) -> Route:
    """A route serving `metrics` in the text format."""
    return lambda: (200, METRICS_CONTENT_TYPE, metrics.render())


def health_route(fn: Callable[[], tuple[bool, str]]) -> Route:
    """A route from a check: 200 'ok', or 503 with the check's message (text/plain)."""

    def route() -> tuple[int, str, bytes]:
        try:
            healthy, message = fn()
        except Exception as exc:
            _log.exception('health check failed')
            return 503, TEXT_CONTENT_TYPE, f'check failed: {exc!r}'.encode()
        if healthy:
            return 200, TEXT_CONTENT_TYPE, b'ok'
        return 503, TEXT_CONTENT_TYPE, (message or 'not ok').encode()

    return route


_PORT = re.compile(r'[0-9]{1,5}')
_HOST = re.compile(
    r'[A-Za-z0-9]([-A-Za-z0-9]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([-A-Za-z0-9]{0,61}[A-Za-z0-9])?)*'
)


def parse_bind_address(text: str) -> tuple[str, int] | None:
    """`host:port` of a bind flag; ':port' binds every IPv4 address; '0' or '' disables."""
    stripped = text.strip()
    if stripped in ('', '0'):
        return None
    host, sep, port_text = stripped.rpartition(':')
    if not sep or not _PORT.fullmatch(port_text) or int(port_text) > 65535:
        raise ValueError(f'bind address {text!r}: expected [host]:port with a port in 0-65535')
    if host.startswith('[') and host.endswith(']'):
        try:
            address = ipaddress.IPv6Address(host[1:-1])
        except ValueError:
            raise ValueError(f'bind address {text!r}: {host} is not an IPv6 address') from None
        return str(address), int(port_text)
    if not host:
        return '0.0.0.0', int(port_text)
    if not _HOST.fullmatch(host):
        raise ValueError(f'bind address {text!r}: {host!r} is not a host name or IPv4 address')
    if all(part.isdigit() for part in host.split('.')):
        try:
            ipaddress.IPv4Address(host)
        except ValueError:
            raise ValueError(f'bind address {text!r}: {host!r} is not an IPv4 address') from None
    return host, int(port_text)


async def _bound_socket(*, host: str, port: int) -> socket.socket:
    """A listening-ready TCP socket bound to the first address `host` resolves to."""
    infos = await asyncio.get_running_loop().getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )
    if not infos:
        raise OSError(f'{host!r} resolves to no address')
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError:
        sock.close()
        raise
    return sock


class BadRequest(Exception):
    """A request the endpoints refuse before any route runs: its status and one-line reason."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status


@dataclass(frozen=True, slots=True)
class RequestHead:
    """The request line and the body length of one request."""

    method: str
    path: str
    body_length: int


def parse_request_head(head: bytes) -> RequestHead:
    """The method, the decoded path (no query) and the declared body length of a request head
    (request line and header lines, CRLF-separated, the blank line included or not).

    BadRequest 400 for a malformed request line, header line or Content-Length, 505 for an HTTP
    version other than 1.0 or 1.1, 411 for a body of unknown length (Transfer-Encoding), 413 for
    a declared body over `MAX_BODY` bytes.
    """
    lines = head.decode('latin-1').rstrip('\r\n').split('\r\n')
    request = _REQUEST_LINE.fullmatch(lines[0])
    if request is None:
        raise BadRequest(400, 'malformed request line')
    if request['version'] not in ('HTTP/1.0', 'HTTP/1.1'):
        raise BadRequest(505, f'{request["version"]} is not served')
    length = 0
    for line in lines[1:]:
        name, sep, value = line.partition(':')
        if not sep or not _TOKEN.fullmatch(name):
            raise BadRequest(400, 'malformed header line')
        key = name.lower()
        if key == 'transfer-encoding':
            raise BadRequest(411, 'a body must have a Content-Length')
        if key == 'content-length':
            if not value.strip().isdigit() or len(value.strip()) > 12:
                raise BadRequest(400, 'malformed Content-Length')
            length = int(value)
    if length > MAX_BODY:
        raise BadRequest(413, f'a body over {MAX_BODY} bytes')
    target = request['target']
    path = urlsplit(target).path if target.startswith(('http://', 'https://')) else target
    return RequestHead(
        method=request['method'], path=unquote(path.partition('?')[0]), body_length=length
    )


def response_bytes(
    *,
    status: int,
    content_type: str,
    body: bytes,
    head_only: bool = False,
    headers: Mapping[str, str] | None = None,
) -> bytes:
    """One HTTP/1.1 answer that closes the connection; `head_only` leaves the body out but keeps
    its Content-Length (the answer to HEAD)."""
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = 'Status'
    lines = [
        f'HTTP/1.1 {status} {phrase}',
        f'Content-Type: {content_type}',
        f'Content-Length: {len(body)}',
        'Connection: close',
        *(f'{name}: {value}' for name, value in (headers or {}).items()),
    ]
    return ('\r\n'.join(lines) + '\r\n\r\n').encode('latin-1') + (b'' if head_only else body)


class HttpEndpoints:
    """Fixed GET routes served on one address while the context is open.

    One request per connection, answered with `Connection: close`: nothing is kept between
    requests, and a kubelet probe opens a connection per probe anyway. A client has
    `read_timeout` seconds to send at most `MAX_HEAD` bytes of request line and headers (and a
    body of at most `MAX_BODY`, which is dropped), and `write_timeout` seconds to take the answer;
    past either, its connection is closed. Routes are called on the event loop, so they must not
    block.
    """

    def __init__(
        self,
        *,
        host: str,
        port: int,
        routes: Mapping[str, Route],
        read_timeout: float = READ_TIMEOUT,
        write_timeout: float = WRITE_TIMEOUT,
    ) -> None:
        for path in routes:
            if not path.startswith('/'):
                raise ValueError(f'route {path!r} must start with /')
        self._host = host
        self._wanted_port = port
        self._routes = dict(routes)
        self._read_timeout = read_timeout
        self._write_timeout = write_timeout
        self._server: asyncio.Server | None = None
        self._port: int | None = None
        self._connections: set[asyncio.Task[None]] = set()

    @property
    def port(self) -> int:
        """The bound port (the one chosen by the system when 0 was asked)."""
        if self._port is None:
            raise RuntimeError('HttpEndpoints is not serving')
        return self._port

    async def __aenter__(self) -> HttpEndpoints:
        sock = await _bound_socket(host=self._host, port=self._wanted_port)
        try:
            port = int(sock.getsockname()[1])
            # The stream's limit bounds what `readuntil` buffers while it looks for the blank line.
            server = await asyncio.start_server(self._serve, sock=sock, limit=MAX_HEAD)
        except BaseException:
            sock.close()
            raise
        self._server, self._port = server, port
        _log.info('serving %s on %s port %d', ', '.join(sorted(self._routes)), self._host, port)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        server, self._server, self._port = self._server, None, None
        if server is None:
            return
        server.close()
        # Python 3.11's wait_closed does not wait for open connections: they are ended here.
        for task in self._connections:
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        await server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._connections.add(task)
        try:
            answer = await self._answer(reader)
            if answer:
                # drain() then returns only once the whole answer is with the kernel.
                writer.transport.set_write_buffer_limits(high=0)
                writer.write(answer)
                async with asyncio.timeout(self._write_timeout):
                    await writer.drain()
        except TimeoutError:
            _log.debug('a client did not take its answer within %.1f s', self._write_timeout)
        except ConnectionError as exc:
            _log.debug('a client went away: %r', exc)
        finally:
            if writer.transport.get_write_buffer_size():
                # Not taken in time, or shutting down: close() would wait until it is sent.
                writer.transport.abort()
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()
            if task is not None:
                self._connections.discard(task)

    async def _answer(self, reader: asyncio.StreamReader) -> bytes:
        """The whole answer to the connection's one request (b'' when there is none to give)."""
        try:
            async with asyncio.timeout(self._read_timeout):
                head = parse_request_head(await reader.readuntil(b'\r\n\r\n'))
                await reader.readexactly(head.body_length)
        except BadRequest as refused:
            return response_bytes(
                status=refused.status,
                content_type=TEXT_CONTENT_TYPE,
                body=f'{refused}\n'.encode(),
            )
        except asyncio.LimitOverrunError:
            return response_bytes(
                status=431, content_type=TEXT_CONTENT_TYPE, body=b'request head too large\n'
            )
        except TimeoutError:
            return response_bytes(
                status=408, content_type=TEXT_CONTENT_TYPE, body=b'request not sent in time\n'
            )
        except asyncio.IncompleteReadError:
            return b''  # the client closed before finishing its request
        return self._route(head)

    def _route(self, head: RequestHead) -> bytes:
        route = self._routes.get(head.path)
        bodiless = head.method == 'HEAD'
        if route is None:
            return response_bytes(
                status=404, content_type=TEXT_CONTENT_TYPE, body=b'not found\n', head_only=bodiless
            )
        if head.method not in ('GET', 'HEAD'):
            return response_bytes(
                status=405,
                content_type=TEXT_CONTENT_TYPE,
                body=b'only GET\n',
                headers={'Allow': 'GET, HEAD'},
            )
        try:
            status, content_type, body = route()
        except Exception:
            _log.exception('route %s failed', head.path)
            status, content_type, body = 500, TEXT_CONTENT_TYPE, b'internal error\n'
        return response_bytes(
            status=status, content_type=content_type, body=body, head_only=bodiless
        )
