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
