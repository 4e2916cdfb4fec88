"""`bench/doc_blocks.py`: a generated block replaced between its markers, and nothing else."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.bench_scripts import load

doc_blocks = load('doc_blocks')
MARKERS = ('<!-- x:begin -->', '<!-- x:end -->')


def test_only_what_stands_between_the_markers_is_replaced() -> None:
    text = 'intro <!-- x:end -->\n<!-- x:begin -->\nold\n<!-- x:end -->\ntail <!-- x:end -->\n'
    assert doc_blocks.replace(text, markers=MARKERS, body='new', where='page') == (
        'intro <!-- x:end -->\n<!-- x:begin -->\nnew\n<!-- x:end -->\ntail <!-- x:end -->\n'
    )


@pytest.mark.parametrize(
    'text', ['no markers', '<!-- x:begin --> only the begin', '<!-- x:end --> <!-- x:begin -->']
)
def test_a_page_without_its_markers_in_order_stops_the_script(text: str) -> None:
    with pytest.raises(SystemExit, match=r'page\.md: markers'):
        doc_blocks.replace(text, markers=MARKERS, body='new', where='page.md')


def test_write_replaces_the_block_in_the_file(tmp_path: Path) -> None:
    page = tmp_path / 'page.md'
    page.write_text('a\n<!-- x:begin -->\n<!-- x:end -->\nb\n', encoding='utf-8')
    doc_blocks.write(page, markers=MARKERS, body='| 1 |')
    assert page.read_text(encoding='utf-8') == 'a\n<!-- x:begin -->\n| 1 |\n<!-- x:end -->\nb\n'


def test_emit_prints_the_block_and_writes_it_only_when_asked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    page = tmp_path / 'docs' / 'page.md'
    page.parent.mkdir()
    empty = 'a\n<!-- x:begin -->\n<!-- x:end -->\n'
    page.write_text(empty, encoding='utf-8')
    doc_blocks.emit(page, markers=MARKERS, body='| 2 |', write_docs=False)
    assert capsys.readouterr().out == '| 2 |\n'
    assert page.read_text(encoding='utf-8') == empty
    doc_blocks.emit(page, markers=MARKERS, body='| 2 |', write_docs=True)
    assert capsys.readouterr().out == '| 2 |\nwrote docs/page.md\n'
    assert page.read_text(encoding='utf-8') == 'a\n<!-- x:begin -->\n| 2 |\n<!-- x:end -->\n'
