"""HTTP plumbing shared by every metrics reader (Prometheus queries, pod and EPP scraping, the
scale-from-zero loop's EPP reads).

Why: they all build the same client TLS context, own an httpx client unless the caller lends one,
read a rotating bearer-token file every cycle, bound every request in time and size, and sort
failures into the same `ErrorReason`s. One copy keeps their behaviour and their messages from
drifting apart.

What it provides:
- `client_ssl_context`: `ca_file` alone is trusted when given, else the system store;
  `insecure_skip_verify` turns off hostname and certificate checks; a client certificate is loaded
  when `client_cert_file` is given (the key from `client_key_file`, else from the certificate
  file). Unreadable files raise (`OSError`, `ssl.SSLError`): a configuration error, raised at
  construction. `ssl_context` builds it from a reader's configuration (`TlsFiles`: the
  Prometheus source's and the scraper's carry the same four fields).
- `OwnedClient`: the caller's client, or one made here and closed by `aclose`; a lent client is
  never closed, it belongs to its owner.
- `OriginClients`: for readers of many endpoints every cycle (the pods' pages, the EPPs'), a client
  per origin, kept alive between cycles and closed once unread for `ORIGIN_IDLE` seconds (an
  endpoint gone), or the caller's one client for every URL. One pool holding the connections of
  a thousand pods scans them all, socket by socket, each time a request starts or ends
  (httpcore 1.0's `AsyncConnectionPool`): millions of checks a cycle, on the event loop.
- `read_token`: the bearer token, from `token_file` (re-read on every call so rotated tokens work;
  surrounding whitespace stripped) else `bearer_token`. Never raises: an unreadable, non-UTF-8 or
  empty file gives no token and a message saying nothing was sent, so that a cycle never sends an
  unauthenticated request in its place. An empty `bearer_token` counts as none.
- `status_failure`: 400-499 → HTTP_4XX, 500-599 → HTTP_5XX, any other non-2xx → BAD_RESPONSE,
  2xx → None.
- `transport_failure`: a timeout (httpx's or asyncio's) → TIMEOUT, any other transport error
  (`TRANSPORT_ERRORS`: refused, DNS, TLS, a dropped connection, a bad URL) → UNREACHABLE.
- `authorization`: the header that carries a token, or why nothing may be sent. Credentials never
  travel in clear: with a token (or a token file) configured, a URL that is not `https://` gets
  nothing at all unless the caller's configuration opts in (`allow_http`), and the failure says
  so. Without credentials configured every scheme is fine.
- `fetch`: one request with a total deadline and a size cap, the only way the metric sources
  (Prometheus queries, pod and EPP pages, the scale-from-zero EPP reads) read the network, so
  that none of them can wait longer or hold more than its settings say. See its docstring.
- `check_seconds` / `check_bytes`: the ValueError of a deadline that is not a positive finite
  number or a size cap below 1, for the configurations' own checks.
- `within`: one request of several that share a deadline (a cycle's read, a scrape, a tick): it
  waits for a concurrency slot no later than the shared end, and its own deadline is cut to the
  time left.
- `parse_off_loop`: run a parser in a worker thread (the caller's own `collect.worker.Worker`
  when it has one) when its input is at least `OFF_LOOP_BYTES` long, inline otherwise, so that
  decoding a large answer never stalls the event loop (the loop also renews the leader Lease)
  while small pages skip the thread hand-off.
"""

from __future__ import annotations

import asyncio
import math
import ssl
import zlib
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TypeVar

import httpx

from llmscaler.collect.readings import ErrorReason
from llmscaler.collect.worker import Worker

TRANSPORT_ERRORS: tuple[type[Exception], ...] = (
    TimeoutError,
    httpx.HTTPError,
    httpx.InvalidURL,
    OSError,
)
"""What a request can raise short of an answer; `transport_failure` classifies them."""

OFF_LOOP_BYTES = 256 * 1024
"""From this many bytes on, a body is parsed in a worker thread (`parse_off_loop`).

Decoding 256 KiB of JSON or exposition text takes a few milliseconds; above that the event loop
would stall for as long, below it the hand-off to a thread costs more than it saves."""

MiB = 1024 * 1024

_T = TypeVar('_T')


def client_ssl_context(
    *,
    ca_file: Path | None,
    insecure_skip_verify: bool = False,
    client_cert_file: Path | None = None,
    client_key_file: Path | None = None,
) -> ssl.SSLContext:
    """The client TLS context (see the module docstring)."""
    context = ssl.create_default_context(cafile=str(ca_file) if ca_file is not None else None)
    if insecure_skip_verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if client_cert_file is not None:
        key = str(client_key_file) if client_key_file is not None else None
        context.load_cert_chain(certfile=str(client_cert_file), keyfile=key)
    return context


