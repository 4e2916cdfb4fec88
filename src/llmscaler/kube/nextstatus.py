"""The next status of a VariantAutoscaling from one cycle's facts: pure, no I/O, no clock.

Why: what the status says, and when it changes, is a pure rule, so it is tested without an API
server; `kube.status` writes what it computes. Conditions follow apimachinery's
`meta.SetStatusCondition` (via `resource_model.set_condition`): `lastTransitionTime` moves only
when a condition's status flips, so it tells how long the condition has held, and recording the
same facts again changes nothing.

What it computes, `next_status`: the next status from the current one. `numReplicas` takes
`desired` (kept when None); `currentAlloc` (the target's replicas, ready replicas and accelerator,
for `kubectl get va`) takes what is given (each kept when None); the deprecated
`desiredOptimizedAlloc.accelerator` is kept as found; `actuation.applied` takes `applied` (kept
when None); each `ConditionUpdate` is set with `observedGeneration` = the object's generation, and
conditions not mentioned are kept in place. Messages are cut to 32768 characters, the CRD's limit.

- An update that sets `TargetResolved` to anything but True clears `numReplicas` and
  `currentAlloc`: they described a target the controller no longer reads, and an old `OPTIMIZED`
  count beside `TargetResolved=False` would read as a live decision.
- `lastRunTime` is bounded in rate, since a status whose only change is that timestamp would be
  written for every VA every cycle: when the cycle ran, it becomes `now` if anything else in the
  status changed or if the stored one is `run_time_refresh` (default `RUN_TIME_REFRESH`, 300 s)
  old or more (or absent, unreadable, in the future); otherwise it is kept. So a steady VA costs
  one write per 5 minutes, and `lastRunTime` lags the last cycle by less than that.

What fails: a bad `ConditionUpdate` (a reason not matching
`resource_model.CONDITION_REASON_PATTERN` or longer than 1024, a type not matching
`resource_model.CONDITION_TYPE_PATTERN`, a status other than True, False or Unknown, a type
listed twice), a `desired`, `current_replicas` or `ready_replicas` outside
[0, 2^31 − 1], an empty accelerator, counts given together with an unresolved target, or a
`run_time_refresh` that is not a finite number >= 0, is a programming error: ValueError
(`check_update`, which the writer also calls before any request).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, get_args

from llmscaler.clock import parse_rfc3339, rfc3339
from llmscaler.kube import crd, resource_model

MESSAGE_MAX: Final = 32768
RUN_TIME_REFRESH: Final = 300.0
"""Seconds after which an unchanged status is rewritten only to move `lastRunTime`."""
REASON_MAX: Final = 1024
TYPE_MAX: Final = 316
_STATUSES: Final = frozenset(get_args(resource_model.ConditionStatus))
_REASON = re.compile(resource_model.CONDITION_REASON_PATTERN)
_TYPE = re.compile(resource_model.CONDITION_TYPE_PATTERN)


@dataclass(frozen=True, slots=True)
class ConditionUpdate:
    """One condition to set: metav1.Condition without the times the writer fills in."""

    type: str
    status: resource_model.ConditionStatus
    reason: str
    message: str


def next_status(
    *,
    current: crd.Status | None,
    generation: int | None,
    desired: int | None,
    applied: bool | None,
    conditions: Sequence[ConditionUpdate],
    now: float,
    ran: bool,
    current_replicas: int | None = None,
    ready_replicas: int | None = None,
    accelerator: str | None = None,
    run_time_refresh: float = RUN_TIME_REFRESH,
) -> crd.Status:
    """The status after one cycle's facts are recorded (pure; ValueError on bad input)."""
    check_update(
        desired=desired,
        conditions=conditions,
        current_replicas=current_replicas,
        ready_replicas=ready_replicas,
        accelerator=accelerator,
        run_time_refresh=run_time_refresh,
    )
    base = current if current is not None else crd.Status()
    stamp = rfc3339(wall=now)
    unresolved = _unresolves(conditions)
    alloc = base.desired_optimized_alloc
    num_replicas = alloc.num_replicas if desired is None and alloc is not None else desired
    if unresolved:
        num_replicas = None
    last_run = alloc.last_run_time if alloc is not None else None
    result = base.conditions
    for update in conditions:
        result = resource_model.set_condition(
            conditions=result,
            type=update.type,
            status=update.status,
            reason=update.reason,
            message=update.message[:MESSAGE_MAX],
            observed_generation=generation,
            now=stamp,
        )
    kept = crd.Status(
        desired_optimized_alloc=_desired_alloc(alloc, num_replicas, last_run),
        current_alloc=None
        if unresolved
        else _current_alloc(
            base.current_alloc,
            replicas=current_replicas,
            ready=ready_replicas,
            accelerator=accelerator,
        ),
        actuation=crd.Actuation(applied=applied) if applied is not None else base.actuation,
        conditions=result,
    )
    # lastRunTime alone is not worth a write every cycle: it is stamped when something else
    # changes (the write happens anyway) or when the stored one is `run_time_refresh` old.
    if not ran or (kept == base and recent(last_run, now=now, within=run_time_refresh)):
        return kept
    return crd.Status(
        desired_optimized_alloc=_desired_alloc(alloc, num_replicas, stamp),
        current_alloc=kept.current_alloc,
        actuation=kept.actuation,
        conditions=kept.conditions,
    )


