"""What the hostile-page benchmarks share: the model, an emulated pod's own page, and one
measurement in a fresh process.

Why: `bench/hostile_pages.py` and `bench/hostile_scrape.py` measure memory and the event loop,
which whatever ran before in the same process would skew; each measurement runs its script
again in a subprocess that prints one line of JSON, and both compare hostile pages with the page
an emulated vLLM pod serves.

What fails: a subprocess that fails raises `subprocess.CalledProcessError` (its output is in it).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

MODEL = 'meta-llama/Llama-3.1-8B-Instruct'
ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / 'docs' / 'reliability.md'


def own_page() -> bytes:
    """The `/metrics` page of an idle emulated vLLM pod of `MODEL` (41 KiB)."""
    from llmscaler.emulate.fleet import Emulator
    from llmscaler.sim.hardware.presets import preset

    emulator = Emulator(
        model_name=MODEL,
        namespace='llm',
        spec=preset(name='llama-3.1-8b-l4'),
        replicas=1,
        clock=time.monotonic,
    )
    page = emulator.metrics_page(slot=0)
    assert page is not None
    return page.encode()


def in_subprocess(*, script: str, argv: list[str]) -> dict[str, Any]:
    """Run `script` with `argv` in a fresh interpreter; the JSON of its last line of output."""
    done = subprocess.run(
        [sys.executable, script, *argv], check=True, capture_output=True, text=True, cwd=ROOT
    )
    found: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return found
