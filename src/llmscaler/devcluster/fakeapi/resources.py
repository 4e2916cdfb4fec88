"""The resource table of the fake kube-apiserver and the discovery documents derived from it.

Why: the controller discovers kinds, their `/scale` and `/status` subresources and short names the
way kubectl does, so the fake must publish the same discovery shapes (APIVersions, APIGroupList,
APIResourceList) for exactly the kinds it serves. Everything here is data: adding a kind is one
`Resource(...)` row. Two rows may share one storage (`stored_in`, core v1 and events.k8s.io/v1
Events), as in kube-apiserver; `conversion` renames the fields between them.

A `ScaleMap` says how autoscaling/v1 Scale maps onto a kind: the spec and status replica paths and
where the selector string comes from (`.spec.selector.matchLabels` rendered as `k=v,...` sorted by
key, or a string path such as LWS's `.status.hpaPodSelector`). A missing replica field reads as 0;
a missing selector is omitted from the Scale.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

VERBS = ('create', 'delete', 'get', 'list', 'patch', 'update', 'watch')
SUB_VERBS = ('get', 'patch', 'update')


@dataclass(frozen=True, slots=True)
class ScaleMap:
    spec_replicas: tuple[str, ...]
    status_replicas: tuple[str, ...]
    # Either a path to a matchLabels map (rendered `k=v,...`) or to a ready selector string.
    selector: tuple[str, ...]
    selector_is_match_labels: bool


@dataclass(frozen=True, slots=True)
class Resource:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True
    short_names: tuple[str, ...] = ()
    status: bool = False
    scale: ScaleMap | None = None
    # Built-in kinds take strategic merge patches; custom resources answer 415 to them.
    builtin: bool = True
    # The group/version of the resource (same kind) whose storage this one shares, served
    # through `conversion`; '' for a resource with storage of its own.
    stored_in: str = ''

    @property
    def group_version(self) -> str:
        return f'{self.group}/{self.version}' if self.group else self.version

    @property
    def singular(self) -> str:
        return self.kind.lower()


APPS_SCALE = ScaleMap(
    spec_replicas=('spec', 'replicas'),
    status_replicas=('status', 'replicas'),
    selector=('spec', 'selector', 'matchLabels'),
    selector_is_match_labels=True,
)
LWS_SCALE = ScaleMap(
    spec_replicas=('spec', 'replicas'),
    status_replicas=('status', 'replicas'),
    selector=('status', 'hpaPodSelector'),
    selector_is_match_labels=False,
)

INFERENCE_SET_SCALE = ScaleMap(
    spec_replicas=('spec', 'replicas'),
    status_replicas=('status', 'replicas'),
    selector=('status', 'selector'),
    selector_is_match_labels=False,
)

RESOURCES: tuple[Resource, ...] = (
    Resource('', 'v1', 'configmaps', 'ConfigMap', short_names=('cm',)),
    Resource('', 'v1', 'pods', 'Pod', short_names=('po',), status=True),
    Resource('', 'v1', 'events', 'Event', short_names=('ev',), stored_in='events.k8s.io/v1'),
    Resource('', 'v1', 'nodes', 'Node', namespaced=False, short_names=('no',), status=True),
    Resource(
        'apps',
        'v1',
        'deployments',
        'Deployment',
        short_names=('deploy',),
        status=True,
        scale=APPS_SCALE,
    ),
    # The ReplicaSets a Deployment owns: stored and served as given (the fake runs no
    # ReplicaSet controller; a test on the real control plane reads the ones it makes).
    Resource(
        'apps',
        'v1',
        'replicasets',
        'ReplicaSet',
        short_names=('rs',),
        status=True,
        scale=APPS_SCALE,
    ),
    Resource(
        'apps',
        'v1',
        'statefulsets',
        'StatefulSet',
        short_names=('sts',),
        status=True,
        scale=APPS_SCALE,
    ),
    Resource(
        'leaderworkerset.x-k8s.io',
        'v1',
        'leaderworkersets',
        'LeaderWorkerSet',
        short_names=('lws',),
        status=True,
        scale=LWS_SCALE,
        builtin=False,
    ),
    Resource(
        'llmd.ai',
        'v1alpha1',
        'variantautoscalings',
        'VariantAutoscaling',
        short_names=('va',),
        status=True,
        builtin=False,
    ),
    # Kaito: the LLMAutoScaler (deploy/base/crds) and InferenceSet, Kaito's kind with /scale
    # (specpath .spec.replicas, statuspath .status.replicas, selectorpath .status.selector).
    Resource(
        'kaito.sh',
        'v1alpha1',
        'llmautoscalers',
        'LLMAutoScaler',
        short_names=('llmas',),
        status=True,
        builtin=False,
    ),
    Resource(
        'kaito.sh',
        'v1beta1',
        'inferencesets',
        'InferenceSet',
        short_names=('is', 'isets'),
        status=True,
        scale=INFERENCE_SET_SCALE,
        builtin=False,
    ),
    Resource('coordination.k8s.io', 'v1', 'leases', 'Lease'),
    Resource('discovery.k8s.io', 'v1', 'endpointslices', 'EndpointSlice'),
    # The InferencePool of the Gateway API Inference Extension, GA and the older alpha.
    Resource('inference.networking.k8s.io', 'v1', 'inferencepools', 'InferencePool', builtin=False),
    Resource(
        'inference.networking.x-k8s.io',
        'v1alpha2',
        'inferencepools',
        'InferencePool',
        builtin=False,
    ),
    Resource('events.k8s.io', 'v1', 'events', 'Event', short_names=('ev',)),
)


def find(*, group: str, version: str, plural: str) -> Resource | None:
    for r in RESOURCES:
        if (r.group, r.version, r.plural) == (group, version, plural):
            return r
    return None


def by_kind(*, api_version: str, kind: str) -> Resource | None:
    for r in RESOURCES:
        if (r.group_version, r.kind) == (api_version, kind):
            return r
    return None


def storage_of(resource: Resource) -> Resource:
    """The resource whose storage holds `resource`'s objects (itself, but for core Events)."""
    if not resource.stored_in:
        return resource
    found = by_kind(api_version=resource.stored_in, kind=resource.kind)
    assert found is not None, f'{resource.plural} is stored in an unknown {resource.stored_in}'
    return found


