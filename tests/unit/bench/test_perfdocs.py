"""`bench/perfdocs.py`: docs/performance.md holds one generated block per benchmark."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.bench_scripts import load
from tests.support.paths import ROOT

perfdocs = load('perfdocs')


def page(**bodies: str) -> str:
    return '\n'.join(
        f'<!-- perf:{key}:begin -->\n{body}<!-- perf:{key}:end -->' for key, body in bodies.items()
    )


def body(command: str) -> str:
    return f'`{command}`, run by `bench/perfdocs.py` on 2026-01-01, 2 cores:\n\n```text\nx\n```\n'


def every_block() -> dict[str, str]:
    return {b.key: body(b.command) for b in perfdocs.BENCHES}


def test_the_page_holds_a_current_block_for_every_benchmark() -> None:
    text = (ROOT / 'docs' / 'performance.md').read_text(encoding='utf-8')
    assert perfdocs.problems(text) == []
    assert perfdocs.main(['--check']) == 0


def test_a_complete_page_has_no_problems() -> None:
    assert perfdocs.problems(page(**every_block())) == []


def test_a_missing_block_is_reported() -> None:
    blocks = every_block()
    del blocks['decide']
    assert perfdocs.problems(page(**blocks)) == [
        'no block for decide (`.venv/bin/python bench/decide.py`)'
    ]


def test_a_block_made_by_another_command_is_reported() -> None:
    blocks = every_block()
    blocks['decide'] = body('.venv/bin/python bench/decide.py --models 10')
    assert perfdocs.problems(page(**blocks)) == [
        'the block for decide was not made by `.venv/bin/python bench/decide.py`'
    ]


def test_a_block_of_no_benchmark_and_one_without_output_are_reported() -> None:
    blocks = every_block()
    blocks['gone'] = body('.venv/bin/python bench/gone.py')
    blocks['cycle'] = '`.venv/bin/python bench/cycle.py`, run by `bench/perfdocs.py`:\n'
    assert perfdocs.problems(page(**blocks)) == [
        'a block for gone, which is no benchmark here',
        'the block for cycle holds no output',
    ]


def test_splice_replaces_only_its_block() -> None:
    text = page(decide='old\n', cycle='keep\n')
    spliced = perfdocs.splice(text, 'decide', 'new')
    assert perfdocs.blocks(spliced) == {'decide': 'new\n', 'cycle': 'keep\n'}
    with pytest.raises(SystemExit, match='markers'):
        perfdocs.splice(text, 'informer', 'x\n')


def test_a_benchmark_that_fails_stops_the_run() -> None:
    failing = perfdocs.Bench('failing', ('-c', 'import sys; sys.exit(3)'))
    with pytest.raises(SystemExit, match='exited with 3'):
        perfdocs.run(failing)


def test_a_run_records_its_command_machine_and_output() -> None:
    printing = perfdocs.Bench('printing', ('-c', 'print("figure 42   ")'))
    made = perfdocs.run(printing)
    assert made.startswith(f'`{printing.command}`, run by `bench/perfdocs.py` on ')
    assert f'{perfdocs.machine()}:' in made
    assert made.endswith('```text\nfigure 42\n```')


def test_a_missing_program_stops_the_run_before_any_benchmark(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    ran: list[str] = []
    monkeypatch.setattr(perfdocs.shutil, 'which', lambda name: None)

    def run(bench: Any) -> str:
        ran.append(bench.key)
        return ''

    monkeypatch.setattr(perfdocs, 'run', run)
    with pytest.raises(SystemExit) as stopped:
        perfdocs.main(['--only', 'decide,instructions'])
    assert stopped.value.code == 2
    assert ran == []
    assert 'instructions needs valgrind' in capsys.readouterr().err
    # Left out, nothing is missing: the rest runs.
    assert perfdocs.main(['--only', 'decide']) == 0
    assert ran == ['decide']


def test_an_unbuilt_control_plane_stops_the_run_before_any_benchmark(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    ran: list[str] = []
    monkeypatch.setattr(perfdocs.realproc, 'missing', lambda: ['etcd', 'kube-apiserver'])

    def run(bench: Any) -> str:
        ran.append(bench.key)
        return ''

    monkeypatch.setattr(perfdocs, 'run', run)
    with pytest.raises(SystemExit) as stopped:
        perfdocs.main(['--only', 'cycle,cycle-real'])
    assert stopped.value.code == 2
    assert ran == []
    assert (
        'cycle-real needs the real control plane (make binaries; not built: etcd, '
        'kube-apiserver)' in capsys.readouterr().err
    )
    # The fake backend's runs need no binaries.
    assert perfdocs.main(['--only', 'cycle,from-zero-pools']) == 0
    assert ran == ['cycle', 'from-zero-pools']


def test_each_controller_benchmark_runs_on_both_backends() -> None:
    commands = {b.command for b in perfdocs.BENCHES}
    for fake in ('bench/cycle.py', 'bench/from_zero.py --mode pools'):
        assert f'.venv/bin/python {fake}' in commands
        assert f'.venv/bin/python {fake} --backend real' in commands
    assert all(b.control_plane == ('--backend' in b.argv) for b in perfdocs.BENCHES)
