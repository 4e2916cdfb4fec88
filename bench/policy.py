"""Every policy on every benchmark case: SLO attainment and cost, against two hindsight baselines.

Why: an autoscaler is worth what it saves at the SLO; that shows only next to what could have
been done knowing the load — `clairvoyant` (the cheapest plan found that meets 99 %, the bound)
and `static-best` (the best fixed fleet in hindsight), both searched by simulation
(`sim.policies.bound`). This script runs `llmscaler simulate` in process on each case of
`sim.scenario.cases` (two Azure traces, five synthetic stress cases; 30 minutes each, `multi-turn`
10, the Azure traces' first half hour) with every
policy the simulator knows by name and needs no file for (`kaito-cron` needs a schedule and
`floor:` a floor: see bench/peers.py), and prints per case and policy: SLO attainment, cost,
cost × clairvoyant and × static-best, scale events, TTFT and ITL p99, and what the replicas
kept after the work was done cost (not charged: docs/simulator.md, "What is charged").
`--write-docs` puts the tables, a sentence per policy (figures from this run) and a plot into
docs/policies.md; with the held-out cases of `sim.scenario.cases` (`--held-out`, and always with
`--write-docs`), their tables go into a section of their own: load no constant of any policy was
chosen on. One seed is one draw of each synthetic load (and of a scaled trace's copies); with
`--seeds` (and always with `--write-docs`), every policy also runs on every case of the run
with `SEEDS` more, and the goal table (`bench/goals.py`) says per case and seed whether
`predictive` meets G1–G3.

Every case (and every other seed's run) is one task of one sweep (`sim.sweep`): `--jobs N`
worker processes (default: one per core), and finished cases come from the run cache
(`$LLMSCALER_RUN_CACHE`, default ~/.cache/llmscaler/runs) unless `--no-cache`, so a run cut short
resumes from the cases it finished. The tables are the same whatever `--jobs`. `--ray ADDRESS`
(alone: $RAY_ADDRESS) runs the cases on a Ray cluster instead (`sim.sweep.on_ray`; the `ray`
extra): each node needs llmscaler, and the traces and this directory at the paths they have
here (the workers import these scripts from there); an unreachable cluster is one line and
status 2.

Run: `.venv/bin/python bench/policy.py [--write-docs] [--held-out] [--seeds] [--case NAME]
[--policy NAME] [--jobs N | --ray [ADDRESS]] [--no-cache]` (about nineteen minutes of one core
with `--write-docs`: four for the benchmark's cases, three for the held-out ones, twelve for the
other seeds; ten minutes of wall time with `--jobs 2` on two cores; the searches take most of
it).
"""

from __future__ import annotations

import argparse
import hashlib
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib as mpl

import doc_blocks
import goals

mpl.use('Agg')
import matplotlib.pyplot as plt
from rich.console import Console

from llmscaler.sim import simulate
from llmscaler.sim.report.summary import PolicySummary
from llmscaler.sim.scenario import cases, loader
from llmscaler.sim.scenario.setup import FIXED_POLICIES, SEARCHED_POLICIES
from llmscaler.sim.scenario.workloads import build_workloads
from llmscaler.sim.sweep import cache as run_cache
from llmscaler.sim.sweep import on_ray
from llmscaler.sim.sweep.executors import default_jobs
from llmscaler.sim.sweep.sweep import Sweep

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / 'bench'
TRACES = ROOT.parent / 'shared' / 'traces'
DOC = ROOT / 'docs' / 'policies.md'
PLOT = ROOT / 'docs' / 'img' / 'policies.png'
MARKERS = ('<!-- policies:begin -->', '<!-- policies:end -->')
HELD_OUT_MARKERS = ('<!-- held-out:begin -->', '<!-- held-out:end -->')
GOAL_MARKERS = ('<!-- goal:begin -->', '<!-- goal:end -->')
SEEDS = (2, 3)
"""The other seeds every policy runs on (the benchmark's is 1)."""

