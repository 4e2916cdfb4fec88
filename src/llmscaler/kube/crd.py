"""Typed models of the VariantAutoscaling custom resource (llmd.ai/v1alpha1, short name `va`).

Why: the controller reads VA objects written by users (and by WVA, whose v0.8.0 CRD this is,
reference/wva.md §9.1) and writes their status back. The CRD YAML in
deploy/base/crds/llmd.ai_variantautoscalings.yaml is the source of truth; these pydantic models
carry the same fields (camelCase on the wire, snake_case in Python), the same defaults
(minReplicas 1, maxReplicas 2, variantCost "10.0") and the same validation, so an object the API
server accepts parses here and vice versa. tests/unit/kube/test_crd.py keeps the two in sync.

What it computes: `parse_va` turns a decoded object into a `VariantAutoscaling` or an
`InvalidObject` value; `set_condition` updates a condition list the way apimachinery's
`meta.SetStatusCondition` does (lastTransitionTime moves only when the status flips);
`find_condition` looks a condition up by type.

What fails and how bad input is treated: nothing raises on bad objects. `parse_va` returns an
`InvalidObject` (name, namespace, a one-line message naming the path of the first bad field) for
a non-mapping, a wrong type (types are strict, as in the API server: the string "3" is not an
integer, 3.0 is not a string, true is not an integer), a value out of range (negative replicas,
more than int32), minReplicas > maxReplicas, a condition type listed twice, a timestamp that is
not RFC 3339, or a variantCost that does not match `^\\d+(\\.\\d+)?$`. Deliberately stricter
than the API server: variantCost digits must be ASCII (the server's RE2 `\\d` is ASCII,
pydantic's Rust regex `\\d` is Unicode) and the cost must be a finite float64 (a 400-digit cost
overflows, which WVA's ParseFloat also rejects). Unknown fields are rejected in spec and status
(the server prunes them, so only hand-written input has them) and ignored in metadata, which
carries many server-managed fields we do not model.
Nesting depth is no failure of its own: a value nested thousands deep in a modelled field is a
wrong type there, and its message shows the value bounded (three levels, 60 characters), so no
RecursionError escapes and no message grows with the input; depth in the metadata we ignore does
not matter. `set_condition` raises pydantic's ValidationError only for a programming error (a
`now` that is not an RFC 3339 timestamp, an empty reason).
"""

from __future__ import annotations

import math
import re
import reprlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Final, Literal

import pydantic
from pydantic.config import JsonDict
from pydantic_core import PydanticCustomError

API_VERSION: Final = 'llmd.ai/v1alpha1'
KIND: Final = 'VariantAutoscaling'
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
COST_PATTERN = r'^\d+(\.\d+)?$'
DEFAULT_MIN_REPLICAS = 1
DEFAULT_MAX_REPLICAS = 2
DEFAULT_VARIANT_COST = '10.0'

# Condition types and their reasons (wva.md §9.1).
CONDITION_TARGET_RESOLVED = 'TargetResolved'
REASON_TARGET_FOUND = 'TargetFound'
REASON_TARGET_NOT_FOUND = 'TargetNotFound'

CONDITION_METRICS_AVAILABLE = 'MetricsAvailable'
REASON_METRICS_FOUND = 'MetricsFound'
REASON_METRICS_MISSING = 'MetricsMissing'
REASON_METRICS_STALE = 'MetricsStale'
REASON_METRICS_INVALID = 'MetricsInvalid'
REASON_PROMETHEUS_ERROR = 'PrometheusError'

CONDITION_OPTIMIZATION_READY = 'OptimizationReady'
REASON_OPTIMIZATION_SUCCEEDED = 'OptimizationSucceeded'
REASON_OPTIMIZATION_FAILED = 'OptimizationFailed'
REASON_METRICS_UNAVAILABLE = 'MetricsUnavailable'
REASON_INVALID_CONFIGURATION = 'InvalidConfiguration'
REASON_SKIPPED_PROCESSING = 'SkippedProcessing'
REASON_SATURATION_ONLY_MODE = 'SaturationOnlyMode'
REASON_SATURATION_SAFETY_OVERRIDE = 'SaturationSafetyOverride'
REASON_SCALE_FROM_ZERO_MODE = 'ScaleFromZeroMode'
REASON_OPTIMIZATION_REFUSED = 'OptimizationRefused'

