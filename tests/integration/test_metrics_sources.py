"""Both metric sources against the vLLM pod emulator, with a real Prometheus in between.

The emulator serves two replicas of Llama-3.1-8B on H100 under a Poisson load, with vLLM's real
metric names; a real Prometheus scrapes them every second (Debian's 2.42 and the 3.16 built
from its Go module, one run each), and the pod-scraping source
scrapes the same endpoints itself. Then:

| check | expectation |
|---|---|
| every registered query, through Prometheus | no error; the emulator's pods, its KV blocks, fresh |
| Prometheus source vs pod-scraping source | same pods and KV capacity; gauges, averages close |
| the predictive analyzer's inputs, both sources | per replica arrival rate, token mix, TTFT, ITL, |
|   | running and queue; per model arrival rate (the sum of the replicas') and gateway queue |
| latency histograms (TTFT, per-request TPOT), both sources | totals = the emulator's first |
|   | tokens / finished requests of the last minute; counts valid; attributed to the replicas |
| both readings attributed and decided | the same decision from `engine.decide`: one replica |
| replicas scaled to 0 while requests arrive | both see the EPP queue; scale-from-zero wakes h100 |
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from llmscaler.analyze.validity import histogram_violation
from llmscaler.collect.attribution import PodInfo, TargetRef, attribute
from llmscaler.collect.prometheus.source import PrometheusConfig, PrometheusSource
from llmscaler.collect.readings import ModelScope, PodReading, Reading
from llmscaler.collect.scrape.source import PodScrapeSource, ScrapeConfig, ScrapeTarget
from llmscaler.config.resolved import Config, ModelConfig, PredictiveConfig, SaturationConfig
from llmscaler.domain.snapshot import Snapshot, Variant
from llmscaler.domain.state import EMPTY_STATE
from llmscaler.emulate.load import PoissonLoad
from llmscaler.emulate.server import RunningEmulator, serve
from llmscaler.enforce.scale_from_zero import wake
from llmscaler.engine import decide
from llmscaler.sim.hardware.presets import preset
from tests.support import prom

pytestmark = pytest.mark.integration

MODEL = 'meta-llama/Llama-3.1-8B-Instruct'
NS = 'llm'
SCOPE = (ModelScope(model_id=MODEL, namespace=NS, retention_period=15.0, latency_histograms=True),)
SPEC = preset(name='llama-3.1-8b-h100', variant_name='h100')


@contextlib.asynccontextmanager
async def emulator(replicas: int) -> AsyncIterator[RunningEmulator]:
    running = await serve(
        base_port=0,
        epp_port=0,
        spec=SPEC,
        replicas=replicas,
        model_name=MODEL,
        namespace=NS,
        load=PoissonLoad(rate=6.0),
        seed=1,
    )
    try:
        yield running
    finally:
        await running.stop()


def prometheus_targets(running: RunningEmulator) -> list[prom.Target]:
    # The labels a kube pod service discovery would attach; the EPP's own series carry theirs.
    targets = [
        prom.Target(address=f'127.0.0.1:{pod.port}', labels=(('namespace', NS), ('pod', pod.name)))
        for pod in running.emulator.pods
    ]
    targets.append(prom.Target(address=f'127.0.0.1:{running.epp_port}', labels=(), job='epp'))
    return targets


def scrape_targets(running: RunningEmulator) -> list[ScrapeTarget]:
    targets = [
        ScrapeTarget(namespace=NS, pod=pod.name, url=f'http://127.0.0.1:{pod.port}/metrics')
        for pod in running.emulator.pods
    ]
    targets.append(
        ScrapeTarget(
            namespace=NS, pod='epp', url=f'http://127.0.0.1:{running.epp_port}/metrics', kind='epp'
        )
    )
    return targets


async def scrape_every_second(source: PodScrapeSource, stop: asyncio.Event) -> None:
    while not stop.is_set():
        await source.scrape(now=time.time())
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=1.0)


Counts = dict[str, tuple[int, int]]
"""Per pod: (requests that got their first token, requests that finished), since it started."""


def emulator_counts(running: RunningEmulator) -> Counts:
    return {
        pod.name: (
            pod.stats.histograms['vllm:time_to_first_token_seconds'].count,
            sum(pod.stats.success.values()),
        )
        for pod in running.emulator.pods
    }


async def count_every_half_second(
    running: RunningEmulator, history: list[tuple[float, Counts]], stop: asyncio.Event
) -> None:
    while not stop.is_set():
        history.append((time.time(), emulator_counts(running)))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=0.5)


@contextlib.asynccontextmanager
async def in_background(
    *,
    running: RunningEmulator,
    sources: tuple[PodScrapeSource, ...],
    history: list[tuple[float, Counts]],
) -> AsyncIterator[None]:
    """The emulator's counts and the sources' scrapes, every half second and every second; all
    stopped and the sources closed however the test ends, so that no task outlives it to fail,
    unretrieved, a later test on the same worker."""
    stop = asyncio.Event()
    tasks = [
        asyncio.create_task(count_every_half_second(running, history, stop)),
        *(asyncio.create_task(scrape_every_second(source, stop)) for source in sources),
    ]
    try:
        yield
    finally:
        stop.set()
        try:
            await asyncio.gather(*tasks)
        finally:
            for source in sources:
                await source.aclose()


def counted_in_last_minute(history: list[tuple[float, Counts]], now: float) -> Counts:
    """What the emulator counted per pod in (now − 60, now], from the samples nearest both ends."""
    start = min(history, key=lambda entry: abs(entry[0] - (now - 60)))[1]
    end = min(history, key=lambda entry: abs(entry[0] - now))[1]
    return {pod: (end[pod][0] - start[pod][0], end[pod][1] - start[pod][1]) for pod in end}


def check_histograms(reading: Reading, counted: Counts) -> None:
    """Each pod's histograms hold the requests the emulator counted in the window, validly."""
    for pod in reading.pods:
        first_tokens, finished = counted[pod.pod]
        assert finished > 60, counted  # about 3 requests/s per replica
        for histogram, expected in (
            (pod.ttft_histogram, first_tokens),
            (pod.tpot_histogram, finished),
        ):
            assert histogram is not None, pod
            assert histogram_violation(histogram) == '', histogram
            assert len(histogram.bounds) > 10, histogram  # vLLM's buckets, not a stub
            assert close(histogram.total, expected, rel=0.1, abs_=6), (
                histogram,
                expected,
                pod.pod,
            )
            # Requests below the largest bound, and not all below the smallest: real latencies.
            assert histogram.counts[0] < histogram.total, histogram
            assert histogram.counts[-1] > 0, histogram


