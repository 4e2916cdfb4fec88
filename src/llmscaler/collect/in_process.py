"""One object kept in a child process, its methods called from the event loop.

Why: the event loop that fetches the metrics also renews the leader's Lease. Work moved to a
thread (`collect.worker`) no longer runs on the loop, but it still holds the interpreter lock
while it runs, and the loop waits for the lock after each of its own system calls: with ten pods
serving pages at every cap, the thread parsing them kept the loop's lag p99 at 80 to 97 ms and
its max up to 189 ms (docs/reliability.md). A child process has an interpreter of its own; the
loop then waits for nothing but a socket.

What it does: `InProcess(factory=...)` starts, at its first call, one child process (`python -m
llmscaler.collect.in_process`, with the parent's import path) that builds its object with
`factory()`; `await call(fn, *args, **kwargs)` runs `fn(obj, *args, **kwargs)` there and gives
back the result. Calls run one at a time, in the order they were made. The child is a new
interpreter, not a `fork` (the controller has threads, which a fork copies in the middle of
whatever they were doing) nor `multiprocessing`'s `spawn` (which runs the parent's main script
again in the child). It ignores SIGINT (a Ctrl-C in a terminal reaches the whole process group;
the parent decides when the child ends) and ends when its socket closes: at `close`, or when the
parent dies.

What crosses: `factory`, `fn`, the arguments and the result are pickled, in frames of
`multiprocessing.connection`'s format over a socket pair, so they are module-level functions,
methods of the object's class, and plain values or frozen models. Results are unpickled on the
loop: keep them small (errors, counts, a reading), not the object's state.

What fails: what `fn` raises, `call` raises (an exception that does not pickle as a
RuntimeError naming it). If the child ends while calls are waiting on it (killed for its memory,
a crash; its traceback, if any, on the parent's stderr), they raise `Ended`, and the next call
starts a new child with a new object: what the old one held is gone, which the caller must
report; the new child's start is logged as a warning with how the old one ended. `close` ends
the child at once (a call running there is abandoned).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import pickle
import signal
import socket
import struct
import subprocess
import sys
from collections import deque
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar

log = logging.getLogger(__name__)

_S = TypeVar('_S')
_T = TypeVar('_T')
_P = ParamSpec('_P')

_SHORT = struct.Struct('!i')
_LONG = struct.Struct('!Q')
"""`multiprocessing.connection`'s frame headers: the length, or -1 and then a 64-bit length."""


class Ended(Exception):
    """The child process ended before the call was answered; its object is gone."""


def _header(size: int) -> bytes:
    if size > 0x7FFFFFFF:
        return _SHORT.pack(-1) + _LONG.pack(size)
    return _SHORT.pack(size)


