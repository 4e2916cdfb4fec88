"""A real Prometheus server for the integration and end-to-end tests: Debian's 2.42, or 3.16
built from its Go module (`make binaries`).

Users run both lines, and 3.x reads metric names as UTF-8 and changed its defaults, so the
integration tests run against each (`SERVERS`). Started on a free 127.0.0.1 port with a
temporary TSDB, a 1-second scrape interval and static targets; stopped by PID. Locally a missing
binary skips the test with the reason; in CI (`CI=true`) it fails, because .ci/run installs the
package and builds the binaries. Finding Debian's binary and a port is
`llmscaler.devcluster.process`'s; this module adds what only a test needs: skip or fail.
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx
import yaml

from llmscaler.devcluster.process import PrometheusMissing, free_port, prometheus_binary
from tests.support import prerequisites

__all__ = ['SERVERS', 'Target', 'binary', 'free_port', 'running', 'wait_for']

# Debian's package (the 2.x line) and the 3.x server built under tools/prometheus.
SERVERS = ('prometheus-2', 'prometheus-3')


@dataclass(frozen=True, slots=True)
class Target:
    """One scrape target with the labels the kube service discovery would attach."""

    address: str
    labels: tuple[tuple[str, str], ...]
    job: str = 'vllm'


def binary(server: str = 'prometheus-2') -> str:
    """The `prometheus` binary of `server` (one of SERVERS); skips the test without it, fails it
    in CI."""
    if server == 'prometheus-3':
        return str(prerequisites.need_built('prometheus'))
    if server != 'prometheus-2':
        raise ValueError(f'unknown server {server!r} (known: {", ".join(SERVERS)})')
    try:
        return prometheus_binary()
    except PrometheusMissing as absent:
        prerequisites.missing(f'{absent} (.ci/run installs it)')


@contextlib.asynccontextmanager
async def running(
    *, targets: Sequence[Target], workdir: Path, server: str = 'prometheus-2'
) -> AsyncIterator[str]:
    """Run Prometheus (`server`, one of SERVERS) scraping `targets` every second; yields its
    base URL.

    Asynchronous so that servers on the same event loop (the emulator) keep serving meanwhile.
    """
    jobs: dict[str, list[dict[str, object]]] = {}
    for target in targets:
        jobs.setdefault(target.job, []).append(
            {'targets': [target.address], 'labels': dict(target.labels)}
        )
    config = {
        'global': {'scrape_interval': '1s', 'evaluation_interval': '1s'},
        'scrape_configs': [
            {'job_name': job, 'static_configs': statics, 'scrape_timeout': '900ms'}
            for job, statics in sorted(jobs.items())
        ],
    }
    config_path = workdir / 'prometheus.yml'
    config_path.write_text(yaml.safe_dump(config))
    port = free_port()
    log = (workdir / 'prometheus.log').open('w')
    process = subprocess.Popen(
        [
            binary(server),
            f'--config.file={config_path}',
            f'--storage.tsdb.path={workdir / "data"}',
            f'--web.listen-address=127.0.0.1:{port}',
            '--log.level=warn',
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f'http://127.0.0.1:{port}'
    try:
        deadline = time.monotonic() + 20
        async with httpx.AsyncClient(timeout=1) as client:
            while True:
                with contextlib.suppress(httpx.HTTPError):
                    if (await client.get(f'{url}/-/ready')).status_code == 200:
                        break
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError((workdir / 'prometheus.log').read_text()[-2000:])
                await asyncio.sleep(0.05)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()


async def wait_for(*, url: str, query: str, count: int, timeout: float = 30.0) -> None:
    """Wait until `query` returns at least `count` series (first data takes ~6-8 s)."""
    deadline = time.monotonic() + timeout
    async with httpx.AsyncClient(timeout=2) as client:
        while time.monotonic() < deadline:
            response = await client.get(f'{url}/api/v1/query', params={'query': query})
            if len(response.json().get('data', {}).get('result', [])) >= count:
                return
            await asyncio.sleep(0.25)
    raise AssertionError(f'no data for {query} after {timeout} s')
