"""Prefix caching in both engines (`sim.vllm.prefix_cache`): worked numbers, eviction, agreement.

Worked numbers use the linear step model of test_sim_replica (7 ms + 24 µs per prefill token
+ 0.052 µs per context token + 0.042 ms per decoding sequence), 16-token blocks.
"""

from __future__ import annotations

import dataclasses
import math
import random
from array import array
from collections import OrderedDict
from collections.abc import MutableSequence, Sequence

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmscaler.sim.hardware import presets
from llmscaler.sim.vllm.fast import FastReplica
from llmscaler.sim.vllm.prefix_cache import PrefixCache, block_keys
from llmscaler.sim.vllm.reference import ReferenceReplica
from llmscaler.sim.vocabulary import SimRequest, VariantSpec
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


def cached(spec: VariantSpec) -> VariantSpec:
    return dataclasses.replace(spec, prefix_caching=True)


def ask(
    rid: int, *, at: float = 0.0, size: int, out: int, ids: tuple[int, ...], block: int = 512
) -> SimRequest:
    return SimRequest(
        rid=rid,
        arrival=at,
        input_tokens=size,
        output_tokens=out,
        prefix=ids,
        prefix_block=block,
    )


# ---- keys and the cache itself ---------------------------------------------------------------


def test_engine_blocks_take_the_id_of_the_coarse_block_holding_their_last_token() -> None:
    # 40 tokens in coarse blocks of 16 (ids 7, 8, 9), engine blocks of 6: six full blocks.
    keys = block_keys(prefix=(7, 8, 9), prefix_block=16, tokens=40, block_size=6)
    # Block j ends at token 6j + 5: tokens 5, 11 in block 0; 17, 23, 29 in 1; 35 in 2.
    assert keys == [hash((c, j)) for j, c in enumerate((7, 7, 8, 8, 8, 9))]
    # Two prompts differing from the second coarse block on (chained ids differ from there)
    # share only the engine blocks that end inside the first: blocks 0 and 1 (tokens 0–11);
    # block 2 straddles tokens 12–17.
    other = block_keys(prefix=(7, 5, 6), prefix_block=16, tokens=40, block_size=6)
    assert [a == b for a, b in zip(keys, other, strict=True)] == [True, True] + [False] * 4
    # Fewer ids than the prompt has blocks: only the covered part has keys.
    assert len(block_keys(prefix=(1,), prefix_block=16, tokens=100, block_size=4)) == 4


def test_cache_refcounts_and_evicts_the_least_recently_freed_block() -> None:
    cache = PrefixCache()
    a: list[int] = []
    cache.register([1, 2, 3], 0, 3, a)
    assert cache.lookup([1, 2, 4], 3) == (2, 0)
    assert cache.lookup([1, 2, 3, 5, 6], 5) == (3, 0)
    b = cache.acquire([1, 2], 2)
    assert cache.shared() == 2
    assert cache.release(a) == 1  # 3 only: 1 and 2 are still held by b
    assert cache.release(b) == 2
    assert cache.lookup([1, 2, 3], 3) == (3, 3)
    # Freed in reverse order: b's 2 then 1 after a's 3, so 3 goes first, then 2.
    cache.trim(2)
    assert cache.lookup([1, 2, 3], 3) == (2, 2)
    cache.trim(1)
    assert cache.lookup([1], 1) == (1, 1)
    assert cache.lookup([1, 2], 2) == (1, 1)


def test_a_chunk_inside_a_run_left_to_another_request_is_left_to_it() -> None:
    # a and b have the same prompt and prefill alongside: a's first chunk caches blocks 0–4, so
    # b's first chunk (0–1) is a's; b's second chunk (2–5) starts inside a's run, which holds
    # blocks 2–4: b caches only block 5.
    cache = PrefixCache()
    p = [11, 12, 13, 14, 15, 16]
    a: list[int] = []
    b: list[int] = []
    cache.register(p, 0, 5, a)
    cache.register(p, 0, 2, b)
    assert b == []
    cache.register(p, 2, 6, b)
    assert b == [16]
    assert sorted(cache.cached()) == p
    assert cache.release(b) == 1
    assert cache.release(a) == 5
    assert cache.lookup(p, 6) == (6, 6)


