"""The world of one cycle: informer caches (plain object dicts) turned into the core's vocabulary.

Why: the informers hold VariantAutoscalings, their scale targets and pods as the API server sent
them. A cycle needs parsed VAs, each VA's scale target read through `kube.targets.accessor`, the
core's `Variant`s, the `TargetRef`s and `PodInfo`s that attribution walks, the model scopes the
metric source reads, and the pages the pod scraper fetches. This module computes all of them
from one snapshot of the caches. It is pure: no I/O, no clock, no event loop.

What it computes:

- `build_world`: one `VariantEntry` per VA. Its target is looked up by
  (scaleTargetRef.kind, the VA's namespace, scaleTargetRef.name). A VA that does not parse goes
  to `World.invalid`; a resolved one gives a `Variant` (desired replicas from
  `status.desiredOptimizedAlloc.numReplicas`) and a `TargetRef`. Scopes are one per
  (model_id, namespace) of the resolved variants, with the retention period of the model's
  scale-to-zero configuration, else the global default. Two or more VAs naming the same scale
  target are all left unresolved (their `target_problem` names the others): two autoscalers on
  one `/scale` would undo each other.
- `pod_info`: labels, readiness (phase Running, condition Ready=True, not deleting) and the owner
  chain. ReplicaSets are not watched, so a ReplicaSet owner whose name ends with `-` and the pod's
  `pod-template-hash` label also yields its Deployment (the name without that suffix); a
  StatefulSet owner of a pod labelled `leaderworkerset.sigs.k8s.io/name` also yields that
  LeaderWorkerSet, and so does the label alone on a pod without owners.
- `scrape_targets`: the vLLM pages to fetch. Which pod belongs to which variant is decided by
  `collect.attribution.attribute` itself, so the scraper and attribution never disagree (LWS
  workers are skipped there). `epp_targets`: the gateway pages, by label selector.
  Port and path come from the `prometheus.io/port` / `prometheus.io/path` annotations when
  valid, else the defaults given.

What fails and how bad input is treated: nothing raises except `parse_selector` (ValueError on
text that is not `k=v` pairs). A target problem is a one-line `target_problem` naming the object
(an unsupported kind, or an apiVersion of another group, lists what is supported); a target
object cached without `kind`, `apiVersion` (list responses omit them) or namespace gets them
from the key it is cached under. Objects without a namespace and a name, owner references and
labels of the wrong type, a pod IP that is not an IP address are skipped; a bad annotation means
the default. Pods being deleted or in a terminal phase (Succeeded, Failed) are not scraped. An
empty EPP selector selects nothing (Kubernetes would select every pod).

Determinism: every output is sorted; duplicate objects of one key resolve to the one whose
canonical JSON sorts first, so shuffled inputs give an equal `World`.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final, TypeVar

from llmscaler.collect.attribution import PodInfo, TargetRef, attribute
from llmscaler.collect.scrape import ScrapeTarget, pod_url
from llmscaler.collect.types import ModelScope, PodReading, Reading
from llmscaler.config.types import Config
from llmscaler.kube import crd
from llmscaler.kube.targets import (
    API_VERSIONS,
    LWS_NAME_LABEL,
    SUPPORTED_KINDS,
    ScaleTarget,
    TargetProblem,
    accessor,
    to_variant,
)
from llmscaler.model import Variant

POD_TEMPLATE_HASH_LABEL: Final = 'pod-template-hash'
PORT_ANNOTATION: Final = 'prometheus.io/port'
PATH_ANNOTATION: Final = 'prometheus.io/path'
_TERMINAL_PHASES: Final = frozenset({'Succeeded', 'Failed'})
_PORT = re.compile(r'[0-9]{1,5}')
_PATH = re.compile(r'/[^\s\x00-\x1f\x7f#]*')
# Label keys and values as Kubernetes validates them (optional DNS-subdomain prefix, name part).
_LABEL_NAME = r'[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?'
_LABEL_KEY = re.compile(rf'([a-z0-9]([-a-z0-9.]{{0,251}}[a-z0-9])?/)?{_LABEL_NAME}')
_LABEL_VALUE = re.compile(rf'({_LABEL_NAME})?')

_T = TypeVar('_T')


@dataclass(frozen=True, slots=True)
class VariantEntry:
    """One VA of the cache: its parse, its scale target (or why not) and its `Variant`."""

    key: str
    obj: Mapping[str, Any]
    va: crd.VariantAutoscaling
    target: ScaleTarget | None
    target_problem: str
    variant: Variant | None


@dataclass(frozen=True, slots=True)
class World:
    """Everything one cycle reads from the caches (see the module docstring)."""

    entries: tuple[VariantEntry, ...]
    invalid: tuple[tuple[Mapping[str, Any], crd.InvalidObject], ...]
    variants: tuple[Variant, ...]
    targets: tuple[TargetRef, ...]
    pods: tuple[PodInfo, ...]
    scopes: tuple[ModelScope, ...]


def _stable(obj: object) -> str:
    """A canonical text of an object, to choose among duplicates whatever the input order."""
    try:
        return json.dumps(obj, sort_keys=True, default=repr)
    except (TypeError, ValueError, RecursionError):
        return repr(obj)


def _first_per_key(items: Iterable[_T], *, key: Callable[[_T], str | None]) -> dict[str, _T]:
    """Items by key (None: dropped); of several with one key, the one whose `_stable` is least."""
    found: dict[str, list[_T]] = {}
    for item in items:
        name = key(item)
        if name is not None:
            found.setdefault(name, []).append(item)
    return {
        name: group[0] if len(group) == 1 else min(group, key=_stable)
        for name, group in found.items()
    }


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _text(value: object) -> str:
    return value if isinstance(value, str) else ''


def _metadata(obj: object) -> Mapping[str, Any]:
    return _mapping(obj.get('metadata')) if isinstance(obj, Mapping) else {}


def _string_items(value: object) -> dict[str, str]:
    """The str → str entries of a labels/annotations mapping; others are dropped."""
    return {k: v for k, v in _mapping(value).items() if isinstance(k, str) and isinstance(v, str)}


# --- VAs and their targets -----------------------------------------------------------------


def _group(api_version: str) -> str:
    return api_version.rpartition('/')[0]


def _with_identity(
    obj: Mapping[str, Any], *, kind: str, api_version: str, namespace: str
) -> Mapping[str, Any]:
    """`obj` with the kind, apiVersion and namespace of its cache key where it lacks them."""
    if not isinstance(obj, Mapping):
        return obj
    meta = obj.get('metadata')
    has_namespace = not isinstance(meta, Mapping) or bool(meta.get('namespace'))
    if obj.get('kind') and obj.get('apiVersion') and has_namespace:
        return obj
    filled = {**obj, 'kind': obj.get('kind') or kind}
    filled['apiVersion'] = obj.get('apiVersion') or api_version
    if isinstance(meta, Mapping) and not meta.get('namespace'):
        filled['metadata'] = {**meta, 'namespace': namespace}
    return filled


def _resolve_target(
    *,
    va: crd.VariantAutoscaling,
    namespace: str,
    targets: Mapping[tuple[str, str, str], Mapping[str, Any]],
) -> tuple[ScaleTarget | None, str]:
    ref = va.spec.scale_target_ref
    kind, name = ref.kind, ref.name
    if kind not in API_VERSIONS:
        supported = ', '.join(SUPPORTED_KINDS)
        return None, f'scaleTargetRef.kind {kind!r} is not supported (supported: {supported})'
    expected = API_VERSIONS[kind]
    # Only the group matters: a version the informer does not watch still names the same object.
    if ref.api_version is not None and _group(ref.api_version) != _group(expected):
        return None, f'scaleTargetRef.apiVersion {ref.api_version!r} is not {expected} for {kind}'
    where = f'{kind} {namespace}/{name}'
    obj = targets.get((kind, namespace, name))
    if obj is None:
        return None, f'{where} not found'
    found = accessor(_with_identity(obj, kind=kind, api_version=expected, namespace=namespace))
    if isinstance(found, TargetProblem):
        return None, ' '.join(f'{where}: {found.message}'.split())
    return found, ''


def _entry(
    *,
    key: str,
    obj: Mapping[str, Any],
    va: crd.VariantAutoscaling,
    namespace: str,
    name: str,
    targets: Mapping[tuple[str, str, str], Mapping[str, Any]],
) -> VariantEntry:
    target, problem = _resolve_target(va=va, namespace=namespace, targets=targets)
    variant = None
    if target is not None:
        alloc = va.status.desired_optimized_alloc if va.status is not None else None
        variant = to_variant(
            target=target,
            name=name,
            model_id=va.spec.model_id,
            cost=va.spec.cost,
            min_replicas=va.spec.min_replicas,
            max_replicas=va.spec.max_replicas,
            desired=alloc.num_replicas if alloc is not None else None,
        )
    return VariantEntry(
        key=key, obj=obj, va=va, target=target, target_problem=problem, variant=variant
    )


def _va_key(obj: Mapping[str, Any]) -> str:
    meta = _metadata(obj)
    return f'{_text(meta.get("namespace")) or "default"}/{_text(meta.get("name"))}'


def build_world(
    *,
    vas: Sequence[Mapping[str, Any]],
    targets: Mapping[tuple[str, str, str], Mapping[str, Any]],
    pods: Sequence[Mapping[str, Any]],
    config: Config,
) -> World:
    """The cycle's view of the caches; `targets` is keyed (kind, namespace, name)."""
    entries: list[VariantEntry] = []
    invalid: list[tuple[Mapping[str, Any], crd.InvalidObject]] = []
    for key, obj in sorted(_first_per_key(vas, key=_va_key).items()):
        namespace, _, name = key.partition('/')
        parsed = crd.parse_va(obj)
        if isinstance(parsed, crd.VariantAutoscaling) and not name:
            parsed = crd.InvalidObject('', namespace, 'metadata.name: missing')
        if isinstance(parsed, crd.InvalidObject):
            invalid.append((obj, parsed))
            continue
        entries.append(
            _entry(key=key, obj=obj, va=parsed, namespace=namespace, name=name, targets=targets)
        )
    entries = _unshared(entries)
    variants = sorted(
        (e.variant for e in entries if e.variant is not None), key=lambda v: (v.namespace, v.name)
    )
    refs = sorted(
        (
            TargetRef(
                namespace=e.target.namespace,
                kind=e.target.kind,
                name=e.target.name,
                variant=e.key.partition('/')[2],
            )
            for e in entries
            if e.target is not None
        ),
        key=lambda r: (r.namespace, r.kind, r.name, r.variant),
    )
    return World(
        entries=tuple(entries),
        invalid=tuple(sorted(invalid, key=lambda item: (_invalid_key(item[1]), _stable(item[0])))),
        variants=tuple(variants),
        targets=tuple(refs),
        pods=_pod_infos(pods),
        scopes=_scopes(variants=variants, config=config),
    )


