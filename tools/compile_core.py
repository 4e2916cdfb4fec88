"""Compile the decision core's analyzers and optimizers with mypyc, into a tree of their own.

Why: one `decide()` over 1,000 models on the SLO path spends its time in many small pieces of
arithmetic and bookkeeping per model and variant (docs/performance.md); the interpreter's cost
per operation is most of it. mypyc compiles the same typed source to C, with the same results
(tests/unit/test_compiled.py compares every decision field of both builds byte for byte).

What it builds: OUT is a full copy of `src/llmscaler` with an extension module beside each
compiled module's source (every module of `llmscaler/analyze` and `llmscaler/optimize` except
those in `INTERPRETED`), and mypyc's shared runtime at OUT's top level. `PYTHONPATH=OUT` runs
the compiled core; the container image overlays OUT on the installed package (Dockerfile).
OUT/SOURCES holds the sha256 of this tool and of every source file it was built from; `--check`
says whether OUT is current, and the tests refuse a stale tree.

Never into `src/`: an extension module beside a source file is imported instead of it, so an
edit to the source would silently not run.

What fails: mypyc's or the C compiler's errors stop the build (exit 1, their output printed);
OUT is replaced only by a complete build. Needs mypy (which ships mypyc), setuptools, a C
compiler and the interpreter's headers.

Usage: python tools/compile_core.py [--out build/compiled] [--check | --list] [--force]
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / 'src' / 'llmscaler'
PACKAGES = ('analyze', 'optimize')
INTERPRETED = frozenset(
    {
        # It judges records whose fields may hold anything (a string where a float belongs); a
        # compiled module refuses such a value at the call instead of judging it.
        'analyze/validity.py',
    }
)
GROUP = 'llmscaler_core'
"""The name of mypyc's shared library (`llmscaler_core__mypyc.*.so` at OUT's top level)."""

SETUP = """\
from setuptools import setup
from mypyc.build import mypycify

setup(
    name='llmscaler-core',
    ext_modules=mypycify({paths!r}, opt_level='3', group_name={group!r}),
)
"""


def compiled_sources() -> tuple[str, ...]:
    """The modules compiled, as paths below `src/` (`llmscaler/analyze/queue_chain.py`)."""
    found = []
    for package in PACKAGES:
        for path in sorted((SOURCE / package).glob('*.py')):
            relative = f'{package}/{path.name}'
            if path.name != '__init__.py' and relative not in INTERPRETED:
                found.append(f'llmscaler/{relative}')
    return tuple(found)


def digest() -> str:
    """The sha256 over the interpreter's extension suffix, this tool and every source file of
    the package (path and content), in name order: a change to any makes a new tree (another
    interpreter would not load these extension modules and would run the sources instead)."""
    suffix = str(sysconfig.get_config_var('EXT_SUFFIX'))
    sha = hashlib.sha256(suffix.encode() + b'\0' + Path(__file__).read_bytes() + b'\0')
    for path in sorted(SOURCE.rglob('*')):
        if path.is_file() and '__pycache__' not in path.parts and path.suffix != '.so':
            sha.update(path.relative_to(SOURCE).as_posix().encode() + b'\0')
            sha.update(path.read_bytes() + b'\0')
    return sha.hexdigest()


def current(out: Path) -> bool:
    stamp = out / 'SOURCES'
    return stamp.is_file() and stamp.read_text().strip() == digest()


def build(out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    stamp = digest()
    # Beside OUT, under the project, so that mypyc type-checks with the project's mypy settings.
    staging = Path(tempfile.mkdtemp(prefix=f'.{out.name}.', dir=out.parent))
    try:
        shutil.copytree(
            SOURCE, staging / 'llmscaler', ignore=shutil.ignore_patterns('__pycache__', '*.so')
        )
        sources = compiled_sources()
        (staging / 'setup.py').write_text(SETUP.format(paths=list(sources), group=GROUP))
        done = subprocess.run(
            [sys.executable, 'setup.py', 'build_ext', '--inplace', '--build-temp', 'tmp'],
            cwd=staging,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            print(done.stdout, file=sys.stderr)
            raise SystemExit(f'compile_core: mypyc failed (exit {done.returncode})')
        for leftover in ('setup.py', 'tmp', 'build', '.mypy_cache'):
            target = staging / leftover
            if target.is_dir():
                shutil.rmtree(target)
            elif target.exists():
                target.unlink()
        missing = [
            s for s in sources if not list((staging / s).parent.glob(f'{Path(s).stem}.*.so'))
        ]
        if missing:
            raise SystemExit(f'compile_core: no extension module built for {", ".join(missing)}')
        (staging / 'SOURCES').write_text(stamp + '\n')
        if out.exists():
            shutil.rmtree(out)
        staging.rename(out)
    finally:
        if staging.exists():
            shutil.rmtree(staging)
    print(f'compile_core: {len(sources)} modules compiled into {out}')


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--out', type=Path, default=ROOT / 'build' / 'compiled')
    parser.add_argument('--check', action='store_true', help='exit 1 unless OUT is current')
    parser.add_argument('--force', action='store_true', help='rebuild even if OUT is current')
    parser.add_argument(
        '--list', action='store_true', help='print the modules compiled; build nothing'
    )
    args = parser.parse_args(argv)
    out = args.out.resolve()
    if args.list:
        for source in compiled_sources():
            print(source.removesuffix('.py').replace('/', '.'))
        return 0
    if args.check:
        if current(out):
            return 0
        print(f'compile_core: {out} is missing or older than src/ (make compiled)', file=sys.stderr)
        return 1
    if args.force or not current(out):
        build(out)
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
