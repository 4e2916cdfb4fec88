"""The work queue: dedup, in-flight exclusion, per-key backoff, delayed keys, order, shutdown.

Worked numbers: with base_delay 0.125 and max_delay 1.0, successive `add_rate_limited` calls wait
0.125, 0.25, 0.5, 1.0, then 1.0 again (2.0, 4.0 ... capped) seconds on the ManualClock. Delays are
binary fractions so sums of clock steps are exact.
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmscaler.clock import ManualClock
from llmscaler.kube.workqueue import WorkQueue


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


async def ready(queue: WorkQueue) -> list[str]:
    """Every key get() hands out without waiting, in order (each left in flight)."""
    keys: list[str] = []
    while True:
        task = asyncio.ensure_future(queue.get())
        await settle()
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            return keys
        key = task.result()
        assert key is not None
        keys.append(key)


async def test_dedup_and_fifo() -> None:
    queue = WorkQueue(clock=ManualClock())
    for key in ('b', 'a', 'b', 'c', 'a'):
        queue.add(key)
    assert len(queue) == 3
    assert await ready(queue) == ['b', 'a', 'c']
    assert len(queue) == 0


async def test_in_flight_key_is_requeued_after_done_not_before() -> None:
    queue = WorkQueue(clock=ManualClock())
    queue.add('x')
    assert await queue.get() == 'x'
    queue.add('x')
    queue.add('x')
    assert len(queue) == 1  # queued for after done()
    assert await ready(queue) == []  # never handed out while in flight
    queue.done('x')
    assert await ready(queue) == ['x']
    queue.done('x')
    queue.done('x')  # a second done() is harmless
    assert len(queue) == 0
    assert await ready(queue) == []


async def test_done_without_re_add_drops_the_key() -> None:
    queue = WorkQueue(clock=ManualClock())
    queue.add('x')
    assert await queue.get() == 'x'
    queue.done('x')
    queue.add('y')
    assert await ready(queue) == ['y']


async def test_get_waits_for_add() -> None:
    queue = WorkQueue(clock=ManualClock())
    task = asyncio.ensure_future(queue.get())
    await settle()
    assert not task.done()
    queue.add('k')
    await settle()
    assert task.result() == 'k'


async def test_rate_limited_backoff_grows_caps_and_forget_resets() -> None:
    clock = ManualClock()
    queue = WorkQueue(clock=clock, base_delay=0.125, max_delay=1.0)
    waits = []
    for _ in range(6):
        queue.add_rate_limited('k')
        start = clock.monotonic()
        task = asyncio.ensure_future(queue.get())
        while not task.done():
            await clock.advance(0.125)
        assert task.result() == 'k'
        waits.append(clock.monotonic() - start)
        queue.done('k')
    assert waits == [0.125, 0.25, 0.5, 1.0, 1.0, 1.0]
    assert queue.retries('k') == 6
    queue.forget('k')
    assert queue.retries('k') == 0
    queue.add_rate_limited('k')
    await clock.advance(0.0625)
    assert await ready(queue) == []
    await clock.advance(0.0625)
    assert await ready(queue) == ['k']


async def test_backoff_is_per_key() -> None:
    clock = ManualClock()
    queue = WorkQueue(clock=clock, base_delay=1.0, max_delay=100.0)
    for _ in range(3):
        queue.add_rate_limited('slow')
    queue.add_rate_limited('fast')
    assert (queue.retries('slow'), queue.retries('fast')) == (3, 1)
    await clock.advance(1.0)
    assert await ready(queue) == ['fast', 'slow']  # slow's first wait (1 s) is kept: earliest wins


async def test_huge_failure_counts_stay_capped() -> None:
    clock = ManualClock()
    queue = WorkQueue(clock=clock, base_delay=0.5, max_delay=2.0)
    for _ in range(2000):
        queue.add_rate_limited('k')
    assert queue.retries('k') == 2000
    await clock.advance(0.5)
    assert await ready(queue) == ['k']  # the first, earliest due time (0.5 s) was kept
    queue.done('k')
    queue.add_rate_limited('k')
    await clock.advance(1.5)
    assert await ready(queue) == []
    await clock.advance(0.5)
    assert await ready(queue) == ['k']


async def test_add_after_order_and_ties_by_key() -> None:
    clock = ManualClock()
    queue = WorkQueue(clock=clock)
    queue.add_after('late', 3.0)
    queue.add_after('z', 1.0)
    queue.add_after('a', 1.0)
    queue.add_after('mid', 2.0)
    assert len(queue) == 4
    await clock.advance(0.5)
    queue.add('now')
    assert await ready(queue) == ['now']
    await clock.advance(2.0)  # t=2.5: z and a (due 1.0, tie by key), then mid (due 2.0)
    queue.add('after')  # added after they became due: behind them
    assert await ready(queue) == ['a', 'z', 'mid', 'after']
    assert len(queue) == 1
    await clock.advance(0.5)
    assert await ready(queue) == ['late']


async def test_add_after_keeps_the_earlier_due_time_and_dedups_with_queue() -> None:
    clock = ManualClock()
    queue = WorkQueue(clock=clock)
    queue.add_after('k', 5.0)
    queue.add_after('k', 1.0)
    queue.add_after('k', 3.0)
    assert len(queue) == 1
    await clock.advance(1.0)
    assert await ready(queue) == ['k']
    await clock.advance(10.0)
    assert await ready(queue) == []  # the superseded 5 s and the later 3 s timers are gone
    queue.add('j')
    queue.add_after('j', 1.0)
    assert len(queue) == 1  # one distinct key, queued and waiting
    await clock.advance(1.0)
    assert await ready(queue) == ['j']  # promoted onto a key still queued: handed out once


async def test_get_sleeps_on_the_clock_until_a_delayed_key_is_due() -> None:
    clock = ManualClock()
    queue = WorkQueue(clock=clock)
    task = asyncio.ensure_future(queue.get())
    await settle()
    queue.add_after('k', 10.0)
    await clock.advance(9.9)
    assert not task.done()
    queue.add_after('j', 0.05)  # an earlier timer wakes the waiting get() sooner
    await clock.advance(0.05)
    assert task.done()
    assert task.result() == 'j'
    await clock.advance(0.05)
    assert await ready(queue) == ['k']


@pytest.mark.parametrize('delay', [math.nan, -1.0, 0.0, -math.inf])
async def test_nan_and_negative_delays_mean_now(delay: float) -> None:
    queue = WorkQueue(clock=ManualClock())
    queue.add('first')
    queue.add_after('k', delay)
    assert await ready(queue) == ['first', 'k']


async def test_infinite_delay_is_capped_at_max_delay() -> None:
    clock = ManualClock()
    queue = WorkQueue(clock=clock, max_delay=5.0)
    queue.add_after('k', math.inf)
    await clock.advance(4.9)
    assert await ready(queue) == []
    await clock.advance(0.1)
    assert await ready(queue) == ['k']


async def test_shutdown_wakes_getters_and_ignores_adds() -> None:
    clock = ManualClock()
    queue = WorkQueue(clock=clock)
    waiting = [asyncio.ensure_future(queue.get()) for _ in range(2)]
    queue.add_after('later', 1.0)
    await settle()
    queue.shutdown()
    await settle()
    assert [t.result() for t in waiting] == [None, None]
    assert queue.shutting_down
    queue.add('x')
    queue.add_after('y', 1.0)
    queue.add_rate_limited('z')
    await clock.advance(5.0)
    assert await queue.get() is None
    assert len(queue) == 0


async def test_shutdown_does_not_hand_out_queued_keys() -> None:
    queue = WorkQueue(clock=ManualClock())
    queue.add('a')
    assert await queue.get() == 'a'
    queue.add('a')
    queue.add('b')
    queue.shutdown()
    assert await queue.get() is None
    queue.done('a')  # finishing in-flight work after shutdown is fine and queues nothing
    assert await queue.get() is None


async def test_cancelled_get_leaves_no_sleepers() -> None:
    clock = ManualClock()
    queue = WorkQueue(clock=clock)
    queue.add_after('k', 1.0)
    task = asyncio.ensure_future(queue.get())
    await settle()
    assert clock.sleepers == 1
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    await settle()
    assert clock.sleepers == 0
    await clock.advance(1.0)
    assert await ready(queue) == ['k']  # the key was not lost with the cancelled get()


@pytest.mark.parametrize(
    ('base', 'cap'), [(-0.1, 1.0), (math.nan, 1.0), (0.1, math.inf), (0.1, -1.0)]
)
def test_bad_settings_are_refused(base: float, cap: float) -> None:
    with pytest.raises(ValueError, match='finite'):
        WorkQueue(clock=ManualClock(), base_delay=base, max_delay=cap)


# --- property: never concurrently, never lost -------------------------------------------------

KEYS = st.sampled_from(['a', 'b', 'c', 'd'])
OPS = st.one_of(
    st.tuples(st.just('add'), KEYS),
    st.tuples(st.just('add_after'), KEYS, st.sampled_from([-1.0, 0.0, 0.3, 1.0, 2.5, math.nan])),
    st.tuples(st.just('rate'), KEYS),
    st.tuples(st.just('forget'), KEYS),
    st.tuples(st.just('get')),
    st.tuples(st.just('done'), st.integers(min_value=0, max_value=3)),
    st.tuples(st.just('advance'), st.sampled_from([0.1, 0.5, 1.0, 3.0])),
)


@dataclass
class Model:
    queue: WorkQueue
    in_flight: set[str] = field(default_factory=set)
    # Keys added since they were last handed out: each must be handed out again.
    owed: set[str] = field(default_factory=set)
    getters: list[asyncio.Future[str | None]] = field(default_factory=list)

    def collect(self) -> None:
        for task in [t for t in self.getters if t.done()]:
            self.getters.remove(task)
            key = task.result()
            assert key is not None
            assert key not in self.in_flight, f'{key} handed out while in flight'
            self.in_flight.add(key)
            self.owed.discard(key)


async def run_ops(ops: list[tuple[object, ...]]) -> None:
    clock = ManualClock()
    model = Model(WorkQueue(clock=clock, base_delay=0.2, max_delay=2.0))
    q = model.queue
    for op in ops:
        name = op[0]
        if name in ('add', 'add_after', 'rate'):
            key = str(op[1])
            if name == 'add':
                q.add(key)
            elif name == 'add_after':
                q.add_after(key, float(str(op[2])))
            else:
                q.add_rate_limited(key)
            model.owed.add(key)
        elif name == 'forget':
            q.forget(str(op[1]))
        elif name == 'get' and len(model.getters) < 2:
            model.getters.append(asyncio.ensure_future(q.get()))
        elif name == 'done' and model.in_flight:
            key = sorted(model.in_flight)[int(str(op[1])) % len(model.in_flight)]
            model.in_flight.discard(key)
            q.done(key)
        elif name == 'advance':
            await clock.advance(float(str(op[1])))
        await settle()
        model.collect()
    # Drain: finish everything, let every delay pass, keep one worker taking a key per round.
    # With four distinct keys a correct queue drains in a few rounds; the bound stops a broken
    # one from looping forever.
    for _ in range(20):
        for key in sorted(model.in_flight):
            model.in_flight.discard(key)
            q.done(key)
        if not model.getters:
            model.getters.append(asyncio.ensure_future(q.get()))
        await clock.advance(3.0)
        model.collect()
        if not model.in_flight and not len(q):
            break
    assert model.owed == set(), f'never handed out: {sorted(model.owed)}'
    q.shutdown()
    await settle()
    assert all(t.done() and t.result() is None for t in model.getters)


@settings(max_examples=150, deadline=None)
@given(st.lists(OPS, max_size=40))
def test_property_never_concurrent_never_lost(ops: list[tuple[object, ...]]) -> None:
    asyncio.run(run_ops(ops))
