"""bench/binaries.py: the cold-build table it writes into docs/contributing.md."""

from __future__ import annotations

from llmscaler.devcluster import binaries
from tests.support.bench_scripts import load
from tests.support.paths import ROOT

script = load('binaries')


def test_the_table_has_a_row_per_family_and_the_total() -> None:
    timings = [(binaries.FAMILIES['etcd'], 60.0), (binaries.FAMILIES['helm'], 150.0)]
    lines = script.table(timings, cores=2).splitlines()
    assert lines[0].startswith('Cold build on 2 cores')
    assert f'| etcd {binaries.FAMILIES["etcd"].version} | etcd | 1.0 |' in lines
    assert lines[-1] == '| all | | 3.5 |'


def test_the_page_holds_the_block_with_every_family() -> None:
    begin, end = script.MARKERS
    text = (ROOT / 'docs' / 'contributing.md').read_text(encoding='utf-8')
    block = text.partition(begin)[2].partition(end)[0]
    assert block.strip(), 'run python bench/binaries.py --write-docs'
    for name in binaries.FAMILIES:
        assert f'| {name} {binaries.FAMILIES[name].version} |' in block, name
