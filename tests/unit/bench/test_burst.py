"""bench/burst.py: when a case's load comes back, how each burst is timed, the page's block
against the cases it must show, and its runs through the sweep runner (the fast path emptied
only for a run without it, a cached run never the other's, the same tables on one worker as on
two and again from the run cache)."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from llmscaler.sim.sweep import cache as run_cache
from llmscaler.sim.vocabulary import ScaleEvent
from tests.support.bench_scripts import load, same_with_any_jobs, summary
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


def test_a_response_is_the_first_scale_up_written_after_its_burst_and_before_the_next() -> None:
    first, second = burst.rises(burst.document(case='on-off'))
    delay, duration = 30.0, 1800.0

    def event(*, written: float, before: int, after: int) -> ScaleEvent:
        # An event's time is when it takes effect, one actuation delay after it was written.
        return ScaleEvent(
            time=written + delay, variant='v', before=before, after=after, reason='test'
        )

    events = (
        event(written=first - 1.0, before=1, after=2),  # before the burst: not its answer
        event(written=first + 3.0, before=3, after=2),  # a scale-down answers nothing
        event(written=first + 12.0, before=2, after=4),
        event(written=first + 20.0, before=4, after=5),
        event(written=duration + 5.0, before=5, after=6),  # after the run: not the second's
    )
    run = (summary(slo=0.97, cost=4.5), events, delay, duration)
    measured = burst.measure(case='on-off', fast=False, run=run)
    assert second < duration
    assert measured.responses == (12.0, None)
    assert (measured.case, measured.fast) == ('on-off', False)
    assert (measured.attainment, measured.cost) == (0.97, 4.5)


@pytest.mark.parametrize('fast', [True, False], ids=['fast path', 'without'])
def test_the_fast_path_is_emptied_only_for_a_run_without_it_and_restored_after(
    monkeypatch: pytest.MonkeyPatch, fast: bool
) -> None:
    module = importlib.import_module('llmscaler.burst')
    before = module.SPANS
    assert before != ()
    seen: list[object] = []

    def fails(**_: object) -> None:
        seen.append(module.SPANS)
        raise RuntimeError('stop')

    monkeypatch.setattr(burst.simulate, 'run', fails)
    with pytest.raises(RuntimeError):
        burst.simulated(case='on-off', fast=fast)
    assert seen == [before if fast else ()]
    after = module.SPANS
    assert after == before


def test_a_cached_run_without_the_fast_path_is_never_one_with_it_nor_another_case_s() -> None:
    pairs = [(case, fast) for case in ('on-off', 'conv-low') for fast in (True, False)]
    tasks = [burst.BurstRun(case, fast) for case, fast in pairs]
    keys = [run_cache.key(identity=t.identity()) for t in tasks]
    assert len(set(keys)) == len(tasks)
    assert keys[1] == run_cache.key(identity=burst.BurstRun('on-off', False).identity())


def test_one_job_and_two_print_the_same_tables_and_a_rerun_comes_from_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(run_cache.ENV, str(tmp_path))

    def simulates(**_: object) -> None:
        raise AssertionError('a cached run was simulated again')

    # conv-low: the lightest case (a few seconds a run); its two runs go to the two workers.
    out = same_with_any_jobs(
        main=burst.main,
        argv=['--case', 'conv-low'],
        capsys=capsys,
        forbid_simulating=lambda: monkeypatch.setattr(burst, 'simulated', simulates),
    )
    assert '| `conv-low` | ' in out


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
