"""The bound's searches side by side (`sim.policies.bound` through `sim.sweep`): the same answer
with one worker as with several, on a fleet whose attainment is a formula (no simulation), and
with several no search waiting for another's runs."""

from __future__ import annotations

import dataclasses
import itertools
import threading
from collections.abc import Mapping, Sequence
from typing import TypeVar

import pytest

from llmscaler.sim.policies import bound
from llmscaler.sim.policies.clairvoyant import ClairvoyantPolicy
from llmscaler.sim.policies.core import StaticPolicy
from llmscaler.sim.sweep.sweep import Sweep
from llmscaler.sim.vocabulary import Policy, VariantSpec
from tests.support.sim_fixtures import spec
from tests.support.sweep_fixtures import Wide, small_sweep

SERVES = {'a': 3.0, 'b': 1.0, 'c': 2.0}
"""Requests/s one replica of each variant serves, in the formula below."""


@dataclasses.dataclass(frozen=True, slots=True)
class Formula(bound.Setting):
    """A setting whose runs are a formula: attainment = served / demand (at most 1), where a
    fixed fleet serves Σ replicas × SERVES; each round's candidates are logged."""

    demand: float = 10.0
    crowd: int = 1000
    """More replicas of 'a' than this attain half as much: attainment not monotone in the
    fleet, so that the search skips mixes that would have met the target."""
    rounds: list[int] = dataclasses.field(default_factory=list, compare=False)

    def measure_all(
        self, *, candidates: Sequence[tuple[Policy, Sequence[VariantSpec] | None]]
    ) -> list[bound.Measured]:
        self.rounds.append(len(candidates))
        found = []
        for policy, _ in candidates:
            assert isinstance(policy, StaticPolicy)
            counts = policy.fixed
            served = sum(n * SERVES[v] for v, n in counts.items())
            cost = sum(n * v.cost_per_hour for v in self.variants for n in [counts[v.name]])
            attained = min(1.0, served / self.demand) * (0.5 if counts['a'] > self.crowd else 1)
            found.append(bound.Measured(attainment=attained, cost=cost))
        return found


def fleet(*, maxima: dict[str, int]) -> tuple[VariantSpec, ...]:
    prices = {'a': 2.0, 'b': 0.8, 'c': 1.5}
    return tuple(
        dataclasses.replace(spec(name, gpus=1, price=prices[name]), max_replicas=top)
        for name, top in sorted(maxima.items())
    )


def formula(*, maxima: dict[str, int], demand: float, jobs: int, crowd: int = 1000) -> Formula:
    (run,) = small_sweep(policies=('default',), duration=60.0)
    assert isinstance(run.traces, Mapping)
    return Formula(
        traces=run.traces,
        variants=fleet(maxima=maxima),
        settings=run.settings,
        slos=run.slos,
        # Every worker says it is free: the searches run ahead wherever they can.
        sweep=Sweep(executor=Wide(jobs=jobs, idle=jobs if jobs > 1 else 0)),
        demand=demand,
        crowd=crowd,
    )


CASES = [
    ({'a': 6, 'b': 10}, 10.0, 1000),
    ({'a': 6, 'b': 10}, 17.5, 1000),
    ({'a': 4, 'b': 8, 'c': 6}, 23.0, 1000),
    ({'a': 30, 'b': 30, 'c': 30}, 61.0, 1000),  # more mixes than MAX_STATIC_RUNS allows
    ({'a': 2, 'b': 3}, 100.0, 1000),  # nothing meets the target
    ({'a': 8, 'b': 6, 'c': 6}, 24.0, 2),  # skipped mixes would have met it
    ({'a': 8, 'b': 12}, 20.0, 3),
]


@pytest.mark.parametrize(('maxima', 'demand', 'crowd'), CASES)
def test_the_static_search_finds_the_same_fleet_with_any_number_of_workers(
    maxima: dict[str, int], demand: float, crowd: int
) -> None:
    alone = formula(maxima=maxima, demand=demand, jobs=1, crowd=crowd)
    expected = bound.best_static(setting=alone)
    for jobs in (2, 3, 7):
        wide = formula(maxima=maxima, demand=demand, jobs=jobs, crowd=crowd)
        assert bound.best_static(setting=wide) == expected, jobs
        # Never fewer runs: some mixes run ahead of their turn.
        assert sum(wide.rounds) >= sum(alone.rounds)


def test_the_static_search_finds_the_cheapest_fleet_of_a_small_space() -> None:
    setting = formula(maxima={'a': 6, 'b': 10}, demand=17.5, jobs=2)
    found = bound.best_static(setting=setting)
    prices = {v.name: v.cost_per_hour for v in setting.variants}
    cheapest = min(
        (
            (a * prices['a'] + b * prices['b'], (a, b))
            for a, b in itertools.product(range(7), range(11))
            if a * SERVES['a'] + b * SERVES['b'] >= 17.5 * bound.TARGET
        ),
    )
    assert found.counts == {'a': cheapest[1][0], 'b': cheapest[1][1]}


@dataclasses.dataclass(frozen=True, slots=True)
class Headroom(bound.Setting):
    """Clairvoyant runs as a formula: the plan meets the target when its capacities are at most
    `room` × the one-replica ones; all variant sets cost the same."""

    room: float = 1.5

    def measure_all(
        self, *, candidates: Sequence[tuple[Policy, Sequence[VariantSpec] | None]]
    ) -> list[bound.Measured]:
        found = []
        for policy, _ in candidates:
            assert isinstance(policy, ClairvoyantPolicy)
            factor = max(policy.capacities.values()) / ONE_REPLICA
            met = factor <= self.room
            found.append(bound.Measured(attainment=1.0 if met else 0.5, cost=1.0))
        return found


