"""Which metrics may be trusted: a figure that is missing, non-finite or out of range is named.

Why: a missing or broken metric read as 0 looks like an idle replica, and an idle replica invites a
scale-down (hence the safety rule: a missing or broken figure is never read as 0,
docs/decision-core.md). The engine asks this module, before any analysis, whether every replica and
pool of a model reports usable figures; if one does not, the model holds and its decisions say
`MetricsMissing` or `MetricsInvalid`, naming the pod and the metric.

The rules come from the declarations in `llmscaler.domain`, read once here so the JSON face and the
engine cannot disagree:

- every numeric field of `ReplicaMetrics` / `PoolMetrics` that holds a value must be a finite
  number (an integer where the field is an `int`) inside the range its annotation declares
  (`Fraction` [0, 1], `NonNegative` >= 0, `PositiveCount` >= 1, ...); `observed_at` must be
  finite;
- a field listed in `model.REQUIRED_REPLICA_FIGURES` (KV usage, queue length) or
  `model.REQUIRED_POOL_FIGURES` (the gateway queue, 0 without one) must be present: None is
  `missing`. Other figures may be None (the analyzers treat them as absent);
- a latency histogram (`ttft_histogram`, `tpot_histogram`), when present, must follow
  `model.LatencyHistogram`'s rules (`histogram_violation`): ascending finite bounds, cumulative
  counts within [0, total].

`metrics_status` turns one variant's problems and freshness classes into what the
`MetricsAvailable` condition says: `MetricsInvalid` (a figure is broken), `MetricsMissing` (one
is absent, or fewer ready replicas report than there are), `MetricsStale`, or `MetricsFound`.

What fails: nothing raises; a value that is not a number at all is reported as such.
"""

from __future__ import annotations

import dataclasses
import math
import sys
import types
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, cast

from annotated_types import Ge, Gt, Le, Lt

from llmscaler.domain.basics import REQUIRED_POOL_FIGURES, REQUIRED_REPLICA_FIGURES, Freshness
from llmscaler.domain.snapshot import LatencyHistogram, PoolMetrics, ReplicaMetrics, Variant


@dataclass(frozen=True, slots=True)
class Problem:
    """One figure that cannot be used: `what` is `missing` or the value and what is wrong."""

    metric: str
    what: str
    missing: bool

    def describe(self, *, source: str) -> str:
        return f'{source}: {self.metric} {self.what}'


METRICS_FOUND = 'MetricsFound'
METRICS_MISSING = 'MetricsMissing'
METRICS_STALE = 'MetricsStale'
METRICS_INVALID = 'MetricsInvalid'

MAX_NAMED_PROBLEMS = 3
"""A not-reporting message names at most this many (pod, metric) problems, then counts the rest."""
_MAX_PROBLEM_CHARS = 300

NO_READY_REPLICAS = 'no ready replicas: nothing to measure'
"""The message of an available variant without ready replicas (at zero, or all starting)."""


@dataclass(frozen=True, slots=True)
class _Range:
    integer: bool = False
    low: float | None = None
    low_open: bool = False
    high: float | None = None
    high_open: bool = False

    def violation(self, value: object) -> str:
        """'' when `value` is a finite number inside the range, else what is wrong with it."""
        if isinstance(value, bool) or not isinstance(value, int | float):
            return f'{value!r:.40} is not a number'
        if self.integer and not isinstance(value, int):
            return f'{value!r:.40} is not an integer'
        # An int is always finite (and may be too large for a float: no isfinite on it).
        if isinstance(value, float) and not math.isfinite(value):
            return f'{value} is not a finite number'
        if self.low is not None and (value < self.low or (self.low_open and value == self.low)):
            return f'{_show(value)} is {"not above" if self.low_open else "below"} {self.low:.15g}'
        if self.high is not None and (value > self.high or (self.high_open and value == self.high)):
            return (
                f'{_show(value)} is {"not below" if self.high_open else "above"} {self.high:.15g}'
            )
        return ''


def _show(value: int | float) -> str:
    """A short rendering: a huge integer is neither printed in full nor turned into a float."""
    if isinstance(value, int) and not -(10**15) < value < 10**15:
        return f'{"-" if value < 0 else ""}a {value.bit_length()}-bit integer'
    return f'{value:g}'


