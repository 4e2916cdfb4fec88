"""Trace files, row by row: the formats, the column names, and what makes a row malformed.

Why: the simulator replays traces in the files people have, and those formats are many (the
Azure 2023/2024 traces, Vidur's reformatted Splitwise files, Mooncake's JSONL, any CSV with a time
and two token columns). This module reads any of them into the same rows (`read_rows`: times,
token counts, models, prompt blocks) and says which rows are malformed; `sim.workload.trace`
turns the rows into the `Trace` arrays the simulator replays (windows, rate scaling, the split
by model).

Formats (`fmt`):
- 'azure': CSV whose time column holds date-times, `2023-11-16 18:17:03.9799600` (Azure 2023,
  no zone: read as UTC) or `2024-05-10 00:00:00.010000+00:00` (Azure 2024, offset applied).
  An Azure trace holds one model: it has no model column.
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
- prompt blocks (JSONL, Mooncake's format): `hash_ids`, a list of integer ids, one per 512-token
  block of the prompt (the last one partial; equal ids, equal content up to there). When the
  first object has it every row must: a row whose `hash_ids` is missing or not a list of
  integers is malformed (a list shorter than the prompt leaves the rest sharing nothing). The
  ids are chained (`Rows.prefixes`) so that id i stands for the prompt's first (i + 1)·512
  tokens; `sim.vllm.prefix_cache` maps them onto the engine's blocks.
- input tokens: input_length, input_tokens, prompt_tokens, num_prefill_tokens, ContextTokens.
- output tokens: output_length, output_tokens, completion_tokens, num_decode_tokens,
  GeneratedTokens.
- model (optional, CSV and JSONL): model, model_id, model_name — the model a request asks for,
  as text (a JSON value must be a string).
Other columns are ignored.

Bad input. A malformed row raises `TraceError('<file>:<line>: <why>')` (line numbers 1-based,
the header is line 1), or, with skip_bad=True, is dropped and counted. Malformed means: wrong
column count, a JSON line that is not an object or lacks a key, a number or date-time that does
not parse, a NaN/Inf time, a token count that is not a whole number, input tokens < 1, output
tokens < 0, a token count over 10⁹, a JSON model value that is not a string, or, when the
caller names the models it accepts, a model it does not. An output count of exactly 0 is read
as 1: vLLM always produces at least one token per request, and such rows appear in real traces
(the request ran, only its accounting says 0). Blank lines are ignored and not counted. A
missing or unreadable file, an empty file, a header with no data rows, or an unknown header raise
TraceError (never skipped); the unknown-header message lists the accepted names.
"""

from __future__ import annotations

import csv
import json
import math
import re
from array import array
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Final

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
MODEL_NAMES: Final = ('model', 'model_id', 'model_name')
MAX_TOKENS: Final = 10**9
MOONCAKE_BLOCK: Final = 512
"""Tokens per `hash_ids` block of Mooncake's traces."""
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


@dataclass(slots=True)
class Rows:
    """The valid rows of a trace file, in file order (times in seconds, not rebased)."""

    times: list[float]
    inputs: list[int]
    outputs: list[int]
    labels: list[str] | None
    """Each row's model; None when the file has no model column."""
    skipped: int
    prefixes: list[array[int]] | None = None
    """Each row's chained prompt block ids (Mooncake's `hash_ids`); None without them."""

    def add(
        self,
        *,
        when: float,
        tokens_in: int,
        tokens_out: int,
        label: str | None,
        chain: array[int] | None = None,
    ) -> None:
        """One valid row; its model and block ids are kept when the file has them."""
        self.times.append(when)
        self.inputs.append(tokens_in)
        self.outputs.append(tokens_out)
        if self.labels is not None and label is not None:
            self.labels.append(label)
        if self.prefixes is not None and chain is not None:
            self.prefixes.append(chain)

    def reject(self, bad: _BadRow, *, path: Path, line: int, skip_bad: bool) -> None:
        """One malformed row: counted when `skip_bad`, else the file's `TraceError`."""
        if not skip_bad:
            raise TraceError(path=path, line=line, why=str(bad)) from None
        self.skipped += 1