class TlsFiles(Protocol):
    """The TLS fields of a reader's configuration (`PrometheusConfig`, `ScrapeConfig`)."""

    @property
    def ca_file(self) -> Path | None: ...
    @property
    def insecure_skip_verify(self) -> bool: ...
    @property
    def client_cert_file(self) -> Path | None: ...
    @property
    def client_key_file(self) -> Path | None: ...


def ssl_context(*, config: TlsFiles) -> ssl.SSLContext:
    """The client TLS context of a reader's configuration (`client_ssl_context`)."""
    return client_ssl_context(
        ca_file=config.ca_file,
        insecure_skip_verify=config.insecure_skip_verify,
        client_cert_file=config.client_cert_file,
        client_key_file=config.client_key_file,
    )


def check_seconds(**values: float) -> None:
    """ValueError naming the first value that is not a positive finite number of seconds."""
    for name, value in values.items():
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
            or value <= 0
        ):
            raise ValueError(f'{name} must be a positive number of seconds, not {value!r}')


def check_bytes(**values: int) -> None:
    """ValueError naming the first value that is not a whole number of bytes of at least 1."""
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f'{name} must be a whole number of bytes of at least 1, not {value!r}')


class OwnedClient:
    """An httpx client: the caller's, or one built from `verify` and closed by `aclose`."""

    def __init__(
        self,
        *,
        client: httpx.AsyncClient | None,
        verify: Callable[[], ssl.SSLContext],
        timeout: float,
    ) -> None:
        self._owned = client is None
        # `verify` is only called when a client is built: a lent client keeps its own TLS.
        self.client = (
            client if client is not None else httpx.AsyncClient(verify=verify(), timeout=timeout)
        )

    async def aclose(self) -> None:
        """Close the client if it was built here."""
        if self._owned:
            await self.client.aclose()


ORIGIN_IDLE = 60.0
"""Seconds after which an origin's client unread is closed."""


class OriginClients:
    """A client per origin (`scheme://host:port`), or the lent `client` for every URL (module
    docstring). Times are the caller's (`now`, any clock that does not go back)."""

    def __init__(
        self,
        *,
        client: httpx.AsyncClient | None,
        verify: Callable[[], ssl.SSLContext],
        timeout: float,
    ) -> None:
        # The lent client, or the TLS context of the clients built here (`verify` is only called
        # then: a lent client keeps its own TLS).
        self._source: httpx.AsyncClient | ssl.SSLContext = (
            client if client is not None else verify()
        )
        self._timeout = timeout
        self._clients: dict[str, tuple[httpx.AsyncClient, float]] = {}

    def client_for(self, *, url: str, now: float) -> httpx.AsyncClient:
        """The client of `url`'s origin, made on its first use."""
        tls = self._source
        if isinstance(tls, httpx.AsyncClient):
            return tls
        origin = '/'.join(url.split('/', 3)[:3])
        found = self._clients.get(origin)
        client = (
            found[0] if found is not None else httpx.AsyncClient(verify=tls, timeout=self._timeout)
        )
        self._clients[origin] = (client, now)
        return client

    async def forget_idle(self, *, now: float) -> None:
        """Close the clients of origins not read for `ORIGIN_IDLE` seconds."""
        idle = [k for k, (_, used) in sorted(self._clients.items()) if now - used > ORIGIN_IDLE]
        closing = [self._clients.pop(k)[0] for k in idle]
        await asyncio.gather(*(c.aclose() for c in closing))

    async def aclose(self) -> None:
        """Close the clients built here (never the lent one)."""
        closing = [c for c, _ in self._clients.values()]
        self._clients.clear()
        await asyncio.gather(*(c.aclose() for c in closing))

    def __len__(self) -> int:
        return len(self._clients)


@dataclass(frozen=True, slots=True)
class Token:
    """A bearer token (None: send none), or why nothing may be sent (`error`)."""

    value: str | None = None
    error: str | None = None


def read_token(*, token_file: Path | None, bearer_token: str | None) -> Token:
    """The bearer token for this cycle (see the module docstring)."""
    if token_file is None:
        return Token(value=bearer_token or None)
    try:
        token = token_file.read_text(encoding='utf-8').strip()
    except (OSError, UnicodeDecodeError) as exc:
        return Token(error=f'bearer token file unreadable, nothing sent: {exc}')
    if not token:
        return Token(error=f'bearer token file {token_file} is empty, nothing sent')
    return Token(value=token)


def status_failure(*, status: int) -> tuple[ErrorReason, str] | None:
    """The reason and message for a status that is not 2xx; None for 2xx."""
    if 400 <= status <= 599:
        reason = ErrorReason.HTTP_4XX if status < 500 else ErrorReason.HTTP_5XX
        return reason, f'HTTP {status}'
    if not 200 <= status <= 299:
        return ErrorReason.BAD_RESPONSE, f'unexpected HTTP {status}'
    return None


