"""Benchmark: the limited optimizer (greedy-by-score, GPU budgets) at 1,000 models x 3 variants.

Prints, for a snapshot of 1,000 models x 3 variants x 10 replicas with per-type GPU budgets that
bind (room for a few hundred of the thousands of replicas asked for):

- `optimize_limited()` alone, on the 1,000 models' scaling requests (every model wants to grow);
- the limiter stage of `decide()` alone (`optimize.limiter.limit`), on the 3,000 decisions the
  token path made without it (the stage's own cost, less noisy than a difference of two runs);
- one `decide()` on the token path with `enableLimiter: true` (the whole cycle, limiter stage
  included) and the same call without the limiter, so the stage's own cost shows;

each as the median wall time of several runs and its ratio against a named baseline measured in
the same run: `json.dumps` of the snapshot's 30,000 replica records (as bench/decide.py does).
Machines are noisy; the ratio is the figure to compare across machines.

Goal: ≤ 0.5 s for one decide() with the limiter on one core.

Usage: python bench/limited.py [--models N] [--replicas R] [--repeat K]
"""

from __future__ import annotations

import argparse
import dataclasses
import json

import decide as decide_bench
from llmscaler.config.resolved import Config, ModelConfig, SaturationConfig
from llmscaler.domain.signals import AnalyzerSignal, RoleSignal, ScalingRequest, VariantCapacity
from llmscaler.domain.snapshot import GpuLimit
from llmscaler.domain.state import EMPTY_STATE
from llmscaler.engine import decide
from llmscaler.optimize import limiter
from llmscaler.optimize.constraints import merge_constraints
from llmscaler.optimize.limited import optimize_limited

NOW = decide_bench.NOW
ACCELERATORS = decide_bench.ACCELERATORS
timed = decide_bench.timed


def requests(*, models: int, replicas: int) -> list[ScalingRequest]:
    """Every model asks for 2-12 replicas' worth of its cheapest variant's capacity."""
    out = []
    for m in range(models):
        model = f'model-{m:04d}'
        namespace = f'ns-{m % 20:02d}'
        variants = tuple(
            VariantCapacity(
                variant=f'{model}-{acc}',
                namespace=namespace,
                role='both',
                cost=cost,
                accelerator=acc.upper(),
                gpus_per_replica=1,
                min_replicas=1,
                max_replicas=40,
                current_replicas=replicas,
                per_replica_capacity=float(blocks),
                replica_count=replicas,
                pending=0,
                total_demand=0.0,
                reason='P3-k2',
            )
            for acc, cost, blocks in ACCELERATORS
        )
        signal = AnalyzerSignal(
            analyzer='saturation',
            live=True,
            score=1.0,
            roles=(RoleSignal(role='both', required=11_500.0 * (2 + m % 11), spare=0.0),),
            capacity=tuple((v.variant, v.per_replica_capacity) for v in variants),
        )
        out.append(
            ScalingRequest(
                model_id=model,
                namespace=namespace,
                variants=variants,
                signals=(signal,),
                priority=1.0 + m % 3,
            )
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or '').splitlines()[0])
    parser.add_argument('--models', type=int, default=1000)
    parser.add_argument('--replicas', type=int, default=10)
    parser.add_argument('--repeat', type=int, default=5)
    args = parser.parse_args()

    snapshot = decide_bench.budgeted(models=args.models, replicas=args.replicas)
    records = [dataclasses.astuple(r) for r in snapshot.replicas]
    baseline = timed(lambda: json.dumps(records), repeat=args.repeat)
    print(
        f'snapshot: {args.models} models x {len(ACCELERATORS)} variants x {args.replicas} '
        f'replicas = {len(snapshot.replicas)} replica records; '
        f'{decide_bench.ROOM} GPUs free per type'
    )
    print(f'baseline json.dumps(replica records): {baseline * 1000:8.1f} ms')

    asks = requests(models=args.models, replicas=args.replicas)
    free = merge_constraints(
        limits=tuple(
            GpuLimit(provider='inventory', accelerator=acc.upper(), limit=decide_bench.ROOM)
            for acc, _, _ in ACCELERATORS
        )
    )
    outcome = optimize_limited(requests=asks, budgets=free)
    limited = sum(1 for m in outcome.models if m.limited)
    seconds = timed(lambda: optimize_limited(requests=asks, budgets=free), repeat=args.repeat)
    print(
        f'optimize_limited() {args.models} requests : {seconds * 1000:8.1f} ms  '
        f'({seconds / baseline:5.1f}x baseline)  {limited} models limited'
    )

    # The limiter stage alone, on the decisions the token path made without it.
    token = Config(default=ModelConfig(saturation=SaturationConfig(analyzer_name='saturation')))
    on = Config(
        default=ModelConfig(
            saturation=SaturationConfig(analyzer_name='saturation', enable_limiter=True)
        )
    )
    unlimited = list(decide(snapshot=snapshot, config=token, state=EMPTY_STATE, now=NOW).decisions)
    seconds = timed(
        lambda: limiter.limit(decisions=unlimited, snapshot=snapshot, config=on), repeat=args.repeat
    )
    print(
        f'limiter stage alone ({len(unlimited)} decisions): {seconds * 1000:8.1f} ms  '
        f'({seconds / baseline:5.1f}x baseline)'
    )

    for label, enabled in (('token + limiter', True), ('token, no limiter', False)):
        config = Config(
            default=ModelConfig(
                saturation=SaturationConfig(analyzer_name='saturation', enable_limiter=enabled)
            )
        )

        def once(config: Config = config) -> object:
            return decide(snapshot=snapshot, config=config, state=EMPTY_STATE, now=NOW)

        decisions = decide(snapshot=snapshot, config=config, state=EMPTY_STATE, now=NOW).decisions
        held = sum(d.limited for d in decisions)
        grown = sum(max(0, d.target - d.current) for d in decisions)
        seconds = timed(once, repeat=args.repeat)
        print(
            f'decide() {label:18s}: {seconds * 1000:8.1f} ms  '
            f'({seconds / baseline:5.1f}x baseline)  +{grown} replicas, {held} held back'
        )


if __name__ == '__main__':
    main()
