"""The run cache: a finished task's result on disk, keyed by a hash of everything it depends on.

Why: a sweep of hundreds of runs that is interrupted (a laptop closed, a Ctrl-C) should resume
from the runs it finished, and a benchmark rerun on unchanged code should not simulate again.
A task's key is the SHA-256 of a canonical pickle of its `identity()` (the trace contents, the
fleet, the policy with its settings, the loop settings, the SLO: `tasks.RunSpec`) together with
a fingerprint of the code: the package's version and the contents of every module of the
installed `llmscaler` package, so any edit to the simulator or a policy misses the cache rather
than hands back a result the code would no longer produce. The pickle is canonical where pickle
is not: a set or frozenset is written in sorted order (by its pickled members), so a key does not
depend on the hash seed of the process that made it.

The cache lives outside the work tree: `$LLMSCALER_RUN_CACHE`, else
`$XDG_CACHE_HOME/llmscaler/runs`, else `~/.cache/llmscaler/runs` (`default_directory`); one file
per run, `<key>.pickle`, written to a temporary name and renamed, so a run killed mid-write
leaves no partial entry. Delete the folder to clear it.

What fails: an entry that cannot be read back (truncated, from another Python) counts as a miss
and is overwritten; a task whose identity cannot be pickled raises the pickling error, as the
executor would. The cache trusts its folder: do not point it at files others can write (pickle
runs code on load).
"""

from __future__ import annotations

import hashlib
import io
import os
import pickle
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import llmscaler
from llmscaler import user_cache
from llmscaler.version import version

ENV = 'LLMSCALER_RUN_CACHE'
"""The environment variable naming the cache folder."""


def default_directory() -> Path:
    """Where the cache lives unless told (the module docstring)."""
    return user_cache.folder(variable=ENV, name='runs')


class _Canonical(pickle.Pickler):
    """A pickler that writes sets in a fixed order, so equal values pickle to equal bytes.

    A set is written as a persistent reference to its kind and its members in order: the
    pickler asks `persistent_id` of every object before anything else, where it writes sets
    itself before consulting `reducer_override` or a dispatch table. The bytes are for hashing
    only; nothing loads them back."""

    def persistent_id(self, obj: Any) -> Any:
        if isinstance(obj, set | frozenset):
            return type(obj).__name__, sorted(obj, key=_canonical_bytes)
        return None


def _canonical_bytes(value: object) -> bytes:
    buffer = io.BytesIO()
    _Canonical(buffer, protocol=5).dump(value)
    return buffer.getvalue()


_fingerprint: str | None = None


def code_fingerprint() -> str:
    """SHA-256 of the package's version and of every module of the `llmscaler` package (by
    relative path, in path order); computed once per process."""
    global _fingerprint
    if _fingerprint is None:
        digest = hashlib.sha256(version().encode())
        root = Path(llmscaler.__file__).resolve().parent
        for path in sorted(root.rglob('*.py')):
            digest.update(path.relative_to(root).as_posix().encode() + b'\0')
            digest.update(path.read_bytes() + b'\0')
        _fingerprint = digest.hexdigest()
    return _fingerprint


def key(*, identity: object) -> str:
    """The cache key of a task whose inputs are `identity`, under this code."""
    digest = hashlib.sha256(code_fingerprint().encode())
    digest.update(_canonical_bytes(identity))
    return digest.hexdigest()


@dataclass(frozen=True, slots=True)
class RunCache:
    """Finished results under `directory`, one pickle per key."""

    directory: Path

    def _path(self, key: str) -> Path:
        return self.directory / f'{key}.pickle'

    def get(self, *, key: str) -> tuple[bool, object]:
        """(True, the result) when `key` finished before, else (False, None)."""
        try:
            with self._path(key).open('rb') as file:
                return True, pickle.load(file)
        except FileNotFoundError:
            return False, None
        except (OSError, EOFError, pickle.UnpicklingError, AttributeError, ImportError):
            return False, None  # unreadable: run again and overwrite

    def put(self, *, key: str, value: object) -> None:
        """Store `value` under `key` (atomically: a temporary file renamed)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=self.directory, suffix='.part')
        try:
            with os.fdopen(handle, 'wb') as file:
                pickle.dump(value, file, protocol=5)
            os.replace(temporary, self._path(key))
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