def transport_failure(
    *, exc: Exception, timeout: float, awaited: str, where: str = ''
) -> tuple[ErrorReason, str]:
    """Classify one of `TRANSPORT_ERRORS`; `awaited` names what did not come in time.

    `where` (a URL, say) prefixes the message of an unreachable target.
    """
    if isinstance(exc, TimeoutError | httpx.TimeoutException):
        return ErrorReason.TIMEOUT, f'no {awaited} within {timeout}s: {exc!r}'
    return ErrorReason.UNREACHABLE, f'{where}: {exc!r}' if where else repr(exc)


@dataclass(frozen=True, slots=True)
class Failure:
    """Why a request gave no usable answer: the reason and a one-line message."""

    reason: ErrorReason
    message: str


def authorization(*, token: Token, url: str, allow_http: bool) -> dict[str, str] | Failure:
    """The Authorization header for `url`, none without a token, or why nothing may be sent.

    `token` is what `read_token` gave for the configured credentials; a token or a token file is
    refused for a URL that is not https unless `allow_http` (the configuration's explicit opt-in),
    and that refusal comes before the file's own problems: nothing is sent either way.
    """
    if token.value is None and token.error is None:
        return {}
    if not allow_http and not url.lower().startswith('https://'):
        return Failure(
            ErrorReason.UNREACHABLE,
            f'credentials are not sent in clear: {url} is not https, nothing sent '
            '(use https, or opt in with allow_http_credentials)',
        )
    if token.error is not None:
        return Failure(ErrorReason.UNREACHABLE, token.error)
    return {'Authorization': f'Bearer {token.value}'}


@dataclass(frozen=True, slots=True)
class Answer:
    """A complete answer: status, headers and the (decompressed) body, within the cap."""

    status: int
    headers: httpx.Headers
    body: bytes


Inspect = Callable[[int, httpx.Headers], Failure | None]
"""Looks at the status and headers before any of the body is read; a Failure stops there."""


async def fetch(
    *,
    client: httpx.AsyncClient,
    url: str,
    deadline: float,
    max_bytes: int,
    method: str = 'GET',
    headers: Mapping[str, str] | None = None,
    data: Mapping[str, str] | None = None,
    extensions: Mapping[str, object] | None = None,
    inspect: Inspect | None = None,
    awaited: str = 'answer',
    where: str = '',
) -> Answer | Failure:
    """One request, bounded in time and size; never raises (but for cancellation).

    - `deadline` (seconds) covers everything: connecting, TLS, sending, waiting for the headers
      and reading the whole body. A server that drips a byte at a time or streams without end
      cannot hold the request past it, as httpx's own timeouts (also set to `deadline`) are per
      read. Past it: TIMEOUT, "no complete {awaited} within {deadline}s", with how far it got.
    - `max_bytes` caps the body as received and as decompressed: a Content-Length above it fails
      before any of the body is read; otherwise reading stops as soon as the count passes it.
      Either way: BAD_RESPONSE, "body over {max_bytes} bytes". Only gzip and deflate bodies are
      accepted (only gzip is asked for); they are inflated here, chunk by chunk, never beyond the
      cap, so a small compressed body cannot expand into a large one in memory. Another
      encoding, or a compressed body that is corrupt or cut short, is BAD_RESPONSE.
    - `inspect` sees status and headers first (to refuse a status or a content type without
      reading the body); otherwise every status comes back as an `Answer` for the caller.
    - Transport errors are classified by `transport_failure` (`where` prefixes an unreachable
      target's message).
    Cancellation (an outer `asyncio.timeout`, say) goes through as usual; `within` is how several
    requests share one deadline without it.
    """
    progress = _Progress()
    try:
        async with asyncio.timeout(deadline):
            return await _read(
                client=client,
                request=(method, url, dict(headers or {}), data, dict(extensions or {})),
                deadline=deadline,
                max_bytes=max_bytes,
                inspect=inspect,
                progress=progress,
            )
    except (TimeoutError, httpx.TimeoutException):
        got = (
            'no response headers'
            if progress.received is None
            else f'{progress.received} bytes of the body received'
        )
        message = f'no complete {awaited} within {seconds(deadline)}s ({got})'
        return Failure(ErrorReason.TIMEOUT, message)
    except TRANSPORT_ERRORS as exc:
        return Failure(*transport_failure(exc=exc, timeout=deadline, awaited=awaited, where=where))


