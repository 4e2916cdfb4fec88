"""The InferencePool datastore: pools ↔ endpoint picker (EPP) service ↔ variant groups.

Why: WVA (v0.9.0, internal/datastore/) ties every variant group to an InferencePool of the Gateway
API Inference Extension and reads the scheduler (EPP) queue of a model from the pool's own endpoint
picker. A cluster may hold many pools, each with its EPP behind a Service; one label selector over
every EPP pod cannot tell them apart. This module reads the pools as the API server serves them,
says which pool each VariantAutoscaling's variant belongs to, and which pages of which EPP answer
for it. It is pure: no I/O, no clock, no event loop (`controller.pools.watch` feeds it,
`controller.pools.sources` uses it).

What it reads of a pool (`parse_pool`), as each version defines it:

- `inference.networking.k8s.io/v1`: `spec.selector.matchLabels`, `spec.targetPorts[].number`,
  `spec.endpointPickerRef` {`name`, `port.number`, `failureMode`, `kind`, `group`};
- `inference.networking.x-k8s.io/v1alpha2`: `spec.selector` (a plain map),
  `spec.targetPortNumber`, `spec.extensionRef` {`name`, `portNumber`, `failureMode`, `kind`,
  `group`}.
`kind` defaults to `Service` and `group` to the core group; `failureMode` to `FailClose`. A pool
whose fields are missing or of the wrong type, whose selector is empty, or whose picker is not a
core Service is kept with a one-line `problem`: the variants it selects are held and say why.
The same (namespace, name) served in both versions (one CRD serving two versions) is one pool,
read from v1.

Membership (`assign`): a VA's variant belongs to the pool of its namespace whose selector matches
the labels of its scale target's pod template (a pool selects pods in its own namespace only).
Every resolved variant gets a pool or a problem: no pool selects it, two or more do (none is
used: the queue of the wrong EPP would wake or hold the wrong variant), or its one pool has a
problem. A variant with a problem is held (`controller.pools.sources.PooledWorlds`). The datastore
is `active` as soon as one pool exists in the watched scope; without any, variants have no pool
and no problem, and the EPP pages come from `--epp-selector` as before.

The EPP pages of a pool (`epp_targets`): the ready endpoints of the EndpointSlices labelled
`kubernetes.io/service-name=<picker service>` in the pool's namespace, at the slice port named
`http-metrics` or `metrics` when the slice has one, else at `default_port` (`--epp-metrics-port`);
the slices carry the pod addresses and the port names, so the Service itself is not read. An
endpoint whose `conditions.ready` is false (a standby EPP of a leader-elected pair) is not read.
The slices are read as `slim_endpoint_slice` keeps them (the informer stores them so).

Nothing here raises; every output is sorted.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from llmscaler.collect.scrape.source import Scheme, ScrapeTarget, pod_url
from llmscaler.controller.cluster.pods import as_mapping, as_text, metadata_of, string_items
from llmscaler.controller.cluster.world import VariantEntry

V1: Final = ('inference.networking.k8s.io', 'v1')
V1ALPHA2: Final = ('inference.networking.x-k8s.io', 'v1alpha2')
POOL_VERSIONS: Final = (V1, V1ALPHA2)
"""The (group, version)s of InferencePool read, the preferred first."""
FAILURE_MODES: Final = ('FailOpen', 'FailClose')
SERVICE_NAME_LABEL: Final = 'kubernetes.io/service-name'
METRICS_PORT_NAMES: Final = ('http-metrics', 'metrics')
_V1ALPHA2_DEFAULT_PORT: Final = 9002


@dataclass(frozen=True, slots=True)
class EppRef:
    """The pool's endpoint picker: its Service, the picker's service port and failure mode."""

    service: str
    port: int
    failure_mode: str


@dataclass(frozen=True, slots=True)
class Pool:
    """One InferencePool as read; `problem` is '' when it can be used."""

    namespace: str
    name: str
    api_version: str
    selector: tuple[tuple[str, str], ...]
    target_ports: tuple[int, ...]
    epp: EppRef | None
    problem: str = ''

    @property
    def key(self) -> str:
        return f'{self.namespace}/{self.name}'

    def selects(self, labels: Mapping[str, str]) -> bool:
        """Whether pods with `labels` are members; an empty selector selects nothing."""
        return bool(self.selector) and all(labels.get(k) == v for k, v in self.selector)


def _port(value: object) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 65535:
        return value
    return None


def _labels(value: object, where: str, problems: list[str]) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, Mapping) or not value:
        problems.append(f'{where} is missing or empty')
        return ()
    items = string_items(value)
    if len(items) != len(value):
        problems.append(f'{where} holds a value that is not a string')
    return tuple(sorted(items.items()))


def _epp(ref: object, *, where: str, port_of: str, problems: list[str]) -> EppRef | None:
    if not isinstance(ref, Mapping):
        problems.append(f'{where} is missing')
        return None
    kind = ref.get('kind', 'Service')
    group = ref.get('group', '')
    if kind != 'Service' or group not in ('', 'core'):
        problems.append(f'{where} names {group or "core"}/{kind}, not a Service: no EPP to read')
        return None
    name = as_text(ref.get('name'))
    if not name:
        problems.append(f'{where}.name is missing')
    if port_of == 'port.number':
        port = _port(as_mapping(ref.get('port')).get('number'))
    else:
        port = _port(ref.get('portNumber', _V1ALPHA2_DEFAULT_PORT))
    if port is None:
        problems.append(f'{where}.{port_of} is missing or not a port number')
    mode = ref.get('failureMode', 'FailClose')
    if mode not in FAILURE_MODES:
        problems.append(f'{where}.failureMode {mode!r} is not FailOpen or FailClose')
    if not name or port is None or mode not in FAILURE_MODES:
        return None
    return EppRef(service=name, port=port, failure_mode=str(mode))


def parse_pool(obj: Mapping[str, Any], *, api_version: str) -> Pool | None:
    """The pool an InferencePool object describes; None without a namespace and a name."""
    meta = metadata_of(obj)
    namespace, name = as_text(meta.get('namespace')), as_text(meta.get('name'))
    if not namespace or not name:
        return None
    spec = as_mapping(obj.get('spec') if isinstance(obj, Mapping) else None)
    problems: list[str] = []
    ports: list[int | None]
    if api_version == '/'.join(V1):
        selector = _labels(
            as_mapping(spec.get('selector')).get('matchLabels'),
            'spec.selector.matchLabels',
            problems,
        )
        raw = spec.get('targetPorts')
        ports = [_port(as_mapping(p).get('number')) for p in (raw if isinstance(raw, list) else ())]
        if not ports or None in ports:
            problems.append('spec.targetPorts[].number is missing or not a port number')
        epp = _epp(
            spec.get('endpointPickerRef'),
            where='spec.endpointPickerRef',
            port_of='port.number',
            problems=problems,
        )
    else:
        selector = _labels(spec.get('selector'), 'spec.selector', problems)
        ports = [_port(spec.get('targetPortNumber'))]
        if None in ports:
            problems.append('spec.targetPortNumber is missing or not a port number')
        epp = _epp(
            spec.get('extensionRef'),
            where='spec.extensionRef',
            port_of='portNumber',
            problems=problems,
        )
    return Pool(
        namespace=namespace,
        name=name,
        api_version=api_version,
        selector=selector,
        target_ports=tuple(sorted({p for p in ports if p is not None})),
        epp=epp,
        problem='; '.join(problems),
    )


def read_pools(objects: Mapping[str, Sequence[Mapping[str, Any]]]) -> tuple[Pool, ...]:
    """The pools of every served version (`api_version → objects`), one per (namespace, name).

    Of a pool seen in several versions, the preferred version's copy (`POOL_VERSIONS` order) wins.
    """
    found: dict[tuple[str, str], Pool] = {}
    for group, version in POOL_VERSIONS:
        api_version = f'{group}/{version}'
        for obj in objects.get(api_version, ()):
            pool = parse_pool(obj, api_version=api_version)
            if pool is not None:
                found.setdefault((pool.namespace, pool.name), pool)
    return tuple(found[key] for key in sorted(found))


# --- membership ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Membership:
    """Which pool each variant belongs to, and which variants are held for want of one."""

    pools: tuple[Pool, ...] = ()
    pool_of: Mapping[str, str] = field(default_factory=dict)
    """VA key (`namespace/name`) → pool key, for the variants with exactly one usable pool."""
    problems: Mapping[str, str] = field(default_factory=dict)
    """VA key → why the variant is held (no pool, several pools, or an unusable pool)."""
    model_pools: Mapping[tuple[str, str], tuple[str, ...]] = field(default_factory=dict)
    """(namespace, model_id) → the keys of the pools its variants belong to, sorted."""

    @property
    def active(self) -> bool:
        """Whether any pool exists: pools then decide, `--epp-selector` is not used."""
        return bool(self.pools)

    def pool(self, key: str) -> Pool | None:
        for pool in self.pools:
            if pool.key == key:
                return pool
        return None


def template_labels(entry: VariantEntry) -> dict[str, str]:
    """The pod labels of a VA's scale target (its leader template for a LeaderWorkerSet)."""
    if entry.target is None:
        return {}
    template = entry.target.leader_template
    return string_items(metadata_of(template).get('labels'))


