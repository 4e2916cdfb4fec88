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
SGLang's radix cache counts its refs per node the same way) and does its bookkeeping per run:
a release is one step per run (a request holds a handful, not hundreds of blocks), a lookup
walks from run to run comparing slices of keys, and free runs wait in a heap by when they were
freed, evicted from their top block down (the order in which a release frees them). A run is
cut where a request takes refs on part of it. Per block remain only the dictionary of cached
keys (`where`, each key's run: the router's bisection probes any block, and a chunk's blocks
already cached must be found), one entry in and one out per cached block, done by the
interpreter's own loops; a run keeps the very objects it put there, so evicting finds them by
identity. Keys are the trace's 64-bit id array when its blocks are the engine's (`block_keys`):
sliced and compared as machine words, where lists would hold an object per block. Made-up
keys that repeat inside or across prompts (tests) take a slower path, one block at a time,
with the same results; `test_prefix_cache` checks the runs against a per-block model.

What fails: `acquire` of keys that `lookup` did not find cached, or `release` of refs this
cache did not hand out, raise (AssertionError, KeyError); the engines never do either.
"""

from __future__ import annotations

from array import array
from collections.abc import MutableSequence, Sequence
from heapq import heappop, heappush
from itertools import repeat


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
    freed before `seq`. `boxed[j - off]` is the object that keys block j in the cache's
    dictionary: removing a key by that very object needs no comparison of values."""

    __slots__ = ('boxed', 'hi', 'keys', 'lo', 'off', 'ref', 'seq')

    def __init__(
        self,
        keys: Sequence[int],
        lo: int,
        hi: int,
        ref: int,
        seq: int,
        boxed: list[int],
        off: int,
    ) -> None:
        self.keys = keys
        self.lo = lo
        self.hi = hi
        self.ref = ref
        self.seq = seq
        self.boxed = boxed
        self.off = off


