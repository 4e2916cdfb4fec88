"""The compiled decision core (tools/compile_core.py, `make compiled`) against the interpreted one.

Why: the container image runs `llmscaler.analyze` and `llmscaler.optimize` compiled with mypyc;
the rest of the suite runs them in the interpreter. mypyc keeps Python's meaning for code whose
values have their declared types, but a compiled module converts or refuses a value whose type
at run time is not the declared one (an int where a float is declared), and a patch of a module's
function does not reach its compiled callers. So the two builds are held to the same results:

- the tree under build/compiled was built from these sources;
- exactly the modules the tool compiles load from extension modules there;
- `decide()` on the benchmark's fleets (every analyzer path, the GPU limiter, cold and warm
  state, several cycles), the limited optimizer, and the simulator on two synthetic cases under
  four policies give the same decisions, states and outcomes, compared as text byte for byte
  (tests/unit/compiled_cases.py);
- the decision core's own tests pass on the compiled build: a second pytest run over every test
  module that imports the core and no adapter, less the tests marked `interpreted_only`.

Without a current tree (`make compiled`; `make unit` builds it) they skip, and fail with CI=true.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.prerequisites import missing

ROOT = Path(__file__).resolve().parent.parent.parent
TREE = ROOT / 'build' / 'compiled'
TOOL = ROOT / 'tools' / 'compile_core.py'
CORE = re.compile(
    r'^(?:from|import) llmscaler(?:\.(?:analyze|optimize)|\.engine| import engine)\b', re.M
)
ADAPTER = re.compile(
    r'^(?:from|import) (?:llmscaler\.(?:kube|controller|collect|devcluster)'
    r'|tests\.controller_harness)',
    re.M,
)


def run(
    argv: list[str], *, pythonpath: Path, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """`argv` under this interpreter with `pythonpath` first on the path, from the project root."""
    env = {**os.environ, 'PYTHONPATH': str(pythonpath)}
    return subprocess.run(
        [sys.executable, *argv],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.fixture(scope='module')
def tree() -> Path:
    if not TREE.is_dir():
        missing(f'no compiled core at {TREE} (make compiled)')
    done = run([str(TOOL), '--check'], pythonpath=ROOT / 'src')
    if done.returncode != 0:
        missing(f'the compiled core is older than src/ (make compiled): {done.stderr.strip()}')
    return TREE


def test_the_tool_says_a_tree_it_did_not_build_is_not_current(tmp_path: Path) -> None:
    (tmp_path / 'SOURCES').write_text('0' * 64 + '\n')
    done = run([str(TOOL), '--check', '--out', str(tmp_path)], pythonpath=ROOT / 'src')
    assert done.returncode == 1
    assert 'older than src/' in done.stderr


def test_exactly_the_compiled_modules_load_from_extension_modules(tree: Path) -> None:
    listed = run([str(TOOL), '--list'], pythonpath=ROOT / 'src')
    assert listed.returncode == 0, listed.stderr
    compiled = listed.stdout.split()
    assert 'llmscaler.analyze.slo_queueing' in compiled
    assert 'llmscaler.optimize.limited' in compiled
    assert len(compiled) >= 30
    probe = (
        'import importlib, sys\n'
        'for name in sys.argv[1:]:\n'
        '    print(name, importlib.import_module(name).__file__.endswith(".so"))\n'
    )
    others = ['llmscaler.analyze.validity', 'llmscaler.engine', 'llmscaler.model.snapshot']
    done = run(['-c', probe, *compiled, *others], pythonpath=tree)
    assert done.returncode == 0, done.stderr
    loaded = dict(line.split() for line in done.stdout.splitlines())
    assert loaded == {**dict.fromkeys(compiled, 'True'), **dict.fromkeys(others, 'False')}
    version = run(['-m', 'llmscaler', '--version'], pythonpath=tree)
    assert version.stdout.endswith('(decision core: compiled)\n'), version.stderr


def test_both_builds_decide_and_simulate_alike(tree: Path) -> None:
    script = str(ROOT / 'tests' / 'unit' / 'compiled_cases.py')
    interpreted = run([script], pythonpath=ROOT / 'src')
    compiled = run([script], pythonpath=tree)
    assert interpreted.returncode == 0, interpreted.stderr
    assert compiled.returncode == 0, compiled.stderr
    first, *expected = interpreted.stdout.splitlines()
    second, *got = compiled.stdout.splitlines()
    assert (first, second) == ('interpreted', 'compiled')
    assert len(expected) > 100
    assert sum('ScaleEvent(' in line for line in expected) > 10
    for want, have in zip(expected, got, strict=True):
        assert have == want


def core_test_modules() -> list[str]:
    """The test modules of the decision core: they import it and no adapter."""
    found = []
    for path in sorted((ROOT / 'tests' / 'unit').glob('test_*.py')):
        text = path.read_text(encoding='utf-8')
        if CORE.search(text) and not ADAPTER.search(text):
            found.append(str(path.relative_to(ROOT)))
    return found


def test_the_cores_tests_pass_on_the_compiled_build(tree: Path) -> None:
    modules = core_test_modules()
    assert 'tests/unit/test_slo_search.py' in modules
    assert 'tests/unit/test_engine_isolation.py' in modules
    assert 'tests/unit/test_kube_scale.py' not in modules
    assert len(modules) >= 30
    done = run(
        ['-m', 'pytest', '-q', '-p', 'no:cacheprovider', '-m', 'not interpreted_only', *modules],
        pythonpath=tree,
        timeout=600,
    )
    summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr
    assert done.returncode == 0, done.stdout[-4000:]
    passed = re.search(r'(\d+) passed', summary)
    assert passed is not None, summary
    assert int(passed[1]) >= 500, summary
