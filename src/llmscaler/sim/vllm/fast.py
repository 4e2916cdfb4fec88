"""The fast vLLM engine: the reference step semantics, with runs of decode steps in closed form.

Why: a 24-hour trace is millions of engine steps, and the reference engine touches every running
request in every step. This engine gives the same per-request times (up to float rounding) while
doing O(1) work per step plus O(1) per request that is admitted, prefilling or finishing, and
O(block_size) per run of decode-only steps, however long. The step semantics are the ones in
`llmscaler.sim.vllm.reference` (vLLM 0.33's V1 scheduler); only the bookkeeping differs. What both
engines share (submission, `cancel`, admission, counters) is in `llmscaler.sim.vllm.base`.

How:

- Decoding requests are kept lazily. The engine counts its steps (D). Each decoding request gets
  exactly one token per step: there are at most max_num_seqs ≤ max_num_batched_tokens of them
  (otherwise the reference stepping is used), and they all come before the one request that can
  be mid-prefill, which is always the last admitted (it took the rest of the budget, so nothing
  was admitted after it). A request registered at
  step d with c computed tokens and g generated ones therefore has c + (D − d) and g + (D − d) at
  step D, and holds ceil(computed / block_size) blocks. The engine keeps their number n,
  Σ(c − d) (so the context read in step D is Σ(c − d) + n·D), how many sit in each block phase
  (c − d) mod block_size (a request needs a new block in step D iff its computed count is a
  multiple of the block size, i.e. iff D ≡ d − c), and a heap of finish steps d + target − g.
- A step where the blocks the decoding requests need are free is done from those aggregates; the
  prefilling and newly admitted requests are handled one by one, as in the reference. A step
  where they are not free (a preemption) walks RUNNING in order like the reference (O(n)).
- A run: with only decoding requests and the waiting head unable to enter, every step until the
  next finish or the next block shortage is the same step with a context n tokens longer. Only
  the step model's attention term changes along it, and it is linear in the context on either
  side of its roofline (memory- or compute-bound), so step j of the run lasts t0 + a·j while the
  bound stays the same (`PerfModel.decode_line`) and the run's steps start at an
  arithmetic-series time. Its length is the smallest of the steps to the next finish (heap), the
  steps the free blocks last (the phase counts give the demand of any number of steps in
  O(block_size)) and the steps until the attention term changes bound (at most once per run:
  the next run starts on the other line). `advance(until)` applies the steps starting before
  `until` (from a quadratic) and leaves the rest of the run planned; `submit` and `cancel` drop
  the plan, so the next step, which starts at or after the arrival, sees the change.

What fails: as in `llmscaler.sim.vllm.reference`. A spec with max_num_seqs > max_num_batched_tokens
(a decoding request may then miss a step) is served by the reference stepping.
"""

from __future__ import annotations

import heapq
import math

from llmscaler.sim.vllm.base import (
    DECODING,
    DONE,
    PREFILL,
    EngineBase,
    Entry,
    blocks_for,
    prefill_pairs,
)
from llmscaler.sim.vllm.reference import reference_run
from llmscaler.sim.vocabulary import SimRequest, VariantSpec


class _Run:
    """A planned run of k decode-only steps starting at `start`, `done` of them applied.

    Step m lasts t0 + a·m (`PerfModel.decode_line`) and so starts at start + m·t0 + a·m(m−1)/2.
    """

    __slots__ = ('a', 'done', 'k', 'n', 'start', 't0')

    def __init__(self, *, start: float, t0: float, a: float, n: int, k: int) -> None:
        self.start = start
        self.t0 = t0
        self.a = a
        self.n = n
        self.k = k
        self.done = 0


