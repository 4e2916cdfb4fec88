"""`controller.from_zero.bursts` through the scale-from-zero loop: the EPP's counts read over
loopback every tick, a burst raised through the main cycle, nothing raised on steady load, on a
page that comes and goes, for a model whose policy does not ask, or before the first cycle."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from llmscaler import burst
from llmscaler.config.resolved import Config, ModelConfig
from llmscaler.controller.cluster.world import World
from llmscaler.controller.from_zero.bursts import watched
from llmscaler.domain.snapshot import Decision, PoolMetrics, ReplicaMetrics, Snapshot
from llmscaler.domain.state import EMPTY_STATE, State
from llmscaler.engine import Outcome, decide
from llmscaler.kube.scale import ScaleResult
from llmscaler.kube.targets import ACCELERATOR_LABEL
from tests.support.from_zero_harness import (
    NS,
    QUEUE,
    Epp,
    Harness,
    deployment,
    epp_pod,
    harness,
    va,
)
from tests.support.predictive_fixtures import SETTINGS

ATTEMPTS = 'inference_extension_scheduler_attempts_total'
PREDICTIVE = Config(default=ModelConfig(predictive=SETTINGS))


@dataclass
class MainCycle:
    """What the loop reads of the main cycle; the raises it was handed."""

    config: Config
    last_snapshot: Snapshot | None
    state: State = EMPTY_STATE
    raised: list[tuple[Decision, ...]] = field(default_factory=list)

    def current_config(self) -> Config:
        return self.config

    async def raise_targets(
        self, *, world: World, decisions: Sequence[Decision]
    ) -> dict[str, ScaleResult]:
        self.raised.append(tuple(decisions))
        return {}


def h100(name: str, *, replicas: int) -> dict[str, Any]:
    made = deployment(name, replicas=replicas)
    made['metadata']['labels'][ACCELERATOR_LABEL] = 'H100'
    return made


def counted(arrived: float, *, queued: float = 0.0) -> bytes:
    return (
        f'# TYPE {ATTEMPTS} counter\n'
        f'{ATTEMPTS}{{status="success",target_model_name="m",pod_name="busy-0",'
        f'namespace="{NS}"}} {arrived:g}\n'
        f'# TYPE {QUEUE} gauge\n'
        f'{QUEUE}{{target_model_name="m"}} {queued:g}\n'
    ).encode()


def last_cycle(h: Harness, *, rate: float) -> Snapshot:
    """The snapshot a cycle decided on: the one replica busy at `rate`, read just now."""
    now = h.clock.wall()
    reading = ReplicaMetrics(
        pod='busy-0',
        variant='busy',
        namespace=NS,
        observed_at=now - 1,
        kv_usage=0.1,
        queue_length=0.0,
        num_gpu_blocks=1000,
        block_size=16,
        avg_input_tokens=1000.0,
        avg_output_tokens=200.0,
        arrival_rate=rate,
        avg_ttft=0.2,
        avg_itl=0.02,
        running_requests=4.0,
    )
    pool = PoolMetrics(model_id='m', namespace=NS, observed_at=now - 1, arrival_rate=rate)
    return Snapshot(variants=h.world.variants, replicas=(reading,), pools=(pool,))


@pytest.fixture
async def h() -> AsyncIterator[Harness]:
    async with harness(h100('busy', replicas=1), va('busy', cost='5')) as made:
        yield made


async def run_counts(
    h: Harness, cycle: MainCycle, *, per_second: Sequence[float], step: float = 0.5
) -> None:
    """Tick every `step` s while the EPP's counter grows by `per_second[i]` in second i."""
    loop = h.loop(cycle=cycle)
    arrived = 0.0
    for rate in per_second:
        for _ in range(round(1 / step)):
            h.epp.body = counted(arrived)
            await loop.tick()
            await h.clock.advance(step)
            arrived += rate * step


def test_only_models_above_zero_whose_policy_asks_are_watched(h: Harness) -> None:
    variants = h.world.variants
    assert watched(variants=variants, config=PREDICTIVE) == ((NS, 'm'),)
    assert watched(variants=variants, config=Config()) == ()
    idle = [dataclasses.replace(v, current_replicas=0) for v in variants]
    assert watched(variants=idle, config=PREDICTIVE) == ()