def assign(*, pools: Sequence[Pool], entries: Sequence[VariantEntry]) -> Membership:
    """The pool of every resolved variant of `entries` (see the module docstring)."""
    ordered = tuple(sorted(pools, key=lambda p: (p.namespace, p.name)))
    if not ordered:
        return Membership()
    # Each pool is filed under its first selector pair: a variant's candidates are the pools
    # filed under one of its own labels, so the work grows with variants, not variants × pools.
    index: dict[tuple[str, str, str], list[Pool]] = {}
    for pool in ordered:
        if pool.selector:
            key, value = pool.selector[0]
            index.setdefault((pool.namespace, key, value), []).append(pool)
    pool_of: dict[str, str] = {}
    problems: dict[str, str] = {}
    model_pools: dict[tuple[str, str], set[str]] = {}
    for entry in sorted(entries, key=lambda e: e.key):
        target = entry.target
        if target is None or entry.variant is None:
            continue
        labels = template_labels(entry)
        candidates = {
            p.key: p for k, v in labels.items() for p in index.get((target.namespace, k, v), ())
        }
        matched = [candidates[k] for k in sorted(candidates) if candidates[k].selects(labels)]
        where = f'{target.kind} {target.namespace}/{target.name}'
        if not matched:
            shown = ','.join(f'{k}={v}' for k, v in sorted(labels.items())) or 'none'
            problems[entry.key] = (
                f'no InferencePool in namespace {target.namespace} selects the pods of {where} '
                f'(labels {shown}); held until one does'
            )
        elif len(matched) > 1:
            names = ', '.join(p.name for p in matched)
            problems[entry.key] = (
                f'InferencePools {names} all select the pods of {where}; none is used, held '
                f'until one alone does'
            )
        elif matched[0].problem:
            problems[entry.key] = (
                f'InferencePool {matched[0].name} cannot be used: {matched[0].problem}; held'
            )
        else:
            pool_of[entry.key] = matched[0].key
            group = (target.namespace, entry.variant.model_id)
            model_pools.setdefault(group, set()).add(matched[0].key)
    return Membership(
        pools=ordered,
        pool_of=pool_of,
        problems=problems,
        model_pools={k: tuple(sorted(v)) for k, v in sorted(model_pools.items())},
    )


