"""The simulated fleet: replicas and their lifecycle, the gateway's router and queue, the cost.

Why: the autoscaler only ever sees the fleet through a scale subresource and metrics; this module
is the part of Kubernetes and of the inference gateway (the EPP) that the simulator needs in
between: it turns replica targets into replicas that start, serve and drain, and it sends every
request to one of them.

What it models:

- **Scale subresource.** `set_target` clamps the target to [0, max_replicas] (the minimum is the
  policy's business, exactly as the API server does not enforce an HPA's minimum). More
  non-terminating replicas than wanted → remove: first the not-ready ones, newest first; then the
  ready ones with the fewest in-flight requests (ties: newest, i.e. latest created, then last in
  name order, since name order is creation order). Fewer → create.
- **Lifecycle.** A created replica is Pending until `created + startup_delay`, then Ready (its
  vLLM engine starts empty). A removed not-ready replica disappears at once; a removed ready one
  is Terminating: it takes no new request and disappears when its last in-flight request is done.
  The initial replicas of every variant are Ready (warm) at t = 0.
- **Cost.** A replica costs from its creation until it disappears (`replica_seconds`).
- **Router.** An arrival goes to a Ready, non-terminating replica of any variant:
  `least-loaded` picks the fewest waiting + running requests, i.e. in-flight requests after
  every engine was advanced to the arrival (ties: lowest name); `round-robin`
  takes the replicas in name order, continuing after the last replica picked.
- **Gateway queue.** With no routable replica a request waits in a FIFO queue (the EPP
  flow-control queue) and is dispatched, in arrival order, as soon as a replica becomes Ready. A
  request still queued `gateway_timeout` seconds after its arrival (or `request_timeout`, when
  that is shorter) fails (`failure = 'queue-timeout'`): the check runs whenever `expire` is
  called, and a request whose deadline equals the instant a replica becomes ready fails (expiry
  runs first).
- **Client time-out.** With a finite `request_timeout` the client abandons a request that has
  not completed `request_timeout` seconds after its arrival, wherever it is. In a replica
  (waiting or running) it fails with `failure = 'replica-timeout'` when `expire` runs at or after
  its deadline (`next_deadline` says when that is, so the caller can run it then), and the
  engine drops it at once (`cancel`), freeing its KV blocks and batch slot for the next step; a
  request that the engine finished after its deadline (in the step in progress at the deadline)
  fails too: the client was gone before its last token. A request that completed at or before
  its deadline is untouched. An engine without a `cancel` method keeps serving an abandoned
  request to its end (it still counts as failed).
- **Rejection.** A request the engine refuses at submission (longer than the model or KV cache
  holds) fails with `failure = 'rejected'`.

Time: `advance(until=t)` runs every engine step that starts before t, whole (an engine executes
steps, not fractions of one), so the gauges read at t are those at the end of the step in
progress at t, at most one step (milliseconds) ahead.

Names are `f'{variant}-{n:04d}'` with a per-variant counter, so name order is creation order (up
to 10,000 replicas per variant).

What fails: `Cluster` raises `ValueError` for an unknown router or engine kind, duplicate variant
names, or a non-positive/NaN gateway or request timeout (inf disables either); `set_target`
raises `KeyError` for an unknown variant. A negative target counts as 0, a negative or NaN
startup delay as 0. No I/O, no wall clock; every loop runs in name order.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_right
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from llmscaler.sim.replica import FastReplica, ReferenceReplica
from llmscaler.sim.types import SimRequest, VariantSpec

Router = Literal['least-loaded', 'round-robin']
EngineKind = Literal['fast', 'reference']

BYTES_PER_TOKEN = 4
"""The EPP counts queued prompt bytes; a token is about four bytes of text."""


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


class Engine(Protocol):
    """One vLLM server in virtual time (`llmscaler.sim.replica`)."""

    def submit(self, *, request: SimRequest, now: float) -> None: ...
    def advance(self, *, until: float) -> list[SimRequest]: ...
    def next_step_time(self) -> float | None: ...
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


@runtime_checkable
class CancellableEngine(Protocol):
    """An engine that can drop a request whose client gave up (see the module docstring)."""

    def cancel(self, *, request: SimRequest, now: float) -> bool: ...


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
    """One replica's life. `engine` is None while Pending; `gone` is NaN while it exists."""

    name: str
    variant: str
    number: int
    """Per-variant creation counter: among replicas created at one instant, higher is newer."""
    created: float
    ready_at: float
    engine: Engine | None = None
    terminating: bool = False
    terminated_at: float = math.nan
    gone: float = math.nan
    dispatched: int = 0
    """Requests the router sent here (the EPP's `scheduler_attempts_total{status="success"}`)."""
    next_step: float = math.inf
    last_finish: float = -math.inf


