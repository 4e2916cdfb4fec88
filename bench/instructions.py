"""Benchmark: instructions per `decide()` (cachegrind), against a baseline in the same run.

Why: `bench/decide.py` times one call, and on a shared virtual machine two runs of the same code
differ by 10 % or more, which hides changes of a few percent. The number of machine instructions
a call executes does not depend on the neighbours: counted by cachegrind, it repeats to within a
few thousandths when the hash seed is fixed. It is not the time (it ignores cache misses and
how many instructions a cycle retires), so it is a figure to compare two versions of the code
on, beside the timed benchmark, not instead of it.

Each case runs in its own process under `valgrind --tool=cachegrind --cache-sim=no`, twice: once
building its inputs and making its warm-up call, once more doing the same and then `--calls`
calls; the difference over `--calls` is one call's count. The baseline is measured the same way:
`json.dumps` of the snapshot's replica records, as in bench/decide.py. The cases are those of
bench/decide.py, on `--models` models (100 by default: a call under cachegrind runs about fifty
times slower than natively).

Run: `.venv/bin/python bench/instructions.py [--models N] [--calls K] [--only slo]`; needs
valgrind (`apt-get install -y valgrind`); without it, it says so and exits with status 2.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import decide as decide_bench
from llmscaler.engine import decide

CASES = ('baseline', *decide_bench.CASES)
_REFS = re.compile(r'I\s+refs:\s+([\d,]+)')


def call_of(case: str, *, models: int) -> Callable[[], object]:
    """The call a case measures, its inputs built (and, for a warm case, its state)."""
    if case == 'baseline':
        snapshot = decide_bench.build(models=models, replicas=10)
        records = [dataclasses.astuple(r) for r in snapshot.replicas]
        return lambda: json.dumps(records)
    config, snapshot, state = decide_bench.inputs(case, models=models, replicas=10)
    return lambda: decide(snapshot=snapshot, config=config, state=state, now=decide_bench.NOW)


def child(case: str, *, models: int, calls: int) -> None:
    once = call_of(case, models=models)
    once()  # the warm-up call: imports and caches filled, in both runs
    for _ in range(calls):
        once()


def counted(case: str, *, models: int, calls: int, valgrind: str) -> int:
    """Instructions of one process running `child(case, ...)` under cachegrind."""
    with tempfile.TemporaryDirectory() as scratch:
        command = [
            valgrind,
            '--tool=cachegrind',
            '--cache-sim=no',
            f'--cachegrind-out-file={Path(scratch) / "out"}',
            sys.executable,
            __file__,
            '--child',
            case,
            '--models',
            str(models),
            '--calls',
            str(calls),
        ]
        env = {**os.environ, 'PYTHONHASHSEED': '0'}
        done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    found = _REFS.search(done.stderr)
    if done.returncode != 0 or found is None:
        raise SystemExit(f'cachegrind failed on {case!r}: {done.stderr.strip()[-400:]}')
    return int(found.group(1).replace(',', ''))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--models', type=int, default=100)
    parser.add_argument('--calls', type=int, default=2)
    parser.add_argument('--only', default='', help='only the cases whose label contains this')
    parser.add_argument('--child', choices=CASES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        child(args.child, models=args.models, calls=args.calls)
        return 0
    if args.models < 1 or args.calls < 1:
        print('bench/instructions.py: --models and --calls must be at least 1', file=sys.stderr)
        return 2
    valgrind = shutil.which('valgrind')
    if valgrind is None:
        print(
            'bench/instructions.py: needs valgrind (apt-get install -y valgrind)', file=sys.stderr
        )
        return 2
    print(
        f'{args.models} models x 3 variants x 10 replicas; instructions per call '
        f'(cachegrind, {args.calls} calls after a warm-up, hash seed 0)'
    )
    per_call: dict[str, float] = {}
    for case in CASES:
        if case != 'baseline' and args.only not in case:
            continue
        warm_up = counted(case, models=args.models, calls=0, valgrind=valgrind)
        total = counted(case, models=args.models, calls=args.calls, valgrind=valgrind)
        per_call[case] = (total - warm_up) / args.calls
        ratio = per_call[case] / per_call['baseline']
        print(f'{case:24s}: {per_call[case] / 1e6:9.1f} M instructions  ({ratio:5.2f}x baseline)')
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
