"""Benchmark: `llmscaler tune` on a benchmark case: simulations, wall time, the configuration
found, and its cost and attainment on the held-back part against the defaults and the peers.

Why: the tuner earns its place if the configuration it finds on the first part of a trace
meets the goal (99 % of requests within the SLO) on the part it never saw, at no more cost than
the recommended defaults, and how it stands against the cheapest peer that meets the SLO there
says what tuning buys over picking another autoscaler. The case is one of `sim.scenario.cases`
(its fleet, its warm start): by default `azure-conv`, the Azure 2023 conversation trace at rate
×6, its whole hour (`--duration 3600`); the search sees its first 75 % and two draws of its
rate-scaled copies (`--seeds 2`), the last 25 % is held back. A case whose load repeats
(`cases.PERIODS`) runs for its own duration and holds back its last period: `--case
diurnal-days` is three days compressed into ten minutes each, the same shape each day, and its
third day is held back, so the search sees two days and the configuration is judged on a day
it never saw. The peers are those `llmscaler simulate` compares (the bound, `clairvoyant`,
aside: it is no autoscaler one can run).

Every run goes through one sweep (`--jobs`, default 2; the run cache off unless `--cache`), so
the wall time is that of this machine with its neighbours. What fails: a case or trace folder
that does not exist stops the benchmark with one line. `bench/perfdocs.py --only tune
--write-docs` puts what it prints into docs/performance.md.

Run: `.venv/bin/python bench/tune.py [--case NAME] [--duration S] [--budget N] [--seeds N]
[--holdout F] [--jobs N] [--tune-policy NAME] [--traces DIR] [--out DIR] [--cache]` (the
traces' folder also from $LLMSCALER_TRACES; `--tune-policy`: `predictive`, the default,
`saturation-percentage` or `saturation-token`).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from llmscaler.sim.scenario import cases, loader
from llmscaler.sim.sweep import cache as run_cache
from llmscaler.sim.sweep.sweep import Sweep
from llmscaler.sim.tune import report, tunables
from llmscaler.sim.tune.run import tune, write
from llmscaler.sim.tune.tuned import DEFAULT_BUDGET, Options, Tuned

ROOT = Path(__file__).resolve().parent.parent
TRACES = Path(os.environ.get('LLMSCALER_TRACES') or ROOT.parent / 'shared' / 'traces')
"""The folder of the Azure trace files: $LLMSCALER_TRACES, else `shared/traces` beside the
repository."""
PEERS = ('default', 'predictive', 'keda-queue', 'hpa-kv', 'kaito-realtime')
DURATION = 3600.0
"""Seconds of a case whose load does not repeat: the Azure traces' whole hour."""
HOLDOUT = 0.25
"""The held-back share of a case whose load does not repeat."""


def defaults(*, case: str) -> tuple[float | None, float]:
    """(duration, held-back share) of `case` unless given: a case whose load repeats
    (`cases.PERIODS`) runs for its own duration (None) and holds back its last period."""
    period = cases.PERIODS.get(case)
    if period is None:
        return DURATION, HOLDOUT
    own = cases.case(name=case, policies=[])['workload']['synthetic']['duration']
    return None, period / own


def lines(*, tuned: Tuned, case: str, duration: float, jobs: int) -> list[str]:
    """What the benchmark prints (and the doc block holds)."""
    options, outcome, problem = tuned.options, tuned.outcome, tuned.problem
    goal = options.goal
    chosen, default = tuned.held_back[0], tuned.held_back[1]
    peer = report.cheapest_peer(rows=tuned.held_back, goal=goal)
    changed = report.changed_settings(tuned=tuned)
    out = [
        f'case {case}, {duration:g} s: {tuned.scenario.workload_text}; SLO TTFT ≤ '
        f'{tuned.slo.ttft:g} s, mean ITL ≤ {tuned.slo.itl * 1000:g} ms; goal {goal * 100:g} %',
        f'cut at {problem.cut:,.0f} s; {len(problem.draws)} draw(s) searched; '
        f'{tuned.candidates} configurations of {options.policy.policy} in the grid',
        f'simulations: search {outcome.runs} (budget {options.budget}), calibration '
        f'{problem.calibration_runs}, held-back comparison {tuned.held_back_runs}; '
        f'wall {tuned.wall_seconds:.0f} s with --jobs {jobs}',
        f'chosen: {tuned.chosen.name} (search part: worst draw '
        f'{outcome.best.attainment * 100:.2f} %, ${outcome.best.cost:,.2f} a run'
        + ('' if outcome.best.meets(goal) else ', GOAL NOT MET')
        + ')',
        '  settings changed: ' + (', '.join(changed) if changed else 'none'),
        'held-back part:',
        f'  chosen    ${chosen.cost:8,.2f}  {chosen.attainment * 100:6.2f} %',
        f'  defaults  ${default.cost:8,.2f}  {default.attainment * 100:6.2f} %',
    ]
    for row in tuned.held_back[2:]:
        out.append(f'  {row.name:<9} ${row.cost:8,.2f}  {row.attainment * 100:6.2f} % (peer)')
    out.append(
        'cheapest peer meeting the goal: '
        + (f'{peer.name} ${peer.cost:,.2f}' if peer is not None else 'none')
        + f'; chosen meets it: {"yes" if chosen.attainment >= goal else "no"}, costs '
        f'{chosen.cost / default.cost * 100:.0f} % of the defaults'
    )
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or '').splitlines()[0])
    parser.add_argument('--case', default='azure-conv')
    parser.add_argument(
        '--duration', type=float, help="seconds (default: 3600; a periodic case: the case's own)"
    )
    parser.add_argument('--budget', type=int, default=DEFAULT_BUDGET)
    parser.add_argument('--seeds', type=int, default=2)
    parser.add_argument(
        '--holdout', type=float, help='default 0.25; a periodic case: its last period'
    )
    parser.add_argument('--jobs', type=int, default=2)
    parser.add_argument(
        '--tune-policy', default=tunables.DEFAULT, choices=tunables.NAMES, help='policy tuned'
    )
    parser.add_argument('--traces', type=Path, default=TRACES)
    parser.add_argument('--out', type=Path, help='also write the files tune writes here')
    parser.add_argument('--cache', action='store_true', help='use the run cache')
    args = parser.parse_args()
    try:
        own_duration, own_holdout = defaults(case=args.case)
        duration = args.duration if args.duration is not None else own_duration
        holdout = args.holdout if args.holdout is not None else own_holdout
        scenario = cases.case(
            name=args.case, policies=list(PEERS), duration=duration, traces=args.traces
        )
    except (KeyError, ValueError) as exc:
        print(f'bench/tune.py: {exc}', file=sys.stderr)
        return 2
    setup = loader.from_document(document=scenario, where=args.case)
    policy = tunables.by_name(args.tune_policy)
    assert policy is not None  # argparse's choices
    options = Options(budget=args.budget, seeds=args.seeds, holdout=holdout, policy=policy)
    store = run_cache.RunCache(directory=run_cache.default_directory()) if args.cache else None
    with Sweep(jobs=args.jobs, cache=store, progress=None, label='tune') as sweep:
        tuned = tune(scenario=setup, options=options, sweep=sweep)
    if args.out is not None:
        write(tuned=tuned, out=args.out)
    span = next(iter(scenario['workload'].values()))['duration']
    body = '\n'.join(lines(tuned=tuned, case=args.case, duration=span, jobs=args.jobs))
    print(body)
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
