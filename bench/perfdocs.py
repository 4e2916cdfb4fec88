"""Regenerate the figures of docs/performance.md from runs of the benchmarks.

Why: a figure pasted into a page stays there when the code under it changes; one written by the
benchmark that measured it can be rerun. Each benchmark of `BENCHES` runs in its own process
(as `make bench` runs it), and what it prints on standard output goes, whole, into the page
between its pair of markers `<!-- perf:KEY:begin -->` and `<!-- perf:KEY:end -->`, under a line
that says when, on what machine and with which command it ran. The prose around the blocks says
what each benchmark measures and how to read it; it quotes no figure of its own.

Timed figures depend on the machine and on its neighbours, so they cannot be checked against a
rerun; `--check` checks what can be: the page holds one block per benchmark of `BENCHES`, each
made by the command listed here (a benchmark added, removed or rerun with other arguments
without the page being regenerated fails it; tests/unit/bench/test_perfdocs.py runs it).

The controller's benchmarks (`bench/cycle.py`, `bench/from_zero.py`) run twice: against the
in-repo fake kube-apiserver and against the real control plane (`--backend real`: etcd,
kube-apiserver, kube-controller-manager and kube-scheduler built by `make binaries`), each block
with its own baseline.

What fails: a benchmark that exits with a status other than 0 stops the run with its standard
error, before the page is written (a page is never half regenerated). A benchmark that needs a
program (`bench/instructions.py`: valgrind) that is not installed, or the real control plane
when its binaries are not built, stops the run before any benchmark runs, with a one-line error
and status 2.

Run: `.venv/bin/python bench/perfdocs.py [--only KEY[,KEY...]] [--write-docs | --check]`
(all of them take about half an hour on two cores, two thirds of it the controller's benchmarks
on the real control plane, whose seeding is bound by kube-controller-manager's request rate;
`make perf-docs`).
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import doc_blocks
import realproc

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / 'docs' / 'performance.md'


@dataclass(frozen=True)
class Bench:
    """One benchmark run: its key in the page's markers and its arguments after `python`."""

    key: str
    argv: tuple[str, ...]
    needs: str = ''
    """A program the benchmark runs under, checked before any benchmark runs."""
    control_plane: bool = False
    """Runs against the real control plane, whose binaries are checked before any benchmark."""

    @property
    def command(self) -> str:
        return ' '.join(('.venv/bin/python', *self.argv))


BENCHES = (
    Bench('decide', ('bench/decide.py',)),
    Bench('instructions', ('bench/instructions.py',), needs='valgrind'),
    Bench('limited', ('bench/limited.py',)),
    Bench('simulate', ('bench/simulate.py', '--case', 'all')),
    Bench('sweep', ('bench/sweep.py',)),
    Bench('tune', ('bench/tune.py',)),
    Bench('tune-diurnal', ('bench/tune.py', '--case', 'diurnal-days')),
    Bench('metrics', ('bench/metrics.py',)),
    Bench('cycle', ('bench/cycle.py',)),
    Bench('cycle-real', ('bench/cycle.py', '--backend', 'real'), control_plane=True),
    Bench('from-zero-pools', ('bench/from_zero.py', '--mode', 'pools')),
    Bench(
        'from-zero-pools-real',
        ('bench/from_zero.py', '--mode', 'pools', '--backend', 'real'),
        control_plane=True,
    ),
    Bench('from-zero-selector', ('bench/from_zero.py', '--mode', 'selector')),
    Bench(
        'from-zero-selector-real',
        ('bench/from_zero.py', '--mode', 'selector', '--backend', 'real'),
        control_plane=True,
    ),
    Bench('informer', ('bench/informer.py',)),
)
_BLOCK = re.compile(
    r'<!-- perf:(?P<key>[a-z-]+):begin -->\n(?P<body>.*?)<!-- perf:(?P=key):end -->', re.DOTALL
)
_COMMAND = re.compile(r'^`(?P<command>[^`]+)`', re.MULTILINE)