def _range_of(hint: object) -> _Range | None:
    """The numeric range an annotation declares; None for a field that is not a number."""
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is types.UnionType or origin is typing.Union:
        for arg in args:
            if arg is not type(None):
                return _range_of(arg)
        return None
    if origin is Annotated:
        found = _range_of(args[0])
        if found is None:
            return None
        for meta in args[1:]:
            if isinstance(meta, Ge):
                found = dataclasses.replace(found, low=float(meta.ge), low_open=False)  # type: ignore[arg-type]
            elif isinstance(meta, Gt):
                found = dataclasses.replace(found, low=float(meta.gt), low_open=True)  # type: ignore[arg-type]
            elif isinstance(meta, Le):
                found = dataclasses.replace(found, high=float(meta.le), high_open=False)  # type: ignore[arg-type]
            elif isinstance(meta, Lt):
                found = dataclasses.replace(found, high=float(meta.lt), high_open=True)  # type: ignore[arg-type]
        return found
    if hint is int or hint is float:
        return _Range(integer=hint is int)
    return None


@dataclass(frozen=True, slots=True)
class _Field:
    """One numeric field and the closed interval a sound value lies in (the fast path: one
    chained comparison, which NaN, ±Inf and huge integers all fail)."""

    name: str
    range: _Range
    lowest: float
    highest: float
    required: bool


def _fields(cls: type, required: tuple[str, ...]) -> tuple[_Field, ...]:
    hints = typing.get_type_hints(cls, include_extras=True)
    found = []
    for field in dataclasses.fields(cls):
        declared = _range_of(hints[field.name])
        if declared is None:
            continue
        lowest, highest = -sys.float_info.max, sys.float_info.max
        if declared.low is not None:
            lowest = math.nextafter(declared.low, math.inf) if declared.low_open else declared.low
        if declared.high is not None:
            highest = (
                math.nextafter(declared.high, -math.inf) if declared.high_open else declared.high
            )
        found.append(_Field(field.name, declared, lowest, highest, field.name in required))
    return tuple(found)


def _sound_check(fields: tuple[_Field, ...]) -> Callable[[object], bool]:
    """A predicate true only when every field passes `_problems`' fast path: one boolean
    expression over the record's attributes, written out from the declarations.

    The engine judges every replica of every model each cycle, and a loop over the field
    table costs twice this (attribute reads of the table, a call per record and field); what
    is wrong with a record that fails is then found by `_problems`, which this only skips."""
    terms = []
    for field in fields:
        if not field.name.isidentifier():  # pragma: no cover - dataclass fields always are
            raise ValueError(f'not a field name: {field.name!r}')
        if not (math.isfinite(field.lowest) and math.isfinite(field.highest)):
            raise ValueError(f'bounds of {field.name} must be finite')  # pragma: no cover
        number = (
            'v.__class__ is int'
            if field.range.integer
            else '((c := v.__class__) is float or c is int)'
        )
        # The bounds as literals (a float's repr reads back as the same float): constants
        # cost less to load than names.
        sound = f'{number} and {field.lowest!r} <= v <= {field.highest!r}'
        got = f'(v := item.{field.name})'
        terms.append(
            f'({got} is not None and {sound})' if field.required else f'({got} is None or {sound})'
        )
    source = 'def sound(item):\n    return ' + (' and '.join(terms) or 'True') + '\n'
    namespace: dict[str, Any] = {}
    exec(compile(source, f'<validity of {len(fields)} fields>', 'exec'), namespace)
    return cast('Callable[[object], bool]', namespace['sound'])


_REPLICA_FIELDS = _fields(ReplicaMetrics, REQUIRED_REPLICA_FIGURES)
_POOL_FIELDS = _fields(PoolMetrics, REQUIRED_POOL_FIGURES)
_SOUND_REPLICA = _sound_check(_REPLICA_FIELDS)
_SOUND_POOL = _sound_check(_POOL_FIELDS)


def _problems(item: object, fields: tuple[_Field, ...]) -> tuple[Problem, ...]:
    problems: list[Problem] = []
    for field in fields:
        value = getattr(item, field.name)
        if value is None:
            if field.required:
                problems.append(Problem(metric=field.name, what='missing', missing=True))
            continue
        kind = type(value)
        if (kind is int or (kind is float and not field.range.integer)) and (
            field.lowest <= value <= field.highest
        ):
            continue
        wrong = field.range.violation(value)
        if wrong:
            problems.append(Problem(metric=field.name, what=wrong, missing=False))
    return tuple(problems)


