"""Typed models of the VariantAutoscaling custom resource (llmd.ai/v1alpha1, short name `va`).

Why: the controller reads VA objects written by users (and by WVA, whose v0.8.0 CRD this is: llm-d
workload-variant-autoscaler v0.8.0, api/v1alpha1/variantautoscaling_types.go) and writes their
status back. The CRD YAML in deploy/base/crds/llmd.ai_variantautoscalings.yaml is the source of
truth; these pydantic models carry the same fields (camelCase on the wire, snake_case in Python),
the same defaults (minReplicas 1, maxReplicas 2, variantCost "10.0") and the same validation, so an
object the API server accepts parses here and vice versa. tests/unit/kube/test_crd.py keeps the two
in sync.

What it computes: `parse_va` turns a decoded object into a `VariantAutoscaling` or an
`InvalidObject` value (`kube.resource_model`, which holds the field types, `ObjectMeta` and
`Condition` this resource shares with LLMAutoScaler); the condition types and reasons a VA's
status carries (`REASONS`).

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
Nesting depth is no failure of its own (`resource_model.parse_object`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Annotated, Any, Final, Literal

import pydantic
from pydantic_core import PydanticCustomError

from llmscaler.kube.resource_model import (
    INT32_FORMAT,
    Bool,
    Condition,
    Int32,
    InvalidObject,
    ObjectMeta,
    ScaleTargetRef,
    Str,
    Timestamp,
    Wire,
    one_condition_per_type,
    parse_object,
)

API_VERSION: Final = 'llmd.ai/v1alpha1'
KIND: Final = 'VariantAutoscaling'
COST_PATTERN = r'^\d+(\.\d+)?$'
DEFAULT_MIN_REPLICAS = 1
DEFAULT_MAX_REPLICAS = 2
DEFAULT_VARIANT_COST = '10.0'

# Condition types and their reasons (WVA v0.8.0's).
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


def _check_cost(value: str) -> str:
    # The Rust regex behind `pattern` takes any Unicode digit for \d; the API server does not.
    if not value.isascii():
        raise PydanticCustomError('cost_ascii', 'variantCost must use ASCII digits')
    if not math.isfinite(float(value)):
        raise PydanticCustomError('cost_overflow', 'variantCost overflows a float64')
    return value


class VariantAutoscalingSpec(Wire):
    scale_target_ref: ScaleTargetRef = pydantic.Field(alias='scaleTargetRef')
    model_id: Str = pydantic.Field(alias='modelID', min_length=1)
    min_replicas: Int32 = pydantic.Field(
        default=DEFAULT_MIN_REPLICAS, alias='minReplicas', ge=0, json_schema_extra=INT32_FORMAT
    )
    max_replicas: Int32 = pydantic.Field(
        default=DEFAULT_MAX_REPLICAS, alias='maxReplicas', ge=1, json_schema_extra=INT32_FORMAT
    )
    variant_cost: Annotated[Str, pydantic.AfterValidator(_check_cost)] = pydantic.Field(
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


class DesiredOptimizedAlloc(Wire):
    last_run_time: Timestamp | None = pydantic.Field(default=None, alias='lastRunTime')
    accelerator: Str | None = None  # deprecated in WVA; kept so that old objects load
    num_replicas: Int32 | None = pydantic.Field(
        default=None, alias='numReplicas', ge=0, json_schema_extra=INT32_FORMAT
    )


class CurrentAlloc(Wire):
    """What the controller last observed of the scale target (for `kubectl get va`)."""

    accelerator: Str | None = None
    num_replicas: Int32 | None = pydantic.Field(
        default=None, alias='numReplicas', ge=0, json_schema_extra=INT32_FORMAT
    )
    ready_replicas: Int32 | None = pydantic.Field(
        default=None, alias='readyReplicas', ge=0, json_schema_extra=INT32_FORMAT
    )


class Actuation(Wire):
    applied: Bool


class Status(Wire):
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


class VariantAutoscaling(Wire):
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


def parse_va(obj: Mapping[str, Any]) -> VariantAutoscaling | InvalidObject:
    """Validate a decoded VA object; never raises on bad data, however deeply it is nested."""
    return parse_object(model=VariantAutoscaling, obj=obj)
