"""A fast reader of Prometheus text exposition pages that keeps only the wanted families.

Why: scraping every inference pod directly (as Kaito's LLMAutoScaler proposal does) means parsing
hundreds of `/metrics` pages per cycle, each ~400 lines (~2,300 with 8 engines), of which the
autoscaler needs a few dozen. The official `prometheus_client.parser` builds every family of the
page and costs ~7 ms per page (`bench/metrics.py` measures it beside this one); this module looks at
a line's first characters before anything else and fully parses only the lines of the requested
families, with the same names, labels and values as the official parser on the lines it keeps.

How: a `Parser` serves one set of families. One regex pass over the page picks the wanted lines
by their first characters and splits those of the shape every exporter writes (`name{labels}
value`); an unusual line (escapes, blanks, an exemplar, an error) takes the general grammar alone.
A Parser remembers the `name{labels}` texts it has read (at most `cache_size`, forgotten all at
once when full), as the same ones come back on every scrape of every pod of a model: the example
vLLM page costs ~0.4 ms with a new Parser, ~0.2 ms with one that has met it (`bench/metrics.py`).
That memory belongs to the Parser and so to its caller, who keeps one Parser for as long as the
label sets are worth remembering; the module-level `parse` and `parse_families` build a throwaway
Parser and remember nothing between calls. A Parser's memory is plain dicts, safe to share between
threads under the GIL (parsing may run in `asyncio.to_thread`).
The two grammars of a line, the plain shape (`PLAIN_*`: no blanks, no escapes) and the general
text format (`SAMPLE`, `PAIRS`: blanks around the label set, `=` and commas, escapes in values, a
timestamp, an OpenMetrics exemplar), are spelled side by side so that they are kept in step (a
line both accept must be read the one way). What a read gives back does not depend on those
tricks: `Page` (its `Sample`s in page order, `# TYPE` lines, the NaN count, the errors, built by
`PageState`, the running account of one read) and the family that owns a sample name
(`family_of`, `group_by_family`).

What it reads: the text format 0.0.4, tolerating the OpenMetrics additions seen on vLLM and gateway
pages: `# EOF` (parsing stops there), `_created` series, a timestamp after the value and an
exemplar after ` # `. A family name F owns the samples named F, F_bucket, F_sum, F_count, F_total
and F_created. Names keep their colons (`vllm:num_requests_waiting`); label values are unescaped
like the official parser does (`\\\\`, `\\"`, `\\n`; any other backslash pair is kept as written);
labels come back sorted by name.

What fails, and how bad input is treated: parsing never raises (a negative `cache_size` or
`cache_chars`, or a cap below 1, is a ValueError when the Parser or its `PageLimits` is built).

- Bytes that are not UTF-8 are decoded with replacement characters; the rest of the page parses.
- A malformed line of a wanted family (bad syntax, a value that is not a number, a label named
  twice) is skipped and reported in `Page.errors` as `line N: ...`; lines of other families are
  never examined, so their defects are not reported.
- Lines end with a newline in this format, so a last line without one is taken as a truncated
  page: a wanted sample there is reported and not kept (its value may be cut short).
- NaN and ±Inf values are dropped and counted in `dropped_non_finite` (`le="+Inf"` is a label
  and is fine).
- A series given twice keeps the last value and is reported.
- Time is linear in the page size; at most `MAX_ERRORS` errors are listed, then one line says
  how many more there were.

Caps (`PageLimits`): one hostile page must not cost the controller more than a small multiple of
its largest accepted line in memory, nor seconds of work. Any of these refuses the whole page: a
line of a wanted family longer than `max_line_length` characters, a sample with more than
`max_labels` labels, more than `max_series_per_page` kept series, kept series whose
`name{labels}` texts add up to more than `max_series_chars` characters. Reading stops at once
and `Page.refused` names the cap and the line; the page gives no sample, so the caller treats
the pod's readings as missing. Each cap is checked before anything of its size is built: a
line's length before any regex runs on it alone, its labels counted before they are sorted or
put in a dict (in the usual shape, before they are even split into pairs). A line of another
family is only skipped over, never built, whatever its length. A Parser's memory (see `Parser`)
is bounded in characters as well as in entries, so that long label sets met on many pages cannot
pile up in it.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from sys import intern
from typing import TypeVar

MAX_ERRORS = 100
"""How many errors one page reports line by line; a page of garbage must not flood the log."""

_OWNED_SUFFIXES = ('_bucket', '_sum', '_count', '_total', '_created')

Labels = tuple[tuple[str, str], ...]
SeriesKey = tuple[str, Labels]


@dataclass(frozen=True, slots=True)
class Sample:
    """One kept sample: its full name (with `_bucket`, `_total`, ...), sorted labels, value."""

    name: str
    labels: Labels
    value: float

    def label(self, name: str) -> str | None:
        for key, value in self.labels:
            if key == name:
                return value
        return None


@dataclass(frozen=True, slots=True)
class Page:
    """What one page held of the wanted families.

    `samples` are in page order (a repeated series stays where it first appeared, with its last
    value); `types` maps the name written on each wanted `# TYPE` line (for a 0.0.4 counter that
    is the `_total` name) to its type, sorted by name. `refused` says which cap of `PageLimits`
    the page crossed, and where; a refused page has no samples, types or errors.
    """

    samples: tuple[Sample, ...]
    types: tuple[tuple[str, str], ...]
    dropped_non_finite: int
    errors: tuple[str, ...]
    refused: str | None = None


@dataclass(frozen=True, slots=True)
class PageLimits:
    """The caps of one page (see the module docstring); a value below 1 is a ValueError.

    The defaults are generous for real vLLM pages (about 400 lines of at most a few hundred
    characters, ~2,300 lines with 8 engines, of which a few hundred series are kept) and small
    enough that a page at every cap at once costs tens of MiB (`bench/hostile_pages.py`).
    """

    max_line_length: int = 64 * 1024
    """Characters of one line of a wanted family, its line end excluded."""
    max_labels: int = 128
    """Labels of one sample."""
    max_series_per_page: int = 10_000
    """Distinct series kept from one page (the wanted families' only)."""
    max_series_chars: int = 4 * 1024 * 1024
    """Characters of the `name{labels}` texts of the distinct series kept from one page: at
    the other caps a page could otherwise keep 10,000 series of 128 labels each (~270 MiB of
    label pairs), where real pages keep a few hundred series of ~150 characters."""

    def __post_init__(self) -> None:
        check_counts(
            max_line_length=self.max_line_length,
            max_labels=self.max_labels,
            max_series_per_page=self.max_series_per_page,
            max_series_chars=self.max_series_chars,
        )


def check_counts(**values: int) -> None:
    """ValueError naming the first value that is not a whole number of at least 1 (a cap)."""
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f'{name} must be a whole number of at least 1, not {value!r}')