def machine() -> str:
    """What the figures were measured on: cores, processor model, Python."""
    model = ''
    try:
        for line in Path('/proc/cpuinfo').read_text(encoding='utf-8').splitlines():
            if line.startswith('model name'):
                model = line.split(':', 1)[1].strip()
                break
    except OSError:
        model = platform.processor()
    cores = os.cpu_count() or 0
    python = f'{platform.python_implementation()} {platform.python_version()}'
    return f'{cores} cores ({model or "unknown processor"}), {python}'


def run(bench: Bench) -> str:
    """The block for `bench`: when and where it ran, its command, and what it printed."""
    done = subprocess.run(
        [sys.executable, *bench.argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        env={
            **os.environ,
            'COLUMNS': '200',
            'NO_COLOR': '1',
        },
    )
    if done.returncode != 0:
        raise SystemExit(f'{bench.command} exited with {done.returncode}:\n{done.stderr.strip()}')
    printed = [line.rstrip() for line in done.stdout.splitlines()]
    while printed and not printed[-1]:
        printed.pop()
    day = datetime.datetime.now(tz=datetime.UTC).date().isoformat()
    return '\n'.join(
        [
            f'`{bench.command}`, run by `bench/perfdocs.py` on {day}, {machine()}:',
            '',
            '```text',
            *printed,
            '```',
        ]
    )


def blocks(text: str) -> dict[str, str]:
    """The page's generated blocks by key."""
    return {m['key']: m['body'] for m in _BLOCK.finditer(text)}


def problems(text: str) -> list[str]:
    """What is wrong with the page's blocks against `BENCHES` (empty when nothing is)."""
    found = blocks(text)
    wrong = [f'no block for {b.key} (`{b.command}`)' for b in BENCHES if b.key not in found]
    known = {b.key: b for b in BENCHES}
    wrong += [f'a block for {key}, which is no benchmark here' for key in found if key not in known]
    for key, body in sorted(found.items()):
        if key not in known:
            continue
        command = _COMMAND.search(body)
        if command is None or command['command'] != known[key].command:
            wrong.append(f'the block for {key} was not made by `{known[key].command}`')
        elif '```text\n' not in body:
            wrong.append(f'the block for {key} holds no output')
    return wrong


def splice(text: str, key: str, body: str) -> str:
    """`text` with the block of `key` replaced by `body`."""
    markers = (f'<!-- perf:{key}:begin -->', f'<!-- perf:{key}:end -->')
    return doc_blocks.replace(text, markers=markers, body=body, where=DOC.name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or '').splitlines()[0])
    parser.add_argument('--only', default='', help='comma-separated keys (default: all)')
    what = parser.add_mutually_exclusive_group()
    what.add_argument('--write-docs', action='store_true', help=f'write {DOC.name}')
    what.add_argument('--check', action='store_true', help='check the blocks; run nothing')
    args = parser.parse_args(argv)
    text = DOC.read_text(encoding='utf-8')
    if args.check:
        wrong = problems(text)
        for line in wrong:
            print(f'{DOC.relative_to(ROOT)}: {line}')
        return 1 if wrong else 0
    keys = [k for k in args.only.split(',') if k]
    unknown = sorted(set(keys) - {b.key for b in BENCHES})
    if unknown:
        parser.error(f'unknown keys: {", ".join(unknown)}')
    chosen = [b for b in BENCHES if not keys or b.key in keys]
    absent = realproc.missing() if any(b.control_plane for b in chosen) else []
    for bench in chosen:
        if bench.needs and shutil.which(bench.needs) is None:
            parser.error(
                f'{bench.key} needs {bench.needs} (apt-get install -y {bench.needs}); '
                f'install it, or leave {bench.key} out with --only'
            )
        if bench.control_plane and absent:
            parser.error(
                f'{bench.key} needs the real control plane (make binaries; not built: '
                f'{", ".join(absent)}); build it, or leave {bench.key} out with --only'
            )
    made = {}
    for bench in chosen:
        print(f'running {bench.command}', file=sys.stderr)
        made[bench.key] = run(bench)
        if not args.write_docs:
            print(made[bench.key])
    if args.write_docs:
        for key, body in made.items():
            text = splice(text, key, body)
        DOC.write_text(text, encoding='utf-8')
        print(f'wrote {DOC.relative_to(ROOT)}', file=sys.stderr)
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
