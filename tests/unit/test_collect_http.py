"""Tests of the HTTP plumbing shared by the metric sources, against real loopback servers."""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from aiohttp import web
from hypothesis import given
from hypothesis import strategies as st

from llmscaler.collect.http import (
    TRANSPORT_ERRORS,
    OwnedClient,
    Token,
    client_ssl_context,
    read_token,
    status_failure,
    transport_failure,
)
from llmscaler.collect.types import ErrorReason

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
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, '127.0.0.1', 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f'http://127.0.0.1:{port}/'
    finally:
        await runner.cleanup()


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