class _Child:
    """One child process, its socket, and the calls it has not answered yet.

    The socket is read and written with the loop's own socket calls (`sock_sendall`,
    `sock_recv_into`), which send from the payload itself: a stream's transport would copy a
    page of megabytes into its buffer, and grow that buffer page by page, on the loop. One task
    sends, in the order the calls were made, so that a call cancelled mid-send cannot leave half
    a frame; another reads the answers, which come back in that order.
    """

    def __init__(self, *, factory: Callable[[], object]) -> None:
        ours, theirs = socket.socketpair()
        path = os.pathsep.join(entry for entry in sys.path if entry)
        self.process = subprocess.Popen(
            [sys.executable, '-m', __name__, str(theirs.fileno())],
            pass_fds=(theirs.fileno(),),
            stdin=subprocess.DEVNULL,
            env={**os.environ, 'PYTHONPATH': path},
        )
        theirs.close()
        ours.setblocking(False)
        self._socket = ours
        self._loop = asyncio.get_running_loop()
        self._outbox: asyncio.Queue[tuple[bytes, asyncio.Future[Any] | None]] = asyncio.Queue()
        self._outbox.put_nowait((pickle.dumps(factory, pickle.HIGHEST_PROTOCOL), None))
        self._waiting: deque[asyncio.Future[Any]] = deque()
        self._tasks = (asyncio.create_task(self._send()), asyncio.create_task(self._read()))
        self.ended = False

    async def call(self, job: tuple[Any, ...]) -> Any:
        if self.ended:
            raise Ended(self.why())
        answer: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._outbox.put_nowait((pickle.dumps(job, pickle.HIGHEST_PROTOCOL), answer))
        outcome, value = await answer
        if outcome == 'raised':
            raise value
        return value

    async def _send(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while True:
                payload, answer = await self._outbox.get()
                if answer is not None:
                    self._waiting.append(answer)
                await loop.sock_sendall(self._socket, _header(len(payload)))
                await loop.sock_sendall(self._socket, payload)
        except OSError:
            self._end()

    async def _read(self) -> None:
        try:
            while True:
                (size,) = _SHORT.unpack(await self._receive(_SHORT.size))
                if size == -1:
                    (size,) = _LONG.unpack(await self._receive(_LONG.size))
                payload = await self._receive(size)
                answer = self._waiting.popleft()
                try:
                    result = pickle.loads(payload)
                except Exception as error:  # a class this process cannot import, say
                    unreadable = RuntimeError(f'an answer that does not unpickle: {error!r}')
                    result = ('raised', unreadable)
                if not answer.done():
                    answer.set_result(result)
        except (EOFError, OSError):
            self._end()

    async def _receive(self, size: int) -> bytearray:
        loop = asyncio.get_running_loop()
        data = bytearray(size)
        view = memoryview(data)
        got = 0
        while got < size:
            count = await loop.sock_recv_into(self._socket, view[got:])
            if not count:
                raise EOFError
            got += count
        return data

    def _end(self) -> None:
        """The child is gone: every call waiting on it, or yet to be sent, raises `Ended`."""
        if self.ended:
            return
        self.ended = True
        # A moment for the exit status (a crash's only trace), once, on this failure path.
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=0.05)
        why = self.why()
        unsent = []
        while not self._outbox.empty():
            unsent.append(self._outbox.get_nowait()[1])
        for answer in (*self._waiting, *unsent):
            if answer is not None and not answer.done():
                answer.set_exception(Ended(why))
        self._waiting.clear()

    def why(self) -> str:
        """How the child ended, as far as is known yet."""
        code = self.process.poll()
        pid = self.process.pid
        if code is None:
            return f'process {pid} closed its socket'
        if code < 0:
            return f'process {pid} killed by signal {-code}'
        return f'process {pid} ended with exit code {code}'

    def close(self) -> None:
        self.process.kill()
        self.process.wait()
        self._end()
        for task in self._tasks:
            task.cancel()
        # Off the selector before the socket goes: its number may be a new child's next.
        if not self._loop.is_closed():
            self._loop.remove_reader(self._socket.fileno())
            self._loop.remove_writer(self._socket.fileno())
        self._socket.close()


class InProcess(Generic[_S]):
    """An object of type `_S` in a child process (see the module docstring)."""

    def __init__(self, *, factory: Callable[[], _S]) -> None:
        self._factory = factory
        self._child: _Child | None = None

    async def call(
        self, fn: Callable[Concatenate[_S, _P], _T], /, *args: _P.args, **kwargs: _P.kwargs
    ) -> _T:
        """`fn(obj, *args, **kwargs)` in the child; `Ended` if the child ended meanwhile."""
        child = self._running()
        result: _T = await child.call((fn, args, kwargs))
        return result

    def _running(self) -> _Child:
        if self._child is not None and self._child.ended:
            log.warning('%s; a new one starts, without what it held', self._child.why())
            self._child.close()
            self._child = None
        if self._child is None:
            self._child = _Child(factory=self._factory)
        return self._child

    def close(self) -> None:
        """End the child now; calls waiting on it raise `Ended`."""
        if self._child is not None:
            self._child.close()
            self._child = None


def _serve(fd: int) -> None:
    """The child: build the object, then answer calls until the socket closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    connection = Connection(fd)
    try:
        held = pickle.loads(connection.recv_bytes())()
        while True:
            job = connection.recv_bytes()
            fn: Any = None
            try:
                fn, args, kwargs = pickle.loads(job)
                answer: tuple[str, Any] = ('returned', fn(held, *args, **kwargs))
            except Exception as error:  # the caller's to handle: sent back, the child goes on
                answer = ('raised', error)
            try:
                payload = pickle.dumps(answer, pickle.HIGHEST_PROTOCOL)
            except Exception as error:
                message = f'{getattr(fn, "__qualname__", fn)}: {answer[0]} what does not pickle'
                payload = pickle.dumps(('raised', RuntimeError(f'{message}: {error!r}')))
            connection.send_bytes(payload)
    except EOFError:
        pass  # the parent closed the socket, or ended


if __name__ == '__main__':
    _serve(int(sys.argv[1]))
