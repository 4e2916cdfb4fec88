"""Go-style durations (`10m`, `1h30m`, `500ms`, `1.5s`) as used in WVA's ConfigMaps and env vars.

Why: WVA's settings (`GLOBAL_OPT_INTERVAL`, `retention_period`, the cache thresholds) are Go
`time.Duration` strings, and users copy them between the two systems, so we accept exactly Go's
syntax: one or more `<number><unit>` parts, units `ns`, `us`, `µs` (or `μs`), `ms`, `s`, `m`, `h`,
numbers with an optional fraction (`1.5h`, `.5s`, `5.s`), an optional leading `+`.

Deliberately stricter than Go:

- A bare number without a unit is rejected, including `0`. In WVA a YAML integer such as
  `retention_period: 15` decodes as 15 *nanoseconds*; here it is an error saying a unit is needed.
- Negative durations are rejected (no setting of ours can be negative). Surrounding whitespace
  is ignored. Text over 64 characters is rejected without parsing; messages quote at most 40.

What fails: `parse_duration` raises ValueError with a message naming the problem for empty,
negative, unit-less, malformed or out-of-range (over Go's int64 nanoseconds) text.
`format_duration` raises ValueError for NaN, ±Inf and negative seconds.

The arithmetic is exact (integer nanoseconds via `Fraction`), so
`parse_duration(format_duration(x))` equals `x` for every whole number of nanoseconds up to about
52 days; `format_duration` renders in Go's `Duration.String` style (`10m0s`, `1h0m0s`, `1.5s`,
`500ms`), which Go also parses.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

_UNIT_NS: dict[str, int] = {
    'ns': 1,
    'us': 1_000,
    'µs': 1_000,  # U+00B5 MICRO SIGN, what Go prints
    'μs': 1_000,  # U+03BC GREEK SMALL LETTER MU, which Go also accepts
    'ms': 1_000_000,
    's': 1_000_000_000,
    'm': 60 * 1_000_000_000,
    'h': 3600 * 1_000_000_000,
}
_MAX_NS = 2**63 - 1  # Go's time.Duration is an int64 count of nanoseconds
_PART = re.compile(r'(\d+\.?\d*|\.\d+)([^\d.]*)')
_NS_PER_S = 1_000_000_000
_MAX_CHARS = 64  # a real duration is a few characters; longer text is refused unparsed


def _quoted(text: str) -> str:
    """`repr(text)` for messages, cut short: a message must stay one short line."""
    return repr(text) if len(text) <= 40 else repr(text[:37]) + '...'


def parse_duration(text: str) -> float:
    """Seconds in a Go duration string such as `1h30m` or `500ms` (a unit is required)."""
    if not isinstance(text, str):
        raise ValueError(f'a duration must be a string such as "10m", not {type(text).__name__}')
    body = text.strip()
    if not body:
        raise ValueError('empty duration')
    if body.startswith('-'):
        raise ValueError(f'negative duration {_quoted(text)}')
    if body.startswith('+'):
        body = body[1:]
    if len(body) > _MAX_CHARS:
        raise ValueError(f'duration {_quoted(text)} is longer than {_MAX_CHARS} characters')
    if re.fullmatch(r'\d+\.?\d*|\.\d+', body):
        raise ValueError(
            f'duration {_quoted(text)} has no unit; a unit is required '
            f'(ns, us, ms, s, m, h), e.g. "{body}s"'
        )
    total = Fraction(0)
    pos = 0
    while pos < len(body):
        match = _PART.match(body, pos)
        if match is None:
            raise ValueError(f'invalid duration {_quoted(text)}')
        number, unit = match.group(1), match.group(2)
        if not unit:
            raise ValueError(
                f'duration {_quoted(text)}: {_quoted(number)} has no unit; a unit is required '
                '(ns, us, ms, s, m, h)'
            )
        if unit not in _UNIT_NS:
            raise ValueError(
                f'duration {_quoted(text)}: unknown unit {_quoted(unit)} (ns, us, ms, s, m, h)'
            )
        total += Fraction(number) * _UNIT_NS[unit]
        pos = match.end()
    if total > _MAX_NS:
        raise ValueError(f'duration {_quoted(text)} is out of range (over about 292 years)')
    return float(total / _NS_PER_S)


def _fraction_digits(value: int, scale: int) -> str:
    """`value / scale` written with the fraction Go prints: trailing zeros removed."""
    whole, rest = divmod(value, scale)
    if rest == 0:
        return str(whole)
    width = len(str(scale)) - 1
    return f'{whole}.{str(rest).rjust(width, "0").rstrip("0")}'


def format_duration(seconds: float) -> str:
    """Go `Duration.String` rendering of `seconds`, rounded to the nanosecond (600 → `10m0s`)."""
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f'cannot format {seconds!r} as a duration')
    ns = round(Fraction(seconds) * _NS_PER_S)
    if ns == 0:
        return '0s'
    if ns < 1_000:
        return f'{ns}ns'
    if ns < 1_000_000:
        return f'{_fraction_digits(ns, 1_000)}µs'
    if ns < _NS_PER_S:
        return f'{_fraction_digits(ns, 1_000_000)}ms'
    hours, rest = divmod(ns, 3600 * _NS_PER_S)
    minutes, rest = divmod(rest, 60 * _NS_PER_S)
    secs = f'{_fraction_digits(rest, _NS_PER_S)}s'
    if hours:
        return f'{hours}h{minutes}m{secs}'
    if minutes:
        return f'{minutes}m{secs}'
    return secs
