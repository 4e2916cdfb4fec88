"""Load request traces from disk into a `Trace`, and scale their request rate.

Why: the simulator replays real traffic (the Azure 2023/2024 LLM inference traces, Vidur's
reformatted Splitwise files, Mooncake's JSONL) and needs them as three aligned arrays: arrival
seconds from 0, input tokens, output tokens. This module is the only place that knows the file
formats.

Formats (`fmt`):
- 'azure': CSV whose time column holds date-times, `2023-11-16 18:17:03.9799600` (Azure 2023,
  no zone: read as UTC) or `2024-05-10 00:00:00.010000+00:00` (Azure 2024, offset applied).
- 'csv': CSV with a header; the time column holds numbers.
- 'jsonl': one JSON object per line; the time value is a number.
- 'auto' (default): 'jsonl' when the file name ends in .jsonl/.ndjson/.json or its first non-blank
  character is `{`; 'azure' when the CSV header is exactly Azure's three columns
  (`TIMESTAMP,ContextTokens,GeneratedTokens`, any order and case); otherwise 'csv'. A generic CSV
  that happens to use Azure's column names with numeric times needs fmt='csv'.

Column (or JSON key) names are matched case-insensitively; where several are present the first in
the order below wins:
- time: timestamp, time, arrival, arrival_time, arrived_at — seconds; the same names with an
  `_ms` suffix (timestamp_ms, …) are milliseconds. One exception: a JSONL file whose first object
  has a `hash_ids` key is Mooncake's format, whose `timestamp` is documented as milliseconds.
- input tokens: input_length, input_tokens, prompt_tokens, num_prefill_tokens, ContextTokens.
- output tokens: output_length, output_tokens, completion_tokens, num_decode_tokens,
  GeneratedTokens.
Other columns are ignored.

Arrivals are rebased so the first request is at t=0 and sorted stably when the file is not in
order (ties keep file order). Times may be negative or fractional in the file; they only matter
relative to each other.

Bad input. A malformed row raises `TraceError('<file>:<line>: <why>')` (line numbers 1-based,
the header is line 1), or, with skip_bad=True, is dropped and counted in `Trace.skipped_rows`.
Malformed means: wrong column count, a JSON line that is not an object or lacks a key, a number
or date-time that does not parse, a NaN/Inf time, a token count that is not a whole number,
input tokens < 1, output tokens < 0, or a token count over 10⁹. An output count of exactly 0 is
read as 1: vLLM always produces at least one token per request, and such rows appear in real
traces (the request ran, only its accounting says 0). Blank lines are ignored and not counted.
A missing or unreadable file, an empty file, a header with no data rows, a file where every row
was skipped, or an unknown header raise TraceError (never skipped); the unknown-header message
lists the accepted names. Bad arguments (unknown fmt, window or rate values out of range) raise
ValueError.
"""

from __future__ import annotations

import csv
import json
import math
import re
from collections.abc import Sequence
from dataclasses import replace
from datetime import date
from pathlib import Path
from typing import Final

import numpy as np

from llmscaler.sim.types import Trace

FORMATS: Final = ('auto', 'azure', 'csv', 'jsonl')
TIME_NAMES: Final = ('timestamp', 'time', 'arrival', 'arrival_time', 'arrived_at')
INPUT_NAMES: Final = (
    'input_length',
    'input_tokens',
    'prompt_tokens',
    'num_prefill_tokens',
    'ContextTokens',
)
OUTPUT_NAMES: Final = (
    'output_length',
    'output_tokens',
    'completion_tokens',
    'num_decode_tokens',
    'GeneratedTokens',
)
MAX_TOKENS: Final = 10**9
_AZURE_HEADER: Final = frozenset({'timestamp', 'contexttokens', 'generatedtokens'})
_JSONL_SUFFIXES: Final = frozenset({'.jsonl', '.ndjson', '.json'})
_DATETIME: Final = re.compile(
    r'(\d{4}-\d{2}-\d{2})[ T](\d{2}):(\d{2}):(\d{2}(?:\.\d+)?)(?:Z|([+-])(\d{2}):?(\d{2}))?'
)


