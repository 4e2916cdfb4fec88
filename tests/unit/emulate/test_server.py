"""The emulator's ports over real loopback HTTP, its real-time ticking and its command line.

Ports: every test binds base_port=0 and epp_port=0, so each site takes an ephemeral port and the
running emulator reports them (`ports`, `epp_port`); one test checks base_port + i on a free
range. The fake clock moves only when a test sets it; the emulator ticks every 10 ms of real time
and at every request. Worked numbers use the 8B-H100 step model (see test_emulate_fleet).
"""

from __future__ import annotations

import asyncio
import math
import os
import signal
import socket
import subprocess
import sys
import urllib.request
from collections.abc import AsyncIterator
from itertools import takewhile

import aiohttp
import pytest

from llmscaler.emulate.exposition import CONTENT_TYPE
from llmscaler.emulate.load import PoissonLoad, TraceLoad, arrivals
from llmscaler.emulate.server import RunningEmulator, build_parser, main, serve
from llmscaler.sim.vllm.fast import FastReplica
from llmscaler.sim.vocabulary import SimRequest, VariantSpec
from tests.support.emulate_fixtures import MODEL, OPENMETRICS, T0, FakeClock, h100, samples, until
from tests.support.paths import ROOT

SRC = ROOT / 'src'


def in_flight(running: RunningEmulator, slot: int) -> int:
    pod = running.emulator.pod(slot)
    return len(pod.inflight) if pod is not None else 0


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


@pytest.fixture
async def started() -> AsyncIterator[list[RunningEmulator]]:
    running: list[RunningEmulator] = []
    yield running
    for r in running:
        await r.stop()


async def start(
    started: list[RunningEmulator],
    clock: FakeClock,
    *,
    replicas: int,
    spec: VariantSpec | None = None,
    load: PoissonLoad | TraceLoad | None = None,
    base_port: int = 0,
) -> RunningEmulator:
    running = await serve(
        host='127.0.0.1',
        base_port=base_port,
        epp_port=0,
        spec=spec or h100(),
        replicas=replicas,
        model_name=MODEL,
        namespace='ns',
        load=load,
        seed=7,
        clock=clock,
        wall_clock=lambda: 1.7e9,
        tick_interval=0.01,
    )
    started.append(running)
    return running


async def scrape(http: aiohttp.ClientSession, port: int) -> dict[tuple[str, str], float]:
    """(sample name, one distinguishing label value or '') → value."""
    async with http.get(f'http://127.0.0.1:{port}/metrics') as response:
        assert response.status == 200
        return samples(await response.text())


# ---- pages and content type ----------------------------------------------------------------


async def test_pages_are_text_0_0_4_even_when_openmetrics_is_asked(
    started: list[RunningEmulator], http: aiohttp.ClientSession
) -> None:
    running = await start(started, FakeClock(), replicas=2)
    assert len(set(running.ports)) == 2
    assert running.epp_port not in running.ports
    for port in (*running.ports, running.epp_port):
        url = f'http://127.0.0.1:{port}/metrics'
        async with http.get(url, headers={'Accept': OPENMETRICS}) as response:
            assert response.headers['Content-Type'] == CONTENT_TYPE
            text = await response.text()
        assert ('vllm:kv_cache_usage_perc{' in text) != (port == running.epp_port)
        assert 'vllm_' not in text
    async with http.get(f'http://127.0.0.1:{running.ports[0]}/health') as response:
        assert response.status == 200


async def test_replica_i_listens_on_base_port_plus_i(started: list[RunningEmulator]) -> None:
    base = free_range(3)
    running = await start(started, FakeClock(), replicas=2, base_port=base)
    assert list(running.ports) == [base, base + 1]
    await running.scale(replicas=3)
    assert list(running.ports) == [base, base + 1, base + 2]


def free_range(n: int) -> int:
    for _ in range(50):
        with socket.socket() as probe:
            probe.bind(('127.0.0.1', 0))
            base = int(probe.getsockname()[1])
        if base + n > 65535:
            continue
        socks = []
        try:
            for i in range(n):
                s = socket.socket()
                socks.append(s)
                s.bind(('127.0.0.1', base + i))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    pytest.skip('no free port range')


# ---- the replica model behind the pages ------------------------------------------------------


