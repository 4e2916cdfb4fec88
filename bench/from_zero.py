"""How fast scale-from-zero wakes a variant: 500 variants at zero, requests queue for one model.

Setup: the fake kube-apiserver (child process; or the real one, `--backend real`) holds 500
VariantAutoscalings at zero replicas — 250 models of two variants (a cheap and a dear one) — and
their Deployments. The controller's `FromZero` loop runs at its default 100 ms interval with its
informers. Two modes:
- `--mode pools` (default): 250 InferencePools (GA v1), one per model, each selecting its model's
  two Deployments' pods; each pool's endpoint picker is its own loopback EPP endpoint, found
  through its Service's EndpointSlice, serving
  `inference_extension_flow_control_queue_size{target_model_name=...}` for its model. Each tick
  reads the 250 pages and wakes a model as soon as its pool's page is in.
- `--mode selector`: no InferencePool; one EPP endpoint serves the queue of every model (the
  `--epp-selector` fallback).

The EPP endpoints are served by a child process, as in a cluster they are pods of their own:
the controller's event loop reads their pages but does not serve them.

Two figures per wake, from 100 wakes of randomly chosen models, one every 300 ms:
- *queue seen → /scale written*: from the EPP page that showed the queue to the answered `/scale`
  write (the issue's figure, goal p99 ≤ 150 ms);
- *queue set → /scale written*: from the moment the EPP starts reporting the queue, which adds up
  to one polling interval.
Then a burst: 100 models queue at the same instant. Baseline in the same run: one bare `/scale`
GET + PATCH through the same client (the irreducible cost of a wake). `--models N` makes a
smaller cluster (3 to 250 models), its wakes, burst and bare writes in the same proportions.

`--backend real` runs the same wakes against the real control plane (`realproc`: etcd,
kube-apiserver, kube-controller-manager and kube-scheduler built by `make binaries`; exit
status 2 and one line when they are not built), the controller signed in as its ServiceAccount
(the shipped RBAC). In `--mode pools` the InferencePool CRDs
(src/llmscaler/devcluster/crds/inferencepools.yaml) are applied first. The objects are created
through the admin client, 16 at a time; starting and seeding are not counted (the time is
printed). Each `/scale` write is a real one: kube-controller-manager reacts to it with a
ReplicaSet scaled up and a pod, which kube-scheduler binds and which stays Pending (no kubelet
runs: the figure ends at the answered write), and that work competes for the machine's cores.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import random
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from aiohttp import web

import realproc
from fakeproc import fake_api
from llmscaler.clock import LoopClock
from llmscaler.collect.scrape.source import ScrapeTarget
from llmscaler.controller.app import Controller
from llmscaler.controller.from_zero.loop import FromZero, Woken
from llmscaler.controller.options.resolve import resolve_options
from llmscaler.devcluster import host, loopback
from llmscaler.devcluster import objects as objects_
from llmscaler.kube.scale import ScaleClient
from llmscaler.sim.hardware import presets

MODELS = 250
NAMESPACE = 'bench'
WAKES = 100
BURST = 100
BARE = 30
GOAL = 0.15
"""Seconds: the issue's goal for the p99 of queue seen → /scale written, one model at a time."""


def _names(models: int) -> list[str]:
    return [f'model-{m:03d}' for m in range(models)]


