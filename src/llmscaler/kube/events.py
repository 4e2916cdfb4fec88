"""Kubernetes Events (events.k8s.io/v1) about the objects the controller manages, deduplicated.

Why: `kubectl describe` and `kubectl get events` are where an operator looks first when a
VariantAutoscaling does not scale, so the controller reports what it did and what went wrong as
Events. A reason that repeats every cycle (a target that cannot be read, a metric source that is
down) must not flood etcd, and a broken event sink must never break the controller.

What it does (`EventRecorder.record`): occurrences are keyed by (regarding apiVersion, kind,
namespace, name; type, reason, action, note).

- The first occurrence of a key creates an Event named `<regarding name>.<16 hex>` in the
  regarding object's namespace (`default` for a cluster-scoped object, as client-go does), with
  eventTime (MicroTime of the wall clock), reportingController, reportingInstance, regarding (uid
  when known), related, and the note cut to 1024 bytes of UTF-8 (the apiserver's limit counts
  bytes; a cut never splits a character).
- Repeats within `dedup_window` (monotonic seconds since the Event was created) create nothing:
  they are counted, and the Event gets a merge patch `series: {count, lastObservedTime}` at most
  once per `series_interval` since its last write; the repeats in between are only counted
  (`suppressed`) and the next patch carries the running count. Counts of repeats after the last
  patch of a window are not written (bounded load matters more than the exact tally).
- After `dedup_window` the next occurrence creates a new Event object.

Counters: every call adds one to exactly one of `sent` (an API write succeeded), `suppressed`
(deduplicated, nothing written) and `failed` (the write failed).

What fails and how: `record()` never raises for API errors (lightkube `ApiError`) or transport
failures (httpx2 errors): they are logged naming the regarding object and counted in `failed`.
A failed create leaves the key cached, so repeats within `series_interval` are suppressed and the
create is retried after it (a broken sink sees at most one write per key per interval). A series
patch answered 404 (the Event expired or was deleted) creates a fresh Event. A call takes as long
as the client's request timeout at worst; a caller that must not wait runs it as a task.

A `silent` recorder (`llmscaler run --shadow`, which writes nothing to the cluster) records
nothing: every call is counted in `suppressed` and logged at DEBUG.

Bounds: the cache drops keys whose Event is older than `dedup_window`, and holds at most
`max_entries` keys (4096 by default), dropping the oldest first; a dropped key only means its
next occurrence creates a new Event early.
"""

from __future__ import annotations

import logging
import secrets
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Final, Literal

import httpx2
from lightkube import AsyncClient
from lightkube.core.exceptions import ApiError
from lightkube.models.core_v1 import ObjectReference
from lightkube.models.events_v1 import EventSeries
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.events_v1 import Event
from lightkube.types import PatchType

from llmscaler.clock import Clock, rfc3339
from llmscaler.kube.client import ObjectRef, describe_error, error_code

logger = logging.getLogger(__name__)

NOTE_LIMIT: Final = 1024
"""The apiserver's limit on an Event's note, in bytes."""

_API_ERRORS = (ApiError, httpx2.HTTPError)
_NAME_LIMIT: Final = 253 - 17  # room for `.<16 hex>` in a DNS subdomain name

_Key = tuple[str, str, str, str, str, str, str, str]


@dataclass(slots=True)
class _Series:
    """What the recorder knows of one key's current Event."""

    namespace: str
    name: str  # '' until a create has succeeded
    created_at: float  # monotonic time of the first occurrence of this window
    written_at: float  # monotonic time of the last write attempt (create or patch)
    count: int


def truncate_note(note: str, *, limit: int = NOTE_LIMIT) -> str:
    """`note` cut to at most `limit` bytes of UTF-8, without splitting a character."""
    raw = note.encode()
    if len(raw) <= limit:
        return note
    return raw[:limit].decode(errors='ignore')


def _reference(ref: ObjectRef) -> ObjectReference:
    return ObjectReference(
        apiVersion=ref.api_version or None,
        kind=ref.kind or None,
        namespace=ref.namespace or None,
        name=ref.name or None,
        uid=ref.uid or None,
    )


def _micro_time(wall: float) -> Any:
    # Typed Any on purpose: msgspec renders a datetime whose microseconds are 0 without the
    # fraction, and the apiserver's MicroTime parser demands all six digits.
    return rfc3339(wall=wall, micro=True)


