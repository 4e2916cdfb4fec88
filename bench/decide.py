"""Benchmark: one `decide()` over 1,000 models x 3 variants x 10 replicas.

Prints the wall time and the CPU time of one call (medians of several) for each analyzer path,
the peak memory allocated during one call (tracemalloc), and the ratios against a named baseline
measured in the same run: `json.dumps` of the same snapshot's replica data, a standard-library
pass over the same 30,000 replica records. Machines are noisy; the ratio is the figure to compare
across machines, and on a shared one the CPU time (what this process itself used) is steadier
than the wall time.

Goal: ≤ 1 s for one decide() on one core, interpreted. The SLO (queueing-model) path runs on the
same fleet with the figures it needs (arrival rate, TTFT, ITL per replica, the gateway's arrival
rate): once from an empty state (every variant seeds its tuner) and once on the state of a
previous cycle (one EKF step and one sizing per variant), the steady state of a controller; each
also with the cyclic garbage collector paused for the call, as the controller and the simulator
run it (`llmscaler.gc_pause`). The token path with the GPU limiter (`enableLimiter`) runs on a
hotter fleet with per-type GPU budgets that bind (`budgeted`, the fleet of bench/limited.py).

Usage: python bench/decide.py [--models N] [--repeat K] [--only slo]
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import statistics
import time
import tracemalloc
from collections.abc import Callable

from llmscaler import gc_pause
from llmscaler.config.resolved import Config, ModelConfig, QueueingModelConfig, SaturationConfig
from llmscaler.domain.snapshot import (
    EngineParams,
    GpuLimit,
    PoolMetrics,
    ReplicaMetrics,
    Snapshot,
    Variant,
)
from llmscaler.domain.state import EMPTY_STATE, State
from llmscaler.engine import decide

NOW = 100_000.0
ACCELERATORS = (('h100', 3.90, 27_500), ('a100', 3.67, 27_500), ('l40s', 1.90, 11_500))


@functools.cache
def build(
    *, models: int, replicas: int, zero: str = '', slo: bool = False, hot: bool = False
) -> Snapshot:
    """The benchmark fleet; the variants on accelerator `zero` (if any) have no replicas; with
    `slo`, the replicas and pools also report what the SLO analyzer reads."""
    variants: list[Variant] = []
    metrics: list[ReplicaMetrics] = []
    pools: list[PoolMetrics] = []
    for m in range(models):
        model = f'model-{m:04d}'
        namespace = f'ns-{m % 20:02d}'
        for accelerator, cost, blocks in ACCELERATORS:
            name = f'{model}-{accelerator}'
            count = 0 if accelerator == zero else replicas
            variants.append(
                Variant(
                    name=name,
                    namespace=namespace,
                    model_id=model,
                    cost=cost,
                    accelerator=accelerator.upper(),
                    min_replicas=1,
                    max_replicas=40,
                    current_replicas=count,
                    ready_replicas=count,
                    engine=EngineParams(),
                )
            )
            for r in range(count):
                # Deterministic spread of load so every branch of the analyzers is exercised;
                # `hot`: 0.55 and up, so that most models want more replicas.
                spread = (m * 7 + r * 13) % (45 if hot else 100)
                load = (0.55 if hot else 0.0) + spread / 100
                metrics.append(
                    ReplicaMetrics(
                        pod=f'{name}-{r:02d}',
                        variant=name,
                        namespace=namespace,
                        observed_at=NOW - 5,
                        kv_usage=load,
                        queue_length=float((m + r) % 8),
                        num_gpu_blocks=blocks,
                        block_size=16,
                        avg_input_tokens=800.0 + 10 * (r % 5),
                        avg_output_tokens=200.0 + 40 * (m % 4),
                        prefix_cache_hit_rate=0.25,
                        arrival_rate=2.0 + 0.5 * ((m + r) % 7) if slo else None,
                        avg_ttft=0.08 + 0.01 * ((m * 3 + r) % 9) if slo else None,
                        avg_itl=0.020 + 0.002 * ((m + r * 5) % 6) if slo else None,
                        running_requests=float(20 + (m + r) % 30) if slo else None,
                    )
                )
        pools.append(
            PoolMetrics(
                model_id=model,
                namespace=namespace,
                observed_at=NOW,
                queue_size=float(m % 3),
                queue_bytes=4000.0 * (m % 3),
                request_count=100.0,
                arrival_rate=(2.0 + 0.5 * (m % 7)) * replicas * 2 if slo else None,
            )
        )
    return Snapshot(variants=tuple(variants), replicas=tuple(metrics), pools=tuple(pools))


ROOM = 300
"""GPUs of each type free beyond the current replicas in `budgeted`: far fewer than asked for."""


def budgeted(*, models: int, replicas: int) -> Snapshot:
    """The fleet above, hot enough that most models want more, with per-type GPU budgets that
    bind (`ROOM` GPUs free per type): the GPU limiter's case, here and in bench/limited.py."""
    fleet = build(models=models, replicas=replicas, hot=True)
    limits = tuple(
        GpuLimit(provider='inventory', accelerator=acc.upper(), limit=models * replicas + ROOM)
        for acc, _, _ in ACCELERATORS
    )
    return dataclasses.replace(fleet, gpu_limits=limits)


