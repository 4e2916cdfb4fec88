"""Tests of the HTTP plumbing shared by the metric sources, against real loopback servers.

The servers that misbehave on purpose are `tests.support.raw_http`'s `RawServer`, whose answers are
written byte by byte: drip a body one byte at a time, stream without end, announce a
Content-Length it never sends. The source tests (Prometheus, pod scraping, scale-from-zero) use it
too.
"""

from __future__ import annotations

import asyncio
import gzip
import math
import socket
import ssl
import threading
import time
import zlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import httpx
import pytest
from aiohttp import web
from hypothesis import given
from hypothesis import strategies as st

from llmscaler.collect.http import (
    OFF_LOOP_BYTES,
    ORIGIN_IDLE,
    TRANSPORT_ERRORS,
    Answer,
    Failure,
    OriginClients,
    OwnedClient,
    TlsFiles,
    Token,
    authorization,
    check_bytes,
    check_seconds,
    client_ssl_context,
    fetch,
    parse_off_loop,
    read_token,
    seconds,
    ssl_context,
    status_failure,
    transport_failure,
    within,
)
from llmscaler.collect.prometheus.source import PrometheusConfig
from llmscaler.collect.readings import ErrorReason
from llmscaler.collect.scrape.source import ScrapeConfig
from llmscaler.devcluster import loopback
from tests.support.raw_http import Behaviour, RawServer, claims, drip, endless, response_head
from tests.support.waiting import eventually

# --- more answers of the misbehaving server (tests.support.raw_http)
# --------------------------------


def answer(
    body: bytes, *, status: int = 200, content_type: str = 'text/plain', **headers: str
) -> Behaviour:
    """A complete, well-formed answer."""

    async def behave(writer: asyncio.StreamWriter) -> None:
        fields = {'Content-Type': content_type, 'Content-Length': str(len(body))}
        fields.update({k.replace('_', '-'): v for k, v in headers.items()})
        writer.write(response_head(status, fields) + body)
        await writer.drain()

    return behave


