"""The processes of the development cluster: the controller and the cluster's Prometheus.

Why: the controller runs as a separate process, as in a cluster, so that the demo and the
end-to-end tests run it with its real command line, signal handling and exit codes; Prometheus is
Debian's binary. Both must be started and stopped by their own PID, their output kept for the
failure message, and neither may outlive the demo or the test that started it.

What: `ControllerProcess` runs `python -m llmscaler run --kubeconfig <file> ARGS` (`command`
replaces the part before `--kubeconfig`; `default_command()` falls back to `python -m
llmscaler.cli` where the package has no `__main__`). Its stdout and stderr go to
`<workdir>/<name>.log` (a later process of the same name gets `<name>-2.log`) and are printed to
stderr when the `async with` body fails. Its kubeconfig carries a bearer token equal to `client`
(the log file's stem: `controller`, `controller-2` ...), which the fake API records with each
request, so that a test can tell which process sent what. `stop()` sends SIGTERM and kills after
`stop_timeout` seconds; `kill()` sends SIGKILL (a crash: nothing is released), `pause()` and
`resume()` SIGSTOP and SIGCONT (a process frozen, as by a long GC pause or a stalled node).
`metrics_text()` reads the controller's own `/metrics` (on the port its log names), `cycles()`
the number of cycles it finished. `Prometheus` runs `prometheus` on a free port with file_sd
jobs whose target files `write_targets` replaces atomically; new targets are scraped within about
6 s (the discovery manager batches updates every 5 s).

What fails: `prometheus_binary` (and so `Prometheus.start`) raises `PrometheusMissing` when no
`prometheus` is on PATH; `Prometheus.start` raises RuntimeError with the end of its log when it
exits or is not ready within 20 s. `ControllerProcess.wait` raises TimeoutError (with the log)
when the process is still running at the timeout. Both `stop`s are idempotent. `metrics_text`
raises RuntimeError while the log names no metrics port yet, httpx.HTTPError when the page cannot
be read.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol

import httpx
import yaml

from llmscaler.devcluster import objects


class ClusterAccess(Protocol):
    """What a controller process needs of its cluster (`devcluster.cluster.Cluster`): a
    working directory for its files and a kubeconfig for the fake API."""

    @property
    def workdir(self) -> Path: ...

    def kubeconfig(self, path: Path, *, client: str | None = None) -> Path: ...


_POLL = 0.05
_METRICS_LINE = re.compile(r'serving /metrics on (?P<host>\S+) port (?P<port>\d+)')
_CYCLE_COUNT = re.compile(r'^wva_optimization_duration_seconds_count\{[^}]*\} (\S+)$', re.M)


class PrometheusMissing(RuntimeError):
    """No `prometheus` binary on PATH (Debian and Ubuntu: `apt-get install prometheus`)."""


def prometheus_binary() -> str:
    """The path of the `prometheus` binary; PrometheusMissing when it is not installed."""
    path = shutil.which('prometheus')
    if path is None:
        raise PrometheusMissing(
            'no prometheus binary on PATH (Debian/Ubuntu: apt-get install prometheus)'
        )
    return path


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (another process may take it before it is used)."""
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        port: int = sock.getsockname()[1]
        return port


def default_command() -> tuple[str, ...]:
    """`python -m llmscaler run`, or `python -m llmscaler.cli run` while there is no __main__."""
    if importlib.util.find_spec('llmscaler.__main__') is not None:
        return (sys.executable, '-m', 'llmscaler', 'run')
    return (sys.executable, '-m', 'llmscaler.cli', 'run')


def _fresh(path: Path) -> Path:
    """`path`, or `stem-2.suffix`, `stem-3.suffix` ... if taken (a restart keeps the old log)."""
    candidate, n = path, 1
    while candidate.exists():
        n += 1
        candidate = path.with_name(f'{path.stem}-{n}{path.suffix}')
    return candidate


async def wait_exit(process: subprocess.Popen[bytes], timeout: float) -> int | None:
    deadline = time.monotonic() + timeout
    while (code := process.poll()) is None and time.monotonic() < deadline:
        await asyncio.sleep(_POLL)
    return code


