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
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence


def block_keys(
    *, prefix: Sequence[int], prefix_block: int, tokens: int, block_size: int
) -> list[int]:
    """The keys of the full engine blocks of a prompt of `tokens` tokens whose coarse blocks
    have the chained ids `prefix` (see the module docstring). Blocks of the engine's size are
    their own keys: a chained id already stands for everything up to its block's end."""
    if prefix_block == block_size:
        return list(prefix[: tokens // block_size])
    covered = min(len(prefix) * prefix_block, tokens)
    return [
        hash((prefix[((j + 1) * block_size - 1) // prefix_block], j))
        for j in range(covered // block_size)
    ]


class PrefixCache:
    """The cached blocks of one engine: held ones with their refcounts, free ones in LRU order."""

    __slots__ = ('free', 'held')

    def __init__(self) -> None:
        self.held: dict[int, int] = {}
        self.free: OrderedDict[int, None] = OrderedDict()

    def lookup(self, keys: Sequence[int], limit: int) -> tuple[int, int]:
        """(leading keys cached, how many of them are free) over at most `limit` keys."""
        held, free = self.held, self.free
        hits = idle = 0
        n = min(limit, len(keys))
        # Indexing, not a slice: most lookups (the router's) stop at the first key.
        while hits < n:
            key = keys[hits]
            if key in held:
                hits += 1
            elif key in free:
                hits += 1
                idle += 1
            else:
                break
        return hits, idle

    def acquire(self, keys: Sequence[int], hits: int) -> list[int]:
        """Take a ref on each of the first `hits` keys (all cached); the keys now held."""
        held, free = self.held, self.free
        taken = list(keys[:hits])
        for key in taken:
            count = held.get(key)
            if count is None:
                del free[key]
                held[key] = 1
            else:
                held[key] = count + 1
        return taken

    def register(self, keys: Sequence[int], lo: int, hi: int, into: list[int]) -> None:
        """Cache keys[lo:hi] (blocks just scheduled) under a new ref each, appended to `into`;
        a key already cached is left to its owner."""
        held, free = self.held, self.free
        for key in keys[lo:hi]:
            if key not in held and key not in free:
                held[key] = 1
                into.append(key)

    def release(self, refs: Sequence[int]) -> int:
        """Drop one ref on each key; the number of blocks that became free (now cached-free)."""
        held, free = self.held, self.free
        freed = 0
        for key in reversed(refs):
            count = held[key] - 1
            if count:
                held[key] = count
            else:
                del held[key]
                free[key] = None
                freed += 1
        return freed

    def trim(self, free_blocks: int) -> None:
        """The engine has `free_blocks` free blocks: evict the oldest free cached blocks that no
        longer fit among them (blocks taken from the pool beyond the uncached ones)."""
        free = self.free
        while len(free) > free_blocks:
            free.popitem(last=False)

    def shared(self) -> int:
        """Refs beyond the first on held blocks: what summing requests' blocks overcounts."""
        return sum(self.held.values()) - len(self.held)

    def clear(self) -> None:
        self.held.clear()
        self.free.clear()

    def holds(self, keys: Sequence[int]) -> int:
        """Leading keys cached (held or free), found by bisection: exact when the cached keys
        of the prompt are a prefix of it, as they are unless eviction took a block out of the
        middle of a chain (a prompt's tail is evicted before its head, so rarely). For the
        router's score, which runs on every replica for every arrival."""
        held, free = self.held, self.free
        lo, hi = 0, len(keys)  # keys[:lo] taken as cached; keys[hi:] not
        while lo < hi:
            mid = (lo + hi) // 2
            key = keys[mid]
            if key in held or key in free:
                lo = mid + 1
            else:
                hi = mid
        return lo
