"""Errors of the configuration loaders, each one printable as a single line.

Why: a bad ConfigMap entry or setting must be reported precisely enough to fix it without reading
code (which ConfigMap, which data key, which field, which value, what is wrong), and it must not
stop the rest of the configuration from loading. The loaders therefore never raise for bad data:
they return `ConfigError` values next to the configuration they could build. Only a file that
cannot be read or parsed at all raises `ConfigFileError`.

What fails: nothing here raises. Newlines in any part are escaped so that `str(error)` is always
exactly one line, and very long values are shortened. Rendering a value costs at most a few
hundred steps whatever it is (huge, deeply nested, self-containing): it stops after 80
characters or 200 nodes, and never calls `repr` on a container or a huge integer. Values of
setting keys that look secret (`is_secret_key`) are never rendered at all.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

_MAX_VALUE_CHARS = 80
_MAX_VALUE_NODES = 200
_MAX_INT_BITS = 256  # about 77 decimal digits; `repr` of longer ints is slow or refused
_SECRET_WORDS = re.compile(r'token|passw|secret|key|credential|auth|bearer', re.IGNORECASE)


def _one_line(text: str) -> str:
    return text.replace('\r', '\\r').replace('\n', '\\n')


def is_secret_key(key: object) -> bool:
    """Whether a setting or data key looks like it holds a secret (token, password, secret, key,
    credential, auth, bearer; any case), so that its value must never appear in a message or a
    log. Unknown keys (a misspelt `..._TOKN`) are never shown either, by their own rule."""
    return isinstance(key, str) and _SECRET_WORDS.search(key) is not None


class _Nested:
    """A value still to be rendered (a token of `_tokens` that is not literal text)."""

    __slots__ = ('value',)

    def __init__(self, value: object) -> None:
        self.value = value


def _scalar(value: object, room: int) -> str | None:
    """The rendering of a scalar, cut near `room` characters; None for a container."""
    if value is None or isinstance(value, bool | float):
        return repr(value)
    if isinstance(value, int):
        return repr(value) if value.bit_length() <= _MAX_INT_BITS else '<very large integer>'
    # repr picks its quotes from the whole string: a quote past the cut must still count.
    if isinstance(value, str):
        rest = value[room + 1 :]
        return repr(value[: room + 1] + ''.join(q for q in ("'", '"') if q in rest))
    if isinstance(value, bytes):
        tail = value[room + 1 :]
        return repr(value[: room + 1] + b''.join(q for q in (b"'", b'"') if q in tail))
    if isinstance(value, Mapping | list | tuple):
        return None
    return f'<{type(value).__name__}>'


def _tokens(value: object) -> Iterator[str | _Nested]:
    if isinstance(value, Mapping):
        yield '{'
        for index, (key, item) in enumerate(value.items()):
            yield ', ' if index else ''
            yield _Nested(key)
            yield ': '
            yield _Nested(item)
        yield '}'
    else:
        assert isinstance(value, list | tuple)
        yield '[' if isinstance(value, list) else '('
        for index, item in enumerate(value):
            yield ', ' if index else ''
            yield _Nested(item)
        yield ']' if isinstance(value, list) else ')'


def _render(value: object, *, limit: int) -> str:
    """Like `repr(value)` for plain data, but stops after `limit` characters or
    `_MAX_VALUE_NODES` values: the work is bounded whatever `value` holds."""
    parts: list[str] = []
    size = 0
    nodes = 0
    stack: list[Iterator[str | _Nested]] = [iter((_Nested(value),))]
    while stack and size <= limit:
        token = next(stack[-1], None)
        if token is None:
            stack.pop()
            continue
        if isinstance(token, _Nested):
            nodes += 1
            if nodes > _MAX_VALUE_NODES:
                parts.append('...')
                break
            text = _scalar(token.value, limit - size)
            if text is None:
                stack.append(_tokens(token.value))
                continue
            token = text
        parts.append(token)
        size += len(token)
    if stack:
        parts.append('...')
    return ''.join(parts)


def show_value(value: object) -> str:
    """A short one-line rendering of a configuration value for error messages.

    Strings are shown as they are (the error adds quotes), other values as `repr` would show
    them; anything longer than 80 characters is cut with an ellipsis. Bounded in time and size
    for any value (see the module docstring).
    """
    if isinstance(value, str):
        text = value[: _MAX_VALUE_CHARS + 1]
    else:
        text = _render(value, limit=_MAX_VALUE_CHARS)
    text = _one_line(text)
    if len(text) > _MAX_VALUE_CHARS:
        text = text[: _MAX_VALUE_CHARS - 3] + '...'
    return text


def show_setting(key: object, value: object) -> str:
    """`show_value(value)`, or '' when `key` looks secret (`is_secret_key`)."""
    return '' if is_secret_key(key) else show_value(value)


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigError:
    """One problem found while loading configuration.

    `source` is a file path, `namespace/configmap-name`, or a settings layer
    (`command line`, `environment`, ...); `key` the ConfigMap data key or setting name; `field`
    the field inside the entry; `value` a short rendering of the offending value (`show_value`).
    Any of key, field and value may be ''. `warning` marks a problem that did not reject
    anything (for example a retention period above 24 h).
    """

    source: str
    key: str = ''
    field: str = ''
    value: str = ''
    message: str
    warning: bool = False

    def __str__(self) -> str:
        where: list[str] = []
        if self.key:
            where.append(f"key '{_one_line(self.key)}'")
        if self.field:
            text = f"field '{_one_line(self.field)}'"
            if self.value:
                text += f" = '{_one_line(self.value)}'"
            where.append(text)
        elif self.value:
            where.append(f"value '{_one_line(self.value)}'")
        message = _one_line(self.message)
        if self.warning:
            message = f'warning: {message}'
        parts = [_one_line(self.source)]
        if where:
            parts.append(', '.join(where))
        parts.append(message)
        return ': '.join(parts)


def sort_errors(errors: list[ConfigError]) -> tuple[ConfigError, ...]:
    """Deduplicate and order errors so that results never depend on processing order."""
    unique = set(errors)
    return tuple(
        sorted(
            unique,
            key=lambda e: (e.source, e.key, e.field, e.value, e.message, e.warning),
        )
    )


class ConfigFileError(Exception):
    """A configuration file that cannot be used at all: `<path>: <where>: <why>` on one line."""

    def __init__(self, *, path: str, where: str, why: str) -> None:
        self.path = path
        self.where = where
        self.why = why
        self.line = ': '.join(_one_line(part) for part in (path, where, why) if part)
        super().__init__(self.line)

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild_file_error, (self.path, self.where, self.why))


def _rebuild_file_error(path: str, where: str, why: str) -> ConfigFileError:
    return ConfigFileError(path=path, where=where, why=why)