def _counts(models: int) -> tuple[int, int, int]:
    """Wakes one by one, in the burst, and bare writes: at MODELS, WAKES, BURST and BARE; in
    the same proportions, at least one each, for a smaller cluster (`--models`)."""
    wakes, burst, bare = (max(1, n * models // MODELS) for n in (WAKES, BURST, BARE))
    return wakes, burst, bare


def _objects(
    *, models: int, epp_ports: dict[str, int] | None = None, epp_host: str = loopback.HOST
) -> list[dict[str, Any]]:
    """The cluster, built with the end-to-end tests' object builders.

    With `epp_ports` (model → port), one InferencePool per model and its EPP's EndpointSlice,
    whose endpoint is `epp_host`.
    """
    objects: list[dict[str, Any]] = []
    spec = presets.preset(name='llama-3.1-8b-l40s')
    for model in _names(models):
        if epp_ports is not None:
            pool = f'{model}-pool'
            objects.append(
                objects_.inference_pool(name=pool, namespace=NAMESPACE, service=f'{pool}-epp')
            )
            objects.append(
                objects_.endpoint_slice(
                    service=f'{pool}-epp',
                    namespace=NAMESPACE,
                    pod=f'{pool}-epp-0',
                    ip=epp_host,
                    metrics_port=epp_ports[model],
                )
            )
        for variant, cost in (('cheap', 5.0), ('dear', 12.0)):
            name = f'{model}-{variant}'
            deploy = objects_.deployment(
                name=name,
                namespace=NAMESPACE,
                model_id=model,
                spec=spec,
                replicas=0,
                accelerator=spec.accelerator,
            )
            if epp_ports is not None:
                deploy['spec']['template']['metadata']['labels'][objects_.POOL_LABEL] = (
                    f'{model}-pool'
                )
            objects.append(deploy)
            objects.append(
                objects_.variant_autoscaling(
                    name=name,
                    namespace=NAMESPACE,
                    model_id=model,
                    target=name,
                    cost=cost,
                    min_replicas=0,
                    max_replicas=4,
                )
            )
    return objects


class Epp:
    """The EPP metrics endpoints, served by a child process, whose queue sizes the benchmark
    sets: in a cluster the EPPs are pods of their own, so serving their pages must not cost the
    controller's event loop (with them on it, the loop served every page it read)."""

    def __init__(self, *, models: int, pools: bool, host: str) -> None:
        self.models = models
        self.set_at: dict[str, float] = {}
        context = multiprocessing.get_context('spawn')
        self._conn, theirs = context.Pipe()
        self._server = context.Process(
            target=_serve_epps, args=(theirs, models, pools, host), daemon=True
        )
        self._server.start()
        self.ports: dict[str, int] = self._conn.recv()
        """Model → port of its pool's EPP ('' → the one EPP of every model)."""

    def queue(self, model: str) -> None:
        """`model`'s EPP reports one request queued from now on."""
        self.set_at[model] = time.perf_counter()
        self._conn.send((model, 1.0))

    def clear(self, model: str) -> None:
        self._conn.send((model, 0.0))

    def close(self) -> None:
        self._conn.send(None)
        self._server.join(timeout=10)
        if self._server.is_alive():
            self._server.kill()


def _page(queues: dict[str, float], models: Sequence[str]) -> str:
    lines = ['# TYPE inference_extension_flow_control_queue_size gauge']
    for model in models:
        lines.append(
            'inference_extension_flow_control_queue_size'
            f'{{fairness_id="default",priority="0",target_model_name="{model}"}} '
            f'{queues.get(model, 0.0)}'
        )
    return '\n'.join(lines) + '\n'


def _serve_epps(conn: Any, models: int, pools: bool, host: str) -> None:
    """In the child: one EPP per model (`pools`) or one for all, until told to stop."""

    async def serve() -> None:
        queues: dict[str, float] = {}
        served: list[loopback.Served] = []
        ports: dict[str, int] = {}
        for model in _names(models) if pools else ['']:
            shown = [model] if model else _names(models)
            app = web.Application()

            async def metrics(request: web.Request, shown: list[str] = shown) -> web.Response:
                return web.Response(text=_page(queues, shown), content_type='text/plain')

            app.router.add_get('/metrics', metrics)
            running = await loopback.serve(app, host=host)
            ports[model] = running.port
            served.append(running)
        conn.send(ports)
        loop = asyncio.get_running_loop()
        stopped = loop.create_future()

        def command() -> None:
            message = conn.recv()
            if message is None:
                stopped.set_result(None)
            else:
                queues[message[0]] = message[1]

        loop.add_reader(conn.fileno(), command)
        await stopped
        for running in served:
            await running.close()

    asyncio.run(serve())


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _show(label: str, values: list[float]) -> None:
    ms = [v * 1000 for v in values]
    print(
        f'{label:<34} n={len(ms):<4} p50 {_percentile(ms, 0.5):6.1f} ms   '
        f'p99 {_percentile(ms, 0.99):6.1f} ms   max {max(ms):6.1f} ms'
    )


async def main(*, mode: str, backend: str, models: int) -> None:
    # The real API server refuses an EndpointSlice address in the loopback range, so there each
    # pool's EPP listens on this machine's own address.
    address = host.host_address() if backend == 'real' and mode == 'pools' else loopback.HOST
    epp = Epp(models=models, pools=mode == 'pools', host=address)
    epp_ports = epp.ports if mode == 'pools' else None
    objects = _objects(models=models, epp_ports=epp_ports, epp_host=address)
    try:
        if backend == 'fake':
            with fake_api(objects) as url:
                print(realproc.describe(backend))
                await _measure(('--server', url), epp=epp, selector_port=epp.ports.get(''))
        else:
            pools = mode == 'pools'
            async with realproc.real_api(
                objects, namespace=NAMESPACE, inference_pools=pools
            ) as real:
                print(realproc.describe(backend, seeding=[real.seconds]))
                await _measure(real.argv, epp=epp, selector_port=epp.ports.get(''))
    finally:
        epp.close()


async def _measure(server: Sequence[str], *, epp: Epp, selector_port: int | None) -> None:
    options, _ = resolve_options(
        argv=[*server, '--metrics-source', 'pods', '--metrics-bind-address', '0'],
        env={},
    )
    controller = Controller(options=options)
    informers = [asyncio.create_task(i.run()) for i in (*controller.caches.all(), controller.pools)]
    while not (controller.caches.synced() and controller.pools.synced.is_set()):
        await asyncio.sleep(0.05)
    config = controller.cycle.current_config()
    pools = len(controller.pools.pools())
    controller.worlds.variants(config=config)  # the datastore, before the first tick
    targets: tuple[ScrapeTarget, ...] = ()
    if selector_port is not None:
        url_ = f'http://127.0.0.1:{selector_port}/metrics'
        targets = (ScrapeTarget(namespace=NAMESPACE, pod='epp', url=url_, kind='epp'),)
    woken: list[tuple[Woken, float]] = []

    loop = FromZero(
        clock=LoopClock(),
        world_fn=lambda: controller.worlds.variants(config=controller.cycle.current_config()),
        epp_fn=lambda: targets,
        pools_fn=controller._pool_plan,
        scale=controller.scale,
        events=controller.events,
        metrics=controller.metrics,
    )

    async def poll() -> None:
        while True:
            started = time.perf_counter()
            for wake in await loop.tick():
                woken.append((wake, time.perf_counter()))
                epp.clear(wake.model_id)
            await asyncio.sleep(max(0.0, 0.1 - (time.perf_counter() - started)))

    poller = asyncio.create_task(poll())
    rng = random.Random(11)
    models = _names(epp.models)
    rng.shuffle(models)
    wakes, burst_size, bare_size = _counts(epp.models)
    for model in models[:wakes]:
        epp.queue(model)
        await asyncio.sleep(0.3)
    await asyncio.sleep(1.0)
    trickle = list(woken)
    woken.clear()
    for model in models[wakes : wakes + burst_size]:
        epp.queue(model)
    await asyncio.sleep(3.0)
    burst = list(woken)
    poller.cancel()
    await asyncio.gather(poller, return_exceptions=True)

    bare: list[float] = []
    client = ScaleClient(client=controller.client)
    for model in models[wakes + burst_size : wakes + burst_size + bare_size]:
        started = time.perf_counter()
        await client.scale(
            api_version='apps/v1',
            kind='Deployment',
            namespace=NAMESPACE,
            name=f'{model}-cheap',
            replicas=1,
            expect=0,
        )
        bare.append(time.perf_counter() - started)

    for task in informers:
        task.cancel()
    await asyncio.gather(*informers, return_exceptions=True)
    await loop.aclose()
    await controller._close()

    cheap = sum(1 for w, _ in trickle + burst if w.variant.endswith('-cheap'))
    sources = len(controller.pool_sources.pool_keys())
    print(f'InferencePools: {pools}; EPP sources: {sources}')
    print(
        f'variants at zero: {2 * epp.models}; wakes: {len(trickle)} one by one, {len(burst)} burst'
    )
    print(f'cheapest variant woken: {cheap} of {len(trickle) + len(burst)}')
    _show('queue seen -> /scale written', [w.seconds for w, _ in trickle])
    _show('queue set -> /scale written', [t - epp.set_at[w.model_id] for w, t in trickle])
    _show('burst: queue seen -> /scale written', [w.seconds for w, _ in burst])
    _show('burst: queue set -> /scale written', [t - epp.set_at[w.model_id] for w, t in burst])
    _show('baseline: bare /scale GET+PATCH', bare)
    ratio = statistics.median(w.seconds for w, _ in trickle) / statistics.median(bare)
    print(f'ratio p50 queue seen -> written / bare write: {ratio:.2f}x')
    p99 = _percentile([w.seconds for w, _ in trickle], 0.99)
    print(
        f'goal at 500 variants, p99 queue seen -> /scale written ≤ {GOAL * 1000:.0f} ms one '
        f'model at a time: {"met" if p99 <= GOAL else "not met"}'
    )


if __name__ == '__main__':
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--mode', choices=('pools', 'selector'), default='pools')
    parser.add_argument('--models', type=int, default=MODELS, help='models (2 variants each)')
    realproc.add_backend_option(parser)
    args = parser.parse_args()
    if not 3 <= args.models <= MODELS:
        parser.error(f'--models must be in [3, {MODELS}]')
    realproc.require(parser, backend=args.backend)
    asyncio.run(main(mode=args.mode, backend=args.backend, models=args.models))
