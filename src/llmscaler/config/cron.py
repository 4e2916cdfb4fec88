"""Cron schedules in an IANA time zone: parsed once, then asked "does it fire in this minute?".

Why: Kaito's cron scaler (its LLMAutoScaler proposal: kaito-project/kaito,
docs/proposals/20250602-auto-scaler-for-inference-workloads.md) and the capacity floors of
VariantAutoscalings both act at wall-clock times of a place ("08:00 Europe/Berlin on weekdays").
Parsing the expression and the zone belongs with the other validated settings, so a bad one is
refused with a one-line error before anything runs; matching takes the time as an argument (Unix
seconds) and reads no clock, so the controller and the simulator ask the same question of the same
code.

What it accepts: the standard five fields (minute, hour, day of month, month, day of week; lists,
ranges, steps, names such as `mon` and `jan`; day of month and day of week combine with OR when
both are restricted, as Vixie cron and robfig/cron do) and the descriptors `@yearly`,
`@annually`, `@monthly`, `@weekly`, `@daily`, `@midnight`, `@hourly`. The expression is checked
and matched by the maintained `croniter` library; seconds or year fields, `@reboot`, `@every`
and Jenkins' `H` are refused. The zone is an IANA name (`zoneinfo`, backed by the `tzdata`
package where the system has no zone database); '' means `Etc/UTC`.

When a schedule fires (`Schedule.fires(now=...)`): in the minute whose local wall-clock time, in
the schedule's zone, matches the expression: the proposal's "the last activation is within the
current minute". Daylight-saving transitions follow from reading the wall clock:

- spring forward: a wall time that does not exist that day (02:30 on the last Sunday of March in
  Europe/Berlin) is never reached, so a schedule at that time does not fire that day (as a
  Kubernetes CronJob does not run then);
- fall back: a wall time that occurs twice (02:30 on the last Sunday of October in Europe/Berlin)
  matches both times, an hour apart. For a replica target that is harmless: the second match asks
  for the count the first one set.

What fails: `parse_schedule` returns a `ScheduleError` (a one-line message naming the expression
or the zone) for a malformed expression or an unknown zone; it never raises. `Schedule.fires`
raises ValueError for a `now` that is not a finite number (a caller's error).
"""

from __future__ import annotations

import datetime as _dt
import math
import zoneinfo
from dataclasses import dataclass
from typing import Final

from croniter import croniter

DEFAULT_TIME_ZONE: Final = 'Etc/UTC'
DESCRIPTORS: Final = frozenset(
    {'@yearly', '@annually', '@monthly', '@weekly', '@daily', '@midnight', '@hourly'}
)
_MAX_SHOWN: Final = 80
_MAX_GAP_MINUTES: Final = 24 * 60
"""Longest daylight-saving gap looked through (real ones are 30 to 60 minutes; a day at most)."""


@dataclass(frozen=True, slots=True)
class ScheduleError:
    """Why a schedule or its zone was refused (one line)."""

    message: str


@dataclass(frozen=True, slots=True)
class Schedule:
    """A valid cron expression in a valid zone (build it with `parse_schedule`)."""

    expression: str
    time_zone: str

    def local_minute(self, *, now: float) -> _dt.datetime:
        """The local wall-clock time of `now` in the zone, cut to the minute, without zone."""
        if not math.isfinite(now):
            raise ValueError(f'now must be a finite number of seconds, got {now!r}')
        zone = zoneinfo.ZoneInfo(self.time_zone)
        local = _dt.datetime.fromtimestamp(math.floor(now), tz=_dt.UTC).astimezone(zone)
        return local.replace(second=0, microsecond=0, tzinfo=None)

    def fires(self, *, now: float) -> bool:
        """Whether the schedule fires in the minute of `now` (see the module docstring)."""
        return bool(croniter.match(self.expression, self.local_minute(now=now)))

    def last_start(self, *, now: float) -> float:
        """Unix seconds of the latest activation at or before the minute of `now`.

        For windows that open at each activation (capacity floors): the activation is a local
        wall time; one that does not exist (skipped by spring forward) opens when the clock
        jumps past it (02:30 Europe/Berlin opens at 03:00 CEST that day), so a window is never
        skipped; one that occurs twice (fall back) opens at its first occurrence.
        """
        zone = zoneinfo.ZoneInfo(self.time_zone)
        after = self.local_minute(now=now) + _dt.timedelta(minutes=1)
        wall = croniter(self.expression, after).get_prev(_dt.datetime)
        for _ in range(_MAX_GAP_MINUTES):
            moment = wall.replace(tzinfo=zone, fold=0)
            if moment.astimezone(_dt.UTC).astimezone(zone).replace(tzinfo=None) == wall:
                return moment.timestamp()
            wall += _dt.timedelta(minutes=1)  # inside a gap: on to the first wall time that is
        return wall.replace(tzinfo=zone, fold=0).timestamp()


def _shown(text: str) -> str:
    return repr(text if len(text) <= _MAX_SHOWN else text[: _MAX_SHOWN - 3] + '...')


def parse_time_zone(text: str) -> str | ScheduleError:
    """The IANA zone name ('' → Etc/UTC), or why it is refused."""
    name = text or DEFAULT_TIME_ZONE
    try:
        zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        return ScheduleError(f'time zone {_shown(name)} is not an IANA time zone name')
    return name


def parse_schedule(*, expression: str, time_zone: str = '') -> Schedule | ScheduleError:
    """A `Schedule`, or why the expression or the zone is refused (never raises)."""
    text = ' '.join(expression.split())
    if not text:
        return ScheduleError('schedule is empty')
    if text.startswith('@'):
        if text.lower() not in DESCRIPTORS:
            allowed = ', '.join(sorted(DESCRIPTORS))
            return ScheduleError(f'schedule {_shown(text)}: unknown descriptor ({allowed})')
        text = text.lower()
    else:
        fields = text.split(' ')
        if len(fields) != 5:
            return ScheduleError(
                f'schedule {_shown(text)}: expected 5 fields (minute hour day-of-month month '
                f'day-of-week), got {len(fields)}'
            )
        if any('H' in field.upper().replace('THU', '') for field in fields):
            return ScheduleError(f'schedule {_shown(text)}: hashed fields (H) are not cron')
    try:
        valid = croniter.is_valid(text)
    except Exception:  # the library's own failures on odd text: a refusal, never a crash
        valid = False
    if not valid:
        return ScheduleError(f'schedule {_shown(text)} is not a valid cron expression')
    zone = parse_time_zone(time_zone)
    if isinstance(zone, ScheduleError):
        return zone
    return Schedule(expression=text, time_zone=zone)
