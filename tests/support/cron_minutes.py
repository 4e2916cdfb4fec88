"""Cron expressions that fire within the next few minutes, for end-to-end tests of schedules.

Why: a test that waits for a schedule cannot wait for a fixed hour; it writes expressions for the
minutes now passing in a given time zone, so that the controller, started a few seconds later,
still sees one of them fire.
"""

from __future__ import annotations

import datetime as dt
import zoneinfo


def coming_minutes(zone: str, *, count: int = 5) -> list[str]:
    """Cron expressions that fire in `zone` during the current minute and the `count - 1` after
    it, one per local hour (the span may cross an hour): a slow controller start still lands in
    one of them."""
    now = dt.datetime.now(tz=dt.UTC).astimezone(zoneinfo.ZoneInfo(zone))
    by_hour: dict[tuple[int, int, int], list[int]] = {}
    for step in range(count):
        local = now + dt.timedelta(minutes=step)
        by_hour.setdefault((local.month, local.day, local.hour), []).append(local.minute)
    return [
        f'{",".join(map(str, minutes))} {hour} {day} {month} *'
        for (month, day, hour), minutes in sorted(by_hour.items())
    ]
