"""Tests of `emulate.hostile`: each page is what it says, against the scraper's own caps."""

from __future__ import annotations

import pytest

from llmscaler.collect.exposition import VLLM_FAMILIES, Parser
from llmscaler.collect.scrape.source import ScrapeConfig
from llmscaler.collect.scrape.store import series_chars
from llmscaler.emulate import hostile

MODEL = 'meta-llama/Llama-3.1-8B-Instruct'


def test_the_caps_are_the_scrapers_defaults() -> None:
    config = ScrapeConfig()
    assert (
        config.max_line_length,
        config.max_labels,
        config.max_series_per_page,
        config.max_series_chars_per_pod,
    ) == (
        hostile.MAX_LINE_LENGTH,
        hostile.MAX_LABELS,
        hostile.MAX_SERIES_PER_PAGE,
        hostile.MAX_SERIES_CHARS,
    )


@pytest.mark.parametrize('name', [n for n, h in hostile.PAGES.items() if h.kind == 'over'])
def test_a_page_over_a_cap_is_refused_for_that_cap(name: str) -> None:
    shape = hostile.PAGES[name]
    text = shape.page(model=MODEL)
    assert len(text.encode()) <= ScrapeConfig().max_page_bytes  # read, not cut at the size cap
    page = Parser(families=VLLM_FAMILIES, limits=ScrapeConfig().page_limits()).parse(page=text)
    assert page.refused is not None
    assert page.refused.endswith(f'({shape.cap})'), page.refused


@pytest.mark.parametrize('name', [n for n, h in hostile.PAGES.items() if h.kind == 'at'])
def test_a_page_at_the_caps_is_read_whole(name: str) -> None:
    text = hostile.PAGES[name].page(model=MODEL)
    page = Parser(families=VLLM_FAMILIES, limits=ScrapeConfig().page_limits()).parse(page=text)
    assert page.refused is None
    assert page.errors == ()
    assert len(page.samples) == text.count('\n')
    chars = sum(series_chars((s.name, s.labels)) for s in page.samples)
    assert chars <= hostile.MAX_SERIES_CHARS
    # At a cap: as many series as a page may keep, or their characters within a line of it.
    assert (
        len(page.samples) == hostile.MAX_SERIES_PER_PAGE
        or chars > hostile.MAX_SERIES_CHARS - hostile.MAX_LINE_LENGTH
    )