def close(a: float | None, b: float | None, *, rel: float, abs_: float = 0.0) -> bool:
    if a is None or b is None:
        return a is b
    return math.isclose(a, b, rel_tol=rel, abs_tol=abs_)


def snapshot_of(reading: Reading, running: RunningEmulator) -> Snapshot:
    variant = Variant(
        name='h100',
        namespace=NS,
        model_id=MODEL,
        cost=3.9,
        min_replicas=1,
        max_replicas=8,
        current_replicas=2,
        ready_replicas=2,
    )
    pods = [
        PodInfo(
            namespace=NS,
            name=pod.name,
            owners=(('ReplicaSet', 'h100-5d8b'), ('Deployment', 'h100')),
        )
        for pod in running.emulator.pods
    ]
    attributed = attribute(
        reading=reading,
        variants=[variant],
        targets=[TargetRef(namespace=NS, kind='Deployment', name='h100', variant='h100')],
        pods=pods,
    )
    return Snapshot(variants=(variant,), replicas=attributed.replicas, pools=attributed.pools)


@pytest.mark.parametrize('server', prom.SERVERS)
async def test_both_sources_read_what_the_emulator_serves(tmp_path: Path, server: str) -> None:
    prom.binary(server)
    async with emulator(replicas=2) as running:
        scraper = PodScrapeSource(config=ScrapeConfig(), targets_fn=lambda: scrape_targets(running))
        # The same pods read by a second Prometheus and a second scraper without the gateway.
        bare = PodScrapeSource(
            config=ScrapeConfig(), targets_fn=lambda: scrape_targets(running)[:-1]
        )
        history: list[tuple[float, Counts]] = []
        (tmp_path / 'bare').mkdir()
        async with (
            in_background(running=running, sources=(scraper, bare), history=history),
            prom.running(
                targets=prometheus_targets(running), workdir=tmp_path, server=server
            ) as url,
            prom.running(
                targets=prometheus_targets(running)[:-1], workdir=tmp_path / 'bare', server=server
            ) as bare_url,
        ):
            await prom.wait_for(url=url, query='vllm:num_requests_running', count=2)
            await prom.wait_for(url=bare_url, query='vllm:num_requests_running', count=2)
            await prom.wait_for(
                url=url, query='inference_extension_flow_control_queue_size', count=1
            )
            # A whole minute of load: the 1-minute rates (arrivals) measure a steady load, not
            # the minute in which it began.
            await asyncio.sleep(62)
            source = PrometheusSource(config=PrometheusConfig(base_url=url, timeout=5.0))
            now = time.time()
            through_prometheus = await source.read(scope=SCOPE, now=now)
            scraped = await scraper.read(scope=SCOPE, now=now)
            await source.aclose()
            bare_source = PrometheusSource(config=PrometheusConfig(base_url=bare_url, timeout=5.0))
            without_gateway = (
                await bare_source.read(scope=SCOPE, now=now),
                await bare.read(scope=SCOPE, now=now),
            )
            await bare_source.aclose()

            assert through_prometheus.errors == ()
            assert through_prometheus.dropped_non_finite == 0
            pods = {pod.name for pod in running.emulator.pods}
            by_prometheus = {p.pod: p for p in through_prometheus.pods}
            by_scrape = {p.pod: p for p in scraped.pods}
            assert set(by_prometheus) == set(by_scrape) == pods
            for name in sorted(pods):
                compare_pods(by_prometheus[name], by_scrape[name], now=now)
            # The latency histograms of the last minute, from both sources, and attributed.
            counted = counted_in_last_minute(history, now)
            for reading in (through_prometheus, scraped, *without_gateway):
                check_histograms(reading, counted)
                replicas = {r.pod: r for r in snapshot_of(reading, running).replicas}
                for pod in reading.pods:
                    assert replicas[pod.pod].ttft_histogram == pod.ttft_histogram
                    assert replicas[pod.pod].tpot_histogram == pod.tpot_histogram

            (model_p,) = through_prometheus.models
            (model_s,) = scraped.models
            assert model_p.queue_size == model_s.queue_size == 0
            for reading, model in ((through_prometheus, model_p), (scraped, model_s)):
                # The EPP's dispatches, per pod and per model: the same series summed two ways.
                assert model.arrival_rate is not None
                assert 4.5 < model.arrival_rate < 7.5  # the emulator's Poisson rate is 6/s
                per_pod = [p.arrival_rate for p in reading.pods]
                assert all(rate is not None and rate > 0 for rate in per_pod), per_pod
                assert math.isclose(math.fsum(r or 0.0 for r in per_pod), model.arrival_rate)
                snapshot = snapshot_of(reading, running)
                (pool,) = snapshot.pools
                assert (pool.arrival_rate, pool.queue_size) == (model.arrival_rate, 0.0)
                assert sorted((r.pod, r.arrival_rate, r.avg_itl) for r in snapshot.replicas) == (
                    sorted((p.pod, p.arrival_rate, p.avg_itl) for p in reading.pods)
                )
            assert close(model_p.arrival_rate, model_s.arrival_rate, rel=0.15)

            # Without a gateway, a pod's arrival rate is its own admissions (first tokens per
            # second): about its share of the gateway's dispatches, the queues being short.
            for reading in without_gateway:
                assert reading.errors == ()
                (model,) = reading.models  # the request count, from vLLM
                # No gateway: no arrival rate, and no flow-control queue, which is 0 (not None,
                # which would be a queue the source failed to read and hold the model).
                assert (model.arrival_rate, model.queue_size) == (None, 0.0)
                assert model.request_count is not None
                assert {p.pod for p in reading.pods} == pods
                for one in reading.pods:
                    dispatched = by_prometheus[one.pod].arrival_rate
                    assert one.arrival_rate is not None
                    assert close(one.arrival_rate, dispatched, rel=0.25), (one, dispatched)
                assert 4.5 < math.fsum(p.arrival_rate or 0.0 for p in reading.pods) < 7.5
                # So the predictive analyzer has the demand it sizes for, gateway or not.
                predictive = Config(default=ModelConfig(predictive=PredictiveConfig()))
                decided = decide(
                    snapshot=snapshot_of(reading, running),
                    config=predictive,
                    state=EMPTY_STATE,
                    now=now,
                )
                for decision in decided.decisions:
                    assert decision.analyzer == 'predictive', decision
                    assert decision.metrics_reason == 'MetricsFound', decision
                    assert 'missing' not in decision.reason, decision
            assert model_p.request_count is not None
            assert model_p.request_count > 0
            assert close(model_p.request_count, model_s.request_count, rel=0.35, abs_=5)

            # The queue lengths are maxima over the minute sampled at different instants (above:
            # within 2 of each other), and WVA's default queue triggers sit within that of this
            # load (two replicas shrink to one at an average of 1 waiting request, not at 1.5). So
            # the thresholds are moved away from it; the KV usage (4–6 %) is far from its own:
            # both readings must then scale the lightly loaded pair down to one.
            away = Config(
                default=ModelConfig(
                    saturation=SaturationConfig(
                        queue_length_threshold=50.0, queue_spare_trigger=3.0
                    )
                )
            )
            for reading in (through_prometheus, scraped):
                decided = decide(
                    snapshot=snapshot_of(reading, running), config=away, state=EMPTY_STATE, now=now
                )
                assert [
                    (d.variant, d.target, d.analyzer, d.metrics_reason) for d in decided.decisions
                ] == [('h100', 1, 'saturation-percentage', 'MetricsFound')], decided.decisions

            # No replica left: requests queue in the gateway, both sources see it.
            await running.scale(replicas=0)
            await asyncio.sleep(4)
            source = PrometheusSource(config=PrometheusConfig(base_url=url, timeout=5.0))
            now = time.time()
            queued_p = await source.read(scope=SCOPE, now=now)
            queued_s = await scraper.read(scope=SCOPE, now=now)
            await source.aclose()
    for reading in (queued_p, queued_s):
        (model,) = reading.models
        assert model.queue_size is not None
        assert model.queue_size > 0
        assert model.queue_bytes is not None
        assert model.queue_bytes > 0
        idle = Variant(name='h100', namespace=NS, model_id=MODEL, min_replicas=0, max_replicas=8)
        snapshot = Snapshot(variants=(idle,), pools=snapshot_of(reading, running).pools)
        assert [w.variant for w in wake(variants=snapshot.variants, pools=snapshot.pools)] == [
            'h100'
        ]