Results = Mapping[str, Sequence[PolicySummary]]

WHY: Mapping[str, str] = {
    'default': (
        'WVA V1 (percentage saturation) adds replicas of one variant per cycle when KV usage or '
        'the queue cross their thresholds; those stay under them while requests miss the ITL '
        'target (a slow variant run past its SLO capacity, long prompts stalling decode steps), '
        'so it trails the load and misses'
    ),
    'saturation-percentage': 'is `default` by its WVA name: the same decisions',
    'saturation-token': (
        'WVA V2 (token saturation) sizes on token-capacity estimates that move from scrape to '
        'scrape: it scales often and sizes for saturation, not for the SLO, so it pays for '
        'swings and still misses'
    ),
    'slo-queueing': (
        'sizes each variant from a queueing model of TTFT and ITL on what it observes: it '
        'reacts, so it trails steps and bursts by its decision and start-up delays, and where '
        "its model of a replica's time per request is off (long prompts) it buys too little"
    ),
    'predictive': (
        'sizes the cheapest variant mix for an upper quantile of the load forecast over its '
        'start-up horizon, from the SLO model corrected by observed latency: it cannot see a '
        'step or a flash crowd before it arrives, so it trails them by its decision and start-up '
        'delays, and it pays for the hysteresis that keeps it from chasing every lull'
    ),
    'keda-queue': (
        'scales each variant on the waiting requests (⌈Σ waiting / 5⌉): it reacts only once '
        'requests wait, every variant grows its own pool whatever its price, and replicas stay '
        'for the 300 s window, so it pays more and still misses the start of each burst'
    ),
    'hpa-kv': (
        'scales on mean KV usage, a late signal: queued prompts hold no KV blocks, so it reacts '
        'after TTFT has grown'
    ),
    'kaito-realtime': (
        "runs Kaito's defaults: one replica per step, a scale-up at most every 600 s and a "
        'scale-down every 1,800 s, so a step in load takes many minutes to meet and what it buys '
        'stays'
    ),
    'static-best': (
        'is the cheapest fixed fleet that meets 99 %: it pays for the peak all the time, so it '
        'is cheap only where the load is flat'
    ),
    'clairvoyant': (
        'knows every arrival; its cost is that of the cheapest plan its searches found meeting '
        '99 % (a fixed fleet where that was cheaper), not a proven optimum'
    ),
}


def policies() -> list[str]:
    return [*FIXED_POLICIES[:-1], 'kaito-realtime', *SEARCHED_POLICIES, 'clairvoyant']


def run_case(
    *,
    name: str,
    names: Sequence[str],
    seed: int = 1,
    duration: float | None = None,
    jobs: int = 1,
) -> list[PolicySummary]:
    """The summaries of `names` on case `name`; the case's own runs on `jobs` workers."""
    return Case(name=name, names=tuple(names), seed=seed, duration=duration, jobs=jobs).summaries()


def file_digests(document: object) -> list[tuple[str, str]]:
    """(path, SHA-256) of every file a scenario document names (its traces), in path order:
    what a case's result depends on besides the document."""
    found: set[str] = set()

    def walk(value: object) -> None:
        if isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)
        elif isinstance(value, str) and len(value) < 4096 and Path(value).is_file():
            found.add(value)

    walk(document)
    return [(p, hashlib.sha256(Path(p).read_bytes()).hexdigest()) for p in sorted(found)]


PREFIX_COST = 6.0
"""A run with prefix caching on costs about this many runs without (docs/performance.md,
bench/simulate.py's case (c))."""


