"""Prerequisites from outside the repository: a test without one is skipped locally and fails
in CI.

Why: a green CI run that skipped the kubectl conformance checks or the tests on the real Azure
traces would hide a missing install step or a moved file. .ci/run installs what the tests need
and runs them with CI=true, where an absent prerequisite is a failure with its reason.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import NoReturn

import pytest

from llmscaler.devcluster import binaries


def missing(reason: str) -> NoReturn:
    """Skip the test with `reason`, or fail it with CI=true."""
    if os.environ.get('CI') == 'true':
        pytest.fail(f'{reason} (a prerequisite; CI=true requires it)')
    pytest.skip(reason)


def need_file(path: Path, *, what: str = 'it lives outside the repository') -> Path:
    """`path`, or skip / fail (`missing`) when it does not exist."""
    if not path.exists():
        missing(f'{path} is absent ({what})')
    return path


def need_program(name: str) -> str:
    """The program `name` on PATH, or skip / fail (`missing`)."""
    found = shutil.which(name)
    if found is None:
        missing(f'{name} not on PATH')
    return found


def need_built(name: str) -> Path:
    """The binary `name` built from a pinned Go module (`make binaries`), or skip / fail."""
    found = binaries.find(name)
    if found is None:
        missing(f'{name} is not built (make binaries; cache: {binaries.cache_root()})')
    return found


def need_native() -> Path:
    """The folder of the simulator's compiled engine built from its current sources (`make
    native`), or skip / fail."""
    from llmscaler.sim.native import engine

    if engine.library(engine.directory()) is None:
        missing(f'the compiled engine is not built (make native; cache: {engine.cache_root()})')
    return engine.directory()
