"""The reference vLLM V1 engine in virtual time, one scheduler step at a time: the specification.

Why: the simulated fleet needs, per replica, what a real vLLM server would do with the requests
routed to it: when each one gets its first and last token, how full the KV cache is, how many
requests wait or run, and the cumulative `/metrics` counters the autoscaler reads. Two engines
implement the same semantics: `ReferenceReplica` (here) executes one scheduler step at a time
(simple, slow, the specification), `FastReplica` (`sim.vllm.fast`) jumps over runs of
identical decode steps in closed form. Tests hold them to the same per-request times. What the
two share (driving an engine, `cancel`, the counters, admission) is in `sim.vllm.base`.

One step (vLLM 0.33's V1 scheduler, vllm/v1/core/sched/scheduler.py, with
`scheduler_reserve_full_isl`):

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
   admission (head-of-line blocking). With prefix caching on (`VariantSpec.prefix_caching`,
   `sim.vllm.prefix_cache`), the leading prompt blocks found in the cache are not computed (the
   request starts with them computed) and those held by other requests need no free block. A
   request whose prompt KV was computed elsewhere (`SimRequest.kv_ready`: a decode replica of a
   disaggregated pair, `sim.fleet.disagg`) starts its first admission with those tokens computed.
3. The step lasts `perf.step_seconds(...)` (`PerfModel`): decode_seqs = requests past their
   prefill that got their 1 token, prefill_tokens = tokens of requests still prefilling,
   context_tokens = Σ tokens already computed (before the step) of every scheduled request,
   attention_pairs = Σ over decoding requests of their computed tokens + 1 and over prefill
   chunks of n·c + n(n+1)/2 (n tokens after c computed ones). At the step end a request whose
   prompt is now complete, and every decoding one, emits one token; a request that has produced
   its output tokens finishes and frees its blocks. Requests that arrive during a step are
   considered from the next step on.
4. With nothing running or waiting the engine is idle: no steps, the clock follows the caller.

Capacity: vLLM keeps one block as the null block, so `num_gpu_blocks − 1` blocks are usable and
`kv_usage` = 1 − free/(num_gpu_blocks − 1). A request cannot be longer than max_model_len tokens,
nor than the usable cache (vLLM refuses to start otherwise; here the smaller limit is used, so a
small `num_gpu_blocks` override still works): a prompt longer than the limit, or a request with
no input or no output token, is rejected at `submit` (`failed = True`, never returned by
`advance`, like vLLM's HTTP 400); a request that would outgrow the limit stops there (vLLM's
finish reason 'length') and its `output_tokens` is lowered to what it produces, so that its
mean ITL stays right.

Counters, `cancel` and what fails: see `sim.vllm.base`.
"""

from __future__ import annotations

from llmscaler.sim.vllm.base import (
    DECODING,
    DONE,
    WAITING,
    EngineBase,
    Entry,
    blocks_for,
    prefill_pairs,
)
from llmscaler.sim.vocabulary import SimRequest


class ReferenceReplica(EngineBase):
    """The plain engine: one scheduler step at a time, every running request touched every step.

    It is the specification of the step semantics (module docstring); `FastReplica` must give
    the same per-request times.
    """

    def _run(self, until: float, done: list[SimRequest]) -> None:
        reference_run(self, until, done)


def reference_run(engine: EngineBase, until: float, done: list[SimRequest]) -> None:
    """Execute `engine`'s steps that start before `until`, one at a time, on its `_running`
    bookkeeping (the fast engine uses this for specs its lockstep cannot represent)."""
    while (engine._running or engine._waiting) and engine.clock < until:
        _reference_step(engine, done)


def _reference_step(engine: EngineBase, done: list[SimRequest]) -> None:
    spec = engine.spec
    bs = engine._bs
    running = engine._running
    budget = spec.max_num_batched_tokens
    scheduled: list[tuple[Entry, int]] = []
    decode_seqs = prefill_tokens = context = pairs = 0
    preempted = False
    i = 0
    while i < len(running) and budget > 0:
        e = running[i]
        new = min(e.tokens - e.computed, budget)
        # A prefilling request already holds its whole prompt's blocks.
        need = blocks_for(e.computed + new, bs) - e.blocks
        if need > 0:
            while need > engine._free:
                victim = running.pop()
                engine._to_waiting(victim, victim.blocks)
                preempted = True
                if victim is e:
                    break
            if e.state == WAITING:
                break
            engine._take(need)
            e.blocks += need
        if e.computed >= e.prompt:
            decode_seqs += 1
            pairs += e.computed + 1
        else:
            prefill_tokens += new
            pairs += prefill_pairs(new, e.computed)
            engine._schedule_prefill(e, new)
        context += e.computed
        scheduled.append((e, new))
        budget -= new
        i += 1
    if not preempted:
        engine._nrun = len(running)
        budget, admitted, admitted_context, admitted_pairs = engine._admit(
            budget=budget, into=running, scheduled=scheduled
        )
        prefill_tokens += admitted
        context += admitted_context
        pairs += admitted_pairs
    engine._nrun = len(running)
    t_end = engine.clock + spec.perf.step_seconds(
        decode_seqs=decode_seqs,
        prefill_tokens=prefill_tokens,
        context_tokens=context,
        attention_pairs=pairs,
    )
    finished = False
    for e, new in scheduled:
        e.computed += new
        if e.computed == e.tokens:
            if engine._emit(e, t_end):
                engine._finished(e, t_end, e.blocks)
                e.blocks = 0
                done.append(e.r)
                finished = True
            else:
                e.state = DECODING
    if finished:
        engine._running = [e for e in running if e.state != DONE]
    engine._nrun = len(engine._running)
    engine.clock = t_end
