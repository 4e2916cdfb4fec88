"""The controller's logs: a level for its own story, another for the HTTP libraries, text or JSON.

Why: at INFO the log should tell what the controller decided and what went wrong (start-up
settings, leadership, scales, holds and source errors when they start or end, ConfigMaps applied
or rejected), not every HTTP request: httpx logs each request at INFO, and at DEBUG httpcore, h2
and hpack bury everything else. Those libraries therefore get their own
level (`--http-log-level`, WARNING by default), whatever `--log-level` says.

Formats: `text` is `<time> <LEVEL> <logger>: <message>`; `json` is one JSON object per line with
`time` (RFC 3339, UTC, milliseconds), `level`, `logger`, `message`, then the record's extra fields
(`log.info(..., extra={'variant': ...})`) and `exception` (the formatted traceback) when there is
one. Extra values that JSON cannot hold are written as their `str`.

What fails: nothing raises once configured; a value that cannot be rendered is written as its
type name rather than losing the line.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Final, TextIO

HTTP_LOGGERS: Final = ('httpx', 'httpx2', 'httpcore', 'httpcore2', 'h2', 'hpack')
"""The loggers of the HTTP libraries the controller uses (lightkube's client, the metric
readers, the probe and metrics server)."""

_STANDARD = frozenset(vars(logging.makeLogRecord({}))) | {'message', 'asctime', 'taskName'}
_MARK = '_llmscaler_handler'


class JsonFormatter(logging.Formatter):
    """One JSON object per record (see the module docstring)."""

    def format(self, record: logging.LogRecord) -> str:
        stamp = datetime.fromtimestamp(record.created, tz=UTC)
        line: dict[str, object] = {
            'time': stamp.isoformat(timespec='milliseconds').replace('+00:00', 'Z'),
            'level': record.levelname.lower(),
            'logger': record.name,
            'message': record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith('_') and key not in line:
                line[key] = value
        if record.exc_info:
            line['exception'] = self.formatException(record.exc_info)
        return json.dumps(line, default=_text, ensure_ascii=False)


def _text(value: object) -> str:
    try:
        return str(value)
    except Exception:  # a value that cannot be shown must not cost the line
        return f'<{type(value).__name__}>'


def configure_logging(
    *, level: str, format: str, http_level: str = 'warning', stream: TextIO | None = None
) -> logging.Handler:
    """Send every log record to `stream` (stderr) in `format` ('text' or 'json'), the root at
    `level` and the `HTTP_LOGGERS` at `http_level` (level names as the options give them).

    Calling it again replaces the handler it installed before; handlers installed by others
    (a test's log capture) are left alone. Returns the handler.
    """
    root = logging.getLogger()
    for handler in list(root.handlers):
        if getattr(handler, _MARK, False):
            root.removeHandler(handler)
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    setattr(handler, _MARK, True)
    if format == 'json':
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter('%(asctime)s %(levelname)s %(name)s: %(message)s'))
    root.addHandler(handler)
    root.setLevel(_level(level))
    for name in HTTP_LOGGERS:
        logging.getLogger(name).setLevel(_level(http_level))
    return handler


def _level(name: str) -> int:
    level = logging.getLevelName(name.upper())
    return level if isinstance(level, int) else logging.INFO
