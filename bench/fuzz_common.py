"""What every fuzz campaign shares: the tally of one campaign, per-input timing, input excerpts.

Why: the four campaigns of `bench/fuzz.py` differ in what they feed and what they call, not in
what they count. An input is either fine, or raised an unexpected exception, or took longer than
`HANG_SECONDS`, or broke a safety rule (`fuzz_oracle`); one input may be both slow and wrong, and
is counted in both. The first few offending inputs of each kind are kept, cut short, with what
went wrong and the index that regenerates them (`--campaign NAME --index I`).

Reproducible: an input is a pure function of (seed, campaign, index) through `input_rng`, never of
the inputs before it, so one offending input can be replayed alone.
"""

from __future__ import annotations

import hashlib
import random
import reprlib
import signal
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

HANG_SECONDS = 1.0
"""An input whose processing takes longer than this is counted as a hang."""
KEPT_EXAMPLES = 3
"""Offending inputs kept per kind and campaign."""
EXCERPT_CHARS = 300


def input_rng(*, seed: int, campaign: str, index: int) -> random.Random:
    """The random source of one input: depends only on the seed, campaign and index."""
    digest = hashlib.blake2b(f'{seed}:{campaign}:{index}'.encode(), digest_size=8).digest()
    return random.Random(int.from_bytes(digest, 'big'))


def excerpt(data: str | bytes, *, limit: int = EXCERPT_CHARS) -> str:
    """A printable, one-line cut of an input (bytes shown as Python would, escapes and all)."""
    text = repr(data[: limit * 2])
    if len(text) > limit:
        text = text[: limit - 3] + '...'
    size = len(data)
    return f'{text} ({size:,} {"bytes" if isinstance(data, bytes) else "chars"})'


_SHORT = reprlib.Repr()
_SHORT.maxlevel, _SHORT.maxstring, _SHORT.maxother, _SHORT.maxlong = 6, 80, 80, 40


def short_repr(value: object) -> str:
    """`repr` that stops six levels down and cuts long values (a deep object cannot recurse)."""
    return _SHORT.repr(value)


@dataclass(slots=True)
class Example:
    index: int
    kind: str
    what: str
    data: str


@dataclass(slots=True)
class Tally:
    """The counts of one campaign."""

    name: str
    inputs: int = 0
    units: int = 0
    """What the campaign counts besides inputs (mutated pages for the page campaign)."""
    exceptions: int = 0
    hangs: int = 0
    violations: int = 0
    slowest: float = 0.0
    slowest_index: int = -1
    seconds: float = 0.0
    rules: dict[str, int] = field(default_factory=dict)
    """Violations by rule."""
    examples: list[Example] = field(default_factory=list)
    notes: dict[str, int] = field(default_factory=dict)
    """Outcomes worth counting that break no rule (inputs refused, models held, ...)."""

    def merge(self, other: Tally) -> None:
        """Add the counts of `other` (another slice of the same campaign)."""
        self.inputs += other.inputs
        self.units += other.units
        self.exceptions += other.exceptions
        self.hangs += other.hangs
        self.violations += other.violations
        if other.slowest > self.slowest:
            self.slowest, self.slowest_index = other.slowest, other.slowest_index
        for mine, theirs in ((self.rules, other.rules), (self.notes, other.notes)):
            for key, count in theirs.items():
                mine[key] = mine.get(key, 0) + count
        kept: list[Example] = []
        for example in sorted([*self.examples, *other.examples], key=lambda e: e.index):
            if sum(1 for e in kept if e.kind == example.kind) < KEPT_EXAMPLES:
                kept.append(example)
        self.examples = kept

    def note(self, what: str, count: int = 1) -> None:
        self.notes[what] = self.notes.get(what, 0) + count

    def keep(self, *, index: int, kind: str, what: str, data: str) -> None:
        if sum(1 for e in self.examples if e.kind == kind) < KEPT_EXAMPLES:
            self.examples.append(Example(index=index, kind=kind, what=what, data=data))

    def exception(self, *, index: int, exc: BaseException, data: str) -> None:
        self.exceptions += 1
        self.keep(index=index, kind='exception', what=describe_exception(exc), data=data)

    def violation(self, *, index: int, rule: str, what: str, data: str) -> None:
        self.violations += 1
        self.rules[rule] = self.rules.get(rule, 0) + 1
        self.keep(index=index, kind=f'violation: {rule}', what=what, data=data)

    def timed(self, *, index: int, seconds: float, data: str) -> None:
        if seconds > self.slowest:
            self.slowest, self.slowest_index = seconds, index
        if seconds > HANG_SECONDS:
            self.hangs += 1
            self.keep(index=index, kind='hang', what=f'{seconds:.2f} s', data=data)


def describe_exception(exc: BaseException) -> str:
    """`Type: message` and the innermost frame of the project that raised it."""
    frames = traceback.extract_tb(exc.__traceback__)
    ours = [f for f in frames if '/llmscaler/' in f.filename] or frames
    where = f' at {ours[-1].filename.rpartition("/src/")[2]}:{ours[-1].lineno}' if ours else ''
    message = ' '.join(str(exc).split())[:200]
    return f'{type(exc).__name__}: {message}{where}'


LIMIT_SECONDS = 60.0
"""An input still running after this long is stopped (and counted as a hang and an exception)."""


class Stuck(Exception):
    """An input ran past `LIMIT_SECONDS`."""


def _stuck(signum: int, frame: object) -> None:
    raise Stuck(f'still running after {LIMIT_SECONDS:g} s')


@contextmanager
def time_limit() -> Iterator[None]:
    """Raise `Stuck` in the block after `LIMIT_SECONDS` (main thread only, as signals are)."""
    previous = signal.signal(signal.SIGALRM, _stuck)
    signal.setitimer(signal.ITIMER_REAL, LIMIT_SECONDS)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@contextmanager
def stopwatch() -> Iterator[Callable[[], float]]:
    """`with stopwatch() as elapsed:` ... `elapsed()` is the seconds since the block began."""
    start = time.perf_counter()
    yield lambda: time.perf_counter() - start
