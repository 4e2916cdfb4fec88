"""The core with scheduled capacity floors, as a simulator policy: `floor:...`.

Why: a reactive autoscaler meets the morning ramp with pods that take minutes to start; a floor
on the model's capacity that opens one start-up ahead of the ramp has the capacity there when the
requests come, and the optimizer buys it in the cheapest variant mix (`enforce.capacity_floors`).
This policy is the core's default configuration plus such floors, so a scenario can show what a
floor saves in SLO misses and what it costs, beside `default`.

Name: `floor:SCHEDULE=VARIANT*N/DURATION[@ZONE][;...]`, e.g. `floor:0 7 * * *=h100*4/13h`: from
07:00 every day, for 13 hours, at least the capacity of 4 replicas of variant h100 (sized as
`capacity_floors.replica_capacities` sizes them). DURATION is a Go duration (`13h`, `90m`).
Simulated time 0 is midnight UTC of 1 January 1970, a Thursday, as the core reads the simulator's
clock.

What fails: `parse_floor` raises ValueError (one line) for a malformed part, a schedule or zone
that `config.cron` refuses, a duration that is not positive, or a variant that is not in the fleet.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from llmscaler.config.cron import Schedule, parse_schedule
from llmscaler.config.durations import parse_duration
from llmscaler.config.resolved import CapacityFloor, Config, ModelConfig
from llmscaler.sim.policies.core import CorePolicy

PREFIX: Final = 'floor:'
FORM: Final = 'floor:SCHEDULE=VARIANT*N/DURATION[@ZONE];...'


def is_floor(name: str) -> bool:
    return name.startswith(PREFIX)


def _floor(index: int, part: str, *, variants: Sequence[str]) -> CapacityFloor:
    expression, sep, rest = part.rpartition('=')
    what, _, zone = rest.partition('@')
    amount, slash, duration_text = what.partition('/')
    reference, star, count = amount.partition('*')
    if not (sep and slash and star and count.strip().isdigit() and expression.strip()):
        raise ValueError(f'{part!r} is not SCHEDULE=VARIANT*N/DURATION[@ZONE] (see {FORM})')
    schedule = parse_schedule(expression=expression, time_zone=zone.strip())
    if not isinstance(schedule, Schedule):
        raise ValueError(schedule.message)
    duration = parse_duration(duration_text.strip())
    if duration <= 0:
        raise ValueError(f'{part!r}: the duration must be positive')
    if reference.strip() not in variants:
        raise ValueError(f'{reference.strip()!r} is no variant (variants: {", ".join(variants)})')
    return CapacityFloor(
        name=f'floor-{index}',
        schedule=schedule,
        duration=duration,
        reference=reference.strip(),
        replicas=int(count),
    )


def parse_floor(*, text: str, variants: Sequence[str]) -> CorePolicy:
    """The core's default configuration with the floors `text` names (see the module docstring)."""
    body = text.removeprefix(PREFIX)
    if not body.strip():
        raise ValueError(f'{text!r}: expected {FORM}')
    try:
        floors = tuple(
            _floor(i, part.strip(), variants=variants) for i, part in enumerate(body.split(';'))
        )
    except ValueError as exc:
        raise ValueError(f'{text}: {exc}') from None
    return CorePolicy(name=text, config=Config(default=ModelConfig(capacity_floors=floors)))