class FastReplica(EngineBase):
    """The event-jumping engine; see the module docstring.

    A spec whose max_num_seqs exceeds max_num_batched_tokens can leave decoding requests without
    a token in a step, which the lockstep bookkeeping does not represent: such a replica runs the
    reference stepping instead (same results, reference speed).
    """

    def __init__(self, *, spec: VariantSpec, name: str, now: float) -> None:
        super().__init__(spec=spec, name=name, now=now)
        self._exact = spec.max_num_seqs > spec.max_num_batched_tokens
        self._order: list[Entry] = []  # RUNNING in admission order, finished ones left behind
        self._dead = 0
        self._x: Entry | None = None  # the request that is mid-prefill, always the last admitted
        self._cnt = [0] * self._bs
        self._sum = 0
        self._ndec = 0
        self._heap: list[tuple[int, int, Entry]] = []
        self._d = 0
        self._plan: _Run | None = None

    # ---- public ----------------------------------------------------------------------------

    def held_blocks(self) -> int:
        if self._exact:
            return super().held_blocks()
        d, bs = self._d, self._bs
        total = 0
        for e in self._order:
            if e.state == DECODING:
                total += blocks_for(e.c_reg + d - e.d_reg, bs)
            elif e.state == PREFILL:
                total += e.blocks
        return total - self._shared()

    def drain_requests(self) -> list[SimRequest]:
        if self._exact:
            return super().drain_requests()
        live = [e for e in self._order if e.state == DECODING or e.state == PREFILL]
        out = [e.r for e in live] + [e.r for e in self._waiting]
        for e in live:
            e.state = DONE
        self._waiting.clear()
        self._order = []
        self._dead = 0
        self._x = None
        self._cnt = [0] * self._bs
        self._sum = 0
        self._ndec = 0
        self._heap = []
        self._plan = None
        self._nrun = 0
        self._free = self._usable
        if self._cache is not None:
            self._cache.clear()
        return out

    # ---- lazy decoding set -----------------------------------------------------------------

    def _register(self, e: Entry, d: int) -> None:
        e.state = DECODING
        c = e.computed
        e.d_reg = d
        e.c_reg = c
        e.g_reg = e.g
        self._cnt[(d - c) % self._bs] += 1
        self._sum += c - d
        self._ndec += 1
        heapq.heappush(self._heap, (d + e.target - e.g, e.seq, e))

    def _unregister(self, e: Entry, d: int) -> None:
        """Take e out of the lazy set with its `computed`/`g`/`tokens` made exact at step d."""
        c, dr = e.c_reg, e.d_reg
        e.computed = c + d - dr
        e.g = e.g_reg + d - dr
        e.tokens = e.r.input_tokens + e.g
        self._cnt[(dr - c) % self._bs] -= 1
        self._sum -= c - dr
        self._ndec -= 1

    # ---- stepping --------------------------------------------------------------------------

    def _on_change(self) -> None:
        self._plan = None

    def _cancel_admitted(self, request: SimRequest) -> bool:
        if self._exact:
            return super()._cancel_admitted(request)
        for e in self._order:
            if e.r is not request or not (e.state == DECODING or e.state == PREFILL):
                continue
            if e.state == DECODING:
                # Its heap entry goes stale (state DONE) and is skipped where it surfaces.
                self._unregister(e, self._d)
                blocks = blocks_for(e.computed, self._bs)
            else:
                blocks = e.blocks
                if e is self._x:
                    self._x = None
            self._release(e, blocks)
            e.blocks = 0
            e.state = DONE
            self._nrun -= 1
            self._dead += 1
            return True
        return False

    def _run(self, until: float, done: list[SimRequest]) -> None:
        if self._exact:
            reference_run(self, until, done)
            return
        while (self._nrun or self._waiting) and self.clock < until:
            plan = self._plan
            if plan is None:
                plan = self._plan_run()
                if plan is None:
                    self._step(done)
                    continue
                self._plan = plan
            self._apply(plan, until)
            if plan.done == plan.k:
                self._plan = None

    def _plan_run(self) -> _Run | None:
        n = self._ndec
        if n == 0 or self._x is not None:
            return None
        d, bs, free, cnt = self._d, self._bs, self._free, self._cnt
        base = d % bs
        first = cnt[base]
        if first > free:
            return None
        spec = self.spec
        waiting = self._waiting
        if (
            waiting
            and n < spec.max_num_seqs
            and n < spec.max_num_batched_tokens
            and self._head_need(waiting[0]) <= free - first
        ):
            # The head enters in the next step. Free blocks only shrink in a run, and what the
            # head needs only grows (evictions only shorten its cached prefix).
            return None
        heap = self._heap
        while True:
            fin, seq, e = heap[0]
            if e.state == DECODING and e.seq == seq:
                break
            heapq.heappop(heap)
        k = fin - d - 1  # the finishing step itself is an ordinary step
        if k < 2:
            return None
        # Every bs steps each decoding request takes one block, so q full phase cycles use q·n;
        # the run lasts at most q cycles plus the longest partial cycle the rest still covers.
        q, rem = divmod(free, n)
        if q * bs < k:
            r = 0
            used = cnt[base]
            while r < bs - 1 and used <= rem:
                r += 1
                used += cnt[(base + r) % bs]
            k = min(k, q * bs + r)
            if k < 2:
                return None
        t0, a, bound = spec.perf.decode_line(seqs=n, context=self._sum + n * d)
        if 0 < bound < k:
            k = bound
            if k < 2:
                return None
        return _Run(start=self.clock, t0=t0, a=a, n=n, k=k)

    def _demand(self, steps: int) -> int:
        """Blocks the decoding requests allocate in the next `steps` decode-only steps."""
        bs, cnt = self._bs, self._cnt
        q, r = divmod(steps, bs)
        total = q * self._ndec
        if r:
            s = self._d % bs
            e = s + r
            total += sum(cnt[s:e]) if e <= bs else sum(cnt[s:]) + sum(cnt[: e - bs])
        return total

    def _apply(self, run: _Run, until: float) -> None:
        """Apply the run's steps that start before `until` (at least one: clock < until)."""
        done0, k = run.done, run.k
        start, t0, a = run.start, run.t0, run.a
        # Step m starts at start + m·t0 + a·m(m−1)/2 (see `_Run`).
        if start + (k - 1) * (t0 + a * (k - 2) * 0.5) < until:
            j = k
        else:
            # Steps m with start(m) < until: m < the positive root of a/2·m² + (t0 − a/2)·m − x.
            # t0 ≥ a (every context is ≥ 1 token), so b > 0 and the root is taken in the form
            # without cancellation; the loops fix float rounding.
            x = until - start
            b = t0 - 0.5 * a
            j = math.ceil(2.0 * x / (b + math.sqrt(b * b + 2.0 * a * x)))
            if j <= done0:
                j = done0 + 1
            elif j > k:
                j = k
            while j < k and start + j * (t0 + a * (j - 1) * 0.5) < until:
                j += 1
            while j > done0 + 1 and start + (j - 1) * (t0 + a * (j - 2) * 0.5) >= until:
                j -= 1
        steps = j - done0
        n = run.n
        t = start + j * (t0 + a * (j - 1) * 0.5)
        c = self.counters
        c.itl_sum += n * (t - self.clock)
        c.itl_count += n * steps
        c.generation_tokens_total += n * steps
        self._free -= self._demand(steps)
        if self._cache is not None:
            self._cache.trim(self._free)
        self._d += steps
        self.clock = t
        run.done = j

    def _step(self, done: list[SimRequest]) -> None:
        d, bs, spec = self._d, self._bs, self.spec
        n = self._ndec
        need = self._cnt[d % bs] if n else 0
        if need > self._free:
            self._preempting_step(done)
            return
        self._free -= need
        if self._cache is not None:  # inline `_take`: this runs every step
            self._cache.trim(self._free)
        budget = spec.max_num_batched_tokens - n
        context = self._sum + n * d
        pairs = context + n
        prefill = 0
        pre: list[tuple[Entry, int]] = []
        x = self._x
        if x is not None and budget > 0:
            new = min(x.tokens - x.computed, budget)
            self._schedule_prefill(x, new)
            pre.append((x, new))
            budget -= new
            prefill += new
            pairs += prefill_pairs(new, x.computed)
            context += x.computed
            self._x = None
        if self._waiting:
            budget, admitted, admitted_context, admitted_pairs = self._admit(
                budget=budget, into=self._order, scheduled=pre
            )
            prefill += admitted
            context += admitted_context
            pairs += admitted_pairs
        dur = spec.perf.step_seconds(
            decode_seqs=n, prefill_tokens=prefill, context_tokens=context, attention_pairs=pairs
        )
        self._end_step(done, n, dur, pre)

    def _preempting_step(self, done: list[SimRequest]) -> None:
        """A step whose decoding requests need more blocks than are free: walk RUNNING in order."""
        d, bs = self._d, self._bs
        order = [e for e in self._order if e.state == DECODING or e.state == PREFILL]
        self._dead = 0
        end = len(order)
        budget = self.spec.max_num_batched_tokens
        n = context = prefill = pairs = 0
        pre: list[tuple[Entry, int]] = []
        i = 0
        while i < end and budget > 0:
            e = order[i]
            if e.state == DECODING:
                c = e.c_reg + d - e.d_reg
                if c % bs == 0:
                    while self._free < 1:
                        end -= 1
                        self._preempt(order[end], d)
                        if end == i:
                            break
                    if end == i:
                        break
                    self._take(1)
                n += 1
                budget -= 1
                context += c
                pairs += c + 1
            else:
                new = min(e.tokens - e.computed, budget)
                self._schedule_prefill(e, new)
                pre.append((e, new))
                budget -= new
                prefill += new
                pairs += prefill_pairs(new, e.computed)
                context += e.computed
                self._x = None
            i += 1
        del order[end:]
        self._order = order
        # Every surviving decoding request was reached (n ≤ max_num_seqs ≤ budget), so the
        # lockstep bookkeeping still holds for them.
        assert n == self._ndec
        dur = self.spec.perf.step_seconds(
            decode_seqs=n, prefill_tokens=prefill, context_tokens=context, attention_pairs=pairs
        )
        self._end_step(done, n, dur, pre)

    def _preempt(self, e: Entry, d: int) -> None:
        if e.state == DECODING:
            self._unregister(e, d)
            blocks = blocks_for(e.computed, self._bs)
            e.last_emit = self.clock  # it got a token at the end of the previous step
        else:
            blocks = e.blocks
            if e is self._x:
                self._x = None
        self._to_waiting(e, blocks)

    def _end_step(
        self, done: list[SimRequest], n: int, dur: float, pre: list[tuple[Entry, int]]
    ) -> None:
        t_end = self.clock + dur
        d = self._d + 1
        self._d = d
        if n:
            c = self.counters
            c.itl_sum += n * dur
            c.itl_count += n
            c.generation_tokens_total += n
            heap = self._heap
            if heap[0][0] <= d:
                ended: list[Entry] = []
                while heap and heap[0][0] <= d:
                    _, seq, e = heapq.heappop(heap)
                    if e.state == DECODING and e.seq == seq:
                        ended.append(e)
                bs = self._bs
                for e in ended:
                    self._unregister(e, d)
                    self._finished(e, t_end, blocks_for(e.computed, bs))
                    done.append(e.r)
                self._dead += len(ended)
        for e, new in pre:
            e.computed += new
            if e.computed == e.tokens:
                if self._emit(e, t_end):
                    self._finished(e, t_end, e.blocks)
                    done.append(e.r)
                    self._dead += 1
                else:
                    self._register(e, d)
            else:
                self._x = e
        self.clock = t_end
        if self._dead > 32 and 2 * self._dead > len(self._order):
            self._order = [e for e in self._order if e.state == DECODING or e.state == PREFILL]
            self._dead = 0
