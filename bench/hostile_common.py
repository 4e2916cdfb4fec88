"""What the hostile-page benchmarks share: the model, an emulated pod's own page, the
controller's memory, and one measurement in a fresh process.

Why: `bench/hostile_pages.py` and `bench/hostile_scrape.py` measure memory and the event loop,
which whatever ran before in the same process would skew; each measurement runs its script
again in a subprocess that prints one line of JSON, and both compare hostile pages with the page
an emulated vLLM pod serves. The controller's memory is this process's and that of the process
its pod-scraping source keeps its windows in (`llmscaler.collect.in_process`), both within the
Deployment's limit; other children (a benchmark's pod server) are not counted.

What fails: a subprocess that fails raises `subprocess.CalledProcessError` (its output is in it).
"""

from __future__ import annotations

import json
import os
import re
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


def controller_pids() -> list[int]:
    """This process and its children that hold a source's store."""
    pids = [os.getpid()]
    for task in Path('/proc/self/task').iterdir():
        for child in (task / 'children').read_text().split():
            command = Path(f'/proc/{child}/cmdline').read_bytes()
            if b'llmscaler.collect.in_process' in command:
                pids.append(int(child))
    return pids


def memory(field: str) -> int:
    """`VmRSS` or `VmHWM` (each process's peak, summed) of the controller's processes, bytes."""
    total = 0
    for pid in controller_pids():
        status = Path(f'/proc/{pid}/status').read_text()
        found = re.search(rf'^{field}:\s+(\d+) kB$', status, re.MULTILINE)
        assert found is not None
        total += int(found.group(1)) * 1024
    return total


def reset_peak() -> None:
    """Start the controller's processes' peaks (`VmHWM`) afresh from their present memory."""
    for pid in controller_pids():
        Path(f'/proc/{pid}/clear_refs').write_text('5')


def in_subprocess(*, script: str, argv: list[str]) -> dict[str, Any]:
    """Run `script` with `argv` in a fresh interpreter; the JSON of its last line of output."""
    done = subprocess.run(
        [sys.executable, script, *argv], check=True, capture_output=True, text=True, cwd=ROOT
    )
    found: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return found
