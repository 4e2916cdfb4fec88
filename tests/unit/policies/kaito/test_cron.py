"""Cron schedules in IANA zones (config.cron) and Kaito's cron scaler (policies.kaito.cron).

Daylight-saving cases use Europe/Berlin's transitions of 2026: 29 March 01:00 UTC (02:00 CET
becomes 03:00 CEST) and 25 October 01:00 UTC (03:00 CEST becomes 02:00 CET).
"""

from __future__ import annotations

import datetime as dt
import zoneinfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmscaler.config.cron import Schedule, ScheduleError, parse_schedule
from llmscaler.policies.kaito.cron import CronRule, calculate_desired_replicas_cron

BERLIN = 'Europe/Berlin'


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0) -> float:
    return dt.datetime(year, month, day, hour, minute, second, tzinfo=dt.UTC).timestamp()


def schedule(expression: str, zone: str = '') -> Schedule:
    parsed = parse_schedule(expression=expression, time_zone=zone)
    assert isinstance(parsed, Schedule), parsed
    return parsed


def firing_minutes(sched: Schedule, *, start: float, hours: int) -> list[str]:
    """The UTC minutes (HH:MM) in `hours` hours from `start` at which `sched` fires."""
    out = []
    for minute in range(hours * 60):
        now = start + minute * 60 + 30  # mid-minute: the scaler runs at any second
        if sched.fires(now=now):
            out.append(dt.datetime.fromtimestamp(now, tz=dt.UTC).strftime('%H:%M'))
    return out


def test_weekday_morning_in_berlin_winter_and_summer() -> None:
    sched = schedule('0 8 * * 1-5', BERLIN)
    # Wednesday 14 January 2026: CET, UTC+1.
    assert firing_minutes(sched, start=utc(2026, 1, 14), hours=24) == ['07:00']
    # Wednesday 15 July 2026: CEST, UTC+2.
    assert firing_minutes(sched, start=utc(2026, 7, 15), hours=24) == ['06:00']
    # Saturday 17 January 2026: no weekday.
    assert firing_minutes(sched, start=utc(2026, 1, 17), hours=24) == []


def test_fires_for_the_whole_minute_only() -> None:
    sched = schedule('0 8 * * *')
    assert sched.time_zone == 'Etc/UTC'
    assert sched.fires(now=utc(2026, 1, 14, 8, 0, 0))
    assert sched.fires(now=utc(2026, 1, 14, 8, 0, 59))
    assert not sched.fires(now=utc(2026, 1, 14, 7, 59, 59))
    assert not sched.fires(now=utc(2026, 1, 14, 8, 1, 0))


def test_spring_forward_skips_the_missing_wall_time() -> None:
    # 02:30 does not exist in Berlin on 29 March 2026: the schedule does not fire that day ...
    sched = schedule('30 2 * * *', BERLIN)
    assert firing_minutes(sched, start=utc(2026, 3, 28, 12), hours=24) == []
    # ... it fires at 02:30 CEST the next day (00:30 UTC), and 03:00 fires right at the change.
    assert firing_minutes(sched, start=utc(2026, 3, 29, 12), hours=24) == ['00:30']
    assert firing_minutes(schedule('0 3 * * *', BERLIN), start=utc(2026, 3, 29), hours=6) == [
        '01:00'
    ]


def test_fall_back_fires_at_both_occurrences_of_the_wall_time() -> None:
    sched = schedule('30 2 * * *', BERLIN)
    # 02:30 CEST (00:30 UTC) and 02:30 CET (01:30 UTC).
    assert firing_minutes(sched, start=utc(2026, 10, 24, 12), hours=24) == ['00:30', '01:30']
    # A time outside the repeated hour fires once.
    assert firing_minutes(schedule('0 8 * * *', BERLIN), start=utc(2026, 10, 25), hours=24) == [
        '07:00'
    ]


def test_descriptors_and_names() -> None:
    assert firing_minutes(schedule('@daily', BERLIN), start=utc(2026, 1, 14), hours=24) == ['23:00']
    assert schedule('0 8 * * mon-fri').fires(now=utc(2026, 1, 14, 8))
    assert schedule('@HOURLY').expression == '@hourly'


