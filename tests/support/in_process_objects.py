"""Objects and functions for `collect.in_process`'s tests: importable by name, as a child needs."""

from __future__ import annotations

import os
import threading
import time


class Tally:
    """A list that grows by calls, and the calls that test what crosses the socket."""

    def __init__(self, *, first: int) -> None:
        self.values = [first]

    def add(self, value: int, /) -> list[int]:
        self.values.append(value)
        return list(self.values)

    def pid(self) -> int:
        return os.getpid()

    def nap(self, seconds: float, /) -> None:
        time.sleep(seconds)

    def fail(self, *, message: str) -> None:
        raise ValueError(message)

    def lock(self) -> object:
        """A result that does not pickle."""
        return threading.Lock()

    def dud(self) -> object:
        """A result that pickles but does not unpickle."""
        return Dud()


def explode() -> None:
    raise ValueError('this answer cannot be rebuilt')


class Dud:
    """Rebuilt by `explode`, which raises: what the parent makes of an unreadable answer."""

    def __reduce__(self) -> tuple[object, tuple[()]]:
        return explode, ()


def spin(tally: Tally, *, seconds: float) -> int:
    """Pure Python for `seconds`, as a page being parsed is (a module-level function)."""
    end = time.perf_counter() + seconds
    turns = 0
    while time.perf_counter() < end:
        turns += 1
    return len(tally.values)
