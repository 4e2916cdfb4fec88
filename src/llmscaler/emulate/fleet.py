"""A fleet of emulated vLLM pods and their gateway, advanced to an injected clock (no I/O).

Why: the metric collectors, a real Prometheus and later the controller need something that behaves
like vLLM pods behind an inference gateway, batching and all, without GPUs. Each pod is the
simulator's replica model (`FastReplica`, vLLM V1's scheduler step), advanced to the clock.

`Emulator` holds N replicas in slots 0..N−1. `tick()` advances every replica to `clock()`; load
arrivals due by then are dispatched at their own arrival times (every replica advanced to that
time first), routed least-loaded like the gateway (fewest waiting + running, ties: lowest slot).
With no routable replica an arrival waits in the EPP flow-control queue (no timeout) until
`scale` adds one. `scale(replicas=n)` works like a StatefulSet: new replicas (fresh engines, new
pod names) are ready at once in the lowest free slots; slots ≥ n drain (no new requests, still
scraped) and disappear when empty. `submit` takes a request for one slot or the gateway; its
`Listener` hears of its progress (paced by `Pod.pace`), its finish or its rejection.

Metrics: TTFT is observed at the first tick that sees a request's first token; the rest at its
finish (see `exposition`). finished_reason is 'stop' for load requests, 'length' for submitted
ones (they generate exactly max_tokens) and for requests the replica cut at its length limit.
`show_kv_usage(slot=..., value=...)` makes the slot's page show `value` (NaN, −1, 7 ...) as
`vllm:kv_cache_usage_perc` instead of the engine's figure, as a broken exporter would, until it
is given None; the engine itself runs on. `show_sample(slot=..., name=..., value=...)` does the
same for every sample of one name (a histogram's `_sum`, a counter), whatever its labels.

What fails: an invalid spec, replicas < 0 or a NaN clock reading raise ValueError; a clock going
back is held at its latest value. `submit` to an empty or draining slot raises
`ReplicaUnavailable`; a request the replica cannot hold is rejected (400) to its listener.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Iterator
from typing import Protocol

from llmscaler.emulate.exposition import (
    RequestStats,
    SchedulerAttempts,
    prom_float,
    render_epp,
    render_replica,
)
from llmscaler.emulate.load import Arrival, Load, arrivals
from llmscaler.sim.fleet.gateway import BYTES_PER_TOKEN
from llmscaler.sim.vllm.base import check_spec
from llmscaler.sim.vllm.fast import FastReplica
from llmscaler.sim.vocabulary import SimRequest, VariantSpec


class Listener(Protocol):
    """Who waits for a request submitted over HTTP; called from `Emulator.tick`."""

    def progress(self, *, tokens: int) -> None: ...

    def finish(self, *, tokens: int, reason: str) -> None: ...

    def reject(self, *, status: int, message: str) -> None: ...


class ReplicaUnavailable(Exception):
    """The addressed replica slot has no replica, or it is draining."""


class _Tracked:
    """A request from its arrival to its finish, and who listens for it (None: nobody)."""

    __slots__ = ('arrived', 'listener', 'max_tokens', 'natural', 'request', 'seen', 'size')

    def __init__(
        self, *, request: SimRequest, natural: bool, listener: Listener | None, size: int
    ) -> None:
        self.request = request
        self.max_tokens = request.output_tokens
        self.natural = natural
        self.listener = listener
        self.size = size
        self.arrived = math.nan
        self.seen = False


class Pod:
    """One emulated vLLM replica: engine, request statistics, HTTP port (0 until bound)."""

    __slots__ = ('created', 'draining', 'engine', 'inflight', 'name', 'port', 'slot', 'stats')

    def __init__(self, *, spec: VariantSpec, name: str, slot: int, now: float) -> None:
        self.name = name
        self.slot = slot
        self.created = now
        self.engine = FastReplica(spec=spec, name=name, now=now)
        self.stats = RequestStats(max_model_len=spec.max_model_len)
        self.draining = False
        self.port = 0
        self.inflight: dict[int, _Tracked] = {}

    def see_first_token(self, tracked: _Tracked) -> None:
        """Observe the request's TTFT, once: at the first tick that sees its first token."""
        if not tracked.seen:
            tracked.seen = True
            self.stats.first_token(ttft=tracked.request.first_token - tracked.arrived)

    def pace(self) -> float:
        """Estimated seconds per decode step at the current batch and KV context."""
        engine, spec = self.engine, self.engine.spec
        context = (spec.num_gpu_blocks - 1 - engine.free_blocks) * spec.block_size
        return spec.perf.step_seconds(
            decode_seqs=max(1, engine.running), prefill_tokens=0, context_tokens=context
        )


