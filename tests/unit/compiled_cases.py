"""What tests/unit/test_compiled.py compares between the interpreted and the compiled core.

Run as a script (`python tests/unit/compiled_cases.py`) with PYTHONPATH choosing the build; it
prints, one per line, the repr of every decision and state of `decide()` over several cycles on
the benchmark's fleets (every analyzer path of bench/decide.py, the GPU limiter binding, a
variant at zero, explicit and inferred SLO targets) and of `optimize_limited` with budgets that
bind and that do not, then the simulator's outcome (summaries, scale events, replica timelines)
on two synthetic cases under the policies that run `decide()`. The first line names the build
that ran. Two builds that decide alike print the same text, byte for byte.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent


def decisions() -> Iterator[str]:
    from llmscaler.config.types import Config, ModelConfig, QueueingModelConfig
    from llmscaler.engine import decide
    from llmscaler.model import EMPTY_STATE, GpuLimit
    from llmscaler.optimize.constraints import merge_constraints
    from llmscaler.optimize.limited import optimize_limited
    from tests.bench_scripts import load

    bench = load('decide')
    limited = load('limited')
    runs = [(label, *bench.inputs(label, models=40, replicas=4)) for label in bench.CASES]
    inferred = Config(default=ModelConfig(queueing=QueueingModelConfig()))
    for snapshot in (
        bench.build(models=40, replicas=6, slo=True, hot=True),
        bench.build(models=30, replicas=3, slo=True, zero='a100'),
    ):
        runs += [('slo', config, snapshot, EMPTY_STATE) for config in (bench.SLO, inferred)]
    for label, config, snapshot, state in runs:
        for cycle in range(3):
            now = bench.NOW + 30 * cycle
            result = decide(snapshot=snapshot, config=config, state=state, now=now)
            state = result.state
            yield f'{label} {cycle} {result.decisions!r}'
            yield f'{label} {cycle} {state!r}'
    for room in (3, 40, 400):
        for replicas in (0, 2, 10):
            budgets = merge_constraints(
                limits=tuple(
                    GpuLimit(provider='inventory', accelerator=a.upper(), limit=room)
                    for a, _, _ in bench.ACCELERATORS
                )
            )
            asks = limited.requests(models=60, replicas=replicas)
            yield f'limited {room} {replicas} {optimize_limited(requests=asks, budgets=budgets)!r}'


def simulated() -> Iterator[str]:
    from rich.console import Console

    from llmscaler.sim import cases, scenario, simulate

    policies = ['default', 'saturation-token', 'slo-queueing', 'predictive']
    for name in ('on-off', 'diurnal-flash'):
        document = cases.case(name=name, policies=policies, duration=900.0)
        setup = scenario.from_document(document=document, where=name)
        quiet = Console(stderr=True, quiet=True)
        outcome = simulate.run(setup=setup, out=None, console=quiet, progress=False)
        for summary in outcome.summaries:
            yield f'{name} {summary!r}'
        for result in outcome.results:
            for event in result.events:
                yield f'{name} {result.policy} {event!r}'
            for variant in sorted(result.timeline.replicas):
                yield f'{name} {result.policy} {variant} {list(result.timeline.replicas[variant])}'


def main() -> int:
    sys.path.insert(0, str(ROOT))
    from llmscaler import buildinfo

    print(buildinfo.core_build())
    for line in (*decisions(), *simulated()):
        print(line)
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
