"""The cyclic garbage collector, paused while the decision core runs.

Why: `engine.decide()` at a thousand models builds a few hundred thousand small records. The
collector's passes over the youngest objects are cheap, but a full pass walks every live object
(the snapshot's tens of thousands of replica records, the state, the configuration), and a cycle
that keeps many new records (the first after a start, where every variant seeds its tuner) sets
one or two of those off inside the call: about 30 ms of a 500 ms call at 1,000 models
(docs/performance.md: cachegrind's cache simulation, and timed runs). The core's records hold no
reference cycles (tests/unit/test_gc_pause.py checks every analyzer path and a binding GPU
limiter), so what a call drops is freed by reference counting as it goes, collector or not. The
controller's cycle and the simulator's core policies therefore run the call with the collector
paused: its passes happen after the decision, in the cycle's I/O and idle time, instead of
inside it. The work is moved, not saved.

What fails: nothing raises here; the collector's state before the block is restored after it,
also when the block raises, and a collector that was already off stays off.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused() -> Iterator[None]:
    """Run the block with the cyclic collector off, then restore its previous state."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
