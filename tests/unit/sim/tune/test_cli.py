"""`llmscaler tune` on the command line: bad values give one line and exit 2 before any run; a
run on a tiny scenario writes the files and says what it found, in either tunable policy."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from llmscaler.cli import main
from tests.support.tune_fixtures import tiny_document


@pytest.fixture
def scenario(tmp_path: Path) -> Path:
    path = tmp_path / 'tiny.yaml'
    path.write_text(yaml.safe_dump(tiny_document()))
    return path


@pytest.mark.parametrize(
    ('flags', 'names'),
    [
        (['--budget', '0'], '--budget'),
        (['--budget', 'many'], '--budget'),
        (['--seeds', '-1'], '--seeds'),
        (['--jobs', '1.5'], '--jobs'),
        (['--target', '1'], '--target'),
        (['--target', 'nan'], '--target'),
        (['--holdout', '0'], '--holdout'),
        (['--holdout', '1.2'], '--holdout'),
        (['--ttft', '2'], '--ttft and --itl'),
        (['--ttft', '-2', '--itl', '0.05'], '--ttft'),
        (['--ttft', '2', '--itl', 'inf'], '--itl'),
        (['--policy', 'nobody'], 'unknown policy'),
        (['--scenario', 'no-such-case'], 'no such file'),
        (['--seed', '-1'], 'seed: Input should be greater than or equal to 0'),
        (['--rate-scale', 'nan'], 'rate'),
        (['--tune-policy', 'nobody'], '--tune-policy: must be one of predictive, saturation-'),
        (['--tune-policy', ''], '--tune-policy'),
        (['--tune-policy', 'hpa-kv'], '--tune-policy'),
    ],
)
def test_bad_values_exit_2_in_one_line(
    flags: list[str],
    names: str,
    scenario: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    arguments = ['tune', '--scenario', str(scenario), '--out', str(tmp_path / 'out'), *flags]
    assert main(arguments) == 2
    err = capsys.readouterr().err
    assert err.count('\n') == 1, err
    assert names in err, err
    assert not (tmp_path / 'out').exists()


def test_an_output_path_that_is_a_file(
    scenario: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / 'file').write_text('')
    assert main(['tune', '--scenario', str(scenario), '--out', str(tmp_path / 'file')]) == 2
    assert 'not a directory' in capsys.readouterr().err


def test_a_run_writes_the_files(
    scenario: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / 'out'
    status = main(
        ['tune', '--scenario', str(scenario), '--budget', '3', '--seeds', '1', '--jobs', '1',
         '--ttft', '2s', '--itl', '0.08', '--out', str(out), '--no-progress']
    )  # fmt: skip
    assert status == 0
    printed = capsys.readouterr().out
    assert 'search: 3 simulations (budget 3)' in printed
    assert {p.name for p in out.iterdir()} == {
        'configmap.yaml',
        'variantautoscalings.yaml',
        'report.md',
        'front.json',
    }
    assert 'TTFT ≤ 2 s, mean ITL ≤ 80 ms' in (out / 'report.md').read_text()


def test_a_run_of_the_saturation_mode_writes_its_configmap(
    scenario: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / 'out'
    status = main(
        ['tune', '--scenario', str(scenario), '--tune-policy', 'saturation-percentage',
         '--budget', '2', '--seeds', '1', '--jobs', '1', '--ttft', '2s', '--itl', '0.08',
         '--policy', 'default', '--out', str(out), '--no-progress']
    )  # fmt: skip
    assert status == 0
    assert 'search: 2 simulations (budget 2)' in capsys.readouterr().out
    (written,) = yaml.safe_load_all((out / 'configmap.yaml').read_text())
    assert written['metadata']['name'] == 'wva-saturation-scaling-config'
