"""Pods as the controller needs them: who owns them, and which of their pages to scrape.

Why: attribution (`collect.attribution`) walks a pod's owner chain up to its scale target, and the
pod scraper needs each inference pod's and gateway pod's metrics URL. Both come from the pod
objects the informer holds; this module reads them, and the few readers of plain object dicts it
defines serve `controller.cluster.world` too. It is pure: no I/O, no clock, no event loop.

What it computes:

- `pod_info`: labels, readiness (phase Running, condition Ready=True, not deleting) and the owner
  chain. ReplicaSets are not watched, so a ReplicaSet owner whose name ends with `-` and the pod's
  `pod-template-hash` label also yields its Deployment (the name without that suffix); a
  StatefulSet owner of a pod labelled `leaderworkerset.sigs.k8s.io/name` also yields that
  LeaderWorkerSet, and so does the label alone on a pod without owners. `pod_infos`: one per
  (namespace, name), sorted.
- `scrape_targets`: the vLLM pages to fetch, of ready and starting pods alike. Which pod belongs to
  which variant is decided by `collect.attribution.pod_variants`, attribution's own rules, so the
  scraper and attribution never disagree (LWS workers are skipped there). `epp_targets`: the gateway
  pages, by label selector. Port and path come from the `prometheus.io/port` / `prometheus.io/path`
  annotations when valid, else the defaults given; the scheme (`http` or `https`) is the caller's,
  from the scrape configuration (`ScrapeConfig.vllm_scheme` / `epp_scheme`), never from the pod: a
  pod's own annotations must not be able to turn TLS off for the token sent to it.

What fails and how bad input is treated: nothing raises except `parse_selector` (ValueError on
text that is not `k=v` pairs). Objects without a namespace and a name, owner references and
labels of the wrong type, a pod IP that is not an IP address are skipped; a bad annotation means
the default. Pods being deleted or in a terminal phase (Succeeded, Failed) are not scraped. An
empty EPP selector selects nothing (Kubernetes would select every pod). Every output is sorted.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

from llmscaler.collect.attribution import PodInfo, TargetRef, pod_variants
from llmscaler.collect.scrape.source import Scheme, ScrapeTarget, pod_url
from llmscaler.domain.snapshot import Variant
from llmscaler.kube.targets import LWS_NAME_LABEL

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


def as_mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def as_text(value: object) -> str:
    return value if isinstance(value, str) else ''


def metadata_of(obj: object) -> Mapping[str, Any]:
    return as_mapping(obj.get('metadata')) if isinstance(obj, Mapping) else {}


def string_items(value: object) -> dict[str, str]:
    """The str → str entries of a labels/annotations mapping; others are dropped."""
    return {k: v for k, v in as_mapping(value).items() if isinstance(k, str) and isinstance(v, str)}


def _owner_refs(meta: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(kind, name) of the usable owner references, the controller first."""
    refs = meta.get('ownerReferences')
    usable = [
        ref
        for ref in (refs if isinstance(refs, list) else ())
        if isinstance(ref, Mapping) and as_text(ref.get('kind')) and as_text(ref.get('name'))
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
    meta = metadata_of(obj)
    namespace, name = as_text(meta.get('namespace')), as_text(meta.get('name'))
    if not namespace or not name:
        return None
    labels = string_items(meta.get('labels'))
    status = as_mapping(obj.get('status'))
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


def pod_infos(pods: Sequence[Mapping[str, Any]]) -> tuple[PodInfo, ...]:
    """PodInfos sorted, one per (namespace, name): the least, as attribution would pick."""
    index: dict[tuple[str, str], PodInfo] = {}
    infos = (pod_info(obj) for obj in pods)
    for info in sorted((i for i in infos if i is not None), key=_pod_key):
        index.setdefault((info.namespace, info.name), info)
    return tuple(index[key] for key in sorted(index))


# --- scrape targets ----------------------------------------------------------------------------


def _endpoint(obj: Mapping[str, Any], *, port: int, path: str) -> tuple[str, int, str] | None:
    """(ip, port, path) of a live pod with an IP address; None for one not to scrape."""
    meta = metadata_of(obj)
    status = as_mapping(obj.get('status'))
    if _deleting(meta) or status.get('phase') in _TERMINAL_PHASES:
        return None
    ip = as_text(status.get('podIP'))
    try:
        ipaddress.ip_address(ip)
    except ValueError:
        return None
    annotations = string_items(meta.get('annotations'))
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
    variants: Sequence[Variant],
    targets: Sequence[TargetRef],
    pods: Sequence[Mapping[str, Any]],
    port: int = 8000,
    path: str = '/metrics',
    scheme: Scheme = 'http',
) -> tuple[ScrapeTarget, ...]:
    """One vLLM target per live pod with an IP that attribution gives to a resolved variant."""
    infos = [(obj, pod_info(obj)) for obj in pods if isinstance(obj, Mapping)]
    known = [info for _, info in infos if info is not None]
    # Attribution's own rules name each pod's variant (`pod_variants`), ready or not: a starting
    # pod is read too, so its request counter has a baseline by the time it turns ready.
    models = {(v.namespace, v.name): v.model_id for v in variants}
    owner = {
        (namespace, pod): models[(namespace, variant)]
        for namespace, pod, variant in pod_variants(pods=known, variants=variants, targets=targets)
    }
    found: set[ScrapeTarget] = set()
    for obj, info in infos:
        model = owner.get((info.namespace, info.name)) if info is not None else None
        endpoint = _endpoint(obj, port=port, path=path) if model is not None else None
        if info is None or model is None or endpoint is None:
            continue
        ip, pod_port, pod_path = endpoint
        url = pod_url(ip=ip, port=pod_port, path=pod_path, scheme=scheme)
        found.add(ScrapeTarget(info.namespace, info.name, url, kind='vllm', model_name=model))
    return tuple(sorted(found, key=_target_order))


def epp_targets(
    *,
    pods: Sequence[Mapping[str, Any]],
    selector: Mapping[str, str],
    port: int = 9090,
    path: str = '/metrics',
    scheme: Scheme = 'http',
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
            url = pod_url(ip=ip, port=pod_port, path=pod_path, scheme=scheme)
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
