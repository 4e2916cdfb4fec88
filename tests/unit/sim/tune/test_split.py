"""The cut: the held-back part is disjoint from the search part, and together they are all."""

from __future__ import annotations

import numpy as np
import pytest

from llmscaler.sim.tune.split import cut_time, split
from llmscaler.sim.vocabulary import Trace


def _trace(arrivals: list[float]) -> Trace:
    n = len(arrivals)
    return Trace(
        name='t',
        arrivals=np.array(arrivals, dtype=float),
        input_tokens=np.arange(1, n + 1, dtype=np.int64),
        output_tokens=np.full(n, 7, dtype=np.int64),
    )


def test_parts_are_disjoint_and_complete() -> None:
    trace = _trace([0.0, 1.0, 2.5, 3.0, 7.0, 8.0])
    cut = cut_time(trace=trace, holdout=0.25)
    assert cut == 6.0
    parts = split(trace=trace, cut=cut)
    assert parts.search.arrivals.tolist() == [0.0, 1.0, 2.5, 3.0]
    assert parts.held_back.arrivals.tolist() == [1.0, 2.0]  # rebased to the cut
    both = np.concatenate([parts.search.input_tokens, parts.held_back.input_tokens])
    assert both.tolist() == trace.input_tokens.tolist()  # each request in exactly one part


def test_bad_fractions_and_empty_parts() -> None:
    trace = _trace([0.0, 1.0])
    for holdout in (0.0, 1.0, -0.1, float('nan')):
        with pytest.raises(ValueError, match='held-back'):
            cut_time(trace=trace, holdout=holdout)
    with pytest.raises(ValueError, match='without requests'):
        split(trace=trace, cut=5.0)
