"""Benchmark: the event loop and the leader's Lease while a cycle scrapes 1,000 pods, 10 hostile.

What is measured: 1,000 emulated vLLM pods are served over loopback HTTP by a separate process,
each on a port of its own as pods have addresses of their own (every pod the emulator's own
page, 41 KiB; each tenth pod of a hundred a hostile page of
`llmscaler.emulate.hostile` in the hostile scenarios, the shapes taken in turn). In a fresh
process per scenario, the pod-scraping source runs cycles as the controller does (`scrape` of every
pod, then `read`, one cycle every 2 s) while, on the same event loop, a `LeaderElector` holds a
Lease of the in-process fake API server (retry period 0.5 s, renew deadline 2 s, lease 3 s) and a
probe sleeps 10 ms at a time, its lateness on waking being the loop's lag. The objects of start-up
are set aside from the garbage collector before the first cycle, as `llmscaler run` does. The
first cycle (every series new) is reported apart from the next `CYCLES` (the steady state).

Figures: cycle seconds (median of the steady cycles), loop lag p99 and max over the steady
cycles and max over the first, Lease renewals made, those started over `LATE` seconds late, the
latest, and the peak resident memory of the controller's processes, its own and its store's
(`VmHWM`, summed: the windows of 1,000 pods and what the hostile pods add). Named baseline:
the same fleet without hostile pages (`healthy`).

Goals: loop lag ≤ 100 ms during a cycle with 10 hostile pods; no renewal late.

Usage: python bench/hostile_scrape.py [--write-docs]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import statistics
import time
from typing import Any

import doc_blocks
from hostile_common import DOCS, MODEL, in_subprocess, memory, own_page

MARKERS = ('<!-- hostile-scrape:begin -->', '<!-- hostile-scrape:end -->')
PODS = 1000
HOSTILE = tuple(range(5, PODS, 100))
"""The 10 hostile pods."""
CYCLES = 5
INTERVAL = 2.0
LATE = 0.1
"""Seconds: a renewal started later than this against its schedule counts as late."""
GOAL_LAG = 0.1
SCENARIOS = {'healthy': (), 'over': ('over',), 'at': ('at',)}


def pages(scenario: str) -> dict[int, bytes]:
    """The page of each hostile pod in `scenario` (the shapes of its kinds, in turn)."""
    from llmscaler.emulate.hostile import PAGES

    shapes = [shape for shape in PAGES.values() if shape.kind in SCENARIOS[scenario]]
    if not shapes:
        return {}
    built = [shape.page(model=MODEL).encode() for shape in shapes]
    return {pod: built[n % len(built)] for n, pod in enumerate(HOSTILE)}


def serve(scenario: str, ready: Any) -> None:
    """The pods' server (a process of its own, at the lowest priority: it stands for the pods,
    which do not share the controller's cores): `/pod/<i>/metrics`."""
    from aiohttp import web

    os.nice(19)
    normal = own_page()
    hostile = pages(scenario)

    async def page(request: web.Request) -> web.Response:
        body = hostile.get(int(request.match_info['pod']), normal)
        return web.Response(body=body, content_type='text/plain')

    async def run() -> None:
        app = web.Application()
        app.router.add_get('/pod/{pod}/metrics', page)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        # A port per pod: pods have addresses of their own, and the scraper a client per origin.
        for _ in range(PODS):
            await web.TCPSite(runner, '127.0.0.1', 0, backlog=64).start()
        ready.send([address[1] for address in runner.addresses])
        await asyncio.Event().wait()

    asyncio.run(run())