class TraceError(Exception):
    """A trace file that cannot be read; the message is `<file>:<line>: <why>` on one line."""

    def __init__(self, *, path: Path | str, line: int | None, why: str) -> None:
        self.path = str(path)
        self.line = line
        self.why = why
        where = self.path if line is None else f'{self.path}:{line}'
        super().__init__(f'{where}: {why}')

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild_error, (self.path, self.line, self.why))


def _rebuild_error(path: str, line: int | None, why: str) -> TraceError:
    return TraceError(path=path, line=line, why=why)


class _BadRow(Exception):
    """One malformed row; the caller adds the file and line."""


def load_trace(
    *,
    path: Path,
    fmt: str = 'auto',
    skip_bad: bool = False,
    start: float | None = None,
    duration: float | None = None,
    rate_scale: float = 1.0,
    seed: int = 0,
) -> Trace:
    """Read a trace file, rebase it to 0, cut the window [start, start + duration), scale its rate.

    The window is applied after the first rebase (`start` seconds after the first request) and is
    itself rebased so its first request is at t=0; an empty window gives an empty trace. Then, if
    rate_scale != 1, `scale_rate(factor=rate_scale, seed=seed)`.
    """
    if fmt not in FORMATS:
        raise ValueError(f'unknown trace format {fmt!r}; valid: {", ".join(FORMATS)}')
    if start is not None and not (math.isfinite(start) and start >= 0):
        raise ValueError(f'window start must be finite and >= 0, got {start}')
    if duration is not None and not duration > 0:
        raise ValueError(f'window duration must be > 0, got {duration}')
    text = _read(path)
    lines = [line.rstrip('\r') for line in text.split('\n')]
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    if first is None:
        raise TraceError(path=path, line=1, why='empty file')
    if fmt == 'auto':
        fmt = _detect(path=path, first_line=lines[first])
    parsed = (
        _parse_jsonl(path=path, lines=lines, skip_bad=skip_bad)
        if fmt == 'jsonl'
        else _parse_csv(
            path=path, lines=lines, header_at=first, azure=fmt == 'azure', skip_bad=skip_bad
        )
    )
    times, inputs, outputs, skipped = parsed
    if not times:
        why = f'no valid rows ({skipped} skipped)' if skipped else 'no data rows'
        raise TraceError(path=path, line=None, why=why)
    arrivals = np.asarray(times, dtype=np.float64)
    input_tokens = np.asarray(inputs, dtype=np.int64)
    output_tokens = np.asarray(outputs, dtype=np.int64)
    if arrivals.size > 1 and bool(np.any(np.diff(arrivals) < 0)):
        order = np.argsort(arrivals, kind='stable')
        arrivals, input_tokens, output_tokens = (
            arrivals[order],
            input_tokens[order],
            output_tokens[order],
        )
    arrivals = arrivals - arrivals[0]
    trace = Trace(
        name=path.stem,
        arrivals=arrivals,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        skipped_rows=skipped,
    )
    if start is not None or duration is not None:
        trace = _window(trace=trace, start=start or 0.0, duration=duration)
    if rate_scale != 1.0:
        trace = scale_rate(trace=trace, factor=rate_scale, seed=seed)
    return trace


