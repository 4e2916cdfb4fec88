"""The clairvoyant baseline: sliding rates, the look-ahead window, the least-cost mix, calibration.

| case | expectation |
|---|---|
| a: 4 req/s at $3.90, b: 1.5 req/s at $1.90, R = 10 | a = 1, b = 4 ($11.50), by hand |
| min / max bounds | the cheapest mix inside them |
| R above Σ max · capacity | every variant at max |
| R = 0, NaN, Inf; bad capacities | mins; mins; maxes; capacity 0 |
| nothing covers | every variant at its maximum, one without capacity too |
| free GPUs per type | maxima (and minima) lowered to what they hold |
| hand-built trace | rate per 60-s window; R(t) over [t + d, t + d + cycle + 60] |
| calibration | stricter SLO → lower; H100 > L40S; deterministic; empty trace 0 |
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from llmscaler.domain.snapshot import Snapshot
from llmscaler.sim.hardware.presets import preset
from llmscaler.sim.policies.clairvoyant import (
    ClairvoyantPolicy,
    calibrate,
    cheapest_mix,
    sliding_rates,
)
from llmscaler.sim.vocabulary import SLO, ControlView, Trace, VariantSpec

SLO_DEFAULT = SLO(ttft=1.2, itl=0.07)


def spec(
    name: str, price: float, *, low: int = 0, high: int = 10, delay: float = 90.0
) -> VariantSpec:
    return preset(
        name='llama-3.1-8b-h100',
        variant_name=name,
        price_per_gpu_hour=price,
        min_replicas=low,
        max_replicas=high,
        startup_delay=delay,
    )


def trace_of(arrivals: list[float], name: str = 'hand') -> Trace:
    n = len(arrivals)
    return Trace(
        name=name,
        arrivals=np.asarray(arrivals, dtype=np.float64),
        input_tokens=np.full(n, 100, dtype=np.int64),
        output_tokens=np.full(n, 10, dtype=np.int64),
    )


def view(now: float, replicas: dict[str, int] | None = None) -> ControlView:
    current = replicas or {}
    return ControlView(now=now, snapshot=Snapshot(), replicas=current, ready=current)


# ---- the mix ---------------------------------------------------------------------------------

AB = [spec('a', 3.90), spec('b', 1.90)]
CAPS = {'a': 4.0, 'b': 1.5}


def test_cheapest_mix_worked_example() -> None:
    # R = 10 req/s. For each count of a, the fewest b covering the rest:
    #   a = 0: b = ceil(10 / 1.5) = 7            → 7 · 1.90           = $13.30
    #   a = 1: b = ceil(6 / 1.5) = 4             → 3.90 + 4 · 1.90    = $11.50  ← cheapest
    #   a = 2: b = ceil(2 / 1.5) = 2             → 7.80 + 3.80        = $11.60
    #   a = 3: b = 0 (12 ≥ 10)                   → 11.70              = $11.70
    # More a only costs more.
    assert cheapest_mix(required=10.0, variants=AB, capacities=CAPS) == {'a': 1, 'b': 4}


def test_cheapest_mix_respects_bounds() -> None:
    # b at most 3: a = 1 needs b = 4 (no); a = 2, b = 2 → $11.60; a = 3 → $11.70.
    capped = [spec('a', 3.90), spec('b', 1.90, high=3)]
    assert cheapest_mix(required=10.0, variants=capped, capacities=CAPS) == {'a': 2, 'b': 2}
    # a at least 3: 12 ≥ 10 already, b stays at 0 → $11.70.
    floored = [spec('a', 3.90, low=3), spec('b', 1.90)]
    assert cheapest_mix(required=10.0, variants=floored, capacities=CAPS) == {'a': 3, 'b': 0}
    # R = 0: every variant at its minimum.
    assert cheapest_mix(required=0.0, variants=floored, capacities=CAPS) == {'a': 3, 'b': 0}


def test_cheapest_mix_infeasible_takes_every_maximum() -> None:
    # Σ max · capacity = 10 · 4 + 10 · 1.5 = 55 < 100.
    assert cheapest_mix(required=100.0, variants=AB, capacities=CAPS) == {'a': 10, 'b': 10}
    assert cheapest_mix(required=math.inf, variants=AB, capacities=CAPS) == {'a': 10, 'b': 10}
    # Exactly 55 is covered: a = 10, b = 10 is the only mix.
    assert cheapest_mix(required=55.0, variants=AB, capacities=CAPS) == {'a': 10, 'b': 10}


def test_cheapest_mix_odd_inputs() -> None:
    assert cheapest_mix(required=math.nan, variants=AB, capacities=CAPS) == {'a': 0, 'b': 0}
    assert cheapest_mix(required=-3.0, variants=AB, capacities=CAPS) == {'a': 0, 'b': 0}
    # A NaN capacity counts as 0: only b can serve 3 req/s → b = 2.
    assert cheapest_mix(required=3.0, variants=AB, capacities={'a': math.nan, 'b': 1.5}) == {
        'a': 0,
        'b': 2,
    }
    assert cheapest_mix(required=3.0, variants=[], capacities={}) == {}
    with pytest.raises(ValueError, match="no capacity for variant 'b'"):
        cheapest_mix(required=3.0, variants=AB, capacities={'a': 1.0})


def test_cheapest_mix_is_the_cheapest_cover_with_every_maximum_when_short() -> None:
    # The solver is optimize.cover (its ties, its hold: tests/unit/optimize/test_cover.py); the
    # plan's own rule is what happens when nothing covers: every variant at its maximum, even
    # one with no capacity (in a search's set of one variant the others have capacity 0).
    caps = {'a': 4.0, 'b': 0.0}
    assert cheapest_mix(required=12.0, variants=AB, capacities=caps) == {'a': 3, 'b': 0}
    assert cheapest_mix(required=41.0, variants=AB, capacities=caps) == {'a': 10, 'b': 10}
    # The hold is the cover's: a = 2 ready and 8 to hold keep them.
    assert cheapest_mix(required=6.0, variants=AB, capacities=CAPS, hold=8.0, current={'a': 2}) == {
        'a': 2,
        'b': 0,
    }


def test_cheapest_mix_within_free_gpus() -> None:
    # Both variants run on H100 (one GPU a replica): 3 free GPUs cap each maximum at 3 (and a
    # minimum above it too), so R = 10 takes a = 2, b = 2 ($11.60) instead of a = 1, b = 4.
    assert cheapest_mix(required=10.0, variants=AB, capacities=CAPS, free={'H100': 3}) == {
        'a': 2,
        'b': 2,
    }
    floored = [spec('a', 3.90, low=5), spec('b', 1.90)]
    assert cheapest_mix(required=0.0, variants=floored, capacities=CAPS, free={'H100': 3}) == {
        'a': 3,
        'b': 0,
    }
    # A type `free` does not name is not capped; too few GPUs: every (capped) maximum.
    assert cheapest_mix(required=10.0, variants=AB, capacities=CAPS, free={'L40S': 0}) == {
        'a': 1,
        'b': 4,
    }
    assert cheapest_mix(required=30.0, variants=AB, capacities=CAPS, free={'H100': 3}) == {
        'a': 3,
        'b': 3,
    }


# ---- the look-ahead window -------------------------------------------------------------------


def test_sliding_rates_by_hand() -> None:
    # Seconds: 0.5 → 0, 1.2 → 1, 59.9 → 59, 60.0 → 60. Window [k, k + 60):
    #   rate[0] = {0.5, 1.2, 59.9} = 3/60; rate[1] = {1.2, 59.9, 60.0} = 3/60;
    #   rate[2] = {59.9, 60.0} = 2/60; rate[60] = {60.0} = 1/60.
    rates = sliding_rates(arrivals=np.array([0.5, 1.2, 59.9, 60.0]))
    assert rates.shape == (61,)
    assert rates[0] == pytest.approx(3 / 60)
    assert rates[1] == pytest.approx(3 / 60)
    assert rates[2] == pytest.approx(2 / 60)
    assert rates[60] == pytest.approx(1 / 60)
    assert sliding_rates(arrivals=np.array([])).shape == (0,)
    # NaN and negative times are dropped.
    assert sliding_rates(arrivals=np.array([math.nan, -1.0, 0.0])).tolist() == [1 / 60]


def test_required_rate_looks_one_startup_delay_ahead() -> None:
    # 30 requests in second 100 (100.0 .. 100.9), 6 at 200.5. d = 90, cycle = 30:
    # R(t) = max rate[k] for k in [t + 90, t + 120]; rate[k] counts [k, k + 60).
    arrivals = [100.0 + i * 0.03 for i in range(30)] + [200.5] * 6
    policy = ClairvoyantPolicy(
        trace=trace_of(arrivals),
        variants=AB,
        slo=SLO_DEFAULT,
        cycle=30.0,
        capacities=CAPS,
    )
    assert policy.delay == 90.0
    # t = 0: k ∈ [90, 120]; k = 90 .. 100 cover second 100 → 30/60 = 0.5.
    assert policy.required_rate(now=0.0) == pytest.approx(0.5)
    # t = 10: k ∈ [100, 130]; k = 100 still covers it.
    assert policy.required_rate(now=10.0) == pytest.approx(0.5)
    # t = 11: k ∈ [101, 131]: second 100 is behind, second 200 needs k ≥ 141 → 0.
    assert policy.required_rate(now=11.0) == 0.0
    # t = 21: k ∈ [111, 141]: k = 141 covers [141, 201) ∋ 200 → 6/60 = 0.1.
    assert policy.required_rate(now=21.0) == pytest.approx(0.1)
    # t = 110: k ∈ [200, 230] → 0.1; t = 111: k ∈ [201, 231] → 0; past the trace: 0.
    assert policy.required_rate(now=110.0) == pytest.approx(0.1)
    assert policy.required_rate(now=111.0) == 0.0
    assert policy.required_rate(now=5000.0) == 0.0


def test_targets_provision_the_cheapest_mix_for_the_window() -> None:
    # 600 requests in second 100: rate[k] = 10 req/s for k ∈ [41, 100].
    # t = 0 → R = 10 → a = 1, b = 4 (the worked example); the t = 200 window is empty → mins.
    arrivals = [100.0 + i / 600 for i in range(600)]
    policy = ClairvoyantPolicy(
        trace=trace_of(arrivals), variants=AB, slo=SLO_DEFAULT, cycle=30.0, capacities=CAPS
    )
    assert policy.name == 'clairvoyant'
    assert policy.targets(view=view(0.0)) == {'a': 1, 'b': 4}
    assert policy.last_required == pytest.approx(10.0)
    # Scale-down is immediate.
    assert policy.targets(view=view(200.0)) == {'a': 0, 'b': 0}
    assert policy.wake(view=view(200.0)) == {}


def test_targets_keep_current_replicas_until_the_load_has_passed() -> None:
    # 600 requests in second 10: rate[k] = 10 req/s for k ∈ [0, 10], 0 after.
    # t = 0, d = 90: future k ∈ [90, 120] → R = 0; hold k ∈ [0, 90] → H = 10.
    arrivals = [10.0 + i / 600 for i in range(600)]
    policy = ClairvoyantPolicy(
        trace=trace_of(arrivals), variants=AB, slo=SLO_DEFAULT, cycle=30.0, capacities=CAPS
    )
    assert policy.required_rate(now=0.0) == 0.0
    assert policy.hold_rate(now=0.0) == pytest.approx(10.0)
    # Running a = 1, b = 4 (4 + 6 = 10): all of it stays.
    assert policy.targets(view=view(0.0, {'a': 1, 'b': 4})) == {'a': 1, 'b': 4}
    assert policy.last_hold == pytest.approx(10.0)
    # Running a = 3 (12 ≥ 10): the cheapest kept subset is all three a.
    assert policy.targets(view=view(0.0, {'a': 3, 'b': 0})) == {'a': 3, 'b': 0}
    # t = 11: hold k ∈ [11, 101] → 0: everything goes at once (scale-down is immediate).
    assert policy.targets(view=view(11.0, {'a': 3, 'b': 0})) == {'a': 0, 'b': 0}


def test_the_longest_startup_delay_is_used() -> None:
    # d = max(90, 180) = 180; cycle 0: R(t) = rate[t + 180]. One request at 250:
    # rate[180] counts [180, 240) → 0; rate[191] counts [191, 251) ∋ 250 → 1/60.
    variants = [spec('a', 3.90, delay=90.0), spec('b', 1.90, delay=180.0)]
    policy = ClairvoyantPolicy(
        trace=trace_of([250.0]), variants=variants, slo=SLO_DEFAULT, cycle=0.0, capacities=CAPS
    )
    assert policy.delay == 180.0
    assert policy.required_rate(now=0.0) == 0.0
    assert policy.required_rate(now=11.0) == pytest.approx(1 / 60)


def test_policy_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match='cycle'):
        ClairvoyantPolicy(
            trace=trace_of([1.0]), variants=AB, slo=SLO_DEFAULT, cycle=-1.0, capacities=CAPS
        )
    with pytest.raises(ValueError, match='no capacity'):
        ClairvoyantPolicy(
            trace=trace_of([1.0]), variants=AB, slo=SLO_DEFAULT, cycle=30.0, capacities={}
        )


# ---- calibration -----------------------------------------------------------------------------


def conversation(n: int = 2000) -> Trace:
    """Conversation-like lengths (lognormal around 1000 in / 200 out), arrivals irrelevant."""
    rng = np.random.default_rng(7)
    inputs = np.clip(rng.lognormal(math.log(800), 0.8, n), 1, 8000).astype(np.int64)
    outputs = np.clip(rng.lognormal(math.log(150), 0.8, n), 1, 2000).astype(np.int64)
    return Trace(
        name='conv',
        arrivals=np.arange(n, dtype=np.float64) * 0.1,
        input_tokens=inputs,
        output_tokens=outputs,
    )


def test_calibration_is_monotone_in_the_slo() -> None:
    h100 = preset(name='llama-3.1-8b-h100')
    trace = conversation()
    loose = calibrate(spec=h100, trace=trace, slo=SLO_DEFAULT)
    strict = calibrate(spec=h100, trace=trace, slo=SLO(ttft=0.3, itl=0.02))
    assert 0 < strict < loose
    # Deterministic for a seed.
    assert calibrate(spec=h100, trace=trace, slo=SLO_DEFAULT) == loose


def test_calibration_h100_serves_more_than_l40s() -> None:
    trace = conversation()
    h100 = calibrate(spec=preset(name='llama-3.1-8b-h100'), trace=trace, slo=SLO_DEFAULT)
    l40s = calibrate(spec=preset(name='llama-3.1-8b-l40s'), trace=trace, slo=SLO_DEFAULT)
    # H100 decodes ~4× faster per step (α 7 vs 22.6 ms, β 0.042 vs 0.181 ms/seq) and has
    # 2.4× the KV cache: several times the L40S rate, and both plausible (0.5 .. 50 req/s).
    assert 0.5 < l40s < h100 < 50
    assert h100 > 2 * l40s


def test_calibration_odd_inputs() -> None:
    h100 = preset(name='llama-3.1-8b-h100')
    assert calibrate(spec=h100, trace=trace_of([]), slo=SLO_DEFAULT) == 0.0
    with pytest.raises(ValueError, match='attainment'):
        calibrate(spec=h100, trace=conversation(10), slo=SLO_DEFAULT, attainment=0.0)
    with pytest.raises(ValueError, match='attainment'):
        calibrate(spec=h100, trace=conversation(10), slo=SLO_DEFAULT, attainment=math.nan)
    with pytest.raises(ValueError, match='SLO'):
        calibrate(spec=h100, trace=conversation(10), slo=SLO(ttft=0.0, itl=0.05))
    # Tiny requests: thousands of req/s, the replay length capped so it stays quick.
    tiny = Trace(
        name='tiny',
        arrivals=np.arange(50, dtype=np.float64),
        input_tokens=np.full(50, 4, dtype=np.int64),
        output_tokens=np.full(50, 2, dtype=np.int64),
    )
    assert calibrate(spec=h100, trace=tiny, slo=SLO(ttft=1.0, itl=0.05)) > 1000
    # An ITL target below one idle decode step (7.04 ms) is never met: capacity 0.
    assert calibrate(spec=h100, trace=conversation(), slo=SLO(ttft=1.0, itl=0.005)) == 0.0


def test_calibration_reports_its_progress_up_to_one() -> None:
    h100 = preset(name='llama-3.1-8b-h100')
    seen: list[float] = []
    capacity = calibrate(spec=h100, trace=conversation(), slo=SLO_DEFAULT, progress=seen.append)
    # One report per replay (3 bracket checks at most, 12 halvings), then 1.0; never backwards.
    assert capacity == calibrate(spec=h100, trace=conversation(), slo=SLO_DEFAULT)
    assert 2 <= len(seen) <= 16
    assert seen == sorted(seen)
    assert seen[0] > 0.0
    assert seen[-1] == 1.0
    empty: list[float] = []
    calibrate(spec=h100, trace=trace_of([]), slo=SLO_DEFAULT, progress=empty.append)
    assert empty == [1.0]
