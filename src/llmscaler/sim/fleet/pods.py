"""One simulated replica as the fleet sees it: the engine it runs and the record of its life.

Why: the fleet (`sim.fleet.cluster`) and the gateways in front of it (`sim.fleet.gateway`) both
handle replicas; this module is what they share, so neither imports the other's internals. The
engines themselves are `sim.vllm.reference`'s; here is only the surface the fleet relies on.

What fails: `engine_factory` raises `ValueError` for an unknown engine kind. No I/O.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from llmscaler.sim.vllm.fast import FastReplica
from llmscaler.sim.vllm.reference import ReferenceReplica
from llmscaler.sim.vocabulary import SimRequest, VariantSpec

EngineKind = Literal['fast', 'reference']


class EngineCounters(Protocol):
    """The cumulative vLLM counters of one replica (what `/metrics` exposes)."""

    @property
    def prompt_tokens_sum(self) -> float: ...
    @property
    def generation_tokens_sum(self) -> float: ...
    @property
    def request_success_total(self) -> float: ...
    @property
    def ttft_sum(self) -> float: ...
    @property
    def ttft_count(self) -> float: ...
    @property
    def itl_sum(self) -> float: ...
    @property
    def itl_count(self) -> float: ...
    @property
    def preemptions_total(self) -> float: ...
    @property
    def prefix_cache_queries_total(self) -> float: ...
    @property
    def prefix_cache_hits_total(self) -> float: ...
    @property
    def ttft_buckets(self) -> Sequence[int]: ...
    @property
    def tpot_buckets(self) -> Sequence[int]: ...


class Engine(Protocol):
    """One vLLM server in virtual time (`llmscaler.sim.vllm.reference`)."""

    def submit(self, *, request: SimRequest, now: float) -> None: ...
    def advance(self, *, until: float) -> list[SimRequest]: ...
    def next_step_time(self) -> float | None: ...
    def cancel(self, *, request: SimRequest, now: float) -> bool:
        """Drop a request whose client gave up, freeing its blocks and batch slot."""
        ...

    def cached_prefix(
        self, request: SimRequest, memo: dict[int, Sequence[int]] | None = None
    ) -> int:
        """Prompt tokens of `request` its prefix cache holds (0 without one); `memo` keeps the
        request's block keys by block size across engines."""
        ...

    @property
    def waiting(self) -> int: ...
    @property
    def running(self) -> int: ...
    @property
    def in_flight(self) -> int: ...
    @property
    def kv_usage(self) -> float: ...
    @property
    def counters(self) -> EngineCounters: ...


class EngineClass(Protocol):
    """What builds an engine: the replica classes' keyword constructor."""

    def __call__(self, *, spec: VariantSpec, name: str, now: float) -> Engine: ...


def engine_factory(*, kind: EngineKind) -> EngineClass:
    """The replica class of an engine kind: `fast` (decode runs in closed form) or `reference`
    (one step at a time); both give the same per-request times."""
    if kind == 'fast':
        return FastReplica
    if kind == 'reference':
        return ReferenceReplica
    raise ValueError(f"unknown engine {kind!r}: expected 'fast' or 'reference'")


@dataclass(slots=True, eq=False)
class Replica:
    """One replica's life. `engine` is None while Pending; `gone` is NaN while it exists.

    `created` is when the scale-up asked for it; `bound` when it got its GPUs (NaN while it
    waits for them: with a GPU inventory, `sim.fleet.cluster`); it is Ready at `ready_at`, one
    start-up delay after `bound`.
    """

    name: str
    variant: str
    number: int
    """Per-variant creation counter: among replicas created at one instant, higher is newer."""
    created: float
    ready_at: float
    model: str = ''
    bound: float = math.nan
    engine: Engine | None = None
    terminating: bool = False
    terminated_at: float = math.nan
    gone: float = math.nan
    dispatched: int = 0
    """Requests the router sent here (the EPP's `scheduler_attempts_total{status="success"}`)."""
    next_step: float = math.inf
    last_finish: float = -math.inf

    @property
    def is_bound(self) -> bool:
        return self.bound == self.bound
