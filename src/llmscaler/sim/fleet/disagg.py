"""Disaggregated serving (P/D): a request's prefill on one replica, its decode on another.

Why: with prefill and decode pools (llm-d's P/D, vLLM's KV connectors) a request runs its
prompt and first token on a prefill replica, its KV cache moves over the network to a decode
replica, and the decode replica generates the rest. The two pools load differently (prefill is
compute-bound, decode memory-bound), and the autoscaler sizes them per role, which is what the
token analyzer's roles are for. The gateway (`sim.fleet.gateway`) routes; this module is the handoff
between the two legs.

What it models:

- **Two legs.** A request of a model whose variants have roles `prefill` and `decode` is served
  as two engine requests: the prefill leg (its prompt, one output token) on a prefill replica,
  chosen as the gateway chooses any replica; then, after the KV transfer, the decode leg on the
  decode replica with the fewest waiting + running requests (ties: lowest name): the prompt and
  the first token, of which the prompt's KV arrives computed (`SimRequest.kv_ready`: the engine
  admits it without prefilling it, `sim.vllm.base`; it computes the first token's KV and
  generates the remaining output tokens). A one-token request ends with its prefill leg.
- **KV transfer.** The prompt's KV (`kv_bytes_per_token` of the model's shape,
  `sim.hardware.datasheets`, all tensor-parallel shards: bytes per token of the whole model) moves
  over a link of `bandwidth` bytes/s with a fixed `latency` (`KvLink`); the decode leg reaches its
  replica at the prefill leg's finish + latency + bytes / bandwidth. Transfers do not contend for
  the link.
- **The request's times.** TTFT is the prefill leg's first token; the finish the decode leg's
  (so the mean ITL includes the transfer, as the client sees it); its preemptions are both legs'.
  `replica` and `variant` name the replica serving it now (the decode one once handed over).
- **Failures.** A leg the engine refuses fails the request ('rejected'). A request whose client
  gives up is cancelled in whichever replica holds its current leg (`leg`); one in transfer or
  waiting for a decode replica is dropped there. With no decode replica routable, decode legs
  wait in a FIFO queue (no time-out of their own: the client's applies) and are dispatched as
  soon as one is.

What fails: `KvLink` refuses a bandwidth that is not > 0 and finite or a latency that is not
>= 0 and finite (ValueError).
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from llmscaler.sim.fleet.pods import Replica
from llmscaler.sim.vocabulary import SimRequest


@dataclass(frozen=True, slots=True)
class KvLink:
    """The network a prefill replica's KV crosses to its decode replica."""

    kv_bytes_per_token: float
    bandwidth: float = 100e9 / 8
    """Bytes per second: 100 Gb/s by default (one RDMA NIC's share)."""
    latency: float = 0.002
    """Seconds per transfer besides its bytes (connection setup, the decode side's request)."""

    def __post_init__(self) -> None:
        if not (math.isfinite(self.bandwidth) and self.bandwidth > 0):
            raise ValueError(f'KV link bandwidth must be > 0 and finite, got {self.bandwidth}')
        if not (math.isfinite(self.latency) and self.latency >= 0):
            raise ValueError(f'KV link latency must be >= 0 and finite, got {self.latency}')
        if not (math.isfinite(self.kv_bytes_per_token) and self.kv_bytes_per_token > 0):
            raise ValueError(f'KV bytes per token must be > 0, got {self.kv_bytes_per_token}')

    def seconds(self, tokens: int) -> float:
        """Transfer time of the KV of `tokens` prompt tokens."""
        return self.latency + tokens * self.kv_bytes_per_token / self.bandwidth


