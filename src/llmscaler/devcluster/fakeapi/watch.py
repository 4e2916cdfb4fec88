"""Watch streams and selections of the fake kube-apiserver.

Why: which objects a list or a watch returns, and which event type a watch reports, decide what
an informer caches; this module serves lists' selections and watch streams by the apiserver's
rules, for `server` to route requests to.

What it serves: `Selection` is the namespace and the label and field selectors of one list or
watch request (a malformed selector raises `ApiError` 400 when it is built, before any stream
starts). `serve_watch` answers `?watch=true`: HTTP 200 and a chunked stream of `{"type",
"object"}` lines. Without a resourceVersion (or with "0") it first replays the current objects as
ADDED; otherwise the store's history after that resourceVersion, or, when that is older than the
kept history (or `gone` is set), a single ERROR event whose object is a Status with code 410
(reason Expired), then the end. BOOKMARK events are sent every `bookmark_interval` seconds and on
the store's bookmark signal, only when the request asked for `allowWatchBookmarks=true`.
`timeoutSeconds` ends the stream, and so does a client that went away (noticed within a bookmark
interval, as the apiserver notices a closed connection). With a label selector, a modified object
that stops matching is reported DELETED and one that starts matching ADDED, as the apiserver
does.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from llmscaler.devcluster.fakeapi.conversion import served
from llmscaler.devcluster.fakeapi.resources import Resource, storage_of
from llmscaler.devcluster.fakeapi.semantics import (
    ApiError,
    field_selector_matches,
    label_selector_matches,
    status_body,
)
from llmscaler.devcluster.fakeapi.store import Event, Obj, Store

BOOKMARK = 'BOOKMARK'


@dataclass(frozen=True, slots=True)
class Selection:
    """The objects one list or watch request selects."""

    resource: Resource
    namespace: str | None
    label_selector: str = ''
    field_selector: str = ''

    @classmethod
    def of(
        cls, *, resource: Resource, namespace: str | None, query: Mapping[str, str]
    ) -> Selection:
        """The request's selection; ApiError 400 for a malformed selector."""
        made = cls(
            resource, namespace, query.get('labelSelector', ''), query.get('fieldSelector', '')
        )
        label_selector_matches(selector=made.label_selector, labels={})
        kind = {'apiVersion': resource.group_version, 'kind': resource.kind}
        field_selector_matches(selector=made.field_selector, obj=kind)
        return made

    def matches(self, obj: Obj) -> bool:
        meta = obj.get('metadata', {})
        if self.namespace is not None and meta.get('namespace') != self.namespace:
            return False
        labels = meta.get('labels') or {}
        if self.label_selector and not label_selector_matches(
            selector=self.label_selector, labels=labels
        ):
            return False
        return not self.field_selector or field_selector_matches(
            selector=self.field_selector, obj=obj
        )

    def seen_as(self, event: Event) -> tuple[str, Obj] | None:
        """The event type this watch reports for `event` and its object as this watch's resource
        serves it; None when it reports nothing."""
        if storage_of(event.resource) is not storage_of(self.resource):
            return None
        shown = served(self.resource, event.object)
        now = self.matches(shown)
        if event.type == 'MODIFIED' and event.old is not None:
            before = self.matches(served(self.resource, event.old))
            if now != before:
                return ('ADDED' if now else 'DELETED'), shown
        return (event.type, shown) if now else None


async def serve_watch(
    request: web.Request,
    *,
    store: Store,
    selection: Selection,
    gone: bool,
    bookmark_interval: float,
) -> web.StreamResponse:
    """Answer one watch request (see the module docstring)."""
    q = request.query
    bookmarks = q.get('allowWatchBookmarks') in ('true', '1')
    timeout = float(q['timeoutSeconds']) if q.get('timeoutSeconds') else None
    rv = q.get('resourceVersion', '')
    queue: asyncio.Queue[Event | str | None] = asyncio.Queue()
    response = web.StreamResponse(headers={'Content-Type': 'application/json'})
    response.enable_chunked_encoding()
    await response.prepare(request)
    if gone:
        await _send_gone(response, f'too old resource version: {rv}')
        return response
    try:
        if rv in ('', '0'):
            backlog = [
                Event(selection.resource, 'ADDED', o)
                for o in store.list(selection.resource, selection.namespace, selection.matches)
            ]
        else:
            backlog = store.history_since(int(rv))
    except (ApiError, ValueError) as err:
        await _send_gone(response, str(err))
        return response
    store.watchers.add(queue)
    try:
        for event in backlog:
            queue.put_nowait(event)
        await _stream(
            request,
            response,
            store=store,
            selection=selection,
            queue=queue,
            bookmarks=bookmarks,
            timeout=timeout,
            bookmark_interval=bookmark_interval,
        )
    except (ConnectionResetError, asyncio.CancelledError):
        pass
    finally:
        store.watchers.discard(queue)
    with contextlib.suppress(ConnectionResetError):
        await response.write_eof()
    return response


async def _send_gone(response: web.StreamResponse, message: str) -> None:
    status = status_body(code=410, reason='Expired', message=message)
    with contextlib.suppress(ConnectionResetError):
        await response.write(_line({'type': 'ERROR', 'object': status}))
        await response.write_eof()


async def _stream(
    request: web.Request,
    response: web.StreamResponse,
    *,
    store: Store,
    selection: Selection,
    queue: asyncio.Queue[Event | str | None],
    bookmarks: bool,
    timeout: float | None,
    bookmark_interval: float,
) -> None:
    loop = asyncio.get_running_loop()
    deadline = None if timeout is None else loop.time() + timeout
    while True:
        wait = bookmark_interval
        if deadline is not None:
            wait = min(wait, deadline - loop.time())
            if wait <= 0:
                return
        try:
            item = await asyncio.wait_for(queue.get(), wait)
        except TimeoutError:
            item = BOOKMARK if deadline is None or loop.time() < deadline else None
        transport = request.transport
        if item is None or transport is None or transport.is_closing():
            return  # ended, or the client went away (noticed within a bookmark interval)
        if isinstance(item, str):
            if bookmarks:
                r = selection.resource
                meta = {'resourceVersion': str(store.rv)}
                bookmark = {'kind': r.kind, 'apiVersion': r.group_version, 'metadata': meta}
                await response.write(_line({'type': 'BOOKMARK', 'object': bookmark}))
            continue
        seen = selection.seen_as(item)
        if seen is not None:
            await response.write(_line({'type': seen[0], 'object': seen[1]}))


def _line(event: Any) -> bytes:
    return json.dumps(event).encode() + b'\n'
