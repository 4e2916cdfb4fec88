"""llmscaler.sim.native.build: nothing to do when the copy for these sources is there, and a
failed compilation says so and leaves nothing in the cache."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from llmscaler.sim.native import build, engine
from tests.support.prerequisites import need_native


def test_the_copy_for_these_sources_there_builds_nothing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    root = need_native()
    before = sorted(path.name for path in root.rglob('*'))
    assert build.main(['--quiet']) == 0
    assert capsys.readouterr().out == ''
    assert build.main([]) == 0
    assert capsys.readouterr().out.strip() == f'compiled engine up to date: {root}'
    assert sorted(path.name for path in root.rglob('*')) == before


def test_a_failed_compilation_exits_1_and_leaves_nothing_in_the_cache(tmp_path: Path) -> None:
    environment = {**os.environ, engine.CACHE_ENV: str(tmp_path), 'CC': 'false'}
    done = subprocess.run(
        [sys.executable, '-m', 'llmscaler.sim.native.build'],
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 1
    assert 'compiled engine not built' in done.stderr
    assert list(tmp_path.iterdir()) == []
