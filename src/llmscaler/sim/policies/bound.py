"""The searches behind the two hindsight baselines: the clairvoyant bound and the best fixed fleet.

Why: a one-replica calibration (`clairvoyant.calibrate`) does not say what a fleet sustains under
the router actually used. The least-loaded router evens out in-flight requests, not SLO margins:
in a mix of a fast and a slow variant the slow one gets as many requests in flight as the fast
one and misses its ITL target long before its one-replica capacity, while the fast one idles.
A plan sized on one-replica capacities therefore misses the SLO (52-96 % on the Azure traces),
and a "bound" that misses the SLO bounds nothing. Both searches below measure instead: every
candidate is a whole simulated run of the scenario, with its router, start fleet and settings.

- `bound_capacities`: the capacities the clairvoyant plan sizes with. Candidates: each variant
  set (all the variants; with one model of whole-request variants, also each variant alone: a
  mix is not always the cheapest thing that meets the SLO once the router has its say) times a
  headroom factor f on the one-replica capacities (capacity_v × f, the others 0). Per set, f = 1
  is tried first. When it misses the target, f is halved until a run meets it or f reaches
  LOWEST_FACTOR (1/16: long prompts that stall other requests' decode steps can need that much
  room); when it meets it, f is doubled until a run misses or f reaches HIGHEST_FACTOR (4: a
  prefix cache or a router that spreads load well lets a replica serve more than one alone
  does). Then BISECTIONS halvings between the last f that met and the first that missed keep
  the largest f that met the target (attainment is taken to grow as f falls: more capacity,
  never less). The answer is the cheapest candidate run that met the target (ties: the earlier
  set), else the one with the best attainment (ties: cheaper). At most 5 + BISECTIONS runs per
  set.
- `best_static`: the cheapest fixed replica counts that meet the target, found by simulating:
  first, per variant alone, the fewest replicas that meet it (bisection over [1, max]); then,
  cheapest first, the mixes that cost less than the best found, skipping a mix when a mix with
  at least as many replicas of every variant already missed (attainment is taken to grow with
  replicas). At most MAX_STATIC_RUNS runs; past that, the best found so far. Nothing meeting
  the target: the best attainment seen (ties: cheaper).
- `clairvoyant_bound`: the bound is the cheaper of the two: the clairvoyant plan on the searched
  capacities, or the best fixed fleet kept from the first cycle when that meets the target for
  less (a prefix cache, for one, lets a few replicas serve more than the plan's per-replica
  capacities say, and a fixed fleet does not pay for the scale events the plan makes).

Both assume attainment is monotone in capacity, which a simulated fleet only nearly is; a
candidate the search skipped on that assumption is not measured. The target is TARGET (99 %).

The runs go through the setting's sweep (`sim.sweep`: local worker processes, a run cache). The
clairvoyant search's variant sets, and the static search's variants alone, are searched side by
side (`_side_by_side`: with one worker in rounds of one run each, with more each in a thread
that asks for its next run as soon as its last is done, and runs beside it, on workers nothing
else wants, the candidates it would ask for next whichever way that run goes); then the static
search's mixes go `jobs` at a time, cheapest first. The
answer is the one the searches give run after run, whatever the number of workers: the runs a
set or a variant would have made are the same (each search reads only its own runs, and a
candidate run ahead that it does not then ask for is never read), the best is chosen in the
order the searches would have made them, and a mix run ahead of its turn whose
result the search, at its turn, would have skipped (a cheaper mix met the target, or a larger
one missed) or not reached (MAX_STATIC_RUNS) is dropped, as if never run.

What fails: `best_static` raises `ValueError` when the variants' count space exceeds
MAX_COMBINATIONS (say so rather than search a sample of it); nothing else raises beyond what a
simulated run raises.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import itertools
import math
import threading
from collections.abc import Callable, Generator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

from llmscaler.sim import runner
from llmscaler.sim.policies.clairvoyant import ClairvoyantPolicy
from llmscaler.sim.policies.core import StaticPolicy
from llmscaler.sim.report import summary as metrics
from llmscaler.sim.sweep.sweep import Sweep, in_process
from llmscaler.sim.sweep.tasks import RunSpec
from llmscaler.sim.vocabulary import Policy, Trace, VariantSpec

TARGET = 0.99
"""The SLO attainment both searches aim for."""
LOWEST_FACTOR = 1 / 16
"""The least headroom factor the clairvoyant search tries."""
HIGHEST_FACTOR = 4.0
"""The largest factor it tries (capacity × 4)."""
BISECTIONS = 3
MAX_STATIC_RUNS = 16
MAX_COMBINATIONS = 200_000

Progress = Callable[[float], None]
C = TypeVar('C')
Search = Generator[C, 'Measured', None]
"""A search that yields the candidate it wants measured and is sent its `Measured`; it goes on
by whether that met the target, and by nothing else (`_side_by_side` runs ahead on that)."""


@dataclass(frozen=True, slots=True)
class Measured:
    """One candidate's simulated run: its attainment (1.0 with no request) and cost."""

    attainment: float
    cost: float


