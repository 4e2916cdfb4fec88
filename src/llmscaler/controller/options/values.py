"""The value formats of `llmscaler run`'s options: text → typed value, or why not.

Why: an option with a bad value must stop the controller with one line that says what the option
accepts, so that the operator can fix it without reading code. Each parser here therefore raises
ValueError with a message that states the accepted format or values (`must be one of direct,
metrics, both`, `must be a duration with a unit, such as 30s, 1m30s or 500ms`), never a bare
"invalid"; the caller adds which flag, variable or file key held the value.

Formats: durations are Go strings with a unit (`config.durations`); sizes are a whole number of
bytes, optionally with a binary suffix `Ki`, `Mi` or `Gi` (`32Mi`); booleans are true/false/1/0/
yes/no in any case; whole numbers are ASCII digits; a bind address is `[host]:port` or `0`.

What fails: every parser raises ValueError for text it does not accept, and nothing else. No
parser reads files or the environment.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from urllib.parse import urlsplit

from llmscaler.config.durations import parse_duration
from llmscaler.config.settings import SETTINGS, parse_bool
from llmscaler.controller.cluster.pods import parse_selector

Parse = Callable[[str], object]

_DURATION = 'a duration with a unit, such as 30s, 1m30s or 500ms'
_LABEL = re.compile(r'[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?')
_WHOLE = re.compile(r'\+?[0-9]{1,18}')
_SIZE = re.compile(r'\+?([0-9]{1,18})\s*(Ki|Mi|Gi)?')
_SIZE_UNITS = {None: 1, 'Ki': 1024, 'Mi': 1024**2, 'Gi': 1024**3}


def split_bind_address(*, address: str) -> tuple[str, int] | None:
    """(host, port) of `:8080`, `0.0.0.0:8080`, `[::1]:8080`, `localhost:0`; None for `0`.

    Raises ValueError for anything else. An empty host means every interface.
    """
    text = address.strip()
    if text == '0':
        return None
    host, colon, port = text.rpartition(':')
    if not colon:
        raise ValueError('must be host:port, :port, or 0 to disable')
    if host.startswith('[') and host.endswith(']'):
        try:
            ipaddress.IPv6Address(host[1:-1])
        except ValueError:
            raise ValueError(f'{host} is not an IPv6 address') from None
        host = host[1:-1]
    elif ':' in host or not re.fullmatch(r'[A-Za-z0-9.-]*', host):
        raise ValueError('the host must be a name or an address (IPv6 in brackets: [::1]:8080)')
    if not re.fullmatch(r'[0-9]{1,5}', port) or int(port) > 65535:
        raise ValueError('the port must be a number from 0 to 65535')
    return host, int(port)


def bind_address(text: str) -> str:
    """`[host]:port` or `0` (serving turned off)."""
    try:
        split_bind_address(address=text)
    except ValueError as exc:
        raise ValueError(
            f'must be [host]:port (:8080, 127.0.0.1:8080, [::1]:8080) or 0 to turn it off: {exc}'
        ) from None
    return text.strip()


def nonempty(text: str) -> str:
    """Any text but blanks, stripped."""
    if not text.strip():
        raise ValueError('must not be empty')
    return text.strip()


def namespace(text: str) -> str:
    """A namespace name."""
    if not _LABEL.fullmatch(text.strip()):
        raise ValueError('must be a namespace name (lower-case letters, digits and -, up to 63)')
    return text.strip()


def namespace_or_all(text: str) -> str:
    """A namespace name, or '' for every namespace."""
    return namespace(text) if text.strip() else ''


def duration(text: str) -> float:
    """A positive Go duration, in seconds."""
    try:
        seconds = parse_duration(text)
    except ValueError as exc:
        raise ValueError(f'must be {_DURATION}: {exc}') from None
    if seconds <= 0:
        raise ValueError(f'must be {_DURATION}, above 0')
    return seconds


def duration_or_zero(text: str) -> float:
    """A Go duration of 0 or more, in seconds."""
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise ValueError(f'must be {_DURATION} (0s allowed): {exc}') from None


def whole(*, minimum: int, maximum: int | None = None) -> Parse:
    """A whole number within [minimum, maximum]."""
    allowed = f'from {minimum} to {maximum}' if maximum is not None else f'of {minimum} or more'

    def parse(text: str) -> int:
        if not _WHOLE.fullmatch(text.strip()):
            raise ValueError(f'must be a whole number {allowed}')
        number = int(text.strip())
        if number < minimum or (maximum is not None and number > maximum):
            raise ValueError(f'must be a whole number {allowed}')
        return number

    return parse


port = whole(minimum=1, maximum=65535)
"""A TCP port number."""


def byte_size(text: str) -> int:
    """A size in bytes, at least 1: `1048576`, `512Ki`, `32Mi`, `1Gi`."""
    match = _SIZE.fullmatch(text.strip())
    size = int(match.group(1)) * _SIZE_UNITS[match.group(2)] if match is not None else 0
    if size < 1:
        raise ValueError('must be a size of at least 1 byte: a whole number of bytes, or with Ki, '
                         'Mi or Gi (512Ki, 32Mi)')  # fmt: skip
    return size


def selector(text: str) -> str:
    """A non-empty `key=value,...` equality label selector."""
    if not text.strip():
        raise ValueError('must be a label selector key=value[,key=value...], not empty')
    return selector_or_none(text)


def selector_or_none(text: str) -> str:
    """A `key=value,...` equality label selector, or ''."""
    try:
        parse_selector(text)
    except ValueError as exc:
        raise ValueError(f'must be a label selector key=value[,key=value...]: {exc}') from None
    return text.strip()


def url(text: str) -> str:
    """An http:// or https:// URL with a host and without user:password@."""
    try:
        parts = urlsplit(text.strip())
        _ = parts.port  # raises ValueError when out of range or not a number
    except ValueError as exc:
        raise ValueError(f'must be an http:// or https:// URL with a host: {exc}') from None
    if parts.scheme not in ('http', 'https') or not parts.hostname:
        raise ValueError('must be an http:// or https:// URL with a host')
    if '@' in parts.netloc:
        raise ValueError(
            'must not carry credentials (user:password@): give a bearer token or a token file'
        )
    return text.strip()


def choice(*names: str) -> Parse:
    """One of `names`, in any case."""

    def parse(text: str) -> str:
        if text.strip().lower() not in names:
            raise ValueError(f'must be one of {", ".join(names)}')
        return text.strip().lower()

    return parse


def boolean(text: str) -> bool:
    """true/false/1/0/yes/no, in any case."""
    return parse_bool(text)


_SETTING_FORMATS = {'LLMSCALER_K2_WINDOW': 'a whole number of 1 or more'}


def setting(key: str) -> Parse:
    """The parser of the core setting `key` (`config.settings.SETTINGS`), whose ValueError says
    what the key accepts."""

    def parse(text: str) -> object:
        try:
            return SETTINGS[key].parse(text)
        except ValueError as exc:
            message = str(exc)
            if message.startswith('must'):
                raise
            hint = _SETTING_FORMATS.get(key, _DURATION)
            raise ValueError(f'must be {hint}: {message}') from None

    return parse


def redact_url(text: str) -> str:
    """`text` without what may sit between `://` and `@` (a password), for messages."""
    scheme, sep, rest = text.partition('://')
    if sep and '@' in rest.split('/', 1)[0]:
        return f'{scheme}://<hidden>@{rest.split("@", 1)[1]}'
    return text
