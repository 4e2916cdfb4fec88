"""bench/burst.py: when a case's load comes back, how each burst is timed, and the page's block
against the cases it must show."""

from __future__ import annotations

from tests.support.bench_scripts import load
from tests.support.paths import ROOT

burst = load('burst')


def test_the_load_comes_back_at_the_end_of_each_event_that_lowered_it() -> None:
    document = {
        'workload': {
            'synthetic': {
                'duration': 1800.0,
                'events': [(300.0, 300.0, 0.05), (900.0, 60.0, 2.0), (1500.0, 300.0, 0.0)],
            }
        }
    }
    # A rise (2.0) is no return; a lull that lasts to the end returns nothing.
    assert burst.rises(document) == [600.0]


def test_the_block_shows_each_case_once_with_both_runs() -> None:
    runs = {
        (case, fast): burst.Run(
            case=case,
            fast=fast,
            attainment=0.99 if fast else 0.9,
            cost=2.0 if fast else 1.0,
            responses=(1.0, None) if fast else (60.0, 30.0),
        )
        for case in ('on-off', 'ramp')
        for fast in (True, False)
    }
    text = burst.block(runs, ['on-off', 'ramp'])
    assert '| `on-off` | 1 | 1.0 s | 60.0 s |' in text
    assert '| `on-off` | 2 | – | 30.0 s |' in text
    assert '| `ramp` | 99.00 % · 2.00 $ | 90.00 % · 1.00 $ | 2.00× |' in text


def test_the_page_holds_a_row_for_every_case_the_script_runs() -> None:
    text = (ROOT / 'docs' / 'controller.md').read_text(encoding='utf-8')
    begin, end = burst.MARKERS
    body = text.split(begin, 1)[1].split(end, 1)[0]
    everything = (*burst.cases.NAMES, *burst.cases.HELD_OUT, *burst.cases.BURSTS)
    for case in everything:
        assert f'| `{case}` | ' in body, case
