"""Fuzzing: the safety rules hold under bad metrics pages, snapshots, ConfigMaps and VA objects.

Why: the safety rules (docs/decision-core.md, docs/controller.md) promise that bad input (a broken
metrics page, a malformed snapshot, CR or ConfigMap) gets a clear error, keeps the last good state
and never causes a scale-down, a scale-to-zero or a target outside the bounds. Unit tests check the
cases someone thought of; this benchmark feeds each input path hundreds of thousands of mutated
inputs and counts what breaks. It is not part of `make test` (it takes minutes); its figures are in
docs/reliability.md.

Campaigns (each in its own module):

- `pages` (`fuzz_pages`): mutated vLLM and gateway pages through the pod-scraping source,
  attribution, `decide()` and the VA conditions; 100,000 mutated vLLM pages at full size.
- `snapshots` (`fuzz_snapshots`): mutated snapshot files (and some configuration files) through
  `llmscaler decide`, in process and as a real subprocess; 10,000 inputs.
- `configmaps` (`fuzz_configmaps`): mutated and hostile YAML in the three scaling ConfigMaps
  through the live `ConfigWatch.update`, then `decide()` under the configuration in force;
  10,000 inputs.
- `vas` (`fuzz_vas`): mutated VariantAutoscaling objects (and their scale targets and pods)
  through `parse_va`, `build_world`, attribution and `decide()`; 10,000 inputs.

Prints, per campaign: inputs, unexpected exceptions, hangs (inputs that took over 1 s), safety
violations (`fuzz_oracle`: a target below current while a ready replica's metric is missing or
invalid, a target outside [min, max], a scale to zero while requests may be queued, ...) and the
time; then the first offending inputs, cut short, each with the index that replays it alone
(`--campaign NAME --index I`), and a markdown table of the figures. Goal: 0 exceptions, 0 hangs
and 0 violations everywhere. `--write-docs` writes that table into docs/reliability.md.

Seeded and reproducible: `--seed S` (default 1); `--scale F` runs F times the full size;
`--jobs N` splits each campaign over N processes (default: 2 where there are 2 cores), which
changes no count, since an input depends only on (seed, campaign, index).

Usage: python bench/fuzz.py [--seed S] [--scale F] [--jobs N] [--campaign NAME ...] [--index I]
                            [--write-docs]
"""

from __future__ import annotations

import argparse
import itertools
import multiprocessing
import os
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import doc_blocks
import fuzz_configmaps
import fuzz_pages
import fuzz_snapshots
import fuzz_vas
from fuzz_common import HANG_SECONDS, Example, Tally

JOBS = min(2, os.cpu_count() or 1)
"""Processes per campaign by default: the full run takes about five minutes with two."""
DOCS = Path(__file__).resolve().parents[1] / 'docs' / 'reliability.md'
BEGIN, END = '<!-- fuzz figures: begin -->', '<!-- fuzz figures: end -->'


@dataclass(frozen=True, slots=True)
class Campaign:
    full: int
    """Its size at `--scale 1`: inputs, or mutated vLLM pages for `pages`."""
    run: Callable[..., Tally]
    """`run(seed=, indexes=, verbose=)`: the tally of the inputs `indexes`."""
    inputs_for: Callable[..., int] | None = None
    """`inputs_for(seed=, count=)`: inputs that make `count` of the size; None: the same."""


CAMPAIGNS: dict[str, Campaign] = {
    'pages': Campaign(100_000, fuzz_pages.run, fuzz_pages.inputs_for),
    'snapshots': Campaign(10_000, fuzz_snapshots.run),
    'configmaps': Campaign(10_000, fuzz_configmaps.run),
    'vas': Campaign(10_000, fuzz_vas.run),
}


def _slice(job: tuple[str, int, int, int]) -> Tally:
    name, seed, start, stop = job
    return CAMPAIGNS[name].run(seed=seed, indexes=range(start, stop))


