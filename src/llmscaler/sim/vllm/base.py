"""What both vLLM engines share: validation, submission, cancellation, gauges, counters, admission.

Why: the simulator has two engines with one semantics, `ReferenceReplica` (`sim.vllm.reference`: one
scheduler step at a time, the specification, whose docstring states the step semantics) and
`FastReplica` (`sim.vllm.fast`: runs of decode steps in closed form). Everything that is not
stepping lives here once, so that the two cannot drift apart on it: the checks of a spec, what
`submit` and `cancel` do before a step sees them, the FCFS admission both engines step
through, the token and finish bookkeeping behind the `/metrics` counters.

Driving an engine: `submit(request=, now=)` puts a request that reached the server at `now` into
WAITING; `advance(until=)` executes every step that starts strictly before `until` (the last one
may end after it), returns the requests that finished in those steps, and moves an idle engine's
clock to `until`; `next_step_time()` is when the next step starts (None when idle); `clock` is
the end of the last step (or the idle time); `cancel(request=, now=)` drops one request whose
client gave up; `drain_requests()` takes every request out (a replica failure or a forced
removal) and returns them, counters untouched.

Under that behaviour lie the plain data and arithmetic both engines use: the request states
(`WAITING`, `PREFILL`, `DECODING`, `DONE`), `Entry` (a request inside an engine),
`ReplicaCounters`, `check_spec` and the block arithmetic (`blocks_for`, `prefill_pairs`).

Counters follow vLLM's Prometheus families: `prompt_tokens_sum` / `generation_tokens_sum` are the
sums of `vllm:request_prompt_tokens` / `vllm:request_generation_tokens` (per finished request;
their count is `request_success_total`); `ttft_*` is `vllm:time_to_first_token_seconds` measured
from the arrival at the engine (`submit`'s `now`, not the trace arrival: the gateway queue is not
the server's); `itl_*` is `vllm:inter_token_latency_seconds`, one observation per token after the
first, the gap since the request's previous token; `ttft_buckets` / `tpot_buckets` count, per
bucket of `sim.vllm.latency_buckets`, each TTFT (at the first token, as vLLM observes it) and each
finished request's mean time per output token (`vllm:request_time_per_output_token_seconds`:
decode time / (output tokens − 1), 0 for one output token); `prompt_tokens_total` (added when a
request's first token comes) and `generation_tokens_total` (every token) are the per-step
counters. A cancelled request leaves the tokens it produced in the per-step counters and adds
nothing to the per-request ones (vLLM counts an aborted request in neither success nor its
histograms).

What fails: a spec with fewer than 2 KV blocks, a block size, max_num_seqs,
max_num_batched_tokens or max_model_len below 1, or a perf model with a NaN, infinite or
negative term or a non-positive step overhead (time would stand still) raises ValueError at
construction; a NaN `now`/`until` raises ValueError. `submit` and `cancel` at a time after the
start of the engine's next step first execute the steps that start before it (their finished
requests come with the next `advance`).
"""

from __future__ import annotations

import dataclasses
import math
from bisect import bisect_left
from collections import deque
from collections.abc import MutableSequence, Sequence

from llmscaler.sim.vllm.latency_buckets import ITL_BUCKETS, TTFT_BUCKETS
from llmscaler.sim.vllm.prefix_cache import PrefixCache, block_keys
from llmscaler.sim.vocabulary import PerfModel, SimRequest, VariantSpec

WAITING = 0
PREFILL = 1
DECODING = 2
DONE = 3

_PERF_FIELDS = tuple(f.name for f in dataclasses.fields(PerfModel))


@dataclasses.dataclass(slots=True)
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
    prefix_cache_queries_total: int = 0
    prefix_cache_hits_total: int = 0
    # Per-bucket (not cumulative) counts over `TTFT_BUCKETS` / `ITL_BUCKETS`, the last one
    # past every bound (+Inf): TTFT at the first token, each request's mean TPOT at its finish.
    ttft_buckets: list[int] = dataclasses.field(
        default_factory=lambda: [0] * (len(TTFT_BUCKETS) + 1)
    )
    tpot_buckets: list[int] = dataclasses.field(
        default_factory=lambda: [0] * (len(ITL_BUCKETS) + 1)
    )


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
        'keys',
        'last_emit',
        'prompt',
        'r',
        'refs',
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
        self.keys: Sequence[int] | None = None
        self.refs: MutableSequence[int] = []


def check_spec(spec: VariantSpec) -> None:
    """Raise ValueError for a spec no engine can run (see the module docstring)."""
    if spec.num_gpu_blocks < 2:
        raise ValueError(f'{spec.name}: num_gpu_blocks must be >= 2, got {spec.num_gpu_blocks}')
    for field in ('block_size', 'max_num_seqs', 'max_num_batched_tokens', 'max_model_len'):
        if getattr(spec, field) < 1:
            raise ValueError(f'{spec.name}: {field} must be >= 1, got {getattr(spec, field)}')
    perf = spec.perf
    for field in _PERF_FIELDS:
        value = getattr(perf, field)
        if field == 'sharpness':
            if not value >= 1:  # inf is the plain max
                raise ValueError(f'{spec.name}: perf.sharpness must be >= 1, got {value}')
        elif not (math.isfinite(value) and value >= 0):
            raise ValueError(f'{spec.name}: perf.{field} must be finite and >= 0, got {value}')
    if perf.step_overhead <= 0:
        raise ValueError(f'{spec.name}: perf.step_overhead must be > 0, got {perf.step_overhead}')


