"""The traffic an emulator generates by itself: a seeded Poisson process or a replayed trace.

Why: the emulated pods must be busy without a client sending requests, with load that is
repeatable (same seed, same arrivals) so a test can replay it against the replica model.

What: `PoissonLoad` is a constant-rate Poisson process, its lengths fixed where given and drawn
from a length model otherwise (by default the azure-conv log-normals of
`llmscaler.sim.workload.synthetic`, sampled under max(2, max_model_len)). `TraceLoad` replays a
trace in real time, `speed` times faster: arrival t of the trace comes at start + t / speed.
`arrivals()` turns either into the stream of `Arrival`s in time order (endless for a Poisson load,
the trace's length for a trace).

What fails: a rate or speed that is NaN, infinite, zero or negative and fixed lengths below 1
raise ValueError at construction (`check_positive` is the same check for other settings). A
trace is taken as it is: `Trace` promises sorted arrivals (`load_trace` sorts them).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from llmscaler.sim.vocabulary import Trace
from llmscaler.sim.workload import synthetic


def check_positive(*, name: str, value: float) -> None:
    """Raise ValueError unless `value` is finite and > 0 (NaN and ±Inf fail)."""
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f'{name} must be finite and > 0, got {value}')


@dataclass(frozen=True, slots=True)
class PoissonLoad:
    """Poisson arrivals at `rate` requests/s; fixed lengths where given, else `lengths`."""

    rate: float
    input_tokens: int | None = None
    output_tokens: int | None = None
    lengths: synthetic.LengthModel = synthetic.PRESETS['azure-conv'].lengths

    def __post_init__(self) -> None:
        check_positive(name='rate', value=self.rate)
        for name in ('input_tokens', 'output_tokens'):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f'{name} must be >= 1, got {value}')


@dataclass(frozen=True, slots=True)
class TraceLoad:
    """A trace replayed in real time, `speed` times faster (arrival t at start + t / speed)."""

    trace: Trace
    speed: float = 1.0

    def __post_init__(self) -> None:
        check_positive(name='speed', value=self.speed)


Load = PoissonLoad | TraceLoad


@dataclass(frozen=True, slots=True)
class Arrival:
    """One request of a load: when it arrives (clock seconds) and its lengths in tokens."""

    time: float
    input_tokens: int
    output_tokens: int
    prefix: Sequence[int] | None = None
    """The prompt's chained block ids (`SimRequest.prefix`): a trace's, when it has them."""
    prefix_block: int = 512


def arrivals(*, load: Load, seed: int, start: float, max_model_len: int) -> Iterator[Arrival]:
    """The load's arrivals in time order, from `start` (same seed, same arrivals)."""
    if isinstance(load, TraceLoad):
        trace = load.trace
        ids = [None] * len(trace) if trace.prefixes is None else trace.prefixes.tolist()
        for t, i, o, p in zip(
            trace.arrivals.tolist(),
            trace.input_tokens.tolist(),
            trace.output_tokens.tolist(),
            ids,
            strict=True,
        ):
            yield Arrival(
                time=start + t / load.speed,
                input_tokens=int(i),
                output_tokens=int(o),
                prefix=p,
                prefix_block=trace.prefix_block,
            )
        return
    rng = np.random.default_rng(seed)
    t = start
    while True:
        t += float(rng.exponential(1.0 / load.rate))
        inputs, outputs = load.lengths.sample(rng=rng, n=1, max_model_len=max(2, max_model_len))
        yield Arrival(
            time=t,
            input_tokens=load.input_tokens or int(inputs[0]),
            output_tokens=load.output_tokens or int(outputs[0]),
        )