def scale_rate(*, trace: Trace, factor: float, seed: int) -> Trace:
    """Scale the request rate by `factor` while keeping the timeline's shape and duration.

    factor < 1 keeps each request independently with probability `factor` (thinning).
    factor > 1 keeps every request and adds floor(factor) − 1 copies of it, plus one more with
    probability frac(factor); a copy is placed at arrival + U(0, gap), gap being the time to the
    next original arrival (0 for the last), so copies stay inside the burst their original belongs
    to and the span of the trace never grows. Copies keep the original's token lengths.

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
        return replace(
            trace,
            arrivals=trace.arrivals[keep],
            input_tokens=trace.input_tokens[keep],
            output_tokens=trace.output_tokens[keep],
        )
    whole = math.floor(factor)
    copies = (whole - 1) + (rng.random(n) < factor - whole).astype(np.int64)
    gaps = np.diff(trace.arrivals, append=trace.arrivals[-1])
    source = np.repeat(np.arange(n, dtype=np.int64), copies)
    placed = trace.arrivals[source] + rng.random(source.size) * gaps[source]
    times = np.concatenate([trace.arrivals, placed])
    index = np.concatenate([np.arange(n, dtype=np.int64), source])
    order = np.argsort(times, kind='stable')
    index = index[order]
    return replace(
        trace,
        arrivals=times[order],
        input_tokens=trace.input_tokens[index],
        output_tokens=trace.output_tokens[index],
    )


def _window(*, trace: Trace, start: float, duration: float | None) -> Trace:
    lo = int(np.searchsorted(trace.arrivals, start, side='left'))
    hi = len(trace)
    if duration is not None and math.isfinite(start + duration):
        hi = int(np.searchsorted(trace.arrivals, start + duration, side='left'))
    arrivals = trace.arrivals[lo:hi]
    if arrivals.size:
        arrivals = arrivals - arrivals[0]
    return replace(
        trace,
        arrivals=arrivals,
        input_tokens=trace.input_tokens[lo:hi],
        output_tokens=trace.output_tokens[lo:hi],
    )


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding='utf-8-sig')
    except FileNotFoundError:
        raise TraceError(path=path, line=None, why='no such file') from None
    except UnicodeDecodeError:
        raise TraceError(path=path, line=None, why='not UTF-8 text') from None
    except OSError as exc:
        raise TraceError(path=path, line=None, why=f'cannot read: {exc.strerror}') from None


def _detect(*, path: Path, first_line: str) -> str:
    if path.suffix.lower() in _JSONL_SUFFIXES or first_line.lstrip().startswith('{'):
        return 'jsonl'
    names = [name.strip().lower() for name in next(csv.reader([first_line]))]
    if len(names) == 3 and set(names) == _AZURE_HEADER:
        return 'azure'
    return 'csv'


def _unknown(names: str) -> str:
    return (
        f'unknown columns {names}; need a time column ({", ".join(TIME_NAMES)}: seconds, or '
        f'the same with _ms: milliseconds), an input column ({", ".join(INPUT_NAMES)}) and an '
        f'output column ({", ".join(OUTPUT_NAMES)})'
    )


def _find(names: Sequence[str], wanted: Sequence[str]) -> int | None:
    lowered = [name.strip().lower() for name in names]
    for name in wanted:
        if name.lower() in lowered:
            return lowered.index(name.lower())
    return None


def _find_time(names: Sequence[str]) -> tuple[int, bool] | None:
    """Index of the time column and whether it is in milliseconds."""
    lowered = [name.strip().lower() for name in names]
    for name in TIME_NAMES:
        for candidate, ms in ((name, False), (f'{name}_ms', True)):
            if candidate in lowered:
                return lowered.index(candidate), ms
    return None


_Parsed = tuple[list[float], list[int], list[int], int]


def _parse_csv(
    *, path: Path, lines: list[str], header_at: int, azure: bool, skip_bad: bool
) -> _Parsed:
    header = next(csv.reader([lines[header_at]]))
    time_col = _find_time(header)
    in_col = _find(header, INPUT_NAMES)
    out_col = _find(header, OUTPUT_NAMES)
    if time_col is None or in_col is None or out_col is None:
        raise TraceError(path=path, line=header_at + 1, why=_unknown(repr(lines[header_at])))
    t_col, ms = time_col
    width = len(header)
    clock = _Clock()
    times: list[float] = []
    inputs: list[int] = []
    outputs: list[int] = []
    skipped = 0
    # Data rows are split by hand, not by the csv module: trace rows hold plain numbers, and a
    # stray quote must not swallow the following lines and shift every reported line number.
    for number, line in enumerate(lines[header_at + 1 :], start=header_at + 2):
        if not line.strip():
            continue
        row = [field.strip().strip('"') for field in line.split(',')]
        try:
            if len(row) != width:
                raise _BadRow(f'expected {width} columns, got {len(row)}')
            when = clock.seconds(row[t_col]) if azure else _seconds(row[t_col], ms=ms)
            tokens_in, tokens_out = _lengths(row[in_col], row[out_col])
        except _BadRow as exc:
            if not skip_bad:
                raise TraceError(path=path, line=number, why=str(exc)) from None
            skipped += 1
            continue
        times.append(when)
        inputs.append(tokens_in)
        outputs.append(tokens_out)
    return times, inputs, outputs, skipped


def _parse_jsonl(*, path: Path, lines: list[str], skip_bad: bool) -> _Parsed:
    keys: tuple[str, str, str] | None = None
    ms = False
    times: list[float] = []
    inputs: list[int] = []
    outputs: list[int] = []
    skipped = 0
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            try:
                obj = json.loads(line)
            except ValueError:
                raise _BadRow('not valid JSON') from None
            if not isinstance(obj, dict):
                raise _BadRow(f'expected a JSON object, got {type(obj).__name__}')
            if keys is None:
                # The first object plays the part of a header: it fixes the key names.
                names = [str(key) for key in obj]
                time_col = _find_time(names)
                in_col = _find(names, INPUT_NAMES)
                out_col = _find(names, OUTPUT_NAMES)
                if time_col is None or in_col is None or out_col is None:
                    raise TraceError(path=path, line=number, why=_unknown(f'{names}'))
                keys = (names[time_col[0]], names[in_col], names[out_col])
                ms = time_col[1] or (keys[0].lower() == 'timestamp' and 'hash_ids' in obj)
            missing = [key for key in keys if key not in obj]
            if missing:
                raise _BadRow(f'missing key {missing[0]!r}')
            raw_time = obj[keys[0]]
            when = _seconds(raw_time if type(raw_time) in (int, float) else str(raw_time), ms=ms)
            tokens_in, tokens_out = _lengths(obj[keys[1]], obj[keys[2]])
        except _BadRow as exc:
            if not skip_bad:
                raise TraceError(path=path, line=number, why=str(exc)) from None
            skipped += 1
            continue
        times.append(when)
        inputs.append(tokens_in)
        outputs.append(tokens_out)
    return times, inputs, outputs, skipped


def _seconds(value: str | float, *, ms: bool) -> float:
    try:
        seconds = float(value)
    except (ValueError, OverflowError):
        raise _BadRow(f'time {value!r} is not a number') from None
    if not math.isfinite(seconds):
        raise _BadRow(f'time {value!r} is not finite')
    return seconds / 1000.0 if ms else seconds


def _lengths(raw_in: object, raw_out: object) -> tuple[int, int]:
    tokens_in = _count(raw_in, 'input tokens')
    tokens_out = _count(raw_out, 'output tokens')
    if tokens_in < 1:
        raise _BadRow(f'input tokens {tokens_in} < 1')
    if tokens_out < 0:
        raise _BadRow(f'output tokens {tokens_out} < 0')
    return tokens_in, max(tokens_out, 1)


def _count(value: object, what: str) -> int:
    if type(value) is int:
        count = value
    else:
        text = str(value)
        try:
            count = int(text)
        except ValueError:
            try:
                number = float(text)
            except ValueError:
                raise _BadRow(f'{what} {text!r} is not a number') from None
            if not number.is_integer():
                raise _BadRow(f'{what} {text!r} is not a whole number') from None
            count = int(number)
    if count > MAX_TOKENS:
        raise _BadRow(f'{what} {count} exceeds {MAX_TOKENS}')
    return count


class _Clock:
    """Parses Azure date-times into seconds from midnight (UTC) of the first date seen.

    Counting from a nearby day, not from 1970, keeps the 100 ns resolution of the file in a
    float64. Dates are few, so their day numbers are cached.
    """

    def __init__(self) -> None:
        self._days: dict[str, int] = {}
        self._base: int | None = None

    def seconds(self, text: str) -> float:
        match = _DATETIME.fullmatch(text.strip())
        if match is None:
            raise _BadRow(f'time {text!r} is not a date-time like 2023-11-16 18:17:03.9799600')
        day_text, hh, mm, ss, sign, off_h, off_m = match.groups()
        day = self._days.get(day_text)
        if day is None:
            try:
                day = date.fromisoformat(day_text).toordinal()
            except ValueError:
                raise _BadRow(f'time {text!r} has an invalid date') from None
            self._days[day_text] = day
        if self._base is None:
            self._base = day
        hours, minutes, secs = int(hh), int(mm), float(ss)
        if hours > 23 or minutes > 59 or secs >= 61.0:
            raise _BadRow(f'time {text!r} has an invalid time of day')
        offset = 0
        if sign is not None:
            offset = (int(off_h) * 3600 + int(off_m) * 60) * (1 if sign == '+' else -1)
        return (day - self._base) * 86400.0 + hours * 3600 + minutes * 60 + secs - offset