def test_the_router_counts_the_leading_blocks_when_one_in_the_middle_was_evicted() -> None:
    # a caches block 0, x block 1 (0 is a's), b blocks 2–7. x finishes and its block is
    # evicted: blocks 0 and 2–7 stay cached, and only block 0 leads.
    cache = PrefixCache()
    p = [21, 22, 23, 24, 25, 26, 27, 28]
    a: list[int] = []
    x: list[int] = []
    b: list[int] = []
    cache.register(p, 0, 1, a)
    cache.register(p, 0, 2, x)
    cache.register(p, 0, 8, b)
    assert (a, x, b) == ([21], [22], p[2:])
    assert cache.release(x) == 1
    cache.trim(0)
    assert sorted(cache.cached()) == [21, *p[2:]]
    assert cache.lookup(p, 8) == (1, 0)


def test_keys_that_are_not_chained_can_raise() -> None:
    # Key 1 starts a run at block 0; found again at block 1 it cannot be chained.
    cache = PrefixCache()
    cache.register([1, 2], 0, 2, [])
    with pytest.raises(AssertionError, match='chained'):
        cache.lookup([1, 1], 2)


class PerBlock:
    """The cache one block at a time (the runs' specification): refcounts in a dict, free
    blocks in the order they were freed."""

    def __init__(self) -> None:
        self.held: dict[int, int] = {}
        self.free: OrderedDict[int, None] = OrderedDict()

    def lookup(self, keys: Sequence[int], limit: int) -> tuple[int, int]:
        hits = idle = 0
        for key in keys[: max(0, limit)]:
            if key in self.held:
                hits += 1
            elif key in self.free:
                hits += 1
                idle += 1
            else:
                break
        return hits, idle

    def acquire(self, keys: list[int], hits: int) -> list[int]:
        for key in keys[:hits]:
            if key in self.held:
                self.held[key] += 1
            else:
                del self.free[key]
                self.held[key] = 1
        return keys[:hits]

    def register(self, keys: list[int], lo: int, hi: int, into: list[int]) -> None:
        for key in keys[lo:hi]:
            if key not in self.held and key not in self.free:
                self.held[key] = 1
                into.append(key)

    def release(self, refs: list[int]) -> int:
        freed = 0
        for key in reversed(refs):
            self.held[key] -= 1
            if not self.held[key]:
                del self.held[key]
                self.free[key] = None
                freed += 1
        return freed

    def trim(self, free_blocks: int) -> None:
        while len(self.free) > free_blocks:
            self.free.popitem(last=False)

    def shared(self) -> int:
        return sum(self.held.values()) - len(self.held)


def prompts(rng: random.Random) -> list[list[int]]:
    """Chained prompts (as the engines' keys are): each a fresh prompt or the head of an
    earlier one (all of it: a next turn) followed by keys of its own."""
    out: list[list[int]] = []
    for _ in range(16):
        if out and rng.random() < 0.7:
            base = rng.choice(out)
            head = base[: rng.randint(0, len(base))]
        else:
            head = []
        tail = [rng.getrandbits(40) for _ in range(rng.randint(1, 12))]
        out.append(head + tail)
    return out


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=0, max_value=2**32))
def test_runs_do_what_blocks_one_at_a_time_do(seed: int) -> None:
    rng = random.Random(seed)
    pool = prompts(rng)
    runs, blocks = PrefixCache(), PerBlock()
    # Requests admitted and not yet released: their keys, their refs in both caches, and the
    # first block their next prefill chunk caches. Chunks of requests alternate, as in a step
    # that prefills several, so one request's chunk may start inside another's run.
    holders: list[tuple[Sequence[int], MutableSequence[int], list[int], list[int]]] = []
    kinds = rng.choice((0.0, 0.95, 1.0))  # lists, mostly arrays, arrays
    for _ in range(80):
        op = rng.random()
        if op < 0.3:
            keys: Sequence[int] = rng.choice(pool)
            if rng.random() < kinds:  # the trace's arrays, or (rarely) a mix with lists
                keys = array('q', keys)
            elif rng.random() < 0.9:  # a new list, as each request computes its own keys
                keys = list(keys)
            limit = rng.randint(0, len(keys))
            hits = runs.lookup(keys, limit)
            assert hits == blocks.lookup(keys, limit)
            mine, theirs = runs.acquire(keys, hits[0]), blocks.acquire(list(keys), hits[0])
            assert list(mine) == theirs
            holders.append((keys, mine, theirs, [hits[0]]))
        elif op < 0.6 and holders:  # a prefill chunk of one of them
            keys, mine, theirs, at = rng.choice(holders)
            lo = at[0]
            hi = rng.randint(lo, len(keys))
            runs.register(keys, lo, hi, mine)
            blocks.register(list(keys), lo, hi, theirs)
            assert list(mine) == theirs
            at[0] = hi
        elif op < 0.8 and holders:
            _, mine, theirs, _ = holders.pop(rng.randrange(len(holders)))
            assert runs.release(mine) == blocks.release(theirs)
        elif op < 0.93:
            keep = rng.randint(0, len(blocks.free))
            runs.trim(keep)
            blocks.trim(keep)
        else:  # the router's score: the trace's ids, however the cached keys were kept
            keys = rng.choice(pool)
            ids = rng.choice((keys, tuple(keys), array('q', keys)))
            assert runs.lookup(ids, len(ids)) == blocks.lookup(keys, len(keys))
        assert runs.shared() == blocks.shared()
        assert sorted(runs.cached()) == sorted([*blocks.held, *blocks.free])
    for keys in pool:
        assert runs.lookup(keys, len(keys)) == blocks.lookup(keys, len(keys))


