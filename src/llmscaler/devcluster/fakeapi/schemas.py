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
  `maxItems`; not `format` (kube-apiserver 1.34 let a `maxReplicas` of 2⁴⁰ through an
  `int32` field too);
- then, unless one of those errors is of a kind that stops it (a wrong type, a missing or
  unsupported value, too long, too many: `field_errors.BLOCKING`, in which case the answer says
  that some rules were not checked), the CEL rules of `x-kubernetes-validations`
  (`cel_rules`).

What fails: `admit(resource, obj)` raises `ApiError` 422 (Invalid) listing every violation as the
real server words it (`spec.minReplicas: Invalid value: -1: spec.minReplicas in body should be
greater than or equal to 0`), with the causes kubectl prints (`field_errors.invalid`); it returns
the pruned and defaulted copy otherwise. Only client writes are admitted: the harness's own
`FakeAPI.seed` stores as sent, so that tests can plant what an older CRD (or none) let through.
A CEL rule of the CRDs that does not compile raises `ValueError` when the schemas are read.
"""

from __future__ import annotations

import copy
import functools
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from llmscaler.devcluster.fakeapi import cel_rules
from llmscaler.devcluster.fakeapi.field_errors import BLOCKING, FieldError, FieldType, invalid
from llmscaler.devcluster.fakeapi.resources import Resource
from llmscaler.devcluster.fakeapi.semantics import ApiError

CRDS = Path(__file__).resolve().parents[4] / 'deploy' / 'base' / 'crds'
"""The CRDs the project ships (absent when the package is installed without its repository)."""
_ROOT_KEPT = ('apiVersion', 'kind', 'metadata')
_MISSING = object()
_UNCHECKED = (
    'some validation rules were not checked because the object was invalid; correct the '
    'existing errors to complete validation'
)


@dataclass
class _Walk:
    """What a walk of an object found: its violations, and the unknown fields it pruned."""

    errors: list[FieldError] = field(default_factory=list)
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
            schema = version['schema']['openAPIV3Schema']
            cel_rules.compile_all(schema=schema)
            found[key] = schema
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
        errors = [
            e for e in errors if e.field == 'status' or e.field.startswith(('status.', 'status['))
        ]
    if isinstance(old, dict):
        # Compared as the server reads it back: a stored object is defaulted on every read.
        old = _admit(copy.deepcopy(old), schema, path='', walk=_Walk(), root=True)
        errors = [e for e in errors if _at(admitted, e.field) != _at(old, e.field)]
    if any(e.type in BLOCKING for e in errors):
        errors.append(FieldError(FieldType.INVALID, cel_rules.ROOT, None, _UNCHECKED))
    else:
        errors += cel_rules.check(schema=schema, obj=admitted, old=old)
    if errors:
        name = str((obj.get('metadata') or {}).get('name', ''))
        raise invalid(kind=resource.kind, group=resource.group, name=name, errors=errors)
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
            walk.errors.append(_wrong_type(path, value, 'integer,string'))
        return value
    if kind is not None and (
        not isinstance(value, _TYPES.get(kind, (object,)))
        or (kind in ('integer', 'number') and isinstance(value, bool))
        or (kind == 'integer' and isinstance(value, float))
    ):
        walk.errors.append(_wrong_type(path, value, kind))
        return value
    if 'enum' in schema and value not in schema['enum']:
        walk.errors.append(_unsupported(path, value, schema['enum']))
    if isinstance(value, dict):
        return _admit_object(value, schema, path=path, walk=walk, root=root)
    if isinstance(value, list):
        items = schema.get('items')
        if isinstance(items, dict):
            value = [
                _admit(item, items, path=f'{path}[{i}]', walk=walk) for i, item in enumerate(value)
            ]
        walk.errors += _items(len(value), schema, path=path)
    elif isinstance(value, str):
        walk.errors += _length(value, schema, path=path)
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
            walk.errors.append(FieldError(FieldType.REQUIRED, _join(path, key)))
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


def _items(size: int, schema: dict[str, Any], *, path: str) -> list[FieldError]:
    """The violations of a list's `minItems` and `maxItems`."""
    low, high = schema.get('minItems'), schema.get('maxItems')
    found: list[FieldError] = []
    if low is not None and size < low:
        found.append(
            _invalid(path, size, f'{_name(path)} in body should have at least {low} items')
        )
    if high is not None and size > high:
        detail = f'must have at most {high} {"item" if high == 1 else "items"}'
        found.append(FieldError(FieldType.TOO_MANY, _name(path), size, detail))
    return found


def _length(value: str, schema: dict[str, Any], *, path: str) -> list[FieldError]:
    """The violations of a string's `minLength` and `maxLength`."""
    low, high = schema.get('minLength'), schema.get('maxLength')
    found: list[FieldError] = []
    if low is not None and len(value) < low:
        message = f'{_name(path)} in body should be at least {low} chars long'
        found.append(_invalid(path, value, message))
    if high is not None and len(value) > high:
        detail = f'may not be more than {high} {"byte" if high == 1 else "bytes"}'
        found.append(FieldError(FieldType.TOO_LONG, _name(path), None, detail))
    return found


def _invalid(path: str, value: Any, message: str) -> FieldError:
    return FieldError(FieldType.INVALID, _name(path), value, message)


def _wrong_type(path: str, value: Any, kind: str) -> FieldError:
    found = _type_name(value)
    message = f'{_name(path)} in body must be of type {kind}: "{found}"'
    return FieldError(FieldType.TYPE_INVALID, _name(path), found, message)


def _unsupported(path: str, value: Any, allowed: list[Any]) -> FieldError:
    # Values that are not strings are shown as JSON, and every one quoted (`"1"`).
    shown = (v if isinstance(v, str) else json.dumps(v) for v in allowed)
    detail = 'supported values: ' + ', '.join(json.dumps(v) for v in shown)
    return FieldError(FieldType.NOT_SUPPORTED, _name(path), value, detail)


def _type_name(value: Any) -> str:
    names = {dict: 'object', list: 'array', str: 'string', bool: 'boolean', float: 'number'}
    return names.get(type(value), 'integer' if isinstance(value, int) else 'null')


def _join(path: str, key: str) -> str:
    return f'{path}.{key}' if path else key


def _name(path: str) -> str:
    return path or '<root>'
