"""One model's inference gateway in the fake cluster: its load, its routing and its EPP page.

Why: in llm-d every variant of a model sits behind one gateway (EPP): requests queue there while
no replica of any variant is ready, and are routed across all variants' replicas otherwise. An
emulator (`llmscaler.emulate`) has a gateway of its own, but only for its own replicas, and its
load has a fixed rate. So the harness plays the gateway itself: it generates the model's load at a
rate a test can change, routes each request to a replica of any variant, holds requests while
none is ready, and serves the EPP page from that state. The emulators' own gateways are unused.

What: `Gateway.tick(now)` draws the Poisson arrivals due by `now` (rate from `set_rate`, seeded,
lengths fixed where given, else azure-conv log-normals clipped to the smallest usable context of
the model's variants), queues them, then hands queued requests, oldest first, to the ready replica
with the fewest requests in flight across every variant (ties: variant name, then slot), as the
EPP's queue scorer does. A request is submitted straight to that replica slot and nobody listens
for its answer, so vLLM counts it with finished_reason `length` instead of `stop`. Arrivals are
dispatched at the tick that sees them (the cluster ticks every 20 ms), not at their exact times.
The page (`render_epp`, the emulator's renderer) shows the queue and one
`inference_extension_scheduler_attempts_total` series per pod that was sent requests, named by the
*Kubernetes* pod name and the replica's port, as the real EPP reports them.

What fails: `set_rate` raises ValueError for a NaN, infinite or negative rate. A request a replica
cannot hold (longer than its cache) is dropped by the replica and counted in `rejected`.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from aiohttp import web

from llmscaler.devcluster import loopback
from llmscaler.emulate.exposition import CONTENT_TYPE, SchedulerAttempts, render_epp
from llmscaler.emulate.server import RunningEmulator
from llmscaler.sim.fleet.gateway import BYTES_PER_TOKEN
from llmscaler.sim.workload import synthetic

LENGTHS = synthetic.PRESETS['azure-conv'].lengths


@dataclass(frozen=True, slots=True)
class Request:
    """One request of the load: its prompt and output lengths in tokens."""

    input_tokens: int
    output_tokens: int

    @property
    def size(self) -> int:
        return self.input_tokens * BYTES_PER_TOKEN


@dataclass(slots=True)
class Backend:
    """One variant's emulator and how its replica slots are named in Kubernetes."""

    name: str
    running: RunningEmulator
    pod_name: Callable[[int], str]


class _Nobody:
    """The listener of a load request: its answer goes nowhere (detached right after submit)."""

    def __init__(self, gateway: Gateway) -> None:
        self._gateway = gateway

    def progress(self, *, tokens: int) -> None:
        pass

    def finish(self, *, tokens: int, reason: str) -> None:
        pass

    def reject(self, *, status: int, message: str) -> None:
        self._gateway.rejected += 1