@dataclass(frozen=True)
class Case:
    """One case of the benchmark with these policies and seed, as a task of a sweep
    (`sim.sweep.tasks.Task`): its result is `(summaries, seconds it took)`.

    `jobs` > 1 runs the case's own runs (its searches' rounds, its policies) on that many
    workers of its own: while the sweep's last cases run, the cores the finished ones left are
    not idle (more processes than cores for a while; the results do not depend on it, and
    `identity` leaves it out)."""

    name: str
    names: tuple[str, ...]
    seed: int = 1
    duration: float | None = None
    jobs: int = 1

    @property
    def label(self) -> str:
        return f'{self.name} (seed {self.seed})'

    def document(self) -> dict[str, Any]:
        return cases.case(
            name=self.name,
            policies=list(self.names),
            traces=TRACES,
            seed=self.seed,
            duration=self.duration,
        )

    def identity(self) -> object:
        document = self.document()
        return ('bench/policy.py case', document, file_digests(document))

    def weight(self) -> float:
        """An estimate of the case's cost, for the sweep to start the heaviest first: its
        requests × policies, × `PREFIX_COST` with prefix caching on."""
        setup = loader.from_document(document=self.document(), where=self.name)
        requests = sum(len(t) for t in build_workloads(scenario=setup).traces.values())
        caching = PREFIX_COST if setup.settings.prefix_caching else 1.0
        return requests * len(self.names) * caching

    def summaries(self) -> list[PolicySummary]:
        """`llmscaler simulate` on the case, in this process (its runs on `jobs` workers)."""
        setup = loader.from_document(document=self.document(), where=self.name)
        with Sweep(jobs=self.jobs, progress=False) as sweep:
            outcome = simulate.run(
                setup=setup,
                out=None,
                console=Console(stderr=True, quiet=True),
                progress=False,
                sweep=sweep,
            )
        return outcome.summaries

    def __call__(self) -> tuple[list[PolicySummary], float]:
        started = time.perf_counter()
        rows = self.summaries()
        return rows, time.perf_counter() - started


def sweep_for(*, jobs: int, cache: bool, label: str, ray: str | None = None) -> Sweep:
    """The sweep a benchmark script runs its cases on: `jobs` workers, or the Ray cluster at
    `ray` ('' for $RAY_ADDRESS), the run cache or none; `on_ray.RayUnavailable` when there is
    no cluster there."""
    store = run_cache.RunCache(directory=run_cache.default_directory()) if cache else None
    if ray is None:
        return Sweep(jobs=jobs, cache=store, label=label)
    executor = on_ray.OnRay(
        address=on_ray.address_from(given=ray),
        # The workers unpickle these scripts' tasks by module name (`policy.Case`).
        runtime_env={'env_vars': {'PYTHONPATH': f'{BENCH}:${{PYTHONPATH}}'}},
    )
    return Sweep(executor=executor, cache=store, label=label)


def sweep_of(parser: argparse.ArgumentParser, args: argparse.Namespace, *, label: str) -> Sweep:
    """`sweep_for` the options of `jobs_argument`; no cluster at `--ray`: one line, status 2."""
    try:
        return sweep_for(jobs=args.jobs, cache=not args.no_cache, label=label, ray=args.ray)
    except on_ray.RayUnavailable as exc:
        parser.exit(2, f'{parser.prog}: {exc}\n')


def jobs_argument(parser: argparse.ArgumentParser) -> None:
    """`--jobs N` or `--ray [ADDRESS]`, and `--no-cache`, as every sweeping script of bench/
    takes them."""
    where = parser.add_mutually_exclusive_group()
    # No default here: argparse takes a value equal to the default (`--jobs 2` on two cores)
    # for no value, and would let `--ray` through with it (`check_jobs` fills it in).
    where.add_argument('--jobs', type=int, help='worker processes (default: cores)')
    where.add_argument(
        '--ray',
        metavar='ADDRESS',
        nargs='?',
        const='',
        help='run on the Ray cluster at ADDRESS (alone: $RAY_ADDRESS)',
    )
    parser.add_argument(
        '--no-cache', action='store_true', help='run every case, even those the cache holds'
    )


