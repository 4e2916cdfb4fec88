"""Capacity floors on a schedule (enforce.capacity_floors) and the windows they open in.

| case | expectation |
|---|---|
| weekdays from 08:00 Europe/Berlin for 10 h | open 07:00-17:00 UTC in winter, not on Saturday |
| spring forward, a start at 02:30 | opens at the jump (01:00 UTC) instead of being skipped |
| fall back, a start at 02:30 | opens at the first 02:30 (00:30 UTC) |
| in decide(), a floor open | bought as `optimize.cover` buys it; Saturday: as without floors |
| a floor beyond every maximum | what adds capacity at its maximum, the reason says so |
"""

from __future__ import annotations

import datetime as dt

from llmscaler.config.cron import Schedule, parse_schedule
from llmscaler.config.resolved import CapacityFloor, Config, ModelConfig
from llmscaler.domain.snapshot import EngineParams, Snapshot
from llmscaler.domain.state import EMPTY_STATE
from llmscaler.enforce.capacity_floors import (
    active,
    apply,
    replica_capacities,
    required_capacity,
)
from llmscaler.engine import decide
from llmscaler.optimize.cover import Option, cover
from tests.support.engine_fixtures import replica, variant
from tests.support.strategies import NOW


def utc(*args: int) -> float:
    year, month, day, *rest = args
    hour, minute = [*rest, 0, 0][:2]
    return dt.datetime(year, month, day, hour, minute, tzinfo=dt.UTC).timestamp()


def schedule(expression: str, zone: str = 'Europe/Berlin') -> Schedule:
    parsed = parse_schedule(expression=expression, time_zone=zone)
    assert isinstance(parsed, Schedule)
    return parsed


def morning(hours: float = 10) -> CapacityFloor:
    return CapacityFloor(
        name='mornings',
        schedule=schedule('0 8 * * 1-5'),
        duration=hours * 3600,
        reference='h100',
        replicas=6,
    )


def test_the_window_opens_at_each_start_for_its_duration() -> None:
    floor = morning()
    monday = (2026, 1, 5)
    assert active([floor], now=utc(*monday, 6, 59)) == ()
    assert active([floor], now=utc(*monday, 7, 0)) == (floor,)
    assert active([floor], now=utc(*monday, 16, 59)) == (floor,)
    assert active([floor], now=utc(*monday, 17, 0)) == ()
    assert active([floor], now=utc(2026, 1, 10, 9)) == ()  # Saturday
    assert active([floor], now=utc(2026, 7, 6, 6, 30)) == (floor,)  # summer: 06:00 UTC


def test_daylight_saving_never_skips_a_window() -> None:
    night = CapacityFloor(
        name='night', schedule=schedule('30 2 * * *'), duration=3600, reference='h100', replicas=1
    )
    # 29 March 2026: 02:30 does not exist in Berlin; the window opens at the jump, 01:00 UTC.
    assert night.schedule.last_start(now=utc(2026, 3, 29, 1, 10)) == utc(2026, 3, 29, 1)
    assert active([night], now=utc(2026, 3, 29, 1, 10)) == (night,)
    # 25 October 2026: 02:30 happens twice; the window opens at the first, 00:30 UTC.
    assert night.schedule.last_start(now=utc(2026, 10, 25, 1, 40)) == utc(2026, 10, 25, 0, 30)
    assert active([night], now=utc(2026, 10, 25, 1, 40)) == ()  # an hour later: closed


def test_required_capacity_is_the_largest_priced_floor() -> None:
    small = CapacityFloor(
        name='small', schedule=schedule('@daily'), duration=60, reference='l40s', replicas=3
    )
    unknown = CapacityFloor(
        name='unknown', schedule=schedule('@daily'), duration=60, reference='tpu', replicas=9
    )
    need, unpriced = required_capacity(
        [morning(), small, unknown], capacities={'h100': 10.0, 'l40s': 4.0}
    )
    assert (need, unpriced) == (60.0, ('unknown',))


# ---- in decide(): the one hook after scale-to-zero, before the safety rules and bounds --------


def fleet_snapshot(*, now: float) -> Snapshot:
    big = EngineParams(max_num_seqs=256, max_num_batched_tokens=16384)
    small = EngineParams(max_num_seqs=64, max_num_batched_tokens=4096)
    variants = (
        variant('h100', cost=4.0, engine=big, current_replicas=1, ready_replicas=1),
        variant('l40s', cost=1.5, engine=small, current_replicas=1, ready_replicas=1),
    )
    replicas = (
        replica('h100', 0, age=5.0 - (now - NOW), kv_usage=0.3, queue_length=0.0),
        replica('l40s', 0, age=5.0 - (now - NOW), kv_usage=0.3, queue_length=0.0),
    )
    return Snapshot(variants=variants, replicas=replicas)


def test_decide_buys_an_open_floor_in_the_cheapest_mix() -> None:
    floor = CapacityFloor(
        name='mornings',
        schedule=schedule('0 8 * * 1-5'),
        duration=10 * 3600,
        reference='h100',
        replicas=3,
    )
    config = Config(default=ModelConfig(capacity_floors=(floor,)))
    capacities = replica_capacities(
        variants=fleet_snapshot(now=NOW).variants, replicas=fleet_snapshot(now=NOW).replicas
    )
    need = 3 * capacities['h100']
    monday_nine = utc(2026, 1, 5, 8)  # 09:00 in Berlin
    outcome = decide(
        snapshot=fleet_snapshot(now=monday_nine), config=config, state=EMPTY_STATE, now=monday_nine
    )
    targets = {d.variant: d.target for d in outcome.decisions}
    options = [
        Option('h100', capacities['h100'], 4.0, 1, 10),
        Option('l40s', capacities['l40s'], 1.5, 1, 10),
    ]
    assert targets == dict(cover(options=options, need=need).targets)
    assert sum(capacities[v] * n for v, n in targets.items()) >= need
    assert any('capacity floor mornings' in d.reason for d in outcome.decisions)
    # Saturday: no floor, the idle fleet is left as the analyzer decides.
    saturday = utc(2026, 1, 10, 8)
    without = decide(
        snapshot=fleet_snapshot(now=saturday), config=config, state=EMPTY_STATE, now=saturday
    )
    plain = decide(
        snapshot=fleet_snapshot(now=saturday), config=Config(), state=EMPTY_STATE, now=saturday
    )
    assert [d.target for d in without.decisions] == [d.target for d in plain.decisions]


def test_a_floor_beyond_every_maximum_takes_the_maxima_and_says_so() -> None:
    floor = CapacityFloor(
        name='huge', schedule=schedule('0 8 * * 1-5'), duration=7200, reference='h100', replicas=99
    )
    monday_nine = utc(2026, 1, 5, 8)
    snapshot = fleet_snapshot(now=monday_nine)
    bare = variant('bare', cost=0.5, current_replicas=1)  # no serving parameters: no capacity
    outcome = apply(
        variants=(*snapshot.variants, bare),
        targets={'h100': 1, 'l40s': 1},
        floors=[floor],
        replicas=snapshot.replicas,
        now=monday_nine,
    )
    assert outcome.targets == {'bare': 1, 'h100': 10, 'l40s': 10}
    assert outcome.raised == ('h100', 'l40s')
    assert outcome.reason.endswith('more than every variant at its maximum holds')
