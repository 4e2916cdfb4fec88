"""What every typed model of a custom resource is built of: the API server's types and rules.

Why: the controller reads two custom resources, VariantAutoscaling (`kube.crd`) and Kaito's
LLMAutoScaler (`kube.llmautoscaler`), and both must accept what the API server accepts and
refuse what it refuses, in the same way. What they share is here once: strict field types (a
string, a boolean, an int32, an RFC 3339 timestamp, as the server checks them), the wire
convention (camelCase on the wire, snake_case in Python, unknown fields refused), the parts of
apimachinery both carry (`ObjectMeta`, the scale target reference, `metav1.Condition` and the
way apimachinery sets one), and how a decoded object becomes a model or an `InvalidObject`.

What it computes: `parse_object` validates a decoded object into a model, or an `InvalidObject`
(name, namespace, one line naming the path of the first bad field); `set_condition` updates a
condition list the way apimachinery's `meta.SetStatusCondition` does (lastTransitionTime moves
only when the status flips); `find_condition` looks a condition up by type.

What fails and how bad input is treated: nothing raises on bad objects. Types are strict, as in
the API server: the string "3" is not an integer, 3.0 is not a string, true is not an integer;
an int32 above 2^31 − 1, a timestamp that is not RFC 3339 (its digits ASCII) and a condition
type listed twice are refused. Nesting depth is no failure of its own: a value nested thousands
deep in a modelled field is a wrong type there, and its message shows the value bounded (three
levels, 60 characters), so no RecursionError escapes and no message grows with the input; depth
in the metadata we ignore does not matter. `set_condition` raises pydantic's ValidationError only
for a programming error (a `now` that is not an RFC 3339 timestamp, an empty reason).
"""

from __future__ import annotations

import re
import reprlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Final, Literal, TypeVar

import pydantic
from pydantic.config import JsonDict
from pydantic_core import PydanticCustomError

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1

# metav1.Condition's own validation, as controller-gen emits it for every CRD.
CONDITION_TYPE_PATTERN = (
    r'^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?'
    r'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$'
)
CONDITION_REASON_PATTERN = r'^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$'
_RFC3339 = re.compile(
    r'\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})', re.ASCII
)


def _check_timestamp(value: str) -> str:
    if not _RFC3339.fullmatch(value):
        raise PydanticCustomError('date_time', 'expected an RFC 3339 date-time')
    return value


Str = Annotated[str, pydantic.Strict()]
Bool = Annotated[bool, pydantic.Strict()]
Int32 = Annotated[int, pydantic.Strict(), pydantic.Field(le=INT32_MAX)]
Timestamp = Annotated[
    str,
    pydantic.Strict(),
    pydantic.AfterValidator(_check_timestamp),
    pydantic.WithJsonSchema({'type': 'string', 'format': 'date-time'}),
]
INT32_FORMAT: JsonDict = {'format': 'int32'}
"""`json_schema_extra` of an int32 field: the CRD says `format: int32`."""
INT64_FORMAT: JsonDict = {'format': 'int64'}
"""`json_schema_extra` of an int64 field: the CRD says `format: int64`."""


class Wire(pydantic.BaseModel):
    """camelCase on the wire, snake_case (or the alias) accepted when constructing in code."""

    model_config = pydantic.ConfigDict(
        extra='forbid',
        frozen=True,
        validate_by_name=True,
        validate_by_alias=True,
        protected_namespaces=(),
    )


class ObjectMeta(Wire):
    """The part of metav1.ObjectMeta the controller uses; the rest is ignored."""

    model_config = pydantic.ConfigDict(extra='ignore')

    name: Str | None = None
    namespace: Str | None = None
    uid: Str | None = None
    resource_version: Str | None = pydantic.Field(default=None, alias='resourceVersion')
    generation: Annotated[int, pydantic.Strict()] | None = pydantic.Field(default=None, ge=0)
    labels: dict[Str, Str] | None = None
    annotations: dict[Str, Str] | None = None


class ScaleTargetRef(Wire):
    """The scaled workload: Deployment or StatefulSet (apps/v1), or LeaderWorkerSet."""

    api_version: Str | None = pydantic.Field(default=None, alias='apiVersion')
    kind: Str
    name: Str


ConditionStatus = Literal['True', 'False', 'Unknown']


class Condition(Wire):
    """metav1.Condition."""

    type: Str = pydantic.Field(max_length=316, pattern=CONDITION_TYPE_PATTERN)
    status: ConditionStatus
    observed_generation: Annotated[int, pydantic.Strict()] | None = pydantic.Field(
        default=None,
        alias='observedGeneration',
        ge=0,
        le=INT64_MAX,
        json_schema_extra=INT64_FORMAT,
    )
    last_transition_time: Timestamp = pydantic.Field(alias='lastTransitionTime')
    reason: Str = pydantic.Field(min_length=1, max_length=1024, pattern=CONDITION_REASON_PATTERN)
    message: Str = pydantic.Field(max_length=32768)


