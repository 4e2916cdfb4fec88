"""The `floor:...` simulator policy: the core's default configuration plus capacity floors."""

from __future__ import annotations

import pytest

from llmscaler.sim.policies.floors import is_floor, parse_floor
from llmscaler.sim.scenario import setup
from llmscaler.sim.scenario.document import ScenarioError


def test_a_floor_policy_carries_its_floors() -> None:
    policy = parse_floor(
        text='floor:0 6 * * *=h100*4/14h;30 17 * * 1-5=l40s*2/90m@Europe/Berlin',
        variants=['h100', 'l40s'],
    )
    floors = policy.config.default.capacity_floors
    assert [(f.reference, f.replicas, f.duration, f.schedule.time_zone) for f in floors] == [
        ('h100', 4, 14 * 3600.0, 'Etc/UTC'),
        ('l40s', 2, 5400.0, 'Europe/Berlin'),
    ]
    assert policy.name.startswith('floor:')


@pytest.mark.parametrize(
    ('text', 'message'),
    [
        ('floor:', 'expected floor:SCHEDULE'),
        ('floor:0 6 * * *=h100*4', 'is not SCHEDULE=VARIANT'),
        ('floor:0 6 * * *=tpu*4/1h', "'tpu' is no variant"),
        ('floor:0 26 * * *=h100*4/1h', 'not a valid cron expression'),
        ('floor:0 6 * * *=h100*4/0s', 'must be positive'),
        ('floor:0 6 * * *=h100*4/1h@Nowhere', 'not an IANA time zone'),
    ],
)
def test_bad_floors_are_refused_with_one_line(text: str, message: str) -> None:
    assert is_floor(text)
    with pytest.raises(ValueError, match=message):
        parse_floor(text=text, variants=['h100', 'l40s'])
    with pytest.raises(ScenarioError, match=message):
        setup.check_policy_name(name=text, variants=['h100', 'l40s'], where='policies')
