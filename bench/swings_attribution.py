"""What `bench/swings.py` measures with: a recorded `saturation-token` run and its attribution.

Why: telling WVA's semantics from the simulator's inputs needs, for every scale event, the
decision behind it and the figures that decision was taken on. The recorder keeps each cycle's
snapshot, starting memory and decisions; `attribute` matches every scale event with its decision,
recomputes that cycle's analysis (`saturation_tokens.analyze` is pure) and names its cause
(bench/swings.py's docstring lists them); `run` can patch the observer's KV and queue gauges
for one run (a counterfactual input).

What fails: `prepare` raises as `sim.scenario.loader` does for a bad case; nothing else raises on a
finished run.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from llmscaler.analyze.learning import capacity_knowledge
from llmscaler.analyze.saturation import k2_history
from llmscaler.analyze.saturation import tokens as saturation_tokens
from llmscaler.config.resolved import Config, CoreSettings, ModelConfig, SaturationConfig
from llmscaler.domain.snapshot import Decision, ReplicaMetrics, Snapshot
from llmscaler.domain.state import State
from llmscaler.sim import runner
from llmscaler.sim.fleet import observe
from llmscaler.sim.fleet.pods import Replica
from llmscaler.sim.policies.core import CorePolicy
from llmscaler.sim.scenario import cases, loader
from llmscaler.sim.scenario.setup import calibrate_capacities, warm_start_fleet, with_start_fleet
from llmscaler.sim.scenario.validated import Scenario
from llmscaler.sim.scenario.workloads import Workloads, build_workloads, model_slos
from llmscaler.sim.vocabulary import SLO, ControlView, ScaleEvent, SimResult, VariantSpec

TRACES = Path(__file__).resolve().parents[1].parent / 'shared' / 'traces'
REVERSAL = 300.0
"""An event undone within this many seconds counts as reversed."""


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
    setup: Scenario
    workloads: Workloads
    slo: SLO
    capacities: dict[str, float]


def prepare(*, name: str) -> Prepared:
    """The case as bench/policy.py runs it: calibrated capacities and the warm start fleet."""
    document = cases.case(name=name, policies=['saturation-token'], traces=TRACES)
    setup = loader.from_document(document=document, where=name)
    workloads = build_workloads(scenario=setup)
    slos = model_slos(scenario=setup, workloads=workloads)
    capacities = calibrate_capacities(scenario=setup, workloads=workloads, slos=slos)
    initial = warm_start_fleet(scenario=setup, workloads=workloads, capacities=capacities)
    setup = with_start_fleet(scenario=setup, initial=initial)
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


def arrivals(snapshot: Snapshot) -> float:
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
        rate = arrivals(snapshot)
        load_util = rate / left if left > 0 else math.inf
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
