"""What `predictive`'s margins buy: every case of docs/policies.md rerun with one constant changed.

Why: docs/policies.md says why the policy keeps the margins it keeps (the scale-down's
hysteresis, how far it trusts what a variant has shown, how its latency readings are weighed),
and a figure pasted from a one-off run of another value cannot be checked once the code moves
on. Each `Ablation` here is one module constant of the decision core set to another value for
a whole run; the script runs `predictive` on the benchmark's and the held-out cases (seed 1)
as it is and under each ablation, and prints per case the attainment and cost as it is and,
per ablation, the attainment and the cost as a ratio to it. `--write-docs` puts the table into
docs/policies.md between `<!-- ablations:begin -->` and `<!-- ablations:end -->`; `problems`
(run by tests/unit/bench/test_ablations.py) says when that table was made with other
ablations or other cases than these.

Each (case, ablation) is one task of one sweep (`sim.sweep`, `AblationRun`): `--jobs N` worker
processes (default: one per core) or a Ray cluster's (`--ray [ADDRESS]`, as bench/policy.py
takes it), and the run cache unless `--no-cache` (the task names the
ablation's module, constant and value, so a cached run is never another ablation's). The
constants are patched in worker processes (one case at a time, restored after it), never in the
process that writes the page (with `--jobs 1`, in it, and restored all the same); the core reads
them at call time, so a patched module behaves as if it had been written with that value.

Run: `.venv/bin/python bench/ablations.py [--write-docs] [--case NAME] [--jobs N | --ray [ADDRESS]]
[--no-cache]`
(about ten minutes on two cores).
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import doc_blocks
import policy
from llmscaler.sim.report.summary import PolicySummary
from llmscaler.sim.scenario import cases

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / 'docs' / 'policies.md'
MARKERS = ('<!-- ablations:begin -->', '<!-- ablations:end -->')
POLICY = 'predictive'


@dataclass(frozen=True)
class Ablation:
    """One constant of the core (`module.name`) at another value for a whole run."""

    label: str
    module: str
    name: str
    value: float


ABLATIONS = (
    Ablation('hysteresis 7 %', 'llmscaler.policies.predictive.hysteresis', 'HYSTERESIS', 0.07),
    Ablation('hysteresis 0', 'llmscaler.policies.predictive.hysteresis', 'HYSTERESIS', 0.0),
    Ablation('trust 2×', 'llmscaler.policies.predictive.hysteresis', 'TRUST', 2.0),
    Ablation('readings full from ¼', 'llmscaler.analyze.slo.capacity', 'READING_SHARE', 0.25),
    Ablation('readings full at 1', 'llmscaler.analyze.slo.capacity', 'READING_SHARE', 1.0),
)
"""As the policy is: hysteresis 15 % (`mix_hysteresis.HYSTERESIS`), trust 1.5× the rate a
variant was seen meeting its targets at (`TRUST`), a latency reading moving κ fully from half
of its target (`slo_capacity.READING_SHARE`)."""


def run_case(case: str, ablation: int | None) -> PolicySummary:
    """`predictive` on `case` (seed 1, as bench/policy.py runs it), with `ABLATIONS[ablation]`
    applied when not None."""
    if ablation is None:
        (summary,) = policy.run_case(name=case, names=[POLICY])
        return summary
    patch = ABLATIONS[ablation]
    module = importlib.import_module(patch.module)
    before = getattr(module, patch.name)
    setattr(module, patch.name, patch.value)
    try:
        (summary,) = policy.run_case(name=case, names=[POLICY])
    finally:
        setattr(module, patch.name, before)
    return summary


@dataclass(frozen=True)
class AblationRun:
    """`run_case(case, ablation)` as a task of a sweep (`sim.sweep.tasks.Task`)."""

    case: str
    ablation: int | None

    @property
    def label(self) -> str:
        return f'{self.case} {self.ablation}'

    def identity(self) -> object:
        patch = ABLATIONS[self.ablation] if self.ablation is not None else None
        return (
            'bench/ablations.py',
            patch,
            policy.Case(name=self.case, names=(POLICY,)).identity(),
        )

    def __call__(self) -> PolicySummary:
        return run_case(self.case, self.ablation)


Results = Mapping[tuple[str, int | None], PolicySummary]


def table(results: Results, *, names: Sequence[str]) -> list[str]:
    """Per case: attainment and cost as the policy is, then per ablation its attainment and
    its cost over that."""
    head = ['case', 'as it is', *(a.label for a in ABLATIONS)]
    lines = ['| ' + ' | '.join(head) + ' |', '|---|' + '---:|' * (len(head) - 1)]
    for case in names:
        base = results[(case, None)]
        cells = [f'`{case}`', f'{100 * base.slo_attainment:.1f} % · {base.cost_usd:.2f} $']
        for index in range(len(ABLATIONS)):
            row = results[(case, index)]
            ratio = row.cost_usd / base.cost_usd if base.cost_usd > 0 else float('nan')
            cells.append(f'{100 * row.slo_attainment:.1f} % · {ratio:.2f}×')
        lines.append('| ' + ' | '.join(cells) + ' |')
    return lines


def block(results: Results, *, names: Sequence[str]) -> str:
    return '\n'.join(
        [
            'Generated by `bench/ablations.py` (`--write-docs`): `predictive` on each case '
            '(seed 1) as it is and with one constant changed; each cell is the SLO attainment '
            'and the cost (as it is: in dollars; changed: over that).',
            '',
            *table(results, names=names),
        ]
    )


def problems(text: str) -> list[str]:
    """What is stale in the page's block against `ABLATIONS` and the cases (empty when
    nothing is): a table made with other ablations or other cases than these."""
    begin, end = MARKERS
    if begin not in text or end not in text:
        return [f'no block between {begin} and {end}']
    body = text.split(begin, 1)[1].split(end, 1)[0]
    rows = [line for line in body.splitlines() if line.startswith('| ')]
    if not rows:
        return ['the block holds no table']
    wrong = []
    header = [cell.strip() for cell in rows[0].strip('|').split('|')]
    if header != ['case', 'as it is', *(a.label for a in ABLATIONS)]:
        wrong.append(f'the table was made with other ablations: {header[2:]}')
    shown = [row.split('|')[1].strip().strip('`') for row in rows[1:]]
    if shown != [*cases.NAMES, *cases.HELD_OUT]:
        wrong.append(f'the table holds other cases: {shown}')
    return wrong


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or '').splitlines()[0])
    parser.add_argument('--write-docs', action='store_true', help=f'write {DOC.name}')
    parser.add_argument(
        '--case', action='append', choices=(*cases.NAMES, *cases.HELD_OUT), help='only these'
    )
    policy.jobs_argument(parser)
    args = parser.parse_args()
    policy.check_jobs(parser, args)
    if args.write_docs and args.case:
        parser.error('--write-docs runs every case; leave out --case')
    names = list(args.case or (*cases.NAMES, *cases.HELD_OUT))
    tasks = [AblationRun(case, index) for case in names for index in (None, *range(len(ABLATIONS)))]
    with policy.sweep_of(parser, args, label='bench/ablations.py') as sweep:
        weights = [policy.Case(name=t.case, names=(POLICY,)).weight() for t in tasks]
        summaries = sweep.run(tasks=tasks, weights=weights)
    results = {(t.case, t.ablation): row for t, row in zip(tasks, summaries, strict=True)}
    text = block(results, names=names)
    doc_blocks.emit(DOC, markers=MARKERS, body=text, write_docs=args.write_docs)
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
