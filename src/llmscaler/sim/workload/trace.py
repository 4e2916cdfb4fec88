"""Load request traces from disk into `Trace`s, split them by model, and scale their rate.

Why: the simulator replays real traffic and needs it as three aligned arrays: arrival seconds
from 0, input tokens, output tokens (per model, when a file holds several). The file formats
and what makes a row malformed are `sim.workload.formats`'; this module turns the rows into traces
(`TraceError` is defined there).

Arrivals are rebased so the first request of the file is at t=0 and sorted stably when the file
is not in order (ties keep file order). Times may be negative or fractional in the file; they
only matter relative to each other.

Several models in one file: a CSV or JSONL file may have a model column (`MODEL_NAMES`).
`load_trace(model=M)` keeps the rows of model M (the others are ignored); `load_by_model` splits
the file into one trace per model, every row naming a model the caller knows (a row naming
another is malformed). Either way the timeline is the file's: rebased to the file's first request
and windowed on it, so the models' traces stay aligned (a model's first request need not be at 0).

Bad input. A malformed row raises `TraceError('<file>:<line>: <why>')`, or, with skip_bad=True,
is dropped and counted (`Trace.skipped_rows`, `Split.skipped_rows`). A missing or unreadable
file, an empty file, a header with no data rows, a file where every row was skipped, an unknown
header, a model asked of a file without a model column (an Azure trace never has one) or of a
file without a request of that model raise TraceError. Bad arguments (unknown fmt, window or
rate values out of range) raise ValueError.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import numpy.typing as npt

from llmscaler.sim.vocabulary import FloatArray, IntArray, Trace, object_array
from llmscaler.sim.workload.formats import (
    FORMATS,
    MODEL_NAMES,
    MOONCAKE_BLOCK,
    Rows,
    TraceError,
    read_rows,
)


@dataclass(frozen=True, slots=True)
class Split:
    """A file's traces by model name (`load_by_model`) and the malformed rows it skipped."""

    traces: dict[str, Trace]
    skipped_rows: int


def _check_arguments(*, fmt: str, start: float | None, duration: float | None) -> None:
    if fmt not in FORMATS:
        raise ValueError(f'unknown trace format {fmt!r}; valid: {", ".join(FORMATS)}')
    if start is not None and not (math.isfinite(start) and start >= 0):
        raise ValueError(f'window start must be finite and >= 0, got {start}')
    if duration is not None and not duration > 0:
        raise ValueError(f'window duration must be > 0, got {duration}')


def _table(
    *, path: Path, rows: Rows, start: float | None, duration: float | None
) -> tuple[Trace, list[str], IntArray | None]:
    """The rows as a trace (sorted, rebased, windowed), with each row's model as an index into
    the returned names (None without a model column)."""
    if not rows.times:
        why = f'no valid rows ({rows.skipped} skipped)' if rows.skipped else 'no data rows'
        raise TraceError(path=path, line=None, why=why)
    arrivals = np.asarray(rows.times, dtype=np.float64)
    input_tokens = np.asarray(rows.inputs, dtype=np.int64)
    output_tokens = np.asarray(rows.outputs, dtype=np.int64)
    prefixes = None if rows.prefixes is None else object_array(rows.prefixes)
    names: list[str] = []
    codes: IntArray | None = None
    if rows.labels is not None:
        names = sorted(set(rows.labels))
        index = {name: i for i, name in enumerate(names)}
        codes = np.asarray([index[label] for label in rows.labels], dtype=np.int64)
    if arrivals.size > 1 and bool(np.any(np.diff(arrivals) < 0)):
        order = np.argsort(arrivals, kind='stable')
        arrivals, input_tokens, output_tokens = (
            arrivals[order],
            input_tokens[order],
            output_tokens[order],
        )
        codes = None if codes is None else codes[order]
        prefixes = None if prefixes is None else prefixes[order]
    arrivals = arrivals - arrivals[0]
    if start is not None or duration is not None:
        lo, hi = _window(arrivals=arrivals, start=start or 0.0, duration=duration)
        arrivals, input_tokens, output_tokens = (
            arrivals[lo:hi],
            input_tokens[lo:hi],
            output_tokens[lo:hi],
        )
        codes = None if codes is None else codes[lo:hi]
        prefixes = None if prefixes is None else prefixes[lo:hi]
        if arrivals.size:
            arrivals = arrivals - arrivals[0]
    trace = Trace(
        name=path.stem,
        arrivals=arrivals,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        skipped_rows=rows.skipped,
        prefixes=prefixes,
        prefix_block=MOONCAKE_BLOCK,
    )
    return trace, names, codes


def _take(trace: Trace, keep: npt.NDArray[np.bool_] | IntArray) -> Trace:
    """The requests of `trace` that `keep` selects (a mask or indices), in that order."""
    return replace(
        trace,
        arrivals=trace.arrivals[keep],
        input_tokens=trace.input_tokens[keep],
        output_tokens=trace.output_tokens[keep],
        prefixes=None if trace.prefixes is None else trace.prefixes[keep],
    )