async def terminate(process: subprocess.Popen[bytes], timeout: float) -> int:
    """SIGTERM, then SIGKILL after `timeout` seconds; the exit status."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        if await wait_exit(process, timeout) is None:
            process.kill()
    while (code := process.poll()) is None:
        await asyncio.sleep(_POLL)
    return code


class ControllerProcess:
    """`llmscaler run` against a `Cluster`, as a child process (async context manager)."""

    def __init__(
        self,
        *,
        cluster: ClusterAccess,
        args: Sequence[str],
        env: Mapping[str, str] | None = None,
        name: str = 'controller',
        command: Sequence[str] | None = None,
        stop_timeout: float = 10.0,
    ) -> None:
        self.name = name
        self.log_path = _fresh(cluster.workdir / f'{name}.log')
        self.client = self.log_path.stem
        self.kubeconfig = cluster.kubeconfig(
            _fresh(cluster.workdir / f'{name}.kubeconfig'), client=self.client
        )
        prefix = tuple(command) if command is not None else default_command()
        self.argv: tuple[str, ...] = (*prefix, '--kubeconfig', str(self.kubeconfig), *args)
        self.env = {**os.environ, 'PYTHONUNBUFFERED': '1', **(env or {})}
        self.stop_timeout = stop_timeout
        self._process: subprocess.Popen[bytes] | None = None

    async def __aenter__(self) -> ControllerProcess:
        self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()
        if exc is not None:
            # pytest shows a failed test's captured stderr: the process's side of the story.
            print(f'--- {self.name} ({self.log_path}) ---\n{self.log()[-8000:]}', file=sys.stderr)

    def start(self) -> None:
        if self._process is not None:
            raise RuntimeError(f'{self.name} was already started')
        with self.log_path.open('wb') as log:
            self._process = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env,
                # A ^C in the terminal goes to the parent (the demo, pytest), which stops it.
                start_new_session=True,
            )

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def returncode(self) -> int | None:
        """The exit status (negative: the signal that ended it); None while it runs."""
        return self._process.poll() if self._process is not None else None

    def log(self) -> str:
        """Everything the process printed so far (stdout and stderr interleaved)."""
        if not self.log_path.exists():
            return ''
        return self.log_path.read_text(errors='replace')

    async def wait(self, *, timeout: float) -> int:
        """Wait for the process to exit by itself; its exit status."""
        if self._process is None:
            raise RuntimeError(f'{self.name} was not started')
        code = await wait_exit(self._process, timeout)
        if code is None:
            raise TimeoutError(f'{self.name} still runs after {timeout} s:\n{self.log()[-4000:]}')
        return code

    async def stop(self) -> int | None:
        """SIGTERM, wait up to `stop_timeout` s, then SIGKILL; the exit status."""
        if self._process is None:
            return None
        self.resume()  # a stopped process would not see the SIGTERM until the timeout
        return await terminate(self._process, self.stop_timeout)

    async def kill(self) -> int | None:
        """SIGKILL now, as a crash or an OOM kill would; the exit status (None if not started)."""
        if self._process is None:
            return None
        if self._process.poll() is None:
            self._process.kill()
        while (code := self._process.poll()) is None:
            await asyncio.sleep(_POLL)
        return code

    def pause(self) -> None:
        """SIGSTOP: the process keeps its sockets and state but runs no code until `resume`."""
        self._signal(signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT (harmless when the process is not stopped)."""
        self._signal(signal.SIGCONT)

    def _signal(self, number: signal.Signals) -> None:
        if self._process is not None and self._process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self._process.send_signal(number)

    @property
    def metrics_url(self) -> str | None:
        """`http://host:port/metrics` as the process logged it; None before it serves."""
        found = _METRICS_LINE.search(self.log())
        if found is None:
            return None
        host = found['host']
        host = f'[{host}]' if ':' in host else host
        return f'http://{host}:{found["port"]}/metrics'

    def metrics_text(self, *, timeout: float = 2.0) -> str:
        """The controller's `/metrics` page (blocking: the controller is another process)."""
        url = self.metrics_url
        if url is None:
            raise RuntimeError(f'{self.name} serves no /metrics yet')
        response = httpx.get(url, timeout=timeout)
        response.raise_for_status()
        return response.text

    def cycles(self) -> int:
        """Cycles finished so far, with or without an error (0 before /metrics is served)."""
        if self.metrics_url is None:
            return 0
        return sum(int(float(n)) for n in _CYCLE_COUNT.findall(self.metrics_text()))


class Prometheus:
    """Debian's Prometheus scraping file_sd targets every second."""

    JOBS = ('epp', 'vllm')

    def __init__(self, *, workdir: Path) -> None:
        self.workdir = workdir
        self.url = ''
        self._files = {job: workdir / f'targets-{job}.json' for job in self.JOBS}
        self._written: dict[str, list[dict[str, Any]]] = {}
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def log_path(self) -> Path:
        return self.workdir / 'prometheus.log'

    def write_targets(self, *, job: str, groups: list[dict[str, Any]]) -> None:
        """Replace a job's targets (atomically: Prometheus may read the file at any time)."""
        if self._written.get(job) == groups:
            return
        path = self._files[job]
        partial = path.with_suffix('.tmp')
        partial.write_text(json.dumps(groups, indent=1))
        partial.replace(path)
        self._written[job] = groups

    async def start(self) -> str:
        binary = prometheus_binary()
        for job in self.JOBS:
            self.write_targets(job=job, groups=self._written.get(job, []))
        config = self.workdir / 'prometheus.yml'
        config.write_text(yaml.safe_dump(objects.prometheus_config(files=self._files)))
        port = free_port()
        with self.log_path.open('wb') as log:
            self._process = subprocess.Popen(
                [
                    binary,
                    f'--config.file={config}',
                    f'--storage.tsdb.path={self.workdir / "prometheus-data"}',
                    f'--web.listen-address=127.0.0.1:{port}',
                    '--log.level=warn',
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.url = f'http://127.0.0.1:{port}'
        deadline = time.monotonic() + 20
        async with httpx.AsyncClient(timeout=1) as client:
            while True:
                with contextlib.suppress(httpx.HTTPError):
                    if (await client.get(f'{self.url}/-/ready')).status_code == 200:
                        return self.url
                if self._process.poll() is not None or time.monotonic() > deadline:
                    await self.stop()
                    raise RuntimeError(self.log_path.read_text(errors='replace')[-2000:])
                await asyncio.sleep(_POLL)

    async def stop(self) -> None:
        process, self._process = self._process, None
        if process is not None:
            await terminate(process, 10.0)
