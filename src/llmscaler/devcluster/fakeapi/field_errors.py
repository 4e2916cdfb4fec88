"""Field errors worded as kube-apiserver words them, and the 422 Invalid answer that lists them.

Why: an Invalid answer is read twice, by people in its `message` and by clients in its
`details.causes`; kubectl prints the causes (one line for one, a bulleted list for several), so a
fake answer with the right message but no causes printed differently from the real server's
("The request is invalid: ..." instead of "The VariantAutoscaling "x" is invalid: ..."). The
wording is apimachinery's (k8s.io/apimachinery pkg/util/validation/field/errors.go, and
pkg/api/errors `NewInvalid`, v0.34): `<field>: <Type>[: <value>][: <detail>]`, the value as Go
prints it (numbers and booleans bare, strings quoted, anything else as JSON), and the message
joining the distinct errors, in brackets when there are several.

What fails: nothing here raises; `invalid` builds the `ApiError` its caller raises.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from llmscaler.devcluster.fakeapi.semantics import ApiError


class FieldType(enum.Enum):
    """The kinds of field error (`field.ErrorType`): the cause's reason, and how it reads."""

    REQUIRED = ('FieldValueRequired', 'Required value')
    INVALID = ('FieldValueInvalid', 'Invalid value')
    TYPE_INVALID = ('FieldValueTypeInvalid', 'Invalid value')
    NOT_SUPPORTED = ('FieldValueNotSupported', 'Unsupported value')
    FORBIDDEN = ('FieldValueForbidden', 'Forbidden')
    DUPLICATE = ('FieldValueDuplicate', 'Duplicate value')
    TOO_LONG = ('FieldValueTooLong', 'Too long')
    TOO_MANY = ('FieldValueTooMany', 'Too many')

    @property
    def reason(self) -> str:
        return self.value[0]

    @property
    def words(self) -> str:
        return self.value[1]


_VALUELESS = (FieldType.REQUIRED, FieldType.FORBIDDEN, FieldType.TOO_LONG)
"""Types whose message shows no value."""
BLOCKING = frozenset(
    (
        FieldType.NOT_SUPPORTED,
        FieldType.REQUIRED,
        FieldType.TOO_LONG,
        FieldType.TOO_MANY,
        FieldType.TYPE_INVALID,
    )
)
"""Errors after which the CEL rules are not evaluated (apiextensions-apiserver's
`hasBlockingErr`, pkg/registry/customresource/strategy.go)."""


@dataclass(frozen=True, slots=True)
class FieldError:
    """One error: its type, the path of the field (`<nil>` for none), the value, the detail."""

    type: FieldType
    field: str
    value: Any = None
    detail: str = ''

    def body(self) -> str:
        """The error without its field, as a cause's message shows it."""
        words = self.type.words
        if self.type not in _VALUELESS:
            words = f'{words}: {_go_value(self.value)}'
        return f'{words}: {self.detail}' if self.detail else words

    def __str__(self) -> str:
        return f'{self.field}: {self.body()}'


def _go_value(value: Any) -> str:
    if isinstance(value, bool):
        return 'true' if value else 'false'
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e21:
        return str(int(value))  # Go prints a whole float64 without its point
    if isinstance(value, (int, float)):
        return str(value)
    # Go's %q and JSON quote alike for the printable text field errors carry.
    return json.dumps(value, separators=(',', ':'), ensure_ascii=False)


def invalid(*, kind: str, group: str, name: str, errors: Sequence[FieldError]) -> ApiError:
    """The 422 Invalid answer listing `errors`, with its `details` (kind, name, causes)."""
    distinct = list(dict.fromkeys(str(e) for e in errors))
    listed = distinct[0] if len(distinct) == 1 else f'[{", ".join(distinct)}]'
    qualified = f'{kind}.{group}' if group else kind
    details: dict[str, Any] = {
        'name': name,
        'kind': kind,
        'causes': [
            {'reason': e.type.reason, 'message': e.body(), 'field': e.field} for e in errors
        ],
    }
    if group:
        details['group'] = group
    return ApiError(422, f'{qualified} "{name}" is invalid: {listed}', details=details)
