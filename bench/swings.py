"""Why `saturation-token` scales so often: every scale event attributed to its cause, and the count
of events when one input is changed at a time.

Why: WVA's token analyzer (V2) makes several times the scale events of the clairvoyant bound
on the cases of `sim.cases` (docs/policies.md), most of them undone within minutes. The swings
can come from WVA's semantics or from the inputs the simulator hands the core; this script
tells them apart (docs/saturation-token.md has the findings).

What it does, per case of `sim.cases` (warm start, the built-in fleet, as bench/policy.py):

1. Runs `saturation-token` with a recorder around the core policy that keeps, every cycle, the
   snapshot, the memory the core started from and its decisions; each scale event is then matched
   with the decision that caused it and the analysis is recomputed (`saturation_tokens.analyze`,
   pure) to split the model's demand D into tokens in use and the queue term, and to compare the
   per-replica capacities (PRC) with the previous cycle's. Causes, first that applies:
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
import dataclasses
import math
import statistics
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from llmscaler.analyze import capacity_knowledge, k2_history, saturation_tokens
from llmscaler.config.types import Config, CoreSettings, ModelConfig, SaturationConfig
from llmscaler.model import Decision, ReplicaMetrics, Snapshot, State
from llmscaler.sim import cases, observe, runner, scenario
from llmscaler.sim.cluster import Replica
from llmscaler.sim.metrics import summarize
from llmscaler.sim.policies import CorePolicy
from llmscaler.sim.types import SLO, ControlView, ScaleEvent, SimResult, VariantSpec

ROOT = Path(__file__).resolve().parents[1]
TRACES = ROOT.parent / 'shared' / 'traces'
DOC = ROOT / 'docs' / 'saturation-token.md'
MARKERS = ('<!-- swings:begin -->', '<!-- swings:end -->')
REVERSAL = 300.0
"""An event undone within this many seconds counts as reversed."""
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


@dataclass(frozen=True, slots=True)
class Cycle:
    now: float
    snapshot: Snapshot
    before: State
    decisions: tuple[Decision, ...]


class Recorder(CorePolicy):
    """The core policy, keeping what each cycle saw, started from and decided."""

    def __init__(self, *, name: str, config: Config) -> None:
        super().__init__(name=name, config=config)
        self.cycles: list[Cycle] = []

    def targets(self, *, view: ControlView) -> dict[str, int]:
        before = self.state
        out = super().targets(view=view)
        self.cycles.append(Cycle(view.now, view.snapshot, before, self.last_decisions))
        return out


@dataclass(frozen=True, slots=True)
class Prepared:
    setup: scenario.Scenario
    workloads: scenario.Workloads
    slo: SLO
    capacities: dict[str, float]


def prepare(*, name: str) -> Prepared:
    """The case as bench/policy.py runs it: calibrated capacities and the warm start fleet."""
    document = cases.case(name=name, policies=['saturation-token'], traces=TRACES)
    setup = scenario.from_document(document=document, where=name)
    workloads = scenario.build_workloads(scenario=setup)
    slos = scenario.model_slos(scenario=setup, workloads=workloads)
    capacities = scenario.calibrate_capacities(scenario=setup, workloads=workloads, slos=slos)
    initial = scenario.warm_start_fleet(scenario=setup, workloads=workloads, capacities=capacities)
    setup = scenario.with_start_fleet(scenario=setup, initial=initial)
    return Prepared(setup, workloads, next(iter(slos.values())), dict(capacities))


def config(
    *,
    saturation: SaturationConfig | None = None,
    k2_window: int | None = None,
    interval: float | None = None,
) -> Config:
    """`saturation-token`'s configuration, with one setting changed when given."""
    sat = dataclasses.replace(saturation or SaturationConfig(), analyzer_name='saturation')
    settings = CoreSettings()
    if k2_window is not None:
        settings = dataclasses.replace(settings, k2_window=k2_window)
    if interval is not None:
        settings = dataclasses.replace(settings, interval=interval)
    return Config(default=ModelConfig(saturation=sat), settings=settings)