def compare_pods(p: PodReading, s: PodReading, *, now: float) -> None:
    """The two sources see the same pod within the window tolerance."""
    assert p.model_name == s.model_name == MODEL
    assert p.num_gpu_blocks == s.num_gpu_blocks == SPEC.num_gpu_blocks
    assert p.block_size == s.block_size == SPEC.block_size
    for reading in (p, s):
        assert now - 5 <= reading.observed_at <= now + 1, reading
        assert reading.kv_usage is not None
        assert 0 <= reading.kv_usage <= 1
        assert reading.queue_length is not None
        assert reading.queue_length >= 0
        assert reading.avg_input_tokens is not None
        assert reading.avg_input_tokens > 1
        # Every input of the predictive analyzer is there, not only comparable when absent.
        for figure in ('avg_output_tokens', 'avg_ttft', 'avg_itl', 'arrival_rate'):
            value = getattr(reading, figure)
            assert value is not None, (figure, reading)
            assert value > 0, (figure, reading)
        assert reading.running_requests is not None
        assert reading.running_requests >= 0
    # 1-minute maxima sampled at different instants: close, not equal.
    assert close(p.kv_usage, s.kv_usage, rel=0.5, abs_=0.05)
    assert close(p.queue_length, s.queue_length, rel=0.5, abs_=2)
    assert close(p.avg_input_tokens, s.avg_input_tokens, rel=0.25)
    assert close(p.avg_output_tokens, s.avg_output_tokens, rel=0.25)
    assert close(p.avg_ttft, s.avg_ttft, rel=0.5, abs_=0.05)
    assert close(p.avg_itl, s.avg_itl, rel=0.5, abs_=0.01)
    assert close(p.arrival_rate, s.arrival_rate, rel=0.2)
    assert close(p.running_requests, s.running_requests, rel=0.5, abs_=4)