class Gateway:
    """The gateway of `model_id`: a Poisson load, a queue, routing and the EPP `/metrics`."""

    def __init__(
        self,
        *,
        model_id: str,
        namespace: str,
        pool: str,
        seed: int = 0,
        input_tokens: int | None = None,
        output_tokens: int | None = None,
    ) -> None:
        self.model_id = model_id
        self.namespace = namespace
        self.pool = pool
        self.input_tokens = input_tokens
        self.output_tokens = output_tokens
        self.rate = 0.0
        self.dispatched = 0
        self.rejected = 0
        self.port = 0
        self.backends: dict[str, Backend] = {}
        self._rng = np.random.default_rng(seed)
        self._next = math.inf
        self._queue: deque[Request] = deque()
        self._attempts: dict[str, tuple[int, int]] = {}  # pod → (port, count)
        self._served: loopback.Served | None = None

    # ---- serving ---------------------------------------------------------------------------

    async def start(self) -> None:
        """Open the EPP page on an ephemeral 127.0.0.1 port (`port`)."""
        app = web.Application()
        app.router.add_get('/metrics', self._metrics)
        self._served = await loopback.serve(app)
        self.port = self._served.port

    async def stop(self) -> None:
        if self._served is not None:
            await self._served.close()

    async def _metrics(self, request: web.Request) -> web.Response:
        return web.Response(body=self.page().encode(), headers={'Content-Type': CONTENT_TYPE})

    def page(self) -> str:
        attempts = [
            SchedulerAttempts(pod_name=pod, namespace=self.namespace, port=port, success=count)
            for pod, (port, count) in sorted(self._attempts.items())
        ]
        return render_epp(
            model_name=self.model_id,
            pool=self.pool,
            queue_size=self.queue_size,
            queue_bytes=self.queue_bytes,
            attempts=attempts,
        )

    # ---- state -----------------------------------------------------------------------------

    @property
    def queue_size(self) -> int:
        return len(self._queue)

    @property
    def queue_bytes(self) -> int:
        return sum(r.size for r in self._queue)

    def attempts(self, pod: str) -> int:
        """Requests sent to Kubernetes pod `pod` so far."""
        return self._attempts.get(pod, (0, 0))[1]

    def set_rate(self, *, rate: float, now: float) -> None:
        """Poisson arrivals at `rate` requests/s from `now` on (0 stops the load)."""
        if not (math.isfinite(rate) and rate >= 0):
            raise ValueError(f'rate must be finite and >= 0, got {rate}')
        self.rate = rate
        # Memoryless: the next arrival after a change is drawn afresh from `now`.
        self._next = now + self._gap() if rate > 0 else math.inf

    # ---- driving ---------------------------------------------------------------------------

    def tick(self, *, now: float) -> None:
        """Queue the arrivals due by `now`, then dispatch what the ready replicas can take."""
        while self._next <= now:
            self._queue.append(self._draw())
            self._next += self._gap()
        if not self._queue:
            return
        for backend in self._sorted_backends():
            backend.running.emulator.tick()
        while self._queue:
            chosen = self._choose()
            if chosen is None:
                return
            backend, slot = chosen
            self._dispatch(backend, slot, self._queue.popleft())

    def _gap(self) -> float:
        return float(self._rng.exponential(1.0 / self.rate))

    def _draw(self) -> Request:
        limits = [b.running.emulator.limit for b in self.backends.values()]
        limit = max(2, min(limits, default=2))
        inputs, outputs = LENGTHS.sample(rng=self._rng, n=1, max_model_len=limit)
        return Request(
            input_tokens=self.input_tokens or int(inputs[0]),
            output_tokens=self.output_tokens or int(outputs[0]),
        )

    def _sorted_backends(self) -> list[Backend]:
        return [self.backends[name] for name in sorted(self.backends)]

    def _choose(self) -> tuple[Backend, int] | None:
        best: tuple[int, str, int] | None = None
        found: tuple[Backend, int] | None = None
        for backend in self._sorted_backends():
            emulator, ports = backend.running.emulator, backend.running.slot_ports
            for slot in range(emulator.replicas):
                pod = emulator.pod(slot)
                # A slot whose port is not open yet is still being scaled up: not routable.
                if pod is None or pod.draining or slot not in ports:
                    continue
                key = (pod.engine.in_flight, backend.name, slot)
                if best is None or key < best:
                    best, found = key, (backend, slot)
        return found

    def _dispatch(self, backend: Backend, slot: int, request: Request) -> None:
        emulator = backend.running.emulator
        rid = emulator.submit(
            input_tokens=request.input_tokens,
            max_tokens=request.output_tokens,
            listener=_Nobody(self),
            slot=slot,
            size_bytes=request.size,
        )
        emulator.detach(rid)
        self.dispatched += 1
        pod = backend.pod_name(slot)
        port = backend.running.slot_ports[slot]
        self._attempts[pod] = (port, self._attempts.get(pod, (0, 0))[1] + 1)
