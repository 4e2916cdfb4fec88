"""One vLLM V1 engine in virtual time: the scheduler step, the KV cache and the metric counters.

Why: the simulated fleet needs, per replica, what a real vLLM server would do with the requests
routed to it: when each one gets its first and last token, how full the KV cache is, how many
requests wait or run, and the cumulative `/metrics` counters the autoscaler reads. Two engines
implement the same semantics: `ReferenceReplica` executes one scheduler step at a time (simple,
slow, the specification), `FastReplica` (defined in `replica_fast`, importable from here) jumps
over runs of identical decode steps in closed form. Tests hold them to the same per-request
times.

Driving an engine: `submit(request=, now=)` puts a request that reached the server at `now` into
WAITING; `advance(until=)` executes every step that starts strictly before `until` (the last one
may end after it), returns the requests that finished in those steps, and moves an idle engine's
clock to `until`; `next_step_time()` is when the next step starts (None when idle); `clock` is
the end of the last step (or the idle time); `drain_requests()` takes every request out (a
replica failure or a forced removal) and returns them, counters untouched.

One step (reference/vllm.md §4; vLLM 0.33 with `scheduler_reserve_full_isl`):

1. budget = max_num_batched_tokens. RUNNING requests in admission order, while budget > 0: a
   decoding request gets 1 token, one mid-prefill gets min(remaining prompt, budget). Its KV
   blocks grow to ceil(computed tokens after the step / block_size). When the blocks are not
   there, the LAST request in RUNNING (the most recently admitted) is preempted: its blocks are
   freed, its computed tokens reset to 0 and it goes to the FRONT of WAITING; repeated until the
   allocation succeeds or the requester itself was the one preempted. A preempted request later
   re-prefills its prompt plus the tokens it had generated (recompute).
2. Only when nothing was preempted in this step: WAITING is admitted first come first served while
   budget > 0 and fewer than max_num_seqs requests run. The WHOLE prompt (plus generated tokens on
   recompute) must fit in the free blocks, and those blocks are allocated at admission; the step
   schedules min(prompt, budget) of it (chunked prefill). A head that does not fit stops the
   admission (head-of-line blocking). There is no prefix cache: every prompt is computed in full.
3. The step lasts `perf.step_seconds(decode_seqs, prefill_tokens, context_tokens)`: decode_seqs =
   requests past their prefill that got their 1 token, prefill_tokens = tokens of requests still
   prefilling, context_tokens = Σ tokens already computed (before the step) of every scheduled
   request. At the step end a request whose prompt is now complete, and every decoding one, emits
   one token; a request that has produced its output tokens finishes and frees its blocks.
   Requests that arrive during a step are considered from the next step on.
4. With nothing running or waiting the engine is idle: no steps, the clock follows the caller.

Capacity: vLLM keeps one block as the null block, so `num_gpu_blocks − 1` blocks are usable and
`kv_usage` = 1 − free/(num_gpu_blocks − 1). A request cannot be longer than max_model_len tokens,
nor than the usable cache (vLLM refuses to start otherwise; here the smaller limit is used, so a
small `num_gpu_blocks` override still works): a prompt longer than the limit, or a request with
no input or no output token, is rejected at `submit` (`failed = True`, never returned by
`advance`, like vLLM's HTTP 400); a request that would outgrow the limit stops there (vLLM's
finish reason 'length') and its `output_tokens` is lowered to what it produces, so that its
mean ITL stays right.

Counters follow vLLM's Prometheus families: `prompt_tokens_sum` / `generation_tokens_sum` are the
sums of `vllm:request_prompt_tokens` / `vllm:request_generation_tokens` (per finished request;
their count is `request_success_total`); `ttft_*` is `vllm:time_to_first_token_seconds` measured
from the arrival at the engine (`submit`'s `now`, not the trace arrival: the gateway queue is not
the server's); `itl_*` is `vllm:inter_token_latency_seconds`, one observation per token after the
first, the gap since the request's previous token; `prompt_tokens_total` (added when a request's
first token comes) and `generation_tokens_total` (every token) are the per-step counters.

What fails: a spec with fewer than 2 KV blocks, a block size, max_num_seqs,
max_num_batched_tokens or max_model_len below 1, or a perf model with a NaN, infinite or
negative term or a non-positive step overhead (time would stand still) raises ValueError at
construction; a NaN `now`/`until` raises ValueError. `advance(until=inf)` runs until idle and
leaves the clock at the last step's end. A `submit` at a time after the start of the engine's
next step first executes the steps that start before it (their finished requests come with the
next `advance`).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING

from llmscaler.sim.types import SimRequest, VariantSpec

WAITING = 0
PREFILL = 1
DECODING = 2
DONE = 3


@dataclass(slots=True)
class ReplicaCounters:
    """Cumulative counters of one engine, as its `/metrics` page would show them."""

    prompt_tokens_sum: int = 0
    generation_tokens_sum: int = 0
    request_success_total: int = 0
    ttft_sum: float = 0.0
    ttft_count: int = 0
    itl_sum: float = 0.0
    itl_count: int = 0
    preemptions_total: int = 0
    prompt_tokens_total: int = 0
    generation_tokens_total: int = 0


class Entry:
    """A request inside one engine (shared by both engines).

    `tokens` = input + generated so far; `prompt` = what the current admission prefills (tokens
    at admission); the request decodes once `computed` reached `prompt`. The fast engine keeps
    decoding entries lazily: their `computed`/`g` are only exact at registration (`d_reg`,
    `c_reg`, `g_reg`) and are advanced by the engine's step counter.
    """

    __slots__ = (
        'arrival',
        'blocks',
        'c_reg',
        'computed',
        'd_reg',
        'g',
        'g_reg',
        'last_emit',
        'prompt',
        'r',
        'seq',
        'state',
        'target',
        'tokens',
    )

    def __init__(self, *, request: SimRequest, arrival: float, target: int) -> None:
        self.r = request
        self.arrival = arrival
        self.target = target
        self.g = 0
        self.tokens = request.input_tokens
        self.computed = 0
        self.prompt = request.input_tokens
        self.blocks = 0
        self.last_emit = math.nan
        self.seq = -1
        self.state = WAITING
        self.d_reg = 0
        self.c_reg = 0
        self.g_reg = 0


def check_spec(spec: VariantSpec) -> None:
    """Raise ValueError for a spec no engine can run (see the module docstring)."""
    if spec.num_gpu_blocks < 2:
        raise ValueError(f'{spec.name}: num_gpu_blocks must be >= 2, got {spec.num_gpu_blocks}')
    for field in ('block_size', 'max_num_seqs', 'max_num_batched_tokens', 'max_model_len'):
        if getattr(spec, field) < 1:
            raise ValueError(f'{spec.name}: {field} must be >= 1, got {getattr(spec, field)}')
    perf = spec.perf
    for field in ('step_overhead', 'decode_per_seq', 'prefill_per_token', 'kv_read_per_token'):
        value = getattr(perf, field)
        if not (math.isfinite(value) and value >= 0):
            raise ValueError(f'{spec.name}: perf.{field} must be finite and >= 0, got {value}')
    if perf.step_overhead <= 0:
        raise ValueError(f'{spec.name}: perf.step_overhead must be > 0, got {perf.step_overhead}')


def blocks_for(tokens: int, block_size: int) -> int:
    return -(-tokens // block_size)


class EngineBase:
    """Both engines' shared part (validation, submission, gauges, token and finish bookkeeping)
    and the reference stepping, which `ReferenceReplica` uses as is."""

    def __init__(self, *, spec: VariantSpec, name: str, now: float) -> None:
        check_spec(spec)
        if not math.isfinite(now):
            raise ValueError(f'now must be finite, got {now}')
        self.spec = spec
        self.name = name
        self.clock = float(now)
        self.counters = ReplicaCounters()
        self._bs = spec.block_size
        self._usable = spec.num_gpu_blocks - 1
        self._free = self._usable
        self._limit = min(spec.max_model_len, self._usable * spec.block_size)
        self._waiting: deque[Entry] = deque()
        self._carry: list[SimRequest] = []
        self._seq = 0
        self._nrun = 0
        self._running: list[Entry] = []  # RUNNING of the reference stepping, admission order

    # ---- the public face -------------------------------------------------------------------

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    @property
    def running(self) -> int:
        return self._nrun

    @property
    def in_flight(self) -> int:
        return self._nrun + len(self._waiting)

    @property
    def kv_usage(self) -> float:
        return min(1.0, max(0.0, 1.0 - self._free / self._usable))

    @property
    def free_blocks(self) -> int:
        """Free KV blocks (of num_gpu_blocks − 1)."""
        return self._free

    def next_step_time(self) -> float | None:
        """Start of the next step; None when idle."""
        return self.clock if self._nrun or self._waiting else None

    def submit(self, *, request: SimRequest, now: float) -> None:
        """The request reaches this server at `now`; the next step that starts sees it."""
        if not math.isfinite(now):
            raise ValueError(f'now must be finite, got {now}')
        if self._nrun or self._waiting:
            if self.clock < now:
                self._carry = self.advance(until=now)
        elif now > self.clock:
            self.clock = now
        self._on_submit()
        request.replica = self.name
        request.variant = self.spec.name
        size, out = request.input_tokens, request.output_tokens
        if size < 1 or out < 1 or size > self._limit:
            request.failed = True
            return
        # vLLM stops a request at max_model_len tokens: after its first token when the prompt
        # fills the whole length.
        target = min(out, max(1, self._limit - size))
        if target < out:
            request.output_tokens = target
        self._waiting.append(Entry(request=request, arrival=now, target=target))

    def advance(self, *, until: float) -> list[SimRequest]:
        """Execute every step that starts before `until`; the requests that finished in them."""
        if math.isnan(until):
            raise ValueError('until must not be NaN')
        done = self._carry
        self._carry = []
        self._run(until, done)
        if not (self._nrun or self._waiting) and self.clock < until < math.inf:
            self.clock = until
        return done

    def held_blocks(self) -> int:
        """Blocks held by requests, recomputed from every request's state (O(n); for checks)."""
        return sum(e.blocks for e in self._running)

    def drain_requests(self) -> list[SimRequest]:
        """Remove every running (in admission order) then waiting request and return them."""
        out = [e.r for e in self._running] + [e.r for e in self._waiting]
        self._running = []
        self._waiting.clear()
        self._nrun = 0
        self._free = self._usable
        return out

    # ---- for the engines -------------------------------------------------------------------

    def _on_submit(self) -> None:
        """Hook: a new request invalidates whatever the engine planned."""

    def _emit(self, e: Entry, t_end: float) -> bool:
        """The request's current computation completed at t_end: one token. True when done."""
        g = e.g + 1
        e.g = g
        e.tokens += 1
        c = self.counters
        if g == 1:
            e.r.first_token = t_end
            c.ttft_sum += t_end - e.arrival
            c.ttft_count += 1
            c.prompt_tokens_total += e.r.input_tokens
        else:
            c.itl_sum += t_end - e.last_emit
            c.itl_count += 1
        e.last_emit = t_end
        c.generation_tokens_total += 1
        return g == e.target

    def _finished(self, e: Entry, t_end: float, blocks: int) -> None:
        e.state = DONE
        e.r.finished = t_end
        self._free += blocks
        self._nrun -= 1
        c = self.counters
        c.request_success_total += 1
        c.prompt_tokens_sum += e.r.input_tokens
        c.generation_tokens_sum += e.target

    def _admit(
        self, *, budget: int, into: list[Entry], scheduled: list[tuple[Entry, int]]
    ) -> tuple[int, int]:
        """Admit WAITING requests FCFS while the budget and `max_num_seqs` allow.

        Each needs blocks for its whole prompt (plus recomputed output) at once; the first that
        does not fit stops admission (head-of-line blocking). Admitted requests join `into` and
        their first chunk joins `scheduled`. Returns the budget left and the prefill tokens
        scheduled. Both engines step through this, so they admit identically.
        """
        waiting = self._waiting
        max_seqs = self.spec.max_num_seqs
        prefill = 0
        while waiting and budget > 0 and self._nrun < max_seqs:
            e = waiting[0]
            need = blocks_for(e.tokens, self._bs)
            if need > self._free:
                break
            waiting.popleft()
            self._free -= need
            e.blocks = need
            e.prompt = e.tokens
            e.state = PREFILL
            e.seq = self._seq
            self._seq += 1
            into.append(e)
            self._nrun += 1
            new = min(e.tokens, budget)
            scheduled.append((e, new))
            budget -= new
            prefill += new
        return budget, prefill

    def _to_waiting(self, e: Entry, blocks: int) -> None:
        """Preempt a running request whose `g`/`tokens` are exact (recompute later)."""
        self._free += blocks
        e.blocks = 0
        e.computed = 0
        e.state = WAITING
        self._nrun -= 1
        self._waiting.appendleft(e)
        self.counters.preemptions_total += 1
        e.r.preemptions += 1

    # ---- the reference stepping (the fast engine overrides `_run`) ---------------------------

    def _run(self, until: float, done: list[SimRequest]) -> None:
        while (self._running or self._waiting) and self.clock < until:
            self._reference_step(done)

    def _reference_step(self, done: list[SimRequest]) -> None:
        spec = self.spec
        bs = self._bs
        running = self._running
        budget = spec.max_num_batched_tokens
        scheduled: list[tuple[Entry, int]] = []
        decode_seqs = prefill_tokens = context = 0
        preempted = False
        i = 0
        while i < len(running) and budget > 0:
            e = running[i]
            new = min(e.tokens - e.computed, budget)
            # A prefilling request already holds its whole prompt's blocks.
            need = blocks_for(e.computed + new, bs) - e.blocks
            if need > 0:
                while need > self._free:
                    victim = running.pop()
                    self._to_waiting(victim, victim.blocks)
                    preempted = True
                    if victim is e:
                        break
                if e.state == WAITING:
                    break
                self._free -= need
                e.blocks += need
            if e.computed >= e.prompt:
                decode_seqs += 1
            else:
                prefill_tokens += new
            context += e.computed
            scheduled.append((e, new))
            budget -= new
            i += 1
        if not preempted:
            self._nrun = len(running)
            budget, admitted = self._admit(budget=budget, into=running, scheduled=scheduled)
            prefill_tokens += admitted
        self._nrun = len(running)
        t_end = self.clock + spec.perf.step_seconds(
            decode_seqs=decode_seqs, prefill_tokens=prefill_tokens, context_tokens=context
        )
        finished = False
        for e, new in scheduled:
            e.computed += new
            if e.computed == e.tokens:
                if self._emit(e, t_end):
                    self._finished(e, t_end, e.blocks)
                    e.blocks = 0
                    done.append(e.r)
                    finished = True
                else:
                    e.state = DECODING
        if finished:
            self._running = [e for e in running if e.state != DONE]
        self._nrun = len(self._running)
        self.clock = t_end


class ReferenceReplica(EngineBase):
    """The plain engine: one scheduler step at a time, every running request touched every step.

    It is the specification of the step semantics (module docstring); `FastReplica` must give
    the same per-request times.
    """


if TYPE_CHECKING:
    from llmscaler.sim.replica_fast import FastReplica as FastReplica
else:

    def __getattr__(name: str) -> object:
        # FastReplica lives in replica_fast, which builds on this module; importing it lazily
        # lets `from llmscaler.sim.replica import FastReplica` work without an import cycle.
        if name == 'FastReplica':
            from llmscaler.sim.replica_fast import FastReplica

            return FastReplica
        raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
