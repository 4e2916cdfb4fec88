"""Pure pieces of apiserver semantics the fake needs: patches, selectors and Status bodies.

Why: merge patch (RFC 7386), JSON patch (RFC 6902) and label/field selectors decide which writes
conflict and which objects a list or watch returns; this module computes them as the apiserver
does, as pure functions of documents and selector strings, which the fake's HTTP handlers apply
(they are tested through it).

Failures: a JSON patch whose `test` fails, or whose path is missing, raises `ApiError` 422
(reason Invalid), as the apiserver answers; a malformed patch document raises 400 (BadRequest).
Label selectors are the apiserver's: `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`,
`k` (exists) and `!k`, joined by commas; a malformed one (or an empty value set) raises 400.
Field selectors support `metadata.name` and `metadata.namespace` with `=`, `==` and `!=`, and
on Events the fields kube-apiserver selects them by (core v1: `involvedObject.*`, `reason`,
`reportingComponent`, `source`, `type`; events.k8s.io/v1: `regarding.*`, `reason`,
`reportingController`, `type`; as `kubectl describe` asks for an object's Events); any other
field raises 400.
"""

from __future__ import annotations

import copy
import re
from typing import Any

REASONS = {
    400: 'BadRequest',
    404: 'NotFound',
    405: 'MethodNotAllowed',
    409: 'Conflict',
    410: 'Expired',
    415: 'UnsupportedMediaType',
    422: 'Invalid',
    429: 'TooManyRequests',
    500: 'InternalError',
}