async def cycles(ports: list[int]) -> dict[str, Any]:
    """In the scenario's process: the cycles, the loop's lag and the Lease's renewals."""
    from llmscaler import gc_pause
    from llmscaler.clock import LoopClock
    from llmscaler.collect.readings import ModelScope
    from llmscaler.collect.scrape.source import PodScrapeSource, ScrapeConfig, ScrapeTarget
    from llmscaler.devcluster.fakeapi.server import FakeAPI
    from llmscaler.kube.client import make_client
    from llmscaler.kube.leader import LeaderConfig, LeaderElector

    targets = [
        ScrapeTarget(
            namespace='llm',
            pod=f'pod-{i:04d}',
            url=f'http://127.0.0.1:{port}/pod/{i}/metrics',
            model_name=MODEL,
        )
        for i, port in enumerate(ports)
    ]
    source = PodScrapeSource(config=ScrapeConfig(), targets_fn=lambda: targets)
    scope = (ModelScope(model_id=MODEL, namespace='llm'),)
    lags: list[float] = []
    renewals: list[tuple[float, bool]] = []

    async def probe() -> None:
        loop = asyncio.get_running_loop()
        while True:
            due = loop.time() + 0.01
            await asyncio.sleep(0.01)
            lags.append(max(0.0, loop.time() - due))

    async with FakeAPI() as api:
        client = make_client(server=api.url, timeout=5.0)
        elector = LeaderElector(
            client=client,
            clock=LoopClock(),
            config=LeaderConfig(
                namespace='ns',
                identity='bench',
                lease_duration=3.0,
                renew_deadline=2.0,
                retry_period=0.5,
            ),
            on_renewal=lambda late, ok: renewals.append((late, ok)),
        )
        await elector.acquire()
        holding = asyncio.create_task(elector.hold())
        probing = asyncio.create_task(probe())
        gc_pause.set_aside_start_up()  # as `llmscaler run` does once its parts are made
        durations: list[float] = []
        first_lag = 0.0
        errors: list[str] = []
        try:
            for n in range(CYCLES + 1):
                started = time.perf_counter()
                found = await source.scrape(now=1000.0 + INTERVAL * n)
                await source.read(scope=scope, now=1000.0 + INTERVAL * n)
                took = time.perf_counter() - started
                errors = sorted({e.message.partition(': line')[0][-40:] for e in found})
                await asyncio.sleep(max(0.0, INTERVAL - took))
                if n == 0:
                    first_lag = max(lags, default=0.0)
                    lags.clear()
                    renewals.clear()
                else:
                    durations.append(took)
        finally:
            probing.cancel()
            lost = holding.done()
            holding.cancel()
            await asyncio.gather(probing, holding, return_exceptions=True)
            await source.aclose()
            await client.aclose()
    lags.sort()
    late = [late for late, _ in renewals]
    return {
        'peak': memory('VmHWM'),
        'cycle': statistics.median(durations),
        'p99': lags[int(0.99 * (len(lags) - 1))],
        'max': lags[-1],
        'first': first_lag,
        'renewals': len(renewals),
        'failed': sum(1 for _, ok in renewals if not ok),
        'late': sum(1 for x in late if x > LATE),
        'latest': max(late, default=0.0),
        'lost': lost,
        'errors': len(errors),
    }


def scenario(name: str) -> dict[str, Any]:
    """In the scenario's process: its pods' server, then its cycles."""
    context = multiprocessing.get_context('spawn')
    theirs, ours = context.Pipe()
    server = context.Process(target=serve, args=(name, ours), daemon=True)
    server.start()
    try:
        ports = theirs.recv()
        return asyncio.run(cycles(ports))
    finally:
        server.terminate()
        server.join()


def table() -> str:
    rows = []
    worst_lag, late = 0.0, 0
    for name in SCENARIOS:
        got = in_subprocess(script=__file__, argv=['--one', name])
        if name != 'healthy':
            worst_lag = max(worst_lag, got['max'])
            late += got['late'] + got['failed'] + int(got['lost'])
        rows.append(
            f'| {name} | {got["cycle"]:.2f} | {got["p99"] * 1000:.0f} | {got["max"] * 1000:.0f} '
            f'| {got["first"] * 1000:.0f} | {got["renewals"]} | {got["late"] + got["failed"]} '
            f'| {got["latest"] * 1000:.0f} | {got["peak"] / 2**20:.0f} |'
        )
    head = [
        f'{PODS} pods scraped every {INTERVAL:g} s, {len(HOSTILE)} of them hostile: `over`, the '
        'shapes found (each over a cap); `at`, pages just within every cap; `healthy`, none '
        f'(the baseline). Lag and lateness in ms; the steady figures are over {CYCLES} cycles '
        f'after the first. Goals: lag ≤ {GOAL_LAG * 1000:.0f} ms with hostile pods: '
        f'{"met" if worst_lag <= GOAL_LAG else "not met"} (worst {worst_lag * 1000:.0f} ms); '
        f'no renewal late (over {LATE * 1000:.0f} ms) or failed: '
        f'{"met" if late == 0 else f"not met ({late})"}.',
        '',
        '| pages | cycle s | lag p99 | lag max | lag max, first cycle | renewals '
        '| late or failed | latest renewal | peak RSS MiB |',
        '|---|---|---|---|---|---|---|---|---|',
    ]
    return '\n'.join(head + rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or '').splitlines()[0])
    parser.add_argument('--write-docs', action='store_true', help='write docs/reliability.md')
    parser.add_argument('--one', choices=sorted(SCENARIOS), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(scenario(args.one)))
        return
    doc_blocks.emit(DOCS, markers=MARKERS, body=table(), write_docs=args.write_docs)


if __name__ == '__main__':
    main()
