"""The inference gateway of one model: its router, its flow-control queue, its clients' time-outs.

Why: each model is served behind its own InferencePool and endpoint picker (the EPP); a request
for one model never lands on a replica of another, and each model has its own queue and
counters, which the controller reads as that model's pool metrics. The fleet (`sim.fleet.cluster`)
keeps one `Gateway` per model and the replicas' lifecycle; this module is what happens to a
request between its arrival and its replica. With disaggregated serving (prefill and decode
variants) a request goes to a prefill replica first and, after its KV transfer, to a decode
replica (`sim.fleet.disagg`).

What it models (the fleet's docstring has the whole picture):

- **Router.** An arrival goes to a Ready, non-terminating replica of the model: `least-loaded`
  picks the fewest waiting + running requests (ties: lowest name); `round-robin` takes the
  replicas in name order, continuing after the last replica picked; `prefix-aware` scores each
  replica as the inference gateway's endpoint picker does with its prefix-cache, queue and
  KV-cache scorers and picks the highest weighted sum (ties: lowest name). The scores, their
  formulas and weights are `sim.vllm.scorers`' (compiled with the engines, whose state every
  score reads). The prefix score follows the EPP's precise scorer, which tracks vLLM's KV
  events, not its approximate one, which guesses from the prefixes it routed: the simulator
  reads each replica's prefix cache itself. Without prefix caching on the replicas, the prefix
  score is always 0.
- **Queue.** With no routable replica a request waits in a FIFO queue and is dispatched, in
  arrival order, as soon as one is routable (`drain`). A request still queued `gateway_timeout`
  seconds after its arrival (or `request_timeout`, when shorter) fails, `failure =
  'queue-timeout'`, when `expire_queue` runs at or after that.
- **Client time-out.** With a finite `request_timeout`, dispatched requests are kept in
  dispatch order, which is arrival order (the queue is FIFO), so their deadlines come in order:
  `next_deadline` is the first one that may still time out, `abandon_due` fails those whose
  deadline has come and that have not completed by it (`'replica-timeout'`), for the fleet to
  cancel in their replicas.
- **Rejection.** A request the engine refuses at submission fails with `failure = 'rejected'`.

Counters, as the EPP and Prometheus have them: `arrivals_total` (requests that reached the
gateway), `finished_total` (requests its replicas finished: the fleet adds them), the queue's
size and bytes (`BYTES_PER_TOKEN` per prompt token).

What fails: nothing raises; the caller checks the time-outs (> 0, inf disables one).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections import deque
from collections.abc import Sequence
from typing import Literal, cast

from llmscaler.sim.fleet.disagg import Handoff
from llmscaler.sim.fleet.pods import Replica
from llmscaler.sim.vllm.base import EngineBase
from llmscaler.sim.vllm.scorers import best_scored
from llmscaler.sim.vocabulary import SimRequest

Router = Literal['least-loaded', 'round-robin', 'prefix-aware']
ROUTERS: tuple[Router, ...] = ('least-loaded', 'round-robin', 'prefix-aware')

BYTES_PER_TOKEN = 4
"""The EPP counts queued prompt bytes; a token is about four bytes of text."""


class Gateway:
    """One model's endpoint picker and flow-control queue (see the module docstring)."""

    def __init__(
        self,
        *,
        model: str,
        router: Router,
        gateway_timeout: float,
        request_timeout: float,
        handoff: Handoff | None = None,
        decode_variants: frozenset[str] = frozenset(),
    ) -> None:
        self.model = model
        self.handoff = handoff
        """The P/D handoff of a disaggregated model (`sim.fleet.disagg`); None: one replica serves a
        request whole."""
        self._decode_variants = decode_variants
        self._round_robin = router == 'round-robin'
        self._prefix_aware = router == 'prefix-aware'
        self.request_timeout = request_timeout
        self._queue_timeout = min(gateway_timeout, request_timeout)
        self._timeouts = math.isfinite(request_timeout)
        self.queue: deque[SimRequest] = deque()
        self.queue_bytes = 0
        self.arrivals_total = 0
        self.finished_total = 0
        # Dispatched requests in dispatch order (= arrival order); finished ones dropped lazily.
        self._in_replicas: deque[SimRequest] = deque()
        self.routable: list[Replica] = []
        self._routable_names: list[str] = []
        self._last_picked = ''

    def set_routable(self, replicas: Sequence[Replica]) -> None:
        """The model's Ready, non-terminating replicas (any order; kept in name order). With
        P/D, the decode replicas go to the handoff and the others take the arrivals."""
        ordered = sorted(replicas, key=_name)
        if self.handoff is not None:
            self.handoff.decoders = [r for r in ordered if r.variant in self._decode_variants]
            ordered = [r for r in ordered if r.variant not in self._decode_variants]
        self.routable = ordered
        self._routable_names = [r.name for r in self.routable]

    # ---- requests ----------------------------------------------------------------------------

    def arrive(self, *, request: SimRequest, now: float) -> None:
        """Route a new request, or queue it when no replica can take it."""
        self.arrivals_total += 1
        if self.routable and not self.queue:
            self._dispatch(request=request, now=now)
        else:
            self.queue.append(request)
            self.queue_bytes += request.input_tokens * BYTES_PER_TOKEN
            if self.routable:  # only reachable when requests queued ahead of this one
                self.drain(now=now)

    def pick(self, request: SimRequest | None = None) -> Replica | None:
        """The replica the router would choose now for `request` (None when no replica is
        routable; without a request, prefix-aware routing scores load only)."""
        routable = self.routable
        if not routable:
            return None
        if self._prefix_aware:
            return _best_scored(routable, request)
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
        replica = self.pick(request)
        assert replica is not None
        assert replica.engine is not None
        self._last_picked = replica.name
        request.dispatched = now
        request.variant = replica.variant
        request.replica = replica.name
        replica.dispatched += 1
        if self.handoff is not None:
            leg = self.handoff.prefill_leg(request)
            replica.engine.submit(request=leg, now=now)
            if leg.failed:
                self.handoff.rejected(leg)
        else:
            replica.engine.submit(request=request, now=now)
        if request.failed:
            request.failure = 'rejected'
        elif self._timeouts:
            self._in_replicas.append(request)
        step = replica.engine.next_step_time()
        replica.next_step = math.inf if step is None else step

    def deliver(self, *, now: float) -> None:
        """P/D: hand the requests whose KV transfer is done by `now` (and those queued for a
        decode replica) to the decode replicas (`sim.fleet.disagg`)."""
        handoff = self.handoff
        if handoff is None:
            return
        for request, leg in handoff.deliver(now=now):
            replica = handoff.pick_decoder()
            engine = replica.engine
            assert engine is not None
            request.variant = replica.variant
            request.replica = replica.name
            replica.dispatched += 1
            engine.submit(request=leg, now=now)
            if leg.failed:
                handoff.rejected(leg)
            step = engine.next_step_time()
            replica.next_step = math.inf if step is None else step

    def in_engine(self, request: SimRequest) -> SimRequest | None:
        """What an engine holds of `request`, whose client gave up: the request itself, or with
        P/D its current leg (None: in transfer or queued for a decode replica, dropped there)."""
        return request if self.handoff is None else self.handoff.abandon(request)

    def drain(self, *, now: float) -> None:
        """Dispatch queued requests, in arrival order, while a replica is routable."""
        queue = self.queue
        while queue and self.routable:
            request = queue.popleft()
            self.queue_bytes -= request.input_tokens * BYTES_PER_TOKEN
            self._dispatch(request=request, now=now)
        if self.handoff is not None:
            self.deliver(now=now)

    # ---- time-outs ---------------------------------------------------------------------------

    def expire_queue(self, *, now: float, into: list[SimRequest]) -> None:
        """Fail the queued requests past the queue time-out (arrival + timeout ≤ now)."""
        queue = self.queue
        deadline = now - self._queue_timeout
        while queue and queue[0].arrival <= deadline:
            request = queue.popleft()
            request.failed = True
            request.failure = 'queue-timeout'
            self.queue_bytes -= request.input_tokens * BYTES_PER_TOKEN
            into.append(request)

    def next_deadline(self) -> float:
        """The earliest deadline of a dispatched request that may still time out (inf when
        there is none, or no request time-out)."""
        if not self._timeouts:
            return math.inf
        pending = self._in_replicas
        timeout = self.request_timeout
        while pending:
            request = pending[0]
            # Finished by its deadline (or failed already): nothing left to time out. A request
            # finished after it is left for `abandon_due` to fail.
            if request.failed or request.finished <= request.arrival + timeout:
                pending.popleft()
                continue
            return request.arrival + timeout
        return math.inf

    def abandon_due(self, *, now: float, into: list[SimRequest]) -> None:
        """Fail the dispatched requests whose deadline is ≤ now and that had not completed by
        it (`'replica-timeout'`); appended to `into` in arrival order. Those not finished at all
        are still in their replica: the fleet cancels them there."""
        if not self._timeouts:
            return
        pending = self._in_replicas
        timeout = self.request_timeout
        while pending and pending[0].arrival + timeout <= now:
            request = pending.popleft()
            if request.failed or request.finished <= request.arrival + timeout:
                continue
            request.failed = True
            request.failure = 'replica-timeout'
            into.append(request)


def _best_scored(routable: Sequence[Replica], request: SimRequest | None) -> Replica:
    """The replica of the highest weighted score (ties: lowest name; see the module docstring)."""
    # Every routable replica has an engine of `sim.vllm`; the compiled scorer checks each.
    engines = cast('list[EngineBase]', [r.engine for r in routable])
    return routable[best_scored(engines=engines, request=request)]


def _name(replica: Replica) -> str:
    return replica.name
