"""The fast path for bursts in the controller: the gateway's counts every tick, a raise at once.

Why: the main cycle sizes on the last minute's arrival rate every 30 s; a burst after a lull is
seen a minute late. The scale-from-zero loop already reads the gateway's (EPP) pages every tick
(100 ms); for the models above zero whose policy asks for it (`Policy.fast_path`: `fastPath` of
`llmscaler-predictive-config`, on by default), the same loop reads their requests arrived and
queued from the same pages (`EppPages.arrivals`), and the pure `burst.burst` decides, from those
counts, the last cycle's readings and the core's memory, which of them to raise now. A raise is
written by the main cycle's own actuation (`MainCycle.raise_targets`: `/scale` expecting the
count decided from, its Events, logs, retries; published instead with `--actuation metrics`).

Which pages: with InferencePools, those of the pools of the watched models; without, the EPP pods
of `--epp-selector` in their namespaces (`controller.from_zero.loop` chooses, as for a wake).

What fails and how it is treated: before the first cycle there is nothing to size with, and
nothing is raised. A namespace with an EPP page unread this tick has no count for its models
(`EppPages.arrivals`), so a page that comes and goes is never read as a fall and a burst. The
bounds are `burst`'s: up only, every safety rule of `decide`, one raise per model per
`burst.QUIET` seconds, one decision per model per `burst.RECHECK` seconds. A write that fails
is retried as the cycle retries its own; the next cycle decides afresh either way. Nothing
raises out of `tick`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol

from llmscaler import burst
from llmscaler.clock import Clock
from llmscaler.collect import http
from llmscaler.collect.scrape.source import ScrapeTarget
from llmscaler.config.resolved import Config
from llmscaler.controller.cluster.world import World
from llmscaler.controller.from_zero.pages import EppPages
from llmscaler.domain.basics import group_key
from llmscaler.domain.snapshot import Decision, Snapshot, Variant
from llmscaler.domain.state import State
from llmscaler.kube.scale import ScaleResult
from llmscaler.policies import registry

log = logging.getLogger(__name__)


class Cycle(Protocol):
    """What the fast path reads of the main cycle, and how it writes through it."""

    @property
    def state(self) -> State: ...

    @property
    def last_snapshot(self) -> Snapshot | None: ...

    def current_config(self) -> Config: ...

    async def raise_targets(
        self, *, world: World, decisions: Sequence[Decision]
    ) -> dict[str, ScaleResult]: ...


def watched(*, variants: Sequence[Variant], config: Config) -> tuple[tuple[str, str], ...]:
    """(namespace, model ID) of the models above zero whose policy asks for the fast path."""
    found: set[tuple[str, str]] = set()
    for variant in variants:
        if variant.current_replicas <= 0:
            continue
        key = (variant.namespace, variant.model_id)
        if key in found:
            continue
        model = config.model(model_id=variant.model_id, namespace=variant.namespace)
        if registry.select(model).fast_path(model):
            found.add(key)
    return tuple(sorted(found))


class Bursts:
    """The fast path's memory (the counts per model, when each was raised) and its tick."""

    def __init__(self, *, clock: Clock, pages: EppPages, cycle: Cycle) -> None:
        self._clock = clock
        self._pages = pages
        self._cycle = cycle
        self._counts: dict[str, tuple[burst.Count, ...]] = {}
        self._raised: dict[str, float] = {}
        self._checked: dict[str, float] = {}
        self._watched: tuple[World, Config, tuple[tuple[str, str], ...]] | None = None

    def watched(self, world: World) -> tuple[tuple[str, str], ...]:
        """`watched` for this world and the configuration in force, computed again only when
        either is another object (the informers' world and the configuration are kept while
        unchanged, and a tick comes every 100 ms)."""
        config = self._cycle.current_config()
        if self._watched is None or self._watched[0] is not world or self._watched[1] is not config:
            self._watched = (world, config, watched(variants=world.variants, config=config))
        return self._watched[2]

    async def tick(
        self,
        *,
        world: World,
        models: Sequence[tuple[str, str]],
        targets: Sequence[ScrapeTarget],
        token: http.Token,
        end: float,
    ) -> tuple[burst.Raise, ...]:
        """Count `models` ((namespace, model ID), from `watched`) on `targets`; raise those in
        a burst. The raises written, by model group in name order."""
        last = self._cycle.last_snapshot
        groups = {group_key(model_id=m, namespace=ns) for ns, m in models}
        for gone in sorted(set(self._counts) - groups):
            del self._counts[gone]
        if last is None or not groups:
            return ()
        counts, _ = await self._pages.arrivals(targets, token=token, end=end)
        now = self._clock.wall()
        for (model, namespace), (arrived, queued) in sorted(counts.items()):
            group = group_key(model_id=model, namespace=namespace)
            if group in groups:
                self._counts[group] = burst.record(
                    counts=self._counts.get(group, ()),
                    count=burst.Count(at=now, arrived=arrived, queued=queued),
                )
        outcome = burst.burst(
            snapshot=Snapshot(
                variants=world.variants,
                replicas=last.replicas,
                pools=last.pools,
                gpu_limits=last.gpu_limits,
            ),
            config=self._cycle.current_config(),
            state=self._cycle.state,
            counts=self._counts,
            raised=self._raised,
            now=now,
            checked=self._checked,
        )
        for decided in outcome.decided:
            self._checked[decided] = now
        for one in outcome.raises:
            self._raised[one.group] = now
            log.info(
                '%s: burst of %.3g req/s (the cycle sized for %.3g): raising %s',
                one.group,
                one.rate,
                one.cycle_rate,
                ', '.join(f'{d.variant} {d.current} -> {d.target}' for d in one.decisions),
            )
            await self._cycle.raise_targets(world=world, decisions=one.decisions)
        self._raised = {g: t for g, t in self._raised.items() if now - t < burst.QUIET}
        self._checked = {g: t for g, t in self._checked.items() if now - t < burst.RECHECK}
        return outcome.raises
