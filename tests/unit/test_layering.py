"""The decision core imports only the core (design.md §1), whatever adapters exist.

import-linter (`make contracts`) checks the contract against the adapters that exist; this test
reads every core module's imports and fails on any `llmscaler.*` import outside the core, so a
new adapter is covered before anyone lists it in pyproject.toml.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / 'src' / 'llmscaler'
CORE = ('model', 'config', 'vllm_args', 'analyze', 'optimize', 'enforce', 'engine')
NO_CLOCK = ('analyze', 'optimize', 'enforce', 'engine', 'model')
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
