"""`policies.predictive.hysteresis`: the counts a predictive cycle moves to (scale up in one step,
scale down with hysteresis, never while load arrives)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmscaler.optimize import exact_mix
from llmscaler.policies.predictive import hysteresis

H100 = exact_mix.MixOption(variant='h100', rate=10.0, cost=3.9, low=0, high=8)
L40S = exact_mix.MixOption(variant='l40s', rate=4.0, cost=1.9, low=0, high=8)


def choice(
    *,
    need: float,
    options: list[exact_mix.MixOption],
    current: dict[str, int],
    trusted: list[exact_mix.MixOption] | None = None,
) -> hysteresis.Choice:
    """The choice for a fleet at `current` whose need (now and recent) is `need`; a scale-down
    counts the variants at `trusted` (default: `options`)."""
    return hysteresis.choose(
        options=options,
        trusted=options if trusted is None else trusted,
        current=current,
        need=need,
        recent_need=need,
        have=exact_mix.capacity(options=options, counts=current),
    )


def test_a_fleet_short_of_the_need_scales_up_in_one_step() -> None:
    current = {'h100': 1, 'l40s': 0}
    chosen = choice(need=35.0, options=[H100, L40S], current=current)
    assert chosen.action == 'scale up'
    assert chosen.mix.met
    assert exact_mix.capacity(options=[H100, L40S], counts=chosen.targets) >= 35.0
    assert all(chosen.targets[name] >= count for name, count in current.items())


def test_a_scale_down_keeps_the_hysteresis_above_the_recent_need() -> None:
    """Four H100 at 10 req/s each, a recent need of 18: two would cover it, the hysteresis
    asks for 18 × 1.15 > 20, so three stay."""
    chosen = choice(need=18.0, options=[H100], current={'h100': 4})
    assert chosen.targets == {'h100': 3}, chosen.action
    assert chosen.action == 'scale down (the recent need allows it)'


def test_no_scale_down_while_load_arrives_and_the_hold_says_why() -> None:
    def choose(recent_need: float, *, arriving: bool = False) -> hysteresis.Choice:
        return hysteresis.choose(
            options=[H100],
            trusted=[H100],
            current={'h100': 4},
            need=5.0,
            recent_need=recent_need,
            have=40.0,
            arriving=arriving,
        )

    assert choose(5.0).targets == {'h100': 1}
    held = choose(5.0, arriving=True)
    assert (held.targets, held.action) == ({'h100': 4}, hysteresis.ARRIVING_HOLD)
    unsettled = choose(math.inf)
    assert (unsettled.targets, unsettled.action) == ({'h100': 4}, 'hold')


def test_a_scale_down_counts_each_variant_at_its_trusted_rate() -> None:
    """Capacity 10 req/s per H100, but seen meeting its targets at 4 only: a scale-down counts
    it for 6 (TRUST × 4), and a need of 8 keeps two, not one."""
    trusted = hysteresis.trusted_rate(alone=10.0, demonstrated=4.0)
    assert trusted == pytest.approx(hysteresis.TRUST * 4.0)
    counted = exact_mix.MixOption(variant='h100', rate=trusted, cost=3.9, low=0, high=8)
    chosen = choice(need=8.0, options=[H100], current={'h100': 6}, trusted=[counted])
    # ⌈8 × 1.15 / 6⌉ = 2; counted at its capacity of 10, one would do.
    assert (
        chosen.targets
        == {'h100': math.ceil(8.0 * (1 + hysteresis.HYSTERESIS) / 6.0)}
        == {'h100': 2}
    )


@given(
    alone=st.floats(min_value=0.0, max_value=1e4, allow_nan=False),
    demonstrated=st.floats(min_value=0.0, max_value=1e4, allow_nan=False),
)
def test_the_trusted_rate_stays_between_its_floor_and_the_capacity(
    alone: float, demonstrated: float
) -> None:
    got = hysteresis.trusted_rate(alone=alone, demonstrated=demonstrated)
    assert hysteresis.TRUST_FLOOR * alone - 1e-9 <= got <= alone + 1e-9


@pytest.mark.parametrize(
    ('previous', 'rate', 'rises'),
    [
        (2.0, 4.5, True),
        (2.0, 4.0, False),  # exactly doubled: not more than
        (0.0, 0.05, False),  # three requests in a minute after none: within the count's noise
        (0.0, 0.1, True),
        (0.0, 1.0, True),
        (10.0, 0.0, False),
        (0.0, 0.0, False),
    ],
)
def test_a_rate_rises_when_more_than_doubled_beyond_its_noise(
    previous: float, rate: float, rises: bool
) -> None:
    assert hysteresis.rate_rises(previous=previous, rate=rate) is rises


def test_a_need_no_mix_covers_drops_the_variant_that_holds_the_others_back() -> None:
    """Behind a least-loaded router, two slow replicas cap eight fast ones at their in-flight
    limit: keeping them sustains 18 req/s, dropping them 48. Short of any cover, the scale-up
    goes to the set that sustains the most, and the fast variant keeps its replicas."""
    fast = exact_mix.MixOption(variant='h100', rate=6.0, cost=3.9, low=0, high=8, t0=1500, t1=8)
    slow = exact_mix.MixOption(variant='l4', rate=0.5, cost=0.8, low=0, high=4, t0=6000, t1=60)
    current = {'h100': 8, 'l4': 2}
    have = exact_mix.capacity(options=[fast, slow], counts=current)
    chosen = choice(need=1000.0, options=[fast, slow], current=current)
    assert chosen.targets == {'h100': 8, 'l4': 0}
    assert chosen.action == 'scale up to the most the maxima sustain (need not covered)'
    assert chosen.mix.capacity == pytest.approx(48.0)
    assert chosen.mix.capacity > 2 * have


def test_a_scale_down_while_replicas_start_only_cancels_those_not_serving() -> None:
    """Four H100s serve and twelve cheaper-per-request L40Ss were bought, five of them serving.
    Counted at their capacities, the L40Ss alone cover the recent need and the cheapest trim
    drops every H100; but seven L40Ss serve nothing yet. With the serving counts the trim keeps
    every serving replica and cancels only starting ones."""
    cheap = exact_mix.MixOption(variant='l40s', rate=4.0, cost=1.2, low=0, high=12)
    current = {'h100': 4, 'l40s': 12}

    def trim(serving: dict[str, int] | None) -> hysteresis.Choice:
        return hysteresis.choose(
            options=[H100, cheap],
            trusted=[H100, cheap],
            current=current,
            need=30.0,
            recent_need=30.0,
            have=exact_mix.capacity(options=[H100, cheap], counts=current),
            serving=serving,
        )

    assert trim(None).targets['h100'] == 0
    chosen = trim({'h100': 4, 'l40s': 5})
    assert chosen.action == 'scale down (the recent need allows it)'
    assert chosen.targets == {'h100': 4, 'l40s': 5}
    assert chosen.mix.capacity >= 30.0 * (1 + hysteresis.HYSTERESIS)
