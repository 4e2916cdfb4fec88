"""The structural schemas of the project's own CRDs, applied by the fake API to client writes as
kube-apiserver applies them: unknown fields pruned, defaults filled in, values validated.

Why: a custom resource the real server prunes, defaults or refuses was stored as sent by the
fake, so a client writing a field its CRD does not declare (a status field the schema lacks, a
misspelt spec key) or a value out of its bounds passed on the fake alone. The schemas are those
of `deploy/base/crds` (VariantAutoscaling, LLMAutoScaler), read once; a resource without one
(InferencePools, Kaito's InferenceSet, or every custom resource when the files are not beside
the package) is stored as sent.

What is applied, as apiextensions-apiserver does for a structural schema (k8s.io/apiextensions-
apiserver pkg/apiserver/schema: pruning, defaulting, and OpenAPI validation, v1.34):

- pruning: a field an object's schema does not declare is dropped, unless the schema keeps
  unknown fields (`x-kubernetes-preserve-unknown-fields`) or gives `additionalProperties`;
  `apiVersion`, `kind` and `metadata` at the root are kept (metadata is the server's own);
- a null where the schema is not `nullable` is dropped, then `default`s fill in the fields that
  are missing;
- validation: `type` (with `x-kubernetes-int-or-string`), `required`, `enum`, `minimum` /
  `maximum` (and their exclusive forms), `minLength` / `maxLength`, `pattern`, `minItems` /
  `maxItems`. Not evaluated: `format`, and the CEL rules of `x-kubernetes-validations` (the
  real control plane's tests cover those).

What fails: `admit(resource, obj)` raises `ApiError` 422 (Invalid) listing every violation as the
real server words it (`spec.minReplicas: Invalid value: -1: spec.minReplicas in body should be
greater than or equal to 0`); it returns the pruned and defaulted copy otherwise. Only client
writes are admitted: the harness's own `FakeAPI.seed` stores as sent, so that tests can plant
what an older CRD (or none) let through.
"""

from __future__ import annotations

import copy
import functools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from llmscaler.devcluster.fakeapi.resources import Resource
from llmscaler.devcluster.fakeapi.semantics import ApiError

CRDS = Path(__file__).resolve().parents[4] / 'deploy' / 'base' / 'crds'
"""The CRDs the project ships (absent when the package is installed without its repository)."""
_ROOT_KEPT = ('apiVersion', 'kind', 'metadata')
_MISSING = object()
_Error = tuple[str, str]
"""A violation: the path of the value (`spec.minReplicas`), and the message naming it."""


@dataclass
class _Walk:
    """What a walk of an object found: its violations, and the unknown fields it pruned."""

    errors: list[_Error] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)


_TYPES: dict[str, tuple[type, ...]] = {
    'object': (dict,),
    'array': (list,),
    'string': (str,),
    'integer': (int,),
    'number': (int, float),
    'boolean': (bool,),
}


@functools.cache
def _schemas() -> dict[tuple[str, str, str], dict[str, Any]]:
    """(group, version, plural) → the version's openAPIV3Schema, from every CRD file."""
    found: dict[tuple[str, str, str], dict[str, Any]] = {}
    if not CRDS.is_dir():
        return found
    for path in sorted(CRDS.glob('*.yaml')):
        crd = yaml.safe_load(path.read_text())
        spec = crd['spec']
        for version in spec['versions']:
            key = (spec['group'], version['name'], spec['names']['plural'])
            found[key] = version['schema']['openAPIV3Schema']
    return found


def admit(
    resource: Resource, obj: Any, *, old: Any = None, part: str = 'main', strict: bool = False
) -> Any:
    """`obj` pruned and defaulted by its schema, or ApiError 422 (module docstring).

    `old` is the stored object an update replaces (None for a create): a value that breaks the
    schema but is unchanged from it is let through, as the real server's validation ratcheting
    does. A `part='status'` write is validated in its status alone, as the status subresource's.
    `strict` (the request's `fieldValidation=Strict`, which kubectl sends by default): an unknown
    field is refused (400, naming every one) instead of pruned.
    """
    schema = _schemas().get((resource.group, resource.version, resource.plural))
    if schema is None or not isinstance(obj, dict):
        return obj
    walk = _Walk()
    admitted = _admit(copy.deepcopy(obj), schema, path='', walk=walk, root=True)
    if strict and walk.unknown:
        fields = ', '.join(f'unknown field "{path}"' for path in walk.unknown)
        raise ApiError(
            400,
            f'{resource.kind} in version "{resource.version}" cannot be handled as a '
            f'{resource.kind}: strict decoding error: {fields}',
        )
    errors = walk.errors
    if part == 'status':
        errors = [e for e in errors if e[0] == 'status' or e[0].startswith(('status.', 'status['))]
    if old is not None:
        errors = [e for e in errors if _at(admitted, e[0]) != _at(old, e[0])]
    if errors:
        name = (obj.get('metadata') or {}).get('name', '')
        listed = ', '.join(message for _, message in errors)
        raise ApiError(422, f'{resource.kind}.{resource.group} "{name}" is invalid: {listed}')
    return admitted


def _at(obj: Any, path: str) -> Any:
    """The value at `path` (`spec.a[0].b`) of `obj`, or `_MISSING`."""
    value = obj
    for part in re.findall(r'[^.\[\]]+', path):
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return _MISSING
    return value


