"""`sim.scenario.cases`: the benchmark's cases and the held-out ones, as scenarios the simulator
takes."""

from __future__ import annotations

import pytest

from llmscaler.sim.scenario import cases, loader
from tests.support.paths import TRACES
from tests.support.prerequisites import need_file


@pytest.mark.parametrize('name', [*cases.NAMES, *cases.HELD_OUT])
def test_every_case_is_a_scenario_of_its_duration(name: str) -> None:
    document = cases.case(name=name, policies=['predictive'], traces=TRACES)
    if name in cases.AZURE_TRACES:
        need_file(TRACES / cases.AZURE_TRACES[name])
    setup = loader.from_document(document=document, where=name)
    source = setup.workload.synthetic or setup.workload.trace
    assert source is not None
    assert source.duration == cases.SHORT.get(name, cases.DURATION)
    assert setup.policies == ('predictive',)
    assert setup.warm_start


def test_the_held_out_cases_are_not_the_benchmarks() -> None:
    assert set(cases.HELD_OUT).isdisjoint(cases.NAMES)
    assert len(set(cases.HELD_OUT)) == len(cases.HELD_OUT) == 5
    assert len(cases.NAMES) == 7


def test_an_unknown_case_names_every_case() -> None:
    with pytest.raises(KeyError, match='conv-fall') as raised:
        cases.case(name='nope', policies=[])
    assert 'azure-conv' in str(raised.value)


@pytest.mark.parametrize('duration', [0.0, -1.0, float('inf'), float('nan')])
def test_a_duration_must_be_positive_and_finite(duration: float) -> None:
    with pytest.raises(ValueError, match='duration'):
        cases.case(name='ramp', policies=[], duration=duration)


def test_the_seed_is_the_documents() -> None:
    assert cases.case(name='ramp', policies=[])['seed'] == 1
    assert cases.case(name='ramp', policies=[], seed=3)['seed'] == 3


def test_an_azure_case_needs_the_folder_of_the_traces() -> None:
    with pytest.raises(ValueError, match=r'AzureLLMInferenceTrace_conv\.csv'):
        cases.case(name='azure-conv', policies=[])


def test_diurnal_days_is_three_days_of_the_same_shape_outside_the_benchmarks_tables() -> None:
    document = cases.case(name='diurnal-days', policies=['predictive', 'clairvoyant'])
    setup = loader.from_document(document=document, where='diurnal-days')
    synthetic = setup.workload.synthetic
    assert synthetic is not None
    assert synthetic.duration == 3 * cases.DAY == cases.DURATION
    events = sorted(document['workload']['synthetic']['events'])
    day = cases.PERIODS['diurnal-days']
    assert day == cases.DAY
    by_day = [
        [(at - d * day, length, m) for at, length, m in events if d * day <= at < (d + 1) * day]
        for d in range(3)
    ]
    assert by_day[0] == by_day[1] == by_day[2]
    assert [m for _, _, m in by_day[0]] == [0.3, 1.2, 0.3]
    assert 'diurnal-days' not in (*cases.NAMES, *cases.HELD_OUT, *cases.BURSTS)
    with pytest.raises(KeyError, match='diurnal-days'):
        cases.case(name='nope', policies=[])


def test_the_periodic_cases_name_their_period() -> None:
    assert cases.PERIODS == {'on-off': 600.0, 'diurnal-days': 600.0, 'silent-bursts': 1200.0}
    for name, period in cases.PERIODS.items():
        synthetic = cases.case(name=name, policies=[])['workload']['synthetic']
        assert synthetic['duration'] >= 2 * period
