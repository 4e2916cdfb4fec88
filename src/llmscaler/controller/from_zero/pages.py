"""The EPP pages scale-from-zero reads: the flow-control queue per model, within one deadline.

Why: scale-from-zero must see a queued request within a tick (100 ms), so it reads the gateway's
(EPP) pages itself rather than through Prometheus. Reading them is a job of its own: clients kept
alive per EPP, one deadline for all the pages of a tick, the scrape configuration's TLS and
limits; `controller.from_zero.loop` decides what to wake from what this reads.

Reading the pages: the same `collect.scrape.source.fetch_page` as the pod scraper, with the scrape
configuration (`ScrapeConfig`: CA, client certificate, server name, the bearer token sent over
https only unless `allow_http_credentials`, the page cap `max_page_bytes`); each EPP origin gets
an HTTP client of its own, kept alive between ticks and closed once unread for a minute. Only the
deadline is this reader's own: `timeout` seconds (1 by default) for all the pages of a tick
together, connecting, waiting for a free slot (`concurrency` fetches in flight) and reading
included. So a read ends within `timeout` plus the parsing of what came in (bounded by the cap;
a large page is parsed in a worker thread), however an EPP misbehaves.

What it computes: per (model, namespace of the page), `EppPages.read` the sum of the
`inference_extension_flow_control_queue_size` samples above 0 and when each was first seen, for
scale-from-zero; `EppPages.arrivals` the requests arrived so far (the successful
`inference_extension_scheduler_attempts_total`, requests sent to a replica, plus those queued)
and queued, for the fast path for bursts (`controller.from_zero.bursts`), which counts on the
same pages every tick: a namespace with a page unread has no count that tick, as a sum without
one page would read as a fall and then a burst. Within `EppPages.one_tick()`, the two readers
share each page: a page is fetched and parsed once per tick, however many readers ask for it
(a namespace with an idle model and a busy one was read twice, ten times a second); outside
that block every read fetches afresh. A wake's `/scale` write goes first (`EppPages.writing`):
while one is in flight, fetches not yet sent wait for it, until `WRITE_FIRST` seconds after the
tick's first write at most. On a real control plane sharing two cores with 250 EPPs, the wake's
p99 had followed the pages the loop handled while the write was out.

What fails: a page that cannot be fetched (refused, too slow, over the cap, a bad status or
content type, a token refused for plain http) or parsed is one `SourceError` in the result,
logged at debug; nothing raises. A page over one of the scrape configuration's page caps (its
line length, labels per sample, series per page or series characters: `ScrapeConfig`) is refused
whole, a BAD_RESPONSE naming the EPP pod and the cap: its queues count as unread, not as empty.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Iterator, Sequence

import httpx

from llmscaler.clock import Clock
from llmscaler.collect import http
from llmscaler.collect.exposition import EPP_FAMILIES, Page, Parser
from llmscaler.collect.http import ssl_context
from llmscaler.collect.readings import ErrorReason, SourceError
from llmscaler.collect.scrape.gateway import ATTEMPTS
from llmscaler.collect.scrape.source import ScrapeConfig, ScrapeTarget, fetch_page

log = logging.getLogger('llmscaler.controller.from_zero.loop')

QUEUE_SIZE = 'inference_extension_flow_control_queue_size'
WRITE_FIRST = 0.05
"""Seconds a fetch not yet sent waits for a wake's write in flight (`EppPages.writing`)."""
TARGET_MODEL = 'target_model_name'


Queues = tuple[dict[tuple[str, str], float], dict[tuple[str, str], float], list[SourceError]]
"""Queue sizes by (model, namespace), when each was first seen (monotonic), the pages' failures."""
Arrivals = tuple[dict[tuple[str, str], tuple[float, float]], list[SourceError]]
"""(requests arrived so far, queued) by (model, namespace), the pages' failures."""