async def within(
    *,
    end: float,
    gate: asyncio.Semaphore,
    deadline: float,
    overall: str,
    work: Callable[[float], Awaitable[_T | Failure]],
) -> _T | Failure:
    """`work(d)` in its turn, ending by `end` (event-loop time), the deadline that several requests
    share (a cycle's read, a scrape, a scale-from-zero tick).

    Waits for a slot of `gate` until `end`; then `d` is `deadline` or the time left, whichever is
    shorter, for `work` to pass on to `fetch`. Past `end` without a slot: TIMEOUT, "not sent". A
    TIMEOUT of a request cut short by `end` says that `overall` (such as "the read deadline of
    15s") ran out.
    """
    loop = asyncio.get_running_loop()
    try:
        async with asyncio.timeout_at(end):
            await gate.acquire()
    except TimeoutError:
        return Failure(ErrorReason.TIMEOUT, f'not sent: {overall} ran out before a slot was free')
    try:
        left = end - loop.time()
        if left <= 0:
            return Failure(ErrorReason.TIMEOUT, f'not sent: {overall} ran out')
        result = await work(min(deadline, left))
    finally:
        gate.release()
    if isinstance(result, Failure) and result.reason is ErrorReason.TIMEOUT and left < deadline:
        return Failure(result.reason, f'{result.message}; {overall} ran out')
    return result


def seconds(value: float) -> str:
    """Seconds for a message: at most three decimals, no trailing zeros (2, 0.25, 0.412)."""
    return f'{value:.3f}'.rstrip('0').rstrip('.')


async def parse_off_loop(work: Callable[[], _T], *, size: int, worker: Worker | None = None) -> _T:
    """`work()`, in a worker thread when it handles `size` bytes or more (`OFF_LOOP_BYTES`):
    the caller's own `worker` when given, else one of the default executor's."""
    if size < OFF_LOOP_BYTES:
        return work()
    if worker is not None:
        return await worker.run(work)
    return await asyncio.to_thread(work)


@dataclass(slots=True)
class _Progress:
    received: int | None = None
    """Body bytes received so far; None until the headers are in."""


class _OverCap(Exception):
    pass


class _Inflater:
    """Bounded gzip/deflate decoding: never produces more than `limit` bytes in all."""

    def __init__(self, *, limit: int) -> None:
        # 32 + MAX_WBITS: a gzip or a zlib header, detected from the first bytes.
        self._inflate = zlib.decompressobj(wbits=32 + zlib.MAX_WBITS)
        self._room = limit

    def feed(self, data: bytes) -> bytes:
        pieces = []
        while data and not self._inflate.eof:
            piece = self._inflate.decompress(data, self._room + 1)
            self._room -= len(piece)
            if self._room < 0:
                raise _OverCap
            pieces.append(piece)
            data = self._inflate.unconsumed_tail
        return b''.join(pieces)

    def finish(self) -> None:
        if not self._inflate.eof:
            raise zlib.error('the compressed body ends early')


_IDENTITY = ('', 'identity')
_INFLATED = ('gzip', 'x-gzip', 'deflate')


async def _read(
    *,
    client: httpx.AsyncClient,
    request: tuple[str, str, dict[str, str], Mapping[str, str] | None, dict[str, object]],
    deadline: float,
    max_bytes: int,
    inspect: Inspect | None,
    progress: _Progress,
) -> Answer | Failure:
    method, url, headers, data, extensions = request
    headers.setdefault('Accept-Encoding', 'gzip')
    over = Failure(ErrorReason.BAD_RESPONSE, f'body over {max_bytes} bytes')
    async with client.stream(
        method, url, headers=headers, data=data, timeout=deadline, extensions=extensions
    ) as response:
        progress.received = 0
        if inspect is not None:
            failure = inspect(response.status_code, response.headers)
            if failure is not None:
                return failure
        declared = response.headers.get('Content-Length', '')
        if declared.isdigit() and int(declared) > max_bytes:
            return Failure(
                ErrorReason.BAD_RESPONSE,
                f'body over {max_bytes} bytes (Content-Length {declared}), not read',
            )
        encoding = response.headers.get('Content-Encoding', '').strip().lower()
        if encoding not in _IDENTITY + _INFLATED:
            return Failure(ErrorReason.BAD_RESPONSE, f'content encoding {encoding!r} not accepted')
        inflater = _Inflater(limit=max_bytes) if encoding in _INFLATED else None
        chunks = []
        size = 0
        try:
            async for raw in response.aiter_raw():
                size += len(raw)
                progress.received = size
                if size > max_bytes:
                    return over
                chunks.append(inflater.feed(raw) if inflater is not None else raw)
            if inflater is not None:
                inflater.finish()
        except _OverCap:
            return over
        except zlib.error as exc:
            return Failure(ErrorReason.BAD_RESPONSE, f'undecodable {encoding} body: {exc}')
        return Answer(status=response.status_code, headers=response.headers, body=b''.join(chunks))
