"""Benchmark: the controller's memory while it scrapes one hostile page, shape by shape.

What is measured: for each page of `llmscaler.emulate.hostile` (the shapes found, each over a cap,
and pages just within every cap), a fresh subprocess builds the pod-scraping source as the
controller does (default `ScrapeConfig`), scrapes an example vLLM page once (its idle state),
builds the hostile page, resets the peak resident memory of the controller's processes (its own
and its store's, `hostile_common.memory`) with `/proc/<pid>/clear_refs`, then scrapes the
hostile page three times and computes a reading. The figure is their peak resident memory above
that idle state (`VmHWM` − `VmRSS`, summed, MiB), with the time the three scrapes took; the page
is served in process by an httpx transport (`fuzz_pages_serve.InProcess`), so the source's own
fetch code runs, its size cap included, without sockets, and the server's copy of the page is
part of the idle state.

Named baseline: the exposition parser before its caps (`collect/exposition.py` at the commit
`BASELINE`, read with `git show`), parsing the same page once in the same way, measured the same
way; for the shapes found it is what the controller paid (1.25 GB for the first).

Goal: at most 300 MiB above idle for every shape (the shipped Deployment limits the controller to
1 GiB).

Usage: python bench/hostile_pages.py [--write-docs]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import doc_blocks
from hostile_common import DOCS, MODEL, ROOT, in_subprocess, memory, own_page, reset_peak

MARKERS = ('<!-- hostile-pages:begin -->', '<!-- hostile-pages:end -->')
BASELINE = '2174a83'
"""The last commit whose exposition parser had no caps."""
GOAL_MIB = 300
MiB = 1024 * 1024


async def scrape_one(name: str) -> dict[str, object]:
    """In the subprocess: idle, then the hostile page scraped three times."""
    import httpx

    from fuzz_pages_content import Answer
    from fuzz_pages_serve import InProcess
    from llmscaler.collect.readings import ModelScope
    from llmscaler.collect.scrape.source import PodScrapeSource, ScrapeConfig, ScrapeTarget
    from llmscaler.emulate.hostile import PAGES

    url = 'http://pod.invalid/metrics'
    server = InProcess()
    server.answers[url] = Answer(body=own_page())
    target = ScrapeTarget(namespace='llm', pod='pod-0', url=url, model_name=MODEL)
    client = httpx.AsyncClient(transport=server)
    source = PodScrapeSource(config=ScrapeConfig(), targets_fn=lambda: [target], client=client)
    scope = (ModelScope(model_id=MODEL, namespace='llm'),)
    await source.scrape(now=1000.0)
    await source.read(scope=scope, now=1000.0)
    hostile = PAGES[name].page(model=MODEL).encode()
    server.answers[url] = Answer(body=hostile)
    idle = memory('VmRSS')
    reset_peak()
    started = time.perf_counter()
    errors = []
    for i in range(3):
        errors = await source.scrape(now=1015.0 + 15 * i)
    took = time.perf_counter() - started
    await source.read(scope=scope, now=1045.0)
    peak = memory('VmHWM')
    refusals = [e.message.partition(' refused: ')[2] for e in errors if ' refused: ' in e.message]
    await source.aclose()
    return {
        'page': len(hostile),
        'idle': idle,
        'above': peak - idle,
        'seconds': took,
        'outcome': refusals[0] if refusals else f'read: {source.series_count} series kept',
    }


def baseline_one(name: str, module: Path) -> dict[str, object]:
    """In the subprocess: the parser before the caps parsing the page once."""
    import importlib.util

    from llmscaler.emulate.hostile import PAGES

    spec = importlib.util.spec_from_file_location('baseline_exposition', module)
    assert spec is not None
    assert spec.loader is not None
    exposition = importlib.util.module_from_spec(spec)
    sys.modules['baseline_exposition'] = exposition
    spec.loader.exec_module(exposition)
    hostile = PAGES[name].page(model=MODEL).encode()
    parser = exposition.Parser(families=exposition.VLLM_FAMILIES)
    idle = memory('VmRSS')
    reset_peak()
    started = time.perf_counter()
    page = parser.parse(page=hostile.decode())
    took = time.perf_counter() - started
    return {
        'above': memory('VmHWM') - idle,
        'seconds': took,
        'series': len(page.samples),
    }


def table() -> str:
    from llmscaler.emulate.hostile import PAGES

    with tempfile.TemporaryDirectory() as folder:
        module = Path(folder) / 'exposition_baseline.py'
        module.write_text(
            subprocess.run(
                ['git', 'show', f'{BASELINE}:src/llmscaler/collect/exposition.py'],
                check=True,
                capture_output=True,
                text=True,
                cwd=ROOT,
            ).stdout
        )
        rows = []
        worst = 0.0
        for name, shape in PAGES.items():
            now = in_subprocess(script=__file__, argv=['--one', name])
            before = in_subprocess(script=__file__, argv=['--baseline', name, str(module)])
            above = now['above'] / MiB
            worst = max(worst, above)
            rows.append(
                f'| {name} ({shape.what}) | {shape.kind} `{shape.cap}` | '
                f'{now["page"] / MiB:.1f} | {now["outcome"]} | {above:.0f} | '
                f'{now["seconds"]:.2f} | {before["above"] / MiB:.0f} | {before["seconds"]:.2f} |'
            )
    head = [
        f'Peak resident memory above idle (MiB) scraping one hostile page three times, and the '
        f'time the three scrapes took (s); baseline: the parser before its caps '
        f'(commit {BASELINE}) parsing the page once. Goal: ≤ {GOAL_MIB} MiB above idle, '
        f'{"met" if worst <= GOAL_MIB else "not met"} (worst {worst:.0f} MiB).',
        '',
        '| page | cap | MiB | outcome | peak above idle | s (3 scrapes) '
        '| baseline: peak above idle | baseline: s (1 parse) |',
        '|---|---|---|---|---|---|---|---|',
    ]
    return '\n'.join(head + rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or '').splitlines()[0])
    parser.add_argument('--write-docs', action='store_true', help='write docs/reliability.md')
    parser.add_argument('--one', help=argparse.SUPPRESS)
    parser.add_argument('--baseline', nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(asyncio.run(scrape_one(args.one))))
        return
    if args.baseline:
        print(json.dumps(baseline_one(args.baseline[0], Path(args.baseline[1]))))
        return
    doc_blocks.emit(DOCS, markers=MARKERS, body=table(), write_docs=args.write_docs)


if __name__ == '__main__':
    main()