def silent() -> Behaviour:
    """Reads the request and never answers."""

    async def behave(writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(3600)

    return behave


# --- TLS -----------------------------------------------------------------------------------------


def test_ssl_context_verifies_by_default() -> None:
    context = client_ssl_context(ca_file=None)
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert context.check_hostname


def test_ssl_context_insecure_skip_verify() -> None:
    context = client_ssl_context(ca_file=None, insecure_skip_verify=True)
    assert context.verify_mode == ssl.CERT_NONE
    assert not context.check_hostname


def test_missing_files_raise_at_construction(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        client_ssl_context(ca_file=tmp_path / 'absent-ca.pem')
    with pytest.raises(FileNotFoundError):
        client_ssl_context(ca_file=None, client_cert_file=tmp_path / 'absent-cert.pem')


@pytest.mark.parametrize(
    'make',
    [
        lambda **kw: PrometheusConfig(base_url='https://prometheus:9090', **kw),
        lambda **kw: ScrapeConfig(**kw),
    ],
    ids=['prometheus', 'scrape'],
)
def test_ssl_context_reads_a_readers_tls_fields(
    make: Callable[..., TlsFiles], tmp_path: Path
) -> None:
    context = ssl_context(config=make())
    assert (context.verify_mode, context.check_hostname) == (ssl.CERT_REQUIRED, True)
    context = ssl_context(config=make(insecure_skip_verify=True))
    assert (context.verify_mode, context.check_hostname) == (ssl.CERT_NONE, False)
    with pytest.raises(FileNotFoundError):
        ssl_context(config=make(ca_file=tmp_path / 'absent-ca.pem'))
    with pytest.raises(FileNotFoundError):
        ssl_context(config=make(client_cert_file=tmp_path / 'absent-cert.pem'))


# --- the owned client ----------------------------------------------------------------------------


def _never() -> ssl.SSLContext:
    raise AssertionError('a lent client keeps its own TLS settings')


async def test_a_lent_client_is_used_and_left_open() -> None:
    lent = httpx.AsyncClient()
    try:
        owned = OwnedClient(client=lent, verify=_never, timeout=1.0)
        assert owned.client is lent
        await owned.aclose()
        assert not lent.is_closed
    finally:
        await lent.aclose()


async def test_a_built_client_is_closed() -> None:
    built: list[ssl.SSLContext] = []

    def verify() -> ssl.SSLContext:
        built.append(client_ssl_context(ca_file=None))
        return built[-1]

    owned = OwnedClient(client=None, verify=verify, timeout=3.0)
    assert len(built) == 1
    assert owned.client.timeout == httpx.Timeout(3.0)
    await owned.aclose()
    assert owned.client.is_closed


# --- the bearer token ----------------------------------------------------------------------------


def test_without_a_file_the_configured_token_is_used() -> None:
    assert read_token(token_file=None, bearer_token='abc') == Token(value='abc')
    assert read_token(token_file=None, bearer_token=None) == Token()
    # An empty token is no token: no empty "Bearer " header.
    assert read_token(token_file=None, bearer_token='') == Token()


def test_the_file_wins_is_stripped_and_reread(tmp_path: Path) -> None:
    path = tmp_path / 'token'
    path.write_text('  first\n', encoding='utf-8')
    assert read_token(token_file=path, bearer_token='ignored') == Token(value='first')
    path.write_text('second\n', encoding='utf-8')
    assert read_token(token_file=path, bearer_token='ignored') == Token(value='second')


def test_an_empty_file_sends_nothing(tmp_path: Path) -> None:
    path = tmp_path / 'token'
    path.write_text(' \n', encoding='utf-8')
    token = read_token(token_file=path, bearer_token='fallback')
    assert token == Token(error=f'bearer token file {path} is empty, nothing sent')


@pytest.mark.parametrize('content', [None, b'\xff\xfe token'])
def test_an_unreadable_file_sends_nothing(tmp_path: Path, content: bytes | None) -> None:
    path = tmp_path / 'token'
    if content is not None:
        path.write_bytes(content)
    token = read_token(token_file=path, bearer_token='fallback')
    assert token.value is None
    assert token.error is not None
    assert token.error.startswith('bearer token file unreadable, nothing sent: ')


# --- status codes --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ('status', 'expected'),
    [
        (200, None),
        (204, None),
        (299, None),
        (100, (ErrorReason.BAD_RESPONSE, 'unexpected HTTP 100')),
        (302, (ErrorReason.BAD_RESPONSE, 'unexpected HTTP 302')),
        (399, (ErrorReason.BAD_RESPONSE, 'unexpected HTTP 399')),
        (400, (ErrorReason.HTTP_4XX, 'HTTP 400')),
        (499, (ErrorReason.HTTP_4XX, 'HTTP 499')),
        (500, (ErrorReason.HTTP_5XX, 'HTTP 500')),
        (599, (ErrorReason.HTTP_5XX, 'HTTP 599')),
        (600, (ErrorReason.BAD_RESPONSE, 'unexpected HTTP 600')),
    ],
)
def test_status_classes(status: int, expected: tuple[ErrorReason, str] | None) -> None:
    assert status_failure(status=status) == expected


@given(status=st.integers(min_value=100, max_value=999))
def test_property_only_2xx_is_not_a_failure(status: int) -> None:
    failure = status_failure(status=status)
    assert (failure is None) == (200 <= status <= 299)
    if failure is not None:
        assert str(status) in failure[1]
        assert (failure[0] is ErrorReason.HTTP_4XX) == (400 <= status <= 499)
        assert (failure[0] is ErrorReason.HTTP_5XX) == (500 <= status <= 599)


# --- transport failures, from real requests ------------------------------------------------------


@pytest.fixture
async def slow_server() -> AsyncIterator[str]:
    async def handle(request: web.Request) -> web.Response:
        await asyncio.sleep(1.0)
        return web.Response(text='late')

    app = web.Application()
    app.router.add_get('/', handle)
    served = await loopback.serve(app, shutdown_timeout=0.1)
    try:
        yield f'{served.url}/'
    finally:
        await served.close()


async def _failure(url: str, *, timeout: float) -> Exception:
    async with httpx.AsyncClient(timeout=timeout) as client:
        try:
            await client.get(url)
        except TRANSPORT_ERRORS as exc:
            return exc
    raise AssertionError('the request succeeded')


async def test_a_slow_answer_is_a_timeout(slow_server: str) -> None:
    exc = await _failure(slow_server, timeout=0.1)
    reason, message = transport_failure(exc=exc, timeout=0.1, awaited='answer', where='x')
    assert reason is ErrorReason.TIMEOUT
    # The `where` prefix is for unreachable targets only.
    assert message.startswith('no answer within 0.1s: ReadTimeout(')


def test_asyncio_timeouts_are_timeouts() -> None:
    reason, message = transport_failure(exc=TimeoutError(), timeout=2.0, awaited='complete page')
    assert (reason, message) == (
        ErrorReason.TIMEOUT,
        'no complete page within 2.0s: TimeoutError()',
    )


async def test_a_refused_connection_is_unreachable() -> None:
    with socket.socket() as probe:
        probe.bind(('127.0.0.1', 0))
        port = probe.getsockname()[1]
    url = f'http://127.0.0.1:{port}/'
    exc = await _failure(url, timeout=1.0)
    assert transport_failure(exc=exc, timeout=1.0, awaited='answer') == (
        ErrorReason.UNREACHABLE,
        repr(exc),
    )
    assert transport_failure(exc=exc, timeout=1.0, awaited='answer', where=url) == (
        ErrorReason.UNREACHABLE,
        f'{url}: {exc!r}',
    )


def chunked(body: bytes, *, size: int = 1000, **headers: str) -> Behaviour:
    """`body` in chunks of `size` bytes, without a Content-Length."""

    async def behave(writer: asyncio.StreamWriter) -> None:
        fields = {'Content-Type': 'text/plain', 'Transfer-Encoding': 'chunked'}
        fields.update({k.replace('_', '-'): v for k, v in headers.items()})
        writer.write(response_head(200, fields))
        for start in range(0, len(body), size):
            piece = body[start : start + size]
            writer.write(f'{len(piece):x}\r\n'.encode() + piece + b'\r\n')
        writer.write(b'0\r\n\r\n')
        await writer.drain()

    return behave


# --- fetch: the deadline -------------------------------------------------------------------------

DEADLINE = 0.6


async def timed_fetch(
    url: str, *, deadline: float = DEADLINE, max_bytes: int = 1 << 20, **kwargs: object
) -> tuple[Answer | Failure, float]:
    """`fetch` and its duration; the guard of 3 deadlines turns a hang into a test failure."""
    async with httpx.AsyncClient() as client:
        started = time.monotonic()
        result = await asyncio.wait_for(
            fetch(client=client, url=url, deadline=deadline, max_bytes=max_bytes, **kwargs),  # type: ignore[arg-type]
            timeout=3 * deadline,
        )
        return result, time.monotonic() - started


async def test_a_dripping_body_ends_at_the_deadline() -> None:
    # A byte every 0.2 s: httpx's per-read timeout (0.6 s) never fires, the total deadline does.
    async with RawServer(drip(every=0.2)) as server:
        result, took = await timed_fetch(server.url)
        assert isinstance(result, Failure)
        assert result.reason is ErrorReason.TIMEOUT
        assert result.message.startswith('no complete answer within 0.6s (')
        assert result.message.endswith(' bytes of the body received)')
        assert DEADLINE * 0.9 <= took < 2 * DEADLINE
        await eventually(lambda: server.dropped == 1, 'the server to see the client leave')


async def test_no_headers_by_the_deadline() -> None:
    async with RawServer(silent()) as server:
        result, took = await timed_fetch(server.url, awaited='page')
    assert result == Failure(
        ErrorReason.TIMEOUT, 'no complete page within 0.6s (no response headers)'
    )
    assert took < 2 * DEADLINE


# --- fetch: the size cap -------------------------------------------------------------------------


async def test_an_endless_body_stops_at_the_cap() -> None:
    async with RawServer(endless()) as server:
        result, took = await timed_fetch(server.url, max_bytes=256 * 1024)
        assert result == Failure(ErrorReason.BAD_RESPONSE, 'body over 262144 bytes')
        assert took < DEADLINE
        await eventually(lambda: server.dropped == 1, 'the server to see the client leave')


async def test_a_content_length_over_the_cap_is_refused_unread() -> None:
    # The body never comes: reading any of it would end in a timeout instead.
    async with RawServer(claims(10**6)) as server:
        result, took = await timed_fetch(server.url, max_bytes=1000)
    assert result == Failure(
        ErrorReason.BAD_RESPONSE, 'body over 1000 bytes (Content-Length 1000000), not read'
    )
    assert took < DEADLINE / 2


@pytest.mark.parametrize('framing', ['length', 'chunked'])
async def test_a_body_of_exactly_the_cap_is_read_one_more_byte_is_not(framing: str) -> None:
    cap = 5000
    for size, ok in ((cap, True), (cap + 1, False)):
        body = bytes(range(256)) * (size // 256) + b'z' * (size % 256)
        behaviour = answer(body) if framing == 'length' else chunked(body, size=999)
        async with RawServer(behaviour) as server:
            result, _ = await timed_fetch(server.url, max_bytes=cap)
        if ok:
            assert isinstance(result, Answer)
            assert (result.status, result.body) == (200, body)
        else:
            assert isinstance(result, Failure)
            assert result.reason is ErrorReason.BAD_RESPONSE
            assert result.message.startswith(f'body over {cap} bytes')


async def test_gzip_is_asked_for_and_inflated_within_the_cap() -> None:
    text = b'vllm:num_requests_waiting 3\n' * 1000
    async with RawServer(answer(gzip.compress(text), Content_Encoding='gzip')) as server:
        result, _ = await timed_fetch(server.url, max_bytes=len(text))
        assert isinstance(result, Answer)
        assert result.body == text
        assert server.seen[0].headers['accept-encoding'] == 'gzip'
    async with RawServer(answer(zlib.compress(text), Content_Encoding='deflate')) as server:
        result, _ = await timed_fetch(server.url, max_bytes=len(text))
        assert isinstance(result, Answer)
        assert result.body == text
    async with RawServer(answer(gzip.compress(text), Content_Encoding='gzip')) as server:
        result, _ = await timed_fetch(server.url, max_bytes=len(text) - 1)
    assert result == Failure(ErrorReason.BAD_RESPONSE, f'body over {len(text) - 1} bytes')


async def test_a_compressed_bomb_is_stopped_at_the_cap() -> None:
    # 64 MiB of zeros compress to about 64 KiB: under the cap as sent, far over it inflated.
    bomb = gzip.compress(b'\0' * (64 << 20), compresslevel=9)
    assert len(bomb) < 1 << 20
    async with RawServer(answer(bomb, Content_Encoding='gzip')) as server:
        result, _ = await timed_fetch(server.url, max_bytes=1 << 20)
    assert result == Failure(ErrorReason.BAD_RESPONSE, 'body over 1048576 bytes')


@pytest.mark.parametrize(
    ('body', 'encoding', 'message'),
    [
        (b'\x1f\x8b not gzip at all', 'gzip', 'undecodable gzip body: '),
        (gzip.compress(b'a' * 1000, mtime=0)[:-12], 'gzip', 'undecodable gzip body: '),
        (b'anything', 'br', "content encoding 'br' not accepted"),
        (b'anything', 'gzip, gzip', "content encoding 'gzip, gzip' not accepted"),
    ],
)
async def test_bad_encodings_are_bad_responses(body: bytes, encoding: str, message: str) -> None:
    async with RawServer(answer(body, Content_Encoding=encoding)) as server:
        result, _ = await timed_fetch(server.url)
    assert isinstance(result, Failure)
    assert result.reason is ErrorReason.BAD_RESPONSE
    assert result.message.startswith(message)


async def test_inspect_refuses_before_the_body() -> None:
    def no_5xx(status: int, headers: httpx.Headers) -> Failure | None:
        return Failure(ErrorReason.HTTP_5XX, f'HTTP {status}') if status >= 500 else None

    async def fails(writer: asyncio.StreamWriter) -> None:
        writer.write(response_head(503, {'Content-Length': '100'}))  # and no body
        await writer.drain()
        await asyncio.sleep(3600)

    async with RawServer(fails) as server:
        result, took = await timed_fetch(server.url, inspect=no_5xx)
    assert result == Failure(ErrorReason.HTTP_5XX, 'HTTP 503')
    assert took < DEADLINE / 2


async def test_other_statuses_come_back_with_their_body() -> None:
    async with RawServer(answer(b'{"error": "x"}', status=422)) as server:
        result, _ = await timed_fetch(server.url, method='POST', data={'query': 'up'})
        assert isinstance(result, Answer)
        assert (result.status, result.body) == (422, b'{"error": "x"}')
        (seen,) = server.seen
        assert (seen.method, seen.body) == ('POST', b'query=up')


async def test_a_refused_connection_is_a_failure_value() -> None:
    with socket.socket() as probe:
        probe.bind(('127.0.0.1', 0))
        port = probe.getsockname()[1]
    url = f'http://127.0.0.1:{port}/'
    result, _ = await timed_fetch(url, where=url)
    assert isinstance(result, Failure)
    assert result.reason is ErrorReason.UNREACHABLE
    assert result.message.startswith(f'{url}: ConnectError(')


# --- several requests sharing one deadline -------------------------------------------------------


async def test_within_gives_up_waiting_for_a_slot_at_the_end() -> None:
    loop = asyncio.get_running_loop()
    gate = asyncio.Semaphore(1)
    called: list[float] = []

    async def work(deadline: float) -> str | Failure:
        called.append(deadline)
        return 'done'

    async with gate:  # the only slot is taken
        started = loop.time()
        result = await within(
            end=started + 0.2, gate=gate, deadline=5.0, overall='the read deadline', work=work
        )
        took = loop.time() - started
    assert result == Failure(
        ErrorReason.TIMEOUT, 'not sent: the read deadline ran out before a slot was free'
    )
    assert called == []
    assert 0.15 < took < 0.6
    assert not gate.locked()  # the slot was given back


async def test_within_cuts_the_request_deadline_to_the_time_left() -> None:
    loop = asyncio.get_running_loop()
    async with RawServer(silent()) as server, httpx.AsyncClient() as client:
        given_deadlines: list[float] = []

        async def work(deadline: float) -> Answer | Failure:
            given_deadlines.append(deadline)
            return await fetch(client=client, url=server.url, deadline=deadline, max_bytes=100)

        started = loop.time()
        result = await within(
            end=started + 0.3,
            gate=asyncio.Semaphore(1),
            deadline=5.0,
            overall='the read deadline of 0.3s',
            work=work,
        )
        took = loop.time() - started
    assert isinstance(result, Failure)
    assert result.reason is ErrorReason.TIMEOUT
    assert result.message.endswith('(no response headers); the read deadline of 0.3s ran out')
    (deadline,) = given_deadlines
    assert 0.2 < deadline <= 0.3
    assert took < 0.9


async def test_within_passes_the_full_deadline_when_there_is_time() -> None:
    loop = asyncio.get_running_loop()
    given_deadlines: list[float] = []

    async def work(deadline: float) -> str | Failure:
        given_deadlines.append(deadline)
        return Failure(ErrorReason.TIMEOUT, 'its own')

    result = await within(
        end=loop.time() + 60, gate=asyncio.Semaphore(1), deadline=2.0, overall='x', work=work
    )
    # A timeout of the request's own deadline is not blamed on the shared one.
    assert result == Failure(ErrorReason.TIMEOUT, 'its own')
    assert given_deadlines == [2.0]


# --- credentials ---------------------------------------------------------------------------------

HTTP_URL = 'http://prometheus:9090/api/v1/query'
HTTPS_URL = 'https://prometheus:9090/api/v1/query'


def test_without_credentials_every_scheme_is_fine() -> None:
    assert authorization(token=Token(), url=HTTP_URL, allow_http=False) == {}
    assert authorization(token=Token(), url=HTTPS_URL, allow_http=False) == {}


def test_a_token_goes_over_https() -> None:
    header = {'Authorization': 'Bearer s3cret'}
    assert authorization(token=Token(value='s3cret'), url=HTTPS_URL, allow_http=False) == header
    assert authorization(token=Token(value='s3cret'), url='HTTPS://x/', allow_http=False) == header


@pytest.mark.parametrize(
    'token', [Token(value='s3cret'), Token(error='bearer token file x is empty, nothing sent')]
)
def test_credentials_are_refused_for_plain_http_without_the_opt_in(token: Token) -> None:
    # A token file counts as credentials even when it cannot be read: http is refused first.
    assert authorization(token=token, url=HTTP_URL, allow_http=False) == Failure(
        ErrorReason.UNREACHABLE,
        f'credentials are not sent in clear: {HTTP_URL} is not https, nothing sent '
        '(use https, or opt in with allow_http_credentials)',
    )


def test_the_opt_in_sends_the_token_over_http() -> None:
    assert authorization(token=Token(value='s3cret'), url=HTTP_URL, allow_http=True) == {
        'Authorization': 'Bearer s3cret'
    }


def test_an_unreadable_token_file_over_https_sends_nothing() -> None:
    token = Token(error='bearer token file x is empty, nothing sent')
    assert authorization(token=token, url=HTTPS_URL, allow_http=False) == Failure(
        ErrorReason.UNREACHABLE, 'bearer token file x is empty, nothing sent'
    )


# --- parsing off the event loop ------------------------------------------------------------------


async def test_large_bodies_are_parsed_in_a_worker_thread() -> None:
    def where() -> int:
        return threading.get_ident()

    here = threading.get_ident()
    assert await parse_off_loop(where, size=OFF_LOOP_BYTES - 1) == here
    assert await parse_off_loop(where, size=OFF_LOOP_BYTES) != here


# --- settings checks -----------------------------------------------------------------------------


@given(value=st.one_of(st.floats(), st.integers(), st.booleans()))
def test_property_only_positive_finite_seconds_pass(value: float) -> None:
    valid = not isinstance(value, bool) and math.isfinite(value) and value > 0
    if valid:
        check_seconds(timeout=value)
    else:
        with pytest.raises(ValueError, match=r'^timeout must be a positive number of seconds'):
            check_seconds(timeout=value)


@given(value=st.one_of(st.integers(), st.floats(), st.booleans()))
def test_property_only_whole_byte_counts_of_at_least_one_pass(value: int) -> None:
    valid = type(value) is int and value >= 1
    if valid:
        check_bytes(max_bytes=value)
    else:
        with pytest.raises(ValueError, match=r'^max_bytes must be a whole number of bytes'):
            check_bytes(max_bytes=value)


def test_seconds_in_messages() -> None:
    assert [seconds(x) for x in (2.0, 0.25, 0.41234, 15.0, 0.0004)] == [
        '2',
        '0.25',
        '0.412',
        '15',
        '0',
    ]


async def test_a_client_per_origin_kept_while_read_and_closed_once_idle() -> None:
    clients = OriginClients(client=None, verify=ssl.create_default_context, timeout=1.0)
    try:
        a = clients.client_for(url='http://10.0.0.1:8000/metrics', now=0.0)
        assert clients.client_for(url='http://10.0.0.1:8000/other', now=30.0) is a
        b = clients.client_for(url='http://10.0.0.2:8000/metrics', now=30.0)
        tls = clients.client_for(url='https://10.0.0.1:8000/metrics', now=30.0)
        assert len({id(a), id(b), id(tls)}) == 3
        assert len(clients) == 3
        await clients.forget_idle(now=30.0 + ORIGIN_IDLE)  # each read at 30 s: none idle
        assert len(clients) == 3
        clients.client_for(url='http://10.0.0.2:8000/metrics', now=60.0)
        await clients.forget_idle(now=30.0 + ORIGIN_IDLE + 1)
        assert len(clients) == 1  # the two origins last read at 30 s are closed
        assert a.is_closed
        assert tls.is_closed
        assert not b.is_closed
        assert clients.client_for(url='http://10.0.0.1:8000/metrics', now=100.0) is not a
    finally:
        await clients.aclose()
    assert b.is_closed
    assert len(clients) == 0


async def test_a_lent_client_serves_every_origin_and_is_never_closed() -> None:
    async with httpx.AsyncClient() as lent:
        called: list[bool] = []

        def verify() -> ssl.SSLContext:
            called.append(True)
            return ssl.create_default_context()

        clients = OriginClients(client=lent, verify=verify, timeout=1.0)
        assert clients.client_for(url='http://10.0.0.1:8000/m', now=0.0) is lent
        assert clients.client_for(url='https://10.0.0.2:9000/m', now=0.0) is lent
        await clients.forget_idle(now=1e6)
        await clients.aclose()
        assert not lent.is_closed
        assert called == []
