"""One view of a scale target, whatever its kind: Deployment, StatefulSet or LeaderWorkerSet.

Why: the analyzers price a *replica*, the unit every capacity and count is in: a pod of a
Deployment/StatefulSet, a leader+workers group of a LeaderWorkerSet (kubernetes-sigs/lws). Replica
counts, GPUs per replica, the serving arguments, the P/D role, the accelerator and the pod selector
live in different places per kind; `accessor` reads them once, from the raw object dict the API
server returns, into a `ScaleTarget`, and `to_variant` turns that into the core's `Variant`.

What it computes, per kind:

- replicas: `spec.replicas`; absent or null counts as 1, as the API server defaults it.
  LWS replicas are groups.
- ready: `status.readyReplicas` (LWS: ready groups); pending = max(0, status.replicas − ready).
  A missing status (a freshly created object) means 0 ready, 0 pending.
- group_size: 1; LWS `spec.leaderWorkerTemplate.size` (absent → 1).
- leader/worker templates: `spec.template` for both; LWS `leaderWorkerTemplate.workerTemplate`
  and `leaderTemplate`, which defaults to the worker template when absent.
- gpus_per_replica: GPUs of the pod template's containers; LWS: leader GPUs + (size − 1) × worker
  GPUs (`vllm_args.gpus_per_replica`, limits over requests).
- engine: `vllm_args.parse_engine_args` on the leader's containers (the leader starts the API
  server; workers only join it), None when no container serves a model.
- role: the leader template label `llm-d.ai/role` when `prefill` or `decode`, else `both`.
- accelerator: the leader template's `nodeSelector` on a GPU product label
  (`GPU_PRODUCT_LABELS`, first in that order), else the first value of an `In` expression on one
  of those labels in its required node affinity, else the label
  `inference.optimization/acceleratorName` on the template or the object, else `unknown`.
- selector: `spec.selector` as a label-selector string (`k=v` for matchLabels, `k in (a,b)`,
  `k notin (a,b)`, `k`, `!k` for matchExpressions, sorted by key); LWS: `status.hpaPodSelector`
  when present, else the selector of leader pods
  (`leaderworkerset.sigs.k8s.io/name=N,leaderworkerset.sigs.k8s.io/worker-index=0`), because an
  LWS replica's metrics come from its leader only.

What fails and how bad input is treated: nothing raises. An unsupported kind, an apiVersion of
the wrong group, or a malformed structural field (a non-mapping object, metadata.name missing,
replicas that are not a whole number in [0, 2^31 − 1] — the string "3", true, 1.5, −1 — a
template or its containers missing or of the wrong type, a size below 1, labels that are not a
mapping) yields a `TargetProblem` whose one-line message names the path of the first bad field.
Scheduling hints (nodeSelector, affinity, annotations) that have an odd shape are ignored, since
they only refine the accelerator name. A missing namespace is `default`, the namespace a client
puts an unqualified object in. GPU counts that are not whole numbers are ignored by
`vllm_args.gpus_per_replica`, so a CPU-only target has 0 GPUs per replica.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from llmscaler.domain.basics import Role
from llmscaler.domain.snapshot import EngineParams, Variant
from llmscaler.kube.engine_args.template import gpus_per_replica, parse_engine_args

DEPLOYMENT: Final = 'Deployment'
STATEFUL_SET: Final = 'StatefulSet'
LEADER_WORKER_SET: Final = 'LeaderWorkerSet'
API_VERSIONS: Final[Mapping[str, str]] = {
    DEPLOYMENT: 'apps/v1',
    STATEFUL_SET: 'apps/v1',
    LEADER_WORKER_SET: 'leaderworkerset.x-k8s.io/v1',
}
SUPPORTED_KINDS: Final = tuple(sorted(API_VERSIONS))

ROLE_LABEL: Final = 'llm-d.ai/role'
ACCELERATOR_LABEL: Final = 'inference.optimization/acceleratorName'
GPU_PRODUCT_LABELS: Final = (
    'nvidia.com/gpu.product',
    'amd.com/gpu.product-name',
    'cloud.google.com/gke-accelerator',
    'cloud.google.com/gke-tpu-accelerator',
)
LWS_NAME_LABEL: Final = 'leaderworkerset.sigs.k8s.io/name'
LWS_WORKER_INDEX_LABEL: Final = 'leaderworkerset.sigs.k8s.io/worker-index'
INT32_MAX: Final = 2**31 - 1


@dataclass(frozen=True, slots=True)
class ScaleTarget:
    """The scaling-relevant facts of one scale target (replica units: groups for LWS).

    The templates are deep copies of the object's pod templates (plain JSON-like dicts); not
    hashable for that reason.
    """

    kind: str
    api_version: str
    namespace: str
    name: str
    replicas: int
    ready: int
    pending: int
    group_size: int
    leader_template: Mapping[str, Any]
    worker_template: Mapping[str, Any]
    gpus_per_replica: int
    engine: EngineParams | None
    role: Role
    accelerator: str
    selector: str
    resource_version: str = ''
    """`metadata.resourceVersion` of the object read ('' when absent): the precondition of a
    write decided from this copy (`ScaleClient.scale_at`)."""


@dataclass(frozen=True, slots=True)
class TargetProblem:
    """Why an object is not a usable scale target; `message` names the bad path on one line."""

    kind: str
    namespace: str
    name: str
    message: str


class _Bad(Exception):
    """Internal: carries the message of the first bad field up to `accessor`."""


def _type_name(value: object) -> str:
    return 'null' if value is None else type(value).__name__


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + '...'


def _mapping(value: object, path: str, *, required: bool) -> Mapping[str, Any] | None:
    if value is None and not required:
        return None
    if value is None:
        raise _Bad(f'{path}: missing')
    if not isinstance(value, Mapping):
        raise _Bad(f'{path}: expected an object, got {_type_name(value)}')
    return value


def _count(value: object, path: str, *, default: int, minimum: int = 0) -> int:
    if value is None:
        return default
    # bool is an int in Python but not a JSON integer; floats are never replica counts.
    if isinstance(value, bool) or not isinstance(value, int):
        raise _Bad(f'{path}: expected an integer, got {_type_name(value)} {_show(value)}')
    if not minimum <= value <= INT32_MAX:
        raise _Bad(f'{path}: {value} is outside [{minimum}, {INT32_MAX}]')
    return value


def _string_map(value: object, path: str) -> Mapping[str, str]:
    found = _mapping(value, path, required=False)
    if found is None:
        return {}
    for key in sorted(found, key=str):
        if not isinstance(key, str) or not isinstance(found[key], str):
            raise _Bad(f'{path}: expected string keys and values, got {_show(key)}')
    return found


def _template(value: object, path: str) -> Mapping[str, Any]:
    template = _mapping(value, path, required=True)
    assert template is not None
    metadata = _mapping(template.get('metadata'), f'{path}.metadata', required=False)
    if metadata is not None:
        _string_map(metadata.get('labels'), f'{path}.metadata.labels')
    spec = _mapping(template.get('spec'), f'{path}.spec', required=True)
    assert spec is not None
    containers = spec.get('containers')
    if not isinstance(containers, list) or not containers:
        got = 'missing' if containers is None else f'got {_type_name(containers)}'
        raise _Bad(f'{path}.spec.containers: expected a non-empty list, {got}')
    for index, container in enumerate(containers):
        if not isinstance(container, Mapping):
            raise _Bad(f'{path}.spec.containers[{index}]: expected an object')
    return template


def _containers(template: Mapping[str, Any]) -> Sequence[Mapping[str, object]]:
    containers: list[Mapping[str, object]] = template['spec']['containers']
    return containers


def _labels(template: Mapping[str, Any]) -> Mapping[str, str]:
    metadata = template.get('metadata')
    labels = metadata.get('labels') if isinstance(metadata, Mapping) else None
    return labels if isinstance(labels, Mapping) else {}


def _role(template: Mapping[str, Any]) -> Role:
    label = _labels(template).get(ROLE_LABEL)
    if label == 'prefill':
        return 'prefill'
    if label == 'decode':
        return 'decode'
    return 'both'


def _from_affinity(spec: Mapping[str, Any]) -> str | None:
    """The first `In` value on a GPU product label in the required node affinity terms."""
    affinity = spec.get('affinity')
    node = affinity.get('nodeAffinity') if isinstance(affinity, Mapping) else None
    required = (
        node.get('requiredDuringSchedulingIgnoredDuringExecution')
        if isinstance(node, Mapping)
        else None
    )
    terms = required.get('nodeSelectorTerms') if isinstance(required, Mapping) else None
    if not isinstance(terms, list):
        return None
    for label in GPU_PRODUCT_LABELS:
        for term in terms:
            expressions = term.get('matchExpressions') if isinstance(term, Mapping) else None
            for expression in expressions if isinstance(expressions, list) else ():
                if not isinstance(expression, Mapping) or expression.get('key') != label:
                    continue
                values = expression.get('values')
                if expression.get('operator') != 'In' or not isinstance(values, list):
                    continue
                for value in values:
                    if isinstance(value, str) and value:
                        return value
    return None


def _accelerator(template: Mapping[str, Any], labels: Mapping[str, str]) -> str:
    spec: Mapping[str, Any] = template['spec']
    selector = spec.get('nodeSelector')
    if isinstance(selector, Mapping):
        for label in GPU_PRODUCT_LABELS:
            value = selector.get(label)
            if isinstance(value, str) and value:
                return value
    from_affinity = _from_affinity(spec)
    if from_affinity is not None:
        return from_affinity
    for source in (_labels(template), labels):
        value = source.get(ACCELERATOR_LABEL)
        if isinstance(value, str) and value:
            return value
    return 'unknown'


def _selector_string(value: object, path: str) -> str:
    selector = _mapping(value, path, required=True)
    assert selector is not None
    parts: list[tuple[str, str]] = []
    for key, wanted in _string_map(selector.get('matchLabels'), f'{path}.matchLabels').items():
        parts.append((key, f'{key}={wanted}'))
    expressions = selector.get('matchExpressions')
    if expressions is not None and not isinstance(expressions, list):
        raise _Bad(f'{path}.matchExpressions: expected a list, got {_type_name(expressions)}')
    for index, expression in enumerate(expressions or ()):
        where = f'{path}.matchExpressions[{index}]'
        if not isinstance(expression, Mapping) or not isinstance(expression.get('key'), str):
            raise _Bad(f'{where}: expected an object with a string key')
        key, operator = expression['key'], expression.get('operator')
        values = expression.get('values') or []
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise _Bad(f'{where}.values: expected a list of strings')
        listed = ','.join(sorted(values))
        if operator == 'In':
            parts.append((key, f'{key} in ({listed})'))
        elif operator == 'NotIn':
            parts.append((key, f'{key} notin ({listed})'))
        elif operator == 'Exists':
            parts.append((key, key))
        elif operator == 'DoesNotExist':
            parts.append((key, f'!{key}'))
        else:
            raise _Bad(f'{where}.operator: unknown operator {_show(operator)}')
    if not parts:
        raise _Bad(f'{path}: selects nothing (no matchLabels or matchExpressions)')
    return ','.join(text for _, text in sorted(parts))


def _read(obj: Mapping[str, Any], kind: str, namespace: str, name: str) -> ScaleTarget:
    api_version = obj.get('apiVersion')
    if api_version is not None and api_version != API_VERSIONS[kind]:
        raise _Bad(f'apiVersion: {_show(api_version)} is not {API_VERSIONS[kind]} for {kind}')
    metadata: Mapping[str, Any] = obj['metadata']
    object_labels = _string_map(metadata.get('labels'), 'metadata.labels')
    spec = _mapping(obj.get('spec'), 'spec', required=True)
    assert spec is not None
    status = _mapping(obj.get('status'), 'status', required=False) or {}
    replicas = _count(spec.get('replicas'), 'spec.replicas', default=1)
    ready = _count(status.get('readyReplicas'), 'status.readyReplicas', default=0)
    observed = _count(status.get('replicas'), 'status.replicas', default=0)
    if kind == LEADER_WORKER_SET:
        lwt = _mapping(spec.get('leaderWorkerTemplate'), 'spec.leaderWorkerTemplate', required=True)
        assert lwt is not None
        size = _count(lwt.get('size'), 'spec.leaderWorkerTemplate.size', default=1, minimum=1)
        worker = _template(lwt.get('workerTemplate'), 'spec.leaderWorkerTemplate.workerTemplate')
        leader = (
            worker
            if lwt.get('leaderTemplate') is None
            else _template(lwt['leaderTemplate'], 'spec.leaderWorkerTemplate.leaderTemplate')
        )
        leader_gpus = gpus_per_replica(containers=_containers(leader))
        worker_gpus = gpus_per_replica(containers=_containers(worker))
        gpus = leader_gpus + (size - 1) * worker_gpus
        hpa = status.get('hpaPodSelector')
        selector = (
            hpa
            if isinstance(hpa, str) and hpa
            else f'{LWS_NAME_LABEL}={name},{LWS_WORKER_INDEX_LABEL}=0'
        )
    else:
        size = 1
        leader = worker = _template(spec.get('template'), 'spec.template')
        gpus = gpus_per_replica(containers=_containers(leader))
        selector = _selector_string(spec.get('selector'), 'spec.selector')
    return ScaleTarget(
        kind=kind,
        api_version=API_VERSIONS[kind],
        namespace=namespace,
        name=name,
        replicas=replicas,
        ready=ready,
        pending=max(0, observed - ready),
        group_size=size,
        leader_template=copy.deepcopy(dict(leader)),
        worker_template=copy.deepcopy(dict(worker)),
        gpus_per_replica=gpus,
        engine=parse_engine_args(containers=_containers(leader)),
        role=_role(leader),
        accelerator=_accelerator(leader, object_labels),
        selector=selector,
        resource_version=rv if isinstance(rv := metadata.get('resourceVersion'), str) else '',
    )


def accessor(obj: Mapping[str, Any]) -> ScaleTarget | TargetProblem:
    """Read a Deployment, StatefulSet or LeaderWorkerSet object dict; a problem value otherwise."""
    if not isinstance(obj, Mapping):
        return TargetProblem('', '', '', f'object: expected an object, got {_type_name(obj)}')
    raw_kind = obj.get('kind')
    kind = raw_kind if isinstance(raw_kind, str) else ''
    metadata = obj.get('metadata')
    raw_name = metadata.get('name') if isinstance(metadata, Mapping) else None
    raw_namespace = metadata.get('namespace') if isinstance(metadata, Mapping) else None
    name = raw_name if isinstance(raw_name, str) else ''
    namespace = raw_namespace if isinstance(raw_namespace, str) and raw_namespace else 'default'

    def problem(message: str) -> TargetProblem:
        return TargetProblem(kind=kind, namespace=namespace, name=name, message=message)

    if kind not in API_VERSIONS:
        supported = ', '.join(SUPPORTED_KINDS)
        return problem(f'kind: {_show(raw_kind)} is not supported (supported: {supported})')
    if not isinstance(metadata, Mapping):
        return problem(f'metadata: expected an object, got {_type_name(metadata)}')
    if not name:
        return problem(f'metadata.name: expected a non-empty string, got {_show(raw_name)}')
    if raw_namespace is not None and not isinstance(raw_namespace, str):
        return problem(f'metadata.namespace: expected a string, got {_type_name(raw_namespace)}')
    try:
        return _read(obj, kind, namespace, name)
    except _Bad as bad:
        return problem(str(bad))


def to_variant(
    *,
    target: ScaleTarget,
    name: str,
    model_id: str,
    cost: float,
    min_replicas: int,
    max_replicas: int,
    desired: int | None,
) -> Variant:
    """The core's `Variant` named `name` (the VariantAutoscaling) for this scale target."""
    return Variant(
        name=name,
        namespace=target.namespace,
        model_id=model_id,
        cost=cost,
        accelerator=target.accelerator,
        gpus_per_replica=target.gpus_per_replica,
        role=target.role,
        min_replicas=min_replicas,
        max_replicas=max_replicas,
        current_replicas=target.replicas,
        ready_replicas=target.ready,
        pending_replicas=target.pending,
        desired_replicas=desired,
        engine=target.engine,
    )