def _admit(
    value: Any, schema: dict[str, Any], *, path: str, walk: _Walk, root: bool = False
) -> Any:
    kind = schema.get('type')
    if schema.get('x-kubernetes-int-or-string'):
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            walk.errors.append(_invalid(path, value, 'must be an integer or a string'))
        return value
    if kind is not None and (
        not isinstance(value, _TYPES.get(kind, (object,)))
        or (kind in ('integer', 'number') and isinstance(value, bool))
        or (kind == 'integer' and isinstance(value, float))
    ):
        walk.errors.append(_invalid(path, value, f'must be of type {kind}: {_type_name(value)}'))
        return value
    if 'enum' in schema and value not in schema['enum']:
        allowed = ', '.join(f'"{v}"' if isinstance(v, str) else str(v) for v in schema['enum'])
        walk.errors.append(_unsupported(path, value, allowed))
    if isinstance(value, dict):
        return _admit_object(value, schema, path=path, walk=walk, root=root)
    if isinstance(value, list):
        items = schema.get('items')
        if isinstance(items, dict):
            value = [
                _admit(item, items, path=f'{path}[{i}]', walk=walk) for i, item in enumerate(value)
            ]
        keys = ('minItems', 'maxItems')
        walk.errors += _bounds(len(value), schema, keys, path=path, value=value, unit='items')
    elif isinstance(value, str):
        keys = ('minLength', 'maxLength')
        walk.errors += _bounds(len(value), schema, keys, path=path, value=value, unit='chars')
        pattern = schema.get('pattern')
        if pattern is not None and re.search(pattern, value) is None:
            message = f"{_name(path)} in body should match '{pattern}'"
            walk.errors.append(_invalid(path, value, message))
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        _numeric(value, schema, path=path, walk=walk)
    return value


def _admit_object(
    value: dict[str, Any], schema: dict[str, Any], *, path: str, walk: _Walk, root: bool
) -> dict[str, Any]:
    properties: dict[str, Any] = schema.get('properties') or {}
    extra = schema.get('additionalProperties')
    keep_unknown = bool(schema.get('x-kubernetes-preserve-unknown-fields'))
    out: dict[str, Any] = {}
    for key in value:
        child = value[key]
        sub = properties.get(key, extra if isinstance(extra, dict) else None)
        if root and key in _ROOT_KEPT:
            out[key] = child
        elif child is None and not (sub or {}).get('nullable'):
            continue  # a null where none may be is dropped, as before defaulting
        elif sub is not None:
            out[key] = _admit(child, sub, path=_join(path, key), walk=walk)
        elif keep_unknown or extra is True:
            out[key] = child
        else:
            walk.unknown.append(_join(path, key))
    for key in sorted(properties):
        if key not in out and 'default' in properties[key]:
            out[key] = copy.deepcopy(properties[key]['default'])
    for key in schema.get('required') or ():
        if key not in out:
            walk.errors.append((_join(path, key), f'{_join(path, key)}: Required value'))
    return out


def _numeric(value: float, schema: dict[str, Any], *, path: str, walk: _Walk) -> None:
    name = _name(path)
    low, high = schema.get('minimum'), schema.get('maximum')
    if low is not None:
        if schema.get('exclusiveMinimum') and value <= low:
            message = f'{name} in body should be greater than {low}'
            walk.errors.append(_invalid(path, value, message))
        elif value < low:
            message = f'{name} in body should be greater than or equal to {low}'
            walk.errors.append(_invalid(path, value, message))
    if high is not None:
        if schema.get('exclusiveMaximum') and value >= high:
            walk.errors.append(_invalid(path, value, f'{name} in body should be less than {high}'))
        elif value > high:
            message = f'{name} in body should be less than or equal to {high}'
            walk.errors.append(_invalid(path, value, message))


def _bounds(
    size: int, schema: dict[str, Any], keys: tuple[str, str], *, path: str, value: Any, unit: str
) -> list[_Error]:
    """The violations of a length's bounds (`keys`: the schema's lower and upper)."""
    low, high = schema.get(keys[0]), schema.get(keys[1])
    name, found = _name(path), list[_Error]()
    if low is not None and size < low:
        found.append(_invalid(path, value, f'{name} in body should have at least {low} {unit}'))
    if high is not None and size > high:
        found.append(_invalid(path, value, f'{name} in body should have at most {high} {unit}'))
    return found


def _invalid(path: str, value: Any, message: str) -> _Error:
    return path, f'{_name(path)}: Invalid value: {_shown(value)}: {message}'


def _unsupported(path: str, value: Any, allowed: str) -> _Error:
    return path, f'{_name(path)}: Unsupported value: {_shown(value)}: supported values: {allowed}'


def _shown(value: Any) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, (dict, list)):
        return f'"{_type_name(value)}"'
    return str(value).lower() if isinstance(value, bool) else str(value)


def _type_name(value: Any) -> str:
    names = {dict: 'object', list: 'array', str: 'string', bool: 'boolean', float: 'number'}
    return names.get(type(value), 'integer' if isinstance(value, int) else 'null')


def _join(path: str, key: str) -> str:
    return f'{path}.{key}' if path else key


def _name(path: str) -> str:
    return path or '<root>'
