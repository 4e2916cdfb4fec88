"""The vLLM replica model (vLLM 0.33's V1 scheduler): both engines, worked numbers, agreement.

Worked numbers use the 8B-H100 preset's limits with a linear step model that keeps the
arithmetic visible: step = 7.0 ms + 0.042 ms · decoding seqs + 24 µs · prefill tokens
+ 0.052 µs · context tokens, 16-token blocks, 27,500 blocks (27,499 usable), budget 8192
tokens. The agreement tests run the presets' own roofline step models.

Speed (not a timed test): on a decode-heavy stream (3,000 requests at 4 req/s, conversation-like
prompts, ~400-token outputs, about 20 running) on the 8B-H100 preset, the reference engine takes
about 0.8 s and the fast one about 0.03 s (about 25× on the machine this was written on); the fast
engine must stay at least 10× faster there.
"""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmscaler.sim.hardware import presets
from llmscaler.sim.vllm.base import ReplicaCounters
from llmscaler.sim.vllm.fast import FastReplica
from llmscaler.sim.vllm.reference import ReferenceReplica
from llmscaler.sim.vocabulary import PerfModel, SimRequest, VariantSpec
from tests.support.sim_fixtures import (
    ENGINES,
    STEPS,
    Engine,
    assert_served_alike,
    assert_summaries_close,
    drive,
    engine,
    h100,
    roofline,
    stream,
)


def request(rid: int, *, at: float = 0.0, size: int, out: int) -> SimRequest:
    return SimRequest(rid=rid, arrival=at, input_tokens=size, output_tokens=out)


# ---- worked single requests ------------------------------------------------------------------


@ENGINES
def test_one_request_worked_example(cls: type[Engine]) -> None:
    e = engine(cls, h100())
    r = request(0, size=1000, out=10)
    e.submit(request=r, now=0.0)
    assert (e.waiting, e.running, e.next_step_time()) == (1, 0, 0.0)
    # Step 1 (starts at 0 < 1e-4): prefill 1000 tokens, nothing read: 7 ms + 1000 · 24 µs = 31 ms.
    assert e.advance(until=1e-4) == []
    assert e.clock == pytest.approx(0.031)
    assert r.first_token == pytest.approx(0.031)
    assert (e.waiting, e.running) == (0, 1)
    # ceil(1000 / 16) = 63 blocks of 27,499.
    assert e.kv_usage == pytest.approx(63 / 27_499)
    # Steps 2–10 decode one token each, reading 1000 … 1008 context tokens:
    # 9 · (7 + 0.042) ms + 0.052 µs · 9036 = 63.378 ms + 0.469872 ms = 63.847872 ms.
    done = e.advance(until=10.0)
    assert done == [r]
    assert r.finished == pytest.approx(0.031 + 0.063847872, abs=1e-12)
    assert r.ttft == pytest.approx(0.031)
    assert r.mean_itl == pytest.approx(0.063847872 / 9)
    assert (e.waiting, e.running, e.in_flight, e.kv_usage) == (0, 0, 0, 0.0)
    assert e.next_step_time() is None
    assert e.clock == 10.0  # idle: the clock follows the caller
    c = e.counters
    assert (c.request_success_total, c.prompt_tokens_sum, c.generation_tokens_sum) == (1, 1000, 10)
    assert (c.prompt_tokens_total, c.generation_tokens_total) == (1000, 10)
    assert (c.ttft_count, c.itl_count, c.preemptions_total) == (1, 9, 0)
    assert c.ttft_sum == pytest.approx(0.031)
    assert c.itl_sum == pytest.approx(0.063847872)


@ENGINES
def test_chunked_prefill_of_a_long_prompt(cls: type[Engine]) -> None:
    e = engine(cls, h100())
    r = request(0, size=20_000, out=1)
    e.submit(request=r, now=0.0)
    # Step 1: 8192 tokens, no context: 7 ms + 196.608 ms = 203.608 ms. The whole prompt's
    # 20,000 / 16 = 1250 blocks are reserved at admission.
    e.advance(until=0.1)
    assert e.clock == pytest.approx(0.203608)
    assert e.kv_usage == pytest.approx(1250 / 27_499)
    assert math.isnan(r.first_token)
    # Step 2: 8192 tokens reading 8192: 203.608 + 0.425984 = 204.033984 ms.
    # Step 3: 3616 tokens reading 16,384: 7 + 86.784 + 0.851968 = 94.635968 ms.
    assert e.advance(until=1.0) == [r]
    assert r.first_token == pytest.approx(0.203608 + 0.204033984 + 0.094635968, abs=1e-12)
    assert r.finished == r.first_token  # one output token
    assert e.counters.itl_count == 0


