"""How long the event loop kept a probe waiting, while a block ran: for tests of work kept off it.

`gaps(every=...)` runs a task that sleeps `every` seconds at a time on this loop and records,
each time it wakes, how long since it last woke; the list fills while the block runs (a gap is
counted when it ends, so a block gives the probe its turn, e.g. a short sleep, before it ends).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator


@contextlib.asynccontextmanager
async def gaps(*, every: float) -> AsyncIterator[list[float]]:
    """The probe's gaps (seconds), the first one recorded before the block starts."""
    found: list[float] = []

    async def probe() -> None:
        last = time.perf_counter()
        while True:
            await asyncio.sleep(every)
            now = time.perf_counter()
            found.append(now - last)
            last = now

    probing = asyncio.create_task(probe())
    try:
        while not found:
            await asyncio.sleep(every)
        yield found
    finally:
        probing.cancel()
        await asyncio.gather(probing, return_exceptions=True)
