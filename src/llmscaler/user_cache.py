"""Where llmscaler keeps what it builds or computes for later, outside any work tree.

Why one function: the run cache (`sim.sweep.cache`) and the compiled engine (`sim.native`) each
keep a folder of the user's cache, each movable by a variable of its own, and both must honour
`XDG_CACHE_HOME` the same way. Nothing here creates a folder or fails: a caller that writes
creates it and reports what fails.
"""

from __future__ import annotations

import os
from pathlib import Path


def folder(*, variable: str, name: str) -> Path:
    """`$variable` when set and not empty, else `$XDG_CACHE_HOME/llmscaler/name`, else
    `~/.cache/llmscaler/name`."""
    named = os.environ.get(variable)
    if named:
        return Path(named)
    base = os.environ.get('XDG_CACHE_HOME') or str(Path.home() / '.cache')
    return Path(base) / 'llmscaler' / name