@pytest.mark.parametrize(
    ('expression', 'zone', 'message'),
    [
        ('', '', 'empty'),
        ('0 8 * *', '', 'expected 5 fields'),
        ('0 0 8 * * *', '', 'expected 5 fields'),
        ('61 * * * *', '', 'not a valid cron expression'),
        ('0 8 * * 1-9', '', 'not a valid cron expression'),
        ('H 8 * * *', '', 'hashed fields'),
        ('@reboot', '', 'unknown descriptor'),
        ('@every 5m', '', 'unknown descriptor'),
        ('0 8 * * *', 'Mars/Olympus', 'not an IANA time zone'),
        ('0 8 * * *', '../../etc/passwd', 'not an IANA time zone'),
        ('0 8 * * *', 'CET ', 'not an IANA time zone'),
    ],
)
def test_bad_schedules_are_refused_with_one_line(expression: str, zone: str, message: str) -> None:
    refused = parse_schedule(expression=expression, time_zone=zone)
    assert isinstance(refused, ScheduleError)
    assert message in refused.message
    assert '\n' not in refused.message


def test_a_non_finite_now_is_a_callers_error() -> None:
    with pytest.raises(ValueError, match='finite'):
        schedule('* * * * *').fires(now=float('nan'))


ZONES = ('Etc/UTC', BERLIN, 'America/New_York', 'Asia/Kolkata', 'Australia/Lord_Howe')


@given(
    t=st.integers(min_value=int(utc(2020, 1, 1)), max_value=int(utc(2035, 1, 1))),
    zone=st.sampled_from(ZONES),
)
def test_the_local_minute_of_now_always_fires(t: int, zone: str) -> None:
    local = dt.datetime.fromtimestamp(t, tz=zoneinfo.ZoneInfo(zone))
    expression = f'{local.minute} {local.hour} {local.day} {local.month} *'
    sched = schedule(expression, zone)
    assert sched.fires(now=float(t))
    assert not sched.fires(now=float(t - local.second - 1 - 86400 * 366))


def policy(name: str, expression: str, replicas: int, zone: str = '') -> CronRule:
    return CronRule(name=name, schedule=schedule(expression, zone), target_replicas=replicas)


def test_seed_example_new_york() -> None:
    policies = [
        policy('scale-up', '0 8 * * *', 5, 'America/New_York'),
        policy('scale-down', '1 0 * * *', 1, 'America/New_York'),
    ]

    def desired(now: float, current: int = 3) -> tuple[int, tuple[str, ...]]:
        result = calculate_desired_replicas_cron(
            current_replicas=current, policies=policies, min_replicas=1, max_replicas=10, now=now
        )
        return result.desired, result.matching

    assert desired(utc(2026, 1, 14, 13, 0, 20)) == (5, ('scale-up',))  # 08:00 EST
    assert desired(utc(2026, 7, 15, 12, 0, 20)) == (5, ('scale-up',))  # 08:00 EDT
    assert desired(utc(2026, 1, 15, 5, 1)) == (1, ('scale-down',))  # 00:01 EST
    assert desired(utc(2026, 1, 14, 14)) == (3, ())  # between: unchanged, whatever it is
    assert desired(utc(2026, 1, 14, 14), current=7) == (7, ())


def test_the_highest_matching_policy_wins_then_clamped() -> None:
    policies = [
        policy('a', '0 8 * * *', 4),
        policy('b', '0 8 * * 3', 9),
        policy('c', '0 8 * * *', 0),
    ]
    wednesday = utc(2026, 1, 14, 8)
    result = calculate_desired_replicas_cron(
        current_replicas=2, policies=policies, min_replicas=1, max_replicas=6, now=wednesday
    )
    assert (result.desired, result.matching) == (6, ('a', 'b', 'c'))
    only_zero = calculate_desired_replicas_cron(
        current_replicas=2, policies=[policies[2]], min_replicas=1, max_replicas=6, now=wednesday
    )
    assert only_zero.desired == 1
