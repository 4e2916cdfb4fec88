"""Writing the status of a VariantAutoscaling: the desired count, actuation and conditions.

Why: the VA status is what a user (and `kubectl get va`) sees of the controller's work: the
replica count it wants, whether that was applied, and metav1.Condition-shaped conditions that say
why (`MetricsAvailable=False`, reason `MetricsStale`, ...). Conditions follow apimachinery's
`meta.SetStatusCondition` (via `crd.set_condition`): `lastTransitionTime` moves only when a
condition's status flips, so it tells how long the condition has held, and rewriting the same
facts every cycle changes nothing.

What it computes:

- `next_status` (pure): the next status from the current one. `numReplicas` takes `desired`
  (kept when None); `lastRunTime` becomes `now` when the cycle ran (kept otherwise); the
  deprecated `accelerator` is kept as found; `actuation.applied` takes `applied` (kept when
  None); each `ConditionUpdate` is set with `observedGeneration` = the object's generation, and
  conditions not mentioned are kept in place. Messages are cut to 32768 characters, the CRD's
  limit.
- `StatusWriter.update`: starts from the given object (the informer's cached copy; fetched when
  None), computes `next_status` at `clock.wall()`, and writes only when the status changed, with a
  merge patch on `/status` that carries the object's `metadata.resourceVersion`, so a write based
  on a stale copy is refused (409) instead of undoing a newer status. The patch never holds
  `spec`: the `/status` subresource is the only thing written. Keys that the stored status has
  and the new one lacks are sent as null, so the stored status ends up exactly the computed one.

What fails and how:

- A bad `ConditionUpdate` (a reason not matching `crd.CONDITION_REASON_PATTERN` or longer than
  1024, a type not matching `crd.CONDITION_TYPE_PATTERN`, a status other than True, False or
  Unknown, a type listed twice) or a `desired` outside [0, 2^31 − 1] is a programming error:
  ValueError, raised before any request.
- A current status that does not validate as `crd.Status` (hand-edited, or written by another
  tool) is logged and rebuilt from an empty status rather than blocking every later write. Only
  the status and metadata are read, so a VA whose spec is invalid still gets its conditions.
- API failures never raise; they are `StatusResult` values. A 409 triggers one fresh GET, a
  recomputation from the fresh status and one retry; a second 409 is CONFLICT (the caller
  retries next cycle). 404 is NOT_FOUND; anything else (500, 429, transport errors, timeouts) is
  FAILED with a one-line `describe_error` message.
- A status judged unchanged against a stale cached copy is not written (UNCHANGED); the next
  cycle, with the informer caught up, writes it.
"""

from __future__ import annotations

import enum
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, get_args

from lightkube import AsyncClient
from lightkube.types import PatchType

from llmscaler.clock import Clock, rfc3339
from llmscaler.kube import crd
from llmscaler.kube.client import VariantAutoscalingResource, as_dict, describe_error, error_code

logger = logging.getLogger(__name__)

MESSAGE_MAX: Final = 32768
REASON_MAX: Final = 1024
TYPE_MAX: Final = 316
_STATUSES: Final = frozenset(get_args(crd.ConditionStatus))
_REASON = re.compile(crd.CONDITION_REASON_PATTERN)
_TYPE = re.compile(crd.CONDITION_TYPE_PATTERN)


@dataclass(frozen=True, slots=True)
class ConditionUpdate:
    """One condition to set: metav1.Condition without the times the writer fills in."""

    type: str
    status: crd.ConditionStatus
    reason: str
    message: str


class StatusOutcome(enum.StrEnum):
    WRITTEN = 'Written'
    UNCHANGED = 'Unchanged'
    CONFLICT = 'Conflict'
    NOT_FOUND = 'NotFound'
    FAILED = 'Failed'


@dataclass(frozen=True, slots=True)
class StatusResult:
    """What an update did; `resource_version` is the object's after it (None when unknown)."""

    outcome: StatusOutcome
    message: str
    resource_version: str | None