# ---- worked numbers ----------------------------------------------------------------------------


@ENGINES
def test_a_shared_prefix_skips_its_prefill(cls: type[Engine]) -> None:
    e = engine(cls, cached(h100()))
    # Both prompts hold 1000 tokens; they share the first 512-token block.
    a = ask(0, size=1000, out=2, ids=(11, 12))
    b = ask(1, at=1.0, size=1000, out=2, ids=(11, 13))
    e.submit(request=a, now=0.0)
    e.advance(until=1.0)
    e.submit(request=b, now=1.0)
    e.advance(until=math.inf)
    # a: 7 ms + 1000 · 24 µs = 31 ms. b finds 512 tokens (32 blocks) and prefills 488 tokens
    # reading 512: 7 + 11.712 + 0.026624 ms.
    assert a.ttft == pytest.approx(0.031)
    assert b.ttft == pytest.approx(0.007 + 0.011712 + 0.000026624, abs=1e-12)
    c = e.counters
    assert (c.prefix_cache_queries_total, c.prefix_cache_hits_total) == (2000, 512)
    assert e.free_blocks == e.spec.num_gpu_blocks - 1


@ENGINES
def test_a_fully_cached_prompt_recomputes_its_last_block(cls: type[Engine]) -> None:
    e = engine(cls, cached(h100()))
    a = ask(0, size=64, out=1, ids=(5,), block=64)
    b = ask(1, at=1.0, size=64, out=1, ids=(5,), block=64)
    e.submit(request=a, now=0.0)
    e.advance(until=1.0)
    e.submit(request=b, now=1.0)
    e.advance(until=math.inf)
    # 3 of 4 blocks hit; the last 16 tokens are computed reading 48: 7 + 0.384 + 0.002496 ms.
    assert b.ttft == pytest.approx(0.007 + 0.000384 + 0.000002496, abs=1e-12)
    assert e.counters.prefix_cache_hits_total == 48


@ENGINES
def test_prefix_caching_is_off_unless_asked(cls: type[Engine]) -> None:
    e = engine(cls, h100())
    rs = [ask(i, at=float(i), size=1000, out=2, ids=(11, 12)) for i in range(2)]
    drive(e, rs, probes=())
    assert [r.ttft for r in rs] == pytest.approx([0.031, 0.031])
    assert e.counters.prefix_cache_queries_total == 0


@ENGINES
def test_blocks_held_by_others_cost_no_free_block(cls: type[Engine]) -> None:
    # 40 usable blocks: a (32 blocks, 30 of them a shared 480-token prefix) runs long; b with the
    # same prefix needs only its own 2 blocks, where without the cache it would wait for a.
    for on in (True, False):
        spec = h100(num_gpu_blocks=41)
        e = engine(cls, cached(spec) if on else spec)
        a = ask(0, size=512, out=200, ids=(1, 2), block=240)
        b = ask(1, at=0.1, size=512, out=2, ids=(1, 2, 3), block=240)
        drive(e, [a, b], probes=(0.05, 0.2))
        assert (b.first_token < a.finished) is on


