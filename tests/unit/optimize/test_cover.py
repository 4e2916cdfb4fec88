"""The one exact cheapest cover (optimize.cover), against brute force and by hand.

| case | expectation |
|---|---|
| 6 H100 replicas' capacity, one H100 running | 10 L40S + 1 H100 (19 < 20), as brute force |
| already covered by the targets | nothing added |
| need above every maximum, or +Inf | every variant that adds capacity at its maximum, `met` False |
| ties | fewer replicas, then the first name; float-equal costs tie; input order does not matter |
| hold: kept ready replicas cover the load until new ones are ready | no swap that drops capacity |
| bad costs | priced at 10 (the one cost rule), never dropped, never raising |
| bad capacities, needs, targets | add nothing; ask for nothing; read as 0 |
| eight identical variants, 100 replicas each | exact and fast (no search of the tied covers) |
| node budget spent | the best cover found so far |
| properties | equal to brute force (cost, replicas, names) on small instances |
"""

from __future__ import annotations

import itertools
import math
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmscaler.optimize import cover as cover_module
from llmscaler.optimize.cover import Cover, Option, cover

H100 = Option(variant='h100', capacity=10.0, cost=4.0, target=1, max_replicas=8)
L40S = Option(variant='l40s', capacity=4.0, cost=1.5, target=0, max_replicas=10)


def brute_force(
    options: list[Option], need: float, hold: float = 0.0
) -> tuple[dict[str, int], bool]:
    """Every count in range, the tie order written the plain way: cheapest (to 1e-9 of the
    dearest replica), fewest, most on the first name."""
    ordered = sorted(options, key=lambda o: o.variant)
    caps = [o.capacity if 0 < o.capacity < math.inf else 0.0 for o in ordered]
    costs = [o.cost if 0 < o.cost < math.inf else 10.0 for o in ordered]
    unit = max(costs, default=1.0)
    lows = [max(0, o.target) for o in ordered]
    highs = [max(low, o.max_replicas) for low, o in zip(lows, ordered, strict=True)]
    ready = [min(max(0, o.ready), high) for o, high in zip(ordered, highs, strict=True)]
    want = need - 1e-9 * max(1.0, need) if need > 0 else 0.0
    hold = min(hold, sum(k * c for k, c in zip(ready, caps, strict=True))) if hold > 0 else 0.0
    want_hold = hold - 1e-9 * max(1.0, hold) if hold > 0 else 0.0
    best: tuple[int, int, tuple[int, ...]] | None = None
    for counts in itertools.product(
        *(range(lo, hi + 1) for lo, hi in zip(lows, highs, strict=True))
    ):
        rows = list(zip(counts, ready, caps, costs, strict=True))
        if sum(n * c for n, _, c, _ in rows) < want:
            continue
        if sum(min(n, k) * c for n, k, c, _ in rows) < want_hold:
            continue
        cost = sum(n * p / unit for n, _, _, p in rows)
        key = (round(cost / 1e-9), sum(counts), tuple(-n for n in counts))
        if best is None or key < best:
            best = key
    if best is None:
        return {
            o.variant: (high if cap > 0 else low)
            for o, cap, low, high in zip(ordered, caps, lows, highs, strict=True)
        }, False
    return {o.variant: -n for o, n in zip(ordered, best[2], strict=True)}, True


def counts(result: Cover) -> dict[str, int]:
    return dict(result.targets)


def option(name: str, capacity: float, cost: float, *, ready: int = 0) -> Option:
    """A variant that may take 0 to 10 replicas."""
    return Option(
        variant=name, capacity=capacity, cost=cost, target=0, max_replicas=10, ready=ready
    )


# ---- by hand -----------------------------------------------------------------------------------


def test_six_h100_replicas_bought_in_the_cheapest_mix() -> None:
    result = cover(options=[H100, L40S], need=60.0)
    assert result.met
    # 10 L40S (40) and 1 more H100 (20 with the one running): 15 + 4 = 19 < 5 H100 more = 20.
    assert result.targets == (('h100', 2), ('l40s', 10))
    assert result.added_cost == 19.0
    assert brute_force([H100, L40S], 60.0) == ({'h100': 2, 'l40s': 10}, True)


def test_already_covered_changes_nothing() -> None:
    result = cover(options=[H100, L40S], need=8.0)
    assert (result.targets, result.met, result.added_cost) == ((('h100', 1), ('l40s', 0)), True, 0)


