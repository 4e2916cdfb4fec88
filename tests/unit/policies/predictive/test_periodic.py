"""policies/predictive/periodic.py through the engine: a rise the load showed a period ago is
provisioned for a start-up ahead (and not with `periodic: off`), the present forecast sizes
again when the pattern breaks, and a fleet holds through a silence the period brings load back
from, saying so."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from llmscaler.config.resolved import (
    PERIODIC_AUTO,
    PERIODIC_OFF,
    Config,
    ModelConfig,
    PredictiveConfig,
)
from llmscaler.domain.snapshot import Decision
from llmscaler.domain.state import EMPTY_STATE, State
from llmscaler.engine import decide
from tests.support.engine_fixtures import by_name
from tests.support.predictive_fixtures import NOW, SETTINGS, fleet, observed, own_state

PERIOD = 600.0
HIGH, LOW = 30.0, 1.0


def configured(*, periodic: str = PERIODIC_AUTO, period_seconds: float | None = None) -> Config:
    predictive = dataclasses.replace(SETTINGS, periodic=periodic, period_seconds=period_seconds)
    return Config(default=ModelConfig(predictive=predictive))


def on_off(offset: float) -> float:
    return HIGH if offset % PERIOD < PERIOD / 2 else LOW


def run(
    *, config: Config, rate: Callable[[float], float], until: float
) -> tuple[dict[float, dict[str, Decision]], State]:
    """A cycle every 30 s from NOW to NOW + `until`, the fleet at the counts decided before."""
    state, counts = EMPTY_STATE, {'h100': 2, 'l40s': 0}
    seen: dict[float, dict[str, Decision]] = {}
    offset = 0.0
    while offset <= until:
        now = NOW + offset
        snapshot = fleet(h100=counts['h100'], l40s=counts['l40s'], rate=rate(offset))
        outcome = decide(snapshot=observed(snapshot, at=now), config=config, state=state, now=now)
        seen[offset] = by_name(outcome.decisions)
        state = outcome.state
        counts = {name: max(0, d.target) for name, d in seen[offset].items()}
        offset += 30.0
    return seen, state


def figures(decisions: dict[str, Decision]) -> dict[str, float]:
    return dict(decisions['h100'].figures)


def test_a_learnt_rise_is_provisioned_a_start_up_ahead() -> None:
    """At 1050 s the load is still at its low, and the rise at 1200 s is one horizon (90 s +
    two cycles) away: the period's rate is bought now, as the bound would."""
    auto, _ = run(config=configured(), rate=on_off, until=1050.0)
    off, _ = run(config=configured(periodic=PERIODIC_OFF), rate=on_off, until=1050.0)
    ahead, blind = figures(auto[1050.0]), figures(off[1050.0])
    assert ahead['arrival_rate'] == blind['arrival_rate'] == LOW
    assert ahead['period_s'] == PERIOD
    assert ahead['periodic_rate'] >= HIGH
    assert ahead['mix_capacity'] >= ahead['need_rate'] > HIGH
    assert 'recurring load: period 600 s' in auto[1050.0]['h100'].reason
    assert blind['mix_capacity'] < HIGH
    assert 'periodic_rate' not in blind
    # Before the history holds one and a half periods, nothing is learnt.
    assert 'periodic_rate' not in figures(auto[600.0])
    assert 'no period' in auto[600.0]['h100'].reason


def test_the_present_forecast_sizes_again_when_the_pattern_breaks() -> None:
    """The rise due at 1200 s does not come: once the last two minutes disagree with the
    period (`periodSeconds`: the period is not searched again), the decision says the pattern
    broke and sizes on the low rate alone; a learnt period falls back as well."""

    def missing(offset: float) -> float:
        return LOW if offset >= 1200.0 else on_off(offset)

    seen, _ = run(config=configured(period_seconds=PERIOD), rate=missing, until=1380.0)
    assert 'periodic_rate' in figures(seen[1230.0])  # not yet: one bucket is no break
    broken = seen[1380.0]['h100']
    assert 'the 600-s pattern broke' in broken.reason
    assert 'periodic_rate' not in figures(seen[1380.0])
    assert figures(seen[1380.0])['need_rate'] < HIGH / 2
    learnt, _ = run(config=configured(), rate=missing, until=1380.0)
    assert 'periodic_rate' in figures(learnt[1050.0])
    assert 'periodic_rate' not in figures(learnt[1380.0])
    assert figures(learnt[1380.0])['need_rate'] < HIGH / 2


def test_a_fleet_holds_through_a_silence_the_period_ends() -> None:
    """Busy 270 s, silent 330 s, every 600 s: 120 s (the scale-down delay) into the second
    silence the next burst is 210 s away (180 s within a bucket), within a start-up and the
    delay: the fleet holds and says why; with `periodic: off` it goes to its minimum."""

    def bursts(offset: float) -> float:
        return 20.0 if offset % PERIOD < 270.0 else 0.0

    def idle_or_busy(config: Config) -> dict[str, Decision]:
        state = EMPTY_STATE
        decisions: dict[str, Decision] = {}
        offset = 0.0
        while offset <= 990.0:
            now = NOW + offset
            rate = bursts(offset)
            snapshot = fleet(h100=3, l40s=1, rate=rate)
            if rate == 0.0:
                snapshot = dataclasses.replace(
                    snapshot,
                    replicas=tuple(
                        dataclasses.replace(
                            r,
                            running_requests=0.0,
                            queue_length=0.0,
                            avg_ttft=None,
                            avg_itl=None,
                            avg_input_tokens=None,
                            avg_output_tokens=None,
                        )
                        for r in snapshot.replicas
                    ),
                )
            outcome = decide(
                snapshot=observed(snapshot, at=now), config=config, state=state, now=now
            )
            decisions, state = by_name(outcome.decisions), outcome.state
            offset += 30.0
        return decisions

    held = idle_or_busy(configured())
    assert held['h100'].target >= 3
    assert held['l40s'].target >= 1
    reason = held['h100'].reason
    assert 'the 600-s period brings' in reason
    assert 'back in 180 s' in reason  # within a bucket of the 210 s
    assert 'holds through the silence' in reason
    gone = idle_or_busy(configured(periodic=PERIODIC_OFF))
    assert gone['h100'].target == 0
    assert gone['h100'].reason.startswith('idle for 120 s')


def test_the_history_is_kept_in_the_state_and_not_with_periodic_off() -> None:
    _, state = run(config=configured(), rate=on_off, until=300.0)
    kept = own_state(state).recurring
    first = NOW // 30.0 * 30.0
    assert [b.at for b in kept.buckets][:2] == [first, first + 30.0]
    assert len(kept.buckets) == 11
    _, off = run(config=configured(periodic=PERIODIC_OFF), rate=on_off, until=300.0)
    assert own_state(off).recurring.buckets == ()
    # The default learns: it measured no worse on the non-periodic cases (docs/experiments.md).
    assert PredictiveConfig().periodic == PERIODIC_AUTO
