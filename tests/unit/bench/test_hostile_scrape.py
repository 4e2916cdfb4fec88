"""bench/hostile_scrape.py: the pages it serves."""

from __future__ import annotations

from llmscaler.emulate.hostile import PAGES
from tests.support.bench_scripts import load


def test_the_scrape_benchmark_serves_each_shape_of_a_scenario_in_turn_on_ten_pods() -> None:
    scrape = load('hostile_scrape')
    assert scrape.pages('healthy') == {}
    over = scrape.pages('over')
    assert sorted(over) == list(scrape.HOSTILE)
    assert len(scrape.HOSTILE) == 10
    shapes = [shape for shape in PAGES.values() if shape.kind == 'over']
    first = [shape.page(model=scrape.MODEL).encode() for shape in shapes]
    assert [over[pod] for pod in scrape.HOSTILE[: len(first)]] == first
