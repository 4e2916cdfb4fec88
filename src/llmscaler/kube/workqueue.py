"""A deduplicating, rate-limited work queue of keys, copying client-go's workqueue.

Why: informer events, periodic requeues and retries after failures all ask for "look at this
object again". Handing those requests to workers through a queue of keys (`namespace/name`)
collapses bursts (ten events for one object mean one reconcile), guarantees that one key is never
processed by two workers at once, and gives failing keys a growing delay instead of a hot loop.

Semantics (as client-go's `Type`, `delayingType` and `ItemExponentialFailureRateLimiter`):

- `add(key)`: a key already queued is not queued twice. A key that is in flight (handed out by
  `get()` and not yet `done()`) is marked and queued again when `done(key)` is called, so it is
  processed once more but never concurrently.
- `add_after(key, delay)`: the key joins the queue when `delay` seconds have passed on the
  injected clock. A key waiting twice keeps the earlier due time. A NaN, negative or zero delay
  means now (same as `add`); +Inf is capped at `max_delay`, so no key is parked forever.
- `add_rate_limited(key)`: `add_after` with `base_delay * 2**failures` capped at `max_delay`,
  then the key's failure count grows by one. `forget(key)` resets the count (call it after a
  success); `retries(key)` reads it.
- Order: keys are handed out in the order they became due. `add` calls are first in, first out;
  delayed keys join when their due time is reached, before any key added after that moment, and
  keys due at the same instant join in key order, so the order never depends on dict or set
  iteration.
- `get()` waits (on the clock for delayed keys) for a due key and marks it in flight. After
  `shutdown()` it returns None at once, even if keys are still queued: a controller shutting down
  (or losing its lease) must not start new work. `add*` after shutdown are ignored.
- `len(queue)`: the distinct keys that are queued (including keys re-added while in flight) or
  waiting for their delay.

What fails: nothing raises in use. The constructor raises ValueError for a delay setting that is
negative or not finite.
"""

from __future__ import annotations

import asyncio
import heapq
import math
from collections import deque

from llmscaler.clock import Clock


class WorkQueue:
    """Keys to process: deduplicated, never handed out twice at once, with per-key backoff."""

    def __init__(self, *, clock: Clock, base_delay: float = 0.1, max_delay: float = 30.0) -> None:
        for label, value in (('base_delay', base_delay), ('max_delay', max_delay)):
            if not math.isfinite(value) or value < 0:
                raise ValueError(f'{label} must be a finite number >= 0, not {value!r}')
        self._clock = clock
        self._base_delay = base_delay
        self._max_delay = max_delay
        self._queue: deque[str] = deque()
        # Keys that need processing: in `_queue`, or in flight and to be re-queued on done().
        self._dirty: set[str] = set()
        self._processing: set[str] = set()
        self._waiting: dict[str, float] = {}
        # (due, key); entries whose due time no longer matches `_waiting` are stale.
        self._timers: list[tuple[float, str]] = []
        self._failures: dict[str, int] = {}
        self._changed = asyncio.Event()
        self._shutting_down = False

    @property
    def shutting_down(self) -> bool:
        return self._shutting_down

    def __len__(self) -> int:
        return len(self._dirty | self._waiting.keys())

    def add(self, key: str) -> None:
        if self._shutting_down:
            return
        self._promote()
        self._enqueue(key)

    def add_after(self, key: str, delay: float) -> None:
        if self._shutting_down:
            return
        delay = min(delay, self._max_delay) if delay > 0 else 0.0  # NaN > 0 is False
        if delay == 0:
            self.add(key)
            return
        self._promote()
        due = self._clock.monotonic() + delay
        current = self._waiting.get(key)
        if current is not None and current <= due:
            return
        self._waiting[key] = due
        heapq.heappush(self._timers, (due, key))
        self._changed.set()  # a waiting get() may have to wake earlier now

    def add_rate_limited(self, key: str) -> None:
        if self._shutting_down:
            return
        failures = self._failures.get(key, 0)
        self._failures[key] = failures + 1
        if failures >= 64:
            delay = self._max_delay
        else:
            delay = min(self._max_delay, self._base_delay * 2.0**failures)
        self.add_after(key, delay)

    def forget(self, key: str) -> None:
        self._failures.pop(key, None)

    def retries(self, key: str) -> int:
        return self._failures.get(key, 0)

    async def get(self) -> str | None:
        """The next due key, now in flight until `done(key)`; None once shut down."""
        while True:
            if self._shutting_down:
                return None
            self._promote()
            if self._queue:
                key = self._queue.popleft()
                self._dirty.discard(key)
                self._processing.add(key)
                return key
            self._changed.clear()
            waits: list[asyncio.Future[object]] = [asyncio.ensure_future(self._changed.wait())]
            if self._timers:
                delay = self._timers[0][0] - self._clock.monotonic()
                waits.append(asyncio.ensure_future(self._clock.sleep(delay)))
            try:
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for wait in waits:
                    wait.cancel()

    def done(self, key: str) -> None:
        """Finish processing `key`; if it was added meanwhile, it is queued again now."""
        if key not in self._processing:
            return
        self._processing.discard(key)
        if key in self._dirty and not self._shutting_down:
            self._queue.append(key)
            self._changed.set()

    def shutdown(self) -> None:
        """Stop: every get() returns None from now on; delayed keys are dropped."""
        self._shutting_down = True
        self._waiting.clear()
        self._timers.clear()
        self._changed.set()

    def _enqueue(self, key: str) -> None:
        if key in self._dirty:
            return
        self._dirty.add(key)
        if key in self._processing:
            return
        self._queue.append(key)
        self._changed.set()

    def _promote(self) -> None:
        now = self._clock.monotonic()
        while self._timers and self._timers[0][0] <= now:
            due, key = heapq.heappop(self._timers)
            if self._waiting.get(key) == due:
                del self._waiting[key]
                self._enqueue(key)
