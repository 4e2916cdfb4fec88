"""Errors of the configuration loaders, each one printable as a single line.

Why: a bad ConfigMap entry or setting must be reported precisely enough to fix it without reading
code (which ConfigMap, which data key, which field, which value, what is wrong), and it must not
stop the rest of the configuration from loading. The loaders therefore never raise for bad data:
they return `ConfigError` values next to the configuration they could build. Only a file that
cannot be read or parsed at all raises `ConfigFileError`.

What fails: nothing here raises. Newlines in any part are escaped so that `str(error)` is always
exactly one line, and very long values are shortened.
"""

from __future__ import annotations

from dataclasses import dataclass

_MAX_VALUE_CHARS = 80


def _one_line(text: str) -> str:
    return text.replace('\r', '\\r').replace('\n', '\\n')


def show_value(value: object) -> str:
    """A short one-line rendering of a configuration value for error messages.

    Strings are shown as they are (the error adds quotes), other values by `repr`; anything longer
    than 80 characters is cut with an ellipsis.
    """
    text = value if isinstance(value, str) else repr(value)
    text = _one_line(text)
    if len(text) > _MAX_VALUE_CHARS:
        text = text[: _MAX_VALUE_CHARS - 3] + '...'
    return text


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