def test_not_enough_room_raises_what_adds_capacity_to_its_maximum() -> None:
    nothing = Option(variant='idle', capacity=0.0, cost=1.0, target=1, max_replicas=5)
    for need in (1000.0, math.inf):
        result = cover(options=[H100, L40S, nothing], need=need)
        assert (result.targets, result.met) == ((('h100', 8), ('idle', 1), ('l40s', 10)), False)
        assert result.added_cost == 7 * 4.0 + 10 * 1.5
    # Exactly every maximum is met.
    result = cover(options=[H100, L40S], need=8 * 10.0 + 10 * 4.0)
    assert (result.targets, result.met) == ((('h100', 8), ('l40s', 10)), True)


def test_worked_example_in_requests() -> None:
    # R = 10 req/s, a: 4 req/s at 3.90, b: 1.5 req/s at 1.90. For each count of a, the fewest b:
    # a = 0: b = 7 → 13.30; a = 1: b = 4 → 11.50 (cheapest); a = 2: b = 2 → 11.60; a = 3 → 11.70.
    a = option('a', 4.0, 3.9)
    b = option('b', 1.5, 1.9)
    assert counts(cover(options=[a, b], need=10.0)) == {'a': 1, 'b': 4}


def test_ties() -> None:
    # Equal cost and count (3 replicas, 3.0): the first name gets them, whatever the order given.
    a = option('a', 1.0, 1.0)
    b = option('b', 1.0, 1.0)
    assert counts(cover(options=[b, a], need=3.0)) == {'a': 3, 'b': 0}
    assert counts(cover(options=[a, b], need=3.0)) == {'a': 3, 'b': 0}
    # a = 2 (7.80, 2 replicas), b = 4 (4 · 1.95 = 7.80), a = 1 + b = 2 (7.80, 3): the fewest.
    two = option('z', 2.0, 3.9)
    one = option('b', 1.0, 1.95)
    assert counts(cover(options=[one, two], need=4.0)) == {'b': 0, 'z': 2}


def test_the_ready_replicas_kept_cover_the_hold() -> None:
    a = option('a', 4.0, 3.9)
    b = option('b', 1.5, 1.9)
    # 6 alone: b = 4 → 7.60 (a = 1, b = 2 → 7.70; a = 2 → 7.80).
    assert counts(cover(options=[a, b], need=6.0)) == {'a': 0, 'b': 4}
    # a = 2 ready and 8 to hold: min(n_a, 2) · 4 ≥ 8 → n_a = 2, which covers 6 too.
    ready_a = option('a', 4.0, 3.9, ready=2)
    assert counts(cover(options=[ready_a, b], need=6.0, hold=8.0)) == {'a': 2, 'b': 0}
    # Hold 10 with one a ready: capped at 4 (keep it); the need, 6 → b = 2.
    one_a = option('a', 4.0, 3.9, ready=1)
    assert counts(cover(options=[one_a, b], need=6.0, hold=10.0)) == {'a': 1, 'b': 2}
    # A hold the cheapest cover meets anyway changes nothing.
    b4 = option('b', 1.5, 1.9, ready=4)
    assert counts(cover(options=[ready_a, b4], need=6.0, hold=5.0)) == {'a': 0, 'b': 4}


# ---- bad input ---------------------------------------------------------------------------------


def test_a_bad_cost_is_priced_by_the_one_rule() -> None:
    # Unreadable costs count as 10: dearer per unit than 12 for 2 units (6), cheaper than 25.
    for odd in (math.nan, math.inf, -1.0, 0.0):
        unknown = Option(variant='u', capacity=1.0, cost=odd, target=0, max_replicas=5)
        fair = Option(variant='f', capacity=2.0, cost=12.0, target=0, max_replicas=5)
        dear = Option(variant='f', capacity=1.0, cost=25.0, target=0, max_replicas=5)
        assert counts(cover(options=[unknown, fair], need=2.0)) == {'f': 1, 'u': 0}
        result = cover(options=[unknown, dear], need=2.0)
        assert (counts(result), result.added_cost) == ({'f': 0, 'u': 2}, 20.0)
        # Never dropped: the only variant still covers.
        assert counts(cover(options=[unknown], need=3.0)) == {'u': 3}


