"""Typed models of Kaito's LLMAutoScaler custom resource (kaito.sh/v1alpha1, short name `llmas`).

Why: `llmscaler run` serves LLMAutoScaler objects (Kaito's proposal: kaito-project/kaito,
docs/proposals/20250602-auto-scaler-for-inference-workloads.md) next to VariantAutoscalings. The CRD
YAML in deploy/base/crds/kaito.sh_llmautoscalers.yaml is the source of truth (it says why this group
and version); these pydantic models carry the same fields, defaults and validation, built of the
parts VariantAutoscaling's are (`kube.resource_model`: camelCase on the wire, strict types, unknown
spec and status fields refused), so an object the API server accepts parses here.
tests/unit/kube/test_llmautoscaler.py keeps the two in sync.

Defaults (the proposal's "if unset"): minReplicas 1; a metric's source `http`, port "5000",
`/metrics`, `vllm:num_requests_waiting`; scale-up step 1, cooldown 600 s, window 30 s; scale-down
step 1, cooldown 1800 s, window 300 s; a cron policy's time zone Etc/UTC.

Validation beyond the field types: minReplicas >= 1 and <= maxReplicas; a threshold's low <= high;
realtime or cron (or both) set; at least one metric and one policy; policy names unique. Stricter
than the API server (which cannot check them): a port above 65535, a schedule that is not a cron
expression and a time zone that is not an IANA name are refused (`config.cron`), and so are two
metrics read from the same source (their histories would mix).

What it computes: `parse_llmautoscaler` turns a decoded object into an `LLMAutoScaler` or a
`resource_model.InvalidObject` (one line naming the path of the first bad field; never raises,
as `crd.parse_va`); `core_spec` gives the pure core's `AutoscalerSpec`; `Metric.key` names a
metric in the realtime scaler's history.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Literal

import pydantic
from lightkube.generic_resource import create_namespaced_resource
from pydantic_core import PydanticCustomError

from llmscaler.config.cron import DEFAULT_TIME_ZONE, Schedule, parse_schedule
from llmscaler.kube.resource_model import (
    INT32_FORMAT,
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
from llmscaler.policies.kaito.autoscaler import AutoscalerSpec, RealtimeSpec
from llmscaler.policies.kaito.cron import CronRule
from llmscaler.policies.kaito.realtime import ScalerRule

GROUP: Final = 'kaito.sh'
VERSION: Final = 'v1alpha1'
API_VERSION: Final = 'kaito.sh/v1alpha1'
KIND: Final = 'LLMAutoScaler'
PLURAL: Final = 'llmautoscalers'
LLMAutoScalerResource = create_namespaced_resource(GROUP, VERSION, KIND, PLURAL)
DEFAULT_METRIC: Final = 'vllm:num_requests_waiting'
DEFAULT_PORT: Final = '5000'
DEFAULT_PATH: Final = '/metrics'

# Condition types and reasons (HPA's condition types, which the proposal's status comment quotes).
CONDITION_ABLE_TO_SCALE: Final = 'AbleToScale'
CONDITION_SCALING_ACTIVE: Final = 'ScalingActive'
CONDITION_SCALING_LIMITED: Final = 'ScalingLimited'
REASON_SUCCEEDED_RESCALE: Final = 'SucceededRescale'
REASON_READY_FOR_NEW_SCALE: Final = 'ReadyForNewScale'
REASON_FAILED_GET_SCALE: Final = 'FailedGetScale'
REASON_FAILED_UPDATE_SCALE: Final = 'FailedUpdateScale'
REASON_INVALID_SPEC: Final = 'InvalidSpec'
REASON_VALID_METRIC_FOUND: Final = 'ValidMetricFound'
REASON_SCHEDULE_ONLY: Final = 'ScheduleOnly'
REASON_METRICS_MISSING: Final = 'MetricsMissing'
REASON_TOO_FEW_REPLICAS: Final = 'TooFewReplicas'
REASON_TOO_MANY_REPLICAS: Final = 'TooManyReplicas'
REASON_DESIRED_WITHIN_RANGE: Final = 'DesiredWithinRange'


def _int32(default: int | None, alias: str, ge: int) -> Any:
    if default is None:
        return pydantic.Field(alias=alias, ge=ge, json_schema_extra=INT32_FORMAT)
    return pydantic.Field(default=default, alias=alias, ge=ge, json_schema_extra=INT32_FORMAT)


class MetricSource(Wire):
    name: Str = pydantic.Field(default=DEFAULT_METRIC, min_length=1)
    protocol: Literal['http', 'https'] = 'http'
    port: Str = pydantic.Field(default=DEFAULT_PORT, pattern=r'^[1-9][0-9]{0,4}$')
    path: Str = pydantic.Field(default=DEFAULT_PATH, pattern=r'^/')

    @pydantic.field_validator('port')
    @classmethod
    def _port_range(cls, value: str) -> str:
        if int(value) > 65535:
            raise PydanticCustomError('port_range', 'must be a port number, 1 to 65535')
        return value


class MetricThreshold(Wire):
    high: Int32 = _int32(None, 'high', 0)
    low: Int32 = _int32(None, 'low', 0)

    @pydantic.model_validator(mode='after')
    def _low_not_above_high(self) -> MetricThreshold:
        if self.low > self.high:
            raise PydanticCustomError(
                'low_above_high',
                'must be <= high ({low} > {high})',
                {'field': 'low', 'low': self.low, 'high': self.high},
            )
        return self


class Metric(Wire):
    source: MetricSource = pydantic.Field(default_factory=MetricSource)
    threshold: MetricThreshold

    @property
    def key(self) -> str:
        """The metric's identity: its name and the endpoint it is read from."""
        s = self.source
        return f'{s.name}@{s.protocol}:{s.port}{s.path}'