def read_rows(
    *, path: Path, fmt: str, skip_bad: bool, accept: Collection[str] | None = None
) -> Rows:
    """Every valid row of the file (see the module docstring). With `accept`, a row whose
    model is not in it is malformed; `fmt` is one of `FORMATS`."""
    text = _read(path)
    lines = [line.rstrip('\r') for line in text.split('\n')]
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    if first is None:
        raise TraceError(path=path, line=1, why='empty file')
    if fmt == 'auto':
        fmt = _detect(path=path, first_line=lines[first])
    if fmt == 'jsonl':
        return _parse_jsonl(path=path, lines=lines, skip_bad=skip_bad, accept=accept)
    return _parse_csv(
        path=path,
        lines=lines,
        header_at=first,
        azure=fmt == 'azure',
        skip_bad=skip_bad,
        accept=accept,
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


def _check_model(label: str, accept: Collection[str] | None) -> None:
    if accept is not None and label not in accept:
        raise _BadRow(
            f'model {label[:80]!r} is not a model of the scenario; models: '
            + ', '.join(sorted(accept))
        )


def _parse_csv(
    *,
    path: Path,
    lines: list[str],
    header_at: int,
    azure: bool,
    skip_bad: bool,
    accept: Collection[str] | None,
) -> Rows:
    header = next(csv.reader([lines[header_at]]))
    time_col = _find_time(header)
    in_col = _find(header, INPUT_NAMES)
    out_col = _find(header, OUTPUT_NAMES)
    if time_col is None or in_col is None or out_col is None:
        raise TraceError(path=path, line=header_at + 1, why=_unknown(repr(lines[header_at])))
    model_col = None if azure else _find(header, MODEL_NAMES)
    t_col, ms = time_col
    width = len(header)
    clock = _Clock()
    rows = Rows(
        times=[], inputs=[], outputs=[], labels=None if model_col is None else [], skipped=0
    )
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
            if model_col is not None:
                _check_model(row[model_col], accept)
        except _BadRow as exc:
            rows.reject(exc, path=path, line=number, skip_bad=skip_bad)
            continue
        label = None if model_col is None else row[model_col]
        rows.add(when=when, tokens_in=tokens_in, tokens_out=tokens_out, label=label)
    return rows


def _parse_jsonl(
    *, path: Path, lines: list[str], skip_bad: bool, accept: Collection[str] | None
) -> Rows:
    keys: tuple[str, str, str] | None = None
    model_key: str | None = None
    ms = False
    rows = Rows(times=[], inputs=[], outputs=[], labels=None, skipped=0)
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
                if 'hash_ids' in obj:
                    rows.prefixes = []
                model_col = _find(names, MODEL_NAMES)
                if model_col is not None:
                    model_key = names[model_col]
                    rows.labels = []
            missing = [key for key in (*keys, model_key or keys[0]) if key not in obj]
            if missing:
                raise _BadRow(f'missing key {missing[0]!r}')
            raw_time = obj[keys[0]]
            when = _seconds(raw_time if type(raw_time) in (int, float) else str(raw_time), ms=ms)
            tokens_in, tokens_out = _lengths(obj[keys[1]], obj[keys[2]])
            chain = None if rows.prefixes is None else _chain(obj.get('hash_ids'))
            label = None if model_key is None else obj[model_key]
            if model_key is not None:
                if not isinstance(label, str):
                    raise _BadRow(f'model must be a string, got {type(label).__name__}')
                _check_model(label, accept)
        except _BadRow as exc:
            rows.reject(exc, path=path, line=number, skip_bad=skip_bad)
            continue
        rows.add(when=when, tokens_in=tokens_in, tokens_out=tokens_out, label=label, chain=chain)
    return rows


def _chain(raw: object) -> array[int]:
    """Mooncake's `hash_ids` (one id per 512-token block of the prompt, the last one partial)
    as chained ids: id i then stands for the whole prompt up to the end of block i, whether
    the file's ids were chained or per-block (chaining chained ids keeps their equalities)."""
    if raw is None:
        raise _BadRow("missing key 'hash_ids'")
    if not isinstance(raw, list) or not all(type(v) is int for v in raw):
        raise _BadRow('hash_ids must be a list of integers')
    chained: array[int] = array('q')  # 64-bit ints: a long prompt has hundreds
    previous = 0
    for value in raw:
        previous = hash((previous, value))
        chained.append(previous)
    return chained


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