async def test_a_burst_on_the_epp_is_raised_through_the_main_cycle(h: Harness) -> None:
    cycle = MainCycle(config=PREDICTIVE, last_snapshot=last_cycle(h, rate=2.0))
    await run_counts(h, cycle, per_second=[2.0] * 10 + [40.0] * 3)
    assert cycle.raised, 'a burst of 40 req/s on a replica sized for 2 was not raised'
    (decision,) = cycle.raised[0]
    assert decision.variant == 'busy'
    assert decision.target > decision.current == 1
    assert decision.reason.startswith('burst: ')


async def test_steady_load_raises_nothing(h: Harness) -> None:
    cycle = MainCycle(config=PREDICTIVE, last_snapshot=last_cycle(h, rate=2.0))
    await run_counts(h, cycle, per_second=[2.0] * 15)
    assert cycle.raised == []
    assert h.epp.hits == 30


async def test_a_page_unread_for_a_tick_is_no_burst(h: Harness) -> None:
    cycle = MainCycle(config=PREDICTIVE, last_snapshot=last_cycle(h, rate=2.0))
    loop = h.loop(cycle=cycle)
    async with Epp() as other:
        h.epp_pods.append(epp_pod('epp-1', port=other.port))
        # Without the other page the sum falls by its large count; its return would look like
        # a burst of thousands of requests.
        other.body = counted(10_000.0)
        for tick in range(24):
            other.status = 500 if tick == 12 else 200
            h.epp.body = counted(float(tick))
            await loop.tick()
            await h.clock.advance(0.5)
        assert other.hits == 24
    assert cycle.raised == []


async def test_a_model_whose_policy_does_not_ask_is_not_read(h: Harness) -> None:
    cycle = MainCycle(config=Config(), last_snapshot=last_cycle(h, rate=2.0))
    await run_counts(h, cycle, per_second=[2.0] * 3 + [40.0] * 3)
    assert cycle.raised == []
    assert h.epp.hits == 0


async def test_a_burst_the_fleet_serves_is_decided_twice_a_second_not_every_tick(
    h: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `decide` as if the fleet served the burst: every target left where it is, so nothing is
    # raised and nothing makes the model quiet; only RECHECK spaces the decisions.
    calls: list[float] = []

    def serves(**kwargs: Any) -> Outcome:
        calls.append(kwargs['now'])
        outcome = decide(**kwargs)
        kept = tuple(dataclasses.replace(d, target=d.current) for d in outcome.decisions)
        return dataclasses.replace(outcome, decisions=kept)

    monkeypatch.setattr(burst, 'decide', serves)
    cycle = MainCycle(config=PREDICTIVE, last_snapshot=last_cycle(h, rate=2.0))
    await run_counts(h, cycle, per_second=[2.0] * 10 + [40.0] * 3, step=0.1)
    assert cycle.raised == []
    assert len(calls) >= 2, 'the burst was never decided'
    gaps = [b - a for a, b in itertools.pairwise(calls)]
    # Ticks every 0.1 s: a decision at most every RECHECK, give or take one tick's rounding.
    assert min(gaps) >= burst.RECHECK - 1e-9, calls
    assert len(calls) <= 3 / burst.RECHECK + 1, calls


async def test_before_the_first_cycle_nothing_is_raised(h: Harness) -> None:
    cycle = MainCycle(config=PREDICTIVE, last_snapshot=None)
    await run_counts(h, cycle, per_second=[2.0] * 10 + [40.0] * 3)
    assert cycle.raised == []


async def test_a_page_both_readers_want_is_read_once_a_tick() -> None:
    # An idle model (scale-from-zero's) beside a busy one (the fast path's), one EPP page.
    async with harness(
        h100('busy', replicas=1), va('busy', cost='5'), deployment('idle'), va('idle', model='n')
    ) as h:
        cycle = MainCycle(config=PREDICTIVE, last_snapshot=last_cycle(h, rate=2.0))
        loop = h.loop(cycle=cycle)
        h.epp.body = counted(10.0)
        # Once a tick, and afresh at the next.
        for tick in range(1, 4):
            await loop.tick()
            assert h.epp.hits == tick
            await h.clock.advance(0.5)
