"""Benchmark: wall time and peak memory of the simulator on a real and a synthetic day-long trace.

Cases (issue: simulate):
(a) the Azure 2023 conversation trace (the Azure LLM inference traces 2023, CC-BY 4.0,
    github.com/Azure/AzurePublicDataset, placed beside the repository) at a rate scale that keeps
    at least 8 replicas busy, under the default core policy; goal ≤ 3 s;
(b) a synthetic 24 h conversation-like trace of about 500k requests (diurnal envelope), under the
    default core policy; goal ≤ 10 s; memory goal ≤ 1 GB.
(c) prefix caching: a synthetic hour of conversations with shared system prompts and follow-up
    turns, under the default core policy, with prefix caching off (against its static baseline,
    as above), then on with prefix-aware routing; the cost of caching is the second run's wall
    time over the first's (it also serves the hits, so it simulates less prefill).

Baseline in the same run: the same replay on a static fleet of the core run's mean size per
variant (no control decisions), so the ratio shows what the decision core and its snapshots add
on top of simulating about the same replica-hours. Peak
memory is the process's maximum resident set size (ru_maxrss), which includes the interpreter,
numpy and matplotlib imports.

The replica engine (`llmscaler.sim.native`): the first line says whether it ran compiled
(`make native`) or from source; compiled, (b)'s core policy runs once more in a process of its
own with the engine from source (`LLMSCALER_NATIVE=off`), and the ratio of the two is what the
compilation buys.

Usage: python bench/simulate.py [--case a|b|c|all]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

from llmscaler.sim import runner
from llmscaler.sim.native import engine
from llmscaler.sim.policies.core import CorePolicy, parse_static
from llmscaler.sim.report.summary import summarize
from llmscaler.sim.scenario import loader
from llmscaler.sim.scenario.document import DEFAULT_DOCUMENT
from llmscaler.sim.scenario.setup import core_config
from llmscaler.sim.vocabulary import SLO, Policy, SimResult, Trace, VariantSpec
from llmscaler.sim.workload import synthetic, trace
from llmscaler.sim.workload.prefixes import PrefixSpec

TRACES = Path(__file__).resolve().parents[2] / 'shared' / 'traces'


def fleet(*, h100_max: int, l40s_max: int) -> tuple[VariantSpec, ...]:
    document = dict(DEFAULT_DOCUMENT)
    document['variants'] = [
        {'name': 'h100', 'preset': 'llama-3.1-8b-h100', 'max_replicas': h100_max},
        {'name': 'l40s', 'preset': 'llama-3.1-8b-l40s', 'max_replicas': l40s_max},
    ]
    return loader.from_document(document=document).variants


def timed(
    *,
    workload: Trace,
    variants: tuple[VariantSpec, ...],
    policy: Policy,
    settings: runner.SimSettings | None = None,
) -> SimResult:
    started = time.perf_counter()
    result = runner.run(
        trace=workload,
        variants=variants,
        policy=policy,
        settings=settings or runner.SimSettings(),
    )
    result.wall_seconds = time.perf_counter() - started
    return result


def peak_replicas(result: SimResult) -> int:
    totals = [
        sum(series[i] for series in result.timeline.replicas.values())
        for i in range(len(result.timeline.times))
    ]
    return max(totals, default=0)


def core_policy() -> Policy:
    return CorePolicy(name='default', config=core_config(name='default'))


def report(*, label: str, workload: Trace, variants: tuple[VariantSpec, ...]) -> SimResult:
    core = timed(workload=workload, variants=variants, policy=core_policy())
    # Baseline: a static fleet of the core run's mean size per variant, so both runs simulate
    # about the same replica-hours and the ratio isolates what control decisions add.
    mean = {v: max(0, round(s / workload.duration)) for v, s in core.replica_seconds.items()}
    if not any(mean.values()):
        mean[variants[0].name] = 1
    static = 'static:' + ','.join(f'{v}={n}' for v, n in sorted(mean.items()))
    base = timed(
        workload=workload,
        variants=variants,
        policy=parse_static(text=static, variants=[v.name for v in variants]),
    )
    done = sum(1 for r in core.requests if r.finished == r.finished)
    print(f'{label}: {len(workload):,} requests over {workload.duration / 3600:.1f} h')
    print(f'  baseline {static:22s}: {base.wall_seconds:7.2f} s')
    print(
        f'  default core policy            : {core.wall_seconds:7.2f} s '
        f'({core.wall_seconds / base.wall_seconds:4.2f}x baseline), '
        f'{done:,} completed, peak {peak_replicas(core)} replicas, '
        f'{workload.duration / core.wall_seconds:,.0f} simulated s per wall s'
    )
    return core


def prefix_case(*, rate: float) -> None:
    spec = synthetic.preset(name='azure-conv', duration=3600.0, rate=rate)
    spec = dataclasses.replace(
        spec,
        prefixes=PrefixSpec(system_prompts=8, system_tokens=1000, followup=0.5, open_sessions=200),
    )
    workload = synthetic.generate(spec=spec, seed=1)
    variants = fleet(h100_max=16, l40s_max=16)
    off = report(label='(c) shared prefixes, caching off', workload=workload, variants=variants)
    # Only its figures are kept: its requests held on would slow the next run's collections.
    off_seconds, off_peak = off.wall_seconds, peak_replicas(off)
    del off
    on = timed(
        workload=workload,
        variants=variants,
        policy=core_policy(),
        settings=runner.SimSettings(prefix_caching=True, router='prefix-aware'),
    )
    hits = summarize(result=on, slo=SLO(ttft=1.0, itl=0.07)).prefix_hit_rate or 0.0
    print(
        f'  default core, caching on, prefix-aware router: {on.wall_seconds:7.2f} s '
        f'({on.wall_seconds / off_seconds:4.2f}x caching off), '
        f'prefix hits {hits:.1%} of prompt tokens, peak {peak_replicas(on)} replicas '
        f'(off: {off_peak})'
    )


def day() -> Trace:
    """(b)'s workload."""
    spec = synthetic.preset(name='azure-conv', duration=24 * 3600.0, rate=5.8, diurnal=True)
    return synthetic.generate(spec=spec, seed=1)


