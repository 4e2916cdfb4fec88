"""Serving the pages of the `pages` campaign: in process, or from a loopback HTTP server.

Why: the campaign must run the pod-scraping source's own code (fetch with its deadline, size cap
and decompression, parsing, windows) on 100,000 pages in minutes, which real sockets do not
allow; and it must show that the same holds over real HTTP. `InProcess` is an httpx transport
that answers from a table by URL (the source's client streams the body as from a socket);
`Loopback` serves the same table from an aiohttp server on 127.0.0.1. `Scraper` is a source with
the server its pages come from, and reads one input's reading the way the controller does:
history scrapes, the scrape at `now`, then `read`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

import httpx
from aiohttp import web

from fuzz_pages_content import CAP, MODEL, NAMESPACE, Answer
from llmscaler.collect.readings import ModelScope, Reading
from llmscaler.collect.scrape.source import PodScrapeSource, ScrapeConfig, ScrapeTarget
from llmscaler.devcluster import loopback

RETENTION = 100.0
"""The request count's retention: both history scrapes are older than `now` minus this."""
SCRAPE = ScrapeConfig(timeout=2.0, scrape_deadline=5.0, max_page_bytes=CAP)


class _Body(httpx.AsyncByteStream):
    def __init__(self, data: bytes) -> None:
        self._data = data

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for start in range(0, len(self._data), 65536):
            yield self._data[start : start + 65536]


class InProcess(httpx.AsyncBaseTransport):
    """Answers from a table by URL; the source's fetch code runs as over a socket."""

    def __init__(self) -> None:
        self.answers: dict[str, Answer] = {}

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        answer = self.answers[str(request.url)]
        return httpx.Response(answer.status, headers=answer.headers, stream=_Body(answer.body))


class Loopback:
    """The same answers from a real aiohttp server on 127.0.0.1."""

    def __init__(self) -> None:
        self.answers: dict[str, Answer] = {}
        self.port = 0
        self._served: loopback.Served | None = None

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get('/{pod}/metrics', self._serve)
        self._served = await loopback.serve(app)
        self.port = self._served.port

    async def stop(self) -> None:
        if self._served is not None:
            await self._served.close()

    def url(self, path: str) -> str:
        return path.replace('http://fuzz.invalid', f'http://127.0.0.1:{self.port}')

    async def _serve(self, request: web.Request) -> web.Response:
        answer = self.answers[f'http://fuzz.invalid{request.path}']
        return web.Response(body=answer.body, status=answer.status, headers=answer.headers)


class Scraper:
    """A pod-scraping source and the server its pages come from.

    The in-process one lives for the whole campaign, as a controller's source does: its parsers
    remember label sets across inputs. Inputs are 4,000 s apart, more than any window's horizon,
    so nothing one input scraped is left in a window when the next begins.
    """

    def __init__(self, *, server: InProcess | Loopback, client: httpx.AsyncClient | None) -> None:
        self.server = server
        self.shown: list[ScrapeTarget] = []
        self.source = PodScrapeSource(config=SCRAPE, targets_fn=lambda: self.shown, client=client)

    async def read(
        self,
        *,
        targets: Sequence[ScrapeTarget],
        history: Sequence[dict[str, Answer]],
        final: dict[str, Answer],
        now: float,
    ) -> Reading:
        """Scrape the first target at now-130 and now-30 (one per `history` table), every target
        at `now` (`final`), and read the model's figures at `now`."""
        if isinstance(self.server, Loopback):
            targets = tuple(
                ScrapeTarget(t.namespace, t.pod, self.server.url(t.url), t.kind, t.model_name)
                for t in targets
            )
        for when, answers in zip((now - 130, now - 30), history, strict=False):
            self.server.answers = answers
            self.shown[:] = targets[:1]
            await self.source.scrape(now=when)
        self.server.answers = final
        self.shown[:] = targets
        await self.source.scrape(now=now)
        scope = (ModelScope(model_id=MODEL, namespace=NAMESPACE, retention_period=RETENTION),)
        return await self.source.read(scope=scope, now=now)
