"""The `capacityFloors` field of a per-model saturation ConfigMap entry: scheduled capacity floors.

Why: a VariantAutoscaling model can hold, on a schedule, at least the capacity of N replicas of
one of its variants, bought in the cheapest mix of its variants (`enforce.capacity_floors`). In a
cluster the floors come from the model's entry in `wva-saturation-scaling-config`, beside its
other settings, so they reload live, layer like every field (the most specific entry that sets
`capacityFloors` wins whole; `capacityFloors: []` clears inherited floors) and a malformed one
leaves the last good ConfigMap in force:

    capacityFloors:
      - name: weekday-morning          # optional; default floor-0, floor-1, ... by position
        schedule: "0 8 * * 1-5"        # five-field cron or a descriptor (config.cron)
        timeZone: Europe/Berlin        # IANA name; optional, default Etc/UTC
        duration: 10h                  # Go duration, how long each activation holds
        capacity: {variant: llama-h100, replicas: 6}

`capacity.variant` names a variant (VariantAutoscaling) of the model: the floor is 6 replicas of
that variant's capacity. It is not checked against the cluster here (VAs come and go); a floor
whose variant the model does not have cannot be priced, and the decision's reason says so.

What fails: `capacity_floor_list` raises `config.fields.Invalid` (a one-line message, the path
below `capacityFloors` and the offending value) for a value that is not a list of mappings, an
unknown or missing key, a schedule or zone `config.cron` refuses, a duration that is not a Go
duration string in (0, 31 days], replicas that are not a whole number in [1, 2^31 - 1], an empty
variant or name, a repeated name, or more than `MAX_FLOORS` floors.
"""

from __future__ import annotations

from typing import Final

from llmscaler.config.cron import Schedule, parse_schedule
from llmscaler.config.durations import parse_duration
from llmscaler.config.fields import Invalid, type_name
from llmscaler.config.resolved import CapacityFloor
from llmscaler.domain.basics import COUNT_MAX

DURATION_MAX: Final = 31 * 24 * 3600.0
"""Longest window: a monthly schedule open all month; longer is a typo."""
MAX_FLOORS: Final = 100
"""Floors per entry: each is checked on every decision of its model."""
_KEYS: Final = frozenset({'name', 'schedule', 'timeZone', 'duration', 'capacity'})
_REQUIRED: Final = ('schedule', 'duration', 'capacity')
_CAPACITY_KEYS: Final = frozenset({'variant', 'replicas'})


def _text(value: object, *, path: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise Invalid(f'must be a non-empty string, not {type_name(value)}', path=path, value=value)
    return value.strip()


def _duration(value: object, *, path: str) -> float:
    if isinstance(value, bool) or not isinstance(value, str):
        raise Invalid('must be a Go duration string such as "10h"', path=path, value=value)
    try:
        seconds = parse_duration(value)
    except ValueError as exc:
        raise Invalid(str(exc), path=path, value=value) from None
    if not 0 < seconds <= DURATION_MAX:
        raise Invalid('must be a positive duration of at most 744h', path=path, value=value)
    return seconds


def _capacity(value: object, *, path: str) -> tuple[str, int]:
    if not isinstance(value, dict):
        raise Invalid(
            f'must be a mapping such as {{variant: NAME, replicas: 4}}, not {type_name(value)}',
            path=path,
            value=value,
        )
    for key in sorted(value, key=str):
        if key not in _CAPACITY_KEYS:
            raise Invalid('unknown field', path=f'{path}.{key}', value=value[key])
    for key in ('variant', 'replicas'):
        if key not in value:
            raise Invalid(f'{key} is required', path=f'{path}.{key}')
    variant = _text(value['variant'], path=f'{path}.variant')
    replicas = value['replicas']
    if isinstance(replicas, bool) or not isinstance(replicas, int):
        raise Invalid(
            f'must be a whole number, not {type_name(replicas)}',
            path=f'{path}.replicas',
            value=replicas,
        )
    if not 1 <= replicas <= COUNT_MAX:
        raise Invalid(f'must be in [1, {COUNT_MAX}]', path=f'{path}.replicas', value=replicas)
    return variant, replicas


def _floor(index: int, raw: object) -> CapacityFloor:
    path = f'[{index}]'
    if not isinstance(raw, dict):
        raise Invalid(f'must be a mapping, not {type_name(raw)}', path=path, value=raw)
    for key in sorted(raw, key=str):
        if key not in _KEYS:
            raise Invalid('unknown field', path=f'{path}.{key}', value=raw[key])
    for key in _REQUIRED:
        if key not in raw:
            raise Invalid(f'{key} is required', path=f'{path}.{key}')
    name = _text(raw['name'], path=f'{path}.name') if 'name' in raw else f'floor-{index}'
    expression = raw['schedule']
    if not isinstance(expression, str):
        raise Invalid(
            f'must be a cron expression string, not {type_name(expression)}',
            path=f'{path}.schedule',
            value=expression,
        )
    zone = raw.get('timeZone', '')
    if not isinstance(zone, str):
        raise Invalid(
            f'must be a string, not {type_name(zone)}', path=f'{path}.timeZone', value=zone
        )
    schedule = parse_schedule(expression=expression, time_zone=zone)
    if not isinstance(schedule, Schedule):
        where = 'timeZone' if schedule.message.startswith('time zone') else 'schedule'
        raise Invalid(schedule.message, path=f'{path}.{where}', value=raw.get(where))
    duration = _duration(raw['duration'], path=f'{path}.duration')
    reference, replicas = _capacity(raw['capacity'], path=f'{path}.capacity')
    return CapacityFloor(
        name=name, schedule=schedule, duration=duration, reference=reference, replicas=replicas
    )


def capacity_floor_list(value: object) -> tuple[CapacityFloor, ...]:
    """The floors of a `capacityFloors` value, in the order given (see the module docstring)."""
    if not isinstance(value, list):
        raise Invalid(f'must be a list of floors, not {type_name(value)}')
    if len(value) > MAX_FLOORS:
        raise Invalid(f'holds {len(value)} floors, more than {MAX_FLOORS}')
    floors = tuple(_floor(index, raw) for index, raw in enumerate(value))
    seen: set[str] = set()
    for index, floor in enumerate(floors):
        if floor.name in seen:
            raise Invalid('repeats a floor name', path=f'[{index}].name', value=floor.name)
        seen.add(floor.name)
    return floors