def day_fleet() -> tuple[VariantSpec, ...]:
    """(b)'s fleet."""
    return fleet(h100_max=16, l40s_max=16)


def from_source() -> float:
    """(b)'s core policy in a process of its own with the engine imported from source: its wall
    seconds."""
    done = subprocess.run(
        [sys.executable, __file__, '--core-only'],
        env={**os.environ, engine.ENV: 'off'},
        capture_output=True,
        text=True,
        check=True,
    )
    return float(done.stdout)


def day_case() -> None:
    """(b), and its core policy with the engine from source when it ran compiled (its results
    are dropped on return: a day's requests held on would slow the next case's collections)."""
    core = report(label='(b) synthetic 24 h', workload=day(), variants=day_fleet())
    if engine.active():
        source = from_source()
        print(
            f'  default core policy, engine from source: {source:7.2f} s '
            f'({source / core.wall_seconds:4.2f}x compiled)'
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--case', choices=('a', 'b', 'c', 'all'), default='all')
    parser.add_argument('--rate-scale', type=float, default=4.0)
    parser.add_argument(
        '--core-only', action='store_true', help="(b)'s core policy alone: its wall seconds"
    )
    args = parser.parse_args()
    if args.core_only:
        print(timed(workload=day(), variants=day_fleet(), policy=core_policy()).wall_seconds)
        return
    print(f'replica engine: {"compiled (mypyc)" if engine.active() else "from source"}')
    if args.case in ('a', 'all'):
        path = TRACES / 'AzureLLMInferenceTrace_conv.csv'
        if not path.exists():
            print(f'(a) skipped: {path} not found')
        else:
            workload = trace.load_trace(path=path, rate_scale=args.rate_scale, seed=1)
            report(
                label=f'(a) Azure conv x{args.rate_scale:g}',
                workload=workload,
                variants=fleet(h100_max=16, l40s_max=16),
            )
    if args.case in ('b', 'all'):
        day_case()
    if args.case in ('c', 'all'):
        prefix_case(rate=20.0)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f'peak resident memory: {peak:,.0f} MiB')


if __name__ == '__main__':
    main()
