"""Waiting in tests for something that happens over real loopback HTTP.

Why: informers, watches and writers talk to the fake API server over real sockets, so a test
cannot step them deterministically; it waits, with a deadline, until a condition holds, and fails
with what it was waiting for.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable


async def eventually(check: Callable[[], bool], what: str, timeout: float = 5.0) -> None:
    """Wait (in real time) until `check()` holds; AssertionError naming `what` after `timeout`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not check():
        if loop.time() > deadline:
            raise AssertionError(f'timed out waiting for {what}')
        await asyncio.sleep(0.005)
