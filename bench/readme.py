"""Regenerate the README's `make run` figures from a real run.

The README shows what `make run` prints. Pasted, that table drifts the moment the simulator's
replica model or a policy changes; so this script runs `llmscaler simulate` on the built-in
scenario exactly as `make run` does, puts its table between the README's markers and copies the
replica plot to docs/img. `--check` only compares and exits 1 when the README differs (a unit
test runs it).

Run: `.venv/bin/python bench/readme.py` (about 10 s), or `--check`.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import doc_blocks

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / 'README.md'
PLOT = ROOT / 'docs' / 'img' / 'default-replicas.png'
MARKERS = ('<!-- make-run:begin -->', '<!-- make-run:end -->')


def make_run(*, out: Path) -> str:
    """The README block: what `make run` prints from the table on, the report path as `out/`."""
    done = subprocess.run(
        [sys.executable, '-m', 'llmscaler', 'simulate', '--out', str(out), '--no-progress'],
        capture_output=True,
        text=True,
        check=True,
        # The table is printed at its natural width whatever the terminal; fix it all the same.
        env={**os.environ, 'COLUMNS': '200', 'NO_COLOR': '1'},
    )
    lines = done.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith('SLO:'))
    body = [line.rstrip() for line in lines[start:] if not line.startswith('report:')]
    while body and not body[-1]:
        body.pop()
    return '\n'.join(['```', '$ make run', *body, 'report: out/report.html', '```'])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--check', action='store_true', help='compare only; exit 1 if stale')
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / 'out'
        block = make_run(out=out)
        text = README.read_text(encoding='utf-8')
        fresh = doc_blocks.replace(text, markers=MARKERS, body=block, where=README.name)
        if args.check:
            if fresh != text:
                print('README.md: the make-run table is stale; run python bench/readme.py')
                return 1
            return 0
        README.write_text(fresh, encoding='utf-8')
        shutil.copyfile(out / 'replicas.png', PLOT)
    print(f'wrote {README.relative_to(ROOT)} and {PLOT.relative_to(ROOT)}')
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
