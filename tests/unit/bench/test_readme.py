"""The README's `make run` table is what `make run` prints today (bench/readme.py writes it)."""

from __future__ import annotations

import subprocess
import sys

from tests.support.paths import ROOT

SCRIPT = ROOT / 'bench' / 'readme.py'


def test_the_readme_shows_what_make_run_prints() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), '--check'], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
