"""Stopping the background tasks a test started (informers, loops) when it ends.

Why: a task left running outlives its test's event loop and fails in another test's output; one
that ended with an error of its own must still fail the test that started it, so only the
cancellation itself is swallowed.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable
from typing import Any


async def cancel(tasks: Iterable[asyncio.Task[Any]]) -> None:
    """Cancel every task, then wait for each to end; an error other than the cancellation raises."""
    started = list(tasks)
    for task in started:
        task.cancel()
    for task in started:
        with contextlib.suppress(asyncio.CancelledError):
            await task
