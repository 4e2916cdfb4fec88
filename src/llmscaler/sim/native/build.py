"""Build the compiled copy of the replica engine for its current sources (`make native`).

Why: `llmscaler.sim.native.engine` loads a copy built from the very sources it would otherwise
import, so a build is needed once per change to the engine and per interpreter; this does it,
or nothing when the copy is there. It compiles every module of `llmscaler.sim.vllm` but its
`__init__` with mypyc (mypy's compiler: the project's type annotations are what it compiles
from) and a C compiler, in a temporary folder of the cache, and moves the result into place
whole: a build interrupted halfway leaves no copy that `engine` would load.

Needs: mypy (with mypyc, the `lint` dependency group), setuptools, a C compiler and the
interpreter's headers (`gcc` and `python3-dev` on Debian). Without them the simulator runs its
engine from source, about 1.7 times slower, with the same results.

What fails: a missing prerequisite or a failed compilation exits with status 1 and the
compiler's last lines on standard error; nothing is left in the cache.

Run: `python -m llmscaler.sim.native.build [--quiet]`.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from llmscaler.sim.native import engine


def build(*, root: Path) -> None:
    """Compile the engine's modules into `root` (which must not exist); raises on failure."""
    # Imported here: only a build needs them, and the package runs without them.
    from mypyc.build import mypycify
    from setuptools import setup

    work = Path(tempfile.mkdtemp(prefix='build-', dir=root.parent))
    try:
        here = Path.cwd()
        os.chdir(work)  # mypy's cache and setuptools' files land here, not in the work tree
        try:
            # mypyc annotates distutils' Extension, setuptools' stubs its vendored copy of
            # distutils: at run time both are setuptools' class.
            extensions: list[Any] = mypycify(
                [str(path) for path in engine.modules()],
                target_dir=str(work / 'c'),
                group_name=engine.GROUP,
            )
            setup(
                name=engine.GROUP,
                ext_modules=extensions,
                script_args=[
                    '--quiet',
                    'build_ext',
                    '--build-lib',
                    str(work / 'lib'),
                    '--build-temp',
                    str(work / 'obj'),
                ],
            )
        finally:
            os.chdir(here)
        if engine.library(work / 'lib') is None:
            raise RuntimeError(f'the build left no shared library in {work / "lib"}')
        os.replace(work / 'lib', root)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or '').splitlines()[0])
    parser.add_argument('--quiet', action='store_true', help='print nothing when up to date')
    args = parser.parse_args(argv)
    root = engine.directory()
    if engine.library(root) is not None:
        if not args.quiet:
            print(f'compiled engine up to date: {root}')
        return 0
    root.parent.mkdir(parents=True, exist_ok=True)
    output = io.StringIO()
    try:
        with contextlib.redirect_stdout(output):
            build(root=root)
    except (Exception, SystemExit) as error:  # setuptools exits on a compiler's failure
        lines = output.getvalue().strip().splitlines()[-20:]
        print('\n'.join([*lines, f'compiled engine not built: {error}']), file=sys.stderr)
        return 1
    print(f'compiled engine built: {root}')
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
