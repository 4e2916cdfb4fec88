"""`bench/policy.py`'s goal tables: a cost ratio is shown on the side of the goal it stands."""

from __future__ import annotations

import pytest

from tests.support.bench_scripts import load

policy = load('policy')


@pytest.mark.parametrize(
    ('cost', 'shown'),
    [
        (1.13, '1.13×'),
        (1.0949, '1.09×'),
        (1.0997, '1.10×'),  # at most the goal, and shown at it
        (1.1, '1.10×'),
        (1.1004, '1.1004×'),  # over the goal: '1.10×' would hide it
        (1.105, '1.105×'),
    ],
)
def test_a_ratio_next_to_the_goal_shows_which_side_it_is(cost: float, shown: str) -> None:
    assert policy.GOAL_COST == 1.10
    assert policy._goal_ratio(cost) == shown
    assert (float(shown.rstrip('×')) > policy.GOAL_COST) == (cost > policy.GOAL_COST)
