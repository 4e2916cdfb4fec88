"""The scale-from-zero loop: wake the cheapest variant of an idle model as soon as requests queue.

Why: the main cycle runs every 30 s; a request waiting on a model with no replica cannot wait that
long. This loop (every `interval`, 100 ms by default, seed 000 "Scale-from-Zero") looks only at
models whose variants are all at zero replicas, reads the gateway's (EPP) flow-control queue
straight from the EPP pods (not through Prometheus, whose scrape interval alone is longer than
the budget), and when the queue of such a model holds a request it asks the pure
`enforce.scale_from_zero.wake` which variant to wake (the cheapest one allowed to run) and writes
`/scale` for it.

Which EPP pages: with InferencePools in the cluster (`pools_fn`, see `controller.pools`), a
model's queue is read from the EPP pages of its own pools only, each pool's page counting only for
the models of that pool, and a model is woken as soon as all its pools' pages are in (the other
pools' pages may still be on their way). Without pools, the pages of `epp_fn` (the EPP pods of
`--epp-selector`) are read and summed per model and namespace.

What it measures: the time from the EPP page that showed the queue to the `/scale` write that
answered, into `ControllerMetrics.from_zero` (the `llmscaler_scale_from_zero_seconds` histogram).

Reading the pages: the same `collect.scrape.fetch_page` as the pod scraper, with the scrape
configuration (`ScrapeConfig`: CA, client certificate, server name, the bearer token sent over
https only unless `allow_http_credentials`, the page cap `max_page_bytes`; the URLs, with
`epp_scheme`, come from `epp_fn`); each EPP origin gets an HTTP client of its own, kept alive
between ticks and closed once unread for a minute. Only the deadline is this loop's own: `timeout`
seconds (1 by default) for all the pages of a tick together, connecting, waiting for a free slot
and reading included. So a tick ends within `timeout` plus the parsing of what came in (bounded by
the cap; a large page is parsed in a worker thread) plus the `/scale` writes, however an EPP
misbehaves.

What fails and how it is treated: an EPP page that cannot be fetched (refused, too slow, over the
cap, a bad status or content type, a token refused for plain http) or parsed is skipped for this
tick (logged at debug, and listed in `errors` until the next tick that reads pages; the next tick
retries), so a broken EPP wakes nothing. The `/scale` write is one merge patch carrying the
resourceVersion of the cached copy that showed zero replicas (`ScaleClient.scale_at`): if the
target changed since (the main cycle or a person moved it), the API server answers 409 and
nothing is written. A model just woken (or whose write failed) is not woken again, through any of
its variants, for `quiet` seconds, the time the informer needs to see the new replica count.
`concurrency` bounds the page fetches in flight, and the writes in flight, each
(SCALE_FROM_ZERO_ENGINE_MAX_CONCURRENCY); a write never waits for a slot behind pages.
Nothing here raises out of `run()`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import httpx

from llmscaler.clock import Clock
from llmscaler.collect import http
from llmscaler.collect.exposition import EPP_FAMILIES, Page, Parser
from llmscaler.collect.scrape import ScrapeConfig, ScrapeTarget, fetch_page, ssl_context
from llmscaler.collect.types import SourceError
from llmscaler.controller.publish import ControllerMetrics
from llmscaler.controller.world import VariantEntry, World
from llmscaler.enforce.scale_from_zero import REASON, Wake, wake
from llmscaler.kube.client import ObjectRef
from llmscaler.kube.events import EventRecorder
from llmscaler.kube.scale import ScaleClient, ScaleOutcome
from llmscaler.model import PoolMetrics, Variant

log = logging.getLogger(__name__)

QUEUE_SIZE = 'inference_extension_flow_control_queue_size'
_CLIENT_IDLE = 60.0
TARGET_MODEL = 'target_model_name'


_Queues = tuple[dict[tuple[str, str], float], dict[tuple[str, str], float], list[SourceError]]


@dataclass(frozen=True, slots=True)
class PoolPlan:
    """Where the queues come from: the InferencePool datastore, or the EPP selector.

    `model_pools` ((namespace, model_id) → pool keys) is None while no pool exists: the pages of
    `epp_fn` are read then. Otherwise a model's queue is read from its pools' EPP pages only
    (`targets`: pool key → pages), and a page counts only for the models of its pool.
    """

    model_pools: Mapping[tuple[str, str], tuple[str, ...]] | None
    targets: Mapping[str, tuple[ScrapeTarget, ...]]


@dataclass(frozen=True, slots=True)
class Woken:
    """One wake that was written: the variant, and seconds from queue seen to /scale written."""

    variant: str
    namespace: str
    model_id: str
    seconds: float
    target: int
    queue_size: float
    regarding: ObjectRef
    """The VariantAutoscaling, which the ScaledFromZero event is about."""


class FromZero:
    """The loop; `world_fn` gives the current variants, `epp_fn` the EPP pods to read.

    `scrape` is the configuration the EPP pages are read with (TLS, token, the credential rule,
    the page cap): the controller passes the pod scraper's, so that both read the EPP alike; the
    default reads plain pages without credentials. `timeout` (seconds, positive) bounds the reads
    of one tick; `client`, when given, is used instead of one built from `scrape`'s TLS settings
    and is not closed here.
    """

    def __init__(
        self,
        *,
        clock: Clock,
        world_fn: Callable[[], World],
        epp_fn: Callable[[], Sequence[ScrapeTarget]],
        scale: ScaleClient,
        events: EventRecorder | None,
        metrics: ControllerMetrics,
        interval: float = 0.1,
        concurrency: int = 10,
        timeout: float = 1.0,
        quiet: float = 5.0,
        scrape: ScrapeConfig | None = None,
        client: httpx.AsyncClient | None = None,
        pools_fn: Callable[[], PoolPlan] | None = None,
    ) -> None:
        http.check_seconds(timeout=timeout)
        config = scrape if scrape is not None else ScrapeConfig()
        self._clock = clock
        self._world_fn = world_fn
        self._epp_fn = epp_fn
        self._pools_fn = pools_fn
        self._scale = scale
        self._events = events
        self._metrics = metrics
        self._interval = interval
        self._gate = asyncio.Semaphore(max(1, concurrency))
        # Writes have their own slots: a wake must not queue behind the pages still to read.
        self._write_gate = asyncio.Semaphore(max(1, concurrency))
        self._quiet = quiet
        self._timeout = timeout
        self._scrape = config
        # Every EPP is read every tick, so each keeps its connection alive, in a client of its
        # own: one pool holding hundreds of connections scans them all on every request.
        self._owns_client = client is None
        self._http = http.OwnedClient(
            client=client, verify=lambda: ssl_context(config=config), timeout=timeout
        )
        self._tls = ssl_context(config=config) if client is None else None
        self._clients: dict[str, tuple[httpx.AsyncClient, float]] = {}
        self._parser = Parser(families=EPP_FAMILIES)
        self._recent: dict[str, float] = {}
        self._errors: tuple[SourceError, ...] = ()

    async def aclose(self) -> None:
        """Close the HTTP clients built here."""
        clients = [c for c, _ in self._clients.values()]
        self._clients.clear()
        await asyncio.gather(*(c.aclose() for c in clients), self._http.aclose())

    def _client_for(self, url: str) -> httpx.AsyncClient:
        """The client of the page's origin (the lent client for every page, when one was lent)."""
        if self._tls is None:
            return self._http.client
        origin = url.split('/', 3)[2]
        now = self._clock.monotonic()
        found = self._clients.get(origin)
        client = found[0] if found is not None else None
        if client is None:
            client = httpx.AsyncClient(verify=self._tls, timeout=self._timeout)
        self._clients[origin] = (client, now)
        return client

    async def _forget_clients(self) -> None:
        """Close the clients of origins not read for `_CLIENT_IDLE` seconds (EPPs gone)."""
        now = self._clock.monotonic()
        idle = [k for k, (_, used) in self._clients.items() if now - used > _CLIENT_IDLE]
        closing = [self._clients.pop(k)[0] for k in idle]
        await asyncio.gather(*(c.aclose() for c in closing))

    @property
    def errors(self) -> tuple[SourceError, ...]:
        """The EPP pages the last tick that read pages could not use, sorted by URL."""
        return self._errors

    async def run(self) -> None:
        """Tick every `interval` until cancelled."""
        while True:
            started = self._clock.monotonic()
            try:
                await self.tick()
            except Exception:  # a bug here must not stop scale-from-zero for good
                log.exception('scale-from-zero tick failed')
                self._metrics.error(component='scale_from_zero', error_type='tick')
            elapsed = self._clock.monotonic() - started
            await self._clock.sleep(max(0.0, self._interval - elapsed))

    async def tick(self) -> tuple[Woken, ...]:
        """One poll: the wakes written this tick (sorted by namespace, name)."""
        now = self._clock.monotonic()
        self._recent = {k: t for k, t in self._recent.items() if now - t < self._quiet}
        await self._forget_clients()
        # One world per tick: the write must carry the resourceVersion of the very copy that
        # showed the model at zero, not of a newer one read after the pages were fetched.
        world = self._world_fn()
        idle = _idle_variants(world.variants)
        # A model with a variant just woken waits as a whole: until the informer shows the new
        # replica, the model still looks idle, and its next cheapest variant must not be woken.
        waking = {v.group for v in idle if v.key in self._recent}
        idle = tuple(v for v in idle if v.group not in waking)
        if not idle:
            return ()
        entries = {e.key: e for e in world.entries}
        plan = self._pools_fn() if self._pools_fn is not None else None
        if plan is not None and plan.model_pools is not None:
            done = await self._by_pool(idle, plan, entries)
        else:
            namespaces = {v.namespace for v in idle}
            targets = [t for t in self._epp_fn() if t.namespace in namespaces]
            token = self._token()
            end = asyncio.get_running_loop().time() + self._timeout
            sizes, seen_at, errors = await self._read_queues(targets, token=token, end=end)
            self._errors = _sorted_errors(errors)
            wakes = wake(variants=idle, pools=self._pool_metrics(sizes))
            done = await asyncio.gather(
                *(self._wake(w, entries.get(f'{w.namespace}/{w.variant}'), seen_at) for w in wakes)
            )
        woken = sorted((w for w in done if w is not None), key=_woken_key)
        if not woken:
            return ()
        # Events go out after every write of the tick: they must not queue in front of a wake.
        if self._events is not None:
            await asyncio.gather(*(self._event(w) for w in woken))
        return tuple(woken)

    def _token(self) -> http.Token:
        return http.read_token(
            token_file=self._scrape.token_file, bearer_token=self._scrape.bearer_token
        )

    def _pool_metrics(self, sizes: Mapping[tuple[str, str], float]) -> list[PoolMetrics]:
        wall = self._clock.wall()
        return [
            PoolMetrics(model_id=m, namespace=ns, observed_at=wall, queue_size=size)
            for (m, ns), size in sorted(sizes.items())
        ]

    async def _by_pool(
        self, idle: Sequence[Variant], plan: PoolPlan, entries: Mapping[str, VariantEntry]
    ) -> list[Woken | None]:
        """Read each needed pool's EPP; wake a model as soon as all its pools were read."""
        assert plan.model_pools is not None
        groups: dict[tuple[str, str], list[Variant]] = {}
        for variant in idle:
            groups.setdefault((variant.namespace, variant.model_id), []).append(variant)
        waiting: dict[tuple[str, str], set[str]] = {}
        needed: dict[str, list[tuple[str, str]]] = {}
        for group in sorted(groups):
            keys = set(plan.model_pools.get(group, ()))
            if keys:  # a variant without a pool was held before it got here
                waiting[group] = keys
                for key in sorted(keys):
                    needed.setdefault(key, []).append(group)
        token = self._token()
        end = asyncio.get_running_loop().time() + self._timeout
        reads = [
            self._read_pool(key, plan.targets.get(key, ()), token=token, end=end)
            for key in sorted(needed)
        ]
        totals: dict[tuple[str, str], float] = {}
        seen_at: dict[tuple[str, str], float] = {}
        errors: list[SourceError] = []
        writes: list[asyncio.Task[Woken | None]] = []
        for read in asyncio.as_completed(reads):
            key, (sizes, seen, failed) = await read
            errors.extend(failed)
            for namespace, model in needed[key]:
                found = sizes.get((model, namespace), 0.0)
                if found > 0:
                    totals[(model, namespace)] = totals.get((model, namespace), 0.0) + found
                    when = seen[(model, namespace)]
                    seen_at[(model, namespace)] = min(seen_at.get((model, namespace), when), when)
                waiting[(namespace, model)].discard(key)
                if waiting[(namespace, model)] or (model, namespace) not in totals:
                    continue
                metrics = self._pool_metrics({(model, namespace): totals[(model, namespace)]})
                for order in wake(variants=groups[(namespace, model)], pools=metrics):
                    entry = entries.get(f'{order.namespace}/{order.variant}')
                    writes.append(asyncio.create_task(self._wake(order, entry, seen_at)))
        self._errors = _sorted_errors(errors)
        return list(await asyncio.gather(*writes))

    async def _read_pool(
        self, key: str, targets: Sequence[ScrapeTarget], *, token: http.Token, end: float
    ) -> tuple[str, _Queues]:
        return key, await self._read_queues(targets, token=token, end=end)

    async def _read_queues(
        self, targets: Sequence[ScrapeTarget], *, token: http.Token, end: float
    ) -> _Queues:
        """Queue sizes by (model, namespace of the page), when each was first seen, failures."""
        pages = await asyncio.gather(*(self._fetch(t, token=token, end=end) for t in targets))
        sizes: dict[tuple[str, str], float] = {}
        seen: dict[tuple[str, str], float] = {}
        errors: list[SourceError] = []
        for target, page in zip(targets, pages, strict=True):
            if isinstance(page, SourceError):
                log.debug('EPP %s/%s unread: %s', target.namespace, target.pod, page.message)
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

    async def _fetch(
        self, target: ScrapeTarget, *, token: http.Token, end: float
    ) -> tuple[float, Page] | SourceError:
        async def get(deadline: float) -> bytes | http.Failure:
            return await fetch_page(
                client=self._client_for(target.url),
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
        return read_at, page

    async def _wake(
        self,
        order: Wake,
        entry: VariantEntry | None,
        seen_at: Mapping[tuple[str, str], float],
    ) -> Woken | None:
        target = entry.target if entry is not None else None
        if entry is None or target is None:
            return None
        async with self._write_gate:
            result = await self._scale.scale_at(
                api_version=target.api_version,
                kind=target.kind,
                namespace=target.namespace,
                name=target.name,
                replicas=order.target,
                resource_version=target.resource_version,
            )
        self._recent[entry.key] = self._clock.monotonic()
        if result.outcome is not ScaleOutcome.APPLIED:
            if result.outcome is not ScaleOutcome.CONFLICT:
                log.warning('scale-from-zero of %s failed: %s', entry.key, result.message)
                self._metrics.error(component='scale_from_zero', error_type=result.outcome.value)
            return None
        seconds = self._clock.monotonic() - seen_at.get(
            (order.model_id, order.namespace), self._clock.monotonic()
        )
        self._metrics.from_zero(seconds=seconds)
        self._metrics.scaled(
            variant=order.variant, namespace=order.namespace, direction='up', reason=REASON
        )
        log.info(
            'woke %s %s/%s: 0 -> %d (queue %g)',
            target.kind,
            target.namespace,
            target.name,
            order.target,
            order.queue_size,
        )
        return Woken(
            variant=order.variant,
            namespace=order.namespace,
            model_id=order.model_id,
            seconds=seconds,
            target=order.target,
            queue_size=order.queue_size,
            regarding=ObjectRef.of(entry.obj),
        )

    async def _event(self, woken: Woken) -> None:
        assert self._events is not None
        await self._events.record(
            regarding=woken.regarding,
            type='Normal',
            reason='ScaledFromZero',
            action='Scale',
            note=f'0 -> {woken.target}: {woken.queue_size:g} requests queued for '
            f'{woken.model_id}; cheapest variant {woken.variant} woken',
        )


def _sorted_errors(errors: Sequence[SourceError]) -> tuple[SourceError, ...]:
    return tuple(sorted(errors, key=lambda e: (e.target, e.reason)))


def _idle_variants(variants: Sequence[Variant]) -> tuple[Variant, ...]:
    """Variants of models whose every variant is at zero replicas."""
    busy = {v.group for v in variants if v.current_replicas > 0}
    return tuple(v for v in variants if v.group not in busy)


def _woken_key(woken: Woken) -> tuple[str, str]:
    return (woken.namespace, woken.variant)