def _unshared(entries: list[VariantEntry]) -> list[VariantEntry]:
    """Unresolve every VA whose scale target another VA also names.

    Two autoscalers writing one `/scale` would undo each other every cycle; neither may act, and
    each says which others claim its target.
    """
    claims: dict[tuple[str, str, str], list[str]] = {}
    for entry in entries:
        if entry.target is not None:
            where = (entry.target.kind, entry.target.namespace, entry.target.name)
            claims.setdefault(where, []).append(entry.key)
    kept = []
    for entry in entries:
        target = entry.target
        shared = [] if target is None else claims[(target.kind, target.namespace, target.name)]
        if target is None or len(shared) == 1:
            kept.append(entry)
            continue
        others = ', '.join(key for key in shared if key != entry.key)
        problem = (
            f'{target.kind} {target.namespace}/{target.name} is also the scale target of '
            f'VariantAutoscaling {others}; none of them scales it'
        )
        kept.append(replace(entry, target=None, target_problem=problem, variant=None))
    return kept


def _invalid_key(problem: crd.InvalidObject) -> tuple[str, str, str]:
    return (problem.namespace, problem.name, problem.message)


def _scopes(*, variants: Sequence[Variant], config: Config) -> tuple[ModelScope, ...]:
    scopes = []
    for namespace, model_id in sorted({(v.namespace, v.model_id) for v in variants}):
        retention = config.model(model_id=model_id, namespace=namespace).scale_to_zero
        period = retention.retention_period
        scopes.append(
            ModelScope(
                model_id=model_id,
                namespace=namespace,
                retention_period=(
                    period if period is not None else config.settings.default_retention_period
                ),
            )
        )
    return tuple(scopes)