class ApiError(Exception):
    """An answer other than success; `details` is the Status's (kind, name, causes), if any."""

    def __init__(
        self,
        code: int,
        message: str,
        *,
        reason: str | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason or REASONS.get(code, 'Unknown')
        self.details = details


def status_body(
    *, code: int, reason: str, message: str, details: dict[str, Any] | None = None
) -> dict[str, Any]:
    body: dict[str, Any] = {
        'kind': 'Status',
        'apiVersion': 'v1',
        'metadata': {},
        'status': 'Failure',
        'message': message,
        'reason': reason,
        'code': code,
    }
    if details is not None:
        body['details'] = details
    return body


def merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _pointer(path: str) -> list[str]:
    if path == '':
        return []
    if not path.startswith('/'):
        raise ApiError(400, f'invalid JSON pointer {path!r}')
    return [p.replace('~1', '/').replace('~0', '~') for p in path[1:].split('/')]


def _parent(doc: Any, parts: list[str], path: str) -> Any:
    node = doc
    for part in parts[:-1]:
        node = _child(node, part, path)
    return node


def _child(node: Any, part: str, path: str) -> Any:
    if isinstance(node, dict) and part in node:
        return node[part]
    if isinstance(node, list) and part.isdigit() and int(part) < len(node):
        return node[int(part)]
    raise ApiError(422, f'path {path!r} does not exist')


def _get(doc: Any, path: str) -> Any:
    node = doc
    for part in _pointer(path):
        node = _child(node, part, path)
    return node


def _remove(doc: Any, path: str) -> Any:
    parts = _pointer(path)
    if not parts:
        raise ApiError(422, 'cannot remove the document root')
    parent = _parent(doc, parts, path)
    value = _child(parent, parts[-1], path)
    if isinstance(parent, list):
        del parent[int(parts[-1])]
    else:
        del parent[parts[-1]]
    return value


def _add(doc: Any, path: str, value: Any, *, replace: bool) -> Any:
    parts = _pointer(path)
    if not parts:
        return copy.deepcopy(value)
    parent = _parent(doc, parts, path)
    key = parts[-1]
    if isinstance(parent, dict):
        if replace and key not in parent:
            raise ApiError(422, f'replace: path {path!r} does not exist')
        parent[key] = copy.deepcopy(value)
    elif isinstance(parent, list):
        if key == '-' and not replace:
            parent.append(copy.deepcopy(value))
        elif key.isdigit() and int(key) <= len(parent) - (1 if replace else 0):
            if replace:
                parent[int(key)] = copy.deepcopy(value)
            else:
                parent.insert(int(key), copy.deepcopy(value))
        else:
            raise ApiError(422, f'path {path!r} is out of range')
    else:
        raise ApiError(422, f'path {path!r} does not exist')
    return doc


def json_patch(doc: Any, ops: Any) -> Any:
    if not isinstance(ops, list):
        raise ApiError(400, 'a JSON patch must be an array of operations')
    result = copy.deepcopy(doc)
    for op in ops:
        if not isinstance(op, dict) or not isinstance(op.get('path'), str):
            raise ApiError(400, f'invalid JSON patch operation {op!r}')
        kind, path = op.get('op'), op['path']
        if kind == 'test':
            if _get(result, path) != op.get('value'):
                raise ApiError(422, f'testing value {path} failed: test failed')
        elif kind == 'remove':
            _remove(result, path)
        elif kind in ('add', 'replace'):
            if 'value' not in op:
                raise ApiError(400, f'{kind} operation without a value')
            result = _add(result, path, op['value'], replace=kind == 'replace')
        elif kind in ('move', 'copy'):
            source = op.get('from')
            if not isinstance(source, str):
                raise ApiError(400, f'{kind} operation without from')
            value = _remove(result, source) if kind == 'move' else _get(result, source)
            result = _add(result, path, value, replace=False)
        else:
            raise ApiError(400, f'unknown JSON patch operation {kind!r}')
    return result


_REQUIREMENT = re.compile(
    r'^\s*(?P<neg>!)?\s*(?P<key>[A-Za-z0-9./_-]+)\s*'
    r'(?:(?P<op>==|=|!=)\s*(?P<value>[A-Za-z0-9._-]*)'
    r'|\s(?P<setop>in|notin)\s*\((?P<values>[^)]*)\))?\s*$'
)


def _split(selector: str) -> list[str]:
    parts, depth, current = [], 0, ''
    for ch in selector:
        depth += {'(': 1, ')': -1}.get(ch, 0)
        if ch == ',' and depth == 0:
            parts.append(current)
            current = ''
        else:
            current += ch
    parts.append(current)
    return [p for p in parts if p.strip()]


def label_selector_matches(*, selector: str, labels: dict[str, str]) -> bool:
    for requirement in _split(selector):
        m = _REQUIREMENT.match(requirement)
        if m is None or (m['neg'] and (m['op'] or m['setop'])):
            raise ApiError(400, f'unable to parse requirement {requirement!r}')
        key = m['key']
        if m['neg']:
            ok = key not in labels
        elif m['op'] in ('=', '=='):
            ok = labels.get(key) == m['value']
        elif m['op'] == '!=':
            ok = labels.get(key) != m['value']
        elif m['setop']:
            values = {v.strip() for v in m['values'].split(',')}
            if values == {''}:
                raise ApiError(400, f'{requirement.strip()!r}: the set of values is empty')
            ok = labels.get(key) in values if m['setop'] == 'in' else labels.get(key) not in values
        else:
            ok = key in labels
        if not ok:
            return False
    return True


_REFERENCE_FIELDS = (
    'apiVersion',
    'fieldPath',
    'kind',
    'name',
    'namespace',
    'resourceVersion',
    'uid',
)
# Field selector → path in the object, per (apiVersion, kind) with fields beyond metadata's.
_SELECTABLE: dict[tuple[str, str], dict[str, tuple[str, ...]]] = {
    ('v1', 'Event'): {
        **{f'involvedObject.{f}': ('involvedObject', f) for f in _REFERENCE_FIELDS},
        'reason': ('reason',),
        'reportingComponent': ('reportingComponent',),
        'source': ('source', 'component'),
        'type': ('type',),
    },
    ('events.k8s.io/v1', 'Event'): {
        **{f'regarding.{f}': ('regarding', f) for f in _REFERENCE_FIELDS},
        'reason': ('reason',),
        'reportingController': ('reportingController',),
        'type': ('type',),
    },
}


def field_selector_matches(*, selector: str, obj: dict[str, Any]) -> bool:
    """Whether `obj` has the fields `selector` asks for; which fields can be asked for depends
    on its apiVersion and kind (pass just those two to check a selector before any object)."""
    meta = obj.get('metadata', {})
    fields = {
        'metadata.name': meta.get('name', ''),
        'metadata.namespace': meta.get('namespace', ''),
    }
    for field, path in _SELECTABLE.get(
        (obj.get('apiVersion', ''), obj.get('kind', '')), {}
    ).items():
        value: Any = obj
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        fields[field] = '' if value is None else str(value)
    for requirement in _split(selector):
        m = re.match(r'^\s*([A-Za-z.]+)\s*(==|=|!=)\s*(\S*)\s*$', requirement)
        if m is None or m[1] not in fields:
            raise ApiError(400, f'field selector {requirement!r} is not supported')
        equal = fields[m[1]] == m[3]
        if equal != (m[2] != '!='):
            return False
    return True