@ENGINES
def test_requests_arriving_during_a_step_join_the_next_one(cls: type[Engine]) -> None:
    e = engine(cls, h100())
    a = request(0, size=1000, out=10)
    b = request(1, at=0.01, size=100, out=2)
    e.submit(request=a, now=0.0)
    e.advance(until=0.01)  # step 1 runs 0 → 31 ms
    e.submit(request=b, now=0.01)
    e.advance(until=0.0311)
    # Step 2 from 31 ms: a decodes (context 1000), b prefills 100 tokens:
    # 7 + 0.042 + 2.4 + 0.052 = 9.494 ms → b's first token at 40.494 ms.
    assert b.first_token == pytest.approx(0.040494)
    assert e.counters.ttft_sum == pytest.approx(0.031 + (0.040494 - 0.01))


@ENGINES
def test_max_num_seqs_caps_the_batch(cls: type[Engine]) -> None:
    e = engine(cls, h100(max_num_seqs=2))
    rs = [request(i, size=100, out=50) for i in range(3)]
    for r in rs:
        e.submit(request=r, now=0.0)
    e.advance(until=1e-6)
    assert (e.running, e.waiting) == (2, 1)
    e.advance(until=math.inf)
    # The two first ones finish in the same step; the third enters the next one and prefills
    # 100 tokens alone: 7 + 2.4 = 9.4 ms.
    assert rs[0].finished == rs[1].finished
    assert rs[2].first_token == pytest.approx(rs[0].finished + 0.0094)


@ENGINES
def test_head_of_line_blocking(cls: type[Engine]) -> None:
    # 100 usable blocks. a holds 63 (1000 tokens) and grows; b needs 50 and does not fit; c
    # needs 1 and would fit, but does not jump the queue.
    e = engine(cls, h100(num_gpu_blocks=101))
    a = request(0, size=1000, out=100)
    b = request(1, at=0.001, size=800, out=5)
    c = request(2, at=0.002, size=16, out=5)
    e.submit(request=a, now=0.0)
    for r in (b, c):
        e.advance(until=r.arrival)
        e.submit(request=r, now=r.arrival)
    e.advance(until=0.5)
    assert (e.running, e.waiting) == (1, 2)
    e.advance(until=math.inf)
    assert b.first_token > a.finished
    assert c.first_token == b.first_token  # both admitted in the step after a finished


@ENGINES
def test_admission_reserves_the_whole_prompt(cls: type[Engine]) -> None:
    # 1000 usable blocks, budget 2048: a (10,000 tokens) reserves 625 blocks at once although
    # its first chunk only computes 2048 tokens; b (8000 tokens = 500 blocks) then does not fit
    # into the 375 left, even though a 2048-token chunk of it would.
    spec = h100(num_gpu_blocks=1001, max_num_batched_tokens=2048, max_num_seqs=256)
    e = engine(cls, spec)
    a = request(0, size=10_000, out=3)
    b = request(1, size=8000, out=3)
    e.submit(request=a, now=0.0)
    e.submit(request=b, now=0.0)
    e.advance(until=1e-6)
    assert (e.running, e.waiting) == (1, 1)
    assert e.kv_usage == pytest.approx(0.625)
    e.advance(until=math.inf)
    assert b.first_token > a.finished
    assert e.counters.preemptions_total == 0


