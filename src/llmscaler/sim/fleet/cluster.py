"""The simulated fleet: replicas and their lifecycle, a gateway per model, GPUs, the cost.

Why: the autoscaler only ever sees the fleet through scale subresources and metrics; this module
is the part of Kubernetes and of the inference gateways (the EPPs) that the simulator needs in
between: it turns replica targets into replicas that wait for GPUs, start, serve and drain, and
it hands every request to its model's gateway (`sim.fleet.gateway`: router, queue, time-outs),
keeps time, fails the requests that time out and hands P/D requests from prefill to decode.

What it models:

- **Models.** Every variant serves one model (`VariantSpec.model_name`); each model has its own
  `Gateway`, and a request goes to its model's (`SimRequest.model`; a request without one goes
  to the only model of a one-model fleet).
- **Scale subresource.** `set_target` clamps the target to [0, max_replicas] (the minimum is the
  policy's business, exactly as the API server does not enforce an HPA's minimum). More
  non-terminating replicas than wanted → remove: first the ones waiting for GPUs, then the other
  not-ready ones, newest first within each (as a ReplicaSet deletes unscheduled pods first); then
  the ready ones with the fewest in-flight requests (ties: newest, i.e. latest created, then
  last in name order, since name order is creation order). Fewer → create.
- **GPU inventory** (optional: `inventory`, GPUs per accelerator type; a type it does not name,
  or no inventory at all, is unlimited; `sim.fleet.inventory`). A replica holds `gpus_per_replica`
  GPUs of its variant's accelerator from the moment it is bound to them until it is gone (a
  terminating replica still holds them). A created replica that does not fit waits, unbound (a
  Pending pod the scheduler cannot place): it counts as pending for its variant, costs nothing
  and starts no clock. Waiting replicas are bound first come: by creation time (the scale-up's
  decision time plus the actuation delay), ties by model name, then variant name; every one
  that fits is bound. Binding is tried when replicas are created (after every target written
  at one instant: `schedule`, which the event loop calls once per instant) and when GPUs are
  freed; GPUs freed by a replica that drained during `advance` are bound at the later of that
  instant and the `advance` horizon (the event at which the fleet notices). The initial
  replicas must fit (`ValueError`).
- **Lifecycle.** A bound replica is Pending until `bound + startup_delay`, then Ready (its vLLM
  engine starts empty). A removed not-ready replica disappears at once; a removed ready one is
  Terminating: it takes no new request and disappears when its last in-flight request is done.
  The initial replicas of every variant are bound and Ready (warm) at t = 0.
- **Cost.** A replica costs from its binding until it disappears (`replica_seconds`); without an
  inventory binding is creation.
- **Gateways** (`sim.fleet.gateway`): least-loaded, round-robin or prefix-aware routing among the
  model's Ready, non-terminating replicas (with prefill and decode variants, among its prefill
  replicas, and the decode leg after the KV transfer among its decode replicas: `sim.fleet.disagg`;
  the decode replicas run after the others in `advance`, so that a transfer completing inside
  it is handed over at its instant); a FIFO queue when there is none, dispatched as soon as one
  becomes Ready, with its `gateway_timeout` (or `request_timeout`, when shorter): a request whose
  deadline equals the instant a replica becomes ready fails (expiry runs first). A request the
  engine refuses at submission (longer than the model or KV cache holds) fails, 'rejected'.
- **Client time-out.** With a finite `request_timeout` the client abandons a request that has
  not completed `request_timeout` seconds after its arrival, wherever it is. In a replica
  (waiting or running) it fails, 'replica-timeout', when `expire` runs at or after its deadline
  (`next_deadline` says when that is), and the engine drops it at once (`cancel`), freeing its
  KV blocks and batch slot for the next step; a request that the engine finished after its
  deadline (in the step in progress at the deadline) fails too: the client was gone before its
  last token.

Time: `advance(until=t)` runs every engine step that starts before t, whole (an engine executes
steps, not fractions of one), so the gauges read at t are those at the end of the step in
progress at t, at most one step (milliseconds) ahead.

Names are `f'{variant}-{n:04d}'` with a per-variant counter, so name order is creation order (up
to 10,000 replicas per variant).

What fails: `Cluster` raises `ValueError` for an unknown router or engine kind, a model with
prefill and decode variants whose KV size `sim.hardware.datasheets` does not know, duplicate variant
names, a non-positive/NaN gateway or request timeout (inf disables either), an inventory count
that is not a whole number >= 0, or initial replicas beyond the inventory; `set_target` raises
`KeyError` for an unknown variant, `arrive` for an unknown model. A negative target counts as 0,
a negative or NaN startup delay as 0. No I/O, no wall clock; every loop runs in name order.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping, Sequence

from llmscaler.sim.fleet.disagg import Handoff, KvLink
from llmscaler.sim.fleet.gateway import ROUTERS, Gateway, Router
from llmscaler.sim.fleet.inventory import GpuInventory, gpu_waits
from llmscaler.sim.fleet.pods import EngineKind, Replica, engine_factory
from llmscaler.sim.hardware import datasheets
from llmscaler.sim.vocabulary import GpuWait, SimRequest, VariantSpec


class Cluster:
    """The fleet of every variant of every model, with each model's gateway in front of it."""

    def __init__(
        self,
        *,
        variants: Sequence[VariantSpec],
        engine: EngineKind = 'fast',
        router: Router = 'least-loaded',
        gateway_timeout: float = 120.0,
        request_timeout: float = math.inf,
        inventory: Mapping[str, int] | None = None,
        now: float = 0.0,
        kv_bandwidth: float = 100e9 / 8,
        kv_latency: float = 0.002,
    ) -> None:
        if router not in ROUTERS:
            raise ValueError(f'unknown router {router!r}: expected one of {", ".join(ROUTERS)}')
        if not gateway_timeout > 0:
            raise ValueError(f'gateway_timeout must be > 0, got {gateway_timeout!r}')
        if not request_timeout > 0:
            raise ValueError(f'request_timeout must be > 0, got {request_timeout!r}')
        names = [v.name for v in variants]
        if len(set(names)) != len(names):
            raise ValueError(f'duplicate variant names: {sorted(names)}')
        self._engine_class = engine_factory(kind=engine)
        self.specs: dict[str, VariantSpec] = {v.name: v for v in sorted(variants, key=_name)}
        self.variant_names: tuple[str, ...] = tuple(self.specs)
        self.model_names: tuple[str, ...] = tuple(sorted({v.model_name for v in variants}))
        self._variants_of: dict[str, tuple[str, ...]] = {
            m: tuple(v for v, s in self.specs.items() if s.model_name == m)
            for m in self.model_names
        }
        self._gpus = GpuInventory(
            limits=inventory or {}, accelerators=(s.accelerator for s in self.specs.values())
        )
        self.inventory: dict[str, int] = self._gpus.limits
        self.gpus_used: dict[str, int] = self._gpus.used
        """GPUs bound to replicas, per accelerator type."""
        self.targets: dict[str, int] = {}
        self.replica_seconds: dict[str, float] = dict.fromkeys(self.variant_names, 0.0)
        self.existing: dict[str, int] = dict.fromkeys(self.variant_names, 0)
        """Replicas bound to GPUs and not gone, per variant: what costs."""
        self.version = 0
        """Bumped on any change of targets or membership (the observer caches on it)."""
        self._counter: dict[str, int] = dict.fromkeys(self.variant_names, 0)
        self._pending: dict[str, list[Replica]] = {v: [] for v in self.variant_names}
        self._ready: dict[str, list[Replica]] = {v: [] for v in self.variant_names}
        self._live: list[Replica] = []  # replicas with an engine (ready or terminating)
        self._ready_heap: list[tuple[float, str]] = []
        self._by_name: dict[str, Replica] = {}
        self.history: list[Replica] = []
        """Replicas that have disappeared, in the order they did."""
        self._gpus.check_initial(specs=self.specs.values())

        self.gateway_timeout = gateway_timeout
        self.request_timeout = request_timeout
        self._timeouts = math.isfinite(request_timeout)
        self.gateways: dict[str, Gateway] = {
            m: Gateway(
                model=m,
                router=router,
                gateway_timeout=gateway_timeout,
                request_timeout=request_timeout,
                handoff=_handoff(
                    [self.specs[v] for v in self._variants_of[m]],
                    bandwidth=kv_bandwidth,
                    latency=kv_latency,
                ),
                decode_variants=frozenset(
                    v for v in self._variants_of[m] if self.specs[v].role == 'decode'
                ),
            )
            for m in self.model_names
        }
        self._handoffs = tuple(g for g in self.gateways.values() if g.handoff is not None)
        self._decode_variants = frozenset(
            v
            for g in self._handoffs
            for v in self._variants_of[g.model]
            if self.specs[v].role == 'decode'
        )
        self._gateway_list = tuple(self.gateways.values())
        self._only = self._gateway_list[0] if len(self._gateway_list) == 1 else None
        self._routable: list[Replica] = []  # ready and not terminating, by name
        self._start(now=now)

    def _start(self, *, now: float) -> None:
        """The initial replicas of every variant, bound and Ready (warm) at `now`."""
        for spec in self.specs.values():
            self.targets[spec.name] = max(0, min(spec.initial_replicas, spec.max_replicas))
            for _ in range(self.targets[spec.name]):
                replica = self._create(variant=spec.name, now=now)
                self._gpus.take(spec=spec)
                self._bind(replica=replica, at=now, startup=0.0)
                self._make_ready(replica=replica, now=now)
        self._ready_heap.clear()

    # ---- views -------------------------------------------------------------------------------

    @property
    def routable(self) -> Sequence[Replica]:
        """Ready, non-terminating replicas of every variant, in name order."""
        return self._routable

    @property
    def queue(self) -> Sequence[SimRequest]:
        """Requests queued at the gateways, in arrival order (ties: model name)."""
        if self._only is not None:
            return self._only.queue
        queued = [r for g in self._gateway_list for r in g.queue]
        return sorted(queued, key=lambda r: r.arrival)  # stable: model order at equal times

    @property
    def queued(self) -> int:
        """How many requests are queued at the gateways."""
        if self._only is not None:
            return len(self._only.queue)
        return sum(len(g.queue) for g in self._gateway_list)

    @property
    def queue_bytes(self) -> int:
        return sum(g.queue_bytes for g in self._gateway_list)

    @property
    def arrivals_total(self) -> int:
        return sum(g.arrivals_total for g in self._gateway_list)

    @property
    def finished_total(self) -> int:
        return sum(g.finished_total for g in self._gateway_list)

    @property
    def live(self) -> Sequence[Replica]:
        """Replicas with a running engine (ready or terminating), in name order."""
        return self._live

    def variants_of(self, *, model: str) -> tuple[str, ...]:
        """The names of `model`'s variants, sorted."""
        return self._variants_of[model]

    def ready_count(self, *, variant: str) -> int:
        """Ready, non-terminating replicas of `variant` (the scale target's readyReplicas)."""
        return len(self._ready[variant])

    def pending_count(self, *, variant: str) -> int:
        """Created but not yet ready, non-terminating replicas of `variant` (waiting for GPUs
        or starting)."""
        return len(self._pending[variant])

    def unbound_count(self, *, variant: str) -> int:
        """Replicas of `variant` waiting for GPUs."""
        return sum(1 for r in self._pending[variant] if not r.is_bound)

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

    # ---- scale subresource -------------------------------------------------------------------

    def set_target(
        self, *, variant: str, target: int, now: float, schedule: bool = True
    ) -> tuple[int, int]:
        """Write a variant's replica target; returns (before, after) after clamping.

        With `schedule=False` the replicas it creates wait for `schedule(now)` to be bound to
        GPUs (the event loop writes every target of one instant first; see the module
        docstring); without an inventory they are bound at once either way.
        """
        spec = self.specs[variant]
        before = self.targets[variant]
        after = max(0, min(int(target), spec.max_replicas))
        self.targets[variant] = after
        if after != before:
            self.version += 1
        pending, ready = self._pending[variant], self._ready[variant]
        have = len(pending) + len(ready)
        limited = self._gpus.limited(accelerator=spec.accelerator)
        for _ in range(after - have):
            replica = self._create(variant=variant, now=now)
            if limited:
                self._gpus.waiting.append(replica)
            else:
                self._gpus.take(spec=spec)
                self._bind(replica=replica, at=now, startup=spec.startup_delay)
        excess = have - after
        if excess > 0:
            doomed = sorted(pending, key=_removal_order)[:excess]
            for replica in doomed:
                pending.remove(replica)
                self._disappear(replica=replica, at=now)
            excess -= len(doomed)
        if excess > 0:
            for replica in sorted(ready, key=_fewest_in_flight)[:excess]:
                self._terminate(replica=replica, now=now)
        if schedule and self._gpus.waiting:
            self.schedule(now=now)
        return before, after

    def schedule(self, *, now: float) -> None:
        """Bind waiting replicas to free GPUs at `now`, first come (see the module docstring)."""
        for replica in self._gpus.due(specs=self.specs):
            spec = self.specs[replica.variant]
            self._bind(replica=replica, at=max(now, replica.created), startup=spec.startup_delay)

    def _create(self, *, variant: str, now: float) -> Replica:
        number = self._counter[variant]
        self._counter[variant] = number + 1
        replica = Replica(
            name=f'{variant}-{number:04d}',
            variant=variant,
            number=number,
            created=now,
            ready_at=math.inf,
            model=self.specs[variant].model_name,
        )
        self._by_name[replica.name] = replica
        self._pending[variant].append(replica)
        self.version += 1
        return replica

    def _bind(self, *, replica: Replica, at: float, startup: float) -> None:
        # Its GPUs are taken already (`GpuInventory`); its start-up clock starts.
        replica.bound = at
        replica.ready_at = at + max(0.0, startup)
        self.existing[replica.variant] += 1
        heapq.heappush(self._ready_heap, (replica.ready_at, replica.name))
        self.version += 1

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
        if replica.is_bound:
            spec = self.specs[replica.variant]
            self.replica_seconds[replica.variant] += at - replica.bound
            self.existing[replica.variant] -= 1
            self._gpus.give_back(spec=spec)
        else:
            self._gpus.waiting.remove(replica)
        del self._by_name[replica.name]
        self.history.append(replica)
        if replica.engine is not None:
            self._live.remove(replica)
        self.version += 1

    # ---- time --------------------------------------------------------------------------------

    def advance(self, *, until: float) -> None:
        """Run every engine step that starts before `until`; retire drained terminating replicas.

        With P/D, the decode replicas come last: a KV transfer that completes before `until`
        hands its request over once they have run to that instant (`sim.fleet.disagg`)."""
        if not self._handoffs:
            self._run_replicas(self._live, until)
            return
        decoding = self._decode_variants
        self._run_replicas([r for r in self._live if r.variant not in decoding], until)
        while (t := self.next_transfer()) < until:
            self._run_replicas([r for r in self._live if r.variant in decoding], t)
            self.deliver(now=t)
        self._run_replicas([r for r in self._live if r.variant in decoding], until)

    def _run_replicas(self, replicas: Sequence[Replica], until: float) -> None:
        drained: list[Replica] | None = None
        for replica in replicas:
            if replica.next_step >= until:
                continue
            engine = replica.engine
            assert engine is not None
            done = engine.advance(until=until)
            if done:
                gateway = self.gateways[replica.model]
                handoff = gateway.handoff
                gateway.finished_total += len(done) if handoff is None else handoff.finished(done)
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
                at = max(replica.terminated_at, replica.last_finish)
                self._disappear(replica=replica, at=at)
                if self._gpus.waiting:
                    self.schedule(now=max(at, until))

    def expire(self, *, now: float) -> list[SimRequest]:
        """Fail the requests whose deadline has come (arrival + timeout ≤ now): queued ones
        past the gateway (or request) time-out, and with a request time-out, those in replicas
        that have not completed by their deadline. Returns them in arrival order per place
        (the queues, then the replicas; models in name order)."""
        failed: list[SimRequest] = []
        for gateway in self._gateway_list:
            if gateway.queue:
                gateway.expire_queue(now=now, into=failed)
        if self._timeouts:
            abandoned: list[SimRequest] = []
            for gateway in self._gateway_list:
                gateway.abandon_due(now=now, into=abandoned)
            for request in abandoned:
                if request.finished != request.finished:  # not finished: still in its replica
                    held = self.gateways[_model_of(self, request)].in_engine(request)
                    replica = self._by_name.get(request.replica)
                    if held is not None and replica is not None and replica.engine is not None:
                        self._cancel(replica=replica, request=held, now=now)
            failed += abandoned
        return failed

    def next_deadline(self) -> float:
        """The earliest deadline of a request in a replica that may still time out (inf when
        there is none, or no request time-out): the caller runs `expire` then."""
        if not self._timeouts:
            return math.inf
        if self._only is not None:
            return self._only.next_deadline()
        return min(g.next_deadline() for g in self._gateway_list)

    def next_transfer(self) -> float:
        """When the next P/D KV transfer completes (inf: none in flight; `sim.fleet.disagg`)."""
        return min(
            (g.handoff.next_transfer() for g in self._handoffs if g.handoff), default=math.inf
        )

    def deliver(self, *, now: float) -> None:
        """Hand the P/D requests whose KV transfer is done to their decode replicas."""
        for gateway in self._handoffs:
            gateway.deliver(now=now)

    def _cancel(self, *, replica: Replica, request: SimRequest, now: float) -> None:
        engine = replica.engine
        assert engine is not None  # a replica holding a request has started its engine
        engine.cancel(request=request, now=now)
        step = engine.next_step_time()
        replica.next_step = math.inf if step is None else step
        if replica.terminating and engine.in_flight == 0:
            at = max(replica.terminated_at, replica.last_finish, now)
            self._disappear(replica=replica, at=at)
            if self._gpus.waiting:
                self.schedule(now=at)

    def promote(self, *, now: float) -> list[str]:
        """Make the replicas due by `now` Ready, then dispatch the gateway queues. Returns names."""
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
            for gateway in self._gateway_list:
                gateway.drain(now=now)
        return promoted

    # ---- requests ----------------------------------------------------------------------------

    def arrive(self, *, request: SimRequest, now: float) -> None:
        """Route a new request through its model's gateway, or queue it there."""
        gateway = self.gateways.get(request.model)
        if gateway is None:
            gateway = self._gateway_for(model=request.model)
        gateway.arrive(request=request, now=now)

    def _gateway_for(self, *, model: str) -> Gateway:
        if not model and self._only is not None:
            return self._only
        raise KeyError(f'unknown model {model!r}; models: {", ".join(self.model_names)}')

    def pick(self, *, model: str = '') -> Replica | None:
        """The replica `model`'s router would choose now (None when none is routable)."""
        gateway = self.gateways.get(model) or self._gateway_for(model=model)
        return gateway.pick()

    def _set_routable(self) -> None:
        """The Ready, non-terminating replicas changed: each gateway routes to its model's."""
        everyone: list[Replica] = []
        for model, gateway in self.gateways.items():
            mine = [r for v in self._variants_of[model] for r in self._ready[v]]
            gateway.set_routable(mine)
            everyone += mine
        self._routable = sorted(everyone, key=lambda r: r.name)

    # ---- the end -----------------------------------------------------------------------------

    def finish(self, *, end: float) -> dict[str, float]:
        """Replica-seconds per variant with every replica's existence cut at `end`."""
        seconds = dict.fromkeys(self.variant_names, 0.0)
        for variant, value in self.replica_seconds.items():
            seconds[variant] = value
        # Replicas that disappeared after `end` (their last step ran past it) are trimmed too.
        for replica in self.history:
            if replica.gone > end and replica.is_bound:
                seconds[replica.variant] -= replica.gone - max(end, replica.bound)
        for name in sorted(self._by_name):
            replica = self._by_name[name]
            if replica.is_bound:
                seconds[replica.variant] += max(0.0, end - replica.bound)
        return seconds

    def gpu_waits(self, *, end: float) -> list[GpuWait]:
        """The replicas that waited for GPUs (`sim.fleet.inventory.gpu_waits`)."""
        return gpu_waits(replicas=[*self.history, *self._by_name.values()], end=end)


def _name(item: VariantSpec | Replica) -> str:
    return item.name


def _removal_order(replica: Replica) -> tuple[bool, float, int]:
    # Waiting for GPUs first, then newest first.
    return (replica.is_bound, -replica.created, -replica.number)


def _fewest_in_flight(replica: Replica) -> tuple[int, float, int]:
    assert replica.engine is not None
    return (replica.engine.in_flight, -replica.created, -replica.number)


def _handoff(specs: Sequence[VariantSpec], *, bandwidth: float, latency: float) -> Handoff | None:
    """The P/D handoff of a model with prefill and decode variants (None: served whole; a
    role without its counterpart is a label only)."""
    roles = {s.role for s in specs}
    if not {'prefill', 'decode'} <= roles:
        return None
    shape = datasheets.model(specs[0].model_id)
    return Handoff(
        link=KvLink(
            kv_bytes_per_token=float(shape.kv_bytes_per_token(tp=1)),
            bandwidth=bandwidth,
            latency=latency,
        )
    )


def _model_of(cluster: Cluster, request: SimRequest) -> str:
    return request.model if request.model in cluster.gateways else cluster.model_names[0]
