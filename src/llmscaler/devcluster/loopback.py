"""An aiohttp application served on 127.0.0.1, for the fake cluster, the tests and the benchmarks.

Why: the fake API server, the gateways, the slow servers and every test or benchmark stand-in for
Prometheus, an EPP or a pod start an aiohttp application the same way: an `AppRunner` without an
access log, one TCP site on the loopback interface (an ephemeral port unless one is asked for;
another address where the real API server must reach it through an EndpointSlice), optionally
with TLS, and the port the system chose read back. One copy keeps them alike.

What fails: a port already in use raises OSError from `serve`; `Served.close` is idempotent.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass

from aiohttp import web

HOST = '127.0.0.1'


@dataclass(slots=True)
class Served:
    """A running application: its port and base URL (`http://127.0.0.1:PORT`, or https)."""

    port: int
    url: str
    _runner: web.AppRunner | None

    async def close(self) -> None:
        """Stop serving (waits up to the runner's shutdown timeout for open requests)."""
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()


async def serve(
    app: web.Application,
    *,
    port: int = 0,
    tls: ssl.SSLContext | None = None,
    shutdown_timeout: float = 1.0,
    host: str = HOST,
) -> Served:
    """Serve `app` on `host`:`port` (0: a free port the system picks); `host` is 127.0.0.1
    unless the server must be reached through an EndpointSlice (`devcluster.host`)."""
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=shutdown_timeout)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port, ssl_context=tls).start()
    except BaseException:
        await runner.cleanup()
        raise
    bound = int(runner.addresses[0][1])
    scheme = 'https' if tls is not None else 'http'
    return Served(port=bound, url=f'{scheme}://{host}:{bound}', _runner=runner)
