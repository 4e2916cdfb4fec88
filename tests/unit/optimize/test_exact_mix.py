"""`optimize.exact_mix`: the cheapest variant mix under a least-loaded router's coupling."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmscaler.optimize.exact_mix import MixOption, capacity, cheapest, coupled_rates, in_flight

# A fast, dear variant and a slow, cheap one; T(b) = t0 + t1·b ms per request.
FAST = MixOption(variant='h100', rate=6.0, cost=3.9, low=0, high=8, t0=1500.0, t1=8.0)
SLOW = MixOption(variant='l40s', rate=2.0, cost=1.9, low=0, high=12, t0=4000.0, t1=40.0)


def test_in_flight_is_littles_law_at_capacity() -> None:
    b = in_flight(FAST)
    assert FAST.rate * (FAST.t0 + FAST.t1 * b) / 1000 == pytest.approx(b)


def test_without_time_model_a_variant_is_not_coupled() -> None:
    plain = MixOption(variant='x', rate=3.0, cost=1.0, low=0, high=4)
    assert math.isinf(in_flight(plain))
    assert coupled_rates([plain, SLOW]) == {'x': 3.0, 'l40s': 2.0}


def test_the_slow_variant_caps_the_fast_one_in_a_mix() -> None:
    rates = coupled_rates([FAST, SLOW])
    assert in_flight(SLOW) < in_flight(FAST)
    assert rates['l40s'] == pytest.approx(2.0)
    assert rates['h100'] < 6.0
    # Alone, each keeps its own capacity.
    assert coupled_rates([FAST]) == {'h100': 6.0}


def test_cheapest_is_exact_against_brute_force() -> None:
    need = 17.0
    mix = cheapest(options=[FAST, SLOW], need=need)
    best = min(
        (3.9 * a + 1.9 * b, a, b)
        for a, b in itertools.product(range(9), range(13))
        if capacity(options=[FAST, SLOW], counts={'h100': a, 'l40s': b}) >= need
    )
    assert mix.met
    assert mix.cost == pytest.approx(best[0])
    assert mix.capacity >= need


def test_minimum_counts_are_kept_and_count_in_the_coupling() -> None:
    forced = MixOption(variant='l40s', rate=2.0, cost=1.9, low=1, high=12, t0=4000.0, t1=40.0)
    mix = cheapest(options=[FAST, forced], need=10.0)
    counts = dict(mix.counts)
    assert counts['l40s'] >= 1
    assert mix.capacity == pytest.approx(capacity(options=[FAST, forced], counts=counts))


def test_unmet_need_takes_the_maxima_that_sustain_the_most() -> None:
    mix = cheapest(options=[FAST, SLOW], need=1e6)
    assert not mix.met
    assert dict(mix.counts) == {'h100': 8, 'l40s': 12}


def test_unmet_need_leaves_out_a_variant_that_holds_the_others_back() -> None:
    # A slower variant whose few replicas would cap the fast ones' in-flight requests at its
    # own limit: eight fast replicas alone sustain more than with two slow ones beside them.
    crawl = MixOption(variant='l4', rate=0.5, cost=0.8, low=0, high=2, t0=6000.0, t1=60.0)
    both = capacity(options=[FAST, crawl], counts={'h100': 8, 'l4': 2})
    assert both < capacity(options=[FAST, crawl], counts={'h100': 8})
    mix = cheapest(options=[FAST, crawl], need=1e6)
    assert not mix.met
    assert dict(mix.counts) == {'h100': 8, 'l4': 0}
    assert mix.capacity == pytest.approx(8 * FAST.rate)


def test_zero_need_buys_nothing() -> None:
    mix = cheapest(options=[FAST, SLOW], need=0.0)
    assert mix.met
    assert dict(mix.counts) == {'h100': 0, 'l40s': 0}


def test_ties_prefer_fewer_moves_from_current() -> None:
    a = MixOption(variant='a', rate=1.0, cost=1.0, low=0, high=4)
    b = MixOption(variant='b', rate=1.0, cost=1.0, low=0, high=4)
    assert dict(cheapest(options=[a, b], need=2.0, prefer={'b': 2}).counts) == {'a': 0, 'b': 2}
    assert dict(cheapest(options=[a, b], need=2.0).counts) == {'a': 2, 'b': 0}


@settings(max_examples=60, deadline=None)
@given(
    need=st.floats(min_value=0, max_value=60),
    rate_a=st.floats(min_value=0.1, max_value=10),
    rate_b=st.floats(min_value=0.1, max_value=10),
    cost_a=st.floats(min_value=0.1, max_value=10),
    cost_b=st.floats(min_value=0.1, max_value=10),
)
def test_never_dearer_than_any_covering_count(
    need: float, rate_a: float, rate_b: float, cost_a: float, cost_b: float
) -> None:
    opts = [
        MixOption(variant='a', rate=rate_a, cost=cost_a, low=0, high=6, t0=1000.0, t1=10.0),
        MixOption(variant='b', rate=rate_b, cost=cost_b, low=0, high=6, t0=3000.0, t1=30.0),
    ]
    mix = cheapest(options=opts, need=need)
    covering = [
        cost_a * a + cost_b * b
        for a, b in itertools.product(range(7), range(7))
        if capacity(options=opts, counts={'a': a, 'b': b}) + 1e-9 >= need
    ]
    if covering:
        assert mix.met
        assert mix.cost <= min(covering) + 1e-9
        assert mix.capacity + 1e-9 >= need
    else:
        assert not mix.met
        most = max(
            capacity(options=opts, counts={'a': a, 'b': b})
            for a, b in itertools.product(range(7), range(7))
        )
        assert mix.capacity + 1e-9 >= most
