"""Recurring load learnt (goal G4): `predictive` against the bound from the second period on.

Why: on load that repeats, the clairvoyant bound provisions a start-up ahead of every rise; a
policy that learns the period (`periodic: auto`, `analyze.learning.recurring`) can do the same
from the second period on, and a policy that does not pays for each rise in missed requests or
in replicas kept through every lull. This script runs, on each periodic case
(`cases.PERIODS`: `on-off`, `diurnal-days`, `silent-bursts`) and seeds 1–3, `predictive` with
`periodic: auto` and with `periodic: off` (the model's `llmscaler-predictive-config` entry set
to each, as `predictive:TARGET` sets its target), and `clairvoyant`, and prints per case and
seed, over periods 2+ (from the end of the first period to the end of the run):

- the SLO attainment of the requests that arrived then, and the cost of the replicas that
  existed then (the run's timeline of replicas per variant, sampled every few seconds, × each
  variant's price), for auto, off and the bound;
- each mode's cost × the bound's over the same window, and whether G4 holds: ≥ 99 % and
  ≤ 1.15× the bound's cost over periods 2+.

`--write-docs` puts the table into docs/policies.md between `<!-- periodic:begin -->` and
`<!-- periodic:end -->` (its section "Recurring load").

Each (case, seed, policy) is one task of one sweep (`sim.sweep`, `PeriodicRun`): `--jobs N`
worker processes (default: one per core) or a Ray cluster's (`--ray [ADDRESS]`), and the run
cache unless `--no-cache`, as bench/policy.py takes them. A task's result is what the
simulator made (the timeline, each request's arrival and whether it met the SLO), and the
windows are measured from it here, so a cached run is never measured by an older copy of this
script.

Run: `.venv/bin/python bench/periodic.py [--write-docs] [--case NAME] [--seed N]
[--jobs N | --ray [ADDRESS]] [--no-cache]` (about five minutes on two cores).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console

import doc_blocks
import policy
from llmscaler.config.predictive import PredictiveOverrides
from llmscaler.config.resolved import PERIODIC_AUTO, PERIODIC_OFF, Config
from llmscaler.sim import simulate
from llmscaler.sim.report.summary import request_columns
from llmscaler.sim.scenario import cases, loader, setup
from llmscaler.sim.vocabulary import SimResult

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / 'docs' / 'policies.md'
MARKERS = ('<!-- periodic:begin -->', '<!-- periodic:end -->')
SEEDS = (1, 2, 3)
BOUND = 'clairvoyant'
MODES = (PERIODIC_AUTO, PERIODIC_OFF)
RUNS = (*MODES, BOUND)
"""What runs on each case and seed: `predictive` in each mode, and the bound."""
ATTAINMENT = 0.99
COST_RATIO = 1.15
"""G4: at least this attainment, at most this × the bound's cost, over periods 2+."""


@dataclass(frozen=True)
class Simulated:
    """A run as the simulator left it, reduced to what the windows need: the timeline's times,
    replicas per variant at each, each variant's price ($/h), the sample interval, and each
    request's arrival and whether it met the SLO."""

    times: np.ndarray[Any, Any]
    replicas: Mapping[str, np.ndarray[Any, Any]]
    prices: Mapping[str, float]
    interval: float
    charged_until: float
    arrivals: np.ndarray[Any, Any]
    met: np.ndarray[Any, Any]


@dataclass(frozen=True)
class Window:
    """Attainment and cost ($) over periods 2+ of one run."""

    attainment: float
    cost: float


@contextmanager
def periodic_mode(mode: str) -> Iterator[None]:
    """`predictive` configured with `periodic: mode` for the runs made inside (the configuration
    `sim.scenario.setup.core_config` builds for it, wrapped, and restored after)."""
    before = setup.core_config

    def configured(*, name: str, intents: Any = None) -> Config:
        config = before(name=name, intents=intents)
        if name != setup.PREDICTIVE:
            return config
        return setup.with_predictive(config, PredictiveOverrides(periodic=mode))

    setup.core_config = configured
    try:
        yield
    finally:
        setup.core_config = before


def document(*, case: str, seed: int, run: str) -> dict[str, Any]:
    """The scenario of one run: `predictive` (in either mode) or the bound, on `case`."""
    name = BOUND if run == BOUND else setup.PREDICTIVE
    return policy.Case(name=case, names=(name,), seed=seed).document()


def reduced(result: SimResult, *, ttft: float, itl: float) -> Simulated:
    """What `measure` needs of a run (`Simulated`)."""
    columns = request_columns(result=result)
    completed = columns.completed & np.isfinite(columns.ttft)
    mean_itl = columns.mean_itl
    met = completed & (columns.ttft <= ttft) & (np.isnan(mean_itl) | (mean_itl <= itl))
    charged = result.charged_until if math.isfinite(result.charged_until) else result.duration
    return Simulated(
        times=np.asarray(result.timeline.times, dtype=np.float64),
        replicas={
            name: np.asarray(counts, dtype=np.float64)
            for name, counts in sorted(result.timeline.replicas.items())
        },
        prices={v.name: v.cost_per_hour for v in result.variants},
        interval=result.sample_interval,
        charged_until=charged,
        arrivals=columns.arrival,
        met=met,
    )


