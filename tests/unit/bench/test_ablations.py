"""`bench/ablations.py`: each ablation turns a real constant of the core, and the page's table
is the one the script makes now."""

from __future__ import annotations

import importlib
from typing import Any

import pytest

from llmscaler.sim.report.summary import PolicySummary
from llmscaler.sim.scenario import cases
from tests.support.bench_scripts import load, summary
from tests.support.paths import ROOT

ablations = load('ablations')


@pytest.mark.parametrize('ablation', ablations.ABLATIONS, ids=lambda a: a.label)
def test_each_ablation_turns_a_constant_the_core_has_to_another_value(ablation: Any) -> None:
    module = importlib.import_module(ablation.module)
    current = getattr(module, ablation.name)
    assert isinstance(current, float)
    assert ablation.value != current


def test_a_patched_constant_is_restored_after_its_case(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[float] = []
    first = ablations.ABLATIONS[0]
    module = importlib.import_module(first.module)
    before = getattr(module, first.name)

    def fails(**_: object) -> None:
        seen.append(getattr(module, first.name))
        raise RuntimeError('stop')

    monkeypatch.setattr(ablations.policy, 'run_case', fails)
    with pytest.raises(RuntimeError):
        ablations.run_case('on-off', 0)
    assert seen == [first.value]
    assert getattr(module, first.name) == before


def test_the_table_shows_the_cost_of_each_ablation_over_the_policy_as_it_is() -> None:
    results: dict[tuple[str, int | None], PolicySummary] = {
        ('c', None): summary(slo=0.995, cost=10.0)
    }
    for index in range(len(ablations.ABLATIONS)):
        results[('c', index)] = summary(slo=0.98, cost=8.0 + index)
    header, rule, row = ablations.table(results, names=['c'])
    assert header.startswith('| case | as it is | hysteresis 7 % |')
    assert rule.count('---') == len(ablations.ABLATIONS) + 2
    assert row.startswith('| `c` | 99.5 % · 10.00 $ | 98.0 % · 0.80× | 98.0 % · 0.90× |')


def test_the_page_holds_the_table_of_these_ablations_and_cases() -> None:
    text = (ROOT / 'docs' / 'policies.md').read_text(encoding='utf-8')
    assert ablations.problems(text) == []
    names = [*cases.NAMES, *cases.HELD_OUT]
    fake = {(c, i): summary(slo=1.0, cost=1.0) for c in names for i in (None, 0, 1, 2, 3, 4)}
    made = ablations.block(fake, names=names)
    begin, end = ablations.MARKERS
    assert ablations.problems(f'{begin}\n{made}\n{end}') == []
    assert ablations.problems(f'{begin}\n{made.replace("trust 2×", "trust 3×")}\n{end}') != []
    assert ablations.problems(f'{begin}\n{made.replace("`conv-low`", "`x`")}\n{end}') != []
    assert ablations.problems('no block') != []
