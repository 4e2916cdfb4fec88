"""Scenario files are read with the bounded YAML reader: any text gives a scenario or one line
naming the file (where the YAML reader says), never a traceback or an unbounded parse."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmscaler.sim.scenario import loader
from llmscaler.sim.scenario.document import ScenarioError

GOOD = 'variants: [{name: a, preset: llama-3.1-8b-h100}]\n'


@pytest.mark.parametrize(
    ('text', 'expected'),
    [
        ('[' * 20_000, 'deeper than'),  # RecursionError in PyYAML's own reader
        (f'seed: {"9" * 5000}\n' + GOOD, 'characters'),  # ValueError in int()
        ('seed: 2001-13-45\n' + GOOD, 'seed'),  # a date PyYAML would fail to build
        ('seed: !!float 0.5-\n' + GOOD, 'line 1 column 7'),
        ('a: &x [1, 2]\nb: *x\n' + GOOD, 'anchor'),
        ('name: !!python/object:os.system x\n' + GOOD, 'tag'),
        ('variants: [\n', 'line 2 column 1'),
    ],
)
def test_hostile_yaml_gives_one_line(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / 'scenario.yaml'
    path.write_text(text)
    with pytest.raises(ScenarioError) as caught:
        loader.load(path=path)
    message = str(caught.value)
    assert '\n' not in message
    assert message.startswith(f'{path}: ')
    assert expected in message
    assert len(message) < 400
