"""`devcluster.loopback`: an aiohttp application served on 127.0.0.1."""

from __future__ import annotations

import httpx
import pytest
from aiohttp import web

from llmscaler.devcluster import loopback


def hello_app() -> web.Application:
    async def hello(request: web.Request) -> web.Response:
        return web.Response(text='hello')

    app = web.Application()
    app.router.add_get('/', hello)
    return app


async def test_serves_on_a_free_loopback_port_until_closed() -> None:
    served = await loopback.serve(hello_app())
    assert served.url == f'http://127.0.0.1:{served.port}'
    assert served.port > 0
    async with httpx.AsyncClient() as client:
        assert (await client.get(served.url + '/')).text == 'hello'
        await served.close()
        await served.close()  # idempotent
        with pytest.raises(httpx.ConnectError):
            await client.get(served.url + '/')


async def test_a_port_in_use_raises_and_leaves_nothing_running() -> None:
    first = await loopback.serve(hello_app())
    try:
        with pytest.raises(OSError, match='address already in use'):
            await loopback.serve(hello_app(), port=first.port)
    finally:
        await first.close()