class EppPages:
    """The reader; `client`, when given, is used for every page instead of one built per origin
    from `scrape`'s TLS settings, and is not closed here."""

    def __init__(
        self,
        *,
        clock: Clock,
        scrape: ScrapeConfig,
        timeout: float,
        concurrency: int,
        client: httpx.AsyncClient | None,
    ) -> None:
        http.check_seconds(timeout=timeout)
        self._clock = clock
        self._gate = asyncio.Semaphore(max(1, concurrency))
        self._timeout = timeout
        self._scrape = scrape
        # Every EPP is read every tick, so each keeps its connection alive, in a client of its
        # own (`http.OriginClients`).
        self._clients = http.OriginClients(
            client=client, verify=lambda: ssl_context(config=scrape), timeout=timeout
        )
        self._parser = Parser(families=EPP_FAMILIES, limits=scrape.page_limits())
        # The pages of the tick in progress (`one_tick`), by target; None outside a tick.
        self._tick: dict[ScrapeTarget, asyncio.Future[tuple[float, Page] | SourceError]] | None
        self._tick = None
        self._writes = 0
        self._no_writes = asyncio.Event()
        self._no_writes.set()
        # Loop time until which fetches wait for writes in flight; set by a tick's first write.
        self._pause_end: float | None = None

    @contextlib.asynccontextmanager
    async def writing(self) -> AsyncIterator[None]:
        """Within the block (a wake's `/scale` write), fetches not yet sent wait while writes
        are in flight, until `WRITE_FIRST` seconds after the tick's first write at most: a
        wake's answer must not queue behind pages on the loop, and a tick of many wakes (a burst)
        must not stall its reads for longer than that."""
        if self._pause_end is None:
            self._pause_end = asyncio.get_running_loop().time() + WRITE_FIRST
        self._writes += 1
        self._no_writes.clear()
        try:
            yield
        finally:
            self._writes -= 1
            if self._writes == 0:
                self._no_writes.set()

    @contextlib.contextmanager
    def one_tick(self) -> Iterator[None]:
        """Within the block, each page is read once, its first reader's fetch shared by the
        others (they wait for it within their own deadline); pages are read afresh after."""
        self._tick = {}
        self._pause_end = None
        try:
            yield
        finally:
            self._tick = None

    def end(self) -> float:
        """The loop time by which a read starting now must be done."""
        return asyncio.get_running_loop().time() + self._timeout

    async def aclose(self) -> None:
        """Close the HTTP clients built here."""
        await self._clients.aclose()

    async def forget_idle(self) -> None:
        """Close the clients of EPPs not read for a minute (EPPs gone)."""
        await self._clients.forget_idle(now=self._clock.monotonic())

    def token(self) -> http.Token:
        return http.read_token(
            token_file=self._scrape.token_file, bearer_token=self._scrape.bearer_token
        )

    async def read(
        self, targets: Sequence[ScrapeTarget], *, token: http.Token, end: float
    ) -> Queues:
        """Queue sizes by (model, namespace of the page), when each was first seen, failures."""
        sizes: dict[tuple[str, str], float] = {}
        seen: dict[tuple[str, str], float] = {}
        errors: list[SourceError] = []
        for target, page in await self._pages(targets, token=token, end=end):
            if isinstance(page, SourceError):
                errors.append(page)
                continue
            read_at, parsed = page
            for sample in parsed.samples:
                if sample.name != QUEUE_SIZE:
                    continue
                model = sample.label(TARGET_MODEL)
                if not model or not sample.value > 0:
                    continue
                key = (model, target.namespace)
                sizes[key] = sizes.get(key, 0.0) + sample.value
                seen[key] = min(seen.get(key, read_at), read_at)
        return sizes, seen, errors

    async def arrivals(
        self, targets: Sequence[ScrapeTarget], *, token: http.Token, end: float
    ) -> Arrivals:
        """Requests arrived so far and queued, by (model, namespace of the page), from pages
        that were all read: a namespace with a page unread this time has no count."""
        arrived: dict[tuple[str, str], float] = {}
        queued: dict[tuple[str, str], float] = {}
        unread: set[str] = set()
        errors: list[SourceError] = []
        for target, page in await self._pages(targets, token=token, end=end):
            if isinstance(page, SourceError):
                errors.append(page)
                unread.add(target.namespace)
                continue
            for sample in page[1].samples:
                model = sample.label(TARGET_MODEL)
                if not model or not sample.value >= 0:
                    continue
                key = (model, target.namespace)
                if sample.name == ATTEMPTS and sample.label('status') == 'success':
                    arrived[key] = arrived.get(key, 0.0) + sample.value
                elif sample.name == QUEUE_SIZE:
                    queued[key] = queued.get(key, 0.0) + sample.value
        counts = {
            key: (arrived.get(key, 0.0) + queued.get(key, 0.0), queued.get(key, 0.0))
            for key in sorted({*arrived, *queued})
            if key[1] not in unread
        }
        return counts, errors

    async def _pages(
        self, targets: Sequence[ScrapeTarget], *, token: http.Token, end: float
    ) -> list[tuple[ScrapeTarget, tuple[float, Page] | SourceError]]:
        pages = await asyncio.gather(*(self._shared(t, token=token, end=end) for t in targets))
        for target, page in zip(targets, pages, strict=True):
            if isinstance(page, SourceError):
                log.debug('EPP %s/%s unread: %s', target.namespace, target.pod, page.message)
        return list(zip(targets, pages, strict=True))

    async def _shared(
        self, target: ScrapeTarget, *, token: http.Token, end: float
    ) -> tuple[float, Page] | SourceError:
        """The page of `target`: this tick's when another reader has asked for it already."""
        if self._tick is None:
            return await self._fetch(target, token=token, end=end)
        fetching = self._tick.get(target)
        if fetching is None:
            fetching = asyncio.ensure_future(self._fetch(target, token=token, end=end))
            self._tick[target] = fetching
        # Shielded: a reader given up on must not cancel the fetch another reader waits for.
        return await asyncio.shield(fetching)

    async def _fetch(
        self, target: ScrapeTarget, *, token: http.Token, end: float
    ) -> tuple[float, Page] | SourceError:
        async def get(deadline: float) -> bytes | http.Failure:
            pause = (self._pause_end or 0.0) - asyncio.get_running_loop().time()
            if not self._no_writes.is_set() and pause > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._no_writes.wait(), min(pause, deadline))
            return await fetch_page(
                client=self._clients.client_for(url=target.url, now=self._clock.monotonic()),
                target=target,
                config=self._scrape,
                token=token,
                deadline=deadline,
            )

        body = await http.within(
            end=end,
            gate=self._gate,
            deadline=self._timeout,
            overall=f'the tick deadline of {http.seconds(self._timeout)}s',
            work=get,
        )
        if isinstance(body, http.Failure):
            return SourceError(target.url, body.reason, body.message)
        read_at = self._clock.monotonic()
        page = await http.parse_off_loop(lambda: self._parser.parse(page=body), size=len(body))
        if page.refused is not None:
            message = f'page of EPP pod {target.namespace}/{target.pod} refused: {page.refused}'
            return SourceError(target.url, ErrorReason.BAD_RESPONSE, message)
        return read_at, page