@ENGINES
def test_eviction_takes_the_oldest_free_cached_blocks(cls: type[Engine]) -> None:
    # 20 usable blocks. p (8 blocks) then q (8 blocks) finish and stay cached; r (8 new blocks)
    # needs 4 more than the 4 uncached ones: it evicts p's tail (p was freed first, last block
    # first), so p2 finds p's head only (4 blocks) and takes 4 + 4 of the 20 free blocks: 12
    # stay free for the 16 cached ones of q and r, so q's tail goes and q2 finds 4 blocks.
    e = engine(cls, cached(h100(num_gpu_blocks=21)))
    p = ask(0, size=128, out=1, ids=(1,), block=128)
    q = ask(1, at=1.0, size=128, out=1, ids=(2,), block=128)
    r = ask(2, at=2.0, size=128, out=1, ids=(3,), block=128)
    p2 = ask(3, at=3.0, size=128, out=1, ids=(1,), block=128)
    q2 = ask(4, at=4.0, size=128, out=1, ids=(2,), block=128)
    drive(e, [p, q, r, p2], probes=())
    assert e.counters.prefix_cache_hits_total == 4 * 16
    drive(e, [q2], probes=())
    assert e.counters.prefix_cache_hits_total == 4 * 16 + 4 * 16


# ---- the engines agree -------------------------------------------------------------------------