def next_status(
    *,
    current: crd.Status | None,
    generation: int | None,
    desired: int | None,
    applied: bool | None,
    conditions: Sequence[ConditionUpdate],
    now: float,
    ran: bool,
) -> crd.Status:
    """The status after one cycle's facts are recorded (pure; ValueError on bad input)."""
    _check(desired=desired, conditions=conditions)
    base = current if current is not None else crd.Status()
    stamp = rfc3339(wall=now)
    alloc = base.desired_optimized_alloc
    num_replicas = alloc.num_replicas if desired is None and alloc is not None else desired
    last_run = stamp if ran else (alloc.last_run_time if alloc is not None else None)
    if alloc is not None or num_replicas is not None or last_run is not None:
        alloc = crd.DesiredOptimizedAlloc(
            last_run_time=last_run,
            accelerator=alloc.accelerator if alloc is not None else None,
            num_replicas=num_replicas,
        )
    actuation = crd.Actuation(applied=applied) if applied is not None else base.actuation
    result = base.conditions
    for update in conditions:
        result = crd.set_condition(
            conditions=result,
            type=update.type,
            status=update.status,
            reason=update.reason,
            message=update.message[:MESSAGE_MAX],
            observed_generation=generation,
            now=stamp,
        )
    return crd.Status(desired_optimized_alloc=alloc, actuation=actuation, conditions=result)


def _check(*, desired: int | None, conditions: Sequence[ConditionUpdate]) -> None:
    if desired is not None and not _is_count(desired):
        raise ValueError(f'desired replicas {desired!r} is not an int in [0, {crd.INT32_MAX}]')
    seen: set[str] = set()
    for update in conditions:
        if not isinstance(update.type, str) or len(update.type) > TYPE_MAX:
            raise ValueError(f'condition type {update.type!r} is not a valid type')
        if not _TYPE.fullmatch(update.type):
            raise ValueError(f'condition type {update.type!r} is not a valid type')
        if update.type in seen:
            raise ValueError(f'condition type {update.type!r} is set twice in one update')
        seen.add(update.type)
        if update.status not in _STATUSES:
            raise ValueError(f'condition {update.type} has status {update.status!r}')
        reason = update.reason
        if not isinstance(reason, str) or len(reason) > REASON_MAX or not _REASON.fullmatch(reason):
            raise ValueError(f'condition {update.type} has an invalid reason {reason!r}')
        if not isinstance(update.message, str):
            raise ValueError(f'condition {update.type} has a message that is not a string')


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= crd.INT32_MAX


@dataclass(frozen=True, slots=True)
class _Plan:
    body: dict[str, Any] | None  # None: nothing to write
    resource_version: str | None


class StatusWriter:
    """Writes VA status through `/status`, with one refetch-and-retry on a conflict."""

    def __init__(self, *, client: AsyncClient, clock: Clock) -> None:
        self._client = client
        self._clock = clock

    async def update(
        self,
        *,
        namespace: str,
        name: str,
        obj: Mapping[str, Any] | None,
        desired: int | None,
        applied: bool | None,
        conditions: Sequence[ConditionUpdate],
        ran: bool = True,
    ) -> StatusResult:
        """Record a cycle's facts on the VA `namespace/name`; `obj` is its cached copy, if any."""
        _check(desired=desired, conditions=conditions)
        now = self._clock.wall()
        current = obj
        for attempt in range(2):
            if current is None:
                fetched = await self._fetch(namespace, name)
                if isinstance(fetched, StatusResult):
                    return fetched
                current = fetched
            plan = _plan(
                obj=current,
                key=f'{namespace}/{name}',
                desired=desired,
                applied=applied,
                conditions=conditions,
                now=now,
                ran=ran,
            )
            if plan.body is None:
                return StatusResult(StatusOutcome.UNCHANGED, '', plan.resource_version)
            try:
                written = await self._client.patch(
                    VariantAutoscalingResource.Status,
                    name,
                    plan.body,
                    namespace=namespace,
                    patch_type=PatchType.MERGE,
                )
            except Exception as exc:  # every failure becomes a value: never raise
                if error_code(exc) == 409 and attempt == 0:
                    logger.info('status of VA %s/%s conflicted; refetching', namespace, name)
                    current = None
                    continue
                return _failure(exc, namespace, name)
            logger.debug('wrote status of VA %s/%s', namespace, name)
            return StatusResult(StatusOutcome.WRITTEN, '', _resource_version(as_dict(written)))
        raise AssertionError('unreachable: the second attempt always returns')

    async def _fetch(self, namespace: str, name: str) -> dict[str, Any] | StatusResult:
        try:
            fetched = await self._client.get(VariantAutoscalingResource, name, namespace=namespace)
        except Exception as exc:  # every failure becomes a value: never raise
            return _failure(exc, namespace, name)
        return as_dict(fetched)