def blocks_for(tokens: int, block_size: int) -> int:
    return -(-tokens // block_size)


def prefill_pairs(new: int, cached: int) -> int:
    """Attention (query, key) pairs of a causal prefill chunk of `new` tokens after `cached`."""
    return new * cached + new * (new + 1) // 2


class EngineBase:
    """Both engines' shared part; an engine adds its stepping (`_run`) and, when it keeps
    requests elsewhere than `_running`, its own `held_blocks`, `drain_requests` and
    `_cancel_admitted`."""

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
        self._cache = PrefixCache() if spec.prefix_caching else None

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
        self._catch_up(now)
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

    def cancel(self, *, request: SimRequest, now: float) -> bool:
        """The client of `request` gave up at `now`: drop it from WAITING or RUNNING, freeing its
        KV blocks and its batch slot for the next step. False when the engine does not hold it
        (never submitted here, rejected, finished, or drained). Its tokens so far stay counted
        in the per-step counters; the request itself is left as it is (the caller fails it)."""
        self._catch_up(now)
        for i, e in enumerate(self._waiting):
            if e.r is request:
                del self._waiting[i]
                e.state = DONE
                return True
        return self._cancel_admitted(request)

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
        return sum(e.blocks for e in self._running) - self._shared()

    def cached_prefix(
        self, request: SimRequest, memo: dict[int, Sequence[int]] | None = None
    ) -> int:
        """Prompt tokens of `request` this engine's prefix cache holds (0 without a cache).
        `memo` keeps the request's block keys by block size for the next engine asked."""
        if self._cache is None or request.prefix is None:
            return 0
        if request.prefix_block == self._bs:
            # The trace's ids are the keys (`block_keys`): the lookup reads a few of them where
            # they are rather than copying them all.
            return (
                self._cache.lookup(request.prefix, request.input_tokens // self._bs)[0] * self._bs
            )
        keys = None if memo is None else memo.get(self._bs)
        if keys is None:
            keys = block_keys(
                prefix=request.prefix,
                prefix_block=request.prefix_block,
                tokens=request.input_tokens,
                block_size=self._bs,
            )
            if memo is not None:
                memo[self._bs] = keys
        return self._cache.lookup(keys, len(keys))[0] * self._bs

    def drain_requests(self) -> list[SimRequest]:
        """Remove every running (in admission order) then waiting request and return them."""
        out = [e.r for e in self._running] + [e.r for e in self._waiting]
        self._running = []
        self._waiting.clear()
        self._nrun = 0
        self._free = self._usable
        if self._cache is not None:
            self._cache.clear()
        return out

    # ---- for the engines -------------------------------------------------------------------

    def _run(self, until: float, done: list[SimRequest]) -> None:
        """Execute the steps that start before `until`, appending finished requests to `done`."""
        raise NotImplementedError

    def _catch_up(self, now: float) -> None:
        """Bring the engine to `now` before a submission or a cancellation changes it."""
        if not math.isfinite(now):
            raise ValueError(f'now must be finite, got {now}')
        if self._nrun or self._waiting:
            if self.clock < now:
                # advance hands back what was carried before, with what finishes now.
                self._carry = self.advance(until=now)
        elif now > self.clock:
            self.clock = now
        self._on_change()

    def _on_change(self) -> None:
        """Hook: a submission or cancellation invalidates whatever the engine planned."""

    def _cancel_admitted(self, request: SimRequest) -> bool:
        """Drop `request` from RUNNING of the reference bookkeeping; False when absent."""
        for i, e in enumerate(self._running):
            if e.r is request:
                del self._running[i]
                self._release(e, e.blocks)
                e.blocks = 0
                e.state = DONE
                self._nrun -= 1
                return True
        return False

    def _emit(self, e: Entry, t_end: float) -> bool:
        """The request's current computation completed at t_end: one token. True when done."""
        g = e.g + 1
        e.g = g
        e.tokens += 1
        c = self.counters
        if g == 1:
            e.r.first_token = t_end
            ttft = t_end - e.arrival
            c.ttft_sum += ttft
            c.ttft_count += 1
            c.ttft_buckets[bisect_left(TTFT_BUCKETS, ttft)] += 1
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
        self._release(e, blocks)
        self._nrun -= 1
        c = self.counters
        c.request_success_total += 1
        c.prompt_tokens_sum += e.r.input_tokens
        c.generation_tokens_sum += e.target
        # vLLM's per-request TPOT: decode time over the gaps, 0 for a single token.
        gaps = e.target - 1
        tpot = (t_end - e.r.first_token) / gaps if gaps > 0 else 0.0
        c.tpot_buckets[bisect_left(ITL_BUCKETS, tpot)] += 1

    def _admit(
        self, *, budget: int, into: list[Entry], scheduled: list[tuple[Entry, int]]
    ) -> tuple[int, int, int, int]:
        """Admit WAITING requests FCFS while the budget and `max_num_seqs` allow.

        Each needs blocks for its whole prompt (plus recomputed output) at once, less the
        cached blocks it finds held by others, and the first that does not fit stops admission
        (head-of-line blocking). Admitted requests join `into` and their first chunk joins
        `scheduled`. Returns the budget left, the prefill tokens scheduled, the context they
        read (their cached tokens) and their attention pairs. Both engines step through this,
        so they admit identically.
        """
        waiting = self._waiting
        max_seqs = self.spec.max_num_seqs
        cache = self._cache
        prefill = context = pairs = 0
        while waiting and budget > 0 and self._nrun < max_seqs:
            e = waiting[0]
            total = blocks_for(e.tokens, self._bs)
            if cache is None:
                if total > self._free:
                    break
                hits = 0
                self._free -= total
            else:
                keys, hits, idle = self._lookup(e, cache)
                if total - hits + idle > self._free:
                    break
                e.refs = cache.acquire(keys, hits)
                self._free -= total - hits + idle
                cache.trim(self._free)
                c = self.counters
                c.prefix_cache_queries_total += e.tokens
                c.prefix_cache_hits_total += hits * self._bs
                e.r.cached_tokens = hits * self._bs
            waiting.popleft()
            e.blocks = total
            e.prompt = e.tokens
            done = hits * self._bs
            if e.seq < 0 and e.r.kv_ready:
                # Transferred KV: present at the first admission only (a preempted request
                # recomputes), and at least one token is computed.
                done = max(done, min(e.r.kv_ready, e.tokens - 1))
                if cache is not None and e.keys:  # the received blocks are cached too
                    cache.register(e.keys, hits, min(len(e.keys), done // self._bs), e.refs)
            e.computed = done
            e.state = PREFILL
            e.seq = self._seq
            self._seq += 1
            into.append(e)
            self._nrun += 1
            new = min(e.tokens - done, budget)
            self._schedule_prefill(e, new)
            scheduled.append((e, new))
            budget -= new
            prefill += new
            context += done
            pairs += prefill_pairs(new, done)
        return budget, prefill, context, pairs

    # ---- the prefix cache (`sim.vllm.prefix_cache`) ----------------------------------------------

    def _lookup(self, e: Entry, cache: PrefixCache) -> tuple[Sequence[int], int, int]:
        """(the prompt's block keys, leading blocks cached, how many of those are free)."""
        keys = e.keys
        if keys is None:
            r = e.r
            keys = e.keys = (
                []
                if r.prefix is None
                else block_keys(
                    prefix=r.prefix,
                    prefix_block=r.prefix_block,
                    tokens=r.input_tokens,
                    block_size=self._bs,
                )
            )
        # At least one token is computed: a prompt cached to its end recomputes its last block.
        hits, idle = cache.lookup(keys, (e.tokens - 1) // self._bs)
        return keys, hits, idle

    def _head_need(self, e: Entry) -> int:
        """Free blocks the WAITING head `e` needs to be admitted now (the cache as it is)."""
        total = blocks_for(e.tokens, self._bs)
        if self._cache is None:
            return total
        _, hits, idle = self._lookup(e, self._cache)
        return total - hits + idle

    def _schedule_prefill(self, e: Entry, new: int) -> None:
        """A prefill chunk of `new` tokens of `e` is scheduled: cache the blocks it completes."""
        cache = self._cache
        if cache is None or not e.keys:
            return
        lo = e.computed // self._bs
        hi = min(len(e.keys), (e.computed + new) // self._bs)
        if hi > lo:
            cache.register(e.keys, lo, hi, e.refs)

    def _release(self, e: Entry, blocks: int) -> None:
        """`e` gives its `blocks` back; those it shares in the cache only when unshared."""
        if self._cache is None or not e.refs:
            self._free += blocks
            return
        self._free += blocks - len(e.refs) + self._cache.release(e.refs)
        e.refs = []

    def _take(self, blocks: int) -> None:
        """Take `blocks` from the free pool (evicting cached ones beyond the uncached)."""
        self._free -= blocks
        if self._cache is not None:
            self._cache.trim(self._free)

    def _shared(self) -> int:
        return 0 if self._cache is None else self._cache.shared()

    def _to_waiting(self, e: Entry, blocks: int) -> None:
        """Preempt a running request whose `g`/`tokens` are exact (recompute later)."""
        self._release(e, blocks)
        e.blocks = 0
        e.computed = 0
        e.state = WAITING
        self._nrun -= 1
        self._waiting.appendleft(e)
        self.counters.preemptions_total += 1
        e.r.preemptions += 1