@ENGINES
def test_preemption_of_the_latest_request_and_recompute(cls: type[Engine]) -> None:
    # 10 usable blocks. a and b (64 tokens = 4 blocks each) are admitted together and decode.
    # Both take a 5th block at context 64; at context 80 a needs a 6th and none is free: b, the
    # last admitted, is preempted (frees 5), a takes one → a holds 6 of 10 blocks.
    e = engine(cls, h100(num_gpu_blocks=11))
    a = request(0, size=64, out=60)
    b = request(1, size=64, out=60)
    e.submit(request=a, now=0.0)
    e.submit(request=b, now=0.0)
    while e.counters.preemptions_total == 0:
        e.advance(until=e.clock + 1e-9)
    assert (e.running, e.waiting) == (1, 1)
    assert e.kv_usage == pytest.approx(0.6)
    # The preempting step ends at: prefill 128 tokens (7 + 3.072 = 10.072 ms) + 16 decode
    # steps of two (16 · 7.084 ms + 0.104 µs · Σ 64…79 = 113.344 + 0.118976 ms) + a alone at
    # context 80 (7.042 + 0.00416 ms) = 130.581136 ms.
    assert e.clock == pytest.approx(0.130581136, abs=1e-12)
    assert (a.preemptions, b.preemptions) == (0, 1)
    e.advance(until=math.inf)
    # b had 17 tokens (65 + 16 = 81 with its prompt) and waits until a is done (a only grows).
    # Then it re-prefills 81 tokens (7 + 1.944 = 8.944 ms), emitting token 18, and decodes 42
    # more reading 81 … 122: 42 · 7.042 ms + 0.052 µs · 4263 = 295.764 + 0.221676 ms.
    assert b.finished - a.finished == pytest.approx(0.008944 + 0.295764 + 0.000221676, abs=1e-12)
    c = e.counters
    assert (c.preemptions_total, c.request_success_total) == (1, 2)
    # Every token after the first is one ITL observation, the recompute gap included.
    assert c.itl_count == 59 + 59
    assert c.itl_sum == pytest.approx((a.finished - a.first_token) + (b.finished - b.first_token))
    # b's first token is not re-observed after the recompute.
    assert c.ttft_count == 2
    assert b.first_token == a.first_token == pytest.approx(0.010072)


@ENGINES
def test_counters_sum_over_finished_requests(cls: type[Engine]) -> None:
    e = engine(cls, h100())
    rs = [request(i, at=0.05 * i, size=200 + 50 * i, out=5 + 3 * i) for i in range(6)]
    # The gateway held request 5 for a second: vLLM's TTFT counts from the engine's arrival.
    e.submit(request=rs[0], now=0.0)
    done: list[SimRequest] = []
    for r in rs[1:5]:
        done += e.advance(until=r.arrival)
        e.submit(request=r, now=r.arrival)
    done += e.advance(until=1.05)
    e.submit(request=rs[5], now=1.05)
    done += e.advance(until=math.inf)
    assert sorted(r.rid for r in done) == [0, 1, 2, 3, 4, 5]
    c = e.counters
    assert c.request_success_total == 6
    assert c.prompt_tokens_sum == sum(200 + 50 * i for i in range(6)) == 1950
    assert c.generation_tokens_sum == sum(5 + 3 * i for i in range(6)) == 75
    assert c.itl_count == 75 - 6
    assert c.itl_sum == pytest.approx(sum(r.finished - r.first_token for r in rs))
    assert c.ttft_count == 6
    assert c.ttft_sum == pytest.approx(sum(r.ttft for r in rs[:5]) + rs[5].first_token - 1.05)
    assert rs[5].ttft == pytest.approx(rs[5].first_token - 0.25)


# ---- limits, rejection, edges ----------------------------------------------------------------


@ENGINES
def test_prompts_beyond_the_limit_are_rejected_and_outputs_truncated(cls: type[Engine]) -> None:
    # 10 usable blocks of 16 → at most 160 tokens per request.
    e = engine(cls, h100(num_gpu_blocks=11))
    too_long = request(0, size=161, out=5)
    empty = request(1, size=0, out=5)
    truncated = request(2, size=150, out=50)
    full = request(3, size=160, out=5)
    for r in (too_long, empty, truncated, full):
        e.submit(request=r, now=0.0)
    assert (too_long.failed, empty.failed, truncated.failed, full.failed) == (
        True,
        True,
        False,
        False,
    )
    assert e.waiting == 2
    done = e.advance(until=math.inf)
    assert done == [truncated, full]
    # 150 + 10 = 160 tokens: vLLM's 'length' stop; a 160-token prompt gets exactly one token.
    assert (truncated.output_tokens, full.output_tokens) == (10, 1)
    assert e.counters.generation_tokens_sum == 11
    assert math.isnan(too_long.finished)


