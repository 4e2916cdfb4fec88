"""A real local Ray cluster for the Ray executor's tests: a head and one worker node, each its
own `ray start` process, one CPU each.

Why: `OnRay` is only tested honestly against a cluster with more than one node (tasks and the
object store's copies cross raylets), and `ray.init()` without an address would start a single
node inside the test process instead. Each node runs `ray start --block` in a new session, so
that everything it starts (GCS, raylet, workers) is in that session's process group; the
teardown stops each node with SIGTERM (what `--block` waits for to stop its processes) and then
kills what is left of its group. Nothing else on the machine is touched: `ray stop` would stop
every Ray process of the user, other clusters' too. The object store is capped (`STORE_BYTES`
a node): the machine's /dev/shm may be small.

What fails: `cluster()` raises `RuntimeError` with the nodes' output when the cluster does not
have both nodes' CPUs within `timeout` seconds. Without the ray program (the `ray` extra) the
test is skipped, or fails with CI=true (`prerequisites.missing`).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from tests.support.prerequisites import missing

STORE_BYTES = 100 * 1024 * 1024
"""Each node's object store (Ray's smallest useful size is far below this)."""


ENVIRONMENT = {
    'RAY_USAGE_STATS_ENABLED': '0',
    # Explicit, on the nodes and on the test's driver alike: with the mode unset, Ray turns
    # token authentication on or off by whether ~/.ray/auth_token exists, a file outside the
    # test (and the nodes would disagree with the driver). The nodes listen on 127.0.0.1 only.
    'RAY_AUTH_MODE': 'disabled',
}


@dataclass(frozen=True)
class Cluster:
    address: str
    """host:port of the head's GCS, what `--ray` takes."""


def ray_program() -> str:
    """The `ray` program of this interpreter's environment, or skip / fail (`missing`)."""
    try:
        import ray  # noqa: F401
    except ModuleNotFoundError:
        missing("ray is not installed (pip install -e '.[sim,ray]')")
    found = Path(sys.executable).parent / 'ray'
    if not found.exists():
        missing(f'{found} is absent (the ray extra installs it)')
    return str(found)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(('127.0.0.1', 0))
        return int(probe.getsockname()[1])


def _node(arguments: list[str], *, log: Path) -> subprocess.Popen[bytes]:
    with log.open('wb') as out:
        return subprocess.Popen(
            [ray_program(), 'start', '--block', '--disable-usage-stats', *arguments],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, **ENVIRONMENT},
        )


def _stop(node: subprocess.Popen[bytes]) -> None:
    with suppress(ProcessLookupError):
        node.send_signal(signal.SIGTERM)
    with suppress(subprocess.TimeoutExpired):
        node.wait(timeout=15)
    # Whatever the node started and did not stop: its session's group, and only it.
    with suppress(ProcessLookupError):
        os.killpg(node.pid, signal.SIGKILL)
    node.wait()


def _cpus(*, address: str) -> float:
    """The cluster's CPUs as its GCS reports them (a short-lived driver of its own)."""
    probe = (
        'import logging, ray; '
        f"ray.init(address='{address}', logging_level=logging.ERROR, log_to_driver=False); "
        "print(ray.cluster_resources().get('CPU', 0))"
    )
    done = subprocess.run(
        [sys.executable, '-c', probe],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, **ENVIRONMENT},
    )
    try:
        return float(done.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        return 0.0


@contextmanager
def cluster(*, timeout: float = 60.0) -> Iterator[Cluster]:
    """A head and one worker node, one CPU each, stopped on exit (module docstring); this
    process's environment gets `ENVIRONMENT` meanwhile, for its driver."""
    port = free_port()
    address = f'127.0.0.1:{port}'
    common = ['--num-cpus=1', f'--object-store-memory={STORE_BYTES}']
    # A short directory: Ray's Unix sockets live under it, and their paths have a length limit.
    saved = {name: os.environ.get(name) for name in ENVIRONMENT}
    os.environ.update(ENVIRONMENT)
    with tempfile.TemporaryDirectory(prefix='ray', dir='/tmp') as temp:
        logs = Path(temp)
        nodes = [
            _node(
                [
                    '--head',
                    f'--port={port}',
                    '--node-ip-address=127.0.0.1',
                    '--include-dashboard=false',
                    f'--temp-dir={logs / "r"}',
                    *common,
                ],
                log=logs / 'head.log',
            )
        ]
        try:
            nodes.append(
                _node(
                    [f'--address={address}', '--node-ip-address=127.0.0.1', *common],
                    log=logs / 'worker.log',
                )
            )
            ends = time.monotonic() + timeout
            while _cpus(address=address) < 2:
                if time.monotonic() > ends or any(n.poll() is not None for n in nodes):
                    output = '\n'.join(
                        (logs / name).read_text(errors='replace')[-2000:]
                        for name in ('head.log', 'worker.log')
                    )
                    raise RuntimeError(f'the Ray cluster at {address} did not start:\n{output}')
                time.sleep(0.5)
            yield Cluster(address=address)
        finally:
            for node in reversed(nodes):
                _stop(node)
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
