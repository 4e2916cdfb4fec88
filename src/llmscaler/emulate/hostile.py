"""Hostile `/metrics` pages: the shapes that once cost the controller its memory or its loop.

Why: a pod's page is the input an exporter (broken or malicious) controls most directly. One page
of 1.75 million repeated label pairs on one line once took the exposition parser's peak memory
from 44 MB to 1.25 GB, above the 1 GiB the shipped Deployment allows; one of 300,000 distinct
series took 4 to 6 s to parse and add to the windows, on the event loop that also renews the
leader's Lease. The end-to-end tests plant these pages on an emulated pod
(`Emulator.show_page`) and the benchmarks (`bench/hostile_pages.py`, `bench/hostile_scrape.py`)
measure the controller against them; both take them from here, so they measure the same pages.

What it gives: `PAGES`, by name, each a `Hostile` with its page (built on demand: they are
megabytes) and what it is; two kinds:
- `over`: the shapes found, each over one cap of `collect.scrape.source.ScrapeConfig` (a page
  the scraper must refuse, naming the cap);
- `at`: pages just within every cap at once, as costly as a page may be and still be read.
The pages are vLLM pages of the `vllm:num_requests_waiting` family for `model` (a family the
collectors read, so that nothing is skipped unread) and end with a newline.

What fails: nothing raises; a page is only text.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

FAMILY = 'vllm:num_requests_waiting'

MAX_LINE_LENGTH = 64 * 1024
MAX_LABELS = 128
MAX_SERIES_PER_PAGE = 10_000
MAX_SERIES_CHARS = 4 * 1024 * 1024
"""The scraper's default caps (`ScrapeConfig`), which the `at` pages stay just within."""


@dataclass(frozen=True, slots=True)
class Hostile:
    """One hostile page: its name, kind, the cap it is about, and how to build it."""

    name: str
    kind: Literal['over', 'at']
    cap: str
    what: str
    build: Callable[[str], str]

    def page(self, *, model: str) -> str:
        """The page, for the model `model` (its `model_name` label where it has one)."""
        return self.build(model)


def repeated_labels(model: str) -> str:
    """One line of 1.75 million `a="b"` pairs (10.5 MB): the page that took 1.25 GB."""
    del model  # the line has no other label
    return FAMILY + '{' + ','.join(['a="b"'] * 1_750_000) + '} 1\n'


def many_series(model: str) -> str:
    """300,000 distinct series of one family, one per `engine` (12.8 MiB; the pod's model by
    its target, as a page without `model_name` is read)."""
    del model
    return ''.join(f'{FAMILY}{{engine="{i}"}} 1\n' for i in range(300_000))


def long_value(model: str) -> str:
    """One series whose label value is 10 MB long."""
    return f'{FAMILY}{{model_name="{model}",a="{"x" * 10_000_000}"}} 1\n'


def labels_at_cap(model: str) -> str:
    """Series of `MAX_LABELS` labels each, as many as the series characters allow."""
    lines = []
    chars = 0
    for i in range(MAX_SERIES_PER_PAGE):
        labels = [f'model_name="{model}"'] + [f'l{j:03d}="{i}"' for j in range(MAX_LABELS - 1)]
        head = FAMILY + '{' + ','.join(labels) + '}'
        if chars + len(head) > MAX_SERIES_CHARS:
            break
        chars += len(head)
        lines.append(f'{head} 1\n')
    return ''.join(lines)


def series_at_cap(model: str) -> str:
    """`MAX_SERIES_PER_PAGE` distinct series."""
    return ''.join(
        f'{FAMILY}{{engine="{i}",model_name="{model}"}} 1\n' for i in range(MAX_SERIES_PER_PAGE)
    )


def lines_at_cap(model: str) -> str:
    """Lines of `MAX_LINE_LENGTH` characters, as many as the series characters allow."""
    lines = []
    chars = 0
    for i in range(MAX_SERIES_PER_PAGE):
        head = f'{FAMILY}{{model_name="{model}",i="{i}",a=""}}'
        pad = MAX_LINE_LENGTH - len(head) - len(' 1')
        head = head[:-2] + 'x' * pad + '"}'
        if chars + len(head) > MAX_SERIES_CHARS:
            break
        chars += len(head)
        lines.append(f'{head} 1\n')
    return ''.join(lines)


PAGES: dict[str, Hostile] = {
    hostile.name: hostile
    for hostile in (
        Hostile('repeated-labels', 'over', 'max_line_length', '1.75M `a="b"` on one line',
                repeated_labels),
        Hostile('many-series', 'over', 'max_series_per_page', '300,000 distinct series',
                many_series),
        Hostile('long-value', 'over', 'max_line_length', 'a 10 MB label value', long_value),
        Hostile('labels-at-cap', 'at', 'max_labels', '128 labels a series, 4 MiB of series',
                labels_at_cap),
        Hostile('series-at-cap', 'at', 'max_series_per_page', '10,000 distinct series',
                series_at_cap),
        Hostile('lines-at-cap', 'at', 'max_line_length', '64 KiB lines, 4 MiB of series',
                lines_at_cap),
    )
}  # fmt: skip
"""Every hostile page by name, the shapes found first."""
