"""Benchmark: metric-collection costs (the figures behind the pod-scraping design).

Section 1, exposition parsing: pages parsed per second on one core by
`collect.exposition.Parser` with the collectors' family filter (VLLM_FAMILIES |
EPP_FAMILIES), on the example vLLM page (a `/metrics` page captured from a vLLM server, placed
beside the repository; skipped when absent) and on a synthetic 8-engine vLLM-like page generated
here with prometheus-client (~2,500 lines). The named baseline, measured in the same run on the same
page, is prometheus-client's full parser (`text_string_to_metric_families`, the page decoded first);
the ratio is the figure to compare across machines. Two of our figures: "warm" reuses one Parser for
every page, the steady state of a controller (the label sets of a pod's series come back on every
scrape, so the Parser remembers them), and "cold" builds a new Parser for every page (a pod seen for
the first time, plus the cost of building the Parser).

Goal (issue: metrics in): ≥ 2,000 pages/s per core on the example page.

Every section is a function of the parsed arguments listed in SECTIONS; a new figure is one more
function appended there.

Usage: python bench/metrics.py [--seconds S] [--repeat K]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from llmscaler.collect.attribution import PodInfo, TargetRef, attribute
from llmscaler.collect.exposition import EPP_FAMILIES, VLLM_FAMILIES, Parser
from llmscaler.collect.prometheus import queries
from llmscaler.collect.prometheus.source import PrometheusConfig, PrometheusSource
from llmscaler.collect.readings import ModelScope
from llmscaler.devcluster import loopback
from llmscaler.domain.snapshot import Variant
from llmscaler.sim.vllm.latency_buckets import ITL_BUCKETS, TTFT_BUCKETS

EXAMPLE = Path(__file__).resolve().parents[2] / 'shared' / 'reference' / 'vllm_metrics_example.txt'
FAMILIES = VLLM_FAMILIES | EPP_FAMILIES
GOAL_PAGES_PER_SECOND = 2000.0

# vLLM's bucket sets (vllm/v1/metrics/buckets.py); token histograms use the 1-2-5 series up to
# max_model_len.
Buckets = tuple[float, ...]
LAT: Buckets = (0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960)
LAT = (*LAT, 1920, 7680)
TTFT: Buckets = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5)
TTFT = (*TTFT, 7.5, 10, 20, 40, 80, 160, 640, 2560)
ITL: Buckets = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5, 7.5)
ITL = (*ITL, 10, 20, 40, 80)
TOKENS: Buckets = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000)
ITERATION: Buckets = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)


def synthetic_page(*, engines: int, seed: int = 7) -> bytes:
    """A vLLM-like page with `engines` data-parallel engines, written by prometheus-client."""
    rng = random.Random(seed)
    registry = CollectorRegistry()
    labels = ['model_name', 'engine']
    model = 'meta-llama/Llama-3.1-8B-Instruct'
    gauges = [
        Gauge(f'vllm:{name}', name, labels, registry=registry)
        for name in ('num_requests_running', 'num_requests_waiting', 'kv_cache_usage_perc')
    ]
    counters = [
        Counter(f'vllm:{name}', name, labels, registry=registry)
        for name in (
            'prefix_cache_queries',
            'prefix_cache_hits',
            'num_preemptions',
            'prompt_tokens',
            'generation_tokens',
        )
    ]
    success = Counter(
        'vllm:request_success', 'finished', [*labels, 'finished_reason'], registry=registry
    )
    histograms = [
        Histogram(f'vllm:{name}', name, labels, buckets=buckets, registry=registry)
        for name, buckets in (
            ('request_prompt_tokens', TOKENS),
            ('request_generation_tokens', TOKENS),
            ('iteration_tokens_total', ITERATION),
            ('request_params_n', (1, 2, 5, 10, 20)),
            ('time_to_first_token_seconds', TTFT),
            ('inter_token_latency_seconds', ITL),
            ('request_time_per_output_token_seconds', ITL),
            ('e2e_request_latency_seconds', LAT),
            ('request_queue_time_seconds', LAT),
            ('request_inference_time_seconds', LAT),
            ('request_prefill_time_seconds', LAT),
            ('request_decode_time_seconds', LAT),
        )
    ]
    info = Gauge(
        'vllm:cache_config_info',
        'cache config',
        ['block_size', 'cache_dtype', 'enable_prefix_caching', 'engine', 'num_gpu_blocks'],
        registry=registry,
    )
    for engine in map(str, range(engines)):
        for gauge in gauges:
            gauge.labels(model, engine).set(rng.random() * 50)
        for counter in counters:
            counter.labels(model, engine).inc(rng.randrange(1, 10**6))
        for reason in ('stop', 'length', 'abort'):
            success.labels(model, engine, reason).inc(rng.randrange(1, 10**4))
        for histogram in histograms:
            child = histogram.labels(model, engine)
            for _ in range(20):
                child.observe(rng.expovariate(1 / 200))
        info.labels('16', 'auto', 'True', engine, '27863').set(1)
    return generate_latest(registry)


def pages_per_second(fn: Callable[[], object], *, seconds: float, repeat: int) -> float:
    """Median over `repeat` rounds of (calls / elapsed), each round lasting about `seconds`."""
    fn()
    start = time.perf_counter()
    fn()
    once = max(time.perf_counter() - start, 1e-7)
    calls = max(1, int(seconds / once))
    rates = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        rates.append(calls / (time.perf_counter() - start))
    return statistics.median(rates)


def bench_exposition(args: argparse.Namespace) -> None:
    """Section 1: exposition pages parsed per second, against the official full parser."""
    pages: list[tuple[str, bytes]] = []
    if EXAMPLE.exists():
        pages.append(('example page', EXAMPLE.read_bytes()))
    else:
        print(f'(skipped the example page: {EXAMPLE} is not present)')
    pages.append(('synthetic 8 engines', synthetic_page(engines=8)))
    print('exposition parsing, one core, pages per second (median):')
    for label, raw in pages:
        lines = raw.count(b'\n')
        reused = Parser(families=FAMILIES)
        kept = len(reused.parse(page=raw).samples)

        def warm(raw: bytes = raw, parser: Parser = reused) -> object:
            return parser.parse(page=raw)

        def cold(raw: bytes = raw) -> object:
            return Parser(families=FAMILIES).parse(page=raw)

        def official(raw: bytes = raw) -> object:
            return list(text_string_to_metric_families(raw.decode()))

        baseline = pages_per_second(official, seconds=args.seconds, repeat=args.repeat)
        print(f'  {label}: {lines} lines, {len(raw) / 1024:.0f} KiB, {kept} samples kept')
        print(
            f'    baseline prometheus_client full parse: {baseline:9.0f} pages/s '
            f'({1000 / baseline:6.2f} ms/page)'
        )
        verdicts = []
        for name, fn in (('warm', warm), ('cold', cold)):
            rate = pages_per_second(fn, seconds=args.seconds, repeat=args.repeat)
            print(
                f'    Parser.parse, {name}:{"":20s} {rate:9.0f} pages/s '
                f'({1000 / rate:6.2f} ms/page)  {rate / baseline:5.1f}x baseline'
            )
            verdicts.append(f'{"met" if rate >= GOAL_PAGES_PER_SECOND else "not met"} {name}')
        if label == 'example page':
            print(f'    goal ≥ {GOAL_PAGES_PER_SECOND:,.0f} pages/s: {", ".join(verdicts)}')


def bench_snapshot_from_prometheus(args: argparse.Namespace) -> None:
    """Time to build a snapshot for 10,000 pods from Prometheus responses (loopback server).

    A loopback HTTP server answers every registered query with a canned vector for all pods;
    the figure is `PrometheusSource.read` (HTTP, JSON decoding, folding) plus attribution into the
    core's `ReplicaMetrics`. Baseline: `json.loads` of the same response bodies, the part no
    implementation can skip.
    The first figure is for models whose analyzers do not read the latency histograms; the
    second for models that all do (the predictive analyzer): their two queries then answer one
    series per pod and bucket, most of the bytes.
    """
    for histograms in (False, True):
        asyncio.run(_snapshot_bench(pods=10_000, models=1_000, histograms=histograms))


async def _snapshot_bench(*, pods: int, models: int, histograms: bool) -> None:
    per_model = max(1, pods // models)
    scope = tuple(
        ModelScope(
            model_id=f'model-{m:04d}', namespace=f'ns-{m % 20:02d}', latency_histograms=histograms
        )
        for m in range(models)
    )
    now = 1_800_000_000.0
    bodies: dict[str, bytes] = {}
    # vLLM's buckets: one series per pod and `le` for the latency histograms.
    bounds = {queries.TTFT_HISTOGRAM: TTFT_BUCKETS, queries.TPOT_HISTOGRAM: ITL_BUCKETS}
    for query in queries.build(scope=scope):
        result: list[dict[str, object]] = []
        for m, entry in enumerate(scope):
            for r in range(per_model):
                pod = f'{entry.model_id}-{r:02d}'
                labels = {'namespace': entry.namespace, 'pod': pod, 'model_name': entry.model_id}
                value = str(((m * 7 + r * 13) % 100) / 100)
                if query.family == queries.CACHE_CONFIG_INFO:
                    labels.update(num_gpu_blocks='27500', block_size='16')
                    value = '1'
                elif query.family == queries.LAST_SAMPLE:
                    value = str(now - 3)
                elif query.family == queries.POD_ARRIVAL_RATE:
                    labels = {'namespace': entry.namespace, 'pod_name': pod}
                elif query.family in bounds:
                    les = [*(repr(float(b)) for b in bounds[query.family]), '+Inf']
                    result.extend(
                        {'metric': {**labels, 'le': le}, 'value': [now, str(float(i))]}
                        for i, le in enumerate(les)
                    )
                    continue
                elif query.kind == 'model':
                    labels = {
                        'namespace': entry.namespace,
                        'target_model_name': entry.model_id,
                        'model_name': entry.model_id,
                    }
                    if r:
                        continue
                result.append({'metric': labels, 'value': [now, value]})
        body = {'status': 'success', 'data': {'resultType': 'vector', 'result': result}}
        bodies[query.promql] = json.dumps(body).encode()

    async def answer(request: web.Request) -> web.Response:
        query = str((await request.post())['query'])
        return web.Response(body=bodies[query], content_type='application/json')

    app = web.Application(client_max_size=2**24)
    app.router.add_post('/api/v1/query', answer)
    served = await loopback.serve(app)
    port = served.port
    variants = [
        Variant(name=f'{e.model_id}-v', namespace=e.namespace, model_id=e.model_id) for e in scope
    ]
    targets = [
        TargetRef(namespace=v.namespace, kind='Deployment', name=v.name, variant=v.name)
        for v in variants
    ]
    infos = [
        PodInfo(
            namespace=v.namespace,
            name=f'{v.model_id}-{r:02d}',
            owners=(('ReplicaSet', f'{v.name}-1'), ('Deployment', v.name)),
        )
        for v in variants
        for r in range(per_model)
    ]
    source = PrometheusSource(config=PrometheusConfig(base_url=f'http://127.0.0.1:{port}'))
    try:
        samples = []
        for _ in range(3):
            started = time.perf_counter()
            reading = await source.read(scope=scope, now=now)
            read_done = time.perf_counter()
            attributed = attribute(reading=reading, variants=variants, targets=targets, pods=infos)
            samples.append((read_done - started, time.perf_counter() - read_done))
        read_s, attribute_s = min(samples, key=lambda s: s[0] + s[1])
        started = time.perf_counter()
        for raw in bodies.values():
            json.loads(raw)
        baseline = time.perf_counter() - started
    finally:
        await source.aclose()
        await served.close()
    total = read_s + attribute_s
    print(
        f'snapshot from Prometheus, {len(attributed.replicas):,} pods, {len(bodies)} queries'
        f'{" (latency histograms)" if histograms else ""}: '
        f'{total * 1000:7.1f} ms (read {read_s * 1000:.1f} + attribution '
        f'{attribute_s * 1000:.1f}); baseline json.loads of the responses '
        f'{baseline * 1000:.1f} ms ({total / baseline:.1f}x); largest answer '
        f'{max(len(raw) for raw in bodies.values()) / 2**20:.1f} MiB'
    )


SECTIONS: list[Callable[[argparse.Namespace], None]] = [
    bench_exposition,
    bench_snapshot_from_prometheus,
]


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or '').splitlines()[0])
    parser.add_argument('--seconds', type=float, default=1.0, help='length of one round')
    parser.add_argument('--repeat', type=int, default=5, help='rounds per figure')
    args = parser.parse_args()
    for section in SECTIONS:
        section(args)
        print()


if __name__ == '__main__':
    main()