@ENGINES
def test_submit_catches_up_with_the_steps_before_it(cls: type[Engine]) -> None:
    e = engine(cls, h100())
    a = request(0, size=1000, out=10)
    b = request(1, at=1.0, size=500, out=1)
    e.submit(request=a, now=0.0)
    e.submit(request=b, now=1.0)  # a ran (and finished) before b arrived
    assert a.finished == pytest.approx(0.094847872)
    assert e.advance(until=2.0) == [a, b]
    # b alone: 7 ms + 500 · 24 µs = 19 ms after its arrival.
    assert b.first_token == pytest.approx(1.019)


@ENGINES
def test_idle_engine_and_bad_times(cls: type[Engine]) -> None:
    e = engine(cls, h100(), now=5.0)
    assert e.advance(until=3.0) == []
    assert e.clock == 5.0
    assert e.advance(until=math.inf) == []
    assert e.clock == 5.0
    assert e.kv_usage == 0.0
    assert e.counters == ReplicaCounters()
    with pytest.raises(ValueError, match='NaN'):
        e.advance(until=math.nan)
    with pytest.raises(ValueError, match='finite'):
        e.submit(request=request(0, size=10, out=1), now=math.nan)
    with pytest.raises(ValueError, match='finite'):
        cls(spec=h100(), name='x', now=math.inf)


@ENGINES
def test_a_late_submission_to_an_idle_engine_starts_at_its_arrival(cls: type[Engine]) -> None:
    e = engine(cls, h100())
    r = request(0, at=7.0, size=100, out=1)
    e.submit(request=r, now=7.0)
    assert e.next_step_time() == 7.0
    e.advance(until=math.inf)
    assert r.first_token == pytest.approx(7.0 + 0.007 + 100 * 24e-6)


@ENGINES
@pytest.mark.parametrize(
    'spec',
    [
        h100(num_gpu_blocks=1),
        h100(block_size=0),
        h100(max_num_seqs=0),
        h100(max_num_batched_tokens=0),
        presets.preset(
            name='llama-3.1-8b-h100',
            perf=PerfModel(
                step_overhead=0.0, decode_per_seq=0.0, prefill_per_token=0.0, kv_read_per_token=0.0
            ),
        ),
        presets.preset(
            name='llama-3.1-8b-h100',
            perf=PerfModel(
                step_overhead=0.007,
                decode_per_seq=math.nan,
                prefill_per_token=0.0,
                kv_read_per_token=0.0,
            ),
        ),
        presets.preset(
            name='llama-3.1-8b-h100',
            perf=PerfModel(
                step_overhead=0.007,
                decode_per_seq=0.0,
                prefill_per_token=-1.0,
                kv_read_per_token=0.0,
            ),
        ),
    ],
)
def test_unrunnable_specs_are_rejected(cls: type[Engine], spec: VariantSpec) -> None:
    with pytest.raises(ValueError, match='must be'):
        engine(cls, spec)


# ---- cancellation (a client that gave up) --------------------------------------------------


@ENGINES
def test_cancel_a_waiting_request(cls: type[Engine]) -> None:
    e = engine(cls, h100(max_num_seqs=1))
    a, b = request(0, size=100, out=50), request(1, size=100, out=5)
    e.submit(request=a, now=0.0)
    e.submit(request=b, now=0.0)
    e.advance(until=0.01)
    assert (e.running, e.waiting) == (1, 1)
    assert e.cancel(request=b, now=0.05) is True
    assert (e.running, e.waiting) == (1, 0)
    assert e.advance(until=math.inf) == [a]
    assert math.isnan(b.finished)
    assert math.isnan(b.first_token)
    assert e.cancel(request=b, now=10.0) is False  # gone already