class ScaleUpRule(Wire):
    cooldown_seconds: Int32 = _int32(600, 'cooldownSeconds', 0)
    stabilization_window_seconds: Int32 = _int32(30, 'stabilizationWindowSeconds', 0)
    scale_step: Int32 = _int32(1, 'scaleStep', 1)


class ScaleDownRule(Wire):
    cooldown_seconds: Int32 = _int32(1800, 'cooldownSeconds', 0)
    stabilization_window_seconds: Int32 = _int32(300, 'stabilizationWindowSeconds', 0)
    scale_step: Int32 = _int32(1, 'scaleStep', 1)


def _rule(rule: ScaleUpRule | ScaleDownRule) -> ScalerRule:
    return ScalerRule(
        step=rule.scale_step,
        cooldown_seconds=float(rule.cooldown_seconds),
        stabilization_window_seconds=float(rule.stabilization_window_seconds),
    )


class RealtimeScaler(Wire):
    metrics: tuple[Metric, ...] = pydantic.Field(min_length=1)
    scale_up_rule: ScaleUpRule = pydantic.Field(default_factory=ScaleUpRule, alias='scaleUpRule')
    scale_down_rule: ScaleDownRule = pydantic.Field(
        default_factory=ScaleDownRule, alias='scaleDownRule'
    )

    @pydantic.field_validator('metrics')
    @classmethod
    def _distinct(cls, value: tuple[Metric, ...]) -> tuple[Metric, ...]:
        seen: dict[str, int] = {}
        for index, metric in enumerate(value):
            if metric.key in seen:
                raise PydanticCustomError(
                    'duplicate_metric',
                    'metrics[{index}] reads the same metric as metrics[{first}] ({key})',
                    {'index': index, 'first': seen[metric.key], 'key': metric.key},
                )
            seen[metric.key] = index
        return value


class CronPolicy(Wire):
    name: Str = pydantic.Field(min_length=1)
    schedule: Str = pydantic.Field(min_length=1)
    target_replicas: Int32 = _int32(None, 'targetReplicas', 0)
    time_zone: Str = pydantic.Field(default=DEFAULT_TIME_ZONE, alias='timeZone')

    @pydantic.model_validator(mode='after')
    def _valid_schedule(self) -> CronPolicy:
        if isinstance(self.parsed, str):
            # The field the message is about extends the error's path (`parse_object`).
            field = 'timeZone' if self.parsed.startswith('time zone') else 'schedule'
            raise PydanticCustomError(
                'schedule', '{message}', {'message': self.parsed, 'field': field}
            )
        return self

    @property
    def parsed(self) -> Schedule | str:
        """The parsed schedule, or why it is refused."""
        found = parse_schedule(expression=self.schedule, time_zone=self.time_zone)
        return found if isinstance(found, Schedule) else found.message