def _common(a: Sequence[int], i: int, b: Sequence[int], j: int, n: int) -> int:
    """The longest m <= n with a[i:i + m] == b[j:j + m], given a[i] == b[j] (so m >= 1): slice
    comparisons, bisected (equal prefixes are monotone in their length), so that the
    interpreter compares the blocks, not a loop of ours."""
    if a[i : i + n] == b[j : j + n]:
        return n
    lo, hi = 1, n - 1  # a[i:i + lo] equal, a[i:i + hi + 1] not
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[i : i + mid] == b[j : j + mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


class PrefixCache:
    """The cached blocks of one engine, as runs (`_Run`): `where` maps every cached key to its
    run; free runs wait in a heap ordered by when they were freed."""

    __slots__ = ('_extra', '_free', '_heap', '_seq', '_uid', 'where')

    def __init__(self) -> None:
        self.where: dict[int, _Run] = {}
        # (seq, -hi, uid, run): the run's top block is the next to evict; an entry is current
        # only while the run is free with that seq and hi (acquiring, splitting or evicting a
        # run leaves the old entry behind rather than searching the heap for it).
        self._heap: list[tuple[int, int, int, _Run]] = []
        self._free = 0  # free cached blocks
        self._extra = 0  # refs beyond the first on held blocks
        self._seq = 0
        self._uid = 0

    def _push(self, run: _Run) -> None:
        self._uid += 1
        heappush(self._heap, (run.seq, -run.hi, self._uid, run))

    def _locate(self, run: _Run, key: int, j: int) -> int:
        """Where `key` (block j of a prompt) sits in `run`: at j, unless keys repeat across
        positions (only made-up keys do)."""
        if run.lo <= j < run.hi and run.keys[j] == key:
            return j
        return list(run.keys).index(key, run.lo, run.hi)

    def _split(self, run: _Run, a: int, b: int) -> _Run:
        """Cut `run` so that its blocks [a, b) are a run of their own (returned); the rest keep
        its refcount and, when free, its place in the eviction order."""
        lo, hi, keys, where = run.lo, run.hi, run.keys, self.where
        boxed, off = run.boxed, run.off
        if a > lo:
            low = _Run(keys, lo, a, run.ref, run.seq, boxed, off)
            for key in boxed[lo - off : a - off]:
                where[key] = low
            if not run.ref:
                self._push(low)
        if b < hi:
            high = _Run(keys, b, hi, run.ref, run.seq, boxed, off)
            for key in boxed[b - off : hi - off]:
                where[key] = high
            if not run.ref:
                self._push(high)
        run.lo, run.hi = a, b
        return run

    def _extent(self, keys: Sequence[int], j: int, n: int) -> tuple[_Run, int, int] | None:
        """The run holding block j of `keys`, where, and how many of keys[j:n] follow in it."""
        key = keys[j]
        run = self.where.get(key)
        if run is None:
            return None
        p = self._locate(run, key, j)
        return run, p, _common(keys, j, run.keys, p, min(run.hi - p, n - j))

    def lookup(self, keys: Sequence[int], limit: int) -> tuple[int, int]:
        """(leading keys cached, how many of them are free) over at most `limit` keys."""
        n = min(limit, len(keys))
        hits = idle = 0
        while hits < n:
            found = self._extent(keys, hits, n)
            if found is None:
                break
            run, _, m = found
            hits += m
            if not run.ref:
                idle += m
        return hits, idle

    def acquire(self, keys: Sequence[int], hits: int) -> MutableSequence[int]:
        """Take a ref on each of the first `hits` keys (all cached); the keys now held."""
        j = 0
        while j < hits:
            found = self._extent(keys, j, hits)
            assert found is not None
            run, p, m = found
            if p != run.lo or p + m != run.hi:
                run = self._split(run, p, p + m)
            if not run.ref:
                self._free -= m
            else:
                self._extra += m
            run.ref += 1
            j += m
        taken = keys[:hits]
        return taken if isinstance(taken, array | list) else list(taken)

    def register(self, keys: Sequence[int], lo: int, hi: int, into: MutableSequence[int]) -> None:
        """Cache keys[lo:hi] (blocks just scheduled) under a new ref each, appended to `into`;
        a key already cached is left to its owner."""
        where = self.where
        chunk = keys[lo:hi]
        boxed = chunk.tolist() if isinstance(chunk, array) else list(chunk)
        run = _Run(keys, lo, hi, 1, 0, boxed, lo)
        size = len(where)
        # One probe per key: the chunk is usually all new, so insert first and undo otherwise.
        found = list(map(where.setdefault, boxed, repeat(run)))
        if len(where) - size == hi - lo:
            into.extend(chunk)
            return
        for key, got in zip(boxed, found, strict=True):  # some cached or repeated: one by one
            if got is run:
                where.pop(key, None)
        current: _Run | None = None  # the run of uncached keys being extended
        for j in range(lo, hi):
            key = keys[j]
            if key in where:
                current = None
                continue
            if current is None:
                current = _Run(keys, j, j + 1, 1, 0, [key], j)
            else:
                current.hi = j + 1
                current.boxed.append(key)
            where[key] = current
            into.append(key)

    def release(self, refs: Sequence[int]) -> int:
        """Drop one ref on each key; the number of blocks that became free (now cached-free)."""
        where = self.where
        freed = 0
        i = len(refs)
        while i:
            key = refs[i - 1]
            run = where[key]
            lo, hi = run.lo, run.hi
            size = hi - lo
            # Most refs are whole runs, in order: one step for the run. vLLM frees a request's
            # blocks last first, so the run's top goes first, as its heap entry says.
            if not (
                run.keys[hi - 1] == key and size <= i and refs[i - size : i] == run.keys[lo:hi]
            ):
                # Keys of two kinds (an array against a list never compares equal) or
                # made-up ones: the key alone, as a run of its own.
                p = self._locate(run, key, hi - 1)
                run = self._split(run, p, p + 1)
                size = 1
            i -= size
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
        heap, where = self._heap, self.where
        while self._free > free_blocks:
            seq, top, _, run = heap[0]
            heappop(heap)
            if run.ref or run.seq != seq or run.hi != -top:
                continue  # acquired, freed again, split or evicted since
            evict = min(self._free - free_blocks, run.hi - run.lo)
            for key in run.boxed[run.hi - evict - run.off : run.hi - run.off]:
                del where[key]
            run.hi -= evict
            self._free -= evict
            if run.hi > run.lo:
                self._push(run)

    def shared(self) -> int:
        """Refs beyond the first on held blocks: what summing requests' blocks overcounts."""
        return self._extra

    def clear(self) -> None:
        self.where.clear()
        self._heap.clear()
        self._free = self._extra = 0

    def holds(self, keys: Sequence[int], *, count: int | None = None) -> int:
        """Leading keys cached (held or free) among the first `count` (all by default), found
        by bisection: exact when the cached keys of the prompt are a prefix of it, as they are
        unless eviction took a block out of the middle of a chain (a prompt's tail is evicted
        before its head, so rarely). For the router's score, which runs on every replica for
        every arrival: it probes a few keys, so it can take the trace's ids as they are."""
        where = self.where
        lo, hi = 0, len(keys) if count is None else count  # keys[:lo] cached; keys[hi:] not
        while lo < hi:
            mid = (lo + hi) // 2
            if keys[mid] in where:
                lo = mid + 1
            else:
                hi = mid
        return lo
