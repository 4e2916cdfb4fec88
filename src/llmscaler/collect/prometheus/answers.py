"""Prometheus answers decoded: one instant-vector answer into its series, or a classified failure.

Why: `collect.prometheus.source` sends the registry's queries; each answer is decoded here, in a
worker thread when it is large (`http.parse_off_loop`), before `collect.prometheus.fold` folds the
answers of a cycle into one `Reading`. Decoding is where most of a large fleet's cost lies
(`bench/metrics.py`), so it is written for speed: a fast path that trusts the shapes `json.loads`
produces, and a slow path, taken only for a malformed series, that names the defect. An answer of
`SLICED_BYTES` or more is decoded a series at a time (`collect.sliced_json`) and the decoded
document freed in slices (`release`), so that no single step holds the interpreter lock, and
with it the event loop, for long; the series come back as a list that the caller frees in slices
too.

What it gives: `outcome(query=, answer=)` → `Outcome`, the series `(labels, timestamp, value)` of
the answer with the count of non-finite values dropped, or a `SourceError` for the query:
- HTTP_4XX / HTTP_5XX: the status, with Prometheus' `errorType: error` text (or the first 200
  characters of a body that is not JSON) and any Retry-After header in the message;
- BAD_RESPONSE: another non-2xx status, a body that is not JSON, not the API's vector shape, or
  `status: error`;
- PARTIAL_DATA: the answer carried `warnings`; its series are still used.
Every NaN or ±Inf value becomes None (its series still counts as present) and is counted; a -0
value reads as 0, so that no figure later depends on the order of the series. A timestamp that is
not a finite number, a value that is not a numeric string, labels that are not strings: the whole
answer is BAD_RESPONSE. Nothing raises.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from llmscaler.collect import http, sliced_json
from llmscaler.collect.prometheus.queries import Query
from llmscaler.collect.readings import ErrorReason, SourceError
from llmscaler.gc_pause import paused

_JSON_NUMBERS = (int, float)
SLICED_BYTES = 4 * 1024 * 1024
"""From this size on an answer is decoded in slices: `json.loads` holds the interpreter lock for
~60 ms over 4 MiB, and a second over the ~30 MiB of 10,000 pods' latency histograms, while the
slices cost about half as much again as one call."""

Series = tuple[dict[str, str], float, float | None]
"""(labels, timestamp, value): a plain tuple, as an answer holds one per pod and family. The
value is None when Prometheus returned NaN or ±Inf."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """One query's result: its series, or None when it failed (then `error` says why)."""

    series: list[Series] | None
    """A list, not a tuple, so that `release` can free it a slice at a time."""
    error: SourceError | None = None
    dropped: int = 0
    """How many non-finite values were read as None."""


def failed(query: Query, reason: ErrorReason, message: str) -> Outcome:
    """The outcome of a query that gave nothing usable."""
    return Outcome(series=None, error=SourceError(query.name, reason, message))


class BadResponse(Exception):
    """An answer that is not the API's instant-vector shape (the message says how)."""


def outcome(*, query: Query, answer: http.Answer) -> Outcome:
    """The series of one answer, or its failure (see the module docstring)."""
    status = answer.status

    failure = http.status_failure(status=status)
    if failure is not None:
        reason, message = failure
        if reason is ErrorReason.BAD_RESPONSE:
            return failed(query, reason, message)
        retry_after = answer.headers.get('Retry-After')
        if retry_after is not None:
            message += f' (Retry-After: {retry_after})'
        detail = _error_detail(answer.body)
        return failed(query, reason, f'{message}: {detail}' if detail else message)
    try:
        with paused():
            series, dropped, warnings = _parse(_decoded(answer.body))
    except (ValueError, BadResponse) as exc:
        # json.JSONDecodeError and UnicodeDecodeError are ValueErrors.
        return failed(query, ErrorReason.BAD_RESPONSE, str(exc) or type(exc).__name__)
    error = None
    if warnings:
        error = SourceError(query.name, ErrorReason.PARTIAL_DATA, '; '.join(warnings))
    return Outcome(series=series, error=error, dropped=dropped)