class Handoff:
    """The legs of one model's requests between its prefill and decode replicas."""

    def __init__(self, *, link: KvLink) -> None:
        self.link = link
        self.decoders: list[Replica] = []
        self._parent: dict[int, SimRequest] = {}  # id(leg) → its request
        self._leg: dict[int, SimRequest] = {}  # id(request) → its leg in an engine
        self._transfers: list[tuple[float, int, SimRequest]] = []
        self._queue: deque[SimRequest] = deque()

    def prefill_leg(self, request: SimRequest) -> SimRequest:
        """The engine request of `request`'s prefill (its prompt and first token)."""
        leg = SimRequest(
            rid=request.rid,
            arrival=request.arrival,
            input_tokens=request.input_tokens,
            output_tokens=1,
            model=request.model,
            prefix=request.prefix,
            prefix_block=request.prefix_block,
        )
        self._parent[id(leg)] = request
        self._leg[id(request)] = leg
        return leg

    def leg(self, request: SimRequest) -> SimRequest | None:
        """The engine request now serving `request` (None: in transfer or queued)."""
        return self._leg.get(id(request))

    def rejected(self, leg: SimRequest) -> SimRequest:
        """The engine refused `leg`: its request fails."""
        request = self._forget(leg)
        request.failed = True
        request.failure = 'rejected'
        return request

    def finished(self, done: Sequence[SimRequest]) -> int:
        """Legs a replica finished: prefill legs go to transfer, decode legs complete their
        requests. Returns the requests completed."""
        completed = 0
        for leg in done:
            request = self._parent.pop(id(leg), None)
            if request is None:  # its client gave up already (`abandon`)
                continue
            self._leg.pop(id(request), None)
            request.preemptions += leg.preemptions
            if leg.kv_ready == 0:  # a prefill leg
                request.first_token = leg.first_token
                if request.output_tokens <= 1:
                    request.finished = leg.finished
                    completed += 1
                    continue
                at = leg.finished + self.link.seconds(request.input_tokens)
                heapq.heappush(self._transfers, (at, request.rid, request))
            else:
                request.finished = leg.finished
                request.output_tokens = leg.output_tokens + 1  # the engine may cut at its limit
                completed += 1
        return completed

    def next_transfer(self) -> float:
        """When the next KV transfer completes (inf: none in flight)."""
        return self._transfers[0][0] if self._transfers else math.inf

    def deliver(self, *, now: float) -> list[tuple[SimRequest, SimRequest]]:
        """The transfers done by `now`, then the queued ones, as (request, decode leg) to
        dispatch to `pick_decoder()` while one is routable; the rest wait in the queue."""
        transfers, queue = self._transfers, self._queue
        while transfers and transfers[0][0] <= now:
            _, _, request = heapq.heappop(transfers)
            if not request.failed:
                queue.append(request)
        out: list[tuple[SimRequest, SimRequest]] = []
        while queue and self.decoders:
            request = queue.popleft()
            if request.failed:
                continue
            leg = SimRequest(
                rid=request.rid,
                arrival=request.arrival,
                input_tokens=request.input_tokens + 1,
                output_tokens=request.output_tokens - 1,
                model=request.model,
                prefix=request.prefix,
                prefix_block=request.prefix_block,
                kv_ready=request.input_tokens,
            )
            self._parent[id(leg)] = request
            self._leg[id(request)] = leg
            out.append((request, leg))
        return out

    def pick_decoder(self) -> Replica:
        """The decode replica with the fewest waiting + running requests (ties: lowest name)."""
        best = self.decoders[0]
        best_load = math.inf
        for replica in self.decoders:
            engine = replica.engine
            assert engine is not None
            if engine.in_flight < best_load:
                best, best_load = replica, engine.in_flight
        return best

    def abandon(self, request: SimRequest) -> SimRequest | None:
        """The client of `request` gave up: its leg in an engine, for the caller to cancel
        there (None: it was in transfer or queued, and is dropped there lazily)."""
        leg = self._leg.pop(id(request), None)
        if leg is not None:
            self._parent.pop(id(leg), None)
        return leg

    def _forget(self, leg: SimRequest) -> SimRequest:
        request = self._parent.pop(id(leg))
        self._leg.pop(id(request), None)
        return request
