"""The world of one cycle: informer caches (plain object dicts) turned into the core's vocabulary.

Why: the informers hold VariantAutoscalings, their scale targets and pods as the API server sent
them. A cycle needs parsed VAs, each VA's scale target read through `kube.targets.accessor`, the
core's `Variant`s, the `TargetRef`s and `PodInfo`s that attribution walks, the model scopes the
metric source reads. This module computes them from one snapshot of the caches; the pods
themselves, and the pages to scrape, are `controller.cluster.pods`'s business. It is pure: no I/O,
no clock, no event loop.

What it computes:

- `build_world`: one `VariantEntry` per VA. Its target is looked up by
  (scaleTargetRef.kind, the VA's namespace, scaleTargetRef.name). A VA that does not parse goes
  to `World.invalid`; a resolved one gives a `Variant` (desired replicas from
  `status.desiredOptimizedAlloc.numReplicas`) and a `TargetRef`. Scopes are one per
  (model_id, namespace) of the resolved variants, with the retention period of the model's
  scale-to-zero configuration, else the global default. Two or more VAs naming the same scale
  target are all left unresolved (their `target_problem` names the others): two autoscalers on
  one `/scale` would undo each other.
- `World.pods`: every pod as attribution sees it (`controller.cluster.pods.pod_info`).

What fails and how bad input is treated: nothing raises. A target problem is a one-line
`target_problem` naming the object (an unsupported kind, or an apiVersion of another group,
lists what is supported); a target object cached without `kind`, `apiVersion` (list responses
omit them) or namespace gets them from the key it is cached under. VAs without a name are
invalid.

Determinism: every output is sorted; duplicate objects of one key resolve to the one whose
canonical JSON sorts first, so shuffled inputs give an equal `World`. That text is built without
recursion when the object is nested deeper than the JSON encoder goes, so a VA nested thousands
deep is an invalid VA (`parse_va`) or a plain one, never a RecursionError.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from llmscaler.collect.attribution import PodInfo, TargetRef
from llmscaler.collect.readings import ModelScope
from llmscaler.config.resolved import Config
from llmscaler.controller.cluster.parsed import ParsedObjects
from llmscaler.controller.cluster.pods import as_text, metadata_of, pod_infos
from llmscaler.domain.snapshot import Variant
from llmscaler.kube import crd, resource_model
from llmscaler.kube.targets import (
    API_VERSIONS,
    SUPPORTED_KINDS,
    ScaleTarget,
    TargetProblem,
    accessor,
    to_variant,
)

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
    pool: str = ''
    """The key (`namespace/name`) of the InferencePool the variant belongs to ('' for none)."""
    pool_problem: str = ''
    """Why the variant is held for want of a usable InferencePool ('' when it is not)."""


@dataclass(frozen=True, slots=True)
class World:
    """Everything one cycle reads from the caches (see the module docstring)."""

    entries: tuple[VariantEntry, ...]
    invalid: tuple[tuple[Mapping[str, Any], resource_model.InvalidObject], ...]
    variants: tuple[Variant, ...]
    targets: tuple[TargetRef, ...]
    pods: tuple[PodInfo, ...]
    scopes: tuple[ModelScope, ...]


def _stable(obj: object) -> str:
    """A canonical text of an object, to choose among duplicates whatever the input order."""
    try:
        return json.dumps(obj, sort_keys=True, default=repr)
    except (TypeError, ValueError, RecursionError):
        # Nested deeper than the C encoder recurses, keys of mixed types, or a cycle.
        return flat_text(obj)


def flat_text(obj: object) -> str:
    """`_stable` without recursion: any depth, keys of any type, cycles cut at `<cycle>`.

    An explicit stack of values and pieces of text; a container already on the path from the
    root (by identity) renders as `<cycle>`, so a self-containing object ends. Keys sort by type
    name, then by their rendering; leaves render as JSON, else with `repr`, else as their type.
    """
    out: list[str] = []
    path: set[int] = set()
    todo: list[object] = [obj]
    while todo:
        item = todo.pop()
        if isinstance(item, _Text):
            out.append(item.text)
        elif isinstance(item, _Leave):
            path.discard(item.id)
        elif not isinstance(item, Mapping | list | tuple):
            out.append(_leaf(item))
        elif id(item) in path:
            out.append('<cycle>')
        else:
            path.add(id(item))
            pieces: list[object]
            if isinstance(item, Mapping):
                # Keys alone decide the order (values are never compared): text keys by
                # themselves, as json.dumps sorts them, others by type name and rendering.
                keyed = sorted(
                    (
                        ((type(k).__name__, k if isinstance(k, str) else _leaf(k)), k, v)
                        for k, v in item.items()
                    ),
                    key=lambda entry: entry[0],
                )
                pieces = [_Text('{')]
                for index, (_, key, value) in enumerate(keyed):
                    pieces += [_Text(', ' if index else ''), _Text(_leaf(key)), _Text(': '), value]
                pieces.append(_Text('}'))
            else:
                pieces = [_Text('[')]
                for index, value in enumerate(item):
                    pieces += [_Text(', ' if index else ''), value]
                pieces.append(_Text(']'))
            todo.append(_Leave(id(item)))
            todo.extend(reversed(pieces))
    return ''.join(out)


@dataclass(frozen=True, slots=True)
class _Text:
    text: str


@dataclass(frozen=True, slots=True)
class _Leave:
    id: int


def _leaf(value: object) -> str:
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        try:
            return repr(value)
        except Exception:  # a leaf whose repr fails: its type stands for it
            return f'<{type(value).__name__}>'


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
    parsed: ParsedObjects,
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
    found = parsed.parse(
        _with_identity(obj, kind=kind, api_version=expected, namespace=namespace),
        accessor,
        what=kind,
        namespace=namespace,
        name=name,
    )
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
    parsed: ParsedObjects,
) -> VariantEntry:
    target, problem = _resolve_target(va=va, namespace=namespace, targets=targets, parsed=parsed)
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
    meta = metadata_of(obj)
    return f'{as_text(meta.get("namespace")) or "default"}/{as_text(meta.get("name"))}'


def build_world(
    *,
    vas: Sequence[Mapping[str, Any]],
    targets: Mapping[tuple[str, str, str], Mapping[str, Any]],
    pods: Sequence[Mapping[str, Any]],
    config: Config,
    parsed: ParsedObjects | None = None,
) -> World:
    """The cycle's view of the caches; `targets` is keyed (kind, namespace, name).

    `parsed` remembers the parses of the previous build (`WorldCache` keeps one); the World is
    the same with or without it.
    """
    memo = ParsedObjects() if parsed is None else parsed
    memo.start()
    entries: list[VariantEntry] = []
    invalid: list[tuple[Mapping[str, Any], resource_model.InvalidObject]] = []
    for key, obj in sorted(_first_per_key(vas, key=_va_key).items()):
        namespace, _, name = key.partition('/')
        va = memo.parse(
            obj, crd.parse_va, what='VariantAutoscaling', namespace=namespace, name=name
        )
        if isinstance(va, crd.VariantAutoscaling) and not name:
            va = resource_model.InvalidObject('', namespace, 'metadata.name: missing')
        if isinstance(va, resource_model.InvalidObject):
            invalid.append((obj, va))
            continue
        entries.append(
            _entry(
                key=key,
                obj=obj,
                va=va,
                namespace=namespace,
                name=name,
                targets=targets,
                parsed=memo,
            )
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
        pods=pod_infos(pods),
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


def _invalid_key(problem: resource_model.InvalidObject) -> tuple[str, str, str]:
    return (problem.namespace, problem.name, problem.message)


def _scopes(*, variants: Sequence[Variant], config: Config) -> tuple[ModelScope, ...]:
    scopes = []
    for namespace, model_id in sorted({(v.namespace, v.model_id) for v in variants}):
        settings = config.model(model_id=model_id, namespace=namespace)
        period = settings.scale_to_zero.retention_period
        scopes.append(
            ModelScope(
                model_id=model_id,
                namespace=namespace,
                retention_period=(
                    period if period is not None else config.settings.default_retention_period
                ),
                latency_histograms=settings.predictive is not None,
            )
        )
    return tuple(scopes)
