"""Why `saturation-token` scales so often: every scale event attributed to its cause, and the count
of events when one input is changed at a time.

Why: WVA's token analyzer (V2) makes several times the scale events of the clairvoyant bound
on the cases of `sim.scenario.cases` (docs/policies.md), most of them undone within minutes. The
swings can come from WVA's semantics or from the inputs the simulator hands the core; this script
tells them apart (docs/saturation-token.md has the findings).

What it does, per case of `sim.scenario.cases` (warm start, the built-in fleet, as bench/policy.py):

1. Runs `saturation-token` with a recorder around the core policy (bench/swings_attribution.py)
   that keeps, every cycle, the snapshot, the memory the core started from and its decisions;
   each scale event is then matched with the decision that caused it and the analysis is
   recomputed (`saturation_tokens.analyze`, pure) to split the model's demand D into tokens
   in use and the queue term, and to compare the per-replica capacities (PRC) with the previous
   cycle's. Causes, first that applies:
   - `enforcer` / `wake`: not the analyzer (a minimum kept by scale-to-zero, scale-from-zero);
   - up, `capacity fell`: with last cycle's PRCs the anticipated supply covered D / 0.85
     (the k2 estimate moved from one scrape to the next);
   - up, `queue term`: without the waiting requests' I + O tokens D / 0.85 was covered;
   - up, `tokens in use`: the KV-cache tokens alone passed 85 % of the supply;
   - down, `capacity rose`: with last cycle's PRCs the spare was under one replica;
   - down, `under boundary, fleet < load`: D < 0.70 × supply, and the fleet left by the cut
     serves less than the arrival rate at the SLO (the calibrated req/s per replica of the
     warm start): tokens in use said "idle" while the requests needed the replicas;
   - down, `under boundary`: the same with a fleet left that covers the arrivals;
   and `reversed` counts the events undone (opposite direction on the model) within 300 s,
   `variant flips` the scale-ups on another variant than the model's previous scale-up.
2. With `--experiments`, counts the events under one change at a time: the KV and queue gauges
   as the last sample or `avg_over_time[1m]` instead of WVA's `max_over_time[1m]`; the k2
   window 1 or 100 instead of 10; P1 disabled (k2 from the engine parameters only); the
   scale-down boundary 0.5 or 0.3; the control cycle 15 s (WVA's `GLOBAL_OPT_INTERVAL`).

`--write-docs` writes the tables into docs/saturation-token.md between its markers.

Run: `.venv/bin/python bench/swings.py [--case NAME]... [--experiments] [--write-docs]`
(about 20 s per case and run; `--experiments` runs each case nine times).
What fails: an unknown case name (argparse); nothing is written without `--write-docs`.
"""

from __future__ import annotations

import argparse
import math
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path

import doc_blocks
from llmscaler.config.resolved import Config, SaturationConfig
from llmscaler.sim.report.summary import summarize
from llmscaler.sim.scenario import cases
from llmscaler.sim.vocabulary import SimResult
from swings_attribution import (
    Cycle,
    Event,
    Reduce,
    arrivals,
    attribute,
    config,
    figures,
    last_sample,
    prepare,
    run,
    window_mean,
)

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / 'docs' / 'saturation-token.md'
MARKERS = ('<!-- swings:begin -->', '<!-- swings:end -->')
EXCERPT = ('on-off', 30.0, 660.0)
"""The case and span whose cycles are shown one by one."""
CAUSES = (
    'capacity fell',
    'queue term',
    'tokens in use',
    'capacity rose',
    'under boundary, fleet < load',
    'under boundary',
    'enforcer',
    'wake',
)


# ---- tables --------------------------------------------------------------------------------