class Cluster:
    """The fleet of every variant of one model, with the gateway in front of it."""

    def __init__(
        self,
        *,
        variants: Sequence[VariantSpec],
        engine: EngineKind = 'fast',
        router: Router = 'least-loaded',
        gateway_timeout: float = 120.0,
        request_timeout: float = math.inf,
        now: float = 0.0,
    ) -> None:
        if router not in ('least-loaded', 'round-robin'):
            raise ValueError(f"unknown router {router!r}: expected 'least-loaded' or 'round-robin'")
        if not gateway_timeout > 0:
            raise ValueError(f'gateway_timeout must be > 0, got {gateway_timeout!r}')
        if not request_timeout > 0:
            raise ValueError(f'request_timeout must be > 0, got {request_timeout!r}')
        names = [v.name for v in variants]
        if len(set(names)) != len(names):
            raise ValueError(f'duplicate variant names: {sorted(names)}')
        self._engine_class = engine_factory(kind=engine)
        self._round_robin = router == 'round-robin'
        self.gateway_timeout = gateway_timeout
        self.request_timeout = request_timeout
        self._queue_timeout = min(gateway_timeout, request_timeout)
        self._timeouts = math.isfinite(request_timeout)
        # Dispatched requests in dispatch order, which is arrival order (the gateway queue is
        # FIFO), so their deadlines are in order too; finished ones are dropped lazily.
        self._in_replicas: deque[SimRequest] = deque()
        self.specs: dict[str, VariantSpec] = {v.name: v for v in sorted(variants, key=_name)}
        self.variant_names: tuple[str, ...] = tuple(self.specs)
        self.targets: dict[str, int] = {}
        self.replica_seconds: dict[str, float] = dict.fromkeys(self.variant_names, 0.0)
        self.existing: dict[str, int] = dict.fromkeys(self.variant_names, 0)
        self.finished_total = 0
        self.arrivals_total = 0
        self.version = 0
        """Bumped on any change of targets or membership (the observer caches on it)."""
        self.queue: deque[SimRequest] = deque()
        self.queue_bytes = 0
        self._counter: dict[str, int] = dict.fromkeys(self.variant_names, 0)
        self._pending: dict[str, list[Replica]] = {v: [] for v in self.variant_names}
        self._ready: dict[str, list[Replica]] = {v: [] for v in self.variant_names}
        self._live: list[Replica] = []  # replicas with an engine (ready or terminating)
        self._routable: list[Replica] = []  # ready and not terminating, by name
        self._routable_names: list[str] = []
        self._ready_heap: list[tuple[float, str]] = []
        self._by_name: dict[str, Replica] = {}
        self._last_picked = ''
        self.history: list[Replica] = []
        """Replicas that have disappeared, in the order they did."""
        for spec in self.specs.values():
            self.targets[spec.name] = max(0, min(spec.initial_replicas, spec.max_replicas))
            for _ in range(self.targets[spec.name]):
                replica = self._create(variant=spec.name, now=now, startup=0.0)
                self._make_ready(replica=replica, now=now)
        self._ready_heap.clear()

    # ---- views -------------------------------------------------------------------------------

    @property
    def routable(self) -> Sequence[Replica]:
        """Ready, non-terminating replicas of every variant, in name order."""
        return self._routable

    @property
    def live(self) -> Sequence[Replica]:
        """Replicas with a running engine (ready or terminating), in name order."""
        return self._live

    def ready_count(self, *, variant: str) -> int:
        """Ready, non-terminating replicas of `variant` (the scale target's readyReplicas)."""
        return len(self._ready[variant])

    def pending_count(self, *, variant: str) -> int:
        """Created but not yet ready, non-terminating replicas of `variant`."""
        return len(self._pending[variant])

    def next_ready_time(self) -> float:
        """When the next pending replica becomes Ready (inf when none is pending)."""
        heap = self._ready_heap
        while heap:
            at, name = heap[0]
            replica = self._by_name.get(name)
            if replica is not None and replica.engine is None:
                return at
            heapq.heappop(heap)  # removed before it became ready
        return math.inf

    # ---- time --------------------------------------------------------------------------------

    def advance(self, *, until: float) -> None:
        """Run every engine step that starts before `until`; retire drained terminating replicas."""
        drained: list[Replica] | None = None
        for replica in self._live:
            if replica.next_step >= until:
                continue
            engine = replica.engine
            assert engine is not None
            done = engine.advance(until=until)
            if done:
                self.finished_total += len(done)
                last = max(r.finished for r in done)
                if last > replica.last_finish:
                    replica.last_finish = last
            step = engine.next_step_time()
            replica.next_step = math.inf if step is None else step
            if replica.terminating and engine.in_flight == 0:
                drained = [] if drained is None else drained
                drained.append(replica)
        if drained:
            for replica in drained:
                self._disappear(replica=replica, at=max(replica.terminated_at, replica.last_finish))

    def expire(self, *, now: float) -> list[SimRequest]:
        """Fail the requests whose deadline has come (arrival + timeout ≤ now): queued ones
        past the gateway (or request) time-out, and with a request time-out, those in replicas
        that have not completed by their deadline. Returns them in arrival order per place."""
        queue = self.queue
        failed: list[SimRequest] = []
        deadline = now - self._queue_timeout
        while queue and queue[0].arrival <= deadline:
            request = queue.popleft()
            request.failed = True
            request.failure = 'queue-timeout'
            self.queue_bytes -= request.input_tokens * BYTES_PER_TOKEN
            failed.append(request)
        if self._timeouts:
            self._abandon_due(now=now, into=failed)
        return failed

    def next_deadline(self) -> float:
        """The earliest deadline of a request in a replica that may still time out (inf when
        there is none, or no request time-out): the caller runs `expire` then."""
        if not self._timeouts:
            return math.inf
        pending = self._in_replicas
        timeout = self.request_timeout
        while pending:
            request = pending[0]
            # Finished by its deadline (or failed already): nothing left to time out. A request
            # finished after it is left for `expire` to fail.
            if request.failed or request.finished <= request.arrival + timeout:
                pending.popleft()
                continue
            return request.arrival + timeout
        return math.inf

    def _abandon_due(self, *, now: float, into: list[SimRequest]) -> None:
        pending = self._in_replicas
        timeout = self.request_timeout
        while pending and pending[0].arrival + timeout <= now:
            request = pending.popleft()
            if request.failed or request.finished <= request.arrival + timeout:
                continue
            request.failed = True
            request.failure = 'replica-timeout'
            into.append(request)
            if request.finished == request.finished:  # finished, after its deadline
                continue
            replica = self._by_name.get(request.replica)
            if replica is not None and replica.engine is not None:
                self._cancel(replica=replica, request=request, now=now)

    def _cancel(self, *, replica: Replica, request: SimRequest, now: float) -> None:
        engine = replica.engine
        if not isinstance(engine, CancellableEngine):
            return  # the engine serves it to its end; it has failed all the same
        engine.cancel(request=request, now=now)
        step = engine.next_step_time()
        replica.next_step = math.inf if step is None else step
        if replica.terminating and engine.in_flight == 0:
            self._disappear(
                replica=replica, at=max(replica.terminated_at, replica.last_finish, now)
            )

    def promote(self, *, now: float) -> list[str]:
        """Make the replicas due by `now` Ready, then dispatch the gateway queue. Returns names."""
        promoted: list[str] = []
        heap = self._ready_heap
        while heap and heap[0][0] <= now:
            _, name = heapq.heappop(heap)
            replica = self._by_name.get(name)
            if replica is None or replica.engine is not None:
                continue
            self._make_ready(replica=replica, now=now)
            promoted.append(name)
        if promoted:
            self._drain_queue(now=now)
        return promoted

    # ---- requests ----------------------------------------------------------------------------

    def arrive(self, *, request: SimRequest, now: float) -> None:
        """Route a new request, or queue it at the gateway when no replica can take it."""
        self.arrivals_total += 1
        if self._routable and not self.queue:
            self._dispatch(request=request, now=now)
        else:
            self.queue.append(request)
            self.queue_bytes += request.input_tokens * BYTES_PER_TOKEN
            if self._routable:  # only reachable when requests queued ahead of this one
                self._drain_queue(now=now)

    def pick(self) -> Replica | None:
        """The replica the router would choose now (None when no replica is routable)."""
        routable = self._routable
        if not routable:
            return None
        if self._round_robin:
            index = bisect_right(self._routable_names, self._last_picked)
            return routable[index if index < len(routable) else 0]
        # in_flight is waiting + running, read in one call: this loop runs for every arrival.
        best = routable[0]
        engine = best.engine
        assert engine is not None
        best_load = engine.in_flight
        for replica in routable:
            engine = replica.engine
            assert engine is not None
            load = engine.in_flight
            if load < best_load:
                best, best_load = replica, load
        return best

    def _dispatch(self, *, request: SimRequest, now: float) -> None:
        replica = self.pick()
        assert replica is not None
        assert replica.engine is not None
        self._last_picked = replica.name
        request.dispatched = now
        request.variant = replica.variant
        request.replica = replica.name
        replica.dispatched += 1
        replica.engine.submit(request=request, now=now)
        if request.failed:
            request.failure = 'rejected'
        elif self._timeouts:
            self._in_replicas.append(request)
        step = replica.engine.next_step_time()
        replica.next_step = math.inf if step is None else step

    def _drain_queue(self, *, now: float) -> None:
        queue = self.queue
        while queue and self._routable:
            request = queue.popleft()
            self.queue_bytes -= request.input_tokens * BYTES_PER_TOKEN
            self._dispatch(request=request, now=now)

    # ---- scale subresource -------------------------------------------------------------------

    def set_target(self, *, variant: str, target: int, now: float) -> tuple[int, int]:
        """Write a variant's replica target; returns (before, after) after clamping."""
        spec = self.specs[variant]
        before = self.targets[variant]
        after = max(0, min(int(target), spec.max_replicas))
        self.targets[variant] = after
        if after != before:
            self.version += 1
        pending, ready = self._pending[variant], self._ready[variant]
        have = len(pending) + len(ready)
        for _ in range(after - have):
            self._create(variant=variant, now=now, startup=spec.startup_delay)
        excess = have - after
        if excess > 0:
            doomed = sorted(pending, key=_newest_first)[:excess]
            for replica in doomed:
                pending.remove(replica)
                self._disappear(replica=replica, at=now)
            excess -= len(doomed)
        if excess > 0:
            for replica in sorted(ready, key=_fewest_in_flight)[:excess]:
                self._terminate(replica=replica, now=now)
        return before, after

    def _create(self, *, variant: str, now: float, startup: float) -> Replica:
        number = self._counter[variant]
        self._counter[variant] = number + 1
        replica = Replica(
            name=f'{variant}-{number:04d}',
            variant=variant,
            number=number,
            created=now,
            ready_at=now + max(0.0, startup),
        )
        self._by_name[replica.name] = replica
        self._pending[variant].append(replica)
        self.existing[variant] += 1
        heapq.heappush(self._ready_heap, (replica.ready_at, replica.name))
        self.version += 1
        return replica

    def _make_ready(self, *, replica: Replica, now: float) -> None:
        spec = self.specs[replica.variant]
        if replica in self._pending[replica.variant]:
            self._pending[replica.variant].remove(replica)
        replica.engine = self._engine_class(spec=spec, name=replica.name, now=now)
        replica.next_step = math.inf
        self._ready[replica.variant].append(replica)
        self._live.append(replica)
        self._live.sort(key=_name)
        self._set_routable()
        self.version += 1

    def _terminate(self, *, replica: Replica, now: float) -> None:
        self._ready[replica.variant].remove(replica)
        replica.terminating = True
        replica.terminated_at = now
        self._set_routable()
        self.version += 1
        assert replica.engine is not None
        if replica.engine.in_flight == 0:
            self._disappear(replica=replica, at=max(now, replica.last_finish))

    def _disappear(self, *, replica: Replica, at: float) -> None:
        replica.gone = at
        self.replica_seconds[replica.variant] += at - replica.created
        self.existing[replica.variant] -= 1
        del self._by_name[replica.name]
        self.history.append(replica)
        if replica.engine is not None:
            self._live.remove(replica)
        self.version += 1

    def _set_routable(self) -> None:
        self._routable = sorted((r for v in self.variant_names for r in self._ready[v]), key=_name)
        self._routable_names = [r.name for r in self._routable]

    def finish(self, *, end: float) -> dict[str, float]:
        """Replica-seconds per variant with every replica's existence cut at `end`."""
        seconds = dict.fromkeys(self.variant_names, 0.0)
        for variant, value in self.replica_seconds.items():
            seconds[variant] = value
        # Replicas that disappeared after `end` (their last step ran past it) are trimmed too.
        for replica in self.history:
            if replica.gone > end:
                seconds[replica.variant] -= replica.gone - end
        for name in sorted(self._by_name):
            replica = self._by_name[name]
            seconds[replica.variant] += max(0.0, end - replica.created)
        return seconds


def _name(item: VariantSpec | Replica) -> str:
    return item.name


def _newest_first(replica: Replica) -> tuple[float, int]:
    return (-replica.created, -replica.number)


def _fewest_in_flight(replica: Replica) -> tuple[int, float, int]:
    assert replica.engine is not None
    return (replica.engine.in_flight, -replica.created, -replica.number)
