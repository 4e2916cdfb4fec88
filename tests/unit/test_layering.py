"""The decision core imports only the core (design.md §1), whatever adapters exist.

import-linter (`make contracts`) checks the contract against the adapters that exist; this test
reads every core module's imports and fails on any `llmscaler.*` import outside the core, so a
new adapter is covered before anyone lists it in pyproject.toml, and checks that every adapter
is listed there. The product never imports the test suite or pytest: the development cluster
(`llmscaler.devcluster`) that the tests share with the demo lives in the package, not in tests/.
And no module imports, directly or through others, a module that imports it (type-checking
imports included): where two need each other, what both need lives in a third below them.
"""

from __future__ import annotations

import ast
import tomllib
from collections.abc import Mapping
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


def modules(package: Path, name: str = 'llmscaler') -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its `__init__`)."""
    found = {}
    for path in sorted(package.rglob('*.py')):
        parts = path.relative_to(package).with_suffix('').parts
        if parts[-1] == '__init__':
            parts = parts[:-1]
        found['.'.join((name, *parts))] = path
    return found


def module_imports(path: Path, known: Mapping[str, Path]) -> set[str]:
    """The modules of `known` that `path` imports: `from a.b import c` imports the module a.b.c
    when there is one (a sibling taken from its package), else a.b."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in known)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                submodule = f'{node.module}.{alias.name}'
                if submodule in known:
                    found.add(submodule)
                elif node.module in known:
                    found.add(node.module)
    return found


def import_cycles(package: Path, name: str = 'llmscaler') -> list[list[str]]:
    """The groups of modules that import one another, directly or through others (every import
    counts, those for type checking only and those inside functions too): the strongly
    connected components of more than one module, each sorted."""
    known = modules(package, name)
    edges = {
        module: sorted(module_imports(path, known) - {module}) for module, path in known.items()
    }
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(module: str) -> None:  # Tarjan's algorithm
        order[module] = low[module] = len(order)
        stack.append(module)
        for target in edges[module]:
            if target not in order:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], order[target])
        if low[module] == order[module]:
            group = []
            while (top := stack.pop()) != module:
                group.append(top)
            if group:
                cycles.append(sorted([*group, module]))

    for module in sorted(known):
        if module not in order:
            visit(module)
    return sorted(cycles)


def test_no_module_imports_a_module_that_imports_it() -> None:
    """Arrows run one way: a module that needs what imports it shares a lower module instead
    (the scenario's types, a protocol of what a process needs of its cluster)."""
    assert import_cycles(PACKAGE) == []


def test_the_cycle_check_sees_a_cycle_through_a_type_checking_import(tmp_path: Path) -> None:
    package = tmp_path / 'pkg'
    package.mkdir()
    (package / '__init__.py').write_text('')
    (package / 'a.py').write_text('from pkg import b\n')
    (package / 'b.py').write_text('from pkg.c import thing\n')
    (package / 'c.py').write_text(
        'from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.a import x\nthing = 1\n'
    )
    (package / 'd.py').write_text('import pkg.a\n')
    assert import_cycles(package, 'pkg') == [['pkg.a', 'pkg.b', 'pkg.c']]
