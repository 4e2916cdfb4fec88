"""A fence on the API client: no write leaves the process unless the replica may write now.

Why: with leader election, `LeaderElector.hold()` notices a lapsed Lease only when it next runs.
A leader frozen past its renew deadline (SIGSTOP, a paused VM, a long swap) resumes wherever it
stopped: a scale, status or Event write it was about to send goes out at once, while a standby
may already lead, and two controllers would write the same objects. Checking the Lease at every
write site would miss the next one added; the HTTP client is the one place every write crosses.

What it does (`fence_writes`): adds a request hook to the client's HTTP connection. A request
whose method changes state (anything but GET, HEAD and OPTIONS) and which is not about the
coordination.k8s.io API (the Lease itself: renewals and the release must go out) asks
`refusal()` twice: when it is handed to the client, and again just before its headers are
written (httpcore's `trace` extension), since taking a connection from the pool or opening one
can take as long as the client's timeout; a reason either time means the request is not sent
and `WriteFenced` is raised in its place (a connection refused at the second check is closed,
nothing having been written on it). Reads and watches are never held back, so a standby's
caches stay warm.

What fails: `WriteFenced` is an httpx2 transport error, so every caller already handles it as it
handles a connection that failed (logged with the object it concerns, counted, retried or
re-decided next cycle); nothing reached the server. `fence_writes` raises TypeError when the
lightkube client does not hold an httpx2 client where this module expects one (a lightkube
upgrade that moved it): better a start-up failure than an unfenced leader.

What it cannot do: a freeze between the second check and the moment the bytes leave the
socket still lets that one write through. Kubernetes has no fencing token a server would check;
the margin is the difference between the lease duration and the renew deadline.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import httpx2
from lightkube import AsyncClient

SAFE_METHODS: Final = frozenset({'GET', 'HEAD', 'OPTIONS'})
UNFENCED_API: Final = '/apis/coordination.k8s.io/'
"""Requests under this path (the Lease) are never fenced: they are how leadership is kept."""


class WriteFenced(httpx2.RequestError):
    """A write not sent because this replica may not write now (see the module docstring)."""


def fence_writes(client: AsyncClient, *, refusal: Callable[[], str | None]) -> None:
    """Make every state-changing request of `client` (the Lease's excepted) ask `refusal()`
    first: None lets it go, a reason raises `WriteFenced` naming the request and the reason."""
    generic = getattr(client, '_client', None)
    http = getattr(generic, '_client', None)
    if not isinstance(http, httpx2.AsyncClient):
        raise TypeError(
            'cannot fence writes: the lightkube AsyncClient holds no httpx2.AsyncClient at '
            '._client._client'
        )

    def refuse(request: httpx2.Request) -> None:
        why = refusal()
        if why is not None:
            raise WriteFenced(
                f'{request.method} {request.url.path} not sent: {why}', request=request
            )

    async def check(request: httpx2.Request) -> None:
        if request.method in SAFE_METHODS or UNFENCED_API in request.url.path:
            return
        refuse(request)
        earlier = request.extensions.get('trace')

        async def before_headers(event: str, info: dict[str, Any]) -> None:
            if earlier is not None:
                await earlier(event, info)
            if event.endswith('send_request_headers.started'):
                refuse(request)

        request.extensions = {**request.extensions, 'trace': before_headers}

    http.event_hooks['request'].append(check)