# --- the EPP pages of a pool ---------------------------------------------------------------


def slim_endpoint_slice(obj: dict[str, Any]) -> dict[str, Any] | None:
    """The fields of an EndpointSlice `epp_targets` reads; None for one of no Service."""
    meta = metadata_of(obj)
    labels = string_items(meta.get('labels'))
    service = labels.get(SERVICE_NAME_LABEL)
    if not service:
        return None
    kept_meta = {k: meta[k] for k in ('namespace', 'name', 'resourceVersion') if k in meta}
    kept_meta['labels'] = {SERVICE_NAME_LABEL: service}
    ports = obj.get('ports')
    endpoints = obj.get('endpoints')
    return {
        'metadata': kept_meta,
        'ports': [
            {k: p[k] for k in ('name', 'port') if k in p}
            for p in (ports if isinstance(ports, list) else ())
            if isinstance(p, Mapping)
        ],
        'endpoints': [
            {
                'addresses': e.get('addresses'),
                'ready': as_mapping(e.get('conditions')).get('ready'),
                'pod': as_text(as_mapping(e.get('targetRef')).get('name')),
            }
            for e in (endpoints if isinstance(endpoints, list) else ())
            if isinstance(e, Mapping)
        ],
    }


def _slice_port(obj: Mapping[str, Any], default_port: int) -> int:
    ports = obj.get('ports')
    named = {
        as_text(p.get('name')): p.get('port')
        for p in (ports if isinstance(ports, list) else ())
        if isinstance(p, Mapping)
    }
    for name in METRICS_PORT_NAMES:
        port = _port(named.get(name))
        if port is not None:
            return port
    return default_port


def epp_targets(
    *,
    pool: Pool,
    slices: Sequence[Mapping[str, Any]],
    default_port: int = 9090,
    path: str = '/metrics',
    scheme: Scheme = 'http',
) -> tuple[ScrapeTarget, ...]:
    """The metrics pages of the pool's EPP: ready endpoints of its Service's EndpointSlices."""
    if pool.epp is None:
        return ()
    found: set[ScrapeTarget] = set()
    for obj in slices:
        meta = metadata_of(obj)
        labels = string_items(meta.get('labels'))
        if meta.get('namespace') != pool.namespace:
            continue
        if labels.get(SERVICE_NAME_LABEL) != pool.epp.service:
            continue
        port = _slice_port(obj, default_port)
        endpoints = obj.get('endpoints')
        for endpoint in endpoints if isinstance(endpoints, list) else ():
            if not isinstance(endpoint, Mapping) or endpoint.get('ready') is False:
                continue
            addresses = endpoint.get('addresses')
            ip = as_text(addresses[0]) if isinstance(addresses, list) and addresses else ''
            try:
                ipaddress.ip_address(ip)
            except ValueError:
                continue
            pod = as_text(endpoint.get('pod')) or ip
            url = pod_url(ip=ip, port=port, path=path, scheme=scheme)
            found.add(ScrapeTarget(pool.namespace, pod, url, kind='epp', model_name=''))
    return tuple(sorted(found, key=lambda t: (t.namespace, t.pod, t.url)))
