"""`llmscaler run`: the controller process, wired from its parts.

Why: the parts (informers, leader election, scale and status writers, the event recorder, the
metric sources, the two loops) are each tested alone; this module is the one place that starts
them in the right order and stops them cleanly, the way a controller-runtime manager does:

1. the HTTP endpoints start (`/metrics` on --metrics-bind-address, `/healthz` and `/readyz` on
   --health-probe-bind-address; `/readyz` answers 200 once every cache has listed once; the
   bound ports are `metrics_port` and `health_port` while `run()` runs). `/healthz` answers 503
   when this replica leads, its caches have synced, and its main loop has not finished a cycle
   for `startup.liveness_limit` seconds (--liveness-intervals intervals, plus the metric read
   deadline and the API timeout): a loop stuck for good is restarted by the kubelet. A standby,
   or a leader whose caches are still syncing, is live;
2. the informers start on every replica, leader or not, so that a standby takes over warm;
3. with --leader-elect the process waits for the Lease; without it, it leads at once;
4. the leader renews the Lease from the moment it holds it; once the caches have synced it runs
   the main cycle, its scale-retry worker and the scale-from-zero loop;
   (`--shadow`: the main cycle alone, which writes nothing; every write but the Lease's is
   refused at the client, `kube.write_fence`, and it elects on a Lease of its own);
5. SIGTERM or SIGINT stops the loops, releases the Lease (so a standby takes over at its next
   retry instead of after the lease duration) and exits 0.

What fails: losing the Lease (renewal failing for the renew deadline, or another holder seen)
stops the loops at once and exits 1, as client-go's `OnStoppedLeading` does: a controller that
is no longer sure it leads must not write. Until the loss is noticed, every write but the
Lease's asks the elector first (`kube.write_fence`), so a leader frozen past its renew deadline
sends nothing when it resumes. A loop that dies of an unexpected error also exits 1
(the Deployment restarts the pod). API and metric failures inside the loops never end them (see
`cycle` and `from_zero`). A configuration that cannot work (see `options`) exits 2 before
anything starts, with one line per problem on stderr and no traceback; so does a kubeconfig
that cannot be used (or none at all) and a TLS file that cannot be loaded.

Once the parts are made, the objects of start-up are set aside from the cyclic garbage
collector (`gc_pause.set_aside_start_up`): its full passes would otherwise walk them again and
again, holding the loop each time.

Logs: `controller.logs` (level, format, the HTTP libraries kept at WARNING); the settings are
logged once at start, without secrets (`startup.settings_line`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
from collections.abc import Sequence

from llmscaler import gc_pause
from llmscaler.clock import Clock, LoopClock
from llmscaler.collect.prometheus.peer import PeerDesired
from llmscaler.collect.prometheus.source import PrometheusSource
from llmscaler.collect.readings import MetricsSource
from llmscaler.collect.scrape.source import PodScrapeSource, ScrapeTarget
from llmscaler.config.resolved import Config
from llmscaler.controller.cluster.caches import WorldCache, build_caches
from llmscaler.controller.cluster.configwatch import ConfigWatch
from llmscaler.controller.cluster.inventory import Inventory
from llmscaler.controller.cluster.pods import epp_targets, parse_selector, scrape_targets
from llmscaler.controller.cluster.world import World
from llmscaler.controller.from_zero.loop import FromZero, PoolPlan
from llmscaler.controller.llmas.loop import INTERVAL as LLMAS_INTERVAL
from llmscaler.controller.llmas.loop import LlmAutoScalers
from llmscaler.controller.logs import configure_logging
from llmscaler.controller.options.resolve import RunOptions, fatal_errors, resolve_options
from llmscaler.controller.options.table import build_parser
from llmscaler.controller.pools.datastore import Membership
from llmscaler.controller.pools.sources import (
    PooledSource,
    PooledWorlds,
    PoolSources,
    pool_epp_targets,
)
from llmscaler.controller.pools.watch import PoolCaches
from llmscaler.controller.publish import (
    ControllerMetrics,
    HttpEndpoints,
    Route,
    available_gpu_rows,
    health_route,
    metrics_route,
    node_gpu_vendors,
    parse_bind_address,
)
from llmscaler.controller.startup import liveness_limit, settings_line, tls_problems
from llmscaler.controller.va.cycle import SHADOW, MainCycle
from llmscaler.domain.snapshot import GpuLimit
from llmscaler.kube.client import KubeConfigProblem, make_client
from llmscaler.kube.events import EventRecorder
from llmscaler.kube.informer import Cache
from llmscaler.kube.leader import LEASE_NAME, SHADOW_LEASE_NAME, LeaderConfig, LeaderElector
from llmscaler.kube.scale import ScaleClient
from llmscaler.kube.status import StatusWriter
from llmscaler.kube.write_fence import fence_writes

log = logging.getLogger('llmscaler.controller')

EXIT_OK, EXIT_LOST, EXIT_CONFIG = 0, 1, 2


class Controller:
    """One controller process (see the module docstring).

    `source` replaces the metric source the options select (benchmarks and tests hand in an
    in-memory one); the controller then neither scrapes pods nor closes it. `MetricsAvailable`
    blames the source by the name the options give it (`prometheus` or `pods`).
    """

    def __init__(
        self,
        *,
        options: RunOptions,
        clock: Clock | None = None,
        source: MetricsSource | None = None,
    ) -> None:
        self.options = options
        self.clock = clock or LoopClock()
        self.client = make_client(
            server=options.server,
            kubeconfig=options.kubeconfig,
            timeout=options.rest_client_timeout,
        )
        self.metrics = ControllerMetrics()
        self.caches = build_caches(
            client=self.client,
            clock=self.clock,
            namespace=options.namespace,
            watch_namespace=options.watch_namespace,
            configmap_labels=options.configmap_labels,
            pod_selector=options.pod_selector,
            epp_selector=options.epp_selector,
            pod_namespace_limit=options.pod_namespace_limit,
        )
        self.pools = PoolCaches(
            client=self.client, clock=self.clock, scope=options.watch_namespace or None
        )
        self.worlds: WorldCache = PooledWorlds(caches=self.caches, pools=self.pools)
        self.pool_sources = PoolSources(
            pools=self.pools, config=options.scrape, default_port=options.epp_metrics_port
        )
        self.config = ConfigWatch(
            settings=options.settings,
            controller_namespace=options.namespace,
            base=options.base_configmaps,
        )
        self.events = EventRecorder(
            client=self.client, clock=self.clock, instance=options.identity, silent=options.shadow
        )
        self.scale = ScaleClient(client=self.client)
        lease = LeaderConfig(
            namespace=options.namespace,
            identity=options.identity,
            lease_duration=options.lease_duration,
            renew_deadline=options.renew_deadline,
            retry_period=options.retry_period,
            name=SHADOW_LEASE_NAME if options.shadow else LEASE_NAME,
        )
        self._lease_name = lease.name
        self.elector = LeaderElector(
            client=self.client,
            clock=self.clock,
            config=lease,
            on_change=lambda leading: self.metrics.leader(is_leader=leading),
            on_renewal=lambda late, ok: self.metrics.lease_renewal(late=late, ok=ok),
        )
        if options.leader_elect or options.shadow:
            fence_writes(self.client, refusal=self._write_refusal)
        self.scraper: PodScrapeSource | None = None
        scraping = options.metrics_source == 'pods' or options.prometheus is None
        self._owns_source = source is None
        if source is None and scraping:
            self.scraper = PodScrapeSource(config=options.scrape, targets_fn=self._scrape_targets)
            source = self.scraper
        elif source is None and options.prometheus is not None:
            source = PrometheusSource(config=options.prometheus)
        assert source is not None
        # The InferencePools' EPP sources give the scheduler queue of the models in a pool.
        source = PooledSource(
            base=source,
            sources=self.pool_sources,
            membership_fn=self._membership,
            events=self.events,
        )
        self.source: MetricsSource = source
        self._ports: dict[str, int] = {}
        # In shadow mode, the other autoscaler's decisions as it publishes them to Prometheus.
        self._peer_source: PrometheusSource | None = None
        if options.shadow and options.prometheus is not None:
            self._peer_source = PrometheusSource(config=options.prometheus)
        # Nodes and bound GPU pods, for the limiter: started once a model turns it on.
        self.inventory = Inventory(client=self.client, clock=self.clock)
        self.cycle = MainCycle(
            clock=self.clock,
            caches=self.caches,
            worlds=self.worlds,
            config=self.config,
            source=source,
            source_name='pods' if scraping else 'prometheus',
            scraper=self.scraper,
            scale=self.scale,
            status=StatusWriter(
                client=self.client,
                clock=self.clock,
                run_time_refresh=options.status_refresh_interval,
            ),
            events=self.events,
            metrics=self.metrics,
            actuation=SHADOW if options.shadow else options.actuation,
            inventory=self._gpu_limits,
            peer=None if self._peer_source is None else PeerDesired(source=self._peer_source),
        )
        self._epp_selector = parse_selector(options.epp_selector)
        self._epp_memo: tuple[int, tuple[ScrapeTarget, ...]] | None = None
        self.from_zero = FromZero(
            clock=self.clock,
            world_fn=lambda: self.worlds.variants(config=self.cycle.current_config()),
            epp_fn=self._epp_targets,
            scale=self.scale,
            events=self.events,
            metrics=self.metrics,
            interval=options.scale_from_zero_interval,
            concurrency=options.scale_from_zero_concurrency,
            scrape=options.scrape,
            pools_fn=self._pool_plan,
            config_fn=self.cycle.current_config,
            limits_fn=self.inventory.limits,
            cycle=self.cycle,
        )
        # Kaito's LLMAutoScalers: their own loop, every 15 s or every main cycle when
        # that is shorter; a target a VA scales is not scaled by an LLMAutoScaler.
        self.llmas = LlmAutoScalers(
            client=self.client,
            clock=self.clock,
            scale=self.scale,
            events=self.events,
            scrape=options.scrape,
            namespace=options.watch_namespace or None,
            interval=min(LLMAS_INTERVAL, options.settings.interval),
            claimed=self._va_targets,
        )
        self._leading_since: float | None = None
        """Monotonic time the leading loops started at; None while not running them."""

    def _write_refusal(self) -> str | None:
        """Why no write but the Lease's may leave now; None when it may."""
        if self.options.shadow:
            return 'llmscaler run --shadow writes nothing to the cluster'
        return self.elector.write_refusal()

    def _va_targets(self) -> dict[tuple[str, str, str], str]:
        """(kind, namespace, name) of every VA's scale target, to the VA's key."""
        world = self.worlds.variants(config=self.cycle.current_config())
        found: dict[tuple[str, str, str], str] = {}
        for entry in world.entries:
            ref = entry.va.spec.scale_target_ref
            found[(ref.kind, entry.key.partition('/')[0], ref.name)] = entry.key
        return found

    def _scrape_targets(self) -> tuple[ScrapeTarget, ...]:
        world = self.worlds.full(config=self.cycle.current_config())
        pods = self.caches.pods.items()
        vllm = scrape_targets(
            variants=world.variants,
            targets=world.targets,
            pods=pods,
            port=self.options.pod_metrics_port,
            scheme=self.options.scrape.vllm_scheme,
        )
        return vllm + self._epp_targets()

    def _gpu_limits(self, *, world: World, config: Config) -> tuple[GpuLimit, ...]:
        """The inventory's GPU limits for a cycle, also published as `wva_available_gpus`."""
        limits = self.inventory.limits(world=world, config=config)
        vendors = node_gpu_vendors(self.inventory.nodes.items()) if limits else {}
        self.metrics.set_available_gpus(rows=available_gpu_rows(limits=limits, vendors=vendors))
        return limits

    def _membership(self) -> Membership:
        assert isinstance(self.worlds, PooledWorlds)
        return self.worlds.membership()

    def _pool_plan(self) -> PoolPlan:
        membership = self._membership()
        if not membership.active:
            return PoolPlan(model_pools=None, targets={})
        self.pool_sources.refresh(membership.pools)
        targets = pool_epp_targets(membership=membership, sources=self.pool_sources)
        return PoolPlan(model_pools=membership.model_pools, targets=targets)

    def _epp_targets(self) -> tuple[ScrapeTarget, ...]:
        if self.pools.pools():  # the InferencePools name the EPPs; the selector is the fallback
            return ()
        version = self.caches.pods.version
        if self._epp_memo is None or self._epp_memo[0] != version:
            targets = epp_targets(
                pods=self.caches.pods.items(),
                selector=self._epp_selector,
                port=self.options.epp_metrics_port,
                scheme=self.options.scrape.epp_scheme,
            )
            self._epp_memo = (version, targets)
        return self._epp_memo[1]

    @property
    def metrics_port(self) -> int | None:
        """The port `/metrics` is served on while `run()` runs; None before, after, or when off."""
        return self._ports.get('metrics')

    @property
    def health_port(self) -> int | None:
        """The port of `/healthz` and `/readyz` while `run()` runs; None before, after, or off."""
        return self._ports.get('health')

    async def run(self, *, stop: asyncio.Event) -> int:
        """Run until `stop` is set (exit 0) or leadership is lost (exit 1)."""
        async with contextlib.AsyncExitStack() as stack:
            stack.callback(self._ports.clear)
            for name, address, routes in self._endpoints():
                bound = parse_bind_address(address)
                if bound is not None:
                    server = await stack.enter_async_context(
                        HttpEndpoints(host=bound[0], port=bound[1], routes=routes)
                    )
                    self._ports[name] = server.port
            stack.push_async_callback(self._close)
            caches: list[Cache] = [*self.caches.all(), self.pools, self.llmas.informer]
            informers = [asyncio.create_task(i.run()) for i in caches]
            lead = asyncio.create_task(self._lead())
            stopped = asyncio.create_task(stop.wait())
            try:
                done, _ = await asyncio.wait({lead, stopped}, return_when=asyncio.FIRST_COMPLETED)
                code = lead.result() if lead in done else EXIT_OK
            finally:
                for task in (lead, stopped, *informers):
                    task.cancel()
                await asyncio.gather(lead, stopped, *informers, return_exceptions=True)
                if self.elector.is_leader:
                    await self.elector.release()
            log.info('controller stopped (exit %d)', code)
            return code
        return EXIT_OK  # pragma: no cover - the stack above always returns

    def _endpoints(self) -> list[tuple[str, str, dict[str, Route]]]:
        metrics = {'/metrics': metrics_route(metrics=self.metrics)}
        health = {
            '/healthz': health_route(self._live),
            '/readyz': health_route(self._ready),
        }
        return [
            ('metrics', self.options.metrics_bind_address, dict(metrics)),
            ('health', self.options.health_probe_bind_address, dict(health)),
        ]

    def _ready(self) -> tuple[bool, str]:
        required = self.caches.required()
        waiting = sum(1 for i in required if not i.synced.is_set())
        if waiting:
            return False, f'{waiting} of {len(required)} caches not synced yet'
        return True, 'ok'

    def _live(self) -> tuple[bool, str]:
        since = self._leading_since
        if since is None:  # a standby, or a leader whose caches are still syncing
            return True, 'ok'
        last = max(since, self.cycle.last_completed or since)
        stalled = self.clock.monotonic() - last
        limit = liveness_limit(self.options)
        if stalled <= limit:
            return True, 'ok'
        return False, (
            f'the main loop has not finished a cycle for {stalled:.0f}s (limit {limit:.0f}s: '
            f'{self.options.liveness_intervals} intervals, the read deadline and the API timeout)'
        )

    async def _lead(self) -> int:
        if self.options.leader_elect:
            log.info('waiting for the Lease %s/%s', self.options.namespace, self._lease_name)
            await self.elector.acquire()
        else:
            self.metrics.leader(is_leader=True)
        # Renewal starts at once, as client-go's does: a cache sync slower than the renew
        # deadline must not let the Lease lapse while this replica still believes it leads.
        held: set[asyncio.Task[None]] = set()
        if self.options.leader_elect:
            held.add(asyncio.create_task(self.elector.hold()))
        synced = asyncio.create_task(self._synced())
        loops: set[asyncio.Task[None]] = set()
        try:
            done, _ = await asyncio.wait(held | {synced}, return_when=asyncio.FIRST_COMPLETED)
            if synced in done:
                log.info('leading: caches synced, loops starting')
                self._leading_since = self.clock.monotonic()
                loops = {
                    asyncio.create_task(self.cycle.run(interval=self.options.settings.interval))
                }
                if self.options.shadow:
                    # Both act by writing (a wake, an LLMAutoScaler's /scale): nothing to shadow.
                    log.info('shadow mode: nothing is written; scale-from-zero and '
                             'LLMAutoScalers are not run')  # fmt: skip
                else:
                    loops |= {
                        asyncio.create_task(self.cycle.retry_worker()),
                        asyncio.create_task(self.from_zero.run()),
                        asyncio.create_task(self.llmas.run()),
                    }
                done, _ = await asyncio.wait(loops | held, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self._leading_since = None
            self.cycle.queue.shutdown()
            watched = {synced, *loops, *held}
            for task in watched:
                task.cancel()
            await asyncio.gather(*watched, return_exceptions=True)
        if held & done:
            log.error('leadership lost: stopping every loop')
            return EXIT_LOST
        for task in done:
            if not task.cancelled() and task.exception() is not None:
                log.error('a loop died', exc_info=task.exception())
        return EXIT_LOST

    async def _synced(self) -> None:
        # Waits on the informers' own events: no polling, so a hand-driven clock needs no nudge.
        for informer in self.caches.required():
            await informer.synced.wait()
        await self.pools.synced.wait()

    async def _close(self) -> None:
        close = getattr(self.source, 'aclose', None) if self._owns_source else None
        if close is not None:
            await close()
        if self._peer_source is not None:
            await self._peer_source.aclose()
        await self.inventory.aclose()
        await self.from_zero.aclose()
        await self.llmas.aclose()
        await self.pool_sources.aclose()
        await self.cycle.aclose()
        await self.client.aclose()


def main(argv: Sequence[str]) -> int:
    """Entry point of `llmscaler run`."""
    parser = build_parser()
    if any(arg in ('-h', '--help') for arg in argv):
        parser.parse_args(list(argv))
    options, errors = resolve_options(argv=argv, env=os.environ)
    fatal = fatal_errors(errors=errors)
    problems = [f'{error}' for error in fatal] or list(tls_problems(options))
    if problems:
        for problem in problems:
            print(f'llmscaler run: {problem}', file=sys.stderr)
        return EXIT_CONFIG
    configure_logging(
        level=options.log_level, format=options.log_format, http_level=options.http_log_level
    )
    for error in errors:
        log.warning('configuration: %s', error)
    return asyncio.run(_serve(options))


async def _serve(options: RunOptions) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        controller = Controller(options=options)
    except KubeConfigProblem as exc:
        print(f'llmscaler run: {exc}', file=sys.stderr)
        return EXIT_CONFIG
    log.info('starting: %s', settings_line(options))
    log.debug('start-up objects set aside from the collector: %d', gc_pause.set_aside_start_up())
    return await controller.run(stop=stop)
