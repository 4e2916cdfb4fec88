"""Benchmark: one `decide()` over 1,000 models x 3 variants x 10 replicas.

Prints the wall time of one call (median of several) for both analyzer paths, the peak memory
allocated during one call (tracemalloc), and the ratio against a named baseline measured in the
same run: `json.dumps` of the same snapshot's replica data, a standard-library pass over the same
30,000 replica records. Machines are noisy; the ratio is the figure to compare across machines.

Goal (issue: foundation): ≤ 0.5 s for one decide() on one core.

Usage: python bench/decide.py [--models N] [--repeat K]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import time
import tracemalloc
from collections.abc import Callable

from llmscaler.config.types import Config, ModelConfig, SaturationConfig
from llmscaler.engine import decide
from llmscaler.model import (
    EMPTY_STATE,
    EngineParams,
    PoolMetrics,
    ReplicaMetrics,
    Snapshot,
    State,
    Variant,
)

NOW = 100_000.0
ACCELERATORS = (('h100', 3.90, 27_500), ('a100', 3.67, 27_500), ('l40s', 1.90, 11_500))


def build(*, models: int, replicas: int, zero: str = '') -> Snapshot:
    """The benchmark fleet; the variants on accelerator `zero` (if any) have no replicas."""
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
                # Deterministic spread of load so every branch of the analyzers is exercised.
                load = ((m * 7 + r * 13) % 100) / 100
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
            )
        )
    return Snapshot(variants=tuple(variants), replicas=tuple(metrics), pools=tuple(pools))


def timed(fn: Callable[[], object], *, repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


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
    args = parser.parse_args()

    snapshot = build(models=args.models, replicas=args.replicas)
    with_zero = build(models=args.models, replicas=args.replicas, zero='a100')
    records = [dataclasses.astuple(r) for r in snapshot.replicas]
    baseline = timed(lambda: json.dumps(records), repeat=args.repeat)
    print(
        f'snapshot: {args.models} models x {len(ACCELERATORS)} variants x {args.replicas} '
        f'replicas = {len(snapshot.replicas)} replica records'
    )
    print(f'baseline json.dumps(replica records): {baseline * 1000:8.1f} ms')
    token = Config(default=ModelConfig(saturation=SaturationConfig(analyzer_name='saturation')))
    # The zero-replica case runs on the state of a previous cycle, so the idle variant's capacity
    # comes from stored knowledge (the path that looks for compatible records).
    warm = decide(snapshot=snapshot, config=token, state=EMPTY_STATE, now=NOW - 30).state
    cases = {
        'saturation-percentage': (Config(), snapshot, EMPTY_STATE),
        'saturation-token': (token, snapshot, EMPTY_STATE),
        'token, 1 variant at 0': (token, with_zero, warm),
    }
    for label, (config, snap, state) in cases.items():

        def once(config: Config = config, snap: Snapshot = snap, state: State = state) -> object:
            return decide(snapshot=snap, config=config, state=state, now=NOW)

        seconds = timed(once, repeat=args.repeat)
        peak = peak_bytes(once)
        print(
            f'decide() {label:22s}: {seconds * 1000:8.1f} ms  '
            f'({seconds / baseline:5.1f}x baseline)  peak {peak / 2**20:6.1f} MiB'
        )


if __name__ == '__main__':
    main()
