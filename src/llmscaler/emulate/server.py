"""`llmscaler emulate`: an emulator's ports opened on the network and ticked in real time.

Why: collectors, Prometheus and the controller reach emulated pods the way they reach vLLM: one
port per pod, one for the gateway, pages and completions that change as the wall clock runs.
`fleet` is the model (no I/O), `http` the endpoints; this module runs them: it binds the ports,
keeps them in step with the emulator's slots as it scales, ticks it and is the command line.

What: `serve` builds an `Emulator` and returns a started `RunningEmulator`. Replica slot i
listens on base_port + i (base_port 0: every site binds an ephemeral port, reported in
`RunningEmulator.ports`), the EPP on epp_port. A new replica's port opens at the scale that adds
it; a draining replica's port stays open until it is gone. `main` serves the options of
`build_parser()` (a preset, a Poisson rate or a trace) until SIGINT or SIGTERM.

What fails: `serve` raises ValueError for a tick_interval that is NaN, infinite, zero or
negative and what `Emulator` refuses; binding a port in use or out of range raises OSError
(the ports opened so far are closed first). A failure of the ticking task is raised by `stop()`.
`main` returns 2 for bad options (an unknown preset, an unreadable trace, a negative count or
rate; argparse itself exits with 2 on malformed ones) and 1 when serving fails.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import socket
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web

from llmscaler.emulate.fleet import Emulator
from llmscaler.emulate.http import epp_app, replica_app
from llmscaler.emulate.load import Load, PoissonLoad, TraceLoad, check_positive
from llmscaler.sim.hardware import presets
from llmscaler.sim.vllm.base import check_spec
from llmscaler.sim.vocabulary import VariantSpec
from llmscaler.sim.workload.formats import TraceError
from llmscaler.sim.workload.trace import load_trace


@dataclass(slots=True)
class _Site:
    runner: web.AppRunner
    port: int


async def _open_site(*, app: web.Application, host: str, port: int) -> _Site:
    if not 0 <= port <= 65535:
        raise OSError(f'port {port} is out of range')
    family = socket.AF_INET6 if ':' in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    await web.SockSite(runner, sock).start()
    return _Site(runner=runner, port=int(sock.getsockname()[1]))


class RunningEmulator:
    """An `Emulator` served over HTTP and ticked every `tick_interval` seconds of real time."""

    def __init__(
        self, *, emulator: Emulator, host: str, base_port: int, tick_interval: float
    ) -> None:
        self.emulator = emulator
        self.host = host
        self.epp_port = 0
        self._base_port = base_port
        self._interval = tick_interval
        self._sites: dict[int, _Site] = {}
        self._epp: _Site | None = None
        self._lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None

    @property
    def ports(self) -> tuple[int, ...]:
        """Ports of the ready replicas, slot order (slot i is ports[i])."""
        return tuple(self._sites[s].port for s in range(self.emulator.replicas) if s in self._sites)

    @property
    def slot_ports(self) -> dict[int, int]:
        """Every open replica port by slot, draining ones included."""
        return {slot: site.port for slot, site in sorted(self._sites.items())}

    async def start(self, *, epp_port: int) -> None:
        app = epp_app(emulator=self.emulator)
        self._epp = await _open_site(app=app, host=self.host, port=epp_port)
        self.epp_port = self._epp.port
        await self._sync_sites()
        self._task = asyncio.create_task(self._loop())

    async def tick(self) -> None:
        """Advance the emulator now and open/close replica ports to match its slots."""
        self.emulator.tick()
        await self._sync_sites()

    async def scale(self, *, replicas: int) -> None:
        """`Emulator.scale`, then open the new replicas' ports (use this, not the emulator's)."""
        self.emulator.scale(replicas=replicas)
        await self._sync_sites()

    async def stop(self) -> None:
        """Stop ticking, end pending requests with 503, close every port."""
        task, self._task = self._task, None
        failure: BaseException | None = None
        if task is not None:
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass
            except Exception as exc:  # re-raised below, after the ports are closed
                failure = exc
        self.emulator.abort_all()
        await asyncio.sleep(0)
        sites = [*self._sites.values(), *([self._epp] if self._epp else [])]
        self._sites, self._epp = {}, None
        for site in sites:
            await site.runner.cleanup()
        if failure is not None:
            raise failure

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self._interval)
            await self.tick()

    async def _sync_sites(self) -> None:
        async with self._lock:
            wanted = set(self.emulator.slots)
            for slot in sorted(set(self._sites) - wanted):
                await self._sites.pop(slot).runner.cleanup()
            for slot in sorted(wanted - set(self._sites)):
                app = replica_app(emulator=self.emulator, slot=slot)
                port = self._base_port + slot if self._base_port else 0
                self._sites[slot] = await _open_site(app=app, host=self.host, port=port)
            for slot, site in self._sites.items():
                pod = self.emulator.pod(slot)
                if pod is not None:
                    pod.port = site.port


async def serve(
    *,
    host: str = '127.0.0.1',
    base_port: int,
    epp_port: int,
    spec: VariantSpec,
    replicas: int,
    model_name: str,
    namespace: str = 'default',
    load: Load | None = None,
    seed: int = 0,
    clock: Callable[[], float] = time.monotonic,
    wall_clock: Callable[[], float] = time.time,
    tick_interval: float = 0.02,
    pool: str | None = None,
) -> RunningEmulator:
    """Start the emulator's HTTP ports and its real-time ticking; stop it with `stop()`."""
    check_positive(name='tick_interval', value=tick_interval)
    emulator = Emulator(
        spec=spec,
        replicas=replicas,
        model_name=model_name,
        namespace=namespace,
        clock=clock,
        load=load,
        seed=seed,
        wall_start=wall_clock(),
        pool=pool,
    )
    running = RunningEmulator(
        emulator=emulator, host=host, base_port=base_port, tick_interval=tick_interval
    )
    try:
        await running.start(epp_port=epp_port)
    except BaseException:
        await running.stop()
        raise
    return running


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog='llmscaler emulate', description='Emulate vLLM pods and their gateway over HTTP.'
    )
    add = parser.add_argument
    add(
        '--preset',
        default='llama-3.1-8b-h100',
        help='hardware preset (llmscaler.sim.hardware.presets)',
    )
    add('--num-gpu-blocks', type=int, default=None, help='override the KV cache size (blocks)')
    add('--replicas', type=int, default=2)
    add('--base-port', type=int, default=18000, help='replica i listens on base-port + i (0: any)')
    add('--epp-port', type=int, default=18100, help='the gateway (EPP) port (0: any)')
    source = parser.add_mutually_exclusive_group()
    source.add_argument('--rate', type=float, default=None, help='Poisson load, requests/s')
    source.add_argument('--trace', type=Path, default=None, help='trace file to replay')
    add('--speed', type=float, default=1.0, help='trace replay speed factor')
    add('--input-tokens', type=int, default=None, help='fixed prompt length of the --rate load')
    add('--output-tokens', type=int, default=None, help='fixed output length of the --rate load')
    add('--model-name', default=None, help="served model name (default: the preset's model)")
    add('--namespace', default='default')
    add('--pool', default=None, help='InferencePool the EPP page names (default: <preset>-pool)')
    add('--host', default='127.0.0.1')
    add('--seed', type=int, default=1)
    add(
        '--prefix-caching',
        action='store_true',
        help="replicas keep vLLM's prefix cache; a trace's hash_ids (Mooncake) say what prompts "
        'share',
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """`llmscaler emulate`: serve until SIGINT/SIGTERM; 0 on a clean stop, 1 or 2 on errors."""
    args = build_parser().parse_args(argv)
    try:
        if args.replicas < 0:
            raise ValueError(f'--replicas must be >= 0, got {args.replicas}')
        overrides: dict[str, Any] = (
            {} if args.num_gpu_blocks is None else {'num_gpu_blocks': args.num_gpu_blocks}
        )
        if args.prefix_caching:
            overrides['prefix_caching'] = True
        spec = presets.preset(name=args.preset, **overrides)
        check_spec(spec)
        load: Load | None = None
        if args.trace is not None:
            load = TraceLoad(trace=load_trace(path=args.trace), speed=args.speed)
        elif args.rate is not None:
            load = PoissonLoad(
                rate=args.rate, input_tokens=args.input_tokens, output_tokens=args.output_tokens
            )
    except (ValueError, TraceError) as exc:
        print(f'llmscaler emulate: {exc}', file=sys.stderr)
        return 2
    try:
        return asyncio.run(_run(args=args, spec=spec, load=load))
    except (OSError, ValueError) as exc:
        print(f'llmscaler emulate: {exc}', file=sys.stderr)
        return 1


async def _run(*, args: argparse.Namespace, spec: VariantSpec, load: Load | None) -> int:
    running = await serve(
        host=args.host,
        base_port=args.base_port,
        epp_port=args.epp_port,
        spec=spec,
        replicas=args.replicas,
        model_name=args.model_name or spec.model_id,
        namespace=args.namespace,
        load=load,
        seed=args.seed,
        pool=args.pool,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    for slot, port in running.slot_ports.items():
        pod = running.emulator.pod(slot)
        name = pod.name if pod is not None else '?'
        print(f'replica {slot} {name}: http://{args.host}:{port}/metrics', flush=True)
    print(
        f'epp of InferencePool {running.emulator.pool}: '
        f'http://{args.host}:{running.epp_port}/metrics',
        flush=True,
    )
    await stop.wait()
    await running.stop()
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
