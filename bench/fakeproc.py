"""The fake kube-apiserver in a child process, for benchmarks of the controller.

Why: the fake (llmscaler.devcluster.fakeapi) is written for correctness, not speed — it
deep-copies every object it serves. Run in the benchmark's own process it would share the event
loop and the interpreter with the controller and its cost would be counted as the controller's.
In a child process it runs on the other core, as a real API server would run elsewhere.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from llmscaler.devcluster.fakeapi.server import FakeAPI

Objects = Iterable[dict[str, Any]] | Callable[[], Iterable[dict[str, Any]]]


def _serve(conn: Any, objects: Objects) -> None:
    async def serve() -> None:
        async with FakeAPI() as api:
            for obj in objects() if callable(objects) else objects:
                api.seed(obj)
            conn.send(api.url)
            await asyncio.get_running_loop().run_in_executor(None, conn.recv)

    asyncio.run(serve())


@contextlib.contextmanager
def fake_api(objects: Objects) -> Iterator[str]:
    """Serve `objects` from a fake API server in a child process; yields its URL.

    A function instead of a list is called in the child, so that the measuring process never
    holds the objects (a module-level function: it is handed to the child process).
    """
    parent, child = multiprocessing.Pipe()
    server = multiprocessing.Process(target=_serve, args=(child, objects), daemon=True)
    server.start()
    try:
        yield parent.recv()
    finally:
        parent.send('stop')
        server.join(timeout=10)
        if server.is_alive():
            server.kill()