class EventRecorder:
    """Creates and deduplicates Events; see the module docstring for the rules."""

    def __init__(
        self,
        *,
        client: AsyncClient,
        clock: Clock,
        instance: str,
        controller: str = 'llmscaler.io/controller',
        dedup_window: float = 600.0,
        series_interval: float = 30.0,
        max_entries: int = 4096,
        silent: bool = False,
    ) -> None:
        if max_entries < 1:
            raise ValueError(f'max_entries must be at least 1, not {max_entries}')
        self._client = client
        self._clock = clock
        self._instance = instance
        self._controller = controller
        self._window = dedup_window
        self._interval = series_interval
        self._max = max_entries
        self._silent = silent
        # Insertion order is creation order (a key is re-inserted when its window restarts), so
        # the oldest entries are always at the front.
        self._cache: OrderedDict[_Key, _Series] = OrderedDict()
        self._sent = 0
        self._suppressed = 0
        self._failed = 0

    @property
    def sent(self) -> int:
        """Calls whose write (create or series patch) succeeded."""
        return self._sent

    @property
    def suppressed(self) -> int:
        """Calls deduplicated without a write."""
        return self._suppressed

    @property
    def failed(self) -> int:
        """Calls whose write failed."""
        return self._failed

    @property
    def cached(self) -> int:
        """How many keys the dedup cache holds."""
        return len(self._cache)

    async def record(
        self,
        *,
        regarding: ObjectRef,
        type: Literal['Normal', 'Warning'],
        reason: str,
        action: str,
        note: str,
        related: ObjectRef | None = None,
    ) -> None:
        """Report one occurrence; never raises for API or transport failures."""
        if self._silent:
            self._suppressed += 1
            logger.debug('event %s for %s %s not recorded (silent): %s', reason, regarding.kind,
                         regarding.key, note)  # fmt: skip
            return
        now = self._clock.monotonic()
        self._prune(now)
        key: _Key = (
            regarding.api_version,
            regarding.kind,
            regarding.namespace,
            regarding.name,
            type,
            reason,
            action,
            note,
        )
        series = self._cache.get(key)
        if series is not None:
            series.count += 1
            if now - series.written_at < self._interval:
                self._suppressed += 1
                return
            series.written_at = now
            if series.name:
                await self._patch(series, regarding=regarding, reason=reason)
                if series.name:
                    return
                # The Event is gone (404): this occurrence starts a new one.
                self._cache.pop(key, None)
                series = None
        if series is None:
            series = _Series(
                namespace=regarding.namespace or 'default',
                name='',
                created_at=now,
                written_at=now,
                count=1,
            )
            self._cache[key] = series
            self._cap()
        event = Event(
            metadata=ObjectMeta(
                name=f'{(regarding.name or "object")[:_NAME_LIMIT]}.{secrets.token_hex(8)}',
                namespace=series.namespace,
            ),
            eventTime=_micro_time(self._clock.wall()),
            type=type,
            reason=reason,
            action=action,
            note=truncate_note(note),
            regarding=_reference(regarding),
            related=_reference(related) if related is not None else None,
            reportingController=self._controller,
            reportingInstance=self._instance,
            # A create retried after a failure carries the repeats seen meanwhile.
            series=(
                EventSeries(count=series.count, lastObservedTime=_micro_time(self._clock.wall()))
                if series.count > 1
                else None
            ),
        )
        try:
            created = await self._client.create(event)
        except _API_ERRORS as exc:
            self._failed += 1
            logger.warning(
                'creating event %s for %s %s failed: %s',
                reason,
                regarding.kind,
                regarding.key,
                describe_error(exc),
            )
            return
        self._sent += 1
        series.name = (created.metadata.name if created.metadata else None) or ''

    async def _patch(self, series: _Series, *, regarding: ObjectRef, reason: str) -> None:
        patch = {
            'series': {
                'count': series.count,
                'lastObservedTime': _micro_time(self._clock.wall()),
            }
        }
        try:
            await self._client.patch(
                Event, series.name, patch, namespace=series.namespace, patch_type=PatchType.MERGE
            )
        except _API_ERRORS as exc:
            if error_code(exc) == 404:
                logger.info(
                    'event %s/%s is gone; starting a new one', series.namespace, series.name
                )
                series.name = ''
                return
            self._failed += 1
            logger.warning(
                'updating event %s/%s (%s for %s %s) failed: %s',
                series.namespace,
                series.name,
                reason,
                regarding.kind,
                regarding.key,
                describe_error(exc),
            )
            return
        self._sent += 1

    def _prune(self, now: float) -> None:
        while self._cache:
            oldest = next(iter(self._cache.values()))
            if now - oldest.created_at < self._window:
                return
            self._cache.popitem(last=False)

    def _cap(self) -> None:
        while len(self._cache) > self._max:
            self._cache.popitem(last=False)