def one_condition_per_type(value: tuple[Condition, ...]) -> tuple[Condition, ...]:
    """`conditions` as the CRDs' listType map keyed by type allows: the API server rejects a
    repeated type, and so does this (for a status model's field validator)."""
    types = [c.type for c in value]
    repeated = sorted({t for t in types if types.count(t) > 1})
    if repeated:
        raise PydanticCustomError('duplicate_type', 'repeated type {types}', {'types': repeated})
    return value


def find_condition(*, conditions: Sequence[Condition], type: str) -> Condition | None:
    """The first condition of that type, as apimachinery's FindStatusCondition."""
    return next((c for c in conditions if c.type == type), None)


def set_condition(
    *,
    conditions: Sequence[Condition],
    type: str,
    status: ConditionStatus,
    reason: str,
    message: str,
    observed_generation: int | None,
    now: str,
) -> tuple[Condition, ...]:
    """The list with the condition set, as apimachinery's meta.SetStatusCondition.

    A new type is appended with lastTransitionTime `now`; an existing one is updated in place,
    and its lastTransitionTime becomes `now` only when the status changes, so that it says how
    long the condition has held. Other conditions and their order are kept.
    """
    existing = find_condition(conditions=conditions, type=type)
    changed_at = now if existing is None or existing.status != status else None
    new = Condition(
        type=type,
        status=status,
        observed_generation=observed_generation,
        last_transition_time=changed_at or (existing.last_transition_time if existing else now),
        reason=reason,
        message=message,
    )
    if existing is None:
        return (*conditions, new)
    return tuple(new if c is existing else c for c in conditions)


@dataclass(frozen=True, slots=True)
class InvalidObject:
    """An object that does not validate: the reason as a value, for events and logs."""

    name: str
    namespace: str
    message: str


_Model = TypeVar('_Model', bound=Wire)


def parse_object(*, model: type[_Model], obj: Mapping[str, Any]) -> _Model | InvalidObject:
    """Validate a decoded object as `model`; never raises on bad data, however deeply nested.

    A model's validator may name the field its error is about in the error's context (`field`):
    the message's path then ends with it."""
    name, namespace = _identity(obj)
    if not isinstance(obj, Mapping):
        return InvalidObject(name, namespace, f'<root>: expected an object, got {_kind(obj)}')
    try:
        return model.model_validate(dict(obj))
    except pydantic.ValidationError as exc:
        return InvalidObject(name, namespace, _one_line(exc))
    except RecursionError:
        # Validation itself only descends as deep as the models go; this is the last resort.
        return InvalidObject(name, namespace, '<root>: nested too deeply')


def _identity(obj: object) -> tuple[str, str]:
    meta = obj.get('metadata') if isinstance(obj, Mapping) else None
    if not isinstance(meta, Mapping):
        return '', ''
    name, namespace = meta.get('name'), meta.get('namespace')
    return (
        name if isinstance(name, str) else '',
        namespace if isinstance(namespace, str) else '',
    )


def _kind(value: object) -> str:
    return 'null' if value is None else type(value).__name__


def _one_line(exc: pydantic.ValidationError) -> str:
    errors = exc.errors(include_url=False)
    first = errors[0]
    loc = [str(part) for part in first['loc']]
    extra = (first.get('ctx') or {}).get('field')
    if isinstance(extra, str):
        loc.append(extra)
    path = '.'.join(loc) or '<root>'
    shown = _show(first.get('input'))
    more = f' (and {len(errors) - 1} more)' if len(errors) > 1 else ''
    message = f'{path}: {first["msg"]} (got {shown}){more}'
    return ' '.join(message.split())


_SHOWN: Final = 60


def _bounded_repr() -> reprlib.Repr:
    shower = reprlib.Repr()
    # A bad value can be nested thousands deep or megabytes long: builtin repr() of it would
    # raise RecursionError or take the time and memory of the whole value. Three levels and a
    # few items of each are enough to recognise it in a one-line message.
    shower.maxlevel = 3
    shower.maxdict = shower.maxlist = shower.maxtuple = shower.maxset = 4
    shower.maxstring = shower.maxother = shower.maxlong = _SHOWN
    return shower


_REPR: Final = _bounded_repr()


def _show(value: object) -> str:
    """A short repr of a bad input value, bounded in time and size whatever the value."""
    try:
        shown = _REPR.repr(value)
    except Exception:  # a value whose repr fails (an int past the digit limit, ...): its type
        shown = f'<{_kind(value)}>'
    return shown if len(shown) <= _SHOWN else shown[: _SHOWN - 3] + '...'
