"""Mutation operators: bytes and lines of a text, and values inside decoded JSON/YAML data.

Why: each campaign of `bench/fuzz.py` starts from valid inputs (metrics pages, snapshots,
ConfigMaps, VA objects) and breaks them the ways real input breaks: a page cut short or with a
flipped byte, a value that is NaN or 5,000 digits long, a label named twice, a field of the wrong
type, YAML that expands or nests without end. `mutate_bytes` and `mutate_data` apply one to three
operators drawn from a seeded `random.Random`, so an input is reproducible from its seed.

`HOSTILE_VALUES` are the values a decoded document may carry in place of a good one;
`HOSTILE_NUMBERS` are their texts, for formats read as text.
"""

from __future__ import annotations

import copy
import math
import random
from collections.abc import Callable
from typing import Any

HOSTILE_NUMBERS: tuple[str, ...] = (
    'NaN', 'nan', '+Inf', '-Inf', 'Inf', 'inf', 'Infinity', '-1', '-0', '-0.0', '0', '1', '2',
    '1.5', '7', '-1e-9', '1e-320', '1e308', '1e309', '-1e309', '3.4e38', '9' * 400, '9' * 5000,
    '0x10', '1_000', '1e', '--1', '+1', '.5', '5.', '١', ' ', '', '0.5.5', '1e+', 'null', 'true',
    '18446744073709551616', '2147483648', '-2147483649',
)  # fmt: skip
"""Texts in place of a number: non-finite, negative, out of range, huge, malformed."""

HOSTILE_VALUES: tuple[Any, ...] = (
    math.nan, math.inf, -math.inf, -1, -0.0, 0, 1, 2, 0.5, 1.5, 7, 1e-320, 1e308, 10**30,
    2**31 - 1, 2**31, 2**63, -(2**63), 10**400, 3.0, '3', '', 'x', 'NaN', '1e999', True, False,
    None, [], {}, [1], {'a': 1}, 'a' * 10_000, '\x00', 'é\u202e',
)  # fmt: skip
"""Values in place of a good one: wrong types, non-finite, out of range, huge (`deep` makes
the deeply nested ones, kept out of here so that copying a document stays cheap)."""


def deep(depth: int, *, leaf: Any = 1) -> Any:
    """`leaf` inside `depth` lists and dicts, alternating (built without recursion)."""
    node = leaf
    for level in range(depth):
        node = [node] if level % 2 else {'a': node}
    return node


_NOISE = (b'\x00', b'\xff', b'\xfe', b'\r', b'\n', b'{', b'}', b'"', b'\\', b',', b'=', b'#', b' ')


def _lines(data: bytes) -> list[bytes]:
    return data.split(b'\n')


def flip_bits(rng: random.Random, data: bytes) -> bytes:
    buf = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        if buf:
            buf[rng.randrange(len(buf))] ^= 1 << rng.randrange(8)
    return bytes(buf)


def insert_noise(rng: random.Random, data: bytes) -> bytes:
    at = rng.randrange(len(data) + 1)
    noise = b''.join(rng.choice(_NOISE) for _ in range(rng.randint(1, 6)))
    return data[:at] + noise + data[at:]


def truncate(rng: random.Random, data: bytes) -> bytes:
    return data[: rng.randrange(len(data) + 1)]


def duplicate_lines(rng: random.Random, data: bytes) -> bytes:
    lines = _lines(data)
    for _ in range(rng.randint(1, 5)):
        at = rng.randrange(len(lines))
        lines.insert(rng.randrange(len(lines) + 1), lines[at])
    return b'\n'.join(lines)