def _plan(
    *,
    obj: Mapping[str, Any],
    key: str,
    desired: int | None,
    applied: bool | None,
    conditions: Sequence[ConditionUpdate],
    now: float,
    ran: bool,
) -> _Plan:
    raw = obj.get('status')
    current = _parse_status(raw, key)
    meta = obj.get('metadata')
    meta = meta if isinstance(meta, Mapping) else {}
    generation = meta.get('generation')
    if isinstance(generation, bool) or not isinstance(generation, int) or generation < 0:
        generation = None
    rv = _resource_version(obj)
    new = next_status(
        current=current,
        generation=generation,
        desired=desired,
        applied=applied,
        conditions=conditions,
        now=now,
        ran=ran,
    )
    if current is not None and new == current:
        return _Plan(None, rv)
    status = new.model_dump(mode='json', by_alias=True, exclude_none=True)
    body: dict[str, Any] = {'status': _clearing(raw, status)}
    if rv is not None:
        body['metadata'] = {'resourceVersion': rv}
    return _Plan(body, rv)


def _parse_status(raw: object, key: str) -> crd.Status | None:
    """The stored status; an absent one is empty, an invalid one None (rebuilt, always written)."""
    if raw is None:
        return crd.Status()
    if not isinstance(raw, Mapping):
        problem = f'expected an object, got {type(raw).__name__}'
    else:
        try:
            return crd.Status.model_validate(dict(raw))
        except (ValueError, RecursionError) as exc:  # pydantic's ValidationError is a ValueError
            problem = ' '.join(str(exc).split())[:300]
    logger.warning('status of VA %s is invalid, rebuilding it: %s', key, problem)
    return None


def _clearing(old: object, new: dict[str, Any]) -> dict[str, Any]:
    """`new` as a merge patch over `old`: keys only `old` has are sent as null (deleted)."""
    if not isinstance(old, Mapping):
        return new
    patch = dict(new)
    for name in sorted(k for k in old if isinstance(k, str)):
        if name not in new:
            patch[name] = None
        elif isinstance(old[name], Mapping) and isinstance(new[name], dict):
            patch[name] = _clearing(old[name], new[name])
    return patch


def _resource_version(obj: Mapping[str, Any]) -> str | None:
    meta = obj.get('metadata')
    rv = meta.get('resourceVersion') if isinstance(meta, Mapping) else None
    return rv if isinstance(rv, str) and rv else None


def _failure(exc: Exception, namespace: str, name: str) -> StatusResult:
    code = error_code(exc)
    message = describe_error(exc)
    if code == 409:
        logger.info('status of VA %s/%s conflicted twice: %s', namespace, name, message)
        return StatusResult(StatusOutcome.CONFLICT, message, None)
    if code == 404:
        return StatusResult(StatusOutcome.NOT_FOUND, message, None)
    logger.warning('status of VA %s/%s not written: %s', namespace, name, message)
    return StatusResult(StatusOutcome.FAILED, message, None)
