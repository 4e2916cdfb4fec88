"""The JSON face of the decision core: snapshot and state files in, decisions and state out.

Why: users ask "what would the autoscaler do now?" by handing `llmscaler decide` a snapshot
file, and tests drive the core the same way. The file formats are the core's own dataclasses
(`llmscaler.model`), validated by pydantic so a bad file is reported as ONE line naming the file,
the path to the bad field and why (`snap.json: variants.0.cost: Input should be a valid number`),
never as a traceback. Unknown keys are errors, so a misspelt field does not pass silently.

The snapshot document is a `Snapshot` plus an optional `now` (seconds, on the same clock as the
metrics' `observed_at`); without it, `now` is the newest `observed_at` in the file. The JSON
Schema of the document is `snapshot_schema()`, kept in `docs/snapshot.schema.json` (a test checks
the two agree).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pydantic

from llmscaler.engine import Outcome
from llmscaler.model import PoolMetrics, ReplicaMetrics, Snapshot, State, Variant


class InputError(Exception):
    """A file that cannot be used, described in one line: `<file>: <where>: <why>`."""


@dataclass(frozen=True, slots=True)
class SnapshotDocument:
    """A snapshot file: the world at one instant, and the instant."""

    __pydantic_config__ = {'extra': 'forbid'}  # noqa: RUF012 (read by pydantic only)

    now: float | None = None
    variants: tuple[Variant, ...] = ()
    replicas: tuple[ReplicaMetrics, ...] = ()
    pools: tuple[PoolMetrics, ...] = ()

    @property
    def snapshot(self) -> Snapshot:
        return Snapshot(variants=self.variants, replicas=self.replicas, pools=self.pools)

    @property
    def effective_now(self) -> float:
        if self.now is not None:
            return self.now
        times = [r.observed_at for r in self.replicas] + [p.observed_at for p in self.pools]
        return max(times, default=0.0)


_SNAPSHOT = pydantic.TypeAdapter(SnapshotDocument)
_STATE = pydantic.TypeAdapter(State)
_OUTCOME = pydantic.TypeAdapter(Outcome)


def _read_json(path: Path) -> Any:
    try:
        text = path.read_text(encoding='utf-8')
    except FileNotFoundError:
        raise InputError(f'{path}: no such file') from None
    except UnicodeDecodeError as exc:
        raise InputError(f'{path}: not UTF-8 text (byte {exc.start})') from None
    except OSError as exc:
        raise InputError(f'{path}: cannot read: {exc.strerror}') from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f'{path}: line {exc.lineno} column {exc.colno}: {exc.msg}') from None


def describe_validation_error(*, path: Path | str, error: pydantic.ValidationError) -> str:
    """One line for a validation failure: the first bad field, and how many more there are."""
    errors = error.errors(include_url=False)
    first = errors[0]
    where = '.'.join(str(part) for part in first['loc']) or '(top level)'
    more = f' (and {len(errors) - 1} more)' if len(errors) > 1 else ''
    return f'{path}: {where}: {first["msg"]}{more}'


def _validate(adapter: pydantic.TypeAdapter[Any], data: Any, path: Path) -> Any:
    try:
        return adapter.validate_python(data)
    except pydantic.ValidationError as exc:
        raise InputError(describe_validation_error(path=path, error=exc)) from None


def load_snapshot(*, path: Path) -> SnapshotDocument:
    """Read and validate a snapshot file; raises `InputError` with one line on any problem."""
    document: SnapshotDocument = _validate(_SNAPSHOT, _read_json(path), path)
    return document


def load_state(*, path: Path) -> State:
    """Read and validate a state file written by `dump_outcome`'s `state` member."""
    state: State = _validate(_STATE, _read_json(path), path)
    return state


def parse_snapshot(*, data: Any, source: str = '<snapshot>') -> SnapshotDocument:
    """Validate an already-decoded snapshot document (for tests and embedding)."""
    document: SnapshotDocument = _validate(_SNAPSHOT, data, Path(source))
    return document


def dump_outcome(*, outcome: Outcome, now: float) -> dict[str, Any]:
    """Decisions and the new state as plain JSON-ready data."""
    data: dict[str, Any] = _OUTCOME.dump_python(outcome, mode='json')
    for decision in data['decisions']:
        # Named figures read better as an object; the pairs are already sorted by name.
        decision['figures'] = dict(decision['figures'])
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