def remove_lines(rng: random.Random, data: bytes) -> bytes:
    lines = _lines(data)
    for _ in range(rng.randint(1, max(1, len(lines) // 4))):
        if lines:
            del lines[rng.randrange(len(lines))]
    return b'\n'.join(lines)


def shuffle_lines(rng: random.Random, data: bytes) -> bytes:
    lines = _lines(data)
    start = rng.randrange(len(lines))
    part = lines[start : start + rng.randint(2, 40)]
    rng.shuffle(part)
    lines[start : start + len(part)] = part
    return b'\n'.join(lines)


def enormous_line(rng: random.Random, data: bytes) -> bytes:
    lines = _lines(data)
    size = rng.choice((10_000, 100_000, 400_000))
    filler = rng.choice((b'#', b'a', b'{', b'"', b'\\', b'9', b'x="y",'))
    line = rng.choice(lines) if lines else b''
    big = (line + filler * (size // len(filler)))[:size]
    lines.insert(rng.randrange(len(lines) + 1), big)
    return b'\n'.join(lines)


def many_lines(rng: random.Random, data: bytes) -> bytes:
    """The tail replaced by one line repeated, up to a few MiB in all."""
    lines = _lines(data)
    line = rng.choice(lines) if lines else b'x 1'
    count = min(rng.choice((1_000, 5_000)), (4 << 20) // (len(line) + 1))
    lines[rng.randrange(len(lines) or 1) :] = [line] * count
    return b'\n'.join(lines)


def not_utf8(rng: random.Random, data: bytes) -> bytes:
    choice = rng.randrange(3)
    if choice == 0:
        return data.decode('utf-8', 'replace').encode('utf-16')
    if choice == 1:
        at = rng.randrange(len(data) + 1)
        return (
            data[:at] + rng.choice((b'\xc3', b'\xff\xfe', b'\xed\xa0\x80', b'\xf4\x90')) + data[at:]
        )
    return data.replace(b'"', '"\u00e9'.encode('latin-1'), rng.randint(1, 5))


def line_endings(rng: random.Random, data: bytes) -> bytes:
    return data.replace(b'\n', rng.choice((b'\r\n', b'\r', b'\n\n', b'\n\x00')))


MutateBytes = Callable[[random.Random, bytes], bytes]
BYTE_OPERATORS: tuple[tuple[str, MutateBytes], ...] = (
    ('flip', flip_bits),
    ('noise', insert_noise),
    ('truncate', truncate),
    ('duplicate-lines', duplicate_lines),
    ('remove-lines', remove_lines),
    ('shuffle-lines', shuffle_lines),
    ('enormous-line', enormous_line),
    ('many-lines', many_lines),
    ('not-utf8', not_utf8),
    ('line-endings', line_endings),
)


# --- decoded data ---------------------------------------------------------------------------


def _paths(data: Any, prefix: tuple[Any, ...] = (), depth: int = 0) -> list[tuple[Any, ...]]:
    """Every path to a value inside dicts and lists (the root is `()`), shallow ones first."""
    found: list[tuple[Any, ...]] = [prefix]
    if depth > 12:
        return found
    if isinstance(data, dict):
        for key in sorted(data, key=str):
            found.extend(_paths(data[key], (*prefix, key), depth + 1))
    elif isinstance(data, list):
        for index, item in enumerate(data):
            found.extend(_paths(item, (*prefix, index), depth + 1))
    return found


def _parent(data: Any, path: tuple[Any, ...]) -> Any:
    for step in path[:-1]:
        data = data[step]
    return data


def _number_near(rng: random.Random, value: float) -> float:
    return rng.choice((value + 1, value - 1, -value, value * 10, value / 3, value * 1e6))


def mutate_value(rng: random.Random, data: Any) -> Any:
    """One change at a random place in `data` (a deep copy is changed; the root may be
    replaced): a hostile value, a number moved, a key dropped or added, an item doubled."""
    data = copy.deepcopy(data)
    paths = [p for p in _paths(data) if p] or [()]
    path = rng.choice(paths)
    if not path:
        return rng.choice(HOSTILE_VALUES)
    parent = _parent(data, path)
    key = path[-1]
    current = parent[key]
    move = rng.randrange(6)
    if move == 0 and isinstance(parent, dict):
        del parent[key]
    elif move == 1 and isinstance(parent, dict):
        parent[
            rng.choice(('unknownField', 'extra', key + '_' if isinstance(key, str) else 'k'))
        ] = rng.choice(HOSTILE_VALUES)
    elif move == 2 and isinstance(parent, list):
        parent.insert(key, copy.deepcopy(current))
    elif move == 3 and isinstance(current, float | int) and not isinstance(current, bool):
        parent[key] = _number_near(rng, float(min(max(current, -1e300), 1e300)))
    else:
        parent[key] = rng.choice(HOSTILE_VALUES)
    return data


def mutate_data(rng: random.Random, data: Any) -> Any:
    for _ in range(rng.randint(1, 3)):
        data = mutate_value(rng, data)
    return data


def mutate_bytes(rng: random.Random, data: bytes, *, heavy: bool = True) -> tuple[bytes, str]:
    """One to three byte operators; `heavy=False` leaves out the ones that grow the input."""
    names = []
    operators = [
        op for op in BYTE_OPERATORS if heavy or op[0] not in ('enormous-line', 'many-lines')
    ]
    for _ in range(rng.randint(1, 3)):
        name, operator = rng.choice(operators)
        data = operator(rng, data)
        names.append(name)
    return data, '+'.join(names)
