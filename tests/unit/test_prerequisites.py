"""`tests.support.prerequisites`: an absent prerequisite skips a test locally and fails it in CI."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import prerequisites


def test_an_absent_file_skips_locally_and_fails_in_ci(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    absent = tmp_path / 'trace.csv'
    monkeypatch.delenv('CI', raising=False)
    with pytest.raises(pytest.skip.Exception, match=r'trace\.csv is absent'):
        prerequisites.need_file(absent)
    monkeypatch.setenv('CI', 'true')
    with pytest.raises(pytest.fail.Exception, match='CI=true requires it'):
        prerequisites.need_file(absent)
    absent.write_text('x')
    assert prerequisites.need_file(absent) == absent


def test_an_absent_program_skips_locally_and_fails_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv('PATH', '')
    monkeypatch.setenv('CI', 'false')
    with pytest.raises(pytest.skip.Exception, match='kubectl not on PATH'):
        prerequisites.need_program('kubectl')
    monkeypatch.setenv('CI', 'true')
    with pytest.raises(pytest.fail.Exception, match='kubectl not on PATH'):
        prerequisites.need_program('kubectl')