ONE_REPLICA = 4.0


H = TypeVar('H', bound=Headroom)


def headroom(kind: type[H], *, jobs: int, idle: int = 0) -> H:
    """A `Headroom` setting of `kind` on the fleet of a short run, with `jobs` workers (`idle`
    of them said to be free)."""
    (run,) = small_sweep(policies=('default',), duration=60.0)
    assert isinstance(run.traces, Mapping)
    return kind(
        traces=run.traces,
        variants=tuple(run.variants),
        settings=run.settings,
        slos=run.slos,
        sweep=Sweep(executor=Wide(jobs=jobs, idle=idle)),
    )


def test_the_headroom_search_keeps_the_earlier_set_at_equal_cost_whatever_the_rounds() -> None:
    setting = headroom(Headroom, jobs=3)
    names = sorted(v.name for v in setting.variants)
    base = dict.fromkeys(names, ONE_REPLICA)
    found = bound.bound_capacities(
        setting=setting, base=base, cycle=30.0, start=lambda _: setting.variants
    )
    # Every set meets the target at factor 1 (and 1.5 after bisection); the first set (all the
    # variants) is kept, not the last one to finish its search.
    assert all(found[n] > 0 for n in names)


@dataclasses.dataclass(frozen=True, slots=True)
class Waiting(Headroom):
    """`Headroom` whose first run of the set of every variant waits (up to `patience` s) until
    the sets of one variant have made `others` runs between them."""

    others: int = 4
    patience: float = 10.0
    log: list[tuple[str, ...]] = dataclasses.field(default_factory=list, compare=False)
    went_on: threading.Event = dataclasses.field(default_factory=threading.Event, compare=False)

    def measure_all(
        self, *, candidates: Sequence[tuple[Policy, Sequence[VariantSpec] | None]]
    ) -> list[bound.Measured]:
        sets = [
            tuple(sorted(n for n, c in policy.capacities.items() if c > 0))
            for policy, _ in candidates
            if isinstance(policy, ClairvoyantPolicy)
        ]
        every = tuple(sorted(v.name for v in self.variants))
        if every in sets and every not in self.log:
            self.went_on.wait(timeout=self.patience)
        self.log.extend(sets)
        if sum(1 for names in self.log if names != every) >= self.others:
            self.went_on.set()
        return Headroom.measure_all(self, candidates=candidates)


def test_with_several_workers_no_variant_set_waits_for_another_s_runs() -> None:
    setting = headroom(Waiting, jobs=2)
    names = sorted(v.name for v in setting.variants)
    found = bound.bound_capacities(
        setting=setting,
        base=dict.fromkeys(names, ONE_REPLICA),
        cycle=30.0,
        start=lambda _: setting.variants,
    )
    # The sets of one variant went on while the set of all waited for its first run: in rounds,
    # that run would have waited for them, and they for it, until the patience ran out.
    assert setting.went_on.is_set()
    assert setting.log.index(tuple(names)) >= setting.others
    assert all(found[n] > 0 for n in names)


@dataclasses.dataclass(frozen=True, slots=True)
class Logged(Headroom):
    """`Headroom` that logs the factor of every candidate of each call, in its order."""

    calls: list[tuple[float, ...]] = dataclasses.field(default_factory=list, compare=False)
    lock: threading.Lock = dataclasses.field(default_factory=threading.Lock, compare=False)

    def measure_all(
        self, *, candidates: Sequence[tuple[Policy, Sequence[VariantSpec] | None]]
    ) -> list[bound.Measured]:
        factors = []
        for policy, _ in candidates:
            assert isinstance(policy, ClairvoyantPolicy)
            factors.append(max(policy.capacities.values()) / ONE_REPLICA)
        with self.lock:
            self.calls.append(tuple(factors))
        return Headroom.measure_all(self, candidates=candidates)


def logged(*, jobs: int, idle: int, room: float) -> Logged:
    return dataclasses.replace(headroom(Logged, jobs=jobs, idle=idle), room=room)


@pytest.mark.parametrize('room', [0.05, 0.3, 1.0, 1.3, 2.9, 5.0])
@pytest.mark.parametrize('idle', [2, 3])
def test_idle_workers_run_a_search_s_next_candidates_beside_its_run_for_the_same_answer(
    room: float, idle: int
) -> None:
    def found(setting: Logged) -> dict[str, float]:
        return bound.bound_capacities(
            setting=setting,
            base=dict.fromkeys(sorted(v.name for v in setting.variants), ONE_REPLICA),
            cycle=30.0,
            start=lambda _: setting.variants,
        )

    alone = logged(jobs=1, idle=0, room=room)
    busy = logged(jobs=idle, idle=0, room=room)
    ahead = logged(jobs=idle, idle=idle, room=room)
    assert found(ahead) == found(busy) == found(alone)
    # With no worker to spare, a call per candidate; with some, every candidate asked for was
    # run, first in a call or beside another, and some were known before their turn came.
    assert all(len(call) == 1 for call in busy.calls)
    assert {f for (f,) in busy.calls} <= {f for call in ahead.calls for f in call}
    assert len(ahead.calls) <= len(busy.calls)
    if idle > 2 or room > bound.LOWEST_FACTOR:
        # Either outcome run beside, or the one guessed (met) right at least once.
        assert len(ahead.calls) < len(busy.calls)
    assert max(len(call) for call in ahead.calls) == idle
