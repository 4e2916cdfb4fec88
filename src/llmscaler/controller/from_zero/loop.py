"""The scale-from-zero loop: wake the cheapest variant of an idle model as soon as requests queue.

Why: the main cycle runs every 30 s; a request waiting on a model with no replica cannot wait that
long. This loop (every `interval`, 100 ms by default, as WVA v0.9.0's
internal/engines/scalefromzero/engine.go polls) looks only at models whose variants are all at zero
replicas, reads the gateway's (EPP) flow-control queue straight from the EPP pods (not through
Prometheus, whose scrape interval alone is longer than the budget), and when the queue of such a
model holds a request it asks the pure `enforce.scale_from_zero.wake` which variant to wake (the
cheapest one allowed to run) and writes `/scale` for it. With the limiter on for the model
(`config_fn`), the wake keeps to the GPU budget as the main cycle does
(`controller.from_zero.budget`, limits from `limits_fn`): the cheapest variant that fits is woken,
or the model is held with a `ResourceConstrained` event (and `wva_decisions_limited_total`), looked
at again after `quiet` seconds.

Which EPP pages: with InferencePools in the cluster (`pools_fn`, see `controller.pools.datastore`),
a model's queue is read from the EPP pages of its own pools only, each pool's page counting only for
the models of that pool, and a model is woken as soon as all its pools' pages are in (the other
pools' pages may still be on their way). Without pools, the pages of `epp_fn` (the EPP pods of
`--epp-selector`) are read and summed per model and namespace.

The same tick runs the fast path for bursts (`controller.from_zero.bursts`, when `cycle`, the
main cycle, is given): for the models above zero whose policy asks for it, the requests arrived
and queued on the same EPP pages, and a raise written through the main cycle when they prove a
burst. The two read their pages side by side, each page once per tick (`EppPages.one_tick`);
neither waits for the other's writes.

What it measures: the time from the EPP page that showed the queue to the `/scale` write that
answered, into `ControllerMetrics.from_zero` (the `llmscaler_scale_from_zero_seconds` histogram).

Reading the pages is `controller.from_zero.pages.EppPages`: clients kept alive per EPP origin,
the scrape configuration (TLS, token, page cap; URLs from `epp_fn` with `epp_scheme`), and one
deadline, `timeout` seconds (1 by default), for all the pages of a tick together. So a tick ends
within `timeout` plus the parsing of what came in plus the `/scale` writes, however an EPP
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
(SCALE_FROM_ZERO_ENGINE_MAX_CONCURRENCY); a write never waits for a slot behind pages, and while
one is in flight the fetches not yet sent wait for it (`EppPages.writing`: at most
`pages.WRITE_FIRST` after the tick's first write), so that its answer is not handled behind a
stream of pages on the loop.
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
from llmscaler.collect.readings import SourceError
from llmscaler.collect.scrape.source import ScrapeConfig, ScrapeTarget
from llmscaler.config.resolved import Config
from llmscaler.controller.cluster.world import VariantEntry, World
from llmscaler.controller.from_zero.budget import Fitted, Held, fit, gpu_budgets
from llmscaler.controller.from_zero.bursts import Bursts, Cycle
from llmscaler.controller.from_zero.pages import EppPages, Queues
from llmscaler.controller.publish import ControllerMetrics
from llmscaler.domain.snapshot import GpuLimit, PoolMetrics, Variant
from llmscaler.enforce.scale_from_zero import REASON, Wake, wake
from llmscaler.kube.client import ObjectRef
from llmscaler.kube.events import EventRecorder
from llmscaler.kube.scale import ScaleClient, ScaleOutcome
from llmscaler.optimize.constraints import Budgets

log = logging.getLogger(__name__)


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
    passed_over: str = ''
    """Why a cheaper variant was not woken (the GPU budget); '' when the cheapest was."""


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
        config_fn: Callable[[], Config] | None = None,
        limits_fn: Callable[..., tuple[GpuLimit, ...]] | None = None,
        cycle: Cycle | None = None,
    ) -> None:
        http.check_seconds(timeout=timeout)
        config = scrape if scrape is not None else ScrapeConfig()
        self._clock = clock
        self._world_fn = world_fn
        self._epp_fn = epp_fn
        self._pools_fn = pools_fn
        self._config_fn = config_fn
        self._limits_fn = limits_fn
        self._scale = scale
        self._events = events
        self._metrics = metrics
        self._interval = interval
        # Writes have their own slots: a wake must not queue behind the pages still to read.
        self._write_gate = asyncio.Semaphore(max(1, concurrency))
        self._quiet = quiet
        self._scrape = config
        self._pages = EppPages(
            clock=clock, scrape=config, timeout=timeout, concurrency=concurrency, client=client
        )
        self._recent: dict[str, float] = {}
        self._errors: tuple[SourceError, ...] = ()
        self._bursts = (
            Bursts(clock=clock, pages=self._pages, cycle=cycle) if cycle is not None else None
        )

    async def aclose(self) -> None:
        """Close the HTTP clients built here."""
        await self._pages.aclose()

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
        """One poll: the wakes written this tick (sorted by namespace, name), and the fast
        path's raises (`bursts`) beside them."""
        now = self._clock.monotonic()
        self._recent = {k: t for k, t in self._recent.items() if now - t < self._quiet}
        await self._pages.forget_idle()
        # One world per tick: the write must carry the resourceVersion of the very copy that
        # showed the model at zero, not of a newer one read after the pages were fetched.
        world = self._world_fn()
        with self._pages.one_tick():
            woken, _ = await asyncio.gather(self._wake_idle(world), self._burst(world))
        return woken

    async def _burst(self, world: World) -> None:
        """The fast path's tick on the watched models' pages (`controller.from_zero.bursts`)."""
        if self._bursts is None:
            return
        models = self._bursts.watched(world)
        targets: list[ScrapeTarget] = []
        plan = self._pools_fn() if self._pools_fn is not None and models else None
        if plan is not None and plan.model_pools is not None:
            keys = sorted({k for m in models for k in plan.model_pools.get(m, ())})
            targets = [t for key in keys for t in plan.targets.get(key, ())]
        elif models:
            namespaces = {namespace for namespace, _ in models}
            targets = [t for t in self._epp_fn() if t.namespace in namespaces]
        await self._bursts.tick(
            world=world,
            models=models,
            targets=targets,
            token=self._pages.token(),
            end=self._pages.end(),
        )

    async def _wake_idle(self, world: World) -> tuple[Woken, ...]:
        idle = _idle_variants(world.variants)
        # A model with a variant just woken waits as a whole: until the informer shows the new
        # replica, the model still looks idle, and its next cheapest variant must not be woken.
        waking = {v.group for v in idle if v.key in self._recent}
        idle = tuple(v for v in idle if v.group not in waking)
        if not idle:
            return ()
        entries = {e.key: e for e in world.entries}
        plan = self._pools_fn() if self._pools_fn is not None else None
        held: list[Held] = []
        if plan is not None and plan.model_pools is not None:
            done = await self._by_pool(idle, plan, entries, world, held)
        else:
            namespaces = {v.namespace for v in idle}
            targets = [t for t in self._epp_fn() if t.namespace in namespaces]
            token = self._pages.token()
            end = self._pages.end()
            sizes, seen_at, errors = await self._pages.read(targets, token=token, end=end)
            self._errors = _sorted_errors(errors)
            metrics = self._pool_metrics(sizes)
            fitted = self._fit(wake(variants=idle, pools=metrics), world, metrics, held)
            done = await asyncio.gather(
                *(self._wake(w, entries, seen_at, fitted) for w in fitted.wakes)
            )
        for one in held:
            self._hold(one, entries.get(f'{one.namespace}/{one.variant}'))
        woken = sorted((w for w in done if w is not None), key=_woken_key)
        # Events go out after every write of the tick: they must not queue in front of a wake.
        if self._events is not None and (woken or held):
            await asyncio.gather(
                *(self._event(w) for w in woken), *(self._held_event(h, entries) for h in held)
            )
        return tuple(woken)

    def _pool_metrics(self, sizes: Mapping[tuple[str, str], float]) -> list[PoolMetrics]:
        wall = self._clock.wall()
        return [
            PoolMetrics(model_id=m, namespace=ns, observed_at=wall, queue_size=size)
            for (m, ns), size in sorted(sizes.items())
        ]

    def _fit(
        self, wakes: Sequence[Wake], world: World, pools: Sequence[PoolMetrics], held: list[Held]
    ) -> Fitted:
        """`wakes` kept to the GPU budget of limited models; the models held go to `held`."""
        if self._config_fn is None or not wakes:
            return Fitted(wakes=tuple(wakes), passed_over={}, held=())
        config = self._config_fn()
        limits_fn = self._limits_fn

        def budgets() -> Budgets:
            limits = limits_fn(world=world, config=config) if limits_fn is not None else ()
            return gpu_budgets(limits=limits, config=config, variants=world.variants)

        fitted = fit(
            wakes=wakes, variants=world.variants, pools=pools, config=config, limits_fn=budgets
        )
        held.extend(fitted.held)
        return fitted

    def _hold(self, held: Held, entry: VariantEntry | None) -> None:
        """A model held for the GPU budget: quiet for `quiet` seconds, counted, logged."""
        if entry is not None:
            self._recent[entry.key] = self._clock.monotonic()
        self._metrics.limited(variant=held.variant, namespace=held.namespace)
        log.info('%s/%s: %s', held.namespace, held.variant, held.message)

    async def _held_event(self, held: Held, entries: Mapping[str, VariantEntry]) -> None:
        entry = entries.get(f'{held.namespace}/{held.variant}')
        if entry is None or self._events is None:
            return
        await self._events.record(
            regarding=ObjectRef.of(entry.obj),
            type='Warning',
            reason='ResourceConstrained',
            action='ScaleFromZero',
            note=held.message,
        )

    async def _by_pool(
        self,
        idle: Sequence[Variant],
        plan: PoolPlan,
        entries: Mapping[str, VariantEntry],
        world: World,
        held: list[Held],
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
        token = self._pages.token()
        end = self._pages.end()
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
                orders = wake(variants=groups[(namespace, model)], pools=metrics)
                fitted = self._fit(orders, world, metrics, held)
                for order in fitted.wakes:
                    task = self._wake(order, entries, seen_at, fitted)
                    writes.append(asyncio.create_task(task))
        self._errors = _sorted_errors(errors)
        return list(await asyncio.gather(*writes))

    async def _read_pool(
        self, key: str, targets: Sequence[ScrapeTarget], *, token: http.Token, end: float
    ) -> tuple[str, Queues]:
        return key, await self._pages.read(targets, token=token, end=end)

    async def _wake(
        self,
        order: Wake,
        entries: Mapping[str, VariantEntry],
        seen_at: Mapping[tuple[str, str], float],
        fitted: Fitted,
    ) -> Woken | None:
        entry = entries.get(f'{order.namespace}/{order.variant}')
        target = entry.target if entry is not None else None
        if entry is None or target is None:
            return None
        async with self._write_gate, self._pages.writing():
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
            passed_over=fitted.passed_over.get(entry.key, ''),
        )

    async def _event(self, woken: Woken) -> None:
        assert self._events is not None
        which = f'cheapest variant {woken.variant} woken'
        if woken.passed_over:
            which = f'cheapest variant within the GPU budget, {woken.variant}, woken '
            which += f'({woken.passed_over})'
        await self._events.record(
            regarding=woken.regarding,
            type='Normal',
            reason='ScaledFromZero',
            action='Scale',
            note=f'0 -> {woken.target}: {woken.queue_size:g} requests queued for '
            f'{woken.model_id}; {which}',
        )


def _sorted_errors(errors: Sequence[SourceError]) -> tuple[SourceError, ...]:
    return tuple(sorted(errors, key=lambda e: (e.target, e.reason)))


def _idle_variants(variants: Sequence[Variant]) -> tuple[Variant, ...]:
    """Variants of models whose every variant is at zero replicas."""
    busy = {v.group for v in variants if v.current_replicas > 0}
    return tuple(v for v in variants if v.group not in busy)


def _woken_key(woken: Woken) -> tuple[str, str]:
    return (woken.namespace, woken.variant)