@ENGINES
def test_cancel_a_decoding_request_frees_its_blocks_and_its_seat(cls: type[Engine]) -> None:
    e = engine(cls, h100())
    a, b = request(0, size=1000, out=200), request(1, size=1000, out=200)
    e.submit(request=a, now=0.0)
    e.submit(request=b, now=0.0)
    e.advance(until=0.5)  # both decoding, mid-run for the fast engine
    assert e.running == 2
    held = e.held_blocks()
    assert e.cancel(request=a, now=0.5) is True
    # a held ceil(computed / 16) blocks; b keeps its own.
    assert e.held_blocks() < held
    assert e.held_blocks() == 27_499 - e.free_blocks
    assert (e.running, e.waiting) == (1, 0)
    step = e.clock
    g = e.counters.generation_tokens_total // 2  # both had produced g tokens in lockstep
    done = e.advance(until=math.inf)
    assert done == [b]
    # From there b decodes alone: step j lasts 7.042 ms + 0.052 µs · (999 + g + j) tokens read.
    left = 200 - g
    alone = left * 0.007042 + 0.052e-6 * sum(999 + g + j for j in range(left))
    assert b.finished - step == pytest.approx(alone, rel=1e-9)
    assert math.isnan(a.finished)
    assert e.counters.request_success_total == 1
    # a's tokens stay in the per-step counter, not in the per-request ones.
    assert e.counters.generation_tokens_sum == 200
    assert e.counters.generation_tokens_total > 200


@ENGINES
def test_cancel_a_prefilling_request_frees_its_whole_prompt(cls: type[Engine]) -> None:
    e = engine(cls, h100())
    long, short = request(0, size=20_000, out=5), request(1, at=0.3, size=100, out=2)
    e.submit(request=long, now=0.0)
    e.advance(until=0.1)  # the first 8192-token chunk is running
    assert e.kv_usage == pytest.approx(1250 / 27_499)
    assert e.cancel(request=long, now=0.1) is True
    # The step in progress at 0.1 ran to its end (0.2036 s); the engine is empty from there.
    assert (e.running, e.waiting, e.kv_usage, e.next_step_time()) == (0, 0, 0.0, None)
    assert e.clock == pytest.approx(0.203608)
    e.submit(request=short, now=0.3)
    assert e.advance(until=math.inf) == [short]
    assert short.first_token == pytest.approx(0.3 + 0.007 + 100 * 24e-6)


@ENGINES
def test_cancel_catches_up_and_misses_a_finished_request(cls: type[Engine]) -> None:
    e = engine(cls, h100())
    a = request(0, size=1000, out=10)
    e.submit(request=a, now=0.0)
    # a finished at 94.8 ms, before the client's time-out at 1 s: nothing to drop.
    assert e.cancel(request=a, now=1.0) is False
    assert e.advance(until=2.0) == [a]
    assert e.cancel(request=request(9, size=10, out=1), now=2.0) is False


@ENGINES
def test_cancel_unblocks_the_head_of_the_queue(cls: type[Engine]) -> None:
    # 100 usable blocks; a holds 63 and b (50 blocks) waits behind it until a is dropped.
    e = engine(cls, h100(num_gpu_blocks=101))
    a, b = request(0, size=1000, out=100), request(1, size=800, out=5)
    e.submit(request=a, now=0.0)
    e.submit(request=b, now=0.0)
    e.advance(until=0.2)
    assert e.waiting == 1
    assert e.cancel(request=a, now=0.2) is True
    assert e.advance(until=math.inf) == [b]
    assert b.first_token == pytest.approx(e.clock - 4 * 0.007042, abs=5e-4)


def test_engines_agree_when_clients_give_up() -> None:
    spec, rows = TRACES['bursty']
    # Every 5th client gives up 0.8 s after sending: some wait, some prefill, most decode.
    cancels = [(a + 0.8, i) for i, (a, _, _) in enumerate(rows) if i % 5 == 0]
    outcomes = []
    for cls in (ReferenceReplica, FastReplica):
        rs = [request(i, at=a, size=s, out=o) for i, (a, s, o) in enumerate(rows)]
        e = engine(cls, spec)
        found: list[bool] = []
        drive(e, rs, probes=[0.37 * k for k in range(60)], cancels=cancels, found=found)
        outcomes.append((e, rs, found))
    (ref, ref_rs, ref_found), (fast, fast_rs, fast_found) = outcomes
    assert ref_found == fast_found
    assert 10 < sum(ref_found) < len(cancels)  # most were still in flight
    for a, b in zip(ref_rs, fast_rs, strict=True):
        assert math.isnan(a.finished) == math.isnan(b.finished)
        if not math.isnan(a.finished):
            assert b.finished == pytest.approx(a.finished, abs=1e-6)
    assert fast.counters.itl_sum == pytest.approx(ref.counters.itl_sum, rel=1e-9)
    assert fast.counters.generation_tokens_total == ref.counters.generation_tokens_total