Reduce = Callable[[Sequence[observe.ReplicaSample]], tuple[float, float]]


@contextmanager
def gauges(reduce: Reduce | None) -> Iterator[None]:
    """Replace `max_over_time[1m]` of KV usage and queue length by `reduce` over the same window
    (a counterfactual input: the observer is patched for the duration of one run)."""
    if reduce is None:
        yield
        return
    original = observe._replica_metrics

    def patched(
        *, replica: Replica, spec: VariantSpec, buffer: deque[observe.ReplicaSample], horizon: float
    ) -> ReplicaMetrics | None:
        metrics = original(replica=replica, spec=spec, buffer=buffer, horizon=horizon)
        if metrics is None:
            return None
        window = [s for s in buffer if horizon - observe.GAUGE_WINDOW < s.time <= horizon]
        if not window:
            return metrics
        kv, queue = reduce(window)
        return dataclasses.replace(metrics, kv_usage=kv, queue_length=queue)

    observe._replica_metrics = patched
    try:
        yield
    finally:
        observe._replica_metrics = original


def last_sample(window: Sequence[observe.ReplicaSample]) -> tuple[float, float]:
    return window[-1].kv_usage, float(window[-1].waiting)


def window_mean(window: Sequence[observe.ReplicaSample]) -> tuple[float, float]:
    return (
        statistics.fmean(s.kv_usage for s in window),
        statistics.fmean(float(s.waiting) for s in window),
    )


def run(
    *, prepared: Prepared, cfg: Config, cycle: float | None = None, reduce: Reduce | None = None
) -> tuple[SimResult, list[Cycle]]:
    policy = Recorder(name='saturation-token', config=cfg)
    settings = prepared.setup.settings
    if cycle is not None:
        settings = dataclasses.replace(settings, cycle=cycle)
    with gauges(reduce):
        result = runner.run(
            trace=prepared.workloads.traces,
            variants=prepared.setup.variants,
            policy=policy,
            settings=settings,
            inventory=prepared.setup.inventory,
        )
    return result, policy.cycles


# ---- attribution ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Figures:
    """One cycle's token figures, recomputed from what the core saw."""

    prc: dict[str, float]
    demand: float
    queue: float
    supply: float
    anticipated: float
    counts: dict[str, tuple[int, int]]
    """Per variant: (live instances, pending)."""


def figures(*, cycle: Cycle, cfg: Config) -> Figures:
    variants = cycle.snapshot.variants
    settings = cfg.settings
    model_id = variants[0].model_id
    history = k2_history.expire(
        history=cycle.before.k2_history_map(), now=cycle.now, ttl=settings.k2_history_ttl
    )
    knowledge = {
        k: r
        for k, r in capacity_knowledge.expire(
            knowledge=cycle.before.capacity_map(), now=cycle.now, ttl=settings.capacity_ttl
        ).items()
        if r.model_id == model_id
    }
    analysis = saturation_tokens.analyze(
        model_id=model_id,
        namespace=variants[0].namespace,
        variants=variants,
        replicas=cycle.snapshot.replicas,
        pool=cycle.snapshot.pools[0] if cycle.snapshot.pools else None,
        config=cfg.default.saturation,
        settings=settings,
        history=history,
        knowledge=knowledge,
        now=cycle.now,
    )
    tokens = {r.pod: r.tokens_in_use for r in cycle.snapshot.replicas}
    in_use = math.fsum(tokens.get(r.pod, 0) for r in analysis.replicas)
    totals = analysis.result.totals
    return Figures(
        prc={v.variant: v.per_replica_capacity for v in analysis.result.variants},
        demand=totals.demand,
        queue=totals.demand - in_use,
        supply=totals.supply,
        anticipated=totals.anticipated_supply,
        counts={v.variant: (v.replica_count, v.pending) for v in analysis.result.variants},
    )


@dataclass(frozen=True, slots=True)
class Event:
    time: float
    variant: str
    delta: int
    cause: str
    reversed: bool = False
    flip: bool = False
    token_util: float = math.nan
    """D / supply at a scale-down."""
    load_util: float = math.nan
    """Arrivals over what the fleet left serves at the SLO, at a scale-down."""


