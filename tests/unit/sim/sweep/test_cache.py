"""`sim.sweep.cache`: keys that name the inputs and the code, entries that survive a crash."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmscaler.sim.sweep import cache
from llmscaler.sim.sweep.cache import RunCache
from tests.support.sweep_fixtures import Square, small_sweep


def test_a_key_does_not_depend_on_the_order_a_set_was_built_in() -> None:
    one = Square(1, extra=frozenset(['a', 'b', 'c', 'd', 'e']))
    other = Square(1, extra=frozenset(['e', 'd', 'c', 'b', 'a']))
    assert cache.key(identity=one.identity()) == cache.key(identity=other.identity())
    assert cache.key(identity=one.identity()) != cache.key(identity=Square(1).identity())


def test_a_key_names_the_trace_contents() -> None:
    (task,) = small_sweep(policies=('default',))
    (same,) = small_sweep(policies=('default',))
    assert cache.key(identity=task.identity()) == cache.key(identity=same.identity())
    trace = next(iter(task.traces.values()))  # type: ignore[union-attr]
    trace.output_tokens[0] += 1
    assert cache.key(identity=task.identity()) != cache.key(identity=same.identity())


def test_a_key_names_the_code(monkeypatch: pytest.MonkeyPatch) -> None:
    identity = Square(3).identity()
    before = cache.key(identity=identity)
    monkeypatch.setattr(cache, '_fingerprint', 'another version of the code')
    assert cache.key(identity=identity) != before


def test_the_fingerprint_covers_the_package_modules() -> None:
    assert len(cache.code_fingerprint()) == 64
    assert cache.code_fingerprint() == cache.code_fingerprint()


def test_an_unreadable_entry_is_a_miss_and_is_overwritten(tmp_path: Path) -> None:
    store = RunCache(directory=tmp_path)
    (tmp_path / 'k.pickle').write_bytes(b'\x80\x05truncated')
    assert store.get(key='k') == (False, None)
    store.put(key='k', value=[1, 2])
    assert store.get(key='k') == (True, [1, 2])
    assert [p.name for p in tmp_path.iterdir()] == ['k.pickle']  # no temporary left


def test_the_folder_is_outside_the_work_tree_unless_named(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv(cache.ENV, raising=False)
    monkeypatch.setenv('XDG_CACHE_HOME', str(tmp_path / 'xdg'))
    assert cache.default_directory() == tmp_path / 'xdg' / 'llmscaler' / 'runs'
    monkeypatch.setenv(cache.ENV, str(tmp_path / 'mine'))
    assert cache.default_directory() == tmp_path / 'mine'
