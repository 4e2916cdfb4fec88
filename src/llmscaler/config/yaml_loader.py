"""A bounded, safe YAML reader for configuration text (ConfigMap entries and config files).

Why: configuration text comes from anyone who may edit a ConfigMap, a tenant's namespace-local
one included, and is read on the event loop that also renews the leader Lease. PyYAML's
`SafeLoader` is safe against code execution, not against cost: an alias bomb (`&a [*a, *a]`
nested a few levels) expands to billions of nodes, 20,000 `[` exhaust Python's recursion limit,
and several scalars raise plain `ValueError` (`2001-13-45`, `!!float 0.5-`, `!!int "7x"`, an
integer of 5,000 digits). Every one of these must be a one-line error, found cheaply.

What it does: `load_yaml` / `load_yaml_documents` read text under `YamlLimits` and either return
plain data (dict, list, str, int, float, bool, None) or raise `YamlProblem`:

- text longer than `max_bytes` (UTF-8) is refused before parsing;
- anchors (`&name`) and aliases (`*name`) are refused where the parser meets them, so no node is
  ever shared and nothing expands;
- nesting deeper than `max_depth` (a scalar inside a top-level mapping is at depth 2) and more
  than `max_nodes` nodes in the whole text are refused while composing, before the next node is
  read, so the work done is bounded by the limits, not by the input;
- integers and floats written with more than `MAX_NUMBER_CHARS` characters are refused;
- only the tags the configuration needs are accepted, explicit or implicit: `!!str`, `!!int`,
  `!!float`, `!!bool`, `!!null`, `!!seq`, `!!map`. YAML 1.1 timestamps (`2001-12-14`), merge keys
  (`<<`) and `=` are read as plain text; `!!timestamp`, `!!binary`, `!!set`, `!!omap`, `!!pairs`
  and any other tag are refused. YAML 1.2 exponent floats without a dot (`1e-3`) are numbers, as
  in Go's YAML decoder.

`NodeBudget` shares one node allowance between several reads (the entries of one ConfigMap), so
that many entries each under their own cap cannot add up to an unbounded cost.

What fails: nothing raises but `YamlProblem`, a `yaml.YAMLError` carrying `where` (`line L, column
C`, or '') and `problem` (one line, at most a few hundred characters, never a whole value). Any
other exception PyYAML raises on odd input is turned into one as well.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import yaml
from yaml.composer import ComposerError
from yaml.constructor import ConstructorError
from yaml.error import Mark
from yaml.events import AliasEvent
from yaml.nodes import Node, ScalarNode
from yaml.scanner import ScannerError
from yaml.tokens import Token

MAX_NUMBER_CHARS = 64
"""Longest integer or float scalar accepted (configuration numbers are short)."""

_MAX_PROBLEM_CHARS = 200
_TAG = 'tag:yaml.org,2002:'
_ACCEPTED_TAGS = tuple(f'{_TAG}{name}' for name in ('str', 'int', 'float', 'bool', 'null'))
_COLLECTION_TAGS = (f'{_TAG}seq', f'{_TAG}map')
_TEXT_ONLY_TAGS = frozenset(f'{_TAG}{name}' for name in ('timestamp', 'merge', 'value'))


@dataclass(frozen=True, slots=True)
class YamlLimits:
    """How much YAML one read may take: bytes of text, nesting depth and nodes in all."""

    max_bytes: int
    max_depth: int
    max_nodes: int


ENTRY_LIMITS = YamlLimits(max_bytes=64 * 1024, max_depth=32, max_nodes=10_000)
"""One ConfigMap data entry (a saturation entry, an embedded manager `config.yaml`)."""

CONFIGMAP_MAX_BYTES = 1024 * 1024
"""All data of one ConfigMap, keys and values, in UTF-8 (Kubernetes' own limit too)."""

CONFIGMAP_MAX_NODES = 20_000
"""YAML nodes in all entries of one ConfigMap together (under a second of parsing)."""

FILE_LIMITS = YamlLimits(max_bytes=16 * 1024 * 1024, max_depth=64, max_nodes=200_000)
"""A whole `--config` file (it may be a `kubectl get cm -A -o yaml` dump)."""


class NodeBudget:
    """Nodes that several reads may still take together (the entries of one ConfigMap)."""

    def __init__(self, *, total: int, scope: str) -> None:
        self.total = total
        self.scope = scope
        self.remaining = total

    @property
    def exhausted(self) -> bool:
        return self.remaining < 0


class YamlProblem(yaml.YAMLError):
    """Text that was not read: `where` (`line L, column C` or '') and `problem`, one line."""

    def __init__(self, *, where: str, problem: str) -> None:
        self.where = where
        self.problem = problem
        super().__init__(f'{where}: {problem}' if where else problem)


def _clip(text: str) -> str:
    line = ' '.join(text.split())
    if len(line) > _MAX_PROBLEM_CHARS:
        line = line[: _MAX_PROBLEM_CHARS - 3] + '...'
    return line


def _where(mark: Mark | None) -> str:
    return '' if mark is None else f'line {mark.line + 1}, column {mark.column + 1}'


def _short_tag(tag: str) -> str:
    return '!!' + tag.removeprefix(_TAG) if tag.startswith(_TAG) else _clip(tag)[:60]


class _BoundedLoader(yaml.SafeLoader):
    """SafeLoader that refuses anchors, aliases, deep or huge documents and unneeded tags."""

    def __init__(self, stream: str, *, limits: YamlLimits, budget: NodeBudget | None) -> None:
        super().__init__(stream)
        self.limits = limits
        self._budget = budget
        self._depth = 0
        self._nodes = 0

    def fetch_flow_collection_start(self, TokenClass: type[Token]) -> None:
        # The scanner looks ahead over every open `[`/`{` for a possible simple key: without
        # this bound, a line of `[` costs time quadratic in its length before any node exists.
        if self.flow_level >= self.limits.max_depth:
            problem = f'nested deeper than {self.limits.max_depth} levels'
            raise ScannerError(None, None, problem, self.get_mark())
        super().fetch_flow_collection_start(TokenClass)

    def compose_node(self, parent: Node | None, index: int) -> Node | None:
        # Checked before the node is composed: the cost stays within the limits.
        event = self.peek_event()  # type: ignore[no-untyped-call]
        mark: Mark | None = getattr(event, 'start_mark', None)
        problem = ''
        if isinstance(event, AliasEvent):
            problem = 'aliases (*name) are not accepted in configuration'
        elif getattr(event, 'anchor', None) is not None:
            problem = 'anchors (&name) are not accepted in configuration'
        self._nodes += 1
        if not problem and self._nodes > self.limits.max_nodes:
            problem = f'more than {self.limits.max_nodes} YAML nodes'
        if not problem and self._budget is not None:
            self._budget.remaining -= 1
            if self._budget.remaining < 0:
                problem = f'more than {self._budget.total} YAML nodes in {self._budget.scope}'
        if not problem and self._depth >= self.limits.max_depth:
            problem = f'nested deeper than {self.limits.max_depth} levels'
        if problem:
            raise ComposerError(None, None, problem, mark)
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def resolve(self, kind: type[Node], value: str | None, implicit: tuple[bool, bool]) -> str:
        tag: str = super().resolve(kind, value, implicit)  # type: ignore[no-untyped-call]
        # Implicit resolution only: an explicit tag reaches the constructor as written.
        return f'{_TAG}str' if tag in _TEXT_ONLY_TAGS else tag

    def construct_object(self, node: Node, deep: bool = False) -> object:
        if node.tag not in _ACCEPTED_TAGS and node.tag not in _COLLECTION_TAGS:
            problem = (
                f'tag {_short_tag(node.tag)} is not accepted in configuration '
                '(only !!str, !!int, !!float, !!bool, !!null, !!seq, !!map)'
            )
            raise ConstructorError(None, None, problem, node.start_mark)
        if (
            isinstance(node, ScalarNode)
            and node.tag in (f'{_TAG}int', f'{_TAG}float')
            and len(node.value) > MAX_NUMBER_CHARS
        ):
            problem = f'a number longer than {MAX_NUMBER_CHARS} characters'
            raise ConstructorError(None, None, problem, node.start_mark)
        try:
            return super().construct_object(node, deep=deep)
        except yaml.YAMLError:
            raise
        except Exception:  # ValueError & co from a scalar constructor: the value is not its tag
            problem = f'not a valid {_short_tag(node.tag)} value'
            raise ConstructorError(None, None, problem, node.start_mark) from None


_BoundedLoader.add_implicit_resolver(
    f'{_TAG}float',
    re.compile(r'^[-+]?[0-9][0-9_]*[eE][-+]?[0-9]+$'),
    list('-+0123456789'),
)


def _too_long(text: str, limits: YamlLimits) -> bool:
    # A character is at least one UTF-8 byte: only text near the cap needs encoding.
    if len(text) > limits.max_bytes:
        return True
    if len(text) * 4 <= limits.max_bytes:
        return False
    return len(text.encode('utf-8', 'surrogatepass')) > limits.max_bytes


def _problem(exc: BaseException) -> YamlProblem:
    if isinstance(exc, YamlProblem):
        return exc
    if isinstance(exc, yaml.MarkedYAMLError):
        problem = exc.problem or exc.context or 'not valid YAML'
        return YamlProblem(where=_where(exc.problem_mark), problem=_clip(str(problem)))
    if isinstance(exc, yaml.YAMLError):
        return YamlProblem(where='', problem=_clip(str(exc)) or 'not valid YAML')
    if isinstance(exc, RecursionError):
        return YamlProblem(where='', problem='nested too deeply')
    return YamlProblem(where='', problem=f'cannot be read ({type(exc).__name__})')


def _read(text: str, limits: YamlLimits, budget: NodeBudget | None, *, many: bool) -> list[object]:
    if not isinstance(text, str):
        raise YamlProblem(where='', problem=f'not text ({type(text).__name__})')
    if _too_long(text, limits):
        raise YamlProblem(where='', problem=f'longer than {limits.max_bytes} bytes')
    try:
        loader = _BoundedLoader(text, limits=limits, budget=budget)
        try:
            if not many:
                return [loader.get_single_data()]
            docs: list[object] = []
            while loader.check_data():  # type: ignore[no-untyped-call]
                doc = loader.get_data()
                if doc is not None:
                    docs.append(doc)
            return docs
        finally:
            loader.dispose()
    except Exception as exc:  # every failure of one read is that text's problem
        raise _problem(exc) from None


def load_yaml(
    *, text: str, limits: YamlLimits = ENTRY_LIMITS, budget: NodeBudget | None = None
) -> object:
    """Parse one YAML document within `limits` and `budget` (raises `YamlProblem`)."""
    return _read(text, limits, budget, many=False)[0]


def load_yaml_documents(
    *, text: str, limits: YamlLimits = ENTRY_LIMITS, budget: NodeBudget | None = None
) -> list[object]:
    """Parse a YAML stream within `limits`, empty documents dropped (raises `YamlProblem`)."""
    return _read(text, limits, budget, many=True)