def _unresolves(conditions: Sequence[ConditionUpdate]) -> bool:
    """Whether this update says the scale target is not resolved (TargetResolved not True)."""
    return any(u.type == crd.CONDITION_TARGET_RESOLVED and u.status != 'True' for u in conditions)


def _desired_alloc(
    old: crd.DesiredOptimizedAlloc | None, num_replicas: int | None, last_run: str | None
) -> crd.DesiredOptimizedAlloc | None:
    accelerator = old.accelerator if old is not None else None
    if num_replicas is None and last_run is None and accelerator is None:
        return None
    return crd.DesiredOptimizedAlloc(
        last_run_time=last_run, accelerator=accelerator, num_replicas=num_replicas
    )


def _current_alloc(
    old: crd.CurrentAlloc | None,
    *,
    replicas: int | None,
    ready: int | None,
    accelerator: str | None,
) -> crd.CurrentAlloc | None:
    base = old if old is not None else crd.CurrentAlloc()
    new = crd.CurrentAlloc(
        accelerator=accelerator if accelerator is not None else base.accelerator,
        num_replicas=replicas if replicas is not None else base.num_replicas,
        ready_replicas=ready if ready is not None else base.ready_replicas,
    )
    return None if new == crd.CurrentAlloc() else new


def recent(stamp: str | None, *, now: float, within: float) -> bool:
    """Whether `stamp` is at most `within` seconds before `now` (a future one is not recent)."""
    wall = parse_rfc3339(stamp) if stamp is not None else None
    return wall is not None and 0.0 <= now - wall < within


def check_update(
    *,
    desired: int | None,
    conditions: Sequence[ConditionUpdate],
    current_replicas: int | None = None,
    ready_replicas: int | None = None,
    accelerator: str | None = None,
    run_time_refresh: float = RUN_TIME_REFRESH,
) -> None:
    for what, count in (
        ('desired replicas', desired),
        ('current replicas', current_replicas),
        ('ready replicas', ready_replicas),
    ):
        if count is not None and not _is_count(count):
            raise ValueError(f'{what} {count!r} is not an int in [0, {resource_model.INT32_MAX}]')
    if accelerator is not None and (not isinstance(accelerator, str) or not accelerator):
        raise ValueError(f'accelerator {accelerator!r} is not a non-empty string')
    if (
        isinstance(run_time_refresh, bool)
        or not isinstance(run_time_refresh, int | float)
        or not 0 <= run_time_refresh < math.inf
    ):
        raise ValueError(f'run_time_refresh {run_time_refresh!r} is not a finite number >= 0')
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
    observed = (desired, current_replicas, ready_replicas, accelerator)
    if _unresolves(conditions) and any(value is not None for value in observed):
        raise ValueError('replica counts or an accelerator given for an unresolved target')


def _is_count(value: object) -> bool:
    return (
        isinstance(value, int)
        and not isinstance(value, bool)
        and 0 <= value <= resource_model.INT32_MAX
    )