@dataclass(frozen=True, slots=True)
class Setting:
    """What every candidate run shares: the workload, the fleet, the loop, the SLO."""

    traces: Mapping[str, Trace]
    variants: tuple[VariantSpec, ...]
    settings: runner.SimSettings
    slos: metrics.SLOs
    inventory: Mapping[str, int] | None = None
    sweep: Sweep | None = dataclasses.field(default=None, compare=False)
    """Where the runs go (`sim.sweep`); None: one after another in this process."""

    @property
    def jobs(self) -> int:
        return self.sweep.jobs if self.sweep is not None else 1

    def idle(self) -> int:
        """Workers with nothing to run now (`Sweep.idle`; 0 without a sweep)."""
        return self.sweep.idle() if self.sweep is not None else 0

    def measure_all(
        self, *, candidates: Sequence[tuple[Policy, Sequence[VariantSpec] | None]]
    ) -> list[Measured]:
        """Each (policy, start fleet or None for the setting's) run, in order."""
        tasks = [
            RunSpec(
                traces=self.traces,
                variants=tuple(variants if variants is not None else self.variants),
                policy=policy,
                settings=self.settings,
                slos=self.slos,
                inventory=self.inventory,
            )
            for policy, variants in candidates
        ]
        sweep = self.sweep if self.sweep is not None else in_process()
        measured = []
        for finished in sweep.run(tasks=tasks):
            attained = finished.summary.slo_attainment
            measured.append(
                Measured(
                    attainment=1.0 if math.isnan(attained) else attained,
                    cost=finished.summary.cost_usd,
                )
            )
        return measured

    def plan(
        self,
        *,
        capacities: Mapping[str, float],
        cycle: float,
        fixed: Mapping[str, int] | None = None,
    ) -> ClairvoyantPolicy:
        """The clairvoyant plan of this setting on `capacities` (with `fixed`: that fleet)."""
        return ClairvoyantPolicy(
            trace=self.traces,
            variants=self.variants,
            slo=self.slos,
            cycle=cycle,
            capacities=capacities,
            inventory=self.inventory,
            fixed=fixed,
        )

    def measure(self, *, policy: Policy, variants: Sequence[VariantSpec] | None = None) -> Measured:
        (measured,) = self.measure_all(candidates=[(policy, variants)])
        return measured


MET = Measured(attainment=1.0, cost=0.0)
"""What a search is sent to learn where it goes after a run that meets the target."""
MISSED = Measured(attainment=0.0, cost=0.0)
"""... and after one that misses it."""


def _asked_after(start: Callable[[], Search[C]], sent: Sequence[Measured]) -> C | None:
    """The candidate a fresh copy of the search asks for once sent `sent` (None: it is done)."""
    search = start()
    try:
        candidate = next(search)
        for measured in sent:
            candidate = search.send(measured)
    except StopIteration:
        return None
    return candidate


