"""A CRD's openAPIV3Schema against the pydantic models' JSON schema, node by node.

`walk` pairs every node of the CRD's schema with the same node of the models' (`$ref` inlined and
`X | None` reduced to X); `facets` are what is compared of each pair (type, format, default,
bounds, pattern, enum), normalised. test_kube_crd (VariantAutoscaling) and test_kube_llmautoscaler
(LLMAutoScaler) use them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from llmscaler.kube.resource_model import INT32_MAX, INT64_MAX

FACETS = (
    'type',
    'format',
    'default',
    'minimum',
    'maximum',
    'minLength',
    'maxLength',
    'pattern',
    'enum',
)


def resolve(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """A pydantic schema node with $ref inlined and `X | None` reduced to X."""
    node = dict(node)
    if '$ref' in node:
        node = {**defs[node.pop('$ref').rsplit('/', 1)[-1]], **node}
    if 'anyOf' in node:
        branches = [b for b in node.pop('anyOf') if b != {'type': 'null'}]
        assert len(branches) == 1, branches
        node = {**resolve(branches[0], defs), **node}
    return node


def facets(node: dict[str, Any]) -> dict[str, Any]:
    """The validation facets, normalised: None/[] defaults mean 'absent', int32/int64 imply max."""
    out = {k: node[k] for k in FACETS if k in node}
    if out.get('default', 0) in (None, []):
        del out['default']
    implied_max = {'int32': INT32_MAX, 'int64': INT64_MAX}.get(out.get('format', ''))
    if implied_max is not None and out.get('maximum') == implied_max:
        del out['maximum']
    return out


def walk(
    crd: dict[str, Any], model: dict[str, Any], defs: dict[str, Any], path: str
) -> Iterator[tuple[str, dict[str, Any], dict[str, Any]]]:
    """Pairs (path, CRD node, model node) for every node below `path`, in CRD order."""
    model = resolve(model, defs)
    yield path, crd, model
    for name, child in crd.get('properties', {}).items():
        yield from walk(child, model.get('properties', {}).get(name, {}), defs, f'{path}.{name}')
    if 'items' in crd:
        yield from walk(crd['items'], model.get('items', {}), defs, f'{path}[]')
