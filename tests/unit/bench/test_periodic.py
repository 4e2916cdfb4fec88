"""bench/periodic.py: the window of periods 2+ (requests that arrived in it, replicas that
existed in it, nothing after the run was charged until), G4's two conditions, `periodic` set
only for the run of its mode and restored after, a cached run of one mode never another's, and
the page's block against the cases and seeds it must show."""

from __future__ import annotations

import numpy as np
import pytest

from llmscaler.config.resolved import PERIODIC_AUTO, PERIODIC_OFF
from llmscaler.sim.scenario import setup
from llmscaler.sim.sweep import cache as run_cache
from tests.support.bench_scripts import load
from tests.support.paths import ROOT

periodic = load('periodic')


def simulated(*, replicas: list[int], arrivals: list[float], met: list[bool]) -> object:
    return periodic.Simulated(
        times=np.arange(len(replicas), dtype=np.float64) * 10.0,
        replicas={'h100': np.asarray(replicas, dtype=np.float64)},
        prices={'h100': 3.6},
        interval=10.0,
        charged_until=50.0,
        arrivals=np.asarray(arrivals),
        met=np.asarray(met),
    )


def test_the_window_counts_what_arrived_and_existed_from_its_start_until_charged() -> None:
    run = simulated(
        replicas=[9, 9, 1, 2, 3, 7],  # 0, 10, 20, 30, 40 s; the sample at 50 s is not charged
        arrivals=[5.0, 15.0, 20.0, 25.0, 30.0, 45.0],
        met=[False, False, True, False, True, True],
    )
    window = periodic.measure(run, start=20.0)
    assert window.attainment == pytest.approx(3 / 4)
    # (1 + 2 + 3) replica-samples × 10 s at 3.6 $/h.
    assert window.cost == pytest.approx(6 * 10 / 3600 * 3.6)


def test_g4_needs_both_the_attainment_and_the_cost() -> None:
    bound = periodic.Window(attainment=0.995, cost=10.0)
    assert periodic.holds(periodic.Window(attainment=0.99, cost=11.5), bound)
    assert not periodic.holds(periodic.Window(attainment=0.9899, cost=10.0), bound)
    assert not periodic.holds(periodic.Window(attainment=1.0, cost=11.51), bound)


@pytest.mark.parametrize('mode', [PERIODIC_AUTO, PERIODIC_OFF])
def test_periodic_is_set_for_the_predictive_run_only_and_restored_after(mode: str) -> None:
    before = setup.core_config
    with periodic.periodic_mode(mode):
        config = setup.core_config(name=setup.PREDICTIVE)
        assert config.default.predictive is not None
        assert config.default.predictive.periodic == mode
        other = setup.core_config(name='slo-queueing')
        assert other == before(name='slo-queueing')
    assert setup.core_config is before


def test_a_cached_run_of_one_mode_is_never_the_others_nor_another_seeds() -> None:
    tasks = [
        periodic.PeriodicRun(case, seed, run)
        for case in ('on-off', 'diurnal-days')
        for seed in (1, 2)
        for run in periodic.RUNS
    ]
    keys = [run_cache.key(identity=t.identity()) for t in tasks]
    assert len(set(keys)) == len(tasks)


def test_the_block_shows_each_case_and_seed_with_both_modes_and_the_bound() -> None:
    windows = {
        ('on-off', seed, run): periodic.Window(
            attainment={'auto': 0.995, 'off': 0.98, 'clairvoyant': 0.99}[run],
            cost={'auto': 11.0, 'off': 20.0, 'clairvoyant': 10.0}[run],
        )
        for seed in periodic.SEEDS
        for run in periodic.RUNS
    }
    text = periodic.block(windows, ['on-off'])
    row = (
        '| `on-off` | 2 | 99.50 % · 11.00 $ | 98.00 % · 20.00 $ | 99.00 % · 10.00 $ | 1.10× | '
        '2.00× | yes | no |'
    )
    assert row in text
    assert '`on-off` 600 s' in text


def test_the_page_holds_a_row_for_every_case_and_seed() -> None:
    text = (ROOT / 'docs' / 'policies.md').read_text(encoding='utf-8')
    begin, end = periodic.MARKERS
    body = text.split(begin, 1)[1].split(end, 1)[0]
    for case in periodic.cases.PERIODS:
        for seed in periodic.SEEDS:
            assert f'| `{case}` | {seed} | ' in body, (case, seed)
