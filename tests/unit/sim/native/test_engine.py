"""llmscaler.sim.native.engine: a compiled copy is named after the engine's sources, loaded only
when built from them, put in front of the package's own modules, turned off on demand, and
gives the runs of the source engine to the last bit."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from llmscaler.sim.native import engine
from tests.support.prerequisites import need_native

# A run of the core policy, a run with prefix caching and the prefix-aware router, and the
# reference engine against the fast one: the digest of each result's repr.
RUNS = """
import dataclasses, hashlib
from llmscaler.sim import runner
from llmscaler.sim.native import engine
from llmscaler.sim.policies.core import CorePolicy
from llmscaler.sim.scenario.setup import core_config
from llmscaler.sim.scenario import loader
from llmscaler.sim.scenario.document import DEFAULT_DOCUMENT
from llmscaler.sim.workload import synthetic
from llmscaler.sim.workload.prefixes import PrefixSpec

variants = loader.from_document(document=DEFAULT_DOCUMENT).variants
spec = synthetic.preset(name='azure-conv', duration=1800.0, rate=6.0, diurnal=True)
plain = synthetic.generate(spec=spec, seed=3)
shared = synthetic.generate(
    spec=dataclasses.replace(spec, prefixes=PrefixSpec(
        system_prompts=4, system_tokens=600, followup=0.5, open_sessions=50)),
    seed=3,
)
for trace, settings in (
    (plain, runner.SimSettings()),
    (plain, runner.SimSettings(engine='reference')),
    (shared, runner.SimSettings(prefix_caching=True, router='prefix-aware')),
):
    policy = CorePolicy(name='default', config=core_config(name='default'))
    result = runner.run(trace=trace, variants=variants, policy=policy, settings=settings)
    print(hashlib.sha256(repr(result).encode()).hexdigest())
print(engine.active())
"""


def runs(*, mode: str) -> list[str]:
    environment = {**os.environ, engine.ENV: mode}
    done = subprocess.run(
        [sys.executable, '-c', RUNS],
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return done.stdout.split()


def test_the_compiled_engine_gives_the_runs_of_the_source_engine_to_the_last_bit() -> None:
    need_native()
    compiled, source = runs(mode='auto'), runs(mode='off')
    assert compiled[-1] == 'True'
    assert source[-1] == 'False'
    assert len(compiled) == 4
    assert compiled[:-1] == source[:-1]


def test_a_built_copy_comes_before_the_package_s_own_modules() -> None:
    root = need_native()
    path = engine.search_path(package=['package'])
    assert path == [str(engine.package_folder(root)), 'package']
    assert f'{engine.GROUP}__mypyc' in sys.modules
    assert engine.active()


def test_off_or_nothing_built_for_these_sources_leaves_the_package_as_it_is(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(engine.CACHE_ENV, str(tmp_path))
    assert engine.directory().parent == tmp_path
    assert engine.search_path(package=['package']) == ['package']
    # A copy built from other sources sits in another folder: it is not this one.
    other = tmp_path / ('0' * 24)
    other.mkdir()
    (other / engine.LIBRARY).write_bytes(b'')
    assert engine.search_path(package=['package']) == ['package']
    built = engine.directory()
    built.mkdir()
    (built / engine.LIBRARY).write_bytes(b'')
    monkeypatch.setenv(engine.ENV, 'off')
    assert engine.search_path(package=['package']) == ['package']


def test_a_change_to_any_compiled_module_names_another_copy(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    sources = tmp_path / 'vllm'
    shutil.copytree(engine.SOURCES, sources, ignore=shutil.ignore_patterns('__pycache__'))
    monkeypatch.setattr(engine, 'SOURCES', sources)
    first = engine.key()
    assert engine.key() == first
    names = [path.name for path in engine.modules()]
    assert names == sorted(names)
    assert '__init__.py' not in names
    assert 'fast.py' in names
    (sources / '__init__.py').write_text('"""Not compiled."""\n')
    assert engine.key() == first
    fast = sources / 'fast.py'
    fast.write_text(fast.read_text() + '\n# edited\n')
    edited = engine.key()
    assert edited != first
    fast.rename(sources / 'faster.py')
    assert engine.key() not in (first, edited)


def test_an_unknown_mode_is_refused_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(engine.ENV, 'on')
    message = "LLMSCALER_NATIVE must be one of auto, off, got 'on'"
    assert engine.problem() == message
    with pytest.raises(ValueError, match=message):
        engine.search_path(package=['package'])
    monkeypatch.setenv(engine.ENV, 'off')
    assert engine.problem() is None