async def test_constant_load_follows_the_replica_model(
    started: list[RunningEmulator], http: aiohttp.ClientSession
) -> None:
    # 119 usable blocks of 16 tokens hold ~4 requests of 400 + 150 tokens (35 blocks each), each
    # ~1.1 s long, so 8 requests/s build a queue, fill the cache and preempt.
    spec = h100(num_gpu_blocks=120)
    load = PoissonLoad(rate=8.0, input_tokens=400, output_tokens=150)
    clock = FakeClock()
    running = await start(started, clock, replicas=1, spec=spec, load=load)
    port = running.ports[0]
    direct = FastReplica(spec=spec, name='direct', now=T0)
    due = arrivals(load=load, seed=7, start=T0, max_model_len=spec.max_model_len)
    pending = next(due)
    previous: dict[tuple[str, str], float] = {}
    saw_waiting = saw_preemption = False
    for k in range(1, 41):
        clock.t = T0 + 0.25 * k
        while pending.time <= clock.t:
            direct.advance(until=pending.time)
            request = SimRequest(
                rid=0,
                arrival=pending.time,
                input_tokens=pending.input_tokens,
                output_tokens=pending.output_tokens,
            )
            direct.submit(request=request, now=pending.time)
            pending = next(due)
        direct.advance(until=clock.t)
        page = await scrape(http, port)
        assert page[('vllm:num_requests_waiting', '')] == direct.waiting
        assert page[('vllm:num_requests_running', '')] == direct.running
        assert page[('vllm:kv_cache_usage_perc', '')] == direct.kv_usage
        c = direct.counters
        assert page[('vllm:prompt_tokens_total', '')] == c.prompt_tokens_total
        assert page[('vllm:generation_tokens_total', '')] == c.generation_tokens_total
        assert page[('vllm:num_preemptions_total', '')] == c.preemptions_total
        success = page[('vllm:request_success_total', 'stop')]
        assert success == c.request_success_total
        assert page[('vllm:request_prompt_tokens_sum', '')] == c.prompt_tokens_sum
        assert page[('vllm:time_to_first_token_seconds_count', '')] == c.ttft_count
        assert math.isclose(page[('vllm:time_to_first_token_seconds_sum', '')], c.ttft_sum)
        for key in (
            ('vllm:prompt_tokens_total', ''),
            ('vllm:generation_tokens_total', ''),
            ('vllm:request_success_total', 'stop'),
        ):
            assert page[key] >= previous.get(key, 0.0)
        previous = page
        saw_waiting |= direct.waiting > 0
        saw_preemption |= c.preemptions_total > 0
    assert previous[('vllm:request_success_total', 'stop')] > 10
    assert saw_waiting
    assert saw_preemption


# ---- the gateway ---------------------------------------------------------------------------------


async def test_epp_queue_holds_arrivals_without_replicas_until_a_scale_up(
    started: list[RunningEmulator], http: aiohttp.ClientSession
) -> None:
    clock = FakeClock()
    load = PoissonLoad(rate=5.0, input_tokens=100, output_tokens=10)
    running = await start(started, clock, replicas=0, load=load)
    assert running.ports == ()
    clock.t = T0 + 2.0
    expected = list(
        takewhile(
            lambda a: a.time <= clock.t,
            arrivals(load=load, seed=7, start=T0, max_model_len=131_072),
        )
    )
    n = len(expected)
    assert n > 3
    epp = await scrape(http, running.epp_port)
    assert epp[('inference_extension_flow_control_queue_size', '')] == n
    # Load requests weigh 4 bytes per prompt token in the queue.
    assert epp[('inference_extension_flow_control_queue_bytes', '')] == n * 100 * 4
    await running.scale(replicas=1)
    assert len(running.ports) == 1
    epp = await scrape(http, running.epp_port)
    assert epp[('inference_extension_flow_control_queue_size', '')] == 0
    assert epp[('inference_extension_scheduler_attempts_total', 'llama-3.1-8b-h100-0')] == n
    async with http.get(f'http://127.0.0.1:{running.epp_port}/metrics') as response:
        assert f'port="{running.ports[0]}"' in await response.text()
    page = await scrape(http, running.ports[0])
    assert page[('vllm:num_requests_waiting', '')] == n  # dispatched now, no step yet


# ---- scaling -------------------------------------------------------------------------------------


async def test_scale_down_drains_then_closes_the_port(
    started: list[RunningEmulator], http: aiohttp.ClientSession
) -> None:
    clock = FakeClock()
    running = await start(started, clock, replicas=2)
    p0, p1 = running.ports
    body = {'prompt': 'x y', 'max_tokens': 50}
    task = asyncio.create_task(http.post(f'http://127.0.0.1:{p1}/v1/completions', json=body))
    await until(lambda: in_flight(running, 1) == 1)
    await running.scale(replicas=1)
    assert running.ports == (p0,)
    assert running.slot_ports == {0: p0, 1: p1}
    page = await scrape(http, p1)  # a draining pod is still scraped
    assert page[('vllm:num_requests_waiting', '')] == 1
    async with http.post(f'http://127.0.0.1:{p1}/v1/completions', json=body) as refused:
        assert refused.status == 503
    clock.t = T0 + 5.0
    await running.tick()
    async with await task as response:
        assert response.status == 200
    assert running.slot_ports == {0: p0}
    with pytest.raises(aiohttp.ClientConnectionError):
        await scrape(http, p1)
    await running.scale(replicas=3)
    assert len(running.ports) == 3
    names = [p.name for p in running.emulator.pods]
    assert names == ['llama-3.1-8b-h100-0', 'llama-3.1-8b-h100-2', 'llama-3.1-8b-h100-3']