def _decoded(body: bytes) -> Any:
    """The answer's JSON; a large one in slices (`collect.sliced_json`: the answer, its data and
    its result walked in Python, each series decoded alone), so that decoding it never holds the
    interpreter lock, and with it the event loop, for longer than one series."""
    if len(body) < SLICED_BYTES:
        return json.loads(body)
    return sliced_json.loads(data=body, descend=3)


def _error_detail(body: bytes) -> str:
    try:
        decoded = json.loads(body)
    except ValueError:
        return body[:200].decode('utf-8', 'replace').strip()
    if isinstance(decoded, dict) and 'error' in decoded:
        return f'{decoded.get("errorType", "error")}: {decoded["error"]}'
    return ''


def _parse(body: Any) -> tuple[list[Series], int, list[str]]:
    if not isinstance(body, dict):
        raise BadResponse('answer is not a JSON object')
    if body.get('status') == 'error':
        raise BadResponse(f'{body.get("errorType", "error")}: {body.get("error", "")}')
    if body.get('status') != 'success':
        raise BadResponse(f'unknown status {body.get("status")!r}')
    warnings = body.get('warnings') or []
    if not isinstance(warnings, list) or not all(isinstance(w, str) for w in warnings):
        raise BadResponse('warnings is not a list of strings')
    data = body.get('data')
    if not isinstance(data, dict) or data.get('resultType') != 'vector':
        raise BadResponse('data is not an instant vector')
    result = data.get('result')
    if not isinstance(result, list):
        raise BadResponse('data.result is not a list')
    parsed, dropped = _parse_result(result)
    release(result)
    return parsed, dropped, warnings


def release(items: list[Any]) -> None:
    """Empty a large list a slice at a time: dropped at once, its hundreds of thousands of
    objects would be freed in one cascade that holds the interpreter lock throughout (a third of
    a second for 10,000 pods' latency histograms), stopping the event loop with it."""
    while items:
        del items[-4096:]


def _parse_result(result: list[Any]) -> tuple[list[Series], int]:
    """The series of a vector and the number of non-finite values among them.

    The fast path trusts the shapes `json.loads` can produce: object keys are always strings, so
    joining the label values is enough to prove they are all strings. An item it rejects goes
    through `_parse_series`, which raises with the precise complaint.
    """
    parsed: list[Series] = []
    append = parsed.append
    join = ''.join
    isfinite = math.isfinite
    dropped = 0
    for item in result:
        try:
            metric = item['metric']
            stamp, text = item['value']
            join(metric.values())
            ok = (
                type(metric) is dict
                and type(text) is str
                and type(stamp) in _JSON_NUMBERS
                and isfinite(stamp)
            )
            value = float(text) if ok else math.nan
        except (AttributeError, KeyError, OverflowError, TypeError, ValueError):
            ok = False
        if not ok:
            _parse_series(item)
            raise BadResponse('a series is malformed')  # unreachable: it raised
        if isfinite(value):
            # + 0.0 turns -0 into 0, so that combining series by max cannot depend on their order.
            append((metric, float(stamp), value + 0.0))
        else:
            append((metric, float(stamp), None))
            dropped += 1
    return parsed, dropped


def _parse_series(item: Any) -> Series:
    """One series, checked field by field (the slow path: it names what is wrong)."""
    metric = item.get('metric') if isinstance(item, dict) else None
    sample = item.get('value') if isinstance(item, dict) else None
    if not isinstance(metric, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in metric.items()
    ):
        raise BadResponse('a series has no string labels')
    if not isinstance(sample, list) or len(sample) != 2:
        raise BadResponse('a series has no [timestamp, value] sample')
    stamp, text = sample
    try:
        finite_stamp = not isinstance(stamp, bool) and math.isfinite(stamp)
    except (OverflowError, TypeError):
        # An integer beyond float range overflows; a non-number is a TypeError.
        finite_stamp = False
    if not finite_stamp:
        raise BadResponse(f'bad sample timestamp {stamp!r}')
    if not isinstance(text, str):
        raise BadResponse(f'sample value {text!r} is not a string')
    try:
        value = float(text)
    except ValueError:
        raise BadResponse(f'sample value {text!r} is not a number') from None
    return metric, float(stamp), value + 0.0 if math.isfinite(value) else None