# --- pods --------------------------------------------------------------------------------------


def _owner_refs(meta: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(kind, name) of the usable owner references, the controller first."""
    refs = meta.get('ownerReferences')
    usable = [
        ref
        for ref in (refs if isinstance(refs, list) else ())
        if isinstance(ref, Mapping) and _text(ref.get('kind')) and _text(ref.get('name'))
    ]
    usable.sort(key=lambda ref: ref.get('controller') is not True)  # stable: list order kept
    return [(ref['kind'], ref['name']) for ref in usable]


def _owner_chain(
    refs: Sequence[tuple[str, str]], labels: Mapping[str, str]
) -> list[tuple[str, str]]:
    template_hash = labels.get(POD_TEMPLATE_HASH_LABEL, '')
    lws = labels.get(LWS_NAME_LABEL, '')
    chain: list[tuple[str, str]] = []
    for kind, name in refs:
        chain.append((kind, name))
        suffix = f'-{template_hash}'
        if kind == 'ReplicaSet' and template_hash and len(name) > len(suffix):
            if name.endswith(suffix):
                chain.append(('Deployment', name[: -len(suffix)]))
        elif kind == 'StatefulSet' and lws:
            chain.append(('LeaderWorkerSet', lws))
    if not refs and lws:
        chain.append(('LeaderWorkerSet', lws))
    return list(dict.fromkeys(chain))


def _deleting(meta: Mapping[str, Any]) -> bool:
    return meta.get('deletionTimestamp') is not None


def pod_info(obj: Mapping[str, Any]) -> PodInfo | None:
    """What attribution needs of a pod object; None without a namespace and a name."""
    if not isinstance(obj, Mapping):
        return None
    meta = _metadata(obj)
    namespace, name = _text(meta.get('namespace')), _text(meta.get('name'))
    if not namespace or not name:
        return None
    labels = _string_items(meta.get('labels'))
    status = _mapping(obj.get('status'))
    conditions = status.get('conditions')
    ready_condition = any(
        isinstance(c, Mapping) and c.get('type') == 'Ready' and c.get('status') == 'True'
        for c in (conditions if isinstance(conditions, list) else ())
    )
    return PodInfo(
        namespace=namespace,
        name=name,
        labels=tuple(sorted(labels.items())),
        owners=tuple(_owner_chain(_owner_refs(meta), labels)),
        ready=status.get('phase') == 'Running' and ready_condition and not _deleting(meta),
    )


def _pod_key(info: PodInfo) -> tuple[object, ...]:
    return (info.namespace, info.name, info.labels, info.owners, info.ready)


def _pod_infos(pods: Sequence[Mapping[str, Any]]) -> tuple[PodInfo, ...]:
    """PodInfos sorted, one per (namespace, name): the least, as attribution would pick."""
    index: dict[tuple[str, str], PodInfo] = {}
    infos = (pod_info(obj) for obj in pods)
    for info in sorted((i for i in infos if i is not None), key=_pod_key):
        index.setdefault((info.namespace, info.name), info)
    return tuple(index[key] for key in sorted(index))


# --- scrape targets ----------------------------------------------------------------------------


def _endpoint(obj: Mapping[str, Any], *, port: int, path: str) -> tuple[str, int, str] | None:
    """(ip, port, path) of a live pod with an IP address; None for one not to scrape."""
    meta = _metadata(obj)
    status = _mapping(obj.get('status'))
    if _deleting(meta) or status.get('phase') in _TERMINAL_PHASES:
        return None
    ip = _text(status.get('podIP'))
    try:
        ipaddress.ip_address(ip)
    except ValueError:
        return None
    annotations = _string_items(meta.get('annotations'))
    wanted = annotations.get(PORT_ANNOTATION, '').strip()
    if _PORT.fullmatch(wanted) and 1 <= int(wanted) <= 65535:
        port = int(wanted)
    wanted_path = annotations.get(PATH_ANNOTATION, '').strip()
    if _PATH.fullmatch(wanted_path):
        path = wanted_path
    return ip, port, path


def _target_order(target: ScrapeTarget) -> tuple[str, ...]:
    return (target.namespace, target.pod, target.url, target.kind, target.model_name)


def scrape_targets(
    *,
    world: World,
    pods: Sequence[Mapping[str, Any]],
    port: int = 8000,
    path: str = '/metrics',
) -> tuple[ScrapeTarget, ...]:
    """One vLLM target per live pod with an IP that attribution gives to a resolved variant."""
    infos = [(obj, pod_info(obj)) for obj in pods if isinstance(obj, Mapping)]
    known = [info for _, info in infos if info is not None]
    # Attribution itself decides, on a placeholder reading per pod; saturation figures are set
    # so that no pod is turned away for lack of them.
    probe = Reading(
        pods=tuple(
            PodReading(
                namespace=info.namespace,
                pod=info.name,
                observed_at=0.0,
                kv_usage=0.0,
                queue_length=0.0,
            )
            for info in _pod_infos(pods)
        )
    )
    attributed = attribute(
        reading=probe, variants=world.variants, targets=world.targets, pods=known
    )
    models = {(v.namespace, v.name): v.model_id for v in world.variants}
    owner = {(r.namespace, r.pod): models[(r.namespace, r.variant)] for r in attributed.replicas}
    found: set[ScrapeTarget] = set()
    for obj, info in infos:
        model = owner.get((info.namespace, info.name)) if info is not None else None
        endpoint = _endpoint(obj, port=port, path=path) if model is not None else None
        if info is None or model is None or endpoint is None:
            continue
        ip, pod_port, pod_path = endpoint
        url = pod_url(ip=ip, port=pod_port, path=pod_path)
        found.add(ScrapeTarget(info.namespace, info.name, url, kind='vllm', model_name=model))
    return tuple(sorted(found, key=_target_order))


def epp_targets(
    *,
    pods: Sequence[Mapping[str, Any]],
    selector: Mapping[str, str],
    port: int = 9090,
    path: str = '/metrics',
) -> tuple[ScrapeTarget, ...]:
    """The gateway (EPP) pages: live pods whose labels carry every `selector` pair."""
    if not selector:
        return ()
    wanted = sorted(selector.items())
    found: set[ScrapeTarget] = set()
    for obj in pods:
        info = pod_info(obj) if isinstance(obj, Mapping) else None
        if info is None or any(info.label(k) != v for k, v in wanted):
            continue
        endpoint = _endpoint(obj, port=port, path=path)
        if endpoint is not None:
            ip, pod_port, pod_path = endpoint
            url = pod_url(ip=ip, port=pod_port, path=pod_path)
            found.add(ScrapeTarget(info.namespace, info.name, url, kind='epp', model_name=''))
    return tuple(sorted(found, key=_target_order))


def parse_selector(text: str) -> dict[str, str]:
    """`a=b,c=d` (or `a==b`) equality selectors; '' is {}; ValueError for anything else."""
    result: dict[str, str] = {}
    if not text.strip():
        return result
    for part in text.split(','):
        key, op, value = part.partition('=')
        if op and value.startswith('='):
            value = value[1:]
        key, value = key.strip(), value.strip()
        if not op or key.endswith('!'):
            raise ValueError(f'selector {text!r}: {part.strip()!r} is not key=value')
        if not _LABEL_KEY.fullmatch(key):
            raise ValueError(f'selector {text!r}: {key!r} is not a label key')
        if not _LABEL_VALUE.fullmatch(value):
            raise ValueError(f'selector {text!r}: {value!r} is not a label value')
        if result.get(key, value) != value:
            raise ValueError(f'selector {text!r}: {key!r} given twice with different values')
        result[key] = value
    return result