class Refused(Exception):
    """A cap of `PageLimits` crossed; the message names the cap and the line."""


def family_of(*, name: str, families: frozenset[str]) -> str | None:
    """The requested family that owns sample `name`, or None (an exact name wins over a suffix)."""
    if name in families:
        return name
    for suffix in _OWNED_SUFFIXES:
        if name.endswith(suffix):
            base = name[: -len(suffix)]
            if base in families:
                return base
    return None


def group_by_family(*, page: Page, families: frozenset[str]) -> dict[str, list[Sample]]:
    """The page's samples grouped by the requested family that owns them.

    Every requested family is a key (in sorted order), with an empty list when the page had none
    of its samples.
    """
    groups: dict[str, list[Sample]] = {family: [] for family in sorted(families)}
    for sample in page.samples:
        family = family_of(name=sample.name, families=families)
        if family is not None:
            groups[family].append(sample)
    return groups


class PageState:
    """What one page parse has found so far: kept samples by series, types, errors."""

    __slots__ = (
        '_counted',
        '_lines',
        'chars',
        'dropped',
        'errors',
        'extra',
        'series',
        'text',
        'types',
    )

    def __init__(self, text: str) -> None:
        self.text = text
        """The page after a newline, so that every line follows one; positions are in it."""
        self.series: dict[SeriesKey, Sample] = {}
        self.types: dict[str, str] = {}
        self.errors: list[str] = []
        self.extra = 0
        """Errors beyond `MAX_ERRORS`, counted only."""
        self.dropped = 0
        self.chars = 0
        """Characters of the kept series' texts (`PageLimits.max_series_chars`)."""
        self._counted = 0
        self._lines = 0

    def error(self, at: int, message: str) -> None:
        """Report the line after the newline at `at` (reports come in page order)."""
        if len(self.errors) >= MAX_ERRORS:
            self.extra += 1
            return
        # Line numbers are counted only for errors, from where the last one was counted.
        self._lines += self.text.count('\n', self._counted, at + 1)
        self._counted = at + 1
        self.errors.append(f'line {self._lines}: {message}')

    def duplicate(self, at: int, line: str) -> None:
        line = line.lstrip('\n \t').rstrip('\r')
        self.error(at, f'duplicate series {excerpt(line)}; the last value is kept')

    def refuse(self, at: int, message: str) -> Refused:
        """The refusal of the page at the line after the newline at `at`."""
        line = self._lines + self.text.count('\n', self._counted, at + 1)
        return Refused(f'line {line}: {message}')

    def page(self) -> Page:
        errors = self.errors
        if self.extra:
            errors = [*errors, f'{self.extra} more errors not listed']
        return Page(
            samples=tuple(self.series.values()),
            types=tuple(sorted(self.types.items())),
            dropped_non_finite=self.dropped,
            errors=tuple(errors),
        )


