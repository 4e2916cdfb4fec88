"""bench/cycle.py: a small cluster's cycles run to the end on either backend, and a real backend
that is not built is refused with one line and status 2.

Sizes are small and nothing is timed: the figures are the benchmark's, not the test's. On the
real control plane the test is skipped without the binaries, and fails with CI=true
(`need_control_plane`).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.conftest import need_control_plane
from tests.support.paths import ROOT


def run_bench(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`python bench/<argv>` from the repository's root, as `make bench` runs it."""
    return subprocess.run(
        [sys.executable, *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, **(env or {})},
        timeout=280,
    )


def bench_output(*argv: str) -> str:
    """What the benchmark printed; fails the test with its standard error when it fails."""
    done = run_bench(*argv)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.fixture(params=('fake', 'real'))
def backend(request: pytest.FixtureRequest) -> str:
    if request.param == 'real':
        need_control_plane()
    return str(request.param)


def test_three_models_run_their_cycles_and_write_every_status_first(backend: str) -> None:
    printed = bench_output('bench/cycle.py', '--models', '3', '--backend', backend)
    assert printed.startswith(
        'backend: fake kube-apiserver' if backend == 'fake' else 'backend: real control plane'
    )
    assert 'variants: 9  pods: 12  models: 3\n' in printed
    # The first cycle of either run writes the status of every VA: the controller reached the
    # API server, read every VA and Deployment, and was allowed to write.
    for label in ('as shipped', 'lastRunTime every cycle (before)'):
        written = re.search(rf'status PATCHes per cycle, {re.escape(label)}: \[(\d+),', printed)
        assert written is not None, printed
        assert written[1] == '9'
    assert 'ratio steady cycle / baseline: ' in printed


def test_a_real_backend_that_is_not_built_is_refused_in_one_line(tmp_path: Path) -> None:
    done = run_bench(
        'bench/cycle.py',
        '--backend',
        'real',
        env={'LLMSCALER_TOOLS_CACHE': str(tmp_path / 'empty')},
    )
    assert done.returncode == 2
    assert done.stdout == ''
    assert done.stderr.startswith('cycle.py: --backend real needs the control plane built')
    assert done.stderr.count('\n') == 1
