"""bench/hostile_pages.py: what one measurement reports."""

from __future__ import annotations

import asyncio

from tests.support.bench_scripts import load


def test_one_page_measurement_reports_the_refusal_and_the_memory_above_idle() -> None:
    pages = load('hostile_pages')
    found = asyncio.run(pages.scrape_one('long-value'))
    assert found['outcome'] == 'line 1: a line over 65536 characters (max_line_length)'
    assert found['page'] > 9 * pages.MiB
    assert 0 <= found['above'] < pages.GOAL_MIB * pages.MiB
