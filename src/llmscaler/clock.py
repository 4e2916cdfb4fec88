"""The clock every adapter loop reads: real in production, hand-driven in tests.

Why: leases expire, backoffs grow and cycles repeat on time, and a test that waits for a 60 s lease
to lapse must not take 60 s. Every loop of the controller runtime (informers, work queue, leader
election, event dedup, the cycles) takes a `Clock` and never calls `time` or `asyncio.sleep`
itself, so a test hands it a `ManualClock` and moves time forward with `advance()`.

Two readings, because they answer different questions:

- `monotonic()`: seconds on a clock that never jumps, for intervals, deadlines and lease expiry
  (judged on the locally observed time, as client-go does);
- `wall()`: Unix seconds, for timestamps written to the API server (`renewTime`,
  `lastTransitionTime`) and for judging the age of metric samples, which carry wall times.

What fails: nothing here raises for ordinary use. `ManualClock.advance` refuses a negative or
non-finite step (ValueError), since time must not run backwards. `rfc3339` renders any finite
wall time; it raises ValueError for NaN or ±Inf.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import heapq
import itertools
import math
import time
from typing import Protocol


class Clock(Protocol):
    """What the runtime needs of time."""

    def monotonic(self) -> float: ...

    def wall(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class LoopClock:
    """The real clock: the event loop's monotonic time, the system's wall time."""

    def monotonic(self) -> float:
        return asyncio.get_running_loop().time()

    def wall(self) -> float:
        return time.time()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


class ManualClock:
    """A clock that moves only when told to; sleepers wake in deadline order on `advance()`.

    `wall()` is `wall_start + monotonic()`. `sleep(0)` (or a negative delay) yields once and
    returns, as `asyncio.sleep(0)` does.
    """

    def __init__(self, *, start: float = 0.0, wall_start: float = 1_767_225_600.0) -> None:
        self._now = start
        self._wall_offset = wall_start - start
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._order = itertools.count()

    def monotonic(self) -> float:
        return self._now

    def wall(self) -> float:
        return self._now + self._wall_offset

    @property
    def sleepers(self) -> int:
        """How many sleeps are pending (cancelled ones excluded)."""
        return sum(1 for _, _, future in self._sleepers if not future.done())

    async def sleep(self, seconds: float) -> None:
        if not seconds > 0:
            await asyncio.sleep(0)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._now + seconds, next(self._order), future))
        await future

    async def advance(self, seconds: float) -> None:
        """Move time forward by `seconds`, waking each sleeper at its own deadline in turn."""
        if not math.isfinite(seconds) or seconds < 0:
            raise ValueError(f'cannot advance a clock by {seconds!r} seconds')
        until = self._now + seconds
        await _settle()
        while self._sleepers and self._sleepers[0][0] <= until:
            deadline, _, future = heapq.heappop(self._sleepers)
            self._now = max(self._now, deadline)
            if not future.done():
                future.set_result(None)
                await _settle()
        self._now = until
        await _settle()

    def jump(self, seconds: float) -> None:
        """Move time forward by `seconds` and wake nobody: what a process stopped (SIGSTOP, a
        paused VM) finds on resuming, before any of its timers has fired. Sleepers due by now
        wake on the next `advance()`."""
        if not math.isfinite(seconds) or seconds < 0:
            raise ValueError(f'cannot move a clock by {seconds!r} seconds')
        self._now += seconds


async def _settle() -> None:
    # Let woken tasks run until they block again (on I/O or on the next sleep).
    for _ in range(20):
        await asyncio.sleep(0)


def rfc3339(*, wall: float, micro: bool = False) -> str:
    """A wall time as the API server writes it: `2026-01-01T00:00:00Z`, or with microseconds
    (`...00.000000Z`, MicroTime, used by Leases and events.k8s.io/v1)."""
    if not math.isfinite(wall):
        raise ValueError(f'not a time: {wall!r}')
    if micro:
        return _dt.datetime.fromtimestamp(wall, tz=_dt.UTC).strftime('%Y-%m-%dT%H:%M:%S.%fZ')
    # Whole seconds are truncated, as the API server does: rounding would stamp 0.9999998 s as
    # the next second, a time that has not come yet, and ages computed from it come out short.
    moment = _dt.datetime.fromtimestamp(math.floor(wall), tz=_dt.UTC)
    return moment.strftime('%Y-%m-%dT%H:%M:%SZ')


def parse_rfc3339(text: str) -> float | None:
    """Unix seconds of an RFC 3339 time (with or without fraction), or None when it is not one."""
    try:
        moment = _dt.datetime.fromisoformat(text.replace('Z', '+00:00'))
    except (ValueError, AttributeError):
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=_dt.UTC)
    return moment.timestamp()