def _no_model_column(path: Path) -> TraceError:
    return TraceError(
        path=path,
        line=None,
        why=f'no model column ({", ".join(MODEL_NAMES)}) to tell the models apart; an Azure '
        'trace holds one model',
    )


def load_trace(
    *,
    path: Path,
    fmt: str = 'auto',
    skip_bad: bool = False,
    start: float | None = None,
    duration: float | None = None,
    rate_scale: float = 1.0,
    seed: int | Sequence[int] = 0,
    model: str | None = None,
) -> Trace:
    """Read a trace file, rebase it to 0, cut the window [start, start + duration), keep the
    rows of `model` (when given), scale the rate.

    The window is applied after the first rebase (`start` seconds after the first request) and is
    itself rebased so its first request is at t=0; an empty window gives an empty trace. Then, if
    rate_scale != 1, `scale_rate(factor=rate_scale, seed=seed)`.
    """
    _check_arguments(fmt=fmt, start=start, duration=duration)
    rows = read_rows(path=path, fmt=fmt, skip_bad=skip_bad)
    trace, names, codes = _table(path=path, rows=rows, start=start, duration=duration)
    if model is not None:
        if codes is None:
            raise _no_model_column(path)
        if model not in names:
            raise TraceError(
                path=path,
                line=None,
                why=f'no request of model {model[:80]!r}; the file has ' + ', '.join(names[:10]),
            )
        trace = _take(trace, codes == names.index(model))
    if rate_scale != 1.0:
        trace = scale_rate(trace=trace, factor=rate_scale, seed=seed)
    return trace


def load_by_model(
    *,
    path: Path,
    models: Mapping[str, str],
    fmt: str = 'auto',
    skip_bad: bool = False,
    start: float | None = None,
    duration: float | None = None,
    rate_scale: float = 1.0,
    seed: int = 0,
) -> Split:
    """Split a trace file by its model column into one trace per model.

    `models` maps each value the model column may hold to the name of the model it stands for
    (several values may stand for one model); a row holding another value is malformed. Every
    model named gets a trace, possibly empty. The file is rebased and windowed as `load_trace`
    does, as a whole; then each model's trace is scaled with seed (seed, i), i its place in
    name order.
    """
    _check_arguments(fmt=fmt, start=start, duration=duration)
    rows = read_rows(path=path, fmt=fmt, skip_bad=skip_bad, accept=models)
    trace, names, codes = _table(path=path, rows=rows, start=start, duration=duration)
    if codes is None:
        raise _no_model_column(path)
    traces: dict[str, Trace] = {}
    for index, model in enumerate(sorted(set(models.values()))):
        mine = [i for i, name in enumerate(names) if models[name] == model]
        each = replace(_take(trace, np.isin(codes, mine)), skipped_rows=0)
        if rate_scale != 1.0:
            each = scale_rate(trace=each, factor=rate_scale, seed=(seed, index))
        traces[model] = each
    return Split(traces=traces, skipped_rows=rows.skipped)


def scale_rate(*, trace: Trace, factor: float, seed: int | Sequence[int]) -> Trace:
    """Scale the request rate by `factor` while keeping the timeline's shape and duration.

    factor < 1 keeps each request independently with probability `factor` (thinning).
    factor > 1 keeps every request and adds floor(factor) − 1 copies of it, plus one more with
    probability frac(factor); a copy is placed at arrival + U(0, gap), gap being the time to the
    next original arrival (0 for the last), so copies stay inside the burst their original belongs
    to and the span of the trace never grows. Copies keep the original's token lengths and
    prompt block ids (a copy shares its original's whole prompt).

    Why this and not compressing time: compressing would shorten the trace and move every burst
    and diurnal feature; thinning and in-place copying preserve when load arrives, only how much.
    The result is sorted (stable; originals before their copies at equal times), not rebased, and
    deterministic for a given seed. factor == 1 returns the trace unchanged. factor <= 0, NaN or
    Inf raises ValueError.
    """
    if not (math.isfinite(factor) and factor > 0):
        raise ValueError(f'rate scale factor must be finite and > 0, got {factor}')
    n = len(trace)
    if factor == 1.0 or n == 0:
        return trace
    rng = np.random.default_rng(seed)
    if factor < 1.0:
        keep = rng.random(n) < factor
        return _take(trace, keep)
    whole = math.floor(factor)
    copies = (whole - 1) + (rng.random(n) < factor - whole).astype(np.int64)
    gaps = np.diff(trace.arrivals, append=trace.arrivals[-1])
    source = np.repeat(np.arange(n, dtype=np.int64), copies)
    placed = trace.arrivals[source] + rng.random(source.size) * gaps[source]
    times = np.concatenate([trace.arrivals, placed])
    index = np.concatenate([np.arange(n, dtype=np.int64), source])
    order = np.argsort(times, kind='stable')
    index = index[order]
    return replace(_take(trace, index), arrivals=times[order])


def _window(*, arrivals: FloatArray, start: float, duration: float | None) -> tuple[int, int]:
    lo = int(np.searchsorted(arrivals, start, side='left'))
    hi = arrivals.shape[0]
    if duration is not None and math.isfinite(start + duration):
        hi = int(np.searchsorted(arrivals, start + duration, side='left'))
    return lo, hi
