"""Which compiled copy of the replica engine, if any, the simulator imports in place of its source.

Why: the replica engine (`llmscaler.sim.vllm`: the fast and the reference engine, the prefix
cache, the histograms) is where a simulation spends most of its time, one Python call per step
and per request. The same modules compiled by mypyc run the same code about 1.7 times as fast
(bench/simulate.py) and give the same results to the last bit (the tests compare whole runs). A
compiled copy is built once (`llmscaler.sim.native.build`, `make native`) into a cache outside
the work tree, in a folder named after a hash of the engine's sources and of the interpreter: a
copy built from other sources is never loaded, so editing a module can never leave an older
compiled copy running in its place; it runs as Python until it is built again.

`search_path` is called by `llmscaler.sim.vllm` when it is first imported: it loads the copy's
shared library and puts the copy's folder in front of the package's own, so that Python finds
each compiled module before its source. Nothing else changes: the modules keep their names,
their classes pickle as before, and a module without a compiled copy is imported from source.

`LLMSCALER_NATIVE` chooses: `auto` (the default) loads the copy built for these sources when
there is one; `off` imports every module from source (to profile or to debug the engine in
Python). The folder is `$LLMSCALER_NATIVE_CACHE`, else `$XDG_CACHE_HOME/llmscaler/native`, else
`~/.cache/llmscaler/native`.

What fails: another value of `LLMSCALER_NATIVE` raises `ValueError` when the engine is first
imported (`problem` lets a command report it as a usage error before it imports anything); a
copy whose shared library does not load raises the import's error, not a fallback to source.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import os
import platform
import sys
from pathlib import Path

from llmscaler import user_cache

ENV = 'LLMSCALER_NATIVE'
"""The environment variable that turns the compiled engine off."""

CACHE_ENV = 'LLMSCALER_NATIVE_CACHE'
"""The environment variable naming the cache folder."""

MODES = ('auto', 'off')

PACKAGE = 'llmscaler.sim.vllm'
"""The package compiled."""

GROUP = 'llmscaler_engine'
"""mypyc's name for the compiled group; its shared library is the module `GROUP__mypyc`."""

LIBRARY = f'{GROUP}__mypyc{importlib.machinery.EXTENSION_SUFFIXES[0]}'
"""The shared library's file name, at the top of a copy's folder."""

SOURCES = Path(__file__).resolve().parent.parent / 'vllm'
"""The package's sources: every module but its `__init__` is compiled."""


def problem() -> str | None:
    """What is wrong with `LLMSCALER_NATIVE`, in one line, or None."""
    value = os.environ.get(ENV, 'auto')
    if value in MODES:
        return None
    return f'{ENV} must be one of {", ".join(MODES)}, got {value[:40]!r}'


def modules() -> list[Path]:
    """The package's modules that are compiled, by name."""
    return sorted(path for path in SOURCES.glob('*.py') if path.name != '__init__.py')


def key() -> str:
    """The hash that names a compiled copy: the modules' names and contents, the interpreter."""
    digest = hashlib.sha256()
    digest.update(f'{sys.implementation.cache_tag} {platform.machine()}\0'.encode())
    for path in modules():
        digest.update(path.name.encode() + b'\0' + path.read_bytes() + b'\0')
    return digest.hexdigest()[:24]


def cache_root() -> Path:
    """Where compiled copies are kept (the module docstring)."""
    return user_cache.folder(variable=CACHE_ENV, name='native')


def directory() -> Path:
    """The folder of the copy built from these sources (which may not exist)."""
    return cache_root() / key()


def package_folder(root: Path) -> Path:
    """Where the package's compiled modules are under a copy's folder."""
    return root.joinpath(*PACKAGE.split('.'))


def library(root: Path) -> Path | None:
    """The copy's shared library under `root`, if it is there."""
    found = root / LIBRARY
    return found if found.is_file() else None


def search_path(*, package: list[str]) -> list[str]:
    """The package's `__path__`: the copy built from these sources in front when it is on (the
    module docstring), else `package` as it is."""
    wrong = problem()
    if wrong is not None:
        raise ValueError(wrong)
    if os.environ.get(ENV, 'auto') == 'off':
        return package
    root = directory()
    shared = library(root)
    if shared is None:
        return package
    name = f'{GROUP}__mypyc'
    if name not in sys.modules:
        # The compiled modules import their shared library by this top-level name.
        spec = importlib.util.spec_from_file_location(name, shared)
        if spec is None or spec.loader is None:
            raise ImportError(f'{shared}: not a loadable extension module')
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return [str(package_folder(root)), *package]


def active() -> bool:
    """Whether the engine's modules were imported from a compiled copy."""
    fast = sys.modules.get(f'{PACKAGE}.fast')
    if fast is None:
        importlib.import_module(f'{PACKAGE}.fast')
        fast = sys.modules[f'{PACKAGE}.fast']
    return not str(fast.__file__).endswith('.py')