def api_versions() -> dict[str, Any]:
    return {
        'kind': 'APIVersions',
        'versions': ['v1'],
        'serverAddressByClientCIDRs': [{'clientCIDR': '0.0.0.0/0', 'serverAddress': '127.0.0.1'}],
    }


def api_group_list() -> dict[str, Any]:
    versions: dict[str, list[str]] = {}
    for r in RESOURCES:
        if r.group and r.version not in versions.setdefault(r.group, []):
            versions[r.group].append(r.version)
    groups = []
    for group in sorted(versions):
        vs = [{'groupVersion': f'{group}/{v}', 'version': v} for v in versions[group]]
        groups.append({'name': group, 'versions': vs, 'preferredVersion': vs[0]})
    return {'kind': 'APIGroupList', 'apiVersion': 'v1', 'groups': groups}


def has_group_version(*, group: str, version: str) -> bool:
    return any((r.group, r.version) == (group, version) for r in RESOURCES)


def api_resource_list(*, group: str, version: str) -> dict[str, Any]:
    entries: list[dict[str, Any]] = []
    for r in RESOURCES:
        if (r.group, r.version) != (group, version):
            continue
        entry: dict[str, Any] = {
            'name': r.plural,
            'singularName': r.singular,
            'namespaced': r.namespaced,
            'kind': r.kind,
            'verbs': list(VERBS),
        }
        if r.short_names:
            entry['shortNames'] = list(r.short_names)
        entries.append(entry)
        if r.scale is not None:
            entries.append(
                {
                    'name': f'{r.plural}/scale',
                    'singularName': '',
                    'namespaced': r.namespaced,
                    'group': 'autoscaling',
                    'version': 'v1',
                    'kind': 'Scale',
                    'verbs': list(SUB_VERBS),
                }
            )
        if r.status:
            entries.append(
                {
                    'name': f'{r.plural}/status',
                    'singularName': '',
                    'namespaced': r.namespaced,
                    'kind': r.kind,
                    'verbs': list(SUB_VERBS),
                }
            )
    gv = f'{group}/{version}' if group else version
    return {'kind': 'APIResourceList', 'apiVersion': 'v1', 'groupVersion': gv, 'resources': entries}
