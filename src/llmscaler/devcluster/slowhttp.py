"""An HTTP server whose answers never arrive in time: a metrics server gone slow or mad.

Why: every outbound read of the controller (Prometheus, pod and EPP pages) must end within its
deadline and under its size cap, whatever the server does (a safety rule of the controller). A
server that is down is easy to fake; the hard cases are a server that accepts the request, answers
200 at once and then sends its body a byte at a time (a per-read timeout never fires: every read
gets a byte), and one whose body never ends. `SlowServer` plays either, for every request on any
path.

What: `async with SlowServer(mode=...) as server:` serves on 127.0.0.1 (an ephemeral port) at
`server.url`. Each answer is 200 `application/json` without a Content-Length, and its body is
the start of a Prometheus query answer, `{"status":"success","data":{"resultType":"vector",
"result":[`, followed by blanks (still the prefix of a valid JSON document), forever:

- `drip`: one byte every `interval` seconds (0.5 by default);
- `endless`: 64 KiB chunks as fast as the client reads them.

`requests` counts the requests received, `streaming` the answers still being sent, `sent` the
bytes sent so far. Leaving the block closes every connection.

What fails: a non-positive or non-finite `interval` or an unknown mode raises ValueError; an
OSError while binding propagates. A client that goes away only ends its own answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from types import TracebackType
from typing import Final, Literal

from aiohttp import web

from llmscaler.devcluster import loopback

Mode = Literal['drip', 'endless']

PREFIX: Final = b'{"status":"success","data":{"resultType":"vector","result":['
_CHUNK: Final = 64 * 1024


class SlowServer:
    """See the module docstring."""

    def __init__(self, *, mode: Mode = 'drip', interval: float = 0.5) -> None:
        if mode not in ('drip', 'endless'):
            raise ValueError(f'mode must be drip or endless, got {mode!r}')
        if not (math.isfinite(interval) and interval > 0):
            raise ValueError(f'interval must be a positive number of seconds, got {interval}')
        self.mode = mode
        self.interval = interval
        self.url = ''
        self.requests = 0
        self.streaming = 0
        self.sent = 0
        self._served: loopback.Served | None = None

    async def __aenter__(self) -> SlowServer:
        app = web.Application()
        app.router.add_route('*', '/{tail:.*}', self._answer)
        self._served = await loopback.serve(app, shutdown_timeout=0.5)
        self.url = self._served.url
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._served is not None:
            await self._served.close()

    async def _answer(self, request: web.Request) -> web.StreamResponse:
        self.requests += 1
        await request.read()
        response = web.StreamResponse(status=200, headers={'Content-Type': 'application/json'})
        response.enable_chunked_encoding()
        self.streaming += 1
        try:
            await response.prepare(request)
            with contextlib.suppress(ConnectionError):  # the client gave up: its answer ends
                if self.mode == 'drip':
                    await self._drip(response)
                else:
                    await self._flood(response)
        finally:
            self.streaming -= 1
        return response

    async def _drip(self, response: web.StreamResponse) -> None:
        position = 0
        while True:
            byte = PREFIX[position : position + 1] or b' '
            position += 1
            await response.write(byte)
            self.sent += 1
            await asyncio.sleep(self.interval)

    async def _flood(self, response: web.StreamResponse) -> None:
        await response.write(PREFIX)
        self.sent += len(PREFIX)
        blanks = b' ' * _CHUNK
        while True:
            await response.write(blanks)
            self.sent += len(blanks)
            await asyncio.sleep(0)  # the fake API and the pods share this event loop