def shared_stream(
    *, seed: int, n: int, rate: float, groups: int, block: int
) -> list[tuple[float, int, int, tuple[int, ...]]]:
    """A stream whose prompts start with one of `groups` shared prefixes (popularity skewed) for
    a random number of coarse blocks, then diverge."""
    rng = np.random.default_rng(seed)
    rows = stream(seed=seed, n=n, rate=rate, cv=2.0, log_in=(6.8, 0.7), log_out=(4.5, 0.8))
    out = []
    weights = 1.0 / np.arange(1, groups + 1)
    weights /= weights.sum()
    for rid, (t, size, o) in enumerate(rows):
        blocks = -(-size // block)
        g = int(rng.choice(groups, p=weights))
        shared = int(rng.integers(0, blocks + 1))
        ids = tuple(hash((g, i)) if i < shared else hash((-1, rid, i)) for i in range(blocks))
        out.append((t, size, o, ids))
    return out


SHARED = {
    'bursty-shared': (roofline(), shared_stream(seed=4, n=400, rate=15.0, groups=5, block=512)),
    'kv-saturating-shared': (
        roofline(num_gpu_blocks=700),
        shared_stream(seed=5, n=250, rate=8.0, groups=3, block=256),
    ),
}


@pytest.mark.parametrize('trace', sorted(SHARED))
def test_engines_agree_with_prefix_caching(trace: str) -> None:
    spec, rows = SHARED[trace]
    spec = cached(spec)
    end = rows[-1][0]
    probes = list(np.random.default_rng(8).uniform(0.0, end, 60))
    results = []
    for cls in (ReferenceReplica, FastReplica):
        rs = [
            ask(i, at=a, size=s, out=o, ids=ids, block=512 if 'bursty' in trace else 256)
            for i, (a, s, o, ids) in enumerate(rows)
        ]
        e = engine(cls, spec)
        drive(e, rs, probes=probes)
        results.append((e, rs))
    (ref, ref_rs), (fast, fast_rs) = results
    assert_served_alike(ref_rs, fast_rs)
    assert_summaries_close(ref_rs, fast_rs)
    assert ref.counters == dataclasses.replace(
        fast.counters, itl_sum=ref.counters.itl_sum, ttft_sum=ref.counters.ttft_sum
    )
    assert ref.counters.prefix_cache_hits_total > 0.2 * ref.counters.prefix_cache_queries_total
    if trace.startswith('kv'):
        assert ref.counters.preemptions_total > 0


@st.composite
def shared_cases(
    draw: st.DrawFn,
) -> tuple[VariantSpec, list[SimRequest], list[float], list[tuple[float, int]]]:
    budget = draw(st.integers(min_value=1, max_value=64))
    spec = presets.preset(
        name='llama-3.1-8b-h100',
        perf=draw(st.sampled_from(STEPS)),
        block_size=draw(st.sampled_from([1, 2, 3, 16])),
        num_gpu_blocks=draw(st.integers(min_value=2, max_value=60)),
        max_num_batched_tokens=budget,
        max_num_seqs=draw(st.one_of(st.integers(1, budget), st.integers(1, 80))),
        max_model_len=draw(st.sampled_from([8, 50, 10_000])),
        prefix_caching=True,
    )
    coarse = draw(st.sampled_from([1, 2, 4, 5, 16]))
    gaps = draw(st.lists(st.sampled_from([0.0, 0.003, 0.011, 0.05, 0.4]), max_size=30))
    rs = []
    t = 0.0
    for rid, gap in enumerate(gaps):
        t += gap
        size = draw(st.integers(0, 100))
        group = draw(st.integers(0, 2))
        shared = draw(st.integers(0, 30))
        ids = tuple(
            hash((group, i)) if i < shared else hash((-1, rid, i))
            for i in range(-(-size // coarse))
        )
        out = draw(st.integers(1, 40))
        r = ask(rid, at=t, size=size, out=out, ids=ids, block=coarse)
        r.kv_ready = draw(st.integers(0, size))
        rs.append(r)
    probes = draw(st.lists(st.floats(0.0, t + 1.0), max_size=6))
    cancels = (
        draw(st.lists(st.tuples(st.floats(0.0, t + 0.5), st.integers(0, len(rs) - 1)), max_size=4))
        if rs
        else []
    )
    return spec, rs, probes, cancels


@settings(max_examples=300, deadline=None)
@given(shared_cases())
def test_engines_agree_on_random_small_shared_streams(
    case: tuple[VariantSpec, list[SimRequest], list[float], list[tuple[float, int]]],
) -> None:
    spec, rs, probes, cancels = case
    outcomes = []
    for cls in (ReferenceReplica, FastReplica):
        mine = [dataclasses.replace(r) for r in rs]
        e = engine(cls, spec)
        found: list[bool] = []
        drive(e, mine, probes=probes, cancels=cancels, found=found)
        outcomes.append((e, mine, found))
    (ref, ref_rs, ref_found), (fast, fast_rs, fast_found) = outcomes
    assert ref_found == fast_found
    for a, b in zip(ref_rs, fast_rs, strict=True):
        assert a.failed == b.failed
        assert a.preemptions == b.preemptions
        if a.failed:
            continue
        assert b.finished == pytest.approx(a.finished, abs=1e-9, nan_ok=True)
        assert b.first_token == pytest.approx(a.first_token, abs=1e-9, nan_ok=True)
    for field in ('preemptions_total', 'itl_count', 'generation_tokens_total'):
        assert getattr(ref.counters, field) == getattr(fast.counters, field)
    assert ref.counters.prefix_cache_hits_total == fast.counters.prefix_cache_hits_total


# ---- KV computed elsewhere (a decode replica of a disaggregated pair) --------------------------


@ENGINES
def test_transferred_kv_skips_the_prefill_at_the_first_admission_only(cls: type[Engine]) -> None:
    e = engine(cls, h100())
    # 1001 tokens (a 1000-token prompt and its first token) of which 1000 arrive computed: the
    # first step is a prefill chunk of one token reading 1000: 7 ms + 24 µs + 0.052 µs · 1000.
    r = SimRequest(rid=0, arrival=0.0, input_tokens=1001, output_tokens=3, kv_ready=1000)
    e.submit(request=r, now=0.0)
    e.advance(until=math.inf)
    assert r.first_token == pytest.approx(0.007 + 0.000024 + 0.000052, abs=1e-12)
    # Without it the whole prompt is computed.
    plain = SimRequest(rid=1, arrival=1.0, input_tokens=1001, output_tokens=3)
    e.submit(request=plain, now=1.0)
    e.advance(until=math.inf)
    assert plain.ttft == pytest.approx(0.007 + 1001 * 24e-6)


def test_engines_agree_with_transferred_kv_and_preemptions() -> None:
    spec = roofline(num_gpu_blocks=700)
    rows = stream(seed=6, n=250, rate=8.0, cv=1.0, log_in=(6.9, 0.3), log_out=(5.7, 0.3))
    results = []
    for cls in (ReferenceReplica, FastReplica):
        rs = [
            SimRequest(rid=i, arrival=a, input_tokens=s + 1, output_tokens=o, kv_ready=s)
            for i, (a, s, o) in enumerate(rows)
        ]
        e = engine(cls, spec)
        drive(e, rs, probes=[0.5 * k for k in range(60)])
        results.append((e, rs))
    (ref, ref_rs), (fast, fast_rs) = results
    assert_served_alike(ref_rs, fast_rs)
    assert ref.counters.preemptions_total == fast.counters.preemptions_total > 0
