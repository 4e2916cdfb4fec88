"""One worker thread per metric source, for the work that must not run on the event loop.

Why: the event loop that fetches the metrics also renews the leader's Lease, so parsing pages,
decoding answers and computing readings run in threads. Threads still share the interpreter
lock, and a thread that wants it waits for the holder to let go (every few milliseconds, the
switch interval), but then any waiting thread may get it: with six busy threads of the default
executor the loop could wait six turns. A source's jobs therefore run in a thread of its own, one
at a time, so that each source adds at most one thread competing with the loop; they gain nothing
from running side by side, as the lock lets one run at a time anyway.

What fails: nothing here raises but what the job raises, which `run` raises in turn. The thread is
made at the first job and ended by `close` (jobs not started are dropped; a running one ends on
its own).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

_T = TypeVar('_T')


class Worker:
    """A single thread running a source's jobs in turn (see the module docstring)."""

    def __init__(self, *, name: str) -> None:
        self._name = name
        self._executor: ThreadPoolExecutor | None = None

    async def run(self, work: Callable[[], _T]) -> _T:
        """`work()` in the worker thread."""
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=self._name)
        return await asyncio.get_running_loop().run_in_executor(self._executor, work)

    def close(self) -> None:
        """End the thread once its running job is done; jobs not started are dropped."""
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None