def test_bad_capacities_needs_and_counts() -> None:
    b = option('b', 1.5, 1.9)
    for odd in (math.nan, math.inf, -2.0, 0.0):
        a = Option(variant='a', capacity=odd, cost=1.0, target=1, max_replicas=10)
        # a adds nothing (and stays at its target): only b can serve 3.
        assert counts(cover(options=[a, b], need=3.0)) == {'a': 1, 'b': 2}
    for need in (math.nan, -3.0, 0.0, -math.inf):
        result = cover(options=[H100, L40S], need=need)
        assert (result.targets, result.met) == ((('h100', 1), ('l40s', 0)), True)
    assert cover(options=[], need=3.0) == Cover(targets=(), met=False, added_cost=0.0)
    assert cover(options=[], need=0.0) == Cover(targets=(), met=True, added_cost=0.0)
    # A negative target reads as 0, a maximum below the target keeps the target.
    low = Option(variant='a', capacity=1.0, cost=1.0, target=-4, max_replicas=2)
    stuck = Option(variant='b', capacity=1.0, cost=0.5, target=3, max_replicas=1)
    assert counts(cover(options=[low, stuck], need=4.0)) == {'a': 1, 'b': 3}
    # A NaN or negative hold asks for nothing; negative ready counts read as 0.
    ready = option('a', 4.0, 3.9, ready=-3)
    for hold in (math.nan, -1.0):
        assert counts(cover(options=[ready, b], need=6.0, hold=hold)) == {'a': 0, 'b': 4}
    assert counts(cover(options=[ready, b], need=6.0, hold=8.0)) == {'a': 0, 'b': 4}


def test_extreme_figures_do_not_raise() -> None:
    tiny = Option(variant='a', capacity=5e-324, cost=5e-324, target=0, max_replicas=3)
    huge = Option(variant='b', capacity=1e308, cost=1e308, target=1, max_replicas=3)
    assert counts(cover(options=[tiny, huge], need=1e308)) == {'a': 0, 'b': 1}
    assert counts(cover(options=[tiny, huge], need=1.5e308)) == {'a': 0, 'b': 2}
    assert cover(options=[tiny], need=1.0).met is False


# ---- the search --------------------------------------------------------------------------------


def test_many_tied_variants_are_solved_without_searching_every_tie() -> None:
    same = [
        Option(variant=f'v{i}', capacity=1.0, cost=1.0, target=0, max_replicas=100)
        for i in range(8)
    ]
    started = time.perf_counter()
    result = cover(options=same, need=50.0)
    assert time.perf_counter() - started < 1.0
    assert counts(result) == {'v0': 50, **{f'v{i}': 0 for i in range(1, 8)}}


def test_past_the_node_budget_the_best_cover_found_is_taken(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(cover_module, 'MAX_NODES', 3)
    options = [
        Option(variant=f'v{i}', capacity=1.0 + i / 7, cost=1.0 + i / 5, target=0, max_replicas=9)
        for i in range(5)
    ]
    result = cover(options=options, need=20.0)
    assert result.met
    assert sum(o.capacity * dict(result.targets)[o.variant] for o in options) >= 20.0


options = st.builds(
    Option,
    variant=st.sampled_from(['a', 'b', 'c']),
    capacity=st.sampled_from([0.0, 0.5, 1.5, 2.0, 4.0, math.nan, 2.7]),
    cost=st.sampled_from([1.0, 1.9, 1.95, 3.9, 0.0, math.nan, 7.3]),
    target=st.integers(min_value=-1, max_value=3),
    max_replicas=st.integers(min_value=0, max_value=6),
    ready=st.integers(min_value=0, max_value=7),
)


@settings(max_examples=300, deadline=None)
@given(
    fleet=st.lists(options, min_size=1, max_size=3, unique_by=lambda o: o.variant),
    need=st.floats(min_value=0, max_value=50),
    hold=st.one_of(st.just(0.0), st.floats(min_value=0, max_value=40)),
)
def test_equals_brute_force(fleet: list[Option], need: float, hold: float) -> None:
    result = cover(options=fleet, need=need, hold=hold)
    assert (counts(result), result.met) == brute_force(fleet, need, hold)
    if result.met:
        capacity = sum(
            (o.capacity if 0 < o.capacity < math.inf else 0.0) * counts(result)[o.variant]
            for o in fleet
        )
        assert capacity >= need - 1e-6 * max(1.0, need)