def replica_problems(replica: ReplicaMetrics) -> tuple[Problem, ...]:
    """Every figure of one replica that is missing (required ones only), non-finite or out of
    its declared range, in field order; empty when the replica reports usable metrics."""
    problems = () if _SOUND_REPLICA(replica) else _problems(replica, _REPLICA_FIELDS)
    if replica.ttft_histogram is None and replica.tpot_histogram is None:
        return problems
    return problems + tuple(
        Problem(metric=name, what=wrong, missing=False)
        for name in HISTOGRAM_FIGURES
        if (wrong := histogram_violation(getattr(replica, name)))
    )


HISTOGRAM_FIGURES = ('ttft_histogram', 'tpot_histogram')


def histogram_violation(histogram: LatencyHistogram | None) -> str:
    """What is wrong with a latency histogram (`model.LatencyHistogram`'s rules), '' if nothing
    is (or it is absent)."""
    if histogram is None:
        return ''
    bounds, counts, total = histogram.bounds, histogram.counts, histogram.total
    if len(bounds) != len(counts):
        return f'has {len(bounds)} bounds and {len(counts)} counts'
    if not (isinstance(total, int | float) and math.isfinite(total) and total >= 0):
        return f'total {total!r:.40} is not a finite number >= 0'
    previous_bound, previous_count = 0.0, 0.0
    for bound, count in zip(bounds, counts, strict=True):
        if not (isinstance(bound, int | float) and math.isfinite(bound) and bound > previous_bound):
            return f'bound {bound!r:.40} is not finite and above the one before (and 0)'
        if (
            not (
                isinstance(count, int | float) and math.isfinite(count) and previous_count <= count
            )
            or count > total
        ):
            return f'count {count!r:.40} at le={bound:g} is not within [previous count, total]'
        previous_bound, previous_count = bound, count
    return ''


def pool_problems(pool: PoolMetrics) -> tuple[Problem, ...]:
    """Every figure of one pool that is missing (the queue: a gateway without one reports 0) or
    non-finite or out of its declared range (no request count forbids scale-to-zero instead)."""
    return () if _SOUND_POOL(pool) else _problems(pool, _POOL_FIELDS)


@dataclass(frozen=True, slots=True)
class MetricsStatus:
    """Whether a variant's ready replicas all have fresh metrics (MetricsAvailable condition)."""

    available: bool
    reason: str
    message: str


def metrics_status(
    *,
    variant: Variant,
    classes: Sequence[Freshness | None],
    problems: Sequence[tuple[str, Problem]] = (),
) -> MetricsStatus:
    """Judge one variant from the freshness classes of its usable replicas' metrics and the
    (source, problem) pairs of its replicas (and pool) that are not reporting.

    Any problem makes the variant unavailable, whatever the counts: `MetricsInvalid` when one
    figure is broken, else `MetricsMissing`; the message names the first problems. An available
    variant has no message, except one without ready replicas (`NO_READY_REPLICAS`).
    """
    if problems:
        invalid = any(not problem.missing for _, problem in problems)
        return MetricsStatus(
            False, METRICS_INVALID if invalid else METRICS_MISSING, describe_problems(problems)
        )
    fresh = list(classes).count(Freshness.FRESH)
    if variant.ready_replicas <= 0:
        return MetricsStatus(True, METRICS_FOUND, NO_READY_REPLICAS)
    if fresh >= variant.ready_replicas:
        return MetricsStatus(True, METRICS_FOUND, '')
    if any(c is Freshness.STALE or c is Freshness.UNAVAILABLE for c in classes):
        return MetricsStatus(
            False,
            METRICS_STALE,
            f'{fresh} of {variant.ready_replicas} ready replicas have fresh metrics',
        )
    return MetricsStatus(
        False,
        METRICS_MISSING,
        f'{fresh} of {variant.ready_replicas} ready replicas report metrics',
    )


def describe_problems(problems: Sequence[tuple[str, Problem]]) -> str:
    """`pod: metric what; ...` for the first `MAX_NAMED_PROBLEMS`, then how many more."""
    shown = [
        problem.describe(source=source)[:_MAX_PROBLEM_CHARS]
        for source, problem in problems[:MAX_NAMED_PROBLEMS]
    ]
    more = len(problems) - len(shown)
    return '; '.join(shown) + (f' (and {more} more)' if more else '')
