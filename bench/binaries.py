"""How long a cold `make binaries` takes: every family built from empty Go caches, timed.

Why: `make test` (and so CI) builds Kubernetes, etcd, Prometheus and helm from their Go modules
the first time it runs on a machine; docs/contributing.md says how long that takes, and this
script is where the figure comes from. It builds into a temporary tools cache with temporary
GOCACHE and GOMODCACHE, so nothing already built or downloaded shortens it, and the machine's
own caches are left as they were.

Run: `python bench/binaries.py` prints the table; `--write-docs` also puts it in
docs/contributing.md between its markers. It takes about as long as it measures (over 20
minutes on two cores) and needs the Go module proxy.

What fails: a failed build stops the script with go's output (exit 1), before anything is
written.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import doc_blocks
from llmscaler.devcluster import binaries

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / 'docs' / 'contributing.md'
MARKERS = ('<!-- binaries-build:begin -->', '<!-- binaries-build:end -->')


def table(timings: list[tuple[binaries.Family, float]], *, cores: int) -> str:
    """The Markdown table of `timings` (family, seconds), with the total."""
    rows = [
        f'| {family.name} {family.version} | {", ".join(family.binaries)} | {seconds / 60:.1f} |'
        for family, seconds in timings
    ]
    total = sum(seconds for _, seconds in timings)
    return '\n'.join(
        [
            f'Cold build on {cores} cores ({platform.machine()}), module downloads included:',
            '',
            '| family | binaries | minutes |',
            '|---|---|---|',
            *rows,
            f'| all | | {total / 60:.1f} |',
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--write-docs', action='store_true', help='update docs/contributing.md')
    args = parser.parse_args(argv)
    timings = []
    with tempfile.TemporaryDirectory(prefix='cold-binaries-') as scratch:
        root = Path(scratch)
        os.environ['LLMSCALER_TOOLS_CACHE'] = str(root / 'tools')
        os.environ['GOCACHE'] = str(root / 'go-build')
        os.environ['GOMODCACHE'] = str(root / 'go-mod')
        try:
            for name in sorted(binaries.FAMILIES):
                family = binaries.FAMILIES[name]
                started = time.monotonic()
                binaries.build(family)
                timings.append((family, time.monotonic() - started))
                print(f'{name}: {timings[-1][1]:.0f} s', flush=True)
        except binaries.BuildFailed as failed:
            print(f'error: {failed}', file=sys.stderr)
            return 1
        finally:
            # The module cache is read-only by design; make it removable.
            for folder, _, _ in os.walk(root):
                os.chmod(folder, 0o755)
    doc_blocks.emit(
        PAGE,
        markers=MARKERS,
        body=table(timings, cores=os.cpu_count() or 1),
        write_docs=args.write_docs,
    )
    return 0


if __name__ == '__main__':
    sys.exit(main())
