"""Small sweeps for the runner's tests (tests/unit/sim/sweep): real simulated runs, seconds each.

- `small_sweep(policies, duration)`: a `RunSpec` per policy on the `on-off` case (warm start off,
  the built-in fleet), cut to `duration` seconds.
- `Square`: a task that is not a simulation (its result is its input squared), to check the
  runner's order, caching and errors cheaply; `Fails` raises; `mixed` lists both kinds.
- `Reads(variable, imports)`: a task whose result is the environment variable `variable`
  where it ran and the name of the module `imports`, imported there (what a worker was given).
- `Stamp(pause, tag)`: a task that returns when it started (the system's monotonic clock, the
  same in every process) and its tag, after sleeping `pause` s: the order tasks started in.
- `Dies`: a task that ends the process it runs in (a worker killed, out of memory).
- `Wide(jobs)`: an executor that claims `jobs` workers and runs everything here (the searches'
  rounds as N workers would see them, at no cost).
"""

from __future__ import annotations

import importlib
import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TypeVar

from llmscaler.sim.scenario import cases
from llmscaler.sim.sweep.tasks import RunSpec, Task

R = TypeVar('R')
POLICIES = ('default', 'predictive', 'keda-queue', 'hpa-kv', 'kaito-realtime')


def small_sweep(
    *, policies: Sequence[str] = POLICIES, duration: float = 300.0, seed: int = 1
) -> list[RunSpec]:
    return cases.runs(name='on-off', policies=list(policies), duration=duration, seed=seed)


@dataclass(frozen=True)
class Square:
    value: int
    extra: frozenset[str] = frozenset()

    @property
    def label(self) -> str:
        return f'square {self.value}'

    def identity(self) -> object:
        return ('square', self.value, self.extra)

    def __call__(self) -> int:
        return self.value * self.value


@dataclass(frozen=True)
class Fails:
    @property
    def label(self) -> str:
        return 'fails'

    def identity(self) -> object:
        return 'fails'

    def __call__(self) -> int:
        raise RuntimeError('this task fails')


@dataclass(frozen=True)
class Reads:
    variable: str
    imports: str

    @property
    def label(self) -> str:
        return f'reads {self.variable}'

    def identity(self) -> object:
        return ('reads', self.variable, self.imports)

    def __call__(self) -> tuple[str, str]:
        return os.environ.get(self.variable, ''), importlib.import_module(self.imports).__name__


@dataclass(frozen=True)
class Stamp:
    pause: float
    tag: str

    @property
    def label(self) -> str:
        return f'stamp {self.tag}'

    def identity(self) -> object:
        return ('stamp', self.pause, self.tag)

    def __call__(self) -> tuple[float, str]:
        began = time.monotonic()
        time.sleep(self.pause)
        return began, self.tag


@dataclass(frozen=True)
class Dies:
    @property
    def label(self) -> str:
        return 'dies'

    def identity(self) -> object:
        return 'dies'

    def __call__(self) -> int:
        os._exit(3)


def mixed(*tasks: Square | Fails) -> list[Task[int]]:
    """Tasks of both kinds in one list (a sweep of int results)."""
    return list(tasks)


class Wide:
    """An executor that says it has `jobs` workers, `idle` of them free, and runs every task
    here, in order: what a search does with N workers, without starting any."""

    def __init__(self, *, jobs: int, idle: int = 0) -> None:
        self.jobs = jobs
        self.free = idle

    def start(self, *, tasks: Sequence[Task[R]], behind: bool = False) -> Iterator[tuple[int, R]]:
        for index, task in enumerate(tasks):
            yield index, task()

    def idle(self) -> int:
        return self.free

    def close(self) -> None:
        pass
