"""`llmscaler demo` as a user runs it: a process whose printed kubectl commands work, and that
leaves no process behind, whether it ends by itself, on Ctrl-C (SIGINT) or on SIGTERM.

Each demo runs in its own session, like a command typed in a terminal; its descendants (the
controller, Prometheus) are found through /proc while it runs.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.support import prom
from tests.support.prerequisites import need_program


def children_of(pid: int) -> dict[int, str]:
    """Every living descendant of `pid`: pid → command line."""
    parents: dict[int, int] = {}
    for entry in Path('/proc').iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / 'stat').read_text()
        except OSError:
            continue
        # pid (comm) state ppid ...: comm may hold spaces and parentheses.
        fields = stat[stat.rindex(')') + 2 :].split()
        if fields[0] != 'Z':
            parents[int(entry.name)] = int(fields[1])
    found: dict[int, str] = {}
    frontier = [pid]
    while frontier:
        parent = frontier.pop()
        for child, ppid in parents.items():
            if ppid == parent and child not in found:
                found[child] = command_line(child)
                frontier.append(child)
    return found


def command_line(pid: int) -> str:
    try:
        return (Path('/proc') / str(pid) / 'cmdline').read_bytes().replace(b'\0', b' ').decode()
    except OSError:
        return ''


def still_running(processes: dict[int, str]) -> dict[int, str]:
    """The processes of `processes` that still run the same command (not a reused pid)."""
    alive = {}
    for pid, command in processes.items():
        try:
            state = (Path('/proc') / str(pid) / 'stat').read_text()
        except OSError:
            continue
        if state[state.rindex(')') + 2] != 'Z' and command_line(pid) == command:
            alive[pid] = command
    return alive


class Demo:
    """`python -m llmscaler demo ARGS`, its stdout read line by line."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process = process
        self.lines: list[str] = []

    async def line_with(self, text: str, *, timeout: float) -> str:
        """The first line of stdout holding `text` (AssertionError with the output otherwise)."""
        assert self.process.stdout is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in self.lines:
                if text in line:
                    return line
            line = await asyncio.wait_for(
                asyncio.to_thread(self.process.stdout.readline), deadline - time.monotonic()
            )
            if not line:
                break
            self.lines.append(line.rstrip('\n'))
        raise AssertionError(f'no line with {text!r} in:\n' + '\n'.join(self.lines))

    async def children(self, *, want: tuple[str, ...], timeout: float) -> dict[int, str]:
        """The demo's descendants once one runs each of `want` (e.g. 'llmscaler run')."""
        deadline = time.monotonic() + timeout
        while True:
            found = children_of(self.process.pid)
            if all(any(w in c for c in found.values()) for w in want):
                return found
            assert time.monotonic() < deadline, (want, found)
            await asyncio.sleep(0.1)

    async def exit_code(self, *, timeout: float) -> int:
        code = await asyncio.wait_for(asyncio.to_thread(self.process.wait), timeout)
        assert self.process.stdout is not None
        self.lines += self.process.stdout.read().splitlines()
        return code


@contextmanager
def demo(*args: str) -> Iterator[Demo]:
    process = subprocess.Popen(
        [sys.executable, '-m', 'llmscaler', 'demo', *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, 'PYTHONUNBUFFERED': '1'},
        start_new_session=True,
    )
    try:
        yield Demo(process)
    finally:
        if process.poll() is None:  # a failed test: leave nothing behind either
            os.killpg(process.pid, signal.SIGKILL)
            for pid in children_of(process.pid):
                os.kill(pid, signal.SIGKILL)
            process.wait()
        if process.stdout is not None:
            process.stdout.close()


async def kubectl(command: str) -> str:
    """Run a printed `kubectl ...` command line; its stdout (AssertionError on failure)."""
    argv = shlex.split(command)
    assert argv[0] == 'kubectl', command
    process = await asyncio.create_subprocess_exec(
        *argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    out, err = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode == 0, (command, err.decode())
    return out.decode()


async def leading(log: Path, *, timeout: float) -> None:
    """Wait until the controller's log says it leads (its signal handlers are set by then)."""
    deadline = time.monotonic() + timeout
    while 'leading: caches synced' not in (log.read_text() if log.exists() else ''):
        assert time.monotonic() < deadline, log.read_text() if log.exists() else 'no log'
        await asyncio.sleep(0.1)


async def test_the_printed_kubectl_command_shows_the_vas_and_the_demo_ends_clean(
    tmp_path: Path, backend: bool
) -> None:
    need_program('kubectl')
    args = ['--duration', '25s', '--no-prometheus', '--workdir', str(tmp_path)]
    # On the real control plane its four processes are the demo's children too.
    want = ('llmscaler run', 'etcd', 'kube-apiserver', 'kube-scheduler') if backend else ()
    with demo(*args, '--control-plane' if backend else '--fake-api') as running:
        assert 'scrapes the pods directly' in await running.line_with('metrics:', timeout=90)
        watch = await running.line_with(' get va -w', timeout=10)
        assert watch.strip() == f'kubectl --kubeconfig {tmp_path / "kubeconfig"} get va -w'
        children = await running.children(want=want or ('llmscaler run',), timeout=10)
        listed = await kubectl(watch.strip().removesuffix(' -w'))
        rows = {line.split()[0]: line.split() for line in listed.splitlines()[1:]}
        assert sorted(rows) == ['cheap', 'dear'], listed
        assert listed.split()[:3] == ['NAME', 'TARGET', 'MODEL'], listed  # the CRD's columns
        describe = await running.line_with(' describe va ', timeout=1)
        assert 'Name:         cheap' in await kubectl(describe.strip())
        await running.line_with('load rising', timeout=30)
        assert await running.exit_code(timeout=60) == 0
    assert 'the demo is over' in running.lines[-1], running.lines
    assert still_running(children) == {}
    assert (tmp_path / 'controller.log').read_text().strip().endswith('controller stopped (exit 0)')


@pytest.mark.integration
@pytest.mark.parametrize('signum', [signal.SIGINT, signal.SIGTERM], ids=['SIGINT', 'SIGTERM'])
async def test_a_signal_stops_the_demo_and_every_process_it_started(
    tmp_path: Path, signum: signal.Signals
) -> None:
    prom.binary()
    with demo('--duration', '10m', '--workdir', str(tmp_path)) as running:
        assert 'Prometheus at http://127.0.0.1:' in await running.line_with('metrics:', timeout=60)
        await running.line_with(' get va -w', timeout=10)
        children = await running.children(want=('llmscaler run', 'prometheus'), timeout=10)
        await leading(tmp_path / 'controller.log', timeout=30)
        stopped = time.monotonic()
        running.process.send_signal(signum)
        assert await running.exit_code(timeout=30) == 0
        assert time.monotonic() - stopped < 15  # the controller stops on SIGTERM, unforced
    assert 'stopping' in running.lines[-1], running.lines
    assert still_running(children) == {}
    assert (tmp_path / 'controller.log').read_text().strip().endswith('controller stopped (exit 0)')