REASONS: Mapping[str, tuple[str, ...]] = {
    CONDITION_TARGET_RESOLVED: (REASON_TARGET_FOUND, REASON_TARGET_NOT_FOUND),
    CONDITION_METRICS_AVAILABLE: (
        REASON_METRICS_FOUND,
        REASON_METRICS_MISSING,
        REASON_METRICS_STALE,
        REASON_METRICS_INVALID,
        REASON_PROMETHEUS_ERROR,
    ),
    CONDITION_OPTIMIZATION_READY: (
        REASON_OPTIMIZATION_SUCCEEDED,
        REASON_OPTIMIZATION_FAILED,
        REASON_METRICS_UNAVAILABLE,
        REASON_INVALID_CONFIGURATION,
        REASON_SKIPPED_PROCESSING,
        REASON_SATURATION_ONLY_MODE,
        REASON_SATURATION_SAFETY_OVERRIDE,
        REASON_SCALE_FROM_ZERO_MODE,
        REASON_OPTIMIZATION_REFUSED,
    ),
}

ConditionStatus = Literal['True', 'False', 'Unknown']

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


def _check_cost(value: str) -> str:
    # The Rust regex behind `pattern` takes any Unicode digit for \d; the API server does not.
    if not value.isascii():
        raise PydanticCustomError('cost_ascii', 'variantCost must use ASCII digits')
    if not math.isfinite(float(value)):
        raise PydanticCustomError('cost_overflow', 'variantCost overflows a float64')
    return value


_Str = Annotated[str, pydantic.Strict()]
_Bool = Annotated[bool, pydantic.Strict()]
_Int32 = Annotated[int, pydantic.Strict(), pydantic.Field(le=INT32_MAX)]
_Timestamp = Annotated[
    str,
    pydantic.Strict(),
    pydantic.AfterValidator(_check_timestamp),
    pydantic.WithJsonSchema({'type': 'string', 'format': 'date-time'}),
]
_INT32: JsonDict = {'format': 'int32'}
_INT64: JsonDict = {'format': 'int64'}


class _Wire(pydantic.BaseModel):
    """camelCase on the wire, snake_case (or the alias) accepted when constructing in code."""

    model_config = pydantic.ConfigDict(
        extra='forbid',
        frozen=True,
        validate_by_name=True,
        validate_by_alias=True,
        protected_namespaces=(),
    )


class ObjectMeta(_Wire):
    """The part of metav1.ObjectMeta the controller uses; the rest is ignored."""

    model_config = pydantic.ConfigDict(extra='ignore')

    name: _Str | None = None
    namespace: _Str | None = None
    uid: _Str | None = None
    resource_version: _Str | None = pydantic.Field(default=None, alias='resourceVersion')
    generation: Annotated[int, pydantic.Strict()] | None = pydantic.Field(default=None, ge=0)
    labels: dict[_Str, _Str] | None = None
    annotations: dict[_Str, _Str] | None = None


class ScaleTargetRef(_Wire):
    """The scaled workload: Deployment or StatefulSet (apps/v1), or LeaderWorkerSet."""

    api_version: _Str | None = pydantic.Field(default=None, alias='apiVersion')
    kind: _Str
    name: _Str


class VariantAutoscalingSpec(_Wire):
    scale_target_ref: ScaleTargetRef = pydantic.Field(alias='scaleTargetRef')
    model_id: _Str = pydantic.Field(alias='modelID', min_length=1)
    min_replicas: _Int32 = pydantic.Field(
        default=DEFAULT_MIN_REPLICAS, alias='minReplicas', ge=0, json_schema_extra=_INT32
    )
    max_replicas: _Int32 = pydantic.Field(
        default=DEFAULT_MAX_REPLICAS, alias='maxReplicas', ge=1, json_schema_extra=_INT32
    )
    variant_cost: Annotated[_Str, pydantic.AfterValidator(_check_cost)] = pydantic.Field(
        default=DEFAULT_VARIANT_COST, alias='variantCost', pattern=COST_PATTERN
    )

    @pydantic.model_validator(mode='after')
    def _min_not_above_max(self) -> VariantAutoscalingSpec:
        # Same rule as the CRD's CEL validation; `field` extends the error path for parse_va.
        if self.min_replicas > self.max_replicas:
            raise PydanticCustomError(
                'min_above_max',
                'must be <= maxReplicas ({min} > {max})',
                {'field': 'minReplicas', 'min': self.min_replicas, 'max': self.max_replicas},
            )
        return self

    @property
    def cost(self) -> float:
        """variantCost as a number (finite and >= 0 by validation)."""
        return float(self.variant_cost)