def _arrivals(snapshot: Snapshot) -> float:
    rate = snapshot.pools[0].arrival_rate if snapshot.pools else None
    if rate is not None:
        return rate
    return math.fsum(r.arrival_rate or 0.0 for r in snapshot.replicas)


def attribute(
    *, result: SimResult, cycles: Sequence[Cycle], cfg: Config, capacities: dict[str, float]
) -> list[Event]:
    sat = cfg.default.saturation
    up, down = sat.scale_up_threshold, sat.scale_down_boundary
    by_time = {c.now: i for i, c in enumerate(cycles)}
    cache: dict[int, Figures] = {}

    def fig(i: int) -> Figures:
        if i not in cache:
            cache[i] = figures(cycle=cycles[i], cfg=cfg)
        return cache[i]

    events: list[Event] = []
    for ev in result.events:
        delta = ev.after - ev.before
        if ev.reason == 'wake':
            events.append(Event(ev.time, ev.variant, delta, 'wake'))
            continue
        i = _decision_index(ev=ev, by_time=by_time)
        decision = next(d for d in cycles[i].decisions if d.variant == ev.variant)
        if not decision.reason.startswith('V2'):
            events.append(Event(ev.time, ev.variant, delta, 'enforcer'))
            continue
        now, prev = fig(i), fig(i - 1) if i > 0 else fig(i)
        old = {v: prev.prc.get(v, p) or p for v, p in now.prc.items()}
        if delta > 0:
            with_old = math.fsum((n + p) * old[v] for v, (n, p) in now.counts.items())
            if now.demand / up <= with_old:
                cause = 'capacity fell'
            elif (now.demand - now.queue) / up <= now.anticipated:
                cause = 'queue term'
            else:
                cause = 'tokens in use'
            events.append(Event(ev.time, ev.variant, delta, cause))
            continue
        spare_old = math.fsum(n * old[v] for v, (n, _) in now.counts.items()) - now.demand / down
        snapshot = cycles[i].snapshot
        left = math.fsum(capacities.get(d.variant, 0.0) * d.target for d in cycles[i].decisions)
        arrivals = _arrivals(snapshot)
        load_util = arrivals / left if left > 0 else math.inf
        if spare_old < old[ev.variant]:
            cause = 'capacity rose'
        elif load_util > 1.0:
            cause = 'under boundary, fleet < load'
        else:
            cause = 'under boundary'
        util = now.demand / now.supply if now.supply > 0 else math.nan
        events.append(
            Event(ev.time, ev.variant, delta, cause, token_util=util, load_util=load_util)
        )
    return _mark(events)


def _decision_index(*, ev: ScaleEvent, by_time: dict[float, int]) -> int:
    # The event is the actuation of the latest decision at or before it.
    best = max((t for t in by_time if t <= ev.time), default=min(by_time))
    return by_time[best]


def _mark(events: list[Event]) -> list[Event]:
    out: list[Event] = []
    last_up: str | None = None
    for k, e in enumerate(events):
        undone = any(
            0 < o.time - e.time <= REVERSAL and (o.delta > 0) != (e.delta > 0)
            for o in events[k + 1 :]
        )
        flip = e.delta > 0 and last_up is not None and e.variant != last_up
        if e.delta > 0:
            last_up = e.variant
        out.append(dataclasses.replace(e, reversed=undone, flip=flip))
    return out


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
            f'| {cycle.now:.0f} | {_arrivals(cycle.snapshot):.1f} | {fleet or "none"} | '
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


def write(text: str) -> None:
    doc = DOC.read_text()
    start, end = doc.index(MARKERS[0]), doc.index(MARKERS[1])
    DOC.write_text(doc[: start + len(MARKERS[0])] + '\n' + text + '\n' + doc[end:])


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
    print(text)
    if args.write_docs:
        write(text)
        print(f'wrote {DOC.relative_to(ROOT)}')
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
