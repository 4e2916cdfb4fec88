"""The JSON face of the decision core: snapshot and state files in, decisions and state out.

Why: users ask "what would the autoscaler do now?" by handing `llmscaler decide` a snapshot
file, and tests drive the core the same way. The file formats are the core's own dataclasses
(`llmscaler.domain`), validated by pydantic so a bad file is reported as ONE line naming the file,
the path to the bad field and why (`snap.json: variants.0.cost: Input should be a valid number`),
never as a traceback.

Input is strict, field by field, as the dataclasses declare it (`domain.basics.STRICT_KEYS` and the
`annotated_types` ranges on each field):
- unknown keys are errors, so a misspelt field does not pass silently;
- types are not coerced: `"3"` is not a number, `true` is not 1, `3.0` and `1e30` are not
  integers; NaN, `Infinity` and numbers that overflow a float (`1e999`) are refused;
- every number is inside its declared range (KV usage in [0, 1], costs and figures >= 0, counts
  in [0, 2^31 - 1], ...); `min_replicas` <= `max_replicas`; variant keys are unique;
- a file is at most `MAX_INPUT_BYTES`; the JSON parser refuses nesting deeper than 200 levels
  and numbers of thousands of digits.
The same ranges are published as `minimum`/`maximum` in the JSON Schema (`snapshot_schema()`,
kept in `docs/snapshot.schema.json`; a test checks the two agree).

The snapshot document is a `Snapshot` plus an optional `now` (seconds, on the same clock as the
metrics' `observed_at`); without it, `now` is the newest `observed_at` in the file.

Output is always valid JSON: a figure that is not a finite number is written as `null`.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import pydantic

from llmscaler.analyze.learning.rate_forecast import RateSample
from llmscaler.analyze.slo.capacity import VariantLearning
from llmscaler.domain.snapshot import GpuLimit, PoolMetrics, ReplicaMetrics, Snapshot, Variant
from llmscaler.domain.state import State
from llmscaler.engine import Outcome
from llmscaler.policies import registry
from llmscaler.policies.predictive import policy as predictive
from llmscaler.policies.predictive.state import from_legacy

MAX_INPUT_BYTES: Final = 64 * 1024 * 1024
"""Largest snapshot or state file read (64 MiB: about 100,000 replicas)."""

_SHOWN_INPUT = 40
"""Characters of a refused value quoted in an error line."""


class InputError(Exception):
    """A file that cannot be used, described in one line: `<file>: <where>: <why>`."""


@dataclass(frozen=True, slots=True)
class SnapshotDocument:
    """A snapshot file: the world at one instant, and the instant."""

    __pydantic_config__ = {'extra': 'forbid', 'strict': True, 'allow_inf_nan': False}  # noqa: RUF012 (read by pydantic only)

    now: float | None = None
    variants: tuple[Variant, ...] = ()
    replicas: tuple[ReplicaMetrics, ...] = ()
    pools: tuple[PoolMetrics, ...] = ()
    gpu_limits: tuple[GpuLimit, ...] = ()

    @property
    def snapshot(self) -> Snapshot:
        return Snapshot(
            variants=self.variants,
            replicas=self.replicas,
            pools=self.pools,
            gpu_limits=self.gpu_limits,
        )

    @property
    def effective_now(self) -> float:
        if self.now is not None:
            return self.now
        times = [r.observed_at for r in self.replicas] + [p.observed_at for p in self.pools]
        return max(times, default=0.0)


_SNAPSHOT = pydantic.TypeAdapter(SnapshotDocument)


@dataclass(frozen=True, slots=True)
class StateFile(State):
    """A state file as read: `State`, whose policies' states are still plain JSON here, and the
    two fields files had before policies kept their own state (the predictive policy's
    `forecast` and `learning`), which `load_state` turns into that policy's state."""

    forecast: tuple[tuple[str, tuple[RateSample, ...]], ...] = ()
    learning: tuple[tuple[str, VariantLearning], ...] = ()


_STATE = pydantic.TypeAdapter(State)
_STATE_FILE = pydantic.TypeAdapter(StateFile)
_OUTCOME = pydantic.TypeAdapter(Outcome)


def _read_text(path: Path) -> str:
    try:
        with path.open('rb') as handle:
            raw = handle.read(MAX_INPUT_BYTES + 1)
    except FileNotFoundError:
        raise InputError(f'{path}: no such file') from None
    except IsADirectoryError:
        raise InputError(f'{path}: is a directory, not a file') from None
    except OSError as exc:
        raise InputError(f'{path}: cannot read: {exc.strerror}') from None
    if len(raw) > MAX_INPUT_BYTES:
        raise InputError(f'{path}: larger than {MAX_INPUT_BYTES // (1024 * 1024)} MiB')
    try:
        return raw.decode('utf-8')
    except UnicodeDecodeError as exc:
        raise InputError(f'{path}: not UTF-8 text (byte {exc.start})') from None


