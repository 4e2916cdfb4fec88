"""The trace's two parts: the one the search sees and the one held back to judge its choice.

Why: settings chosen on a trace fit that trace; reported on the same requests they would look
better than they are. The trace is cut once in time: the search sees what arrives before the
cut, and the chosen configuration, the defaults and the peers are reported on what arrives
after it (rebased to start at 0), which no search run ever simulated. A time cut, not a sample
of requests: a policy's memory and the load's shape over minutes are what is being tuned.

What fails: `cut_time` raises `ValueError` for a held-back fraction outside (0, 1), and
`split` for a cut that leaves either part without requests.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from llmscaler.sim.vocabulary import Trace


@dataclass(frozen=True, slots=True)
class Parts:
    """A trace's search part and held-back part; `cut` is where, in the trace's seconds."""

    search: Trace
    held_back: Trace
    cut: float


def cut_time(*, trace: Trace, holdout: float) -> float:
    """Where to cut `trace` so that the last `holdout` of its span is held back."""
    if not 0.0 < holdout < 1.0:
        raise ValueError(f'the held-back fraction must be in (0, 1), got {holdout}')
    return trace.duration * (1.0 - holdout)


def _rows(trace: Trace, keep: np.ndarray, *, shift: float, name: str) -> Trace:
    prefixes = trace.prefixes[keep] if trace.prefixes is not None else None
    return replace(
        trace,
        name=name,
        arrivals=trace.arrivals[keep] - shift,
        input_tokens=trace.input_tokens[keep],
        output_tokens=trace.output_tokens[keep],
        prefixes=prefixes,
        skipped_rows=0,
    )


def split(*, trace: Trace, cut: float) -> Parts:
    """`trace`'s requests arriving before `cut`, and those arriving at or after it, rebased."""
    before = trace.arrivals < cut
    after = ~before
    if not before.any() or not after.any():
        raise ValueError(
            f'cutting {trace.name} at {cut:g} s leaves a part without requests '
            f'({int(before.sum())} before, {int(after.sum())} after)'
        )
    return Parts(
        search=_rows(trace, before, shift=0.0, name=f'{trace.name} [0, {cut:g}) s'),
        held_back=_rows(trace, after, shift=cut, name=f'{trace.name} [{cut:g}, end) s'),
        cut=cut,
    )
