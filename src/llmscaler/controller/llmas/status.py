"""The status of an LLMAutoScaler: its conditions, and the write of the whole status.

Why: the status is what `kubectl get llmas` shows (Current, Desired, LastScale, Able) and what
the controller keeps across restarts (`lastScaleTime`, from which cooldowns count). The loop
(`controller.llmas.loop`) decides what it says; this module builds the conditions the way
apimachinery does (`kube.resource_model.set_condition`: lastTransitionTime moves only when the
status flips) and writes the status when, and only when, it differs from the stored one.

Conditions (HPA's types, which the status comment of Kaito's LLMAutoScaler proposal quotes):
- AbleToScale: True `ReadyForNewScale` / `SucceededRescale`; False `InvalidSpec` (the object does
  not validate), `FailedGetScale` (the target cannot be read, is not supported or is scaled by
  another autoscaler), `FailedUpdateScale` (the write failed);
- ScalingActive: True `ValidMetricFound` (every pod reported every metric) or `ScheduleOnly`
  (cron only); False `MetricsMissing` (the pods and metrics that were not read);
- ScalingLimited: True `TooManyReplicas` / `TooFewReplicas` when the answer was clamped, False
  `DesiredWithinRange` otherwise.
Messages hold no figure that moves every cycle, so a steady autoscaler's status is not rewritten.

What fails: a stored status that does not validate (hand-edited) is rebuilt from nothing; a write
that fails is logged and tried again by the next cycle. Nothing raises.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import pydantic
from lightkube import AsyncClient
from lightkube.types import PatchType

from llmscaler.clock import rfc3339
from llmscaler.controller.cluster.pods import as_mapping
from llmscaler.kube import llmautoscaler as llmas
from llmscaler.kube import resource_model
from llmscaler.kube.client import ObjectRef, describe_error
from llmscaler.policies.kaito.autoscaler import AutoscalerDecision

log = logging.getLogger(__name__)

Conditions = tuple[resource_model.Condition, ...]
Verdict = tuple[str, str, str]
"""(status, reason, message) of one condition."""
_MESSAGE_MAX = 32768


def status_of(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return as_mapping(obj.get('status'))


def conditions_of(obj: Mapping[str, Any]) -> Conditions:
    """The stored conditions; none when the stored status does not validate (rebuilt)."""
    try:
        return llmas.LLMAutoScalerStatus.model_validate(dict(status_of(obj))).conditions
    except (pydantic.ValidationError, RecursionError):
        return ()


def with_condition(old: Conditions, type: str, verdict: Verdict, *, now: float) -> Conditions:
    status, reason, message = verdict
    assert status in ('True', 'False', 'Unknown')
    return resource_model.set_condition(
        conditions=old,
        type=type,
        status=status,  # type: ignore[arg-type]
        reason=reason,
        message=message[:_MESSAGE_MAX],
        observed_generation=None,
        now=rfc3339(wall=now),
    )


def limited(spec: llmas.LLMAutoScalerSpec, decision: AutoscalerDecision) -> Verdict:
    """The ScalingLimited verdict of a decision."""
    if not decision.limited:
        return 'False', llmas.REASON_DESIRED_WITHIN_RANGE, 'the desired count is within the bounds'
    if decision.limited == 'max':
        return (
            'True',
            llmas.REASON_TOO_MANY_REPLICAS,
            f'the desired count was capped at maxReplicas {spec.max_replicas}',
        )
    return (
        'True',
        llmas.REASON_TOO_FEW_REPLICAS,
        f'the desired count was raised to minReplicas {spec.min_replicas}',
    )


async def write_status(
    *,
    client: AsyncClient,
    obj: Mapping[str, Any],
    ref: ObjectRef,
    fields: Mapping[str, Any],
    conditions: Conditions,
) -> None:
    """A merge patch of `fields` and `conditions` on `/status`, when they differ from `obj`'s."""
    status = {
        **fields,
        'conditions': [
            c.model_dump(mode='json', by_alias=True, exclude_none=True) for c in conditions
        ],
    }
    current = dict(status_of(obj))
    if all(current.get(k) == v for k, v in status.items()):
        return
    try:
        await client.patch(
            llmas.LLMAutoScalerResource.Status,
            ref.name,
            {'status': status},
            namespace=ref.namespace,
            patch_type=PatchType.MERGE,
        )
    except Exception as exc:  # the next cycle writes it again
        log.warning('LLMAutoScaler %s: status not written: %s', ref.key, describe_error(exc))
