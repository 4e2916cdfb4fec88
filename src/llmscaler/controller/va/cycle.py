"""The main cycle: cluster caches + metrics → `decide()` → `/scale`, gauges, status and events.

Why: this is the one place where the pure core meets the cluster. Every `interval` (30 s by
default) the leader builds a snapshot from the informer caches and the metric source, asks
`engine.decide` for a target per variant, and makes it so: it writes the scale target's `/scale`
(actuation `direct`), publishes `wva_desired_replicas` and friends for an HPA or KEDA
(`metrics`), or both; then it writes each VariantAutoscaling's status (desired replicas, whether
the decision was applied, the three conditions) and records an event for every scale. In shadow
mode (`shadow`, `llmscaler run --shadow`) it writes nothing: it publishes its decisions beside the
running counts and another autoscaler's published ones (`controller.va.shadow`).

What fails and how it is treated (the safety rules: docs/decision-core.md, docs/controller.md):

- a metric source that fails hands back errors as values; the core then sees no fresh metrics,
  holds every affected variant (never down, never to zero) and the `MetricsAvailable` condition
  names the source's error (`PrometheusError` for Prometheus);
- a `/scale` write carries the replica count the decision was based on (`expect`); a 409 or a
  changed count is a conflict: nothing is written, the key is retried with backoff on the work
  queue a few times (a plain resourceVersion race then succeeds; a real change by someone else
  keeps conflicting and waits for the next cycle, which decides afresh). A retry is dropped when
  its VA is no longer in the cache (deleted) or a later cycle decided for the variant again;
- a VA whose spec does not validate, or whose scale target is missing, takes no part in the
  decision: its status and a Warning event say why, and nothing is scaled for it;
- a ConfigMap with errors is not applied (`ConfigWatch` keeps its last good copy) and a Warning
  event on it says why; the ConfigMap cache version counts as seen only once it was applied, so a
  reload that fails unexpectedly keeps the configuration in force and is tried again next cycle;
- an exception inside a cycle is logged and counted; the loop goes on at the next interval.

Logs (INFO tells the story, `controller.va.story`): each scale, each hold when it starts, changes or
ends, metric source errors when they appear and clear, an invalid VA when it becomes so, and each
ConfigMap reload (applied or rejected); nothing is repeated every cycle while it lasts.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from llmscaler import burst, gc_pause
from llmscaler.clock import Clock
from llmscaler.collect.attribution import attribute, with_ready_pods
from llmscaler.collect.prometheus.peer import PeerDesired, PeerReading
from llmscaler.collect.readings import MetricsSource, SourceError
from llmscaler.collect.scrape.source import PodScrapeSource
from llmscaler.config.resolved import Config
from llmscaler.controller.cluster.caches import Caches, WorldCache
from llmscaler.controller.cluster.configwatch import ConfigProblem, ConfigWatch
from llmscaler.controller.cluster.world import VariantEntry, World
from llmscaler.controller.publish import (
    AvailabilityRow,
    ControllerMetrics,
    ReplicaRow,
    replica_rows,
)
from llmscaler.controller.va.shadow import ShadowLog, shadow_rows
from llmscaler.controller.va.status import VaStatuses
from llmscaler.controller.va.story import Story
from llmscaler.domain.basics import Action
from llmscaler.domain.snapshot import Decision, GpuLimit, Snapshot
from llmscaler.domain.state import EMPTY_STATE, State
from llmscaler.engine import decide
from llmscaler.kube.client import ObjectRef
from llmscaler.kube.events import EventRecorder
from llmscaler.kube.scale import ScaleClient, ScaleOutcome, ScaleResult
from llmscaler.kube.status import StatusWriter
from llmscaler.kube.workqueue import WorkQueue

log = logging.getLogger(__name__)

DIRECT, METRICS, BOTH, SHADOW = 'direct', 'metrics', 'both', 'shadow'
_RETRIED = frozenset({ScaleOutcome.CONFLICT, ScaleOutcome.FAILED})


@dataclass(frozen=True, slots=True)
class CycleReport:
    """What one cycle did (for logs, tests and the benchmark)."""

    decisions: tuple[Decision, ...]
    scaled: tuple[tuple[str, ScaleResult], ...]
    source_errors: tuple[SourceError, ...]
    statuses_written: int


@dataclass(frozen=True, slots=True)
class _Pending:
    entry: VariantEntry
    replicas: int
    expect: int
    reason: str
    kind: str
    """The `reason` label of `wva_replica_scaling_total`: who decided (the analyzer, or
    `burst`), from a bounded set, where `reason` carries the decision's figures."""


