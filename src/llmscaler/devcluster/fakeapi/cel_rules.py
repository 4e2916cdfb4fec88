"""The CEL rules of a CRD's schema (`x-kubernetes-validations`), evaluated by the fake API on
client writes as kube-apiserver evaluates them.

Why: the project's CRDs state in CEL what their OpenAPI keywords cannot (minReplicas ≤
maxReplicas, a scaler set, a threshold's low ≤ high). The fake stored such an object as sent, so
a client that wrote one passed on the fake alone; the real server refuses it. The rules are
evaluated with a CEL implementation (the `cel` module of the common-expression-language
package), as apiextensions-apiserver does (k8s.io/apiextensions-apiserver
pkg/apiserver/schema/cel/validation.go, v0.34):

- each rule runs on its node of the object (after defaulting), `self` the node's value;
- a rule naming `oldSelf` (a transition rule) runs only on an update where the node has an old
  value: an object's property, or the item of a list of the same index is not one (kube-apiserver
  correlates the items of `x-kubernetes-list-type: map` and `set` lists only, which the
  project's CRDs do not use);
- a failing rule is an error at the node's path (joined with the rule's `fieldPath`), worded by
  its `messageExpression` (when it evaluates to a non-empty string), else its `message`, else
  `failed rule: <rule>`, of the kind its `reason` names (Invalid by default);
- ratcheting: a failing rule that does not name `oldSelf`, on a node whose value an update left
  as it was (or, for the item of a list, whose list it left as it was), is let through;
- a rule that cannot be evaluated (a key missing from `self`) is an error naming the rule.

Not done: `optionalOldSelf`, the cost budget, and the CEL libraries kube-apiserver adds (lists,
regex, quantity, url, ip, format). A rule with `optionalOldSelf`, or one that does not compile,
is a `ValueError` naming the rule when the schema is read (`compile_all`); a rule calling a
function only kube-apiserver's libraries define fails when it runs, as an error naming the rule.
The project's CRDs use none of them.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import cel

from llmscaler.devcluster.fakeapi.field_errors import FieldError, FieldType

ROOT = '<nil>'
"""The path of the object's root, as kube-apiserver prints it."""
_MISSING = object()
_REASONS = {
    'FieldValueForbidden': FieldType.FORBIDDEN,
    'FieldValueRequired': FieldType.REQUIRED,
    'FieldValueDuplicate': FieldType.DUPLICATE,
    'FieldValueInvalid': FieldType.INVALID,
}


@dataclass(frozen=True, slots=True)
class _Rule:
    text: str
    program: cel.Program
    message: str
    message_expression: cel.Program | None
    reason: FieldType
    field_path: str
    uses_old_self: bool

    @property
    def shown(self) -> str:
        """How kube-apiserver names the rule in an error: its message, else its text."""
        return self.message or self.text


@functools.cache
def _compile(text: str) -> cel.Program:
    try:
        return cel.compile(text)
    except ValueError as err:
        raise ValueError(f'CEL rule {text!r} does not compile: {err}') from err


def _rules(schema: Mapping[str, Any]) -> list[_Rule]:
    found: list[_Rule] = []
    for spec in schema.get('x-kubernetes-validations') or ():
        text = str(spec['rule']).strip()
        if spec.get('optionalOldSelf'):
            raise ValueError(f'CEL rule {text!r}: optionalOldSelf is not evaluated by the fake')
        program = _compile(text)
        expression = spec.get('messageExpression')
        reason = str(spec.get('reason') or 'FieldValueInvalid')
        if reason not in _REASONS:
            raise ValueError(f'CEL rule {text!r}: unknown reason {reason!r}')
        found.append(
            _Rule(
                text=text,
                program=program,
                message=str(spec.get('message') or '').strip(),
                message_expression=_compile(str(expression)) if expression else None,
                reason=_REASONS[reason],
                field_path=str(spec.get('fieldPath') or '').lstrip('.'),
                uses_old_self='oldSelf' in program.variables(),
            )
        )
    return found


