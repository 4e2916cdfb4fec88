"""What a read of one exposition page gives back, and the account kept while reading it.

Why: `collect.exposition.parser` reads pages fast, by tricks of its own; what it returns (`Page`,
its `Sample`s, the family that owns a sample name) and how it reports a bad line are the part the
collectors rely on, and they do not change with those tricks, so they are kept here, apart.

What it holds: `Sample` and `Page` (samples in page order, `# TYPE` lines, the NaN count and the
errors), `family_of` and `group_by_family` (a family F owns the samples named F, F_bucket, F_sum,
F_count, F_total and F_created; an exact name wins over a suffix), and `PageState`, the running
account of one read: kept samples by series, types, errors with their line numbers.

What fails: nothing raises. At most `MAX_ERRORS` errors are listed, then one line says how many
more there were; a series given twice keeps the last value and is reported as a duplicate.
"""

from __future__ import annotations

from dataclasses import dataclass

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
    is the `_total` name) to its type, sorted by name.
    """

    samples: tuple[Sample, ...]
    types: tuple[tuple[str, str], ...]
    dropped_non_finite: int
    errors: tuple[str, ...]


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

    __slots__ = ('_counted', '_lines', 'dropped', 'errors', 'extra', 'series', 'text', 'types')

    def __init__(self, text: str) -> None:
        self.text = text
        """The page after a newline, so that every line follows one; positions are in it."""
        self.series: dict[SeriesKey, Sample] = {}
        self.types: dict[str, str] = {}
        self.errors: list[str] = []
        self.extra = 0
        """Errors beyond `MAX_ERRORS`, counted only."""
        self.dropped = 0
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