def excerpt(text: str, limit: int = 80) -> str:
    """A quoted, shortened copy of bad input for an error message."""
    if len(text) > limit:
        text = text[:limit] + '...'
    return f'"{text}"'


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


def _shared(pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The pairs with their names and values interned: the texts kept for a label set are shared
    with every other set that has them (`engine`, `model_name`, a model's name), instead of one
    copy per series, which is most of what a page of many labels costs."""
    return [(intern(name), intern(value)) for name, value in pairs]


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


VLLM_FAMILIES: frozenset[str] = frozenset(
    {
        # KV usage: the current name, and the name before vLLM 0.12 (renamed in 0.9.2).
        'vllm:kv_cache_usage_perc',
        'vllm:gpu_cache_usage_perc',
        'vllm:num_requests_waiting',
        'vllm:num_requests_running',
        'vllm:cache_config_info',
        'vllm:request_prompt_tokens',
        'vllm:request_generation_tokens',
        # Counters: the page has `vllm:prefix_cache_hits_total` (owned through `_total`); the
        # `gpu_` names are the ones before 0.12.
        'vllm:prefix_cache_hits',
        'vllm:prefix_cache_queries',
        'vllm:gpu_prefix_cache_hits',
        'vllm:gpu_prefix_cache_queries',
        'vllm:time_to_first_token_seconds',
        # ITL: the current name, and the name removed in 0.13.
        'vllm:inter_token_latency_seconds',
        'vllm:time_per_output_token_seconds',
        # Its buckets only: each request's own mean time per output token (`collect.histograms`).
        'vllm:request_time_per_output_token_seconds',
        'vllm:request_success',
    }
)
"""Every vLLM family the collectors read, both generations of names."""

EPP_FAMILIES: frozenset[str] = frozenset(
    {
        'inference_extension_flow_control_queue_size',
        'inference_extension_flow_control_queue_bytes',
        # Exposed as `inference_extension_scheduler_attempts_total` (Gateway API Inference
        # Extension, pkg/epp/metrics/metrics.go, release-1.5).
        'inference_extension_scheduler_attempts',
    }
)
"""The gateway (EPP) families the collectors read."""

DEFAULT_CACHE_SIZE = 16_384
"""How many `name{labels}` texts a Parser remembers: ~100 wanted series per pod page, so the
label sets of a hundred-odd distinct pods (each pod's `engine` and model labels differ little)."""
DEFAULT_CACHE_CHARS = 4 * 1024 * 1024
"""How many characters of keys a Parser remembers in all: 16,384 real heads of ~150 characters
take ~2.5 MiB, while as many heads at the line cap would take a GiB."""
REMEMBERED_KEY_CHARS = 1024
"""The longest key a Parser remembers. A real vLLM head is at most ~650 characters (the
`cache_config_info` line); a page of many long heads (128 labels a series, say) would otherwise
fill the memory, forget it whole and fill it again on every scrape, which costs the hundreds of
thousands of objects the memory is meant to save, kept just long enough for the garbage
collector to walk them all."""

# The scan of a page, one regex pass over '\n' + page for the wanted lines (the `{heads}` are
# filled in per family set, see `Parser`). After a newline and any blanks, one of:
#   1-3: a wanted sample line of the shape every exporter writes, `head value [timestamp]`, where
#        the head is the line up to its last `}` followed by ` value`, or a bare name;
#   4:   any other wanted sample line, for the general grammar;
#   5:   a wanted `# TYPE` line;
#   6:   `# EOF`, the end of the page.
# A line counts only when a newline follows it (trailing CRs are the CRLF line ends): the
# unterminated last line is the caller's. `[^\n]*\}` backtracks to the last brace at once.
_SCAN = (
    r'\n[ \t]*(?:'
    r'(?={heads})(?:([^\n]*\}|' + NAME.pattern + r') ([^\s#]+)(?: ([^\s#]+))?\r*(?=\n)'
    r'|([^\n]*)(?=\n))'
    r'|(# TYPE (?={heads})[^\n]*)(?=\n)'
    r'|(# EOF)[ \t]*\r*(?:\n|\Z))'
)

_T = TypeVar('_T')
_UNWANTED: SeriesKey = ('', ())
"""What a Parser remembers for a head whose name no requested family owns."""


def parse(*, page: bytes | str, families: frozenset[str], limits: PageLimits | None = None) -> Page:
    """Parse one page with a throwaway `Parser`: nothing is remembered for the next call."""
    return Parser(families=families, limits=limits).parse(page=page)


def parse_families(*, page: bytes | str, families: frozenset[str]) -> dict[str, list[Sample]]:
    """`parse` then `group_by_family`; errors and the NaN count are not returned (use `parse`)."""
    return Parser(families=families).parse_families(page=page)


def _alternation(words: Iterable[str]) -> str:
    """A regex matching any of `words`, written as a trie (`vllm:(?:a|b)`).

    The regex engine tries the branches of an alternation one after the other, so a shared
    prefix is compared once instead of once per word. The words are made of metric-name
    characters (`[a-zA-Z0-9_:]`), none of them special in a regex.
    """
    ordered = sorted(set(words))
    return _trie(ordered) if ordered else '(?!)'


def _trie(ordered: list[str]) -> str:
    """`_alternation` of sorted distinct words."""
    if len(ordered) == 1:
        return ordered[0]
    first, last = ordered[0], ordered[-1]
    size, limit = 0, min(len(first), len(last))
    while size < limit and first[size] == last[size]:
        size += 1
    # After the shared prefix the words differ in their next character, or the first one ends.
    optional = len(first) == size
    rest = [word[size:] for word in ordered[optional:]]
    branches = '|'.join(_trie(list(group)) for _, group in itertools.groupby(rest, key=_first))
    return first[:size] + '(?:' + branches + ')' + '?' * optional


def _first(word: str) -> str:
    return word[0]


class Parser:
    """Reads pages for one set of families, remembering what it met on earlier pages.

    Its memories: the `name{labels}` texts it has read, the label texts among them (the same
    `{engine="0",model_name="..."}` follows many names), and the sample names with their owning
    family. `cache_size` bounds each one's entries and `cache_chars` the characters of all their
    keys together (a full memory is forgotten all at once, so churn cannot grow it without end);
    a key longer than `REMEMBERED_KEY_CHARS` is not remembered;
    0 remembers nothing. A family that is not a valid metric name owns nothing. `limits` caps
    every page (`PageLimits`, its defaults when None).
    """

    __slots__ = (
        '_cache_chars',
        '_cache_size',
        '_chars',
        '_families',
        '_heads',
        '_known',
        '_labels',
        '_limits',
        '_owners',
        '_owning',
        '_scan',
        '_width',
    )

    def __init__(
        self,
        *,
        families: frozenset[str],
        cache_size: int = DEFAULT_CACHE_SIZE,
        cache_chars: int = DEFAULT_CACHE_CHARS,
        limits: PageLimits | None = None,
    ) -> None:
        if cache_size < 0:
            raise ValueError(f'cache_size must be 0 or more, not {cache_size}')
        if cache_chars < 0:
            raise ValueError(f'cache_chars must be 0 or more, not {cache_chars}')
        self._limits = limits if limits is not None else PageLimits()
        self._cache_chars = cache_chars
        self._chars = 0
        self._families = frozenset(families)
        # Every prefix of a valid name is valid, so a valid name is owned by a valid family
        # only, and any name a valid family owns is valid: what the fast path relies on.
        self._owning = frozenset(f for f in self._families if NAME.fullmatch(f) is not None)
        self._cache_size = cache_size
        # The pre-filter: every wanted line starts with `width` characters that are the first
        # `width` characters of some family (`width` is the shortest family name's length).
        width = min((len(family) for family in self._owning), default=0)
        self._width = width
        self._heads = frozenset(family[:width] for family in self._owning)
        # re.compile keeps the patterns it compiled last: a second Parser of a family set is
        # cheap (~0.03 ms, the trie).
        self._scan = re.compile(_SCAN.replace('{heads}', _alternation(self._heads)))
        self._owners: dict[str, str | None] = {}
        """Sample name → owning family, or None."""
        self._known: dict[str, SeriesKey] = {}
        """`name{labels}` text → (name, sorted unescaped labels), or `_UNWANTED`."""
        self._labels: dict[str, Labels] = {}
        """Plain label text (after the opening brace, with the closing one) → sorted labels."""

    @property
    def families(self) -> frozenset[str]:
        """The families whose samples this Parser keeps."""
        return self._families

    @property
    def remembered(self) -> int:
        """How many `name{labels}` texts this Parser remembers (at most `cache_size`)."""
        return len(self._known)

    @property
    def remembered_chars(self) -> int:
        """How many characters of keys this Parser remembers in all (at most `cache_chars`)."""
        return self._chars

    @property
    def limits(self) -> PageLimits:
        """The caps of every page this Parser reads."""
        return self._limits

    def parse_families(self, *, page: bytes | str) -> dict[str, list[Sample]]:
        """`parse` then `group_by_family` over this Parser's families."""
        return group_by_family(page=self.parse(page=page), families=self._families)

    def parse(self, *, page: bytes | str) -> Page:
        """Parse one exposition page, keeping only the samples the families own."""
        text = page if isinstance(page, str) else bytes(page).decode('utf-8', errors='replace')
        state = PageState('\n' + text)
        try:
            if not self._read(state):
                self._tail(state)
        except Refused as refused:
            return Page(samples=(), types=(), dropped_non_finite=0, errors=(), refused=str(refused))
        return state.page()

    def _tail(self, state: PageState) -> None:
        """Whatever follows the last newline: an unterminated (truncated) line."""
        newline = state.text.rfind('\n')
        limit = self._limits.max_line_length
        # At most one character past the cap is copied, enough to tell a line over it.
        tail = state.text[newline + 1 : newline + limit + 2].rstrip('\r').strip(' \t')
        if tail[: self._width] in self._heads:
            match = NAME.match(tail)
            if match is not None and self._owner(match.group()) is not None:
                if len(state.text) - newline - 1 > limit:
                    raise state.refuse(newline, self._too_long())
                state.error(newline, 'truncated line at the end of the page, not kept')

    def _too_long(self) -> str:
        limit = self._limits.max_line_length
        return f'a line over {limit} characters (max_line_length)'

    def _check_series(self, state: PageState, at: int, chars: int) -> None:
        """After a new series of `chars` characters was kept."""
        limits = self._limits
        if len(state.series) > limits.max_series_per_page:
            limit = limits.max_series_per_page
            raise state.refuse(at, f'more than {limit} series (max_series_per_page)')
        state.chars += chars
        if state.chars > limits.max_series_chars:
            limit = limits.max_series_chars
            raise state.refuse(at, f'series of more than {limit} characters (max_series_chars)')

    def _check_labels(self, state: PageState, at: int, count: int) -> None:
        limit = self._limits.max_labels
        if count > limit:
            raise state.refuse(at, f'a sample with {count} labels, over {limit} (max_labels)')

    def _read(self, state: PageState) -> bool:
        """Read the wanted lines of the page; whether it ended with `# EOF`.

        A line of the usual shape costs a lookup of its head once the head has been met; the
        others take the general grammar one by one.
        """
        known = self._known.get
        series = state.series
        isfinite = math.isfinite
        # A span is the line with the newline before it.
        longest = self._limits.max_line_length + 1
        for match in self._scan.finditer(state.text):
            # Before any group is taken out of the page: the line is still only a span.
            if match.end() - match.start() > longest:
                raise state.refuse(match.start(), self._too_long())
            head, value_text, stamp, other, type_line, end = match.groups()
            if head is not None:
                key = known(head)
                if key is None:
                    key = self._learn(state, match.start(), head)
                if key is _UNWANTED:
                    continue
                value = number(value_text)
                if (
                    key is not None
                    and value is not None
                    and (stamp is None or number(stamp) is not None)
                ):
                    if not isfinite(value):
                        state.dropped += 1
                        continue
                    size = len(series)
                    series[key] = Sample(key[0], key[1], value)
                    if len(series) == size:
                        state.duplicate(match.start(), match.group())
                    else:
                        self._check_series(state, match.start(), len(head))
                    continue
                other = match.group()  # an error the general grammar reports
            elif end is not None:
                return True
            if type_line is not None:
                self._type_line(state, match.start(), type_line.rstrip('\r'))
            else:
                self._sample(state, match.start(), other.lstrip('\n \t').rstrip('\r'))
        return False

    def _learn(self, state: PageState, at: int, head: str) -> SeriesKey | None:
        """The series of a head not met before in the usual shape; None for any other shape."""
        name, brace, label_text = head.partition('{')
        if self._owner(name) is None:
            if NAME.fullmatch(name) is None:
                return None  # the general grammar decides whether a wanted name starts it
            key = _UNWANTED
        elif not brace:
            key = (name, ())
        else:
            labels = self._labels.get(label_text)
            if labels is None:
                labels = self._parse_labels(state, at, label_text)
                if labels is None:
                    return None
            key = (name, labels)
        self._remember(self._known, head, key)
        return key

    def _parse_labels(self, state: PageState, at: int, text: str) -> Labels | None:
        """`a="x",b="y"}` (with its closing brace) as sorted pairs; None if not that shape."""
        if '\\' in text or PLAIN_LABELS.fullmatch(text) is None:
            return None
        # In this shape a value holds no quote, so `="` opens each pair and only there.
        self._check_labels(state, at, text.count('="'))
        labels = sorted_labels(_shared(PLAIN_PAIRS.findall(text)))
        if labels is not None:  # else a label given twice: the general grammar reports it
            self._remember(self._labels, text, labels)
        return labels

    def _remember(self, memory: dict[str, _T], key: str, value: _T) -> None:
        if not self._cache_size or len(key) > min(self._cache_chars, REMEMBERED_KEY_CHARS):
            return
        if len(memory) >= self._cache_size:
            self._chars -= sum(map(len, memory))
            memory.clear()
        if self._chars + len(key) > self._cache_chars:
            # The character budget is shared: forgetting this memory alone might not free it.
            self._forget_all()
        self._chars += len(key)
        memory[key] = value

    def _forget_all(self) -> None:
        self._known.clear()
        self._labels.clear()
        self._owners.clear()
        self._chars = 0

    def _owner(self, name: str) -> str | None:
        try:
            return self._owners[name]
        except KeyError:
            family = family_of(name=name, families=self._owning)
            self._remember(self._owners, name, family)
            return family

    def _sample(self, state: PageState, at: int, line: str) -> None:
        """The general grammar, for a sample line of any other shape (`at`: its newline).

        A line without escapes is first read as the usual shape with any value, so that a line
        both grammars accept is read the one way whatever its value.
        """
        plain = '\\' not in line
        match = PLAIN_SAMPLE.fullmatch(line) if plain else None
        if match is None:
            plain = False
            match = SAMPLE.fullmatch(line)
            if match is None:
                name_match = NAME.match(line)
                if name_match is not None and self._owner(name_match.group()) is not None:
                    state.error(at, f'malformed sample line {excerpt(line)}')
                return
        name, label_text, value_text, timestamp = match.groups()
        key = _UNWANTED
        if self._owner(name) is not None:
            labels: Labels | None = ()
            if label_text:
                # The line is within its cap, so the pairs found are too; counted before sorting.
                pairs = (PLAIN_PAIRS if plain else PAIRS).findall(label_text)
                self._check_labels(state, at, len(pairs))
                if '\\' in label_text:
                    pairs = [(k, unescape(text)) for k, text in pairs]
                labels = sorted_labels(pairs)
            if labels is None:
                state.error(at, f'a label is given twice in {excerpt(line)}')
                return
            key = (name, labels)
        # Remember the label set only when `name{...}` ends at the line's last brace, the head
        # the usual shape reads up to (an exemplar's braces come later on the line).
        close = line.rfind('}')
        if close > 0 and match.end(2) == close:
            self._remember(self._known, line[: close + 1], key)
        if key is _UNWANTED:
            return
        value = number(value_text)
        if value is None:
            state.error(at, f'bad value {excerpt(value_text)}')
        elif timestamp is not None and number(timestamp) is None:
            state.error(at, f'bad timestamp {excerpt(timestamp)}')
        elif not math.isfinite(value):
            state.dropped += 1
        else:
            size = len(state.series)
            state.series[key] = Sample(key[0], key[1], value)
            if len(state.series) == size:
                state.duplicate(at, line)
            else:
                self._check_series(state, at, len(line))

    def _type_line(self, state: PageState, at: int, line: str) -> None:
        parts = line.split()
        if len(parts) < 3 or self._owner(parts[2]) is None:
            return
        name = parts[2]
        if len(parts) != 4 or parts[3] not in KNOWN_TYPES:
            state.error(at, f'bad TYPE line {excerpt(line)}')
        elif name in state.types:
            state.error(at, f'second TYPE line for {name}; the first is kept')
        else:
            state.types[name] = parts[3]
