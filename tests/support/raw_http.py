"""A loopback HTTP/1.1 server that misbehaves on purpose, for the tests of the metric sources.

`RawServer` writes its answers byte by byte, so that a test can misbehave as no framework would
let it: drip a body one byte at a time (`drip`), stream without end (`endless`), announce a
Content-Length it never sends (`claims`). The HTTP plumbing's tests (test_collect_http) and the
source tests (Prometheus, pod scraping, scale-from-zero) use it.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Seen:
    """One request as the server received it; header names in lower case."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes


Behaviour = Callable[[asyncio.StreamWriter], Awaitable[None]]


def response_head(status: int, headers: dict[str, str]) -> bytes:
    """The status line and headers of an answer, `Connection: close` among them."""
    lines = [
        f'HTTP/1.1 {status} X',
        'Connection: close',
        *(f'{k}: {v}' for k, v in headers.items()),
    ]
    return ('\r\n'.join(lines) + '\r\n\r\n').encode()


def drip(*, every: float = 0.2, content_type: str = 'text/plain') -> Behaviour:
    """Headers at once, then a body of one-byte chunks, one every `every` seconds, for ever."""

    async def behave(writer: asyncio.StreamWriter) -> None:
        writer.write(
            response_head(200, {'Content-Type': content_type, 'Transfer-Encoding': 'chunked'})
        )
        while True:
            writer.write(b'1\r\nx\r\n')
            await writer.drain()
            await asyncio.sleep(every)

    return behave


def endless(*, chunk: int = 16 * 1024, content_type: str = 'text/plain') -> Behaviour:
    """A chunked body that never ends, as fast as the client reads it."""

    async def behave(writer: asyncio.StreamWriter) -> None:
        writer.write(
            response_head(200, {'Content-Type': content_type, 'Transfer-Encoding': 'chunked'})
        )
        piece = f'{chunk:x}\r\n'.encode() + b'#' * chunk + b'\r\n'
        while True:
            writer.write(piece)
            await writer.drain()
            await asyncio.sleep(0)

    return behave


def claims(length: int, *, content_type: str = 'text/plain') -> Behaviour:
    """Announces a body of `length` bytes, then sends nothing (for ever)."""

    async def behave(writer: asyncio.StreamWriter) -> None:
        writer.write(
            response_head(200, {'Content-Type': content_type, 'Content-Length': str(length)})
        )
        await writer.drain()
        await asyncio.sleep(3600)

    return behave


@dataclass
class RawServer:
    """A loopback HTTP/1.1 server (https with `tls`) answering every request with `behaviour`.

    It records each request (`seen`) and counts the connections whose answer ended because the
    client went away (`dropped`): a client that gives up closes its connection.
    """

    behaviour: Behaviour
    tls: ssl.SSLContext | None = None
    seen: list[Seen] = field(default_factory=list)
    dropped: int = 0
    port: int = 0
    _server: asyncio.Server | None = None
    _stop: asyncio.Event = field(default_factory=asyncio.Event)
    _handlers: set[asyncio.Task[None]] = field(default_factory=set)

    @property
    def url(self) -> str:
        return f'{"https" if self.tls else "http"}://127.0.0.1:{self.port}'

    async def __aenter__(self) -> RawServer:
        self._server = await asyncio.start_server(self._serve, '127.0.0.1', 0, ssl=self.tls)
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        # Handlers end by themselves once told to (cancelling them makes asyncio log noise).
        self._stop.set()
        await asyncio.gather(*self._handlers, return_exceptions=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        handler = asyncio.current_task()
        assert handler is not None
        self._handlers.add(handler)
        work = asyncio.create_task(self._answer(reader, writer))
        stop = asyncio.create_task(self._stop.wait())
        try:
            await asyncio.wait((work, stop), return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (work, stop):
                task.cancel()
            await asyncio.gather(work, stop, return_exceptions=True)
            self._handlers.discard(handler)
            writer.close()
            with contextlib.suppress(ConnectionError, ssl.SSLError):
                await writer.wait_closed()

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b'\r\n\r\n')
            request, *lines = head.decode('latin-1').split('\r\n')
            headers = {}
            for line in lines:
                name, sep, value = line.partition(':')
                if sep:
                    headers[name.strip().lower()] = value.strip()
            body = await reader.readexactly(int(headers.get('content-length', '0')))
            method, path, _ = request.split(' ', 2)
            self.seen.append(Seen(method, path, headers, body))
            await self.behaviour(writer)
        except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError):
            self.dropped += 1


def serve(body: bytes, *, content_type: str = 'text/plain; version=0.0.4') -> Behaviour:
    """A whole answer at once: 200, its Content-Length and `body`."""

    async def behave(writer: asyncio.StreamWriter) -> None:
        head = {'Content-Type': content_type, 'Content-Length': str(len(body))}
        writer.write(response_head(200, head) + body)
        await writer.drain()

    return behave