def _shown(value: Any) -> str:
    """A short quote of a refused scalar, as JSON writes it; '' for containers (the path
    already says where)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**30:
        try:
            digits = len(str(abs(value)))
        except ValueError:  # beyond Python's int-to-text limit
            digits = int(value.bit_length() * math.log10(2)) + 1
        return f' (got a {digits}-digit number)'
    if isinstance(value, bool | int | float | str) or value is None:
        text = json.dumps(value)
        if len(text) > _SHOWN_INPUT:
            text = text[: _SHOWN_INPUT - 3] + '...'
        return f' (got {text})'
    return ''


def describe_validation_error(*, path: Path | str, error: pydantic.ValidationError) -> str:
    """One line for a validation failure: the first bad field, and how many more there are."""
    errors = error.errors(include_url=False)
    first = errors[0]
    more = f' (and {len(errors) - 1} more)' if len(errors) > 1 else ''
    if first['type'] == 'json_invalid':
        # "Invalid JSON: EOF while parsing a list at line 1 column 14": the position says where.
        return f'{path}: {first["msg"]}{more}'
    where = '.'.join(str(part) for part in first['loc']) or '(top level)'
    return f'{path}: {where}: {first["msg"]}{_shown(first.get("input"))}{more}'


def _validate(adapter: pydantic.TypeAdapter[Any], text: str | bytes, path: Path) -> Any:
    try:
        # JSON mode: strict types still take arrays for tuples, and the parser bounds depth.
        return adapter.validate_json(text)
    except pydantic.ValidationError as exc:
        raise InputError(describe_validation_error(path=path, error=exc)) from None


def _check_snapshot(document: SnapshotDocument, path: Path) -> SnapshotDocument:
    """Rules that span fields: bounds in order, one entry per variant key."""
    seen: dict[str, int] = {}
    for index, variant in enumerate(document.variants):
        if variant.min_replicas > variant.max_replicas:
            raise InputError(
                f'{path}: variants.{index}.min_replicas: {variant.min_replicas} is above '
                f'max_replicas {variant.max_replicas}'
            )
        first = seen.setdefault(variant.key, index)
        if first != index:
            raise InputError(
                f'{path}: variants.{index}: duplicate variant {variant.key} (also variants.{first})'
            )
    return document


def load_snapshot(*, path: Path) -> SnapshotDocument:
    """Read and validate a snapshot file; raises `InputError` with one line on any problem."""
    document: SnapshotDocument = _validate(_SNAPSHOT, _read_text(path), path)
    return _check_snapshot(document, path)


def load_state(*, path: Path) -> State:
    """Read and validate a state file written by `dump_outcome`'s `state` member (or by a version
    before policies kept their own state). Each policy's state is validated against that
    policy's state type; an unknown policy is refused."""
    document: StateFile = _validate(_STATE_FILE, _read_text(path), path)
    policies: dict[str, tuple[tuple[str, object], ...]] = {}
    for index, (name, states) in enumerate(document.policies):
        where = f'policies.{index}'
        policy = registry.by_name(name)
        if policy is None:
            known = ', '.join(registry.names())
            raise InputError(f'{path}: {where}.0: unknown policy {name!r} (known: {known})')
        if policy.state_type is None:
            if states:
                raise InputError(f'{path}: {where}.1: policy {name} keeps no state')
            continue
        adapter: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(policy.state_type)
        decoded = []
        for position, (group, raw) in enumerate(states):
            try:
                decoded.append((group, adapter.validate_json(json.dumps(raw))))
            except pydantic.ValidationError as exc:
                inner = describe_validation_error(path='', error=exc).removeprefix(': ')
                raise InputError(f'{path}: {where}.1.{position}.1.{inner}') from None
        policies[name] = tuple(decoded)
    if document.forecast or document.learning:
        legacy = from_legacy(forecast=document.forecast, learning=document.learning)
        policies[predictive.ANALYZER] = tuple(
            sorted({**dict(legacy), **dict(policies.get(predictive.ANALYZER, ()))}.items())
        )
    return State(
        k2_history=document.k2_history,
        capacity=document.capacity,
        last_desired=document.last_desired,
        last_informative=document.last_informative,
        kalman=document.kalman,
        policies=tuple(sorted(policies.items())),
    )


def parse_snapshot(*, data: str | bytes, source: str = '<snapshot>') -> SnapshotDocument:
    """Validate a snapshot document given as JSON text (for tests and embedding)."""
    if len(data) > MAX_INPUT_BYTES:
        raise InputError(f'{source}: larger than {MAX_INPUT_BYTES // (1024 * 1024)} MiB')
    document: SnapshotDocument = _validate(_SNAPSHOT, data, Path(source))
    return _check_snapshot(document, Path(source))


def dump_outcome(*, outcome: Outcome, now: float) -> dict[str, Any]:
    """Decisions and the new state as plain JSON-ready data."""
    data: dict[str, Any] = _OUTCOME.dump_python(outcome, mode='json')
    for decision in data['decisions']:
        # Named figures read better as an object; the pairs are already sorted by name. JSON has
        # no NaN or Infinity: such a figure is written as null.
        decision['figures'] = {
            name: value if not isinstance(value, float) or math.isfinite(value) else None
            for name, value in decision['figures']
        }
    return {'now': now, **data}


def dump_state(*, state: State) -> dict[str, Any]:
    data: dict[str, Any] = _STATE.dump_python(state, mode='json')
    return data


def snapshot_schema() -> dict[str, Any]:
    """The JSON Schema of the snapshot document."""
    schema: dict[str, Any] = _SNAPSHOT.json_schema()
    schema['$schema'] = 'https://json-schema.org/draft/2020-12/schema'
    schema['title'] = 'llmscaler snapshot'
    return schema
