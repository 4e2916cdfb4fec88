"""The grammar of one exposition line: the regexes and value readers `collect.exposition.parser`
uses.

Why: the reader of `/metrics` pages has two paths, a cheap one for the line shape every exporter
writes and the general grammar of the text format for the rest; both are spelled here, apart
from the page scan that picks the wanted lines, so that the two grammars can be read side by
side and kept in step (a line both accept must be read the one way).

What it holds: `NAME` (a metric name, colons kept), `SAMPLE` and `PAIRS` (the general grammar:
blanks around the label set, `=` and commas, escapes in values, a timestamp, an OpenMetrics
exemplar), `PLAIN_*` (the usual shape: no blanks, no escapes), `KNOWN_TYPES` (the `# TYPE`
words accepted), and the readers of a label list, a value and an escaped label value.

What fails: nothing raises. `number` returns None for text that is not a Go float (a `_`
separator, non-ASCII digits, anything float() refuses); `sorted_labels` returns None for a label
named twice; `unescape` keeps any backslash pair other than `\\\\`, `\\"` and `\\n` as written,
like the official parser.
"""

from __future__ import annotations

import re

from llmscaler.collect.exposition.page import Labels

KNOWN_TYPES = frozenset(
    {'counter', 'gauge', 'histogram', 'summary', 'untyped', 'unknown', 'info', 'stateset'}
    | {'gaugehistogram'}
)

NAME = re.compile(r'[a-zA-Z_:][a-zA-Z0-9_:]*')
_LABEL_NAME = r'[a-zA-Z_][a-zA-Z0-9_]*'
# The general grammar: blanks around the label set, `=` and commas, escapes in values (written as
# an unrolled loop so the regex engine never backtracks), a timestamp, an OpenMetrics exemplar.
_QUOTED = r'"[^"\\]*(?:\\.[^"\\]*)*"'
_PAIR = rf'{_LABEL_NAME}[ \t]*=[ \t]*{_QUOTED}'
_LABELS = rf'[ \t]*(?:{_PAIR}(?:[ \t]*,[ \t]*{_PAIR})*[ \t]*,?[ \t]*)?'
SAMPLE = re.compile(
    rf'({NAME.pattern})(?:[ \t]*\{{({_LABELS})\}}[ \t]*|[ \t]+)'
    r'([^\s#]\S*)(?:[ \t]+([^\s#]\S*))?(?:[ \t]+#.*)?[ \t]*'
)
PAIRS = re.compile(rf'({_LABEL_NAME})[ \t]*=[ \t]*"([^"\\]*(?:\\.[^"\\]*)*)"')
_ESCAPE = re.compile(r'\\[\\n"]')
_ESCAPES = {'\\\\': '\\', '\\n': '\n', '\\"': '"'}
# A head not seen before, in the same shape: no blanks, no escapes (`[^"]` is a much cheaper
# regex step than `[^"\\]`, and nearly every head fits; the others take the general grammar).
_PLAIN_PAIR = rf'{_LABEL_NAME}="[^"]*"'
_PLAIN_LIST = rf'(?:{_PLAIN_PAIR}(?:,{_PLAIN_PAIR})*,?)?'
PLAIN_LABELS = re.compile(_PLAIN_LIST + r'\}')
PLAIN_SAMPLE = re.compile(
    rf'({NAME.pattern})(?:\{{({_PLAIN_LIST})\}}|) ([^\s#]\S*)(?: ([^\s#]\S*))?'
)
PLAIN_PAIRS = re.compile(rf'({_LABEL_NAME})="([^"]*)"')


def sorted_labels(pairs: list[tuple[str, str]]) -> Labels | None:
    """The (name, value) pairs sorted by name; None when a name is given twice."""
    if len(pairs) > 1:
        pairs.sort()
        if len(dict(pairs)) != len(pairs):
            return None
    return tuple(pairs)


def number(text: str) -> float | None:
    """`text` as a float, or None; Go's float syntax, so no `_` separators and ASCII only."""
    if '_' in text or not text.isascii():
        return None
    try:
        return float(text)
    except ValueError:
        return None


def unescape(text: str) -> str:
    """A label value as written between its quotes, with its escapes undone."""
    return _ESCAPE.sub(_unescape, text)


def _unescape(match: re.Match[str]) -> str:
    return _ESCAPES[match.group()]