class DesiredOptimizedAlloc(_Wire):
    last_run_time: _Timestamp | None = pydantic.Field(default=None, alias='lastRunTime')
    accelerator: _Str | None = None  # deprecated in WVA; kept so that old objects load
    num_replicas: _Int32 | None = pydantic.Field(
        default=None, alias='numReplicas', ge=0, json_schema_extra=_INT32
    )


class CurrentAlloc(_Wire):
    """What the controller last observed of the scale target (for `kubectl get va`)."""

    accelerator: _Str | None = None
    num_replicas: _Int32 | None = pydantic.Field(
        default=None, alias='numReplicas', ge=0, json_schema_extra=_INT32
    )
    ready_replicas: _Int32 | None = pydantic.Field(
        default=None, alias='readyReplicas', ge=0, json_schema_extra=_INT32
    )


class Actuation(_Wire):
    applied: _Bool


class Condition(_Wire):
    """metav1.Condition."""

    type: _Str = pydantic.Field(max_length=316, pattern=CONDITION_TYPE_PATTERN)
    status: ConditionStatus
    observed_generation: Annotated[int, pydantic.Strict()] | None = pydantic.Field(
        default=None,
        alias='observedGeneration',
        ge=0,
        le=INT64_MAX,
        json_schema_extra=_INT64,
    )
    last_transition_time: _Timestamp = pydantic.Field(alias='lastTransitionTime')
    reason: _Str = pydantic.Field(min_length=1, max_length=1024, pattern=CONDITION_REASON_PATTERN)
    message: _Str = pydantic.Field(max_length=32768)


def one_condition_per_type(value: tuple[Condition, ...]) -> tuple[Condition, ...]:
    """`conditions` as the CRDs' listType map keyed by type allows: the API server rejects a
    repeated type, and so does this (for a status model's field validator)."""
    types = [c.type for c in value]
    repeated = sorted({t for t in types if types.count(t) > 1})
    if repeated:
        raise PydanticCustomError('duplicate_type', 'repeated type {types}', {'types': repeated})
    return value


class Status(_Wire):
    desired_optimized_alloc: DesiredOptimizedAlloc | None = pydantic.Field(
        default=None, alias='desiredOptimizedAlloc'
    )
    current_alloc: CurrentAlloc | None = pydantic.Field(default=None, alias='currentAlloc')
    actuation: Actuation | None = None
    conditions: tuple[Condition, ...] = ()

    @pydantic.field_validator('conditions')
    @classmethod
    def _one_per_type(cls, value: tuple[Condition, ...]) -> tuple[Condition, ...]:
        return one_condition_per_type(value)


class VariantAutoscaling(_Wire):
    api_version: Literal['llmd.ai/v1alpha1'] = pydantic.Field(
        default=API_VERSION, alias='apiVersion'
    )
    kind: Literal['VariantAutoscaling'] = KIND
    metadata: ObjectMeta = ObjectMeta()
    spec: VariantAutoscalingSpec
    status: Status | None = None

    def to_object(self) -> dict[str, Any]:
        """The object as the API server would store it (camelCase, absent fields left out)."""
        return self.model_dump(mode='json', by_alias=True, exclude_none=True)


@dataclass(frozen=True, slots=True)
class InvalidObject:
    """A VA object that does not validate: the reason as a value, for events and logs."""

    name: str
    namespace: str
    message: str


def parse_va(obj: Mapping[str, Any]) -> VariantAutoscaling | InvalidObject:
    """Validate a decoded VA object; never raises on bad data, however deeply it is nested."""
    name, namespace = _identity(obj)
    if not isinstance(obj, Mapping):
        return InvalidObject(name, namespace, f'<root>: expected an object, got {_kind(obj)}')
    try:
        return VariantAutoscaling.model_validate(dict(obj))
    except pydantic.ValidationError as exc:
        return InvalidObject(name, namespace, _one_line(exc))
    except RecursionError:
        # Validation itself only descends as deep as the models go; this is the last resort.
        return InvalidObject(name, namespace, '<root>: nested too deeply')


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
