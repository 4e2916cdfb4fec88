"""Tests of `collect.in_process`: an object in a child process, called from the loop."""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import signal
import time

import pytest

from llmscaler.collect.in_process import Ended, InProcess
from tests.support.in_process_objects import Tally, spin
from tests.support.loop_gaps import gaps as loop_gaps
from tests.support.processes import alive


def tally(first: int = 0) -> InProcess[Tally]:
    return InProcess(factory=functools.partial(Tally, first=first))


async def test_calls_run_in_one_other_process_which_keeps_the_object_between_them() -> None:
    held = tally(first=7)
    try:
        pid = await held.call(Tally.pid)
        assert await held.call(Tally.add, 1) == [7, 1]
        assert await held.call(Tally.add, 2) == [7, 1, 2]
        assert await held.call(Tally.pid) == pid != os.getpid()
    finally:
        held.close()


async def test_calls_made_together_run_in_the_order_they_were_made() -> None:
    held = tally()
    try:
        answers = await asyncio.gather(*(held.call(Tally.add, n) for n in range(1, 50)))
    finally:
        held.close()
    assert answers[-1] == list(range(50))
    assert [answer[-1] for answer in answers] == list(range(1, 50))


async def test_what_the_call_raises_is_raised_and_the_child_goes_on() -> None:
    held = tally()
    try:
        pid = await held.call(Tally.pid)
        with pytest.raises(ValueError, match='no such thing'):
            await held.call(Tally.fail, message='no such thing')
        with pytest.raises(RuntimeError, match=r'Tally\.lock: returned what does not pickle'):
            await held.call(Tally.lock)
        with pytest.raises(RuntimeError, match=r'does not unpickle.*cannot be rebuilt'):
            await held.call(Tally.dud)
        assert await held.call(Tally.add, 3) == [0, 3]
        assert await held.call(Tally.pid) == pid
    finally:
        held.close()


async def test_a_child_killed_mid_call_ends_its_calls_and_the_next_starts_afresh(
    caplog: pytest.LogCaptureFixture,
) -> None:
    held = tally(first=5)
    try:
        assert await held.call(Tally.add, 1) == [5, 1]
        pid = await held.call(Tally.pid)
        napping = asyncio.create_task(held.call(Tally.nap, 30.0))
        waiting = asyncio.create_task(held.call(Tally.add, 2))
        await asyncio.sleep(0.2)
        os.kill(pid, signal.SIGKILL)
        for call in (napping, waiting):
            with pytest.raises(Ended, match=f'process {pid}'):
                await asyncio.wait_for(call, timeout=10)
        with caplog.at_level(logging.WARNING, logger='llmscaler.collect.in_process'):
            # A new child, a new object: what the old one held is gone.
            assert await held.call(Tally.add, 3) == [5, 3]
        assert await held.call(Tally.pid) != pid
        assert f'process {pid} killed by signal 9' in caplog.text
        assert 'a new one starts' in caplog.text
    finally:
        held.close()


async def test_close_ends_the_child_at_once_even_mid_call() -> None:
    held = tally()
    pid = await held.call(Tally.pid)
    napping = asyncio.create_task(held.call(Tally.nap, 30.0))
    await asyncio.sleep(0.1)
    started = time.perf_counter()
    held.close()
    assert time.perf_counter() - started < 5
    assert not alive(pid)
    with pytest.raises(Ended):
        await asyncio.wait_for(napping, timeout=5)


async def test_the_loop_runs_on_while_the_child_works() -> None:
    held = tally()
    await held.call(Tally.pid)  # started
    try:
        async with loop_gaps(every=0.002) as gaps:
            assert await held.call(spin, seconds=1.0) == 1
            await asyncio.sleep(0.01)  # the probe's turn: a gap is counted when it ends
    finally:
        held.close()
    # A call that ran on the loop, or held it while it waited, would leave a gap of a second.
    assert len(gaps) > 100
    assert sorted(gaps)[len(gaps) * 99 // 100] < 0.05, max(gaps)
