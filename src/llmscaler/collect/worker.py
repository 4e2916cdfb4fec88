"""One worker thread per metric source, for the work that must not run on the event loop.

Why: the event loop that fetches the metrics also renews the leader's Lease, so parsing pages,
decoding answers and computing readings run in threads. Threads still share the interpreter
lock, and a thread that wants it waits for the holder to let go (every few milliseconds, the
switch interval), but then any waiting thread may get it: with six busy threads of the default
executor the loop could wait six turns. A source's jobs therefore run in a thread of its own, one
at a time, so that each source adds at most one thread competing with the loop; they gain nothing
from running side by side, as the lock lets one run at a time anyway.

`InThread` keeps an object for such a thread, with the calling convention of
`collect.in_process.InProcess` (whose child process shares no lock with the loop at all, at the
price of a process), for sources whose pages are few and small.

What fails: nothing here raises but what the job raises, which `run` raises in turn. The thread is
made at the first job and ended by `close` (jobs not started are dropped; a running one ends on
its own).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Concatenate, Generic, ParamSpec, TypeVar

_S = TypeVar('_S')
_T = TypeVar('_T')
_P = ParamSpec('_P')


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


class InThread(Generic[_S]):
    """An object of type `_S`, built by `factory()` at the first call, whose methods run in a
    `Worker` of its own (see the module docstring)."""

    def __init__(self, *, factory: Callable[[], _S], name: str) -> None:
        self._factory = factory
        self._held: _S | None = None
        self._worker = Worker(name=name)

    async def call(
        self, fn: Callable[Concatenate[_S, _P], _T], /, *args: _P.args, **kwargs: _P.kwargs
    ) -> _T:
        """`fn(obj, *args, **kwargs)` in the worker thread."""
        if self._held is None:
            self._held = self._factory()
        return await self._worker.run(functools.partial(fn, self._held, *args, **kwargs))

    def close(self) -> None:
        """End the thread (`Worker.close`); the object stays as it is."""
        self._worker.close()