class CronScaler(Wire):
    policies: tuple[CronPolicy, ...] = pydantic.Field(min_length=1)

    @pydantic.field_validator('policies')
    @classmethod
    def _one_per_name(cls, value: tuple[CronPolicy, ...]) -> tuple[CronPolicy, ...]:
        names = [p.name for p in value]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise PydanticCustomError(
                'duplicate_name', 'repeated name {names}', {'names': repeated}
            )
        return value


class Scaler(Wire):
    realtime: RealtimeScaler | None = None
    cron: CronScaler | None = None

    @pydantic.model_validator(mode='after')
    def _one_at_least(self) -> Scaler:
        if self.realtime is None and self.cron is None:
            raise PydanticCustomError('no_scaler', 'set realtime, cron or both')
        return self


class LLMAutoScalerSpec(Wire):
    scale_target_ref: ScaleTargetRef = pydantic.Field(alias='scaleTargetRef')
    min_replicas: Int32 = _int32(1, 'minReplicas', 1)
    max_replicas: Int32 = _int32(None, 'maxReplicas', 1)
    scaler: Scaler

    @pydantic.model_validator(mode='after')
    def _min_not_above_max(self) -> LLMAutoScalerSpec:
        if self.min_replicas > self.max_replicas:
            raise PydanticCustomError(
                'min_above_max',
                'must be <= maxReplicas ({min} > {max})',
                {'field': 'minReplicas', 'min': self.min_replicas, 'max': self.max_replicas},
            )
        return self


class LLMAutoScalerStatus(Wire):
    last_scale_time: Timestamp | None = pydantic.Field(default=None, alias='lastScaleTime')
    current_replicas: Int32 | None = pydantic.Field(
        default=None, alias='currentReplicas', ge=0, json_schema_extra=INT32_FORMAT
    )
    desired_replicas: Int32 | None = pydantic.Field(
        default=None, alias='desiredReplicas', ge=0, json_schema_extra=INT32_FORMAT
    )
    conditions: tuple[Condition, ...] = ()

    @pydantic.field_validator('conditions')
    @classmethod
    def _one_per_type(cls, value: tuple[Condition, ...]) -> tuple[Condition, ...]:
        return one_condition_per_type(value)


class LLMAutoScaler(Wire):
    api_version: Literal['kaito.sh/v1alpha1'] = pydantic.Field(
        default=API_VERSION, alias='apiVersion'
    )
    kind: Literal['LLMAutoScaler'] = KIND
    metadata: ObjectMeta = ObjectMeta()
    spec: LLMAutoScalerSpec
    status: LLMAutoScalerStatus | None = None

    def to_object(self) -> dict[str, Any]:
        """The object as the API server would store it (camelCase, absent fields left out)."""
        return self.model_dump(mode='json', by_alias=True, exclude_none=True)


def parse_llmautoscaler(obj: Mapping[str, Any]) -> LLMAutoScaler | InvalidObject:
    """Validate a decoded LLMAutoScaler; never raises on bad data (as `crd.parse_va`)."""
    return parse_object(model=LLMAutoScaler, obj=obj)


def core_spec(spec: LLMAutoScalerSpec) -> AutoscalerSpec:
    """The pure core's view of a validated spec."""
    realtime = spec.scaler.realtime
    cron = spec.scaler.cron
    policies: tuple[CronRule, ...] | None = None
    if cron is not None:
        found = []
        for policy in cron.policies:
            parsed = policy.parsed
            assert isinstance(parsed, Schedule)  # validated when the object parsed
            found.append(
                CronRule(name=policy.name, schedule=parsed, target_replicas=policy.target_replicas)
            )
        policies = tuple(found)
    return AutoscalerSpec(
        min_replicas=spec.min_replicas,
        max_replicas=spec.max_replicas,
        realtime=(
            RealtimeSpec(
                scale_up=_rule(realtime.scale_up_rule), scale_down=_rule(realtime.scale_down_rule)
            )
            if realtime is not None
            else None
        ),
        cron=policies,
    )
