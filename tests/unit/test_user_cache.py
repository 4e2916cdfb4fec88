"""llmscaler.user_cache: a folder's own variable first, then XDG_CACHE_HOME, then ~/.cache."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmscaler import user_cache


def test_its_variable_then_xdg_then_the_home_folder(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv('HOME', str(tmp_path / 'home'))
    monkeypatch.delenv('XDG_CACHE_HOME', raising=False)
    monkeypatch.delenv('LLMSCALER_THINGS', raising=False)
    home = tmp_path / 'home' / '.cache' / 'llmscaler' / 'things'
    assert user_cache.folder(variable='LLMSCALER_THINGS', name='things') == home
    monkeypatch.setenv('XDG_CACHE_HOME', '')  # empty: as if unset
    assert user_cache.folder(variable='LLMSCALER_THINGS', name='things') == home
    monkeypatch.setenv('XDG_CACHE_HOME', str(tmp_path / 'xdg'))
    xdg = tmp_path / 'xdg' / 'llmscaler' / 'things'
    assert user_cache.folder(variable='LLMSCALER_THINGS', name='things') == xdg
    monkeypatch.setenv('LLMSCALER_THINGS', '')
    assert user_cache.folder(variable='LLMSCALER_THINGS', name='things') == xdg
    monkeypatch.setenv('LLMSCALER_THINGS', str(tmp_path / 'here'))
    assert user_cache.folder(variable='LLMSCALER_THINGS', name='things') == tmp_path / 'here'
