"""The cyclic garbage collector kept out of the work that must not wait: paused while a step
allocates in bulk, and the objects of start-up set aside.

Why: a full pass of Python's cyclic collector walks every container it tracks while holding the
interpreter lock, so no thread runs meanwhile, the event loop that renews the leader's Lease
included, even when the work that set the pass off runs in a worker thread.

- `paused()`: decoding a large Prometheus answer, parsing a large page and adding it to the
  windows, computing a reading, and `engine.decide()` at a thousand models each allocate hundreds
  of thousands of small containers, none of them in reference cycles (tests/unit/test_gc_pause.py
  checks every analyzer path and a binding GPU limiter). Each burst of allocations sets off
  collections; with the collector held off, what a step drops is freed by reference counting
  before any collection sees it, so it is never promoted to an older generation nor walked by a
  full pass: the work is saved, not only moved. What the step keeps is walked by the next
  collection after it, once, so a step drops what it does not keep inside its block: a page's
  samples still held by a local when the block ends were walked by the first collection after
  it, 20 to 80 ms for a page at the label cap. For decoding 10,000 pods' answer the collections
  cost more than the decoding itself (about 70% of `json.loads`' time); inside `decide()` at
  1,000 models, about 30 ms of a 500 ms call (docs/performance.md).
- `set_aside_start_up()`: the modules, classes and functions loaded at start-up (some 70,000
  containers with the HTTP and Kubernetes clients) live as long as the process, yet every full
  pass walked them again: 40 to 60 ms on the machines of docs/reliability.md, the largest stall
  the loop had left. Once the process has started, they are collected once and then moved out of
  the collector's generations (`gc.freeze`), so full passes walk only what the process made
  since.

What fails: nothing raises. Steps may overlap, in worker threads and on the loop, and the
collector is one for the whole process: it stays off until the last step ends, then resumes if it
was on when the first began, also when a step raises; a collector that was off stays off. An
object set aside is never collected: one that later becomes part of a reference cycle would stay,
which is why only the start-up's objects are set aside, once.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class _Pauses:
    """Who holds the collector off: steps may overlap, in worker threads."""

    lock = threading.Lock()
    holders = 0
    resume = False


@contextmanager
def paused() -> Iterator[None]:
    """Run the block with the cyclic collector off, then resume it if it was on before the
    first of the overlapping blocks began (see the module docstring)."""
    with _Pauses.lock:
        if _Pauses.holders == 0:
            _Pauses.resume = gc.isenabled()
            gc.disable()
        _Pauses.holders += 1
    try:
        yield
    finally:
        with _Pauses.lock:
            _Pauses.holders -= 1
            if _Pauses.holders == 0 and _Pauses.resume:
                gc.enable()


def set_aside_start_up() -> int:
    """Collect once, then move every object alive into the collector's permanent generation;
    how many objects it holds. Call once, when start-up is done (see the module docstring)."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()