def attribution_table(rows: dict[str, tuple[SimResult, list[Event]]]) -> list[str]:
    head = '| case | events | ' + ' | '.join(CAUSES) + ' | reversed ≤ 300 s | variant flips |'
    lines = [head, '|---|' + '---:|' * (len(CAUSES) + 3)]
    for case, (_, events) in rows.items():
        counts = {c: sum(1 for e in events if e.cause == c) for c in CAUSES}
        rev = sum(e.reversed for e in events)
        flips = sum(e.flip for e in events)
        lines.append(
            f'| `{case}` | {len(events)} | '
            + ' | '.join(str(counts[c]) for c in CAUSES)
            + f' | {rev} | {flips} |'
        )
    return lines


def downs_table(rows: dict[str, tuple[SimResult, list[Event]]]) -> list[str]:
    lines = [
        '| case | scale-downs by the analyzer | median D / supply | median arrivals / SLO '
        'capacity left |',
        '|---|---:|---:|---:|',
    ]
    for case, (_, events) in rows.items():
        downs = [e for e in events if e.delta < 0 and e.cause not in ('enforcer', 'wake')]
        if not downs:
            lines.append(f'| `{case}` | 0 | | |')
            continue
        token = statistics.median(e.token_util for e in downs)
        load = statistics.median(e.load_util for e in downs)
        shown = '∞' if math.isinf(load) else f'{load:.2f}'
        lines.append(f'| `{case}` | {len(downs)} | {token:.2f} | {shown} |')
    return lines


def band_table(bands: dict[str, list[float]]) -> list[str]:
    """Where the model's token utilization D / supply sat, cycle by cycle."""
    lines = [
        '| case | cycles | D / supply < 0.70 | 0.70-0.85 (the hysteresis band) | > 0.85 |',
        '|---|---:|---:|---:|---:|',
    ]
    for case, values in bands.items():
        n = len(values) or 1
        low = sum(1 for v in values if v < 0.70)
        high = sum(1 for v in values if v > 0.85)
        mid = len(values) - low - high
        lines.append(
            f'| `{case}` | {len(values)} | {100 * low / n:.0f} % | {100 * mid / n:.0f} % | '
            f'{100 * high / n:.0f} % |'
        )
    return lines


def utilizations(*, cycles: Sequence[Cycle], cfg: Config) -> list[float]:
    """D / supply of every cycle with a supply (the analyzer's view of the model's load)."""
    out = []
    for cycle in cycles:
        f = figures(cycle=cycle, cfg=cfg)
        if f.supply > 0:
            out.append(f.demand / f.supply)
    return out


def excerpt_table(
    *, cycles: Sequence[Cycle], events: Sequence[Event], cfg: Config, start: float, end: float
) -> list[str]:
    """The analyzer's figures cycle by cycle over [start, end] s, with the events they caused."""
    lines = [
        '| t s | arrivals req/s | ready (pending) | tokens in use | queue term | supply | '
        'D / supply | PRC by variant | events (cause) |',
        '|---:|---:|---|---:|---:|---:|---:|---|---|',
    ]
    for i, cycle in enumerate(cycles):
        if not start <= cycle.now <= end:
            continue
        f = figures(cycle=cycle, cfg=cfg)
        fleet = ', '.join(f'{v}: {n} ({p})' for v, (n, p) in sorted(f.counts.items()) if n or p)
        prc = ', '.join(f'{v} {p / 1000:.0f}k' for v, p in sorted(f.prc.items()))
        nxt = cycles[i + 1].now if i + 1 < len(cycles) else math.inf
        acts = ', '.join(
            f'{e.variant} {e.delta:+d} ({e.cause})' for e in events if cycle.now <= e.time < nxt
        )
        util = f'{f.demand / f.supply:.2f}' if f.supply > 0 else 'n/a'
        lines.append(
            f'| {cycle.now:.0f} | {arrivals(cycle.snapshot):.1f} | {fleet or "none"} | '
            f'{(f.demand - f.queue) / 1000:.0f}k | {f.queue / 1000:.0f}k | '
            f'{f.supply / 1000:.0f}k | {util} | {prc} | {acts} |'
        )
    return lines