# ---- what fails ----------------------------------------------------------------------------------


@pytest.mark.parametrize('interval', [0.0, -0.01, math.nan, math.inf])
async def test_a_bad_tick_interval_is_refused(interval: float) -> None:
    with pytest.raises(ValueError, match='tick_interval must be finite and > 0'):
        await serve(
            base_port=0,
            epp_port=0,
            spec=h100(),
            replicas=1,
            model_name=MODEL,
            tick_interval=interval,
        )


async def test_a_port_in_use_or_out_of_range_fails_and_closes_the_others() -> None:
    epp = free_range(1)
    with socket.socket() as busy:
        busy.bind(('127.0.0.1', 0))
        busy.listen()
        port = int(busy.getsockname()[1])
        # The EPP port opens first, then the replica's fails.
        with pytest.raises(OSError, match='in use'):
            await serve(base_port=port, epp_port=epp, spec=h100(), replicas=1, model_name=MODEL)
    with socket.socket() as again:
        again.bind(('127.0.0.1', epp))  # closed by serve on its way out
    with pytest.raises(OSError, match='port 70000 is out of range'):
        await serve(base_port=0, epp_port=70_000, spec=h100(), replicas=1, model_name=MODEL)


async def test_a_failing_tick_is_raised_by_stop_after_the_ports_close(
    started: list[RunningEmulator], http: aiohttp.ClientSession
) -> None:
    clock = FakeClock()
    running = await start(started, clock, replicas=1)
    port = running.ports[0]
    clock.t = math.nan  # the next tick of the 10 ms loop fails
    await asyncio.sleep(0.1)
    with pytest.raises(ValueError, match='NaN'):
        await running.stop()
    assert (running.slot_ports, running.ports) == ({}, ())
    with pytest.raises(aiohttp.ClientConnectionError):
        await scrape(http, port)


# ---- command line --------------------------------------------------------------------------------


def test_parser_defaults_and_errors(capsys: pytest.CaptureFixture[str]) -> None:
    args = build_parser().parse_args([])
    assert (args.preset, args.replicas, args.base_port, args.epp_port) == (
        'llama-3.1-8b-h100',
        2,
        18000,
        18100,
    )
    assert (args.rate, args.trace, args.speed, args.seed, args.host) == (
        None,
        None,
        1.0,
        1,
        '127.0.0.1',
    )
    assert main(['--preset', 'nope']) == 2
    assert 'unknown preset' in capsys.readouterr().err
    assert main(['--rate', '-1']) == 2
    assert 'rate' in capsys.readouterr().err
    assert main(['--replicas', '-1']) == 2
    assert '--replicas must be >= 0, got -1' in capsys.readouterr().err
    assert main(['--trace', '/nonexistent/trace.csv']) == 2
    assert 'no such file' in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(['--rate', '1', '--trace', 'x.csv'])


def test_main_returns_1_when_a_port_is_in_use(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as busy:
        busy.bind(('127.0.0.1', 0))
        busy.listen()
        port = str(busy.getsockname()[1])
        assert main(['--base-port', port, '--epp-port', '0', '--replicas', '1']) == 1
    assert 'in use' in capsys.readouterr().err


def test_main_serves_until_sigterm() -> None:
    env = {**os.environ, 'PYTHONPATH': str(SRC)}
    command = [sys.executable, '-m', 'llmscaler.emulate.server', '--base-port', '0']
    command += ['--epp-port', '0', '--replicas', '1', '--rate', '2', '--model-name', 'm']
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env) as process:
        assert process.stdout is not None
        replica = process.stdout.readline().split()[-1]
        epp = process.stdout.readline().split()[-1]
        assert replica.startswith('http://127.0.0.1:')
        assert epp.startswith('http://127.0.0.1:')
        with urllib.request.urlopen(replica, timeout=5) as response:
            assert response.headers['Content-Type'] == CONTENT_TYPE
            assert b'vllm:num_requests_running{engine="0",model_name="m"}' in response.read()
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=5) == 0