class Emulator:
    """N replicas and the gateway in front of them, advanced to `clock()` by `tick()`."""

    def __init__(
        self,
        *,
        spec: VariantSpec,
        replicas: int,
        model_name: str,
        namespace: str,
        clock: Callable[[], float],
        load: Load | None = None,
        seed: int = 0,
        wall_start: float = 0.0,
        pool: str | None = None,
    ) -> None:
        check_spec(spec)
        self.spec = spec
        self.model_name = model_name
        self.namespace = namespace
        self.pool = pool or f'{spec.name}-pool'
        self.limit = min(spec.max_model_len, (spec.num_gpu_blocks - 1) * spec.block_size)
        self._clock = clock
        self.start = self._now = self._read_clock()
        self._wall_start = wall_start
        self._slots: list[Pod | None] = []
        self._orphans: list[Pod] = []  # draining pods whose slot went to a new pod
        self._target = 0
        self._serial = 0
        self._rid = 0
        self._queue: deque[_Tracked] = deque()
        self._queue_bytes = 0
        self._live: dict[int, _Tracked] = {}
        self._attempts: dict[str, tuple[Pod, int]] = {}
        self._arrivals: Iterator[Arrival] = (
            arrivals(load=load, seed=seed, start=self.start, max_model_len=spec.max_model_len)
            if load is not None
            else iter(())
        )
        self._next = next(self._arrivals, None)
        self._shown_kv: dict[int, float] = {}
        self._shown_samples: dict[int, dict[str, float]] = {}
        self._shown_pages: dict[int, str] = {}
        self.scale(replicas=replicas)

    # ---- reading --------------------------------------------------------------------------

    @property
    def now(self) -> float:
        return self._now

    @property
    def wall_time(self) -> float:
        """`now` as Unix time (`wall_start` at the emulator's start)."""
        return self._wall(self._now)

    @property
    def replicas(self) -> int:
        return self._target

    @property
    def slots(self) -> tuple[int, ...]:
        """Slots that hold a replica (ready or draining)."""
        return tuple(i for i, pod in enumerate(self._slots) if pod is not None)

    @property
    def pods(self) -> tuple[Pod, ...]:
        """Every replica that exists: slot order, then draining ones that lost their slot."""
        return (*(p for p in self._slots if p is not None), *self._orphans)

    def pod(self, slot: int) -> Pod | None:
        return self._slots[slot] if 0 <= slot < len(self._slots) else None

    @property
    def queue_size(self) -> int:
        return len(self._queue)

    @property
    def queue_bytes(self) -> int:
        return self._queue_bytes

    def metrics_page(self, *, slot: int) -> str | None:
        """Slot's replica `/metrics` page after a tick; None when the slot is empty."""
        self.tick()
        pod = self.pod(slot)
        if pod is None:
            return None
        engine = pod.engine
        page = render_replica(
            model_name=self.model_name,
            spec=self.spec,
            running=engine.running,
            waiting=engine.waiting,
            kv_usage=self._shown_kv.get(slot, engine.kv_usage),
            counters=engine.counters,
            stats=pod.stats,
            created=self._wall(pod.created),
        )
        planted = self._shown_pages.get(slot)
        if planted is not None:
            return planted
        shown = self._shown_samples.get(slot)
        return page if not shown else _with_samples(page, shown)

    def show_kv_usage(self, *, slot: int, value: float | None) -> None:
        """Show `value` as the slot's KV usage from now on (any float); None: the real one."""
        if value is None:
            self._shown_kv.pop(slot, None)
        else:
            self._shown_kv[slot] = value

    def show_sample(self, *, slot: int, name: str, value: float | None) -> None:
        """Show `value` (any float) for every sample named `name` on the slot's page from now
        on; None: the real ones again."""
        shown = self._shown_samples.setdefault(slot, {})
        if value is None:
            shown.pop(name, None)
        else:
            shown[name] = value

    def show_page(self, *, slot: int, page: str | None) -> None:
        """Serve `page`, whatever it holds, as the slot's `/metrics` page from now on (a hostile
        page for the collectors' caps, say); None: the replica's own page again. The replica
        goes on serving requests meanwhile."""
        if page is None:
            self._shown_pages.pop(slot, None)
        else:
            self._shown_pages[slot] = page

    def epp_page(self) -> str:
        self.tick()
        attempts = [
            SchedulerAttempts(pod_name=name, namespace=self.namespace, port=pod.port, success=n)
            for name, (pod, n) in sorted(self._attempts.items())
        ]
        return render_epp(
            model_name=self.model_name,
            pool=self.pool,
            queue_size=len(self._queue),
            queue_bytes=self._queue_bytes,
            attempts=attempts,
        )

    # ---- driving --------------------------------------------------------------------------

    def tick(self) -> float:
        """Dispatch the arrivals due, advance every replica to clock(); returns that time."""
        now = max(self._read_clock(), self._now)
        nxt = self._next
        while nxt is not None and nxt.time <= now:
            at = max(nxt.time, self._now)
            self._advance_all(at)
            self._now = at
            tracked = self._track(
                input_tokens=nxt.input_tokens,
                output_tokens=nxt.output_tokens,
                arrival=at,
                natural=True,
                listener=None,
                size=nxt.input_tokens * BYTES_PER_TOKEN,
            )
            tracked.request.prefix = nxt.prefix
            tracked.request.prefix_block = nxt.prefix_block
            self._route(tracked, at)
            nxt = next(self._arrivals, None)
        self._next = nxt
        self._advance_all(now)
        self._now = now
        self._observe(now)
        self._reap()
        return now

    def submit(
        self,
        *,
        input_tokens: int,
        max_tokens: int,
        listener: Listener,
        slot: int | None = None,
        size_bytes: int = 0,
    ) -> int:
        """A request now, to replica `slot` or (None) through the gateway; its id."""
        now = self.tick()
        pod = None
        if slot is not None:
            pod = self.pod(slot)
            if pod is None or pod.draining:
                raise ReplicaUnavailable(f'replica slot {slot} is not serving')
        tracked = self._track(
            input_tokens=input_tokens,
            output_tokens=max_tokens,
            arrival=now,
            natural=False,
            listener=listener,
            size=size_bytes,
        )
        if pod is None:
            self._route(tracked, now)
        else:
            self._dispatch(pod, tracked, now)
        return tracked.request.rid

    def detach(self, rid: int) -> None:
        """Nobody listens for request `rid` any more (it goes on in the model)."""
        tracked = self._live.get(rid)
        if tracked is not None:
            tracked.listener = None

    def abort_all(self) -> None:
        """Tell every listener the emulator stops (HTTP 503)."""
        for tracked in self._live.values():
            if tracked.listener is not None:
                tracked.listener.reject(status=503, message='the emulator is stopping')
                tracked.listener = None

    def scale(self, *, replicas: int) -> None:
        """Set the replica count: new ones ready now, slots >= replicas drain."""
        if replicas < 0:
            raise ValueError(f'replicas must be >= 0, got {replicas}')
        now = self.tick()
        self._slots.extend([None] * (replicas - len(self._slots)))
        for slot in range(replicas):
            pod = self._slots[slot]
            if pod is None or pod.draining:
                if pod is not None:
                    self._orphans.append(pod)
                name = f'{self.spec.name}-{self._serial}'
                self._serial += 1
                self._slots[slot] = Pod(spec=self.spec, name=name, slot=slot, now=now)
        for pod in self._slots[replicas:]:
            if pod is not None:
                pod.draining = True
        self._target = replicas
        while self._queue and replicas:
            tracked = self._queue.popleft()
            self._queue_bytes -= tracked.size
            self._route(tracked, now)
        self._reap()

    # ---- internals --------------------------------------------------------------------------

    def _wall(self, t: float) -> float:
        return self._wall_start + (t - self.start)

    def _read_clock(self) -> float:
        now = float(self._clock())
        if math.isnan(now):
            raise ValueError('the clock returned NaN')
        return now

    def _track(
        self,
        *,
        input_tokens: int,
        output_tokens: int,
        arrival: float,
        natural: bool,
        listener: Listener | None,
        size: int,
    ) -> _Tracked:
        self._rid += 1
        request = SimRequest(
            rid=self._rid, arrival=arrival, input_tokens=input_tokens, output_tokens=output_tokens
        )
        tracked = _Tracked(request=request, natural=natural, listener=listener, size=size)
        self._live[self._rid] = tracked
        return tracked

    def _route(self, tracked: _Tracked, at: float) -> None:
        ready = [p for p in self._slots[: self._target] if p is not None]
        if not ready:
            self._queue.append(tracked)
            self._queue_bytes += tracked.size
            return
        best = min(ready, key=lambda p: (p.engine.in_flight, p.slot))
        _, count = self._attempts.get(best.name, (best, 0))
        self._attempts[best.name] = (best, count + 1)
        self._dispatch(best, tracked, at)

    def _dispatch(self, pod: Pod, tracked: _Tracked, at: float) -> None:
        request = tracked.request
        request.dispatched = tracked.arrived = at
        pod.engine.submit(request=request, now=at)
        if request.failed:
            del self._live[request.rid]
            if tracked.listener is not None:
                tracked.listener.reject(status=400, message='the request does not fit the model')
            return
        pod.inflight[request.rid] = tracked

    def _advance_all(self, until: float) -> None:
        for pod in self.pods:
            for request in pod.engine.advance(until=until):
                self._finished(pod, request)

    def _finished(self, pod: Pod, request: SimRequest) -> None:
        tracked = pod.inflight.pop(request.rid)
        del self._live[request.rid]
        pod.see_first_token(tracked)
        cut = request.output_tokens < tracked.max_tokens
        reason = 'stop' if tracked.natural and not cut else 'length'
        pod.stats.finished(
            arrived=tracked.arrived,
            first_token=request.first_token,
            finished=request.finished,
            input_tokens=request.input_tokens,
            output_tokens=request.output_tokens,
            max_tokens=tracked.max_tokens,
            reason=reason,
        )
        if tracked.listener is not None:
            tracked.listener.finish(tokens=request.output_tokens, reason=reason)

    def _observe(self, now: float) -> None:
        for pod in self.pods:
            pace = 0.0
            for tracked in pod.inflight.values():
                request = tracked.request
                if math.isnan(request.first_token):
                    continue
                pod.see_first_token(tracked)
                if tracked.listener is not None:
                    pace = pace or pod.pace()
                    after = max(0.0, now - request.first_token)
                    # The last token is announced by the finish, with its finish_reason.
                    tokens = min(request.output_tokens - 1, 1 + int(after / pace))
                    if tokens > 0:
                        tracked.listener.progress(tokens=tokens)

    def _reap(self) -> None:
        for slot in range(self._target, len(self._slots)):
            pod = self._slots[slot]
            if pod is not None and not pod.inflight:
                self._slots[slot] = None
        while self._slots and self._slots[-1] is None:
            self._slots.pop()
        self._orphans = [p for p in self._orphans if p.inflight]


def _with_samples(page: str, shown: dict[str, float]) -> str:
    """`page` with the value of every sample whose name is in `shown` replaced."""
    lines = page.split('\n')
    for index, line in enumerate(lines):
        if line.startswith('#'):
            continue
        name = line.partition('{')[0].partition(' ')[0]
        if name in shown:
            lines[index] = f'{line.rpartition(" ")[0]} {prom_float(shown[name])}'
    return '\n'.join(lines)