def compile_all(*, schema: Mapping[str, Any]) -> None:
    """Compile every rule of `schema`, so that a rule the fake cannot evaluate fails when the
    schema is read (`ValueError`), not at the first write it would judge."""
    _rules(schema)
    for sub in (schema.get('properties') or {}).values():
        compile_all(schema=sub)
    for key in ('items', 'additionalProperties'):
        if isinstance(schema.get(key), dict):
            compile_all(schema=schema[key])


def check(*, schema: Mapping[str, Any], obj: Any, old: Any = None) -> list[FieldError]:
    """The errors of every rule of `schema` on `obj` (an update's stored object: `old`)."""
    errors: list[FieldError] = []
    has_old = old is not None
    _walk(
        obj,
        schema,
        path='',
        old=old if has_old else _MISSING,
        unchanged=has_old and obj == old,
        errors=errors,
    )
    return errors


def _walk(
    value: Any,
    schema: Mapping[str, Any],
    *,
    path: str,
    old: Any,
    unchanged: bool,
    errors: list[FieldError],
) -> None:
    for rule in _rules(schema):
        error = _evaluate(rule, value, schema=schema, path=path, old=old)
        if error is not None and not (unchanged and not rule.uses_old_self):
            errors.append(error)
    if isinstance(value, dict):
        properties: Mapping[str, Any] = schema.get('properties') or {}
        extra = schema.get('additionalProperties')
        for key in value:
            sub = properties.get(key)
            child_path = f'{path}.{key}' if path else key
            if sub is None and isinstance(extra, dict):
                sub, child_path = extra, f'{path}[{key}]'
            if sub is None:
                continue
            before = old.get(key, _MISSING) if isinstance(old, dict) else _MISSING
            same = before is not _MISSING and value[key] == before
            _walk(value[key], sub, path=child_path, old=before, unchanged=same, errors=errors)
    elif isinstance(value, list) and isinstance(schema.get('items'), dict):
        for i, item in enumerate(value):
            # A list's items are not correlated with the old list's: an item is unchanged
            # when its whole list is.
            _walk(
                item,
                schema['items'],
                path=f'{path}[{i}]',
                old=_MISSING,
                unchanged=unchanged,
                errors=errors,
            )


def _evaluate(
    rule: _Rule, value: Any, *, schema: Mapping[str, Any], path: str, old: Any
) -> FieldError | None:
    if rule.uses_old_self and old is _MISSING:
        return None
    context = {'self': value} | ({'oldSelf': old} if rule.uses_old_self else {})
    shown_type = str(schema.get('type', ''))
    node = path or ROOT
    try:
        passed = rule.program.execute(context)
    except KeyError as err:
        detail = f'no such key: {err.args[0]} evaluating rule: {rule.shown}'
        return FieldError(FieldType.INVALID, node, shown_type, detail)
    except (ValueError, TypeError, RuntimeError) as err:
        return FieldError(
            FieldType.INVALID, node, shown_type, f'{err} evaluating rule: {rule.shown}'
        )
    if passed is True:
        return None
    field = _join(node, rule.field_path) if rule.field_path else node
    detail = _message(rule, context)
    if rule.reason in (FieldType.FORBIDDEN, FieldType.REQUIRED):
        return FieldError(rule.reason, field, None, detail)
    if rule.reason is FieldType.DUPLICATE:
        return FieldError(rule.reason, field, shown_type)  # a duplicate carries no message
    return FieldError(rule.reason, field, shown_type, detail)


def _message(rule: _Rule, context: Mapping[str, Any]) -> str:
    if rule.message_expression is not None:
        try:
            said = rule.message_expression.execute(dict(context))
        except (KeyError, ValueError, TypeError, RuntimeError):
            said = None
        if isinstance(said, str) and said.strip():
            return said.strip()
    return rule.message or f'failed rule: {rule.text}'


def _join(path: str, field_path: str) -> str:
    parts: Sequence[str] = re.findall(r'[^.]+', field_path)
    base = '' if path == ROOT else path
    return '.'.join([base, *parts]) if base else '.'.join(parts)