def simulated(*, case: str, seed: int, run: str) -> Simulated:
    """One run of `case` at `seed`: `predictive` with `periodic: run`, or the bound."""
    scenario = loader.from_document(document=document(case=case, seed=seed, run=run), where=case)
    console = Console(stderr=True, quiet=True)
    if run == BOUND:
        outcome = simulate.run(setup=scenario, out=None, console=console, progress=False)
    else:
        with periodic_mode(run):
            outcome = simulate.run(setup=scenario, out=None, console=console, progress=False)
    (result,) = outcome.results
    return reduced(result, ttft=outcome.slo.ttft, itl=outcome.slo.itl)


def measure(run: Simulated, *, start: float) -> Window:
    """Attainment of the requests that arrived from `start` on, and the cost of the replicas
    that existed from `start` until the run was charged until."""
    arrived = run.arrivals >= start
    total = int(np.count_nonzero(arrived))
    attainment = float(np.count_nonzero(run.met & arrived)) / total if total else math.nan
    inside = (run.times >= start) & (run.times < run.charged_until)
    cost = math.fsum(
        float(np.sum(counts[inside])) * run.interval / 3600.0 * run.prices[name]
        for name, counts in sorted(run.replicas.items())
    )
    return Window(attainment=attainment, cost=cost)


@dataclass(frozen=True)
class PeriodicRun:
    """`simulated(case, seed, run)` as a task of a sweep (`sim.sweep.tasks.Task`)."""

    case: str
    seed: int
    run: str

    @property
    def label(self) -> str:
        return f'{self.case} (seed {self.seed}) {self.run}'

    def identity(self) -> object:
        mode = None if self.run == BOUND else self.run
        return (
            'bench/periodic.py',
            mode,
            policy.Case(
                name=self.case,
                names=(BOUND if self.run == BOUND else setup.PREDICTIVE,),
                seed=self.seed,
            ).identity(),
        )

    def weight(self) -> float:
        return policy.Case(name=self.case, names=(setup.PREDICTIVE,), seed=self.seed).weight()

    def __call__(self) -> Simulated:
        return simulated(case=self.case, seed=self.seed, run=self.run)


def holds(window: Window, bound: Window) -> bool:
    """G4 over periods 2+: at least `ATTAINMENT`, at most `COST_RATIO` × the bound's cost."""
    return window.attainment >= ATTAINMENT and window.cost <= COST_RATIO * bound.cost


def _ratio(window: Window, bound: Window) -> str:
    return f'{window.cost / bound.cost:.2f}×' if bound.cost > 0 else 'n/a'


def table(windows: Mapping[tuple[str, int, str], Window], names: Sequence[str]) -> list[str]:
    lines = [
        '| case | seed | auto: SLO · cost | off: SLO · cost | bound: SLO · cost | '
        'auto × bound | off × bound | G4 auto | G4 off |',
        '|---|---:|---:|---:|---:|---:|---:|:-:|:-:|',
    ]
    for case in names:
        for seed in SEEDS:
            if (case, seed, BOUND) not in windows:
                continue
            auto, off, bound = (windows[(case, seed, run)] for run in RUNS)
            cells = [f'{100 * w.attainment:.2f} % · {w.cost:.2f} $' for w in (auto, off, bound)]
            lines.append(
                f'| `{case}` | {seed} | {" | ".join(cells)} | {_ratio(auto, bound)} | '
                f'{_ratio(off, bound)} | {"yes" if holds(auto, bound) else "no"} | '
                f'{"yes" if holds(off, bound) else "no"} |'
            )
    return lines


def block(windows: Mapping[tuple[str, int, str], Window], names: Sequence[str]) -> str:
    return '\n'.join(
        [
            'Generated by `bench/periodic.py` (`--write-docs`): `predictive` with `periodic: '
            'auto` and `periodic: off`, and `clairvoyant` (the bound), over periods 2+ (from '
            'the end of the first period: '
            + ', '.join(f'`{name}` {cases.PERIODS[name]:.0f} s' for name in names)
            + "). G4: ≥ 99 % and ≤ 1.15× the bound's cost over that window.",
            '',
            *table(windows, names),
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or '').splitlines()[0])
    parser.add_argument('--write-docs', action='store_true')
    parser.add_argument('--case', action='append', choices=sorted(cases.PERIODS))
    parser.add_argument('--seed', action='append', type=int, choices=SEEDS)
    policy.jobs_argument(parser)
    args = parser.parse_args(argv)
    policy.check_jobs(parser, args)
    names = [name for name in cases.PERIODS if not args.case or name in args.case]
    seeds = [seed for seed in SEEDS if not args.seed or seed in args.seed]
    tasks = [PeriodicRun(case, seed, run) for case in names for seed in seeds for run in RUNS]
    with policy.sweep_of(parser, args, label='bench/periodic.py') as sweep:
        done = sweep.run(tasks=tasks, weights=[t.weight() for t in tasks])
    windows = {
        (t.case, t.seed, t.run): measure(run, start=cases.PERIODS[t.case])
        for t, run in zip(tasks, done, strict=True)
    }
    doc_blocks.emit(DOC, markers=MARKERS, body=block(windows, names), write_docs=args.write_docs)
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
