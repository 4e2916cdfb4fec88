"""One pod-scraping source per InferencePool for its EPP, and the pool datastore in the loops.

Why: WVA (v0.9.0, internal/collector/source/pod/ and internal/datastore/) reads a model's
scheduler (EPP) queue from the endpoint picker of the model's own InferencePool: it creates a
pod-scraping source for a pool's EPP service when the pool enters its datastore, and removes it
when the pool is deleted.
This module holds those sources and puts the datastore (`controller.pools.datastore`) into both
loops:

- `PooledWorlds`: the `WorldCache` both loops read, with the pool of every variant applied: a
  variant whose pool is missing, ambiguous or unusable keeps its entry (its status says why,
  `VariantEntry.pool_problem`) but leaves `World.variants`, so neither the main cycle nor
  scale-from-zero decides for it: it holds. `membership()` is the latest datastore.
- `PoolSources`: one `PodScrapeSource` per usable pool, reading the pages `pools.epp_targets`
  names (the Service's ready EndpointSlice endpoints), with the scrape configuration of the other
  scrapers (TLS, token and the credential rule, page cap, per-page timeout, scrape deadline) and
  one HTTP client for all. A source is created when its pool appears and dropped (windows and
  all) when the pool goes or its EPP reference changes (`refresh`, cheap when nothing moved);
  each change is logged at INFO.
- `PooledSource`: the main cycle's `MetricsSource`: the configured source's reading, in which the
  scheduler queue (`queue_size`, `queue_bytes`) of every model that has a pool is replaced by the
  sum over its pools' sources (and the arrival rate filled from them when the configured source
  has none). The pool sources are scraped inside `read`, all together, within the scrape
  deadline; their page errors join the reading's errors. A Warning Event `InferencePoolProblem`
  goes to each pool whose problem appears or changes.

Without any pool in the watched scope the datastore is inactive: nothing is held, no pool source
exists, and the EPP pages come from `--epp-selector` (the fallback).

What fails: nothing raises for bad pools or slices (see `controller.pools.datastore`); scrape
failures are errors as values, as for every pod-scraping source.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

import httpx

from llmscaler.collect import http
from llmscaler.collect.http import ssl_context
from llmscaler.collect.readings import MetricsSource, ModelReading, ModelScope, Reading
from llmscaler.collect.scrape.source import PodScrapeSource, ScrapeConfig, ScrapeTarget
from llmscaler.config.resolved import Config
from llmscaler.controller.cluster.caches import Caches, WorldCache
from llmscaler.controller.cluster.world import World
from llmscaler.controller.pools.datastore import (
    SERVICE_NAME_LABEL,
    EppRef,
    Membership,
    Pool,
    assign,
    epp_targets,
)
from llmscaler.controller.pools.watch import PoolCaches
from llmscaler.kube.client import ObjectRef
from llmscaler.kube.events import EventRecorder

log = logging.getLogger(__name__)


def hold(world: World, membership: Membership) -> World:
    """`world` with each variant's pool, and the variants without a usable one held."""
    if not membership.active:
        return world
    entries = []
    for entry in world.entries:
        problem = membership.problems.get(entry.key, '')
        pool = membership.pool_of.get(entry.key, '')
        if problem:
            entries.append(replace(entry, variant=None, pool='', pool_problem=problem))
        else:
            entries.append(replace(entry, pool=pool))
    held = {e.key for e in entries if e.pool_problem}
    variants = tuple(v for v in world.variants if f'{v.namespace}/{v.name}' not in held)
    return replace(world, entries=tuple(entries), variants=variants)


class PooledWorlds(WorldCache):
    """The `WorldCache` with the pool datastore applied (see the module docstring)."""

    def __init__(self, *, caches: Caches, pools: PoolCaches) -> None:
        super().__init__(caches=caches)
        self._pools = pools
        self._membership = Membership()
        self._memo: dict[str, tuple[World, int, World]] = {}

    def membership(self) -> Membership:
        return self._membership

    def variants(self, *, config: Config) -> World:
        return self._held('variants', super().variants(config=config))

    def full(self, *, config: Config) -> World:
        return self._held('full', super().full(config=config))

    def _held(self, which: str, world: World) -> World:
        version = self._pools.version
        memo = self._memo.get(which)
        if memo is not None and memo[0] is world and memo[1] == version:
            return memo[2]
        membership = assign(pools=self._pools.pools(), entries=world.entries)
        self._membership = membership
        held = hold(world, membership)
        self._memo[which] = (world, version, held)
        return held