class MainCycle:
    """The leader's main loop (see the module docstring)."""

    def __init__(
        self,
        *,
        clock: Clock,
        caches: Caches,
        worlds: WorldCache,
        config: ConfigWatch,
        source: MetricsSource,
        source_name: str,
        scraper: PodScrapeSource | None,
        scale: ScaleClient,
        status: StatusWriter,
        events: EventRecorder,
        metrics: ControllerMetrics,
        actuation: str = DIRECT,
        status_concurrency: int = 16,
        retry_limit: int = 5,
        inventory: Callable[..., tuple[GpuLimit, ...]] | None = None,
        peer: PeerDesired | None = None,
    ) -> None:
        self._clock = clock
        self._caches = caches
        self._worlds = worlds
        self._config = config
        self._config_version: tuple[int, ...] | None = None
        self._source = source
        self._scraper = scraper
        self._scale = scale
        self._events = events
        self._metrics = metrics
        self._actuation = actuation
        self._gate = asyncio.Semaphore(max(1, status_concurrency))
        self._statuses = VaStatuses(
            status=status,
            events=events,
            metrics=metrics,
            gate=self._gate,
            source_name=source_name,
            metrics_only=actuation == METRICS,
        )
        self._retry_limit = retry_limit
        self._inventory = inventory
        """The GPU limits of a cycle's world (`controller.cluster.inventory`), for the limiter."""
        self._queue = WorkQueue(clock=clock, base_delay=0.5, max_delay=10.0)
        self._pending: dict[str, _Pending] = {}
        self._background: set[asyncio.Task[None]] = set()
        self.state: State = EMPTY_STATE
        self._story = Story()
        self._peer = peer
        """Another autoscaler's published decisions, compared with ours in shadow mode."""
        self._peer_story = Story()
        self._shadow_log = ShadowLog()
        self._replica_rows: tuple[ReplicaRow, ...] = ()
        self.last_snapshot: Snapshot | None = None
        """The snapshot the last cycle decided on (None before the first): its readings and
        pools are what the fast path for bursts sizes with between cycles."""
        self.last_completed: float | None = None
        """Monotonic time at which the last cycle ended (with or without an error); None before
        the first. The liveness probe reads it: a loop stuck inside a cycle stops moving it."""

    @property
    def queue(self) -> WorkQueue:
        return self._queue

    def current_config(self) -> Config:
        """The configuration in force, reloaded when the ConfigMap cache changed.

        The cache version is recorded only once its ConfigMaps were applied: should the reload
        fail unexpectedly, the last good configuration stays and the next call tries again.
        """
        try:
            version = self._caches.configmap_version()
            if version != self._config_version:
                update = self._config.update(configmaps=self._caches.configmap_items())
                self._config_version = version
                self._report(update.problems)
                self._report_applied(update.changed, update.warnings)
        except Exception:  # the loop must outlive a reload that fails: keep the last good one
            log.exception('ConfigMap reload failed; the configuration in force is kept')
            self._metrics.error(component='config', error_type='ReloadFailed')
        return self._config.config

    def _report(self, problems: Sequence[ConfigProblem]) -> None:
        """A log line, a counted error and a Warning Event on each rejected ConfigMap."""
        for problem in problems:
            log.warning(
                'ConfigMap %s/%s rejected, last good copy kept: %s',
                problem.namespace,
                problem.name,
                problem.message,
            )
            self._metrics.error(component='config', error_type='InvalidConfiguration')
            try:
                self._spawn_event(
                    ObjectRef('v1', 'ConfigMap', problem.namespace, problem.name),
                    'InvalidConfiguration',
                    f'not applied, last good configuration kept: {problem.message}',
                )
            except Exception:  # one Event that cannot be sent must not hide the others
                log.exception('Event for ConfigMap %s/%s not sent', problem.namespace, problem.name)

    def _report_applied(self, changed: bool, warnings: Sequence[ConfigProblem]) -> None:
        for warning in warnings:
            log.warning('ConfigMap %s/%s: %s', warning.namespace, warning.name, warning.message)
        if changed:
            log.info('configuration reloaded from the ConfigMaps: the new one is in force')

    async def run(self, *, interval: float) -> None:
        """Run a cycle every `interval` seconds until cancelled."""
        while True:
            started = self._clock.monotonic()
            status = 'success'
            try:
                await self.run_once()
            except Exception:  # the loop must outlive a bad cycle
                status = 'error'
                log.exception('cycle failed')
                self._metrics.error(component='engine', error_type='cycle')
            self.last_completed = self._clock.monotonic()
            elapsed = self.last_completed - started
            self._metrics.cycle(seconds=elapsed, status=status)
            await self._clock.sleep(max(0.0, interval - elapsed))

    async def run_once(self) -> CycleReport:
        config = self.current_config()
        world = self._worlds.full(config=config)
        now = self._clock.wall()
        if self._scraper is not None:
            await self._scraper.scrape(now=now)
        reading = await self._source.read(scope=world.scopes, now=now)
        for error in reading.errors:
            self._metrics.error(component='metrics', error_type=error.reason.value)
        found = attribute(
            reading=reading, variants=world.variants, targets=world.targets, pods=world.pods
        )
        self._story.source_errors(found.errors)
        variants = with_ready_pods(variants=world.variants, pods=world.pods, targets=world.targets)
        snapshot = Snapshot(
            variants=variants,
            replicas=found.replicas,
            pools=found.pools,
            gpu_limits=(
                self._inventory(world=world, config=config) if self._inventory is not None else ()
            ),
        )
        with gc_pause.paused():
            outcome = decide(snapshot=snapshot, config=config, state=self.state, now=now)
        self.state = outcome.state
        self.last_snapshot = snapshot
        self._story.decisions(outcome.decisions)
        self._story.invalid(
            (ObjectRef.of(obj).key, invalid.message) for obj, invalid in world.invalid
        )
        decisions = {d.key: d for d in outcome.decisions}
        self._metrics.models(count=len(world.scopes))
        self._metrics.set_metrics_available(
            rows=[
                AvailabilityRow(
                    variant=d.variant,
                    namespace=d.namespace,
                    model_id=d.model_id,
                    available=d.metrics_available,
                )
                for d in outcome.decisions
            ]
        )
        for action in Action:
            count = sum(1 for d in outcome.decisions if d.action is action)
            if count:
                self._metrics.decisions(action=action.value, count=count)

        if self._actuation == SHADOW:
            await self._compare(now=now, decisions=outcome.decisions)
            return CycleReport(
                decisions=outcome.decisions,
                scaled=(),
                source_errors=found.errors,
                statuses_written=0,
            )
        results: dict[str, ScaleResult] = {}
        if self._actuation in (DIRECT, BOTH):
            results = await self._actuate(world=world, decisions=decisions)
        if self._actuation in (METRICS, BOTH):
            self._publish_replicas(replica_rows(decisions=decisions.values()))
        written = await self._statuses.write(
            world=world, decisions=decisions, results=results, errors=found.errors
        )
        return CycleReport(
            decisions=outcome.decisions,
            scaled=tuple(sorted(results.items())),
            source_errors=found.errors,
            statuses_written=written,
        )

    async def _compare(self, *, now: float, decisions: Sequence[Decision]) -> None:
        """Shadow mode: publish and log the decisions beside the running and the peer's counts."""
        peer = PeerReading() if self._peer is None else await self._peer.read(now=now)
        if peer.error is not None:
            self._metrics.error(component='shadow', error_type=peer.error.reason.value)
        self._peer_story.source_errors(() if peer.error is None else (peer.error,))
        rows = shadow_rows(decisions=decisions, peer=peer)
        self._metrics.set_shadow(rows=rows)
        self._shadow_log.compare(rows=rows, reasons={d.key: d.reason for d in decisions})

    # --- actuation -------------------------------------------------------------------------

    async def raise_targets(
        self, *, world: World, decisions: Sequence[Decision]
    ) -> dict[str, ScaleResult]:
        """Between cycles, the fast path's scale-ups (`controller.from_zero.bursts`): written as
        a cycle writes them (`/scale` expecting the count decided from, the same Events, logs
        and retries) with `direct` or `both`, published with `metrics` or `both`; nothing in
        shadow mode. Each decision must raise its variant's count."""
        if self._actuation == SHADOW:
            return {}
        raised = {d.key: d for d in decisions if d.target > d.current}
        results: dict[str, ScaleResult] = {}
        if self._actuation in (DIRECT, BOTH):
            results = await self._actuate(world=world, decisions=raised, kind=burst.REASON)
        if self._actuation in (METRICS, BOTH):
            fresh = {(r.namespace, r.variant): r for r in replica_rows(decisions=raised.values())}
            kept = [r for r in self._replica_rows if (r.namespace, r.variant) not in fresh]
            self._publish_replicas([*kept, *fresh.values()])
        return results

    def _publish_replicas(self, rows: Sequence[ReplicaRow]) -> None:
        self._replica_rows = tuple(rows)
        self._metrics.set_replicas(rows=self._replica_rows)

    async def _actuate(
        self, *, world: World, decisions: Mapping[str, Decision], kind: str = ''
    ) -> dict[str, ScaleResult]:
        orders: list[_Pending] = []
        for entry in world.entries:
            decision = decisions.get(entry.key)
            if decision is None or entry.target is None:
                continue
            # A decision made this cycle replaces any retry still queued for the variant.
            self._pending.pop(entry.key, None)
            self._queue.forget(entry.key)
            if decision.target == decision.current:
                continue
            orders.append(
                _Pending(
                    entry,
                    decision.target,
                    decision.current,
                    decision.reason,
                    kind or decision.analyzer or 'core',
                )
            )
        results = await asyncio.gather(*(self._scale_one(order) for order in orders))
        done: dict[str, ScaleResult] = {}
        for order, result in zip(orders, results, strict=True):
            done[order.entry.key] = result
            if result.outcome in _RETRIED:
                self._pending[order.entry.key] = order
                self._queue.add_rate_limited(order.entry.key)
        return done

    async def _scale_one(self, order: _Pending) -> ScaleResult:
        target = order.entry.target
        assert target is not None
        async with self._gate:
            result = await self._scale.scale(
                api_version=target.api_version,
                kind=target.kind,
                namespace=target.namespace,
                name=target.name,
                replicas=order.replicas,
                expect=order.expect,
            )
        va = ObjectRef.of(order.entry.obj)
        where = f'{target.kind} {target.namespace}/{target.name}'
        if result.outcome is ScaleOutcome.APPLIED:
            direction = 'up' if order.replicas > order.expect else 'down'
            reason = 'ScaledUp' if direction == 'up' else 'ScaledDown'
            if order.replicas == 0:
                reason = 'ScaledToZero'
            log.info(
                'scaled %s: %d -> %d (%s)',
                where,
                order.expect,
                order.replicas,
                order.reason,
                extra={'variant': va.name, 'namespace': va.namespace, 'replicas': order.replicas},
            )
            self._metrics.scaled(
                variant=va.name, namespace=va.namespace, direction=direction, reason=order.kind
            )
            await self._events.record(
                regarding=va,
                type='Normal',
                reason=reason,
                action='Scale',
                note=f'{where}: {order.expect} -> {order.replicas} ({order.reason})',
            )
        elif result.outcome is not ScaleOutcome.UNCHANGED:
            log.warning('scaling %s to %d: %s', where, order.replicas, result.message)
            self._metrics.error(component='actuator', error_type=result.outcome.value)
            await self._events.record(
                regarding=va,
                type='Warning',
                reason=f'Scale{result.outcome.value}',
                action='Scale',
                note=f'{where}: {order.expect} -> {order.replicas} not applied: {result.message}',
            )
        return result

    async def retry_worker(self) -> None:
        """Re-attempt scale writes that conflicted or failed, with per-key backoff."""
        while (key := await self._queue.get()) is not None:
            try:
                order = self._pending.get(key)
                if order is None or not self._va_exists(order):
                    # Nothing queued, or the VA was deleted since: nobody wants this write now.
                    self._pending.pop(key, None)
                    self._queue.forget(key)
                    continue
                result = await self._scale_one(order)
                if result.outcome in _RETRIED and self._queue.retries(key) < self._retry_limit:
                    self._queue.add_rate_limited(key)
                else:
                    self._pending.pop(key, None)
                    self._queue.forget(key)
            finally:
                self._queue.done(key)

    def _va_exists(self, order: _Pending) -> bool:
        va = ObjectRef.of(order.entry.obj)
        return self._caches.vas.get(namespace=va.namespace, name=va.name) is not None

    def _spawn_event(self, regarding: ObjectRef, reason: str, note: str) -> None:
        # Config problems are found in a synchronous step; the Warning is sent alongside.
        task = asyncio.get_running_loop().create_task(
            self._events.record(
                regarding=regarding, type='Warning', reason=reason, action='Reload', note=note
            )
        )
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def aclose(self) -> None:
        """Wait for the events still being sent (before the API client closes)."""
        await asyncio.gather(*self._background, return_exceptions=True)
