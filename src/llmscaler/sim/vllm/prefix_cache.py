"""One replica's prefix cache: KV blocks keyed by the hash of the prompt up to their end.

Why: vLLM's automatic prefix caching (on by default in vLLM V1) lets a request whose prompt
starts like an earlier one skip the prefill of the shared part; with shared system prompts and
multi-turn sessions that is most of the prefill, and routing to the replica that holds a prefix
(the inference gateway's prefix scorer) only pays with it. The engines (`sim.vllm.base`) keep
their KV blocks as counts; this module adds which full prompt blocks are cached, and by whom.

The model (vLLM 0.33's automatic prefix caching: `KVCacheManager` in
vllm/v1/core/kv_cache_manager.py, the block pool in vllm/v1/core/block_pool.py):

- A full block of a prompt has a key that depends on every token up to its end (vLLM chains
  each block's hash over the previous block's hash). Requests carry chained hash ids of coarser
  blocks (`SimRequest.prefix`, `prefix_block` tokens each, Mooncake's 512); `block_keys` maps
  them onto the engine's block size: engine block j (tokens [j·bs, (j + 1)·bs)) is known to be
  equal in two prompts when the id of the coarse block holding its last token is, so its key is
  (that id, j); when the coarse blocks are the engine's, their ids are the keys. Only full
  engine blocks inside the prompt get keys; sharing is never claimed inside a coarse block
  whose id differs (conservative when the trace's blocks are coarser).
- A cached block is either held (refcount > 0: running requests use it) or free (refcount 0:
  evictable). The engine's free-block count includes the free cached blocks; taking a block
  from the free pool takes an uncached one while there is one, else evicts the least recently
  freed cached block (`trim`). vLLM reuses free blocks strictly in the order they were freed, so
  it may evict a cached block while an uncached one is free; keeping the cached one is the
  simulator's one simplification here (it can only hit more).
- At admission the engine looks up the longest run of leading keys present (`lookup`), at most
  up to the prompt's last token (vLLM always computes at least one token, so a fully cached
  prompt recomputes its last block). The hits skip prefill compute (the request's computed
  tokens start there; attention still reads them as context); hits that were free leave the
  free pool, hits held by others cost no block at all.
- When a prefill chunk is scheduled, the prompt blocks it completes are cached under the
  request's ref (`register`), as vLLM caches blocks when it schedules them; a block whose key
  another request already cached stays the request's own, uncached.
- A request that finishes, is preempted or cancelled drops its refs (`release`); blocks whose
  refcount reaches 0 join the free pool as cached, its last block first (vLLM frees in reverse
  order so that a prompt's tail is evicted before its head).
- Generated tokens are not cached (vLLM caches their full blocks too, but traces carry hashes
  of the prompt only): the next turn of a conversation hits up to its previous prompt.

Counters (vLLM's `vllm:prefix_cache_queries` / `vllm:prefix_cache_hits`, in tokens): every
admission queries the request's tokens and hits the cached ones.

The structure: runs, not blocks. The semantics above are per block, but a request's blocks
share their holders: it registers a prefill chunk's blocks together, takes refs on a leading
run of them and drops all its refs at once. So the cache keeps runs (`_Run`: consecutive blocks
of one prompt's key list, with one refcount and, when free, one place in the eviction order;
SGLang's radix cache counts its refs per node the same way), and a dictionary (`_starts`) of the
first key of each run only, never of the blocks inside; it does its bookkeeping per run. The
first keys are enough because keys are chained: a key stands for its prompt up to the end of
its block, so a cached key is at the same index in its run as in any prompt that has it, and
two prompts equal at a key are equal before it. Hence:

- Where a walk along a prompt from its first block leaves a run (at the run's end, or at the
  first key that differs, bisected: one key decides for all before it), the prompt's next key,
  when cached, starts a run: were it inside one, that run would hold the key just passed too,
  which is in the run left (a key is in one run). So `lookup` (also the router's score, on every
  replica for every arrival) and `acquire` take one dictionary probe and a comparison of keys
  per run, however long.
- A request holds whole runs: it takes refs on leading runs, the last one cut where its refs
  end (its top becomes a run of its own), and registers new runs; other requests' cuts only
  divide them further, and a run's first block never changes. So a request's refs, in the
  order taken, are tiled by runs, each starting at the ref after the last one's end, and
  `release` finds them by those keys, one step per run.
- A chunk being registered starts after the request's last ref, so a cached key of the chunk
  starts a run, unless its run goes on from the block before the chunk: when that block is not
  the request's own (it was left to another request), a walk finds its run. The chunk's keys
  are checked against the dictionary in one pass of the interpreter's own loops: the only work
  per block left, besides copying keys into the request's refs.
- Free runs wait in a heap by when they were freed, evicted from their top block down (the
  order in which a release frees them); a run leaves the dictionary with its last block.

Keys are the trace's 64-bit id array when its blocks are the engine's (`block_keys`): copied as
machine words, where lists would hold an object per block. `test_prefix_cache` checks the runs
against a per-block model.

What fails: `acquire` of keys that `lookup` did not find cached, or `release` of refs this
cache did not hand out, raise (KeyError, AssertionError); the engines never do either. Keys
that are not chained (one key at two indices, in one prompt or two, as made-up keys may be) do
not give the per-block semantics: a lookup that finds a run's first key at another index
raises AssertionError, other cases go unnoticed. Every key the engines make is chained
(`SimRequest.prefix` is, and `block_keys` keeps it so).
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, MutableSequence, Sequence
from heapq import heappop, heappush, heapreplace
from itertools import compress


def block_keys(
    *, prefix: Sequence[int], prefix_block: int, tokens: int, block_size: int
) -> Sequence[int]:
    """The keys of the full engine blocks of a prompt of `tokens` tokens whose coarse blocks
    have the chained ids `prefix` (see the module docstring). Blocks of the engine's size are
    their own keys: a chained id already stands for everything up to its block's end, and the
    trace's 64-bit array of them is kept as an array (copied and compared as machine words,
    where a list would hold an object per block)."""
    if prefix_block == block_size:
        head = prefix[: tokens // block_size]
        return head if isinstance(head, array) else list(head)
    covered = min(len(prefix) * prefix_block, tokens)
    return [
        hash((prefix[((j + 1) * block_size - 1) // prefix_block], j))
        for j in range(covered // block_size)
    ]


class _Run:
    """Consecutive blocks `keys[lo:hi]` of one chain (block j at index j), cached, with one
    refcount; when free (`ref` 0), freed together: evicted from `hi - 1` down, after every block
    freed before `seq`. `lo` never changes: the run is found by its first key."""

    __slots__ = ('hi', 'keys', 'lo', 'ref', 'seq')

    def __init__(self, keys: Sequence[int], lo: int, hi: int, ref: int, seq: int) -> None:
        self.keys = keys
        self.lo = lo
        self.hi = hi
        self.ref = ref
        self.seq = seq


def _agree(a: Sequence[int], b: Sequence[int], j: int, end: int) -> int:
    """Where chains `a` and `b`, equal at index j, first differ before `end` (`end` if not):
    chained keys equal at an index are equal before it, so one key decides for all before it
    and the first difference is bisected, one key per probe."""
    if a[end - 1] == b[end - 1]:
        return end
    lo, hi = j + 1, end - 1  # equal at lo - 1, not at hi
    while lo < hi:
        mid = (lo + hi) // 2
        if a[mid] == b[mid]:
            lo = mid + 1
        else:
            hi = mid
    return lo


class PrefixCache:
    """The cached blocks of one engine, as runs (`_Run`): `_starts` maps each run's first key to
    the run; free runs wait in a heap ordered by when they were freed."""

    __slots__ = ('_extra', '_first', '_free', '_heap', '_seq', '_starts', '_uid')

    def __init__(self) -> None:
        self._starts: dict[int, _Run] = {}
        self._first = self._starts.keys()  # a live view: registering tests a chunk against it
        # (seq, -hi, uid, run): the run's top block is the next to evict; an entry is current
        # only while the run is free with that seq and hi (acquiring, cutting or evicting a
        # run leaves the old entry behind rather than searching the heap for it).
        self._heap: list[tuple[int, int, int, _Run]] = []
        self._free = 0  # free cached blocks
        self._extra = 0  # refs beyond the first on held blocks
        self._seq = 0
        self._uid = 0

    def _push(self, run: _Run) -> None:
        self._uid += 1
        heappush(self._heap, (run.seq, -run.hi, self._uid, run))

    def _segments(
        self, keys: Sequence[int], lo: int, hi: int, run: _Run | None
    ) -> Iterator[tuple[_Run, int, int]]:
        """The cached blocks among keys[lo:hi], run by run in order: (run, from, to), given
        `run`, the run holding block lo - 1 (None when it is not cached)."""
        starts = self._starts
        j = lo
        while j < hi:
            if run is not None and run.hi > j and run.keys[j] == keys[j]:
                end = _agree(keys, run.keys, j, min(run.hi, hi))
                yield run, j, end
                j = end
                if j == hi:
                    return
            # The next cached block, if any, starts a run: the first key in the dictionary.
            j = next(compress(range(j, hi), map(starts.__contains__, keys[j:hi])), hi)
            if j < hi:
                run = starts[keys[j]]
                assert run.lo == j, 'keys are not chained'

    def lookup(self, keys: Sequence[int], limit: int) -> tuple[int, int]:
        """(leading keys cached, held or free, how many of them are free) over at most `limit`
        keys. It reads a few keys where they are, so the router can pass the trace's ids."""
        starts = self._starts
        n = limit if limit < len(keys) else len(keys)
        hits = idle = 0
        while hits < n:
            run = starts.get(keys[hits])
            if run is None:
                break
            assert run.lo == hits, 'keys are not chained'
            end = run.hi if run.hi < n else n
            if keys[end - 1] != run.keys[end - 1]:  # the prompt branches off inside the run
                end = _agree(keys, run.keys, hits, end)
            if not run.ref:
                idle += end - hits
            hits = end
        return hits, idle

    def acquire(self, keys: Sequence[int], hits: int) -> MutableSequence[int]:
        """Take a ref on each of the first `hits` keys (all cached); the keys now held."""
        starts = self._starts
        j = 0
        while j < hits:
            run = starts[keys[j]]
            assert run.lo == j, 'keys are not chained'
            b = _agree(keys, run.keys, j, min(run.hi, hits))
            if b < run.hi:  # the rest of the run, its own run now
                high = _Run(run.keys, b, run.hi, run.ref, run.seq)
                starts[run.keys[b]] = high
                if not run.ref:
                    self._push(high)
                run.hi = b
            if not run.ref:
                self._free -= b - j
            else:
                self._extra += b - j
            run.ref += 1
            j = b
        taken = keys[:hits]
        return taken if isinstance(taken, array | list) else list(taken)

    def register(self, keys: Sequence[int], lo: int, hi: int, into: MutableSequence[int]) -> None:
        """Cache keys[lo:hi] (blocks just scheduled, after those of the request's earlier chunks)
        under a new ref each, appended to `into`, the refs of the request these keys are the
        prompt of; a key already cached is left to its owner."""
        if hi <= lo:
            return
        starts = self._starts
        chunk = keys[lo:hi]
        # Usually the block before the chunk is the request's own (so no run holding it goes
        # on into the chunk) and no key of the chunk starts a run: nothing of it is cached.
        if (not lo or (into and into[-1] == keys[lo - 1])) and self._first.isdisjoint(chunk):
            starts[keys[lo]] = _Run(keys, lo, hi, 1, 0)
            into.extend(chunk)
            return
        before = None  # the run holding block lo - 1
        for run, _, b in self._segments(keys, 0, lo, None):
            if b == lo:
                before = run
        j = lo
        for _, a, b in [*self._segments(keys, lo, hi, before), (None, hi, hi)]:
            if a > j:
                starts[keys[j]] = _Run(keys, j, a, 1, 0)
                into.extend(keys[j:a])
            j = b

    def release(self, refs: Sequence[int]) -> int:
        """Drop one ref on each key; the number of blocks that became free (now cached-free)."""
        # The refs are whole runs, in order (see the module docstring): each next ref starts
        # one.
        starts = self._starts
        runs = []
        i, n = 0, len(refs)
        while i < n:
            run = starts[refs[i]]
            runs.append(run)
            i += run.hi - run.lo
        assert i == n, 'releasing refs this cache did not hand out'
        freed = 0
        # vLLM frees a request's blocks last first: the top run goes first, its top block
        # first, as its heap entry says.
        for run in reversed(runs):
            size = run.hi - run.lo
            if run.ref > 1:
                self._extra -= size
                run.ref -= 1
            else:
                run.ref = 0
                self._seq += 1
                run.seq = self._seq
                self._push(run)
                self._free += size
                freed += size
        return freed

    def trim(self, free_blocks: int) -> None:
        """The engine has `free_blocks` free blocks: evict the oldest free cached blocks that no
        longer fit among them (blocks taken from the pool beyond the uncached ones)."""
        heap = self._heap
        while self._free > free_blocks:
            seq, top, uid, run = heap[0]
            if run.ref or run.seq != seq or run.hi != -top:
                heappop(heap)  # acquired, freed again, cut or evicted since
                continue
            evict = self._free - free_blocks
            if evict < run.hi - run.lo:
                run.hi -= evict
                self._free = free_blocks
                heapreplace(heap, (seq, -run.hi, uid, run))
                return
            self._free -= run.hi - run.lo
            run.hi = run.lo
            heappop(heap)
            del self._starts[run.keys[run.lo]]

    def shared(self) -> int:
        """Refs beyond the first on held blocks: what summing requests' blocks overcounts."""
        return self._extra

    def cached(self) -> list[int]:
        """Every cached key (one per block: for checks)."""
        return [key for run in self._starts.values() for key in run.keys[run.lo : run.hi]]

    def clear(self) -> None:
        self._starts.clear()
        self._heap.clear()
        self._free = self._extra = 0