def _side_by_side(
    *,
    searches: Sequence[Callable[[], Search[C]]],
    measure: Callable[[list[C]], list[Measured]],
    jobs: int,
    idle: Callable[[], int] = lambda: 0,
) -> list[list[tuple[C, Measured]]]:
    """Drive independent searches together; per search (each made by its `start` function),
    its (candidate, measured) in its order.

    With one job, in rounds: each round measures the next candidate of every search still
    going, in one call. With more, each search in a thread of its own, asking for its next
    candidate as soon as its last is measured: no search waits for another's run (a round
    would wait for its slowest), so a worker idles only while fewer runs are asked for than
    there are workers. Then, when `idle()` says workers beyond the one its next run takes are
    free, a search runs beside that run the candidates it would ask for next if the run met
    the target, then if it missed (one per free worker): a search branches only on that, so
    the one it asks for next is among them and needs no run of its own, and runs that only
    wait for each other's outcome (a bisection's) go two steps at a time. Either way each
    search reads only its own runs: the same answers."""
    if jobs > 1:

        def alone(start: Callable[[], Search[C]]) -> list[tuple[C, Measured]]:
            search = start()
            made: list[tuple[C, Measured]] = []
            ahead: list[tuple[C, Measured]] = []  # run beside an earlier candidate
            candidate = next(search, None)
            while candidate is not None:
                known = [m for c, m in ahead if c == candidate]
                if known:
                    result = known[0]
                else:
                    sent = [m for _, m in made]
                    batch = [candidate]
                    for outcome in (MET, MISSED)[: max(0, idle() - 1)]:
                        guess = _asked_after(start, [*sent, outcome])
                        if guess is not None and guess not in batch:
                            batch.append(guess)
                    result, *beside = measure(batch)
                    ahead = list(zip(batch[1:], beside, strict=True))
                made.append((candidate, result))
                try:
                    candidate = search.send(result)
                except StopIteration:
                    candidate = None
            return made

        with ThreadPoolExecutor(max_workers=max(1, len(searches))) as threads:
            return list(threads.map(alone, searches))
    running = [start() for start in searches]
    made: list[list[tuple[C, Measured]]] = [[] for _ in searches]
    wanted: dict[int, C] = {}
    for index, search in enumerate(running):
        first = next(search, None)
        if first is not None:
            wanted[index] = first
    while wanted:
        order = sorted(wanted)
        results = measure([wanted[index] for index in order])
        asked, wanted = wanted, {}
        for index, result in zip(order, results, strict=True):
            made[index].append((asked[index], result))
            with contextlib.suppress(StopIteration):
                wanted[index] = running[index].send(result)
    return made


def _better(a: Measured, b: Measured | None, *, target: float) -> bool:
    """Whether `a` beats `b`: meets the target and costs less, or neither meets it and `a`
    attains more (ties: cheaper)."""
    if b is None:
        return True
    if (a.attainment >= target) != (b.attainment >= target):
        return a.attainment >= target
    if a.attainment >= target:
        return a.cost < b.cost
    return (a.attainment, -a.cost) > (b.attainment, -b.cost)


def variant_sets(*, variants: Sequence[VariantSpec]) -> list[tuple[str, ...]]:
    """The variant sets the clairvoyant search tries: all, then each alone (one model of
    whole-request variants only)."""
    names = tuple(v.name for v in variants)
    models = {v.model_name for v in variants}
    if len(names) > 1 and len(models) == 1 and all(v.role == 'both' for v in variants):
        return [names, *((n,) for n in names)]
    return [names]


