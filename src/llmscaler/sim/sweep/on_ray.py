"""A sweep's tasks on a Ray cluster (`OnRay`): what `--ray ADDRESS` picks.

Why: the runs of a sweep are pure and independent (`tasks`), so a cluster's cores serve them as
well as this machine's; Ray schedules them, on one node or many (a KubeRay `RayJob`:
docs/performance.md). `OnRay(address=...)` connects to the cluster (`ray.init`), runs each task
as a Ray remote function and yields each result as it finishes; `jobs` is the cluster's CPUs
when it connected (the searches size their rounds by it). What many tasks share travels once: a
`Splittable` task (a `RunSpec`: the workload, megabytes of arrays, is the same object in every
run of a sweep) is sent without its shared part, which is put in the object store once
(`ray.put`) and handed to each task by reference; the workers read its arrays from shared
memory without copying them. Other tasks are sent whole. What was put stays there until `close`
(a search's later rounds reuse it), so one executor serves sweeps of a few workloads, not of
thousands. In a process already connected to Ray (a driver that called `ray.init`, a test)
the executor uses that connection, and leaves it open when it closes.

Ray is the optional extra `ray` (`pip install 'llmscaler[sim,ray]'`); nothing here imports it
until an executor is made, so the package works without it. The workers must import the tasks'
modules: llmscaler (and, for the benchmarks' own tasks, their scripts, named by `runtime_env`)
installed on every node.

What fails: `RayUnavailable` (one line, for the commands' exit status 2) when ray is not
installed, when a host:port address does not accept a connection within `deadline` seconds, or
when `ray.init` refuses it (no cluster at `auto`, a version mismatch). An exception a task
raises is re-raised by `start`'s iterator in the caller (Ray's `RayTaskError`, an instance of
the task's exception class, with the worker's traceback in its message); a worker or node that
dies is retried by Ray, and after its retries raises Ray's `WorkerCrashedError` or
`NodeDiedError`. `close` disconnects when this executor connected.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, TypeVar, cast

from llmscaler.sim.sweep.tasks import Splittable, Task

R = TypeVar('R')
DEADLINE = 10.0
"""Seconds `OnRay` waits for the cluster's address to accept a connection."""


class RayUnavailable(RuntimeError):
    """No Ray cluster to run on (module docstring); the message is one line."""


def _ray() -> Any:
    try:
        import ray
    except ModuleNotFoundError as exc:
        if (exc.name or '').partition('.')[0] != 'ray':
            raise
        raise RayUnavailable(
            "--ray needs Ray: pip install 'llmscaler[sim,ray]' (ray>=2.9)"
        ) from None
    return ray


def address_from(*, given: str | None) -> str:
    """The cluster to connect to: `given`, else $RAY_ADDRESS; `RayUnavailable` when neither."""
    address = given or os.environ.get('RAY_ADDRESS', '')
    if not address:
        raise RayUnavailable(
            '--ray: give an address (host:port, ray://host:port, auto) or set RAY_ADDRESS'
        )
    return address


def _reachable(*, address: str, deadline: float) -> None:
    """Raise `RayUnavailable` unless `address`, when it names a host and port, accepts a TCP
    connection within `deadline` seconds (`ray.init` would retry for far longer). One attempt:
    a refused port is a typo or a stopped cluster, and says so at once."""
    rest = address.removeprefix('ray://')
    host, colon, port = rest.rpartition(':')
    if not colon or not port.isdigit():
        return  # `auto`, or a form Ray resolves itself
    try:
        with socket.create_connection((host.strip('[]'), int(port)), timeout=deadline):
            return
    except OSError as exc:
        raise RayUnavailable(
            f'--ray {address}: no Ray cluster answers there within {deadline:g} s ({exc})'
        ) from None


def _call(task: Task[R]) -> R:
    return task()


def _call_with(task: Splittable, shared: object) -> object:
    # Ray resolved `shared` (a reference at the call) to its value before this call.
    return cast(Task[object], task.rejoined(shared=shared))()


class OnRay:
    """Tasks on the Ray cluster at `address` (module docstring)."""

    def __init__(
        self,
        *,
        address: str,
        deadline: float = DEADLINE,
        runtime_env: Mapping[str, object] | None = None,
    ) -> None:
        ray = _ray()
        _reachable(address=address, deadline=deadline)
        self._connected = False
        if not ray.is_initialized():
            try:
                ray.init(
                    address=address,
                    logging_level=logging.WARNING,
                    # The workers' output stays in the cluster's logs: a task's failure comes
                    # back as its exception, and the command's own output stays readable.
                    log_to_driver=False,
                )
            except (ConnectionError, RuntimeError, ValueError, ray.exceptions.RayError) as exc:
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                raise RayUnavailable(f'--ray {address}: {first}') from None
            self._connected = True
        self._ray = ray
        self._jobs = max(1, int(ray.cluster_resources().get('CPU', 1)))
        # Per task, not per connection (`ray.init`): an executor made while this process is
        # already connected still gets its environment.
        options = {'runtime_env': dict(runtime_env)} if runtime_env is not None else {}
        self._run = ray.remote(_call).options(**options)
        self._run_with = ray.remote(_call_with).options(**options)
        self._shared: dict[int, tuple[object, Any]] = {}
        self._lock = threading.Lock()

    @property
    def jobs(self) -> int:
        return self._jobs

    @property
    def shared(self) -> int:
        """How many shared inputs were put in the object store (once each)."""
        return len(self._shared)

    def _reference(self, value: object) -> Any:
        # Keyed by identity: the tasks of a sweep hold the same workload object, and the entry
        # keeps that object alive, so its id is not reused while the reference is held.
        with self._lock:
            found = self._shared.get(id(value))
            if found is None:
                found = (value, self._ray.put(value))
                self._shared[id(value)] = found
            return found[1]

    def start(self, *, tasks: Sequence[Task[R]], behind: bool = False) -> Iterator[tuple[int, R]]:
        futures: dict[Any, int] = {}
        for index, task in enumerate(tasks):
            if isinstance(task, Splittable):
                shared, rest = task.split()
                futures[self._run_with.remote(rest, self._reference(shared))] = index
            else:
                futures[self._run.remote(task)] = index
        pending = list(futures)
        try:
            while pending:
                done, pending = self._ray.wait(pending, num_returns=1)
                for future in done:
                    yield futures[future], cast(R, self._ray.get(future))
        finally:
            for future in pending:
                self._ray.cancel(future)

    def idle(self) -> int:
        return 0  # the cluster's scheduler knows; a search does not run ahead on it

    def close(self) -> None:
        self._shared.clear()
        if self._connected:
            self._ray.shutdown()
            self._connected = False