def check_jobs(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """`--jobs` checked, and one per core when not given."""
    if args.jobs is None:
        args.jobs = default_jobs()
    if args.jobs < 1:
        parser.error(f'--jobs must be at least 1, got {args.jobs}')


def _by(rows: Sequence[PolicySummary], policy: str) -> PolicySummary | None:
    return next((r for r in rows if r.policy == policy), None)


def _ratio(row: PolicySummary, base: PolicySummary | None) -> str:
    if base is None or base.cost_usd <= 0:
        return 'n/a'
    return f'{row.cost_usd / base.cost_usd:.2f}×'


def table(*, label: str, rows: Sequence[PolicySummary]) -> list[str]:
    bound, static = _by(rows, 'clairvoyant'), _by(rows, 'static-best')
    lines = [
        f'**{label}**',
        '',
        '| policy | SLO % | cost $ | × clairvoyant | × static-best | scale events | '
        'TTFT p99 s | ITL p99 ms | after the work $ |',
        '|---|---:|---:|---:|---:|---:|---:|---:|---:|',
    ]
    for row in rows:
        lines.append(
            f'| `{row.policy}` | {100 * row.slo_attainment:.1f} | {row.cost_usd:.2f} | '
            f'{_ratio(row, bound)} | {_ratio(row, static)} | {row.scale_events} | '
            f'{row.ttft_p99:.2f} | {1000 * row.itl_p99:.0f} | {row.tail_cost_usd:.2f} |'
        )
    return lines


def sentences(results: Results) -> list[str]:
    """One sentence per policy: its range over the cases, where it loses most, and why."""
    out: list[str] = []
    names = [r.policy for r in next(iter(results.values()), [])]
    for policy in names:
        mine = {case: _by(rows, policy) for case, rows in results.items()}
        rows = {case: row for case, row in mine.items() if row is not None}
        if not rows:
            continue
        slo = [100 * r.slo_attainment for r in rows.values()]
        ratios = [
            r.cost_usd / b.cost_usd
            for case, r in rows.items()
            if (b := _by(results[case], 'clairvoyant')) is not None and b.cost_usd > 0
        ]
        worst = min(rows, key=lambda c: (rows[c].slo_attainment, c))
        figures = f'{min(slo):.1f}–{max(slo):.1f} % SLO'
        if ratios and policy != 'clairvoyant':
            figures += f' at {min(ratios):.2f}–{max(ratios):.2f}× the clairvoyant cost'
        out.append(
            f'- `{policy}` ({figures}; lowest on `{worst}`, '
            f'{100 * rows[worst].slo_attainment:.1f} %) {WHY.get(policy, "")}.'
        )
    return out


def plot(results: Results) -> None:
    columns = min(4, len(results))
    lines = math.ceil(len(results) / columns)
    figure, axes = plt.subplots(
        lines, columns, figsize=(3.6 * columns, 3.2 * lines), sharey=True, squeeze=False
    )
    axes_list = [ax for row in axes for ax in row]
    for ax in axes_list[len(results) :]:
        ax.set_visible(False)
    for ax, (case, rows) in zip(axes_list, results.items(), strict=False):
        bound = _by(rows, 'clairvoyant')
        for row in rows:
            ratio = row.cost_usd / bound.cost_usd if bound is not None and bound.cost_usd else 0
            ax.scatter(ratio, 100 * row.slo_attainment, s=18)
            ax.annotate(row.policy, (ratio, 100 * row.slo_attainment), fontsize=6)
        ax.axhline(99.0, color='grey', linewidth=0.6, linestyle='--')
        ax.set_title(case, fontsize=9)
        ax.set_xlabel('cost × clairvoyant', fontsize=8)
    for row in axes:
        row[0].set_ylabel('SLO attainment %', fontsize=8)
    figure.tight_layout()
    PLOT.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(PLOT, dpi=110, metadata={'Software': None})
    plt.close(figure)


def block(results: Results) -> str:
    head = (
        'Generated by `bench/policy.py` (`--write-docs`): each case of `sim.scenario.cases` '
        '(30 minutes, `multi-turn` 10; the Azure traces: their first half hour, conversation at '
        'rate ×6, code at ×2) on the '
        'built-in fleet, warm start, every policy the simulator knows by name without a file.'
    )
    parts = [head, '', *_tables(results)]
    parts += ['![SLO attainment against cost per case](img/policies.png)', '']
    parts += sentences(results)
    return '\n'.join(parts)


def held_out_block(results: Results) -> str:
    head = (
        'Generated by `bench/policy.py` (`--write-docs`): the held-out cases of '
        '`sim.scenario.cases` (30 minutes each), as the benchmark runs its own.'
    )
    return '\n'.join([head, '', *_tables(results)]).rstrip('\n')


def _tables(results: Results) -> list[str]:
    parts: list[str] = []
    for case, rows in results.items():
        parts += [*table(label=case, rows=rows), '']
    return parts


def goal_block(runs: goals.Runs) -> str:
    head = (
        'Generated by `bench/policy.py` (`--write-docs`): every policy on each case of this page '
        "(the benchmark's and the held-out ones), with the seed of its tables (1) and "
        f'{" and ".join(str(s) for s in SEEDS)}; `predictive` judged against G1–G3 '
        '(`bench/goals.py`).'
    )
    return '\n'.join([head, '', *goals.table(goals.verdicts(runs))])


def write(text: str, *, markers: tuple[str, str] = MARKERS) -> None:
    doc_blocks.write(DOC, markers=markers, body=text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--write-docs', action='store_true', help='write docs/policies.md')
    parser.add_argument(
        '--case', action='append', choices=(*cases.NAMES, *cases.HELD_OUT), help='only these cases'
    )
    parser.add_argument('--held-out', action='store_true', help='also the held-out cases')
    parser.add_argument('--seeds', action='store_true', help='also every policy on other seeds')
    parser.add_argument('--policy', action='append', help='only these policies (repeatable)')
    jobs_argument(parser)
    args = parser.parse_args()
    check_jobs(parser, args)
    names = tuple(args.policy or policies())
    held_out = cases.HELD_OUT if args.held_out or args.write_docs else ()
    chosen = list(args.case or (*cases.NAMES, *held_out))
    seeding = args.seeds or args.write_docs
    # On Ray a case's own runs stay in its worker: forking a Ray worker copies its threads' locks.
    inner = min(2, args.jobs) if args.ray is None else 1
    tasks = [Case(name=case, names=names, jobs=inner) for case in chosen]
    if seeding:
        tasks += [
            Case(name=case, names=names, seed=seed, jobs=inner) for case in chosen for seed in SEEDS
        ]
    with sweep_of(parser, args, label='bench/policy.py') as sweep:
        done = sweep.run(tasks=tasks, weights=[t.weight() for t in tasks])
    results: dict[str, list[PolicySummary]] = {}
    runs: dict[tuple[str, int], list[PolicySummary]] = {}
    for task, (rows, seconds) in zip(tasks, done, strict=True):
        runs[task.name, task.seed] = rows
        if task.seed == 1:
            results[task.name] = rows
            print(f'{task.name}: {seconds:.0f} s')
            print('\n'.join(table(label=task.name, rows=rows)) + '\n', flush=True)
        else:
            print(f'{task.name}, seed {task.seed}: {seconds:.0f} s', flush=True)
    # The goal table lists a case's seeds together.
    order = sorted(runs, key=lambda key: (chosen.index(key[0]), key[1]))
    ordered = {key: runs[key] for key in order}
    print('\n'.join(goal_block(ordered)))
    benchmark = {case: rows for case, rows in results.items() if case in cases.NAMES}
    others = {case: rows for case, rows in results.items() if case in cases.HELD_OUT}
    print('\n'.join(sentences(benchmark)))
    if args.write_docs:
        if benchmark:
            plot(benchmark)
            write(block(benchmark))
        if others:
            write(held_out_block(others), markers=HELD_OUT_MARKERS)
        write(goal_block(ordered), markers=GOAL_MARKERS)
        print(f'wrote {DOC.relative_to(ROOT)} and {PLOT.relative_to(ROOT)}')
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
