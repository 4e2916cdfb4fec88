"""The documentation stands alone: an index that links every page, links that resolve, and no
reference to a file a person who clones the repository does not have.

Why: pages outlive the code they describe; a renamed module or a moved page leaves a link that
reads fine and leads nowhere, and notes that live beside the repository are not part of it.
Checked: README.md, every page of docs/, and the prose of src/ (its docstrings and comments).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support.paths import ROOT

DOCS = ROOT / 'docs'
PAGES = sorted(DOCS.glob('*.md'))
OUTSIDE = re.compile(
    r'design\.md|reference/[a-z_]+\.md|\b(wva|vllm|peers|predictive|python_stack)\.md'
    r'|\bseeds? ?0{2}[0-4]\b|\.\./shared'
)
"""Names of notes kept beside the repository, never part of it."""
LINK = re.compile(r'\]\(([^)\s]+)\)')


def links(page: Path) -> list[str]:
    """The relative targets of the page's Markdown links (URLs and anchors within it aside)."""
    return [
        target.split('#', 1)[0]
        for target in LINK.findall(page.read_text())
        if not re.match(r'[a-z]+:', target) and not target.startswith('#')
    ]


def test_the_index_links_every_page() -> None:
    linked = {(DOCS / target).resolve() for target in links(DOCS / 'README.md')}
    assert [p.name for p in PAGES if p.name != 'README.md' and p not in linked] == []


@pytest.mark.parametrize('page', [ROOT / 'README.md', *PAGES], ids=lambda p: p.name)
def test_every_relative_link_resolves(page: Path) -> None:
    broken = [t for t in links(page) if not (page.parent / t).exists()]
    assert broken == []


@pytest.mark.parametrize(
    'path',
    [ROOT / 'README.md', *PAGES, *sorted((ROOT / 'src').rglob('*.py'))],
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_nothing_refers_to_a_file_outside_the_repository(path: Path) -> None:
    found = [
        f'{number}: {line.strip()}'
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if OUTSIDE.search(line)
    ]
    assert found == []


def test_the_checks_see_what_they_look_for(tmp_path: Path) -> None:
    page = tmp_path / 'page.md'
    page.write_text('See [here](missing.md), [there](https://x.org/a.md) and [up](#top).\n')
    assert links(page) == ['missing.md']
    for text in ('design.md §5', 'reference/wva.md', 'seed 002', '../shared/traces', 'vllm.md'):
        assert OUTSIDE.search(text), text
    assert not OUTSIDE.search('the vLLM docs, docs/metrics.md and seeded runs')