def run_campaign(name: str, *, seed: int, scale: float, jobs: int, index: int | None) -> Tally:
    campaign = CAMPAIGNS[name]
    if index is not None:
        return campaign.run(seed=seed, indexes=range(index, index + 1), verbose=True)
    size = max(1, round(campaign.full * scale))
    count = campaign.inputs_for(seed=seed, count=size) if campaign.inputs_for else size
    # Contiguous slices: an input depends only on its index, so the counts do not depend on
    # `jobs` (the pages campaign's warm parsers aside, which start anew in each slice).
    bounds = [count * j // jobs for j in range(jobs + 1)]
    slices = [(name, seed, a, b) for a, b in itertools.pairwise(bounds) if b > a]
    if len(slices) == 1:
        return _slice(slices[0])
    with multiprocessing.get_context('fork').Pool(len(slices)) as pool:
        parts = pool.map(_slice, slices)
    total = Tally(name=name)
    for part in parts:
        total.merge(part)
    return total


def report(tally: Tally) -> str:
    units = f' ({tally.units:,} mutated pages)' if tally.name == 'pages' else ''
    lines = [
        f'{tally.name}: {tally.inputs:,} inputs{units}, {tally.exceptions} unexpected exceptions, '
        f'{tally.hangs} hangs > {HANG_SECONDS:g} s (slowest {tally.slowest:.2f} s, index '
        f'{tally.slowest_index}), '
        f'{tally.violations} safety violations, {tally.seconds:.0f} s'
    ]
    lines.extend(f'  {rule}: {count}' for rule, count in sorted(tally.rules.items()))
    lines.extend(f'  ({what}: {count:,})' for what, count in sorted(tally.notes.items()))
    for example in tally.examples:
        lines.append(f'  [{example.kind}] --campaign {tally.name} --index {example.index}')
        lines.append(f'    {example.what}')
        lines.append(f'    input: {example.data}')
    return '\n'.join(lines)


def table(tallies: list[Tally], *, seed: int, scale: float, jobs: int) -> str:
    processes = 'one process' if jobs == 1 else f'{jobs} processes'
    rows = [
        f'`bench/fuzz.py --seed {seed} --scale {scale:g}'
        f'{f" --jobs {jobs}" if jobs > 1 else ""}`: {platform.python_implementation()} '
        f'{platform.python_version()}, {processes} per campaign.',
        '',
        '| campaign | inputs | unexpected exceptions | hangs > 1 s | slowest input | '
        'safety violations | time |',
        '|---|---|---|---|---|---|---|',
    ]
    for t in tallies:
        inputs = f'{t.inputs:,}' + (f' ({t.units:,} mutated pages)' if t.name == 'pages' else '')
        rows.append(
            f'| `{t.name}` | {inputs} | {t.exceptions} | {t.hangs} | {t.slowest:.2f} s | '
            f'{t.violations} | {t.seconds:.0f} s |'
        )
    found = [t for t in tallies if t.rules or t.examples]
    if found:
        rows += ['', 'Violations by rule, and the first offending input of each kind:', '']
    for t in found:
        rules = ', '.join(f'`{rule}` {count:,}' for rule, count in sorted(t.rules.items()))
        rows.append(f'- `{t.name}`: {rules or "no violation"}')
        rows.extend(
            f'  - {e.kind} (`--campaign {t.name} --index {e.index}`): '
            f'{" ".join(e.what.split())[:220]}'
            for e in _first_of_each_kind(t)
        )
    return '\n'.join(rows)


def _first_of_each_kind(tally: Tally) -> list[Example]:
    first: dict[str, Example] = {}
    for example in tally.examples:
        first.setdefault(example.kind, example)
    return [first[kind] for kind in sorted(first)]


def write_docs(text: str) -> None:
    doc_blocks.write(DOCS, markers=(BEGIN, END), body=text)
    print(f'figures written to {DOCS}')


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--seed', type=int, default=1)
    parser.add_argument('--scale', type=float, default=1.0, help='fraction of the full size')
    parser.add_argument('--campaign', action='append', choices=sorted(CAMPAIGNS), default=[])
    parser.add_argument('--jobs', type=int, default=JOBS, help=f'processes per campaign ({JOBS})')
    parser.add_argument('--index', type=int, help='replay one input (with one --campaign)')
    parser.add_argument('--write-docs', action='store_true', help=f'update {DOCS.name}')
    args = parser.parse_args()
    chosen = args.campaign or list(CAMPAIGNS)
    if args.index is not None and len(chosen) != 1:
        parser.error('--index replays one input of one --campaign')
    tallies = []
    for name in chosen:
        start = time.perf_counter()
        tally = run_campaign(
            name, seed=args.seed, scale=args.scale, jobs=max(1, args.jobs), index=args.index
        )
        tally.seconds = time.perf_counter() - start
        tallies.append(tally)
        print(report(tally), flush=True)
    text = table(tallies, seed=args.seed, scale=args.scale, jobs=max(1, args.jobs))
    print()
    print(text)
    if args.write_docs:
        if args.index is not None:
            parser.error('--write-docs needs whole campaigns, not --index')
        write_docs(text)
    bad = sum(t.exceptions + t.hangs + t.violations for t in tallies)
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