@ENGINES
def test_drain_returns_running_then_waiting_and_empties_the_engine(cls: type[Engine]) -> None:
    e = engine(cls, h100(max_num_seqs=2))
    rs = [request(i, size=100, out=50) for i in range(3)]
    for r in rs:
        e.submit(request=r, now=0.0)
    e.advance(until=0.05)
    before = copy.deepcopy(e.counters)
    assert e.drain_requests() == rs
    assert (e.running, e.waiting, e.kv_usage, e.next_step_time()) == (0, 0, 0.0, None)
    assert e.counters == before
    assert e.advance(until=math.inf) == []
    assert all(math.isnan(r.finished) for r in rs)
    # The engine keeps serving afterwards.
    again = request(9, at=1.0, size=100, out=1)
    e.submit(request=again, now=1.0)
    assert e.advance(until=2.0) == [again]


def test_fast_replica_serves_a_budget_below_max_num_seqs_by_reference_stepping() -> None:
    # 4-token budget, up to 8 sequences: decoding requests can miss a step.
    spec = h100(max_num_batched_tokens=4, max_num_seqs=8)
    streams = [[request(i, at=0.001 * i, size=3 + i, out=6) for i in range(8)] for _ in range(2)]
    ref, fast = engine(ReferenceReplica, spec), engine(FastReplica, spec)
    for e, rs in ((ref, streams[0]), (fast, streams[1])):
        drive(e, rs, probes=())
    assert [r.finished for r in streams[0]] == [r.finished for r in streams[1]]
    # Four requests at most get a token per step, so the last finishes well after six steps.
    assert max(r.finished for r in streams[0]) > 6 * 0.007 * 2


# ---- agreement between the engines -----------------------------------------------------------


TRACES = {
    # Gamma inter-arrivals with CV 3, Azure-conversation-like lengths.
    'bursty': (
        roofline(),
        stream(seed=1, n=400, rate=15.0, cv=3.0, log_in=(6.63, 0.99), log_out=(5.02, 0.86)),
    ),
    # Prompts around 6000 tokens on the A100 preset (2048-token budget: chunks share steps
    # with decodes).
    'long-prompts': (
        roofline('llama-3.1-8b-a100'),
        stream(seed=2, n=150, rate=1.5, cv=1.0, log_in=(math.log(6000), 0.08), log_out=(4.6, 0.5)),
    ),
    # 699 usable blocks (~11k tokens) for 1000-token prompts with ~300-token outputs.
    'kv-saturating': (
        roofline(num_gpu_blocks=700),
        stream(seed=3, n=250, rate=8.0, cv=1.0, log_in=(6.9, 0.3), log_out=(5.7, 0.3)),
    ),
}


@pytest.mark.parametrize('trace', sorted(TRACES))
def test_engines_agree_on_traces(trace: str) -> None:
    spec, rows = TRACES[trace]
    end = rows[-1][0]
    probes = [0.37 * k for k in range(int(end / 0.37) + 1)]
    probes += list(np.random.default_rng(7).uniform(0.0, end, 50))
    results = []
    for cls in (ReferenceReplica, FastReplica):
        rs = [request(i, at=a, size=s, out=o) for i, (a, s, o) in enumerate(rows)]
        e = engine(cls, spec)
        done = drive(e, rs, probes=probes)
        assert sorted(r.rid for r in done) == list(range(len(rs)))
        results.append((e, rs, done))
    (ref, ref_rs, ref_done), (fast, fast_rs, fast_done) = results
    assert [r.rid for r in ref_done] == [r.rid for r in fast_done]
    assert_served_alike(ref_rs, fast_rs)
    assert_summaries_close(ref_rs, fast_rs)
    c_ref, c_fast = ref.counters, fast.counters
    assert c_ref.preemptions_total == c_fast.preemptions_total
    assert c_ref.itl_count == c_fast.itl_count
    assert c_fast.itl_sum == pytest.approx(c_ref.itl_sum, rel=1e-9)
    assert c_fast.ttft_sum == pytest.approx(c_ref.ttft_sum, rel=1e-9)
    assert (c_fast.ttft_buckets, c_fast.tpot_buckets) == (c_ref.ttft_buckets, c_ref.tpot_buckets)
    assert sum(c_ref.tpot_buckets) == len(ref_rs)
    if trace == 'kv-saturating':
        assert c_ref.preemptions_total > 0
    if trace == 'long-prompts':
        assert min(r.input_tokens for r in ref_rs) > 2048  # every prompt is chunked


