"""`llmscaler.clock`: API-server stamps and their parsing, and the hand-driven clock's jump."""

from __future__ import annotations

import asyncio
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmscaler.clock import ManualClock, parse_rfc3339, rfc3339

EPOCH_2026 = 1767225600.0


def test_whole_second_stamps_are_truncated_never_rounded_into_the_future() -> None:
    assert rfc3339(wall=EPOCH_2026 + 0.9999998) == '2026-01-01T00:00:00Z'
    assert rfc3339(wall=EPOCH_2026 + 1.0) == '2026-01-01T00:00:01Z'


def test_micro_stamps_keep_the_fraction() -> None:
    assert rfc3339(wall=EPOCH_2026 + 0.25, micro=True) == '2026-01-01T00:00:00.250000Z'


@given(st.floats(min_value=0.0, max_value=4e9, allow_nan=False))
def test_a_stamp_is_never_later_than_the_time_it_stamps(wall: float) -> None:
    parsed = parse_rfc3339(rfc3339(wall=wall))
    assert parsed is not None
    assert parsed <= wall < parsed + 1.0


@pytest.mark.parametrize('wall', [math.nan, math.inf, -math.inf])
def test_a_non_finite_time_is_refused(wall: float) -> None:
    with pytest.raises(ValueError, match='not a time'):
        rfc3339(wall=wall)


async def test_a_jump_moves_time_and_wakes_nobody_until_the_next_advance() -> None:
    clock = ManualClock()
    woke: list[float] = []

    async def sleeper() -> None:
        await clock.sleep(2.0)
        woke.append(clock.monotonic())

    task = asyncio.ensure_future(sleeper())
    await clock.advance(1.0)
    clock.jump(3.0)
    await asyncio.sleep(0)
    assert (clock.monotonic(), woke) == (4.0, [])
    await clock.advance(0)
    await task
    assert woke == [4.0]  # the sleeper runs late, as a stopped process's timers do


@pytest.mark.parametrize('seconds', [-1.0, math.nan, math.inf])
def test_a_jump_refuses_a_bad_length(seconds: float) -> None:
    with pytest.raises(ValueError, match='cannot move a clock'):
        ManualClock().jump(seconds)
