"""Imports run one way, by package and by module, and every package has its place in the layers.

import-linter (`make contracts`) checks the layers contract of pyproject.toml: each top-level
package imports only those listed below it, and the pure decision core (domain up to engine)
reads no clock and does no I/O. This module checks what import-linter cannot:

- every top-level module or package appears in the contract, so a new adapter cannot slip in
  unlisted (import-linter ignores what the contract does not name);
- inside every package, its sub-packages and modules import one another one way only (a cycle
  between two sub-packages fails even when no module imports itself through others);
- no module imports, directly or through others, a module that imports it (type-checking
  imports included): where two need each other, what both need lives in a third below them;
- no module imports another module's private name (tests and benchmarks included), and no
  folder holds more than `MOST_MODULES` modules side by side (a longer list wants sub-packages);
- the product never imports the test suite or pytest: the development cluster
  (`llmscaler.devcluster`) that the tests share with the demo lives in the package.
"""

from __future__ import annotations

import ast
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

from tests.support.paths import ROOT

PACKAGE = ROOT / 'src' / 'llmscaler'
MOST_MODULES = 20
"""Modules side by side in one folder beyond which a folder hides its structure."""


def imported(path: Path) -> set[str]:
    """Every name `path` imports, dotted: `from a import b` gives `a` and `a.b`."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f'{node.module}.{alias.name}' for alias in node.names)
    return names


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


def cycles(edges: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node, each sorted (Tarjan)."""
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        order[node] = low[node] = len(order)
        stack.append(node)
        for target in sorted(edges.get(node, ())):
            if target not in order:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], order[target])
        if low[node] == order[node]:
            group = []
            while (top := stack.pop()) != node:
                group.append(top)
            if group:
                found.append(sorted([*group, node]))

    for node in sorted(edges):
        if node not in order:
            visit(node)
    return sorted(found)


def import_cycles(package: Path, name: str = 'llmscaler') -> list[list[str]]:
    """The groups of modules that import one another, directly or through others (every import
    counts, those for type checking only and those inside functions too)."""
    known = modules(package, name)
    return cycles(
        {module: module_imports(path, known) - {module} for module, path in known.items()}
    )


def package_cycles(package: Path, name: str = 'llmscaler') -> list[list[str]]:
    """Inside every package, the groups of its children (modules, and sub-packages taken whole)
    that import one another."""
    known = modules(package, name)
    packages = [m for m, path in known.items() if path.name == '__init__.py']
    found = []
    for parent in packages:
        prefix = f'{parent}.'

        def child(module: str, prefix: str = prefix) -> str | None:
            if not module.startswith(prefix):
                return None
            return prefix + module[len(prefix) :].split('.')[0]

        edges: dict[str, set[str]] = {}
        for module, path in known.items():
            source = child(module)
            if source is None:
                continue
            for target in module_imports(path, known):
                other = child(target)
                if other is not None and other != source:
                    edges.setdefault(source, set()).add(other)
        found.extend(cycles(edges))
    return sorted(found)


def layers() -> list[str]:
    """The packages and modules the layers contract names, highest first."""
    contracts = tomllib.loads((ROOT / 'pyproject.toml').read_text())['tool']['importlinter']
    (contract,) = [c for c in contracts['contracts'] if c['type'] == 'layers']
    return [name.strip() for layer in contract['layers'] for name in layer.split('|')]


def test_every_top_level_module_and_package_has_a_layer() -> None:
    tops = {p.name.removesuffix('.py') for p in PACKAGE.iterdir() if p.suffix == '.py'}
    tops |= {p.name for p in PACKAGE.iterdir() if (p / '__init__.py').is_file()}
    listed = layers()
    assert len(listed) == len(set(listed))
    assert sorted(f'llmscaler.{t}' for t in tops if not t.startswith('__')) == sorted(listed)


def test_the_decision_core_is_the_bottom_of_the_layers() -> None:
    core = ['engine', 'policies', 'enforce', 'optimize', 'analyze', 'config', 'domain']
    assert layers()[-len(core) :] == [f'llmscaler.{name}' for name in core]


@pytest.mark.parametrize(
    'path', sorted(PACKAGE.rglob('*.py')), ids=lambda p: str(p.relative_to(PACKAGE))
)
def test_the_product_imports_neither_tests_nor_pytest(path: Path) -> None:
    roots = {m.split('.')[0] for m in imported(path)}
    assert roots.isdisjoint({'tests', 'pytest', '_pytest', 'hypothesis'}), path


def test_no_module_imports_a_module_that_imports_it() -> None:
    assert import_cycles(PACKAGE) == []


def test_no_package_imports_a_package_that_imports_it() -> None:
    assert package_cycles(PACKAGE) == []


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


def test_the_package_check_sees_two_sub_packages_that_need_each_other(tmp_path: Path) -> None:
    package = tmp_path / 'pkg'
    for sub in ('', 'x', 'y'):
        (package / sub).mkdir(exist_ok=True)
        (package / sub / '__init__.py').write_text('')
    # No module imports itself through others, but x needs y and y needs x.
    (package / 'x' / 'a.py').write_text('from pkg.y import b\n')
    (package / 'y' / 'b.py').write_text('thing = 1\n')
    (package / 'y' / 'c.py').write_text('from pkg.x import d\n')
    (package / 'x' / 'd.py').write_text('thing = 2\n')
    assert import_cycles(package, 'pkg') == []
    assert package_cycles(package, 'pkg') == [['pkg.x', 'pkg.y']]


def private_imports(path: Path) -> list[str]:
    """`module.name` for every private name `path` imports from another module."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found += [
                f'{node.module}.{alias.name}'
                for alias in node.names
                if alias.name.startswith('_') and not alias.name.startswith('__')
            ]
    return found


@pytest.mark.parametrize(
    'path',
    sorted(
        (*PACKAGE.rglob('*.py'), *(ROOT / 'tests').rglob('*.py'), *(ROOT / 'bench').glob('*.py'))
    ),
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_no_module_imports_a_private_name(path: Path) -> None:
    """Not the product, not its tests, not its benchmarks: a name worth testing or timing from
    outside its module is public."""
    assert private_imports(path) == []


def test_the_private_name_check_sees_one(tmp_path: Path) -> None:
    module = tmp_path / 'm.py'
    module.write_text('from llmscaler.domain.basics import _hidden, shown\n')
    assert private_imports(module) == ['llmscaler.domain.basics._hidden']


def folders(package: Path) -> dict[Path, int]:
    """Each folder of the package and the modules in it (its `__init__` aside)."""
    return {
        folder: sum(1 for p in folder.glob('*.py') if p.name != '__init__.py')
        for folder in [package, *sorted(p for p in package.rglob('*') if p.is_dir())]
        if (folder / '__init__.py').is_file()
    }


def test_no_folder_holds_more_than_a_screenful_of_modules() -> None:
    crowded = {str(f.relative_to(PACKAGE)): n for f, n in folders(PACKAGE).items()}
    assert {f: n for f, n in crowded.items() if n > MOST_MODULES} == {}
