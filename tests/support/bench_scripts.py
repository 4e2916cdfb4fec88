"""The benchmark scripts of bench/, imported by the tests that check their logic.

Why: bench/ is a folder of scripts, not a package (each is run as `python bench/NAME.py`), so a
test reaches one by its path; this does it once for every test that needs one.
"""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

from tests.support.paths import ROOT

BENCH = ROOT / 'bench'


def load(name: str) -> ModuleType:
    """bench/`name`.py as a module (imported once, under a name of its own so that it never
    stands for another module of that name; its folder on the path, as when it runs)."""
    key = f'bench_script_{name}'
    if key in sys.modules:
        return sys.modules[key]
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location(key, BENCH / f'{name}.py')
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[key] = module
    spec.loader.exec_module(module)
    return module
