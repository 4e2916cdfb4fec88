"""Writing the status of a VariantAutoscaling: the desired count, actuation and conditions.

Why: the VA status is what a user (and `kubectl get va`) sees of the controller's work: the
replica count it wants, the target's replicas as last read, whether the decision was applied, and
metav1.Condition-shaped conditions that say why (`MetricsAvailable=False`, reason `MetricsStale`,
...). What the next status is, and when `lastRunTime` moves, is `kube.nextstatus`; this module
writes it, and only when it differs from the stored one.

What it computes, `StatusWriter.update`: starts from the given object (the informer's cached copy;
fetched when None), computes `next_status` at `clock.wall()`, and writes only when the status
changed, with a merge patch on `/status` that carries the object's `metadata.resourceVersion`, so
a write based on a stale copy is refused (409) instead of undoing a newer status. The patch never
holds `spec`: the `/status` subresource is the only thing written. Keys that the stored status has
and the new one lacks are sent as null, so the stored status ends up exactly the computed one.
`remove_conditions` names condition types that no longer apply (the GPU limiter's
`ResourcesAvailable` once the limiter is off): they are dropped from the list, which a merge
patch replaces whole, so the stored status loses them too.

What fails and how:

- Bad facts (see `kube.nextstatus`) are a programming error: ValueError, raised before any
  request.
- A current status that does not validate as `crd.Status` (hand-edited, or written by another
  tool) is logged and rebuilt from an empty status rather than blocking every later write. Only
  the status and metadata are read, so a VA whose spec is invalid still gets its conditions.
- API failures never raise; they are `StatusResult` values. A 409 triggers one fresh GET, a
  recomputation from the fresh status and one retry; a second 409 is CONFLICT (the caller
  retries next cycle). 404 is NOT_FOUND; anything else (500, 429, transport errors, timeouts) is
  FAILED with a one-line `describe_error` message.
- A status judged unchanged against a stale cached copy is not written (UNCHANGED); the next
  cycle, with the informer caught up, writes it.

Cost: a controller of a thousand VAs asks for a thousand statuses every cycle, nearly all of them
unchanged. An update found unchanged is remembered with its inputs and the cached copy's
resourceVersion; the same update of the same copy is unchanged again until `lastRunTime` is due,
so it is answered without computing the status anew (`forget_except` drops the VAs that are
gone).
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Collection, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lightkube import AsyncClient
from lightkube.types import PatchType

from llmscaler.clock import Clock
from llmscaler.kube import crd
from llmscaler.kube.client import VariantAutoscalingResource, as_dict, describe_error, error_code
from llmscaler.kube.nextstatus import (
    RUN_TIME_REFRESH,
    ConditionUpdate,
    check_update,
    next_status,
    recent,
)

logger = logging.getLogger(__name__)


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


@dataclass(frozen=True, slots=True)
class _Observed:
    """What the cycle read of the scale target (None: keep the stored value)."""

    current_replicas: int | None
    ready_replicas: int | None
    accelerator: str | None


@dataclass(frozen=True, slots=True)
class _Plan:
    body: dict[str, Any] | None  # None: nothing to write
    resource_version: str | None
    last_run: str | None = None
    """The stored `lastRunTime`."""


class StatusWriter:
    """Writes VA status through `/status`, with one refetch-and-retry on a conflict."""

    def __init__(
        self, *, client: AsyncClient, clock: Clock, run_time_refresh: float = RUN_TIME_REFRESH
    ) -> None:
        check_update(desired=None, conditions=(), run_time_refresh=run_time_refresh)
        self._client = client
        self._clock = clock
        self._refresh = run_time_refresh
        # Per VA: the inputs of its last update found unchanged, and the stored lastRunTime.
        self._unchanged: dict[tuple[str, str], tuple[Hashable, str | None]] = {}

    def forget_except(self, *, keys: Collection[tuple[str, str]]) -> None:
        """Forget the unchanged updates of every VA but these (namespace, name)."""
        self._unchanged = {k: v for k, v in self._unchanged.items() if k in keys}

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
        current_replicas: int | None = None,
        ready_replicas: int | None = None,
        accelerator: str | None = None,
        remove_conditions: Sequence[str] = (),
    ) -> StatusResult:
        """Record a cycle's facts on the VA `namespace/name`; `obj` is its cached copy, if any.

        `current_replicas`, `ready_replicas` and `accelerator` are what the cycle read of the
        scale target (`status.currentAlloc`); None keeps the stored value. Conditions whose type
        is in `remove_conditions` are removed (ValueError when `conditions` also sets one).
        """
        both = sorted({u.type for u in conditions} & set(remove_conditions))
        if both:
            raise ValueError(f'condition types both set and removed: {", ".join(both)}')
        observed = _Observed(
            current_replicas=current_replicas,
            ready_replicas=ready_replicas,
            accelerator=accelerator,
        )
        check_update(
            desired=desired,
            conditions=conditions,
            current_replicas=current_replicas,
            ready_replicas=ready_replicas,
            accelerator=accelerator,
        )
        now = self._clock.wall()
        rv = _resource_version(obj) if obj is not None else None
        inputs: Hashable = (
            rv,
            desired,
            applied,
            tuple(conditions),
            ran,
            observed,
            tuple(sorted(remove_conditions)),
        )
        seen = self._unchanged.pop((namespace, name), None)
        same = rv is not None and seen is not None and seen[0] == inputs
        if (
            seen is not None
            and same
            and (not ran or recent(seen[1], now=now, within=self._refresh))
        ):
            self._unchanged[(namespace, name)] = seen
            return StatusResult(StatusOutcome.UNCHANGED, '', rv)
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
                observed=observed,
                run_time_refresh=self._refresh,
                remove=frozenset(remove_conditions),
            )
            if plan.body is None:
                if rv is not None and current is obj:
                    self._unchanged[(namespace, name)] = (inputs, plan.last_run)
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
                    logger.debug('status of VA %s/%s conflicted; refetching', namespace, name)
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
    observed: _Observed,
    run_time_refresh: float,
    remove: frozenset[str] = frozenset(),
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
        current_replicas=observed.current_replicas,
        ready_replicas=observed.ready_replicas,
        accelerator=observed.accelerator,
        run_time_refresh=run_time_refresh,
    )
    if remove:
        kept = tuple(c for c in new.conditions if c.type not in remove)
        new = new.model_copy(update={'conditions': kept})
    if current is not None and new == current:
        alloc = current.desired_optimized_alloc
        return _Plan(None, rv, alloc.last_run_time if alloc is not None else None)
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
        logger.debug('status of VA %s/%s conflicted twice: %s', namespace, name, message)
        return StatusResult(StatusOutcome.CONFLICT, message, None)
    if code == 404:
        return StatusResult(StatusOutcome.NOT_FOUND, message, None)
    logger.warning('status of VA %s/%s not written: %s', namespace, name, message)
    return StatusResult(StatusOutcome.FAILED, message, None)
