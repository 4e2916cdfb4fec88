"""JSON decoded in small slices, so that a large document does not hold the interpreter lock.

Why: `json.loads` is one call into C that holds the interpreter lock until the whole document is
built: about a second for the 30-odd MiB a Prometheus answer of 10,000 pods' latency histograms
weighs. Run in a worker thread (`http.parse_off_loop`), it still stops every other thread for
that second, the event loop included, and with it the renewal of the leader's Lease. Here the
outer objects and arrays (`descend` levels deep: for a Prometheus answer, the answer, its `data`
and its `result`) are walked in Python and only their members are handed to the C decoder, one
at a time; between two members the interpreter may switch threads, so the longest hold is one
member's decoding (one series: microseconds).

What it gives: `loads(data=..., descend=...)` is `json.loads(data)`, the same value for every
document `json.loads` accepts (the encoding detected as `json.loads` detects it, a repeated key
keeping its last value, NaN and Infinity accepted as `json.loads` accepts them). It costs about
half as much again as `json.loads` (a Python step per member), so it is meant for large
documents only.

What fails: whatever `json.loads` refuses raises ValueError here too (`json.JSONDecodeError`, or
UnicodeDecodeError for bytes that are not in the detected encoding); the message may place the
defect differently.
"""

from __future__ import annotations

import json
import re
from typing import Any

_DECODER = json.JSONDecoder()
_BLANKS = re.compile(r'[ \t\n\r]*')
_BLANK = frozenset(' \t\n\r')


def loads(*, data: bytes | str, descend: int) -> Any:
    """`json.loads(data)`, walking the outer `descend` levels of objects and arrays in Python."""
    text = data if isinstance(data, str) else data.decode(json.detect_encoding(data))
    if text.startswith('\ufeff'):
        raise json.JSONDecodeError('Unexpected UTF-8 BOM (decode using utf-8-sig)', text, 0)
    value, end = _value(text, _skip(text, 0), descend)
    end = _skip(text, end)
    if end != len(text):
        raise json.JSONDecodeError('Extra data', text, end)
    return value


def _skip(text: str, at: int) -> int:
    if at < len(text) and text[at] in _BLANK:
        match = _BLANKS.match(text, at)
        assert match is not None  # the pattern matches the empty string
        return match.end()
    return at


def _value(text: str, at: int, descend: int) -> tuple[Any, int]:
    """The value starting at `at` (no blank there) and where it ends."""
    opening = text[at : at + 1]
    if descend > 0 and opening == '{':
        return _object(text, at + 1, descend - 1)
    if descend > 0 and opening == '[':
        return _array(text, at + 1, descend - 1)
    found: tuple[Any, int] = _DECODER.raw_decode(text, at)
    return found


def _object(text: str, at: int, descend: int) -> tuple[dict[str, Any], int]:
    found: dict[str, Any] = {}
    at = _skip(text, at)
    if text[at : at + 1] == '}':
        return found, at + 1
    while True:
        if text[at : at + 1] != '"':
            raise json.JSONDecodeError(
                'Expecting property name enclosed in double quotes', text, at
            )
        key, at = _DECODER.raw_decode(text, at)
        at = _skip(text, at)
        if text[at : at + 1] != ':':
            raise json.JSONDecodeError("Expecting ':' delimiter", text, at)
        at = _skip(text, at + 1)
        found[key], at = _value(text, at, descend)
        at = _skip(text, at)
        separator = text[at : at + 1]
        if separator == '}':
            return found, at + 1
        if separator != ',':
            raise json.JSONDecodeError("Expecting ',' delimiter", text, at)
        at = _skip(text, at + 1)


def _array(text: str, at: int, descend: int) -> tuple[list[Any], int]:
    found: list[Any] = []
    append = found.append
    at = _skip(text, at)
    if text[at : at + 1] == ']':
        return found, at + 1
    if descend > 0:
        while True:
            value, at = _value(text, at, descend)
            append(value)
            at, done = _next(text, at, ']')
            if done:
                return found, at
    # The members themselves: the loop that runs once per series, kept to the fewest steps.
    decode = _DECODER.raw_decode
    while True:
        value, at = decode(text, at)
        append(value)
        separator = text[at : at + 1]
        if separator == ',' and text[at + 1 : at + 2] not in _BLANK:
            at += 1
            continue
        at, done = _next(text, at, ']')
        if done:
            return found, at


def _next(text: str, at: int, closing: str) -> tuple[int, bool]:
    """After a member: where the next one starts, or past the closing bracket (True)."""
    at = _skip(text, at)
    separator = text[at : at + 1]
    if separator == closing:
        return at + 1, True
    if separator != ',':
        raise json.JSONDecodeError("Expecting ',' delimiter", text, at)
    return _skip(text, at + 1), False