def bound_capacities(
    *,
    setting: Setting,
    base: Mapping[str, float],
    cycle: float,
    start: Callable[[Mapping[str, float]], tuple[VariantSpec, ...]],
    target: float = TARGET,
    progress: Progress | None = None,
) -> dict[str, float]:
    """The capacities the clairvoyant plan meets the target with, cheapest (module docstring).

    `base` are the one-replica capacities; `start(capacities)` the start fleet a run with those
    capacities begins from (the warm fleet they need, or the scenario's own).
    """
    sets = [
        names
        for names in variant_sets(variants=setting.variants)
        if any(base.get(n, 0.0) > 0 for n in names)
    ]
    halvings = round(math.log2(1 / LOWEST_FACTOR))
    most = len(variant_sets(variants=setting.variants)) * (halvings + 1 + BISECTIONS)
    runs = 0
    counting = threading.Lock()  # the searches may run in threads (`_side_by_side`)

    def capacities(names: tuple[str, ...], factor: float) -> dict[str, float]:
        return {v: (base[v] * factor if v in names else 0.0) for v in sorted(base)}

    def measure(candidates: list[tuple[tuple[str, ...], float]]) -> list[Measured]:
        nonlocal runs
        runs_asked = []
        for names, factor in candidates:
            caps = capacities(names, factor)
            runs_asked.append((setting.plan(capacities=caps, cycle=cycle), start(caps)))
        measured = setting.measure_all(candidates=runs_asked)
        with counting:
            runs += len(candidates)
            if progress is not None:
                progress(min(1.0, runs / most))
        return measured

    made = _side_by_side(
        searches=[functools.partial(_factor_search, names=names, target=target) for names in sets],
        measure=measure,
        jobs=setting.jobs,
        idle=setting.idle,
    )
    best: tuple[Measured, dict[str, float]] | None = None
    for runs_of_set in made:  # the order of the runs one after another: set by set
        for (names, factor), measured in runs_of_set:
            if _better(measured, best[0] if best is not None else None, target=target):
                best = (measured, capacities(names, factor))
    if progress is not None:
        progress(1.0)
    return dict(best[1]) if best is not None else dict(base)


def _factor_search(
    *, names: tuple[str, ...], target: float
) -> Search[tuple[tuple[str, ...], float]]:
    """One variant set's search for its headroom factor (module docstring)."""
    met: float | None
    missed: float | None
    if (yield names, 1.0).attainment >= target:
        met, missed = 1.0, None
        while met < HIGHEST_FACTOR:
            if (yield names, met * 2).attainment >= target:
                met *= 2
            else:
                missed = met * 2
                break
    else:
        met, missed = None, 1.0
        while missed > LOWEST_FACTOR:
            if (yield names, missed / 2).attainment >= target:
                met = missed / 2
                break
            missed /= 2
    if met is None or missed is None:
        return  # met with the least room tried, or missed with the most
    for _ in range(BISECTIONS):
        middle = (missed + met) / 2.0
        if (yield names, middle).attainment >= target:
            met = middle
        else:
            missed = middle


def _cost_rate(counts: Sequence[int], variants: Sequence[VariantSpec]) -> float:
    return sum(n * v.cost_per_hour for n, v in zip(counts, variants, strict=True))


@dataclass(frozen=True, slots=True)
class Fleet:
    """A fixed fleet the static search chose: replicas per variant and its run (None: no run)."""

    counts: dict[str, int]
    measured: Measured | None

    def policy(self, *, name: str = 'static-best') -> StaticPolicy:
        return StaticPolicy(targets=self.counts, name=name)


def _alone_search(*, index: int, size: int, bound: int, target: float) -> Search[tuple[int, ...]]:
    """Variant `index` alone: the fewest replicas in [1, `bound`] that meet the target."""

    def alone(n: int) -> tuple[int, ...]:
        return tuple(n if i == index else 0 for i in range(size))

    if bound == 0:
        return
    low, high = 0, bound  # low: known to miss (0 replicas serve nothing)
    if (yield alone(high)).attainment < target:
        return
    while high - low > 1:
        middle = (low + high) // 2
        if (yield alone(middle)).attainment >= target:
            high = middle
        else:
            low = middle


def clairvoyant_bound(
    *,
    setting: Setting,
    capacities: Mapping[str, float],
    cycle: float,
    fleet: Fleet,
    target: float = TARGET,
) -> ClairvoyantPolicy:
    """The clairvoyant plan on `capacities`, or, when the best fixed fleet `fleet` beats it
    (meets the target for less, or attains more when the plan misses), that fleet kept fixed:
    a fixed fleet is a plan too, and the bound is the cheapest of those found."""

    def plan(fixed: Mapping[str, int] | None = None) -> ClairvoyantPolicy:
        return setting.plan(capacities=capacities, cycle=cycle, fixed=fixed)

    measured = setting.measure(policy=plan())
    if fleet.measured is not None and _better(fleet.measured, measured, target=target):
        return plan(fleet.counts)
    return plan()


