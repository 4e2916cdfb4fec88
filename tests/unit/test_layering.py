"""The decision core imports only the core (design.md §1), whatever adapters exist.

import-linter (`make contracts`) checks the contract against the adapters that exist; this test
reads every core module's imports and fails on any `llmscaler.*` import outside the core, so a
new adapter is covered before anyone lists it in pyproject.toml, and checks that every adapter
is listed there. The product never imports the test suite or pytest: the development cluster
(`llmscaler.devcluster`) that the tests share with the demo lives in the package, not in tests/.
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / 'src' / 'llmscaler'
CORE = ('model', 'config', 'vllm_args', 'analyze', 'optimize', 'enforce', 'engine', 'hpa')
NO_CLOCK = ('analyze', 'optimize', 'enforce', 'engine', 'model', 'hpa')
FORBIDDEN_IN_PURE_CODE = {'time', 'datetime', 'random', 'asyncio', 'socket', 'httpx', 'os'}


def core_files() -> list[Path]:
    files = []
    for name in CORE:
        path = PACKAGE / name
        files.extend(sorted(path.rglob('*.py')) if path.is_dir() else [path.with_suffix('.py')])
    return files


def imported(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f'{node.module}.{alias.name}' for alias in node.names)
    return names


def in_core(module: str) -> bool:
    parts = module.split('.')
    return len(parts) < 2 or parts[1] in CORE


@pytest.mark.parametrize('path', core_files(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_core_module_imports_only_the_core(path: Path) -> None:
    outside = sorted(m for m in imported(path) if m.startswith('llmscaler.') and not in_core(m))
    assert outside == [], f'{path.name} imports adapters: {outside}'


@pytest.mark.parametrize(
    'path',
    [p for p in core_files() if p.relative_to(PACKAGE).parts[0].removesuffix('.py') in NO_CLOCK],
    ids=lambda p: str(p.relative_to(PACKAGE)),
)
def test_pure_core_reads_no_clock_and_does_no_io(path: Path) -> None:
    roots = {m.split('.')[0] for m in imported(path)}
    assert roots.isdisjoint(FORBIDDEN_IN_PURE_CODE), roots & FORBIDDEN_IN_PURE_CODE


def test_the_check_sees_an_adapter_import(tmp_path: Path) -> None:
    bad = tmp_path / 'bad.py'
    bad.write_text('from llmscaler.kube import actuator\nimport time\n')
    assert not all(in_core(m) for m in imported(bad) if m.startswith('llmscaler.'))
    assert 'time' in {m.split('.')[0] for m in imported(bad)}


def adapters() -> list[str]:
    """Every top-level module or package of llmscaler outside the core (entry points aside)."""
    names = {p.name.removesuffix('.py') for p in PACKAGE.iterdir() if p.suffix == '.py'}
    names |= {p.name for p in PACKAGE.iterdir() if (p / '__init__.py').is_file()}
    return sorted(n for n in names if n not in CORE and not n.startswith('__'))


def test_every_adapter_is_forbidden_to_the_core_in_pyproject() -> None:
    contracts = tomllib.loads((ROOT / 'pyproject.toml').read_text())['tool']['importlinter']
    (no_adapter,) = [c for c in contracts['contracts'] if 'llmscaler.cli' in c['forbidden_modules']]
    listed = set(no_adapter['forbidden_modules'])
    assert 'devcluster' in adapters()
    assert [f'llmscaler.{name}' for name in adapters() if f'llmscaler.{name}' not in listed] == []


@pytest.mark.parametrize(
    'path', sorted(PACKAGE.rglob('*.py')), ids=lambda p: str(p.relative_to(PACKAGE))
)
def test_the_product_imports_neither_tests_nor_pytest(path: Path) -> None:
    roots = {m.split('.')[0] for m in imported(path)}
    assert roots.isdisjoint({'tests', 'pytest', '_pytest', 'hypothesis'}), path