TOKEN = Config(default=ModelConfig(saturation=SaturationConfig(analyzer_name='saturation')))
LIMITED = Config(
    default=ModelConfig(
        saturation=SaturationConfig(analyzer_name='saturation', enable_limiter=True)
    )
)
SLO = Config(default=ModelConfig(queueing=QueueingModelConfig(target_ttft=1500.0, target_itl=60.0)))
CASES = (
    'saturation-percentage',
    'saturation-token',
    'token, 1 variant at 0',
    'token + GPU limiter',
    'slo-queueing, cold',
    'slo-queueing, warm',
)
PAUSED = ', gc paused'
"""The SLO and limiter cases are also timed as the controller and the simulator call
`decide()`: with the cyclic collector paused for the call (`llmscaler.gc_pause`), its passes
after the decision."""


def inputs(label: str, *, models: int, replicas: int) -> tuple[Config, Snapshot, State]:
    """The configuration, snapshot and state of one case of `CASES` (bench/instructions.py
    counts the same cases)."""
    if label == 'saturation-percentage':
        return Config(), build(models=models, replicas=replicas), EMPTY_STATE
    if label == 'saturation-token':
        return TOKEN, build(models=models, replicas=replicas), EMPTY_STATE
    if label == 'token, 1 variant at 0':
        # On the state of a previous cycle, so the idle variant's capacity comes from stored
        # knowledge (the path that looks for compatible records).
        plain = build(models=models, replicas=replicas)
        warm = decide(snapshot=plain, config=TOKEN, state=EMPTY_STATE, now=NOW - 30).state
        return TOKEN, build(models=models, replicas=replicas, zero='a100'), warm
    if label == 'token + GPU limiter':
        return LIMITED, budgeted(models=models, replicas=replicas), EMPTY_STATE
    if label not in ('slo-queueing, cold', 'slo-queueing, warm'):
        raise ValueError(f'unknown case {label!r}')
    snapshot = build(models=models, replicas=replicas, slo=True)
    if label.endswith('cold'):
        return SLO, snapshot, EMPTY_STATE
    return (
        SLO,
        snapshot,
        decide(snapshot=snapshot, config=SLO, state=EMPTY_STATE, now=NOW - 30).state,
    )


def timed(fn: Callable[[], object], *, repeat: int) -> float:
    return timed_both(fn, repeat=repeat)[0]


def timed_both(fn: Callable[[], object], *, repeat: int) -> tuple[float, float]:
    """Median wall time and median CPU time of the process (s). On a shared machine the wall
    time also counts what other tenants take of the core; the CPU time is this code's own."""
    walls, cpus = [], []
    for _ in range(repeat):
        start, cpu = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - start)
        cpus.append(time.process_time() - cpu)
    return statistics.median(walls), statistics.median(cpus)


def peak_bytes(fn: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--models', type=int, default=1000)
    parser.add_argument('--replicas', type=int, default=10)
    parser.add_argument('--repeat', type=int, default=5)
    parser.add_argument(
        '--only', default='', help='run only the cases whose label contains this (e.g. slo)'
    )
    args = parser.parse_args()

    snapshot = build(models=args.models, replicas=args.replicas)
    records = [dataclasses.astuple(r) for r in snapshot.replicas]
    baseline, baseline_cpu = timed_both(lambda: json.dumps(records), repeat=args.repeat)
    print(
        f'snapshot: {args.models} models x {len(ACCELERATORS)} variants x {args.replicas} '
        f'replicas = {len(snapshot.replicas)} replica records'
    )
    print(
        f'baseline json.dumps(replica records): {baseline * 1000:8.1f} ms  '
        f'(CPU {baseline_cpu * 1000:.1f} ms)'
    )
    cases = {
        label: inputs(label.replace(PAUSED, ''), models=args.models, replicas=args.replicas)
        for label in (
            *CASES,
            *(f'{label}{PAUSED}' for label in CASES if 'slo' in label or 'limiter' in label),
        )
        if args.only in label
    }
    for label, (config, snap, state) in cases.items():

        def once(
            config: Config = config,
            snap: Snapshot = snap,
            state: State = state,
            paused: bool = label.endswith(PAUSED),
        ) -> object:
            if not paused:
                return decide(snapshot=snap, config=config, state=state, now=NOW)
            with gc_pause.paused():
                return decide(snapshot=snap, config=config, state=state, now=NOW)

        seconds, cpu = timed_both(once, repeat=args.repeat)
        peak = peak_bytes(once)
        print(
            f'decide() {label:33s}: {seconds * 1000:8.1f} ms  '
            f'({seconds / baseline:5.1f}x baseline)  CPU {cpu * 1000:6.1f} ms  '
            f'({cpu / baseline_cpu:5.1f}x)  peak {peak / 2**20:6.1f} MiB'
        )


if __name__ == '__main__':
    main()