def best_static(
    *,
    setting: Setting,
    target: float = TARGET,
    name: str = 'static-best',
    progress: Progress | None = None,
) -> Fleet:
    """The best fixed fleet in hindsight, searched by simulation (module docstring)."""
    variants = setting.variants
    bounds = [v.max_replicas for v in variants]
    if math.prod(b + 1 for b in bounds) > MAX_COMBINATIONS:
        raise ValueError(
            f'static-best: {math.prod(b + 1 for b in bounds):,} replica-count combinations '
            f'(max_replicas + 1 per variant, multiplied) exceed {MAX_COMBINATIONS:,}; lower '
            "the variants' max_replicas"
        )
    measured: dict[tuple[int, ...], Measured] = {}
    best: tuple[Measured, tuple[int, ...]] | None = None

    def measure(candidates: list[tuple[int, ...]]) -> list[Measured]:
        runs = [
            (
                StaticPolicy(
                    targets={v.name: n for v, n in zip(variants, counts, strict=True)}, name=name
                ),
                variants,
            )
            for counts in candidates
        ]
        found = setting.measure_all(candidates=runs)
        if progress is not None:
            progress(min(1.0, (len(measured) + len(candidates)) / MAX_STATIC_RUNS))
        return found

    def record(counts: tuple[int, ...], result: Measured) -> None:
        nonlocal best
        measured[counts] = result
        if _better(result, best[0] if best is not None else None, target=target):
            best = (result, counts)

    # Each variant alone: the fewest replicas that meet the target (bisection over [1, max]),
    # every variant's bisection in the same rounds, kept in the order of one after another.
    alone = _side_by_side(
        searches=[
            functools.partial(
                _alone_search, index=index, size=len(variants), bound=bound, target=target
            )
            for index, bound in enumerate(bounds)
        ],
        measure=measure,
        jobs=setting.jobs,
        idle=setting.idle,
    )
    for runs_of_variant in alone:
        for counts, result in runs_of_variant:
            if len(measured) >= MAX_STATIC_RUNS:
                break
            record(counts, result)
    # Mixes, cheapest first, that could beat the best so far.
    ceiling = math.inf
    if best is not None and best[0].attainment >= target:
        ceiling = _cost_rate(best[1], variants)
    mixes = sorted(
        (
            counts
            for counts in itertools.product(*(range(b + 1) for b in bounds))
            if sum(1 for n in counts if n > 0) > 1 and _cost_rate(counts, variants) < ceiling
        ),
        key=lambda c: (_cost_rate(c, variants), sum(c), c),
    )

    def verdict(counts: tuple[int, ...]) -> str:
        """'stop', 'skip' or 'run': what the search does with `counts` given what it knows."""
        if len(measured) >= MAX_STATIC_RUNS:
            return 'stop'
        if (
            best is not None
            and best[0].attainment >= target
            and _cost_rate(counts, variants) >= _cost_rate(best[1], variants)
        ):
            return 'stop'
        missed = any(
            m.attainment < target and all(a >= b for a, b in zip(other, counts, strict=True))
            for other, m in measured.items()
        )
        return 'skip' if missed or counts in measured else 'run'

    position = 0
    while position < len(mixes):
        # The next mixes the search would run as it stands, up to one per job; then each
        # result kept only if the search, at that mix's turn, would still run it.
        batch: list[int] = []
        room = MAX_STATIC_RUNS - len(measured)
        scan = position
        while scan < len(mixes) and len(batch) < min(setting.jobs, room):
            state = verdict(mixes[scan])
            if state == 'stop':
                break
            if state == 'run':
                batch.append(scan)
            scan += 1
        if not batch:
            break
        results = measure([mixes[i] for i in batch])
        stopped = False
        for i, result in zip(batch, results, strict=True):
            state = 'skip'
            for earlier in range(position, i + 1):  # the mixes between, as the search meets them
                state = verdict(mixes[earlier])
                if state == 'stop' or earlier == i:
                    break
            if state == 'stop':
                stopped = True
                break
            if state == 'run':
                record(mixes[i], result)
            position = i + 1
        if stopped:
            break
    if progress is not None:
        progress(1.0)
    chosen = best[1] if best is not None else tuple(0 for _ in variants)
    return Fleet(
        counts={v.name: n for v, n in zip(variants, chosen, strict=True)},
        measured=best[0] if best is not None else None,
    )