EXPERIMENTS: dict[str, Callable[[], tuple[Config, float | None, Reduce | None]]] = {
    'WVA (max_over_time[1m], k2 window 10, boundary 0.70, cycle 30 s)': lambda: (
        config(),
        None,
        None,
    ),
    'gauges: last sample': lambda: (config(), None, last_sample),
    'gauges: avg_over_time[1m]': lambda: (config(), None, window_mean),
    'k2 window 1': lambda: (config(k2_window=1), None, None),
    'k2 window 100': lambda: (config(k2_window=100), None, None),
    'no P1 (k2 from engine parameters)': lambda: (
        config(saturation=SaturationConfig(queue_length_threshold=1e9)),
        None,
        None,
    ),
    'scale-down boundary 0.50': lambda: (
        config(saturation=SaturationConfig(scale_down_boundary=0.5)),
        None,
        None,
    ),
    'scale-down boundary 0.30': lambda: (
        config(saturation=SaturationConfig(scale_down_boundary=0.3)),
        None,
        None,
    ),
    'cycle 15 s': lambda: (config(interval=15.0), 15.0, None),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--case', action='append', choices=cases.NAMES, help='only these cases')
    parser.add_argument('--experiments', action='store_true', help='one input changed at a time')
    parser.add_argument('--write-docs', action='store_true', help='write docs/saturation-token.md')
    args = parser.parse_args()
    names = args.case or list(cases.NAMES)
    rows: dict[str, tuple[SimResult, list[Event]]] = {}
    bands: dict[str, list[float]] = {}
    excerpt: list[str] = []
    counts: dict[str, dict[str, tuple[int, float, float]]] = {}
    for name in names:
        prepared = prepare(name=name)
        runs = EXPERIMENTS if args.experiments else dict(list(EXPERIMENTS.items())[:1])
        for label, make in runs.items():
            cfg, cycle, reduce = make()
            result, cycles = run(prepared=prepared, cfg=cfg, cycle=cycle, reduce=reduce)
            summary = summarize(result=result, slo=prepared.slo)
            counts.setdefault(label, {})[name] = (
                summary.scale_events,
                summary.slo_attainment,
                summary.cost_usd,
            )
            if label == next(iter(EXPERIMENTS)):
                events = attribute(
                    result=result, cycles=cycles, cfg=cfg, capacities=prepared.capacities
                )
                rows[name] = (result, events)
                bands[name] = utilizations(cycles=cycles, cfg=cfg)
                if name == EXCERPT[0]:
                    excerpt = excerpt_table(
                        cycles=cycles, events=events, cfg=cfg, start=EXCERPT[1], end=EXCERPT[2]
                    )
            print(
                f'{name:14} {label:66} events {summary.scale_events:3d}  '
                f'SLO {100 * summary.slo_attainment:5.1f} %  ${summary.cost_usd:6.2f}',
                flush=True,
            )
    parts = ['**Scale events by cause** (baseline: WVA semantics on the simulator)', '']
    parts += attribution_table(rows)
    parts += ['', "**The analyzer's scale-downs**", '', *downs_table(rows)]
    parts += ['', '**Token utilization, cycle by cycle**', '', *band_table(bands)]
    if excerpt:
        parts += [
            '',
            f'**`{EXCERPT[0]}`, {EXCERPT[1]:.0f}-{EXCERPT[2]:.0f} s, cycle by cycle**',
            '',
        ]
        parts += excerpt
    if args.experiments:
        parts += ['', '**One input changed at a time** (scale events; SLO %, cost $)', '']
        parts += [
            '| change | ' + ' | '.join(f'`{n}`' for n in names) + ' |',
            '|---|' + '---:|' * len(names),
        ]
        for label, per in counts.items():
            cells = [f'{per[n][0]} ({100 * per[n][1]:.0f} %, {per[n][2]:.1f})' for n in names]
            parts.append(f'| {label} | ' + ' | '.join(cells) + ' |')
    text = '\n'.join(parts)
    doc_blocks.emit(DOC, markers=MARKERS, body=text, write_docs=args.write_docs)
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
