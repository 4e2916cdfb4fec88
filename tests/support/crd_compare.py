"""A CRD's openAPIV3Schema against the pydantic models' JSON schema, node by node.

`walk` pairs every node of the CRD's schema with the same node of the models' (`$ref` inlined and
`X | None` reduced to X); `facets` are what is compared of each pair (type, format, default,
bounds, pattern, enum), normalised; `differences` lists every pair that disagrees. The CRD is read
from its YAML file (`load_crd`, `only_version`, `crd_schema`), and `drift` changes one facet of
it to show that the comparison catches it. test_crd (VariantAutoscaling) and test_llmautoscaler
(LLMAutoScaler) use them.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

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


def load_crd(path: Path) -> dict[str, Any]:
    """The CustomResourceDefinition in the YAML file at `path`."""
    crd = yaml.safe_load(path.read_text())
    assert isinstance(crd, dict)
    return crd


def only_version(path: Path) -> dict[str, Any]:
    """The CRD's one version (the CRDs of this repository serve one each)."""
    (only,) = load_crd(path)['spec']['versions']
    assert isinstance(only, dict)
    return only


def crd_schema(path: Path) -> dict[str, Any]:
    """The openAPIV3Schema of the CRD's one version."""
    schema = only_version(path)['schema']['openAPIV3Schema']
    assert isinstance(schema, dict)
    return schema


def differences(
    crd: dict[str, Any], model: dict[str, Any], *, empty_object_default_is_absent: bool = False
) -> list[str]:
    """Every node under spec and status whose facets, properties or required fields differ.

    With `empty_object_default_is_absent`, an object the CRD defaults to `{}` (so that its own
    fields' defaults apply) counts as a model field with a `default_factory`, which the models'
    JSON schema shows without a default.
    """
    defs = model.get('$defs', {})
    found = []
    for section in ('spec', 'status'):
        pairs = walk(crd['properties'][section], model['properties'][section], defs, section)
        for path, c, m in pairs:
            crd_facets, model_facets = facets(c), facets(m)
            if (
                empty_object_default_is_absent
                and c.get('type') == 'object'
                and crd_facets.get('default') == {}
            ):
                del crd_facets['default']
            if crd_facets != model_facets:
                found.append(f'{path}: CRD {crd_facets} != model {model_facets}')
            if set(c.get('properties', {})) != set(m.get('properties', {})):
                found.append(f'{path}: properties {sorted(c.get("properties", {}))}')
            if sorted(c.get('required', [])) != sorted(m.get('required', [])):
                found.append(f'{path}: required {c.get("required")} != {m.get("required")}')
    return found


def drift(schema: dict[str, Any], *, path: tuple[str, ...], key: str, value: Any) -> None:
    """Set facet `key` of the property at `path` of `schema` to `value`, in place."""
    node = schema
    for part in path:
        node = node['properties'][part]
    node[key] = value
