"""The scale targets `llmscaler manifests` writes for: from VariantAutoscaling files or flags.

Why: the manifests must scale exactly what the VAs scale, with the VAs' bounds, so they are read
with the controller's own parser (`kube.crd.parse_va`) and the controller's rules on supported
targets; a target given by flags goes through the same checks.

What fails: every problem is a `TargetError` (one line naming the file and document, or the
flag): an unreadable file, YAML that is not plain data (the bounded reader of
`config.yaml_loader`), a VA that does not validate, a kind that is not Deployment, StatefulSet
or LeaderWorkerSet, an apiVersion that does not go with its kind, a name used twice, a file
without any VariantAutoscaling.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llmscaler.config.yaml_loader import FILE_LIMITS, YamlProblem, load_yaml_documents
from llmscaler.kube.crd import parse_va
from llmscaler.kube.resource_model import InvalidObject

API_VERSIONS = {
    'Deployment': 'apps/v1',
    'StatefulSet': 'apps/v1',
    'LeaderWorkerSet': 'leaderworkerset.x-k8s.io/v1',
}
"""The scale targets the controller supports, with the apiVersion each is served under."""
_NAME = re.compile(r'^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')


class TargetError(ValueError):
    """A scale target that cannot be written for (one line)."""


@dataclass(frozen=True, slots=True)
class Target:
    """One scale target: the workload (`api_version`, `kind`, `name`) in `namespace`, its
    bounds, and `variant` (the VA's name: the `variant_name` label of `wva_desired_replicas`)."""

    variant: str
    namespace: str
    api_version: str
    kind: str
    name: str
    min_replicas: int
    max_replicas: int


def check_name(*, value: str, where: str) -> str:
    """A DNS-1123 subdomain (what the API server accepts for these objects' names)."""
    if len(value) > 253 or not _NAME.match(value):
        raise TargetError(f'{where}: {value!r} is not a valid Kubernetes name')
    return value


def _kind(*, kind: str, api_version: str | None, where: str) -> str:
    expected = API_VERSIONS.get(kind)
    if expected is None:
        supported = ', '.join(API_VERSIONS)
        raise TargetError(f'{where}: kind {kind!r} is not supported (supported: {supported})')
    if api_version is not None and api_version != expected:
        raise TargetError(f'{where}: apiVersion {api_version!r} is not {expected} for {kind}')
    return expected


def from_flag(*, text: str, namespace: str, min_replicas: int, max_replicas: int) -> Target:
    """`KIND/NAME` from `--target` (the variant is named after the workload)."""
    kind, sep, name = text.partition('/')
    if not sep or not kind or not name:
        raise TargetError(f'--target: expected KIND/NAME (e.g. Deployment/llama-8b), got {text!r}')
    api_version = _kind(kind=kind, api_version=None, where='--target')
    check_name(value=name, where='--target')
    return Target(
        variant=name,
        namespace=namespace,
        api_version=api_version,
        kind=kind,
        name=name,
        min_replicas=min_replicas,
        max_replicas=max_replicas,
    )


def from_va_file(*, path: Path, namespace: str) -> list[Target]:
    """Every VariantAutoscaling of a YAML or JSON file (other kinds are skipped); a VA without a
    namespace takes `namespace`."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise TargetError(f'{path}: cannot read: {exc.strerror or exc}') from None
    if len(raw) > FILE_LIMITS.max_bytes:
        raise TargetError(f'{path}: larger than {FILE_LIMITS.max_bytes} bytes')
    try:
        documents = load_yaml_documents(text=raw.decode('utf-8'), limits=FILE_LIMITS)
    except UnicodeDecodeError:
        raise TargetError(f'{path}: not UTF-8 text') from None
    except YamlProblem as exc:
        raise TargetError(f'{path}: {exc}') from None
    targets = []
    for index, document in enumerate(documents):
        where = f'{path} document {index + 1}'
        if not isinstance(document, dict):
            raise TargetError(f'{where}: expected a Kubernetes object')
        if document.get('kind') == 'VariantAutoscaling':
            targets.append(from_va_object(document=document, where=where, namespace=namespace))
    if not targets:
        raise TargetError(f'{path}: no VariantAutoscaling in the file')
    return targets


def from_va_object(*, document: Mapping[str, Any], where: str, namespace: str) -> Target:
    """One VariantAutoscaling object (from a file or the API server); `namespace` is used when
    the object has none."""
    va = parse_va(document)
    if isinstance(va, InvalidObject):
        raise TargetError(f'{where}: VariantAutoscaling {va.name or "?"}: {va.message}')
    name = va.metadata.name
    if name is None:
        raise TargetError(f'{where}: VariantAutoscaling without metadata.name')
    ref = va.spec.scale_target_ref
    api_version = _kind(
        kind=ref.kind, api_version=ref.api_version, where=f'{where} ({name}) scaleTargetRef'
    )
    return Target(
        variant=name,
        namespace=va.metadata.namespace or namespace,
        api_version=api_version,
        kind=ref.kind,
        name=ref.name,
        min_replicas=va.spec.min_replicas,
        max_replicas=va.spec.max_replicas,
    )


def unique(targets: Sequence[Target]) -> list[Target]:
    """Refuse two targets that would write objects of the same name, or scale one workload."""
    seen: dict[tuple[str, str], str] = {}
    workloads: set[tuple[str, str, str]] = set()
    for target in targets:
        key = (target.namespace, target.variant)
        if key in seen:
            raise TargetError(f'{target.namespace}/{target.variant}: given twice')
        seen[key] = target.name
        workload = (target.namespace, target.kind, target.name)
        if workload in workloads:
            raise TargetError(
                f'{target.namespace}/{target.kind}/{target.name}: scaled by two VariantAutoscalings'
            )
        workloads.add(workload)
    return sorted(targets, key=lambda t: (t.namespace, t.variant))
