"""The request fields a run's metrics need, as numpy columns.

Why: a run holds up to millions of `SimRequest` objects; the summary (`sim.report.summary`) and the
per-minute series (`sim.report.minutes`) read the same few fields of each, so they are copied
into arrays in one pass over the objects and everything after is vectorised, the same way for
both.

What fails: nothing raises. A request's missing first token or finish is NaN in its column (a
NaN finish is not completed; a NaN first token gives a NaN TTFT); `mean_itl` is NaN for
single-token outputs, as `SimRequest.mean_itl`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from llmscaler.sim.vocabulary import Failure, FloatArray, SimResult

BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True, slots=True)
class RequestColumns:
    """The request fields the metrics need, as columns."""

    arrival: FloatArray
    first_token: FloatArray
    finished: FloatArray
    output_tokens: FloatArray
    failed: BoolArray
    failures: dict[Failure, int]

    @property
    def completed(self) -> BoolArray:
        return ~self.failed & np.isfinite(self.finished)

    @property
    def ttft(self) -> FloatArray:
        return self.first_token - self.arrival

    @property
    def mean_itl(self) -> FloatArray:
        """NaN for single-token outputs, as `SimRequest.mean_itl`."""
        gaps = np.maximum(self.output_tokens - 1.0, 1.0)
        itl = (self.finished - self.first_token) / gaps
        return np.where(self.output_tokens > 1.0, itl, math.nan)


def request_columns(*, result: SimResult) -> RequestColumns:
    """The columns of a result's requests, in request order."""
    # One pass over the request objects; everything after is vectorised.
    requests = result.requests
    rows = np.array(
        [(r.arrival, r.first_token, r.finished, r.output_tokens, r.failed) for r in requests],
        dtype=np.float64,
    ).reshape(-1, 5)
    failed = rows[:, 4] != 0.0
    failures: dict[Failure, int] = {}
    if failed.any():  # failures are few; no second pass over a run without any
        for r in requests:
            if r.failed:
                failures[r.failure] = failures.get(r.failure, 0) + 1
    return RequestColumns(
        arrival=rows[:, 0],
        first_token=rows[:, 1],
        finished=rows[:, 2],
        output_tokens=rows[:, 3],
        failed=failed,
        failures=failures,
    )
