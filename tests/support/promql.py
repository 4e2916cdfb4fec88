"""The metric and label names a PromQL expression reads, for checking dashboards and alerts
against the metrics the controller exports.

Why: a dashboard panel or an alert on a misspelt metric is not an error anywhere: Prometheus
answers an empty vector, the panel stays blank and the alert never fires. Python has no PromQL
parser, and promtool checks syntax but not names, so this is a small tokenizer that knows
enough of the grammar (selectors, range brackets, function calls, aggregations and their
grouping clauses, binary keywords) to tell metric names from everything else.

What: `read(expr=...)` returns the expression's `Names`: the metric names it selects (bare
names and `__name__` matchers, `=` or an alternation under `=~`), the label names it matches on
or groups by, and every label matcher as (label, operator, value).

What fails: ValueError for text the tokenizer cannot read (a character outside PromQL, an
unclosed brace) and for a `__name__` matcher that is not a plain name or alternation of plain
names (it could match anything, so nothing can be checked). Grafana's variables (`$__range`)
are not PromQL: substitute them first.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

_TOKEN: Final = re.compile(
    r"""
    (?P<space>\s+|\#[^\n]*)
    |(?P<string>"(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*'|`[^`]*`)
    |(?P<number>(?:0[xX][0-9a-fA-F]+|(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?)
        (?:(?:ms|s|m|h|d|w|y)(?:[0-9]+(?:ms|s|m|h|d|w|y))*)?)
    |(?P<name>[A-Za-z_:][A-Za-z0-9_:]*)
    |(?P<operator>=~|!~|!=|==|<=|>=|[-+*/%^<>=(){}\[\],@:])
    """,
    re.VERBOSE,
)
_PLAIN_NAME: Final = re.compile(r'[A-Za-z_:][A-Za-z0-9_:]*')
GROUPING: Final = frozenset({'by', 'without', 'on', 'ignoring', 'group_left', 'group_right'})
"""Keywords followed by a parenthesised list of label names."""
AGGREGATIONS: Final = frozenset(
    {
        'sum',
        'min',
        'max',
        'avg',
        'group',
        'stddev',
        'stdvar',
        'count',
        'count_values',
        'bottomk',
        'topk',
        'quantile',
        'limitk',
        'limit_ratio',
    }
)
KEYWORDS: Final = frozenset({'and', 'or', 'unless', 'bool', 'offset', 'atan2', 'inf', 'nan'})


@dataclass(frozen=True, slots=True)
class Names:
    """What one expression reads."""

    metrics: frozenset[str]
    labels: frozenset[str]
    matchers: tuple[tuple[str, str, str], ...]


def _tokens(expr: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    at = 0
    while at < len(expr):
        found = _TOKEN.match(expr, at)
        if found is None:
            raise ValueError(f'cannot read {expr[at : at + 20]!r} in {expr!r}')
        kind = found.lastgroup
        assert kind is not None
        if kind != 'space':
            out.append((kind, found.group()))
        at = found.end()
    return out


def _unquote(text: str) -> str:
    body = text[1:-1]
    return body if text.startswith('`') else re.sub(r'\\(.)', r'\1', body)


def _closing(tokens: list[tuple[str, str]], at: int, opening: str, closing: str) -> int:
    """The index of the token that closes the bracket opened at `at`."""
    depth = 0
    for index in range(at, len(tokens)):
        depth += {opening: 1, closing: -1}.get(tokens[index][1], 0)
        if depth == 0:
            return index
    raise ValueError(f'unclosed {opening!r}')


def read(*, expr: str) -> Names:
    """The metric names, label names and label matchers of `expr` (see the module docstring)."""
    tokens = _tokens(expr)
    metrics: set[str] = set()
    labels: set[str] = set()
    matchers: list[tuple[str, str, str]] = []
    at = 0
    while at < len(tokens):
        kind, text = tokens[at]
        following = tokens[at + 1][1] if at + 1 < len(tokens) else ''
        if text == '{':
            end = _closing(tokens, at, '{', '}')
            inside = [t for t in tokens[at + 1 : end] if t[1] != ',']
            if len(inside) % 3:
                raise ValueError(f'cannot read the label matchers of {expr!r}')
            for (_, label), (_, operator), (value_kind, value) in zip(
                inside[::3], inside[1::3], inside[2::3], strict=True
            ):
                if value_kind != 'string':
                    raise ValueError(f'the value of {label} is not a string in {expr!r}')
                matchers.append((label, operator, _unquote(value)))
                labels.add(label)
            at = end + 1
        elif text == '[':
            at = _closing(tokens, at, '[', ']') + 1
        elif kind == 'name' and text.lower() in GROUPING and following == '(':
            end = _closing(tokens, at + 1, '(', ')')
            labels.update(t for k, t in tokens[at + 2 : end] if k == 'name')
            at = end + 1
        elif kind == 'name' and following != '(' and text.lower() not in AGGREGATIONS | KEYWORDS:
            metrics.add(text)
            at += 1
        else:  # a function, an aggregation, a keyword, a number, a string, an operator
            at += 1
    for label, operator, value in matchers:
        if label != '__name__':
            continue
        names = value.split('|') if operator == '=~' else [value]
        if operator not in ('=', '=~') or not all(_PLAIN_NAME.fullmatch(n) for n in names):
            raise ValueError(f'__name__{operator}{value!r} does not name its metrics: {expr!r}')
        metrics.update(names)
    labels.discard('__name__')
    return Names(frozenset(metrics), frozenset(labels), tuple(matchers))