@dataclass(frozen=True, slots=True)
class _Held:
    epp: EppRef
    source: PodScrapeSource
    targets: tuple[ScrapeTarget, ...]


class PoolSources:
    """One `PodScrapeSource` per usable pool (see the module docstring)."""

    def __init__(
        self,
        *,
        pools: PoolCaches,
        config: ScrapeConfig,
        default_port: int,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        self._pools = pools
        self._config = config
        self._port = default_port
        self._http = http.OwnedClient(
            client=client, verify=lambda: ssl_context(config=config), timeout=config.timeout
        )
        self._sources: dict[str, _Held] = {}
        self._seen: tuple[int, tuple[Pool, ...]] | None = None

    async def aclose(self) -> None:
        await self._http.aclose()

    def pool_keys(self) -> tuple[str, ...]:
        """The pools that have a source now, sorted."""
        return tuple(sorted(self._sources))

    def source(self, key: str) -> PodScrapeSource | None:
        held = self._sources.get(key)
        return held.source if held is not None else None

    def targets(self, key: str) -> tuple[ScrapeTarget, ...]:
        """The EPP pages of the pool's source (none when it has no source)."""
        held = self._sources.get(key)
        return held.targets if held is not None else ()

    def refresh(self, pools: Sequence[Pool]) -> None:
        """Create, keep or drop sources so that each usable pool has exactly one.

        Cheap when neither the pools nor the slices moved since the last call.
        """
        seen = (self._pools.version, tuple(pools))
        if self._seen == seen:
            return
        self._seen = seen
        usable = {p.key: p for p in pools if not p.problem and p.epp is not None}
        by_service: dict[tuple[str, str], list[Mapping[str, object]]] = {}
        for obj in self._pools.endpoint_slices():
            meta = obj.get('metadata') or {}
            service = (meta.get('labels') or {}).get(SERVICE_NAME_LABEL, '')
            by_service.setdefault((str(meta.get('namespace', '')), service), []).append(obj)
        for key in sorted(set(self._sources) - set(usable)):
            del self._sources[key]
            log.info('EPP source of InferencePool %s removed: the pool is gone', key)
        for key, pool in sorted(usable.items()):
            assert pool.epp is not None
            targets = epp_targets(
                pool=pool,
                slices=by_service.get((pool.namespace, pool.epp.service), ()),
                default_port=self._port,
                scheme=self._config.epp_scheme,
            )
            held = self._sources.get(key)
            if held is not None and held.epp == pool.epp:
                if held.targets != targets:
                    self._sources[key] = replace(held, targets=targets)
                continue
            if held is not None:
                log.info('EPP source of InferencePool %s removed: its EPP reference changed', key)
            self._sources[key] = self._new(key, pool.epp, targets)
            log.info(
                'EPP source of InferencePool %s added: Service %s/%s, %d endpoint(s)',
                key,
                pool.namespace,
                pool.epp.service,
                len(targets),
            )

    def _new(self, key: str, epp: EppRef, targets: tuple[ScrapeTarget, ...]) -> _Held:
        def current() -> tuple[ScrapeTarget, ...]:
            held = self._sources.get(key)
            return held.targets if held is not None else ()

        # A pool's EPP pages are few: a process per pool would cost more than it saves.
        source = PodScrapeSource(
            config=self._config, targets_fn=current, client=self._http.client, in_process=False
        )
        return _Held(epp=epp, source=source, targets=targets)


class PooledSource:
    """The main cycle's source: the configured one, with the pools' EPP queues (docstring)."""

    def __init__(
        self,
        *,
        base: MetricsSource,
        sources: PoolSources,
        membership_fn: Callable[[], Membership],
        events: EventRecorder | None,
    ) -> None:
        self._base = base
        self._sources = sources
        self._membership_fn = membership_fn
        self._events = events
        self._reported: dict[str, str] = {}

    async def aclose(self) -> None:
        close = getattr(self._base, 'aclose', None)
        if close is not None:
            await close()
        await self._sources.aclose()

    async def read(self, *, scope: tuple[ModelScope, ...], now: float) -> Reading:
        membership = self._membership_fn()
        await self._report(membership.pools)
        self._sources.refresh(membership.pools)
        base = await self._base.read(scope=scope, now=now)
        if not membership.active:
            return base
        wanted: dict[str, list[ModelScope]] = {}
        for entry in scope:
            for key in membership.model_pools.get((entry.namespace, entry.model_id), ()):
                wanted.setdefault(key, []).append(entry)
        keys = [k for k in sorted(wanted) if self._sources.source(k) is not None]
        sources = [self._sources.source(k) for k in keys]
        scraped = await asyncio.gather(*(s.scrape(now=now) for s in sources if s is not None))
        readings = await asyncio.gather(
            *(
                s.read(scope=tuple(wanted[k]), now=now)
                for k, s in zip(keys, sources, strict=True)
                if s is not None
            )
        )
        queues: dict[tuple[str, str], list[ModelReading]] = {}
        for reading in readings:
            for model in reading.models:
                queues.setdefault((model.namespace, model.model_id), []).append(model)
        # A model with a pool reads its scheduler queue from its pools' sources only.
        pooled = set(membership.model_pools)
        models = {(m.namespace, m.model_id): m for m in base.models}
        for group in sorted(pooled):
            merged = _merge(models.get(group), queues.get(group, ()), group=group)
            if merged is not None:
                models[group] = merged
        errors = [*base.errors, *(e for errs in scraped for e in errs)]
        return replace(
            base,
            models=tuple(models[key] for key in sorted(models)),
            errors=tuple(sorted(errors, key=lambda e: (e.target, e.reason))),
        )

    async def _report(self, pools: Sequence[Pool]) -> None:
        problems = {p.key: p.problem for p in pools if p.problem}
        self._reported = {k: v for k, v in self._reported.items() if problems.get(k) == v}
        if self._events is None:
            return
        for pool in pools:
            if not pool.problem or self._reported.get(pool.key) == pool.problem:
                continue
            self._reported[pool.key] = pool.problem
            log.warning('InferencePool %s cannot be used: %s', pool.key, pool.problem)
            await self._events.record(
                regarding=ObjectRef(
                    api_version=pool.api_version,
                    kind='InferencePool',
                    namespace=pool.namespace,
                    name=pool.name,
                ),
                type='Warning',
                reason='InferencePoolProblem',
                action='Read',
                note=pool.problem,
            )


def _merge(
    base: ModelReading | None,
    pooled: Sequence[ModelReading],
    *,
    group: tuple[str, str],
) -> ModelReading | None:
    """`base` with the scheduler queue of its pools' sources (their sum; None when none read)."""
    size = [m.queue_size for m in pooled if m.queue_size is not None]
    size_bytes = [m.queue_bytes for m in pooled if m.queue_bytes is not None]
    rates = [m.arrival_rate for m in pooled if m.arrival_rate is not None]
    if base is None:
        if not pooled:
            return None
        namespace, model_id = group
        newest = max(m.observed_at for m in pooled)
        base = ModelReading(model_id=model_id, namespace=namespace, observed_at=newest)
    rate = base.arrival_rate
    if rate is None and rates:
        rate = sum(rates)
    return replace(
        base,
        queue_size=sum(size) if size else None,
        queue_bytes=sum(size_bytes) if size_bytes else None,
        arrival_rate=rate,
    )


def pool_epp_targets(
    *, membership: Membership, sources: PoolSources
) -> Mapping[str, tuple[ScrapeTarget, ...]]:
    """Pool key → the EPP pages its source reads (for scale-from-zero)."""
    known = {pool.key for pool in membership.pools}
    return {key: sources.targets(key) for key in sources.pool_keys() if key in known}