Case = tuple[
    VariantSpec, list[tuple[float, int, int]], list[float], int | None, list[tuple[float, int]]
]


@st.composite
def small_cases(draw: st.DrawFn) -> Case:
    budget = draw(st.integers(min_value=1, max_value=64))
    spec = presets.preset(
        name='llama-3.1-8b-h100',
        perf=draw(st.sampled_from(STEPS)),
        block_size=draw(st.sampled_from([1, 2, 3, 16])),
        num_gpu_blocks=draw(st.integers(min_value=2, max_value=60)),
        max_num_batched_tokens=budget,
        max_num_seqs=draw(
            st.one_of(st.integers(1, budget), st.integers(1, 80))  # > budget: reference path
        ),
        max_model_len=draw(st.sampled_from([8, 50, 10_000])),
    )
    gaps = draw(st.lists(st.sampled_from([0.0, 0.003, 0.011, 0.05, 0.4]), max_size=30))
    rows = []
    t = 0.0
    for gap in gaps:
        t += gap
        rows.append((t, draw(st.integers(0, 100)), draw(st.integers(1, 40))))
    probes = draw(st.lists(st.floats(0.0, t + 1.0), max_size=6))
    drain_at = draw(st.none() | st.integers(0, len(rows) - 1)) if rows else None
    cancels = (
        draw(
            st.lists(st.tuples(st.floats(0.0, t + 0.5), st.integers(0, len(rows) - 1)), max_size=4)
        )
        if rows and drain_at is None
        else []
    )
    return spec, rows, probes, drain_at, cancels


@settings(max_examples=300, deadline=None)
@given(small_cases())
def test_engines_agree_on_random_small_streams(case: Case) -> None:
    spec, rows, probes, drain_at, cancels = case
    outcomes = []
    for cls in (ReferenceReplica, FastReplica):
        rs = [request(i, at=a, size=s, out=o) for i, (a, s, o) in enumerate(rows)]
        e = engine(cls, spec)
        drained: list[int] = []
        found: list[bool] = []
        if drain_at is not None:
            # Drain (a failure) just before one arrival, then carry on with the rest.
            drive(e, rs[:drain_at], probes=[p for p in probes if p < rs[drain_at].arrival])
            drained = [r.rid for r in e.drain_requests()]
            drive(e, rs[drain_at:], probes=[p for p in probes if p >= rs[drain_at].arrival])
        else:
            drive(e, rs, probes=probes, cancels=cancels, found=found)
        dropped = [i for (_, i), hit in zip(sorted(cancels), found, strict=True) if hit]
        outcomes.append((e, rs, drained + dropped, found))
    (ref, ref_rs, ref_drained, ref_found), (fast, fast_rs, fast_drained, fast_found) = outcomes
    assert ref_found == fast_found
    assert ref_drained == fast_drained
    limit = min(spec.max_model_len, (spec.num_gpu_blocks - 1) * spec.block_size)
    for a, b in zip(ref_rs, fast_rs, strict=True):
        assert a.failed == b.failed == (not 1 <= a.input_tokens <= limit)
        assert a.preemptions == b.preemptions
        if a.failed or a.rid in ref_drained:
            continue
        # Every accepted request that was not drained finishes.
        assert math.isfinite(a.finished)
        assert b.finished == pytest.approx(a.finished, abs=1e-9)
        assert b.first_token == pytest.approx(a.first_token, abs=1e-9)
    assert ref.counters.preemptions_total == fast.counters.preemptions_total
    assert ref.counters.itl_count == fast.counters.itl_count
    assert ref.counters.generation_tokens_total == fast.counters.generation_tokens_total
