"""A local, watch-fed cache of one kind of object, copying client-go's informer.

Why: the controller reads VariantAutoscalings, ConfigMaps and scale targets every cycle; asking
the API server each time would cost a list per kind per cycle. An informer lists once, then
follows a watch, so reads are local and changes arrive as events (`on_event`) that can wake the
controller.

What it does (`run()`, until cancelled):

1. List the kind (in one namespace, or all with `namespace=None`, optionally by a label
   selector: `{key: value}` pairs, or `{key: (v1, v2)}` for the set-based `key in (v1,v2)`) and
   take the list's resourceVersion. The store is replaced *by diffing*: a
   key that is new is ADDED, one whose resourceVersion changed is MODIFIED, one that vanished is
   DELETED with the last state the informer knew (so deletions missed while disconnected are
   still seen); an object whose resourceVersion is unchanged emits nothing. The whole store is
   replaced first, then the events are emitted in key order, so a handler reading the store sees
   the complete new state.
   `synced` is set after the first successful list and stays set.
2. Watch from that resourceVersion with `timeoutSeconds=WATCH_TIMEOUT_SECONDS` (300 s). Watches
   carry no client read timeout in lightkube, so a quiet watch is never cut by the client; the
   server ends it every 5 minutes instead. When a stream ends cleanly, lightkube reconnects by
   itself from the last resourceVersion it saw, without a re-list: a clean end is routine, not a
   failure. (That reconnect is lightkube's and has no delay; a server or proxy that closed every
   stream at once would be asked again at once. Real API servers do not, and a reconnect that
   fails is an error, handled below.) ADDED/MODIFIED/DELETED are applied to the store with the
   same rules as the diff (an ADDED for a known key is reported as MODIFIED; an event that
   changes nothing, or a DELETED for an unknown key, emits nothing). BOOKMARK only moves
   `resource_version`.
3. A watch error of any kind (an in-stream ERROR with code 410 Expired, another API error,
   a transport failure, an undecodable event) ends the watch and goes back to step 1.

Backoff (all on the injected clock): after a failed list, and after a watch that ended without
being *productive*, the informer waits `retry_delay * 2**(n-1)` seconds, capped at
`max_retry_delay`, where n counts such failures in a row. A watch is productive when it delivered
at least one event or stayed open for at least `max_retry_delay` seconds; a productive watch
resets n to 0, so the re-list after it is immediate (the usual case of a 410 on a long-lived
watch), and a second failure in a row starts again from `retry_delay`. A successful list does not
reset n by itself, so a server whose lists work but whose watches fail at once is still polled at
a growing interval rather than in a tight loop.

What fails: `run()` never raises for API, transport or decoding failures: it logs a warning
naming the informer (a 410 is logged at info, being routine; a 404, a kind not served, at info
once and then at debug), records `last_error` (cleared by
the next successful list) and retries. An exception from `on_event` is logged with its traceback
and does not stop the informer. Only cancellation ends `run()`. Objects without a
`metadata.name` are ignored. Store values are the dicts the API server sent (`as_dict`), or what
`transform` made of them; they are shared with every reader and must not be mutated.

`transform` (optional) is applied to every listed or watched object before it is stored and
before handlers see it: it keeps what readers need and drops the rest (a pod's spec is most of its
size), or returns None for an object not to keep, which the store then treats as absent (a kept
object that turns into None is reported DELETED with its last kept state). It must keep
`metadata.namespace`, `metadata.name` and `metadata.resourceVersion` (keys and change detection
use them) and must not raise; an exception from it is handled like an undecodable object (a list
fails and is retried; a watch ends and re-lists).

`Cache` is what readers and the process need of a cache; an `Informer` is one, and a composite of
several informers (the controller's pod cache) can be one too.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable, Mapping
from typing import Any, Final, Protocol

import lightkube
from lightkube import operators
from lightkube.core.client import LabelSelector
from lightkube.core.resource import GlobalResource

from llmscaler.clock import Clock
from llmscaler.kube.client import ObjectRef, as_dict, describe_error, error_code

log = logging.getLogger(__name__)

WATCH_TIMEOUT_SECONDS: Final = 300
"""The server-side timeout of one watch request; lightkube reconnects when it lapses."""

ALL_NAMESPACES: Final = '*'
ADDED: Final = 'ADDED'
MODIFIED: Final = 'MODIFIED'
DELETED: Final = 'DELETED'
BOOKMARK: Final = 'BOOKMARK'

Obj = dict[str, Any]
Key = tuple[str, str]
EventHandler = Callable[[str, Obj], None]
Transform = Callable[[Obj], Obj | None]
Selector = Mapping[str, str | tuple[str, ...]]
"""A label selector: `key: value` means `key=value`, `key: (a, b)` means `key in (a,b)`."""


class Cache(Protocol):
    """What readers and the process need of a cache of objects (an `Informer` is one)."""

    synced: asyncio.Event

    @property
    def name(self) -> str: ...

    @property
    def version(self) -> int: ...

    @property
    def last_error(self) -> str | None: ...

    def get(self, *, namespace: str, name: str) -> Obj | None: ...

    def items(self) -> tuple[Obj, ...]: ...

    def __len__(self) -> int: ...

    async def run(self) -> None: ...


def _label_selector(labels: Selector | None) -> LabelSelector | None:
    if not labels:
        return None
    return {
        key: value if isinstance(value, str) else operators.in_(value)
        for key, value in labels.items()
    }


def _key(obj: Mapping[str, Any]) -> Key | None:
    ref = ObjectRef.of(obj)
    return (ref.namespace, ref.name) if ref.name else None


def _resource_version(obj: Mapping[str, Any]) -> str:
    meta = obj.get('metadata')
    rv = meta.get('resourceVersion') if isinstance(meta, Mapping) else None
    return rv if isinstance(rv, str) else ''


def _unchanged(old: Obj, new: Obj) -> bool:
    rv = _resource_version(new)
    return (rv != '' and rv == _resource_version(old)) or old == new


class Informer:
    """A cache of one kind, filled by list + watch; see the module docstring for the rules."""

    def __init__(
        self,
        *,
        client: lightkube.AsyncClient,
        resource: type[Any],
        clock: Clock,
        namespace: str | None = None,
        labels: Selector | None = None,
        name: str = '',
        retry_delay: float = 1.0,
        max_retry_delay: float = 30.0,
        on_event: EventHandler | None = None,
        transform: Transform | None = None,
    ) -> None:
        for label, value in (('retry_delay', retry_delay), ('max_retry_delay', max_retry_delay)):
            if not math.isfinite(value) or value < 0:
                raise ValueError(f'{label} must be a finite number >= 0, not {value!r}')
        self._client = client
        self._resource = resource
        self._clock = clock
        self._namespace: str | None = ALL_NAMESPACES if namespace is None else namespace
        if isinstance(resource, type) and issubclass(resource, GlobalResource):
            self._namespace = None  # a cluster-scoped kind (Node) is listed without a namespace
        for key, wanted in (labels or {}).items():
            if not isinstance(wanted, str) and not wanted:
                raise ValueError(f'label {key!r}: a set-based selector needs at least one value')
        self._labels = _label_selector(labels)
        self._name = name or getattr(resource, '__name__', 'objects')
        self._retry_delay = retry_delay
        self._max_retry_delay = max_retry_delay
        self._handlers: list[EventHandler] = [] if on_event is None else [on_event]
        self._transform = transform
        self._store: dict[Key, Obj] = {}
        self._sorted: tuple[Obj, ...] | None = ()
        self._version = 0
        self._relists = 0
        self._lists = 0
        self._last_error: str | None = None
        self._rv = ''
        self.synced = asyncio.Event()
        """Set after the first successful list; stays set."""

    # -- reading -----------------------------------------------------------------------------

    @property
    def name(self) -> str:
        return self._name

    @property
    def version(self) -> int:
        """Grows by one on every change to the store (cheap change detection for readers)."""
        return self._version

    @property
    def relists(self) -> int:
        """How many list requests were made after the first one (failed attempts included)."""
        return self._relists

    @property
    def last_error(self) -> str | None:
        """The latest list or watch failure, None once a list succeeds again."""
        return self._last_error

    @property
    def resource_version(self) -> str:
        """The latest resourceVersion seen (from a list, an event or a bookmark); '' before."""
        return self._rv

    def get(self, *, namespace: str, name: str) -> Obj | None:
        """The cached object, or None. Cluster-scoped objects have namespace ''."""
        return self._store.get((namespace, name))

    def items(self) -> tuple[Obj, ...]:
        """Every cached object, sorted by (namespace, name)."""
        if self._sorted is None:
            self._sorted = tuple(self._store[k] for k in sorted(self._store))
        return self._sorted

    def __len__(self) -> int:
        return len(self._store)

    def subscribe(self, handler: EventHandler) -> None:
        """Call `handler` on every later event too (after `on_event`), with the same rules."""
        self._handlers.append(handler)

    # -- the loop ----------------------------------------------------------------------------

    async def run(self) -> None:
        """List and watch until cancelled; failures are logged, backed off and retried."""
        failures = 0
        while True:
            if failures:
                await self._clock.sleep(self._delay(failures))
            try:
                rv = await self._list()
            except Exception as exc:
                failures += 1
                self._failed('list', exc, failures)
                continue
            self._last_error = None
            self.synced.set()
            productive, error = await self._watch(rv)
            failures = 0 if productive else failures + 1
            self._failed('watch', error, failures)

    def _delay(self, failures: int) -> float:
        if failures > 64:
            return self._max_retry_delay
        return min(self._max_retry_delay, self._retry_delay * 2.0 ** (failures - 1))

    def _failed(self, what: str, exc: BaseException | None, failures: int) -> None:
        text = describe_error(exc) if exc is not None else 'the stream ended'
        self._last_error = text
        then = f'retrying in {self._delay(failures):g} s' if failures else 're-listing now'
        code = error_code(exc) if exc is not None else None
        level = logging.INFO if code == 410 else logging.WARNING
        if code == 404:
            # A kind whose CRD is not installed (LeaderWorkerSet on most clusters): said once,
            # then polled quietly at the backoff's pace, so it can appear later.
            level = logging.INFO if failures <= 1 else logging.DEBUG
            text = 'not served by the API server (is its CRD installed?)'
        log.log(level, 'informer %s: %s failed (%s); %s', self._name, what, text, then)

    async def _list(self) -> str:
        if self._lists:
            self._relists += 1
        self._lists += 1
        listing = self._client.list(self._resource, namespace=self._namespace, labels=self._labels)
        fresh: dict[Key, Obj] = {}
        async for item in listing:
            raw = as_dict(item)
            key = _key(raw)
            obj = raw if self._transform is None else self._transform(raw)
            if key is not None and obj is not None:
                fresh[key] = obj
        rv = listing.resourceVersion
        self._replace(fresh)
        self._rv = rv
        return rv

    async def _watch(self, rv: str) -> tuple[bool, BaseException | None]:
        """Follow the watch until it fails; (whether it was productive, the failure)."""
        started = self._clock.monotonic()
        delivered = False
        error: BaseException | None = None
        try:
            stream = self._client.watch(
                self._resource,
                namespace=self._namespace,
                labels=self._labels,
                resource_version=rv,
                server_timeout=WATCH_TIMEOUT_SECONDS,
            )
            try:
                async for kind, item in stream:
                    delivered = True
                    self._apply(kind, as_dict(item))
            finally:
                aclose = getattr(stream, 'aclose', None)
                if callable(aclose):
                    await aclose()
        except Exception as exc:
            error = exc
        lasted = self._clock.monotonic() - started
        return delivered or lasted >= self._max_retry_delay, error

    # -- the store ---------------------------------------------------------------------------

    def _replace(self, fresh: dict[Key, Obj]) -> None:
        changes: list[tuple[Key, str, Obj]] = []
        for key in sorted(self._store.keys() | fresh.keys()):
            old, new = self._store.get(key), fresh.get(key)
            if new is None:
                assert old is not None
                changes.append((key, DELETED, old))
            elif old is None:
                changes.append((key, ADDED, new))
            elif _unchanged(old, new):
                fresh[key] = old
            else:
                changes.append((key, MODIFIED, new))
        self._store = fresh
        if changes:
            self._version += len(changes)
            self._sorted = None
        for _, kind, obj in changes:
            self._emit(kind, obj)

    def _apply(self, kind: str, raw: Obj) -> None:
        rv = _resource_version(raw)
        if rv:
            self._rv = rv
        key = _key(raw)
        if kind not in (ADDED, MODIFIED, DELETED) or key is None:
            return
        obj = raw if self._transform is None else self._transform(raw)
        old = self._store.get(key)
        if kind == DELETED or obj is None:
            if old is None:
                return
            del self._store[key]
            kind, obj = DELETED, old if obj is None else obj
        elif old is not None and _unchanged(old, obj):
            return
        else:
            self._store[key] = obj
            kind = ADDED if old is None else MODIFIED
        self._version += 1
        self._sorted = None
        self._emit(kind, obj)

    def _emit(self, kind: str, obj: Obj) -> None:
        for handler in self._handlers:
            try:
                handler(kind, obj)
            except Exception:
                ref = ObjectRef.of(obj)
                log.exception(
                    'informer %s: event handler failed on %s %s', self._name, kind, ref.key
                )
