"""Scenarios: the start fleet (`initial`, `--initial`, `warm_start`), the request time-out
setting, and the workload's description.

| case | expectation |
|---|---|
| `initial` in a document / `--initial h100=3,l40s=0` | the variants named start there |
| unknown variant, count outside [min, max], with warm_start, bad text | one line naming the field |
| explicit `initial_replicas` outside [min, max] | one line; a preset's implicit 1 is not |
| `warm_fleet` | cheapest mix covering the peak 60-s rate of the first start-up delay + 300 s |
| `settings.request_timeout` / `--request-timeout` | seconds > 0 and finite, else one line |
| `describe_workload` | names the trace file or the synthetic preset and what changes them |
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from llmscaler.sim import simulate
from llmscaler.sim.scenario import loader
from llmscaler.sim.scenario.document import (
    DEFAULT_DOCUMENT,
    ScenarioError,
    WorkloadModel,
    describe_workload,
    parse_initial,
    with_overrides,
)
from llmscaler.sim.scenario.setup import warm_fleet
from llmscaler.sim.scenario.validated import Scenario
from llmscaler.sim.vocabulary import Trace


def document(**changes: Any) -> dict[str, Any]:
    doc = copy.deepcopy(DEFAULT_DOCUMENT)
    doc.update(changes)
    return doc


def starts(setup: Scenario) -> dict[str, int]:
    return {v.name: v.initial_replicas for v in setup.variants}


def test_by_default_every_variant_starts_with_one_replica() -> None:
    assert starts(loader.default()) == {'h100': 1, 'l40s': 1}
    assert not loader.default().warm_start


def test_initial_sets_the_start_fleet_of_the_variants_it_names() -> None:
    setup = loader.from_document(document=document(initial={'h100': 3}))
    assert starts(setup) == {'h100': 3, 'l40s': 1}
    overridden = with_overrides(document=DEFAULT_DOCUMENT, initial='h100=3, l40s=0')
    assert overridden['initial'] == {'h100': 3, 'l40s': 0}
    assert starts(loader.from_document(document=overridden)) == {'h100': 3, 'l40s': 0}
    # The command line replaces the document's `initial` as a whole.
    both = with_overrides(document=document(initial={'h100': 2, 'l40s': 2}), initial='l40s=4')
    assert starts(loader.from_document(document=both)) == {'h100': 1, 'l40s': 4}


@pytest.mark.parametrize(
    ('changes', 'expected'),
    [
        ({'initial': {'a100': 1}}, 'where: initial.a100: no such variant; variants: h100, l40s'),
        ({'initial': {'h100': 9}}, 'where: initial.h100: 9 is outside [0, 8]'),
        ({'initial': {'h100': -1}}, 'where: initial.h100: Input should be greater than or equal'),
        ({'initial': {'h100': 2}, 'warm_start': True}, 'give initial or warm_start, not both'),
        (
            {'variants': [{'name': 'h100', 'preset': 'llama-3.1-8b-h100', 'initial_replicas': 3,
                           'max_replicas': 2}]},
            'where: variants.0.initial_replicas: 3 is outside [0, 2]',
        ),
        (
            {'variants': [{'name': 'h100', 'preset': 'llama-3.1-8b-h100', 'initial_replicas': 1,
                           'min_replicas': 2}]},
            'variants.0.initial_replicas: 1 is outside [2, 10]',
        ),
        ({'warm_start': 'yes please'}, 'warm_start: Input should be a valid boolean'),
    ],
)  # fmt: skip
def test_bad_start_fleets_give_one_line(changes: dict[str, Any], expected: str) -> None:
    with pytest.raises(ScenarioError) as caught:
        loader.from_document(document=document(**changes), where='where')
    assert '\n' not in str(caught.value)
    assert expected in str(caught.value)


def test_the_implicit_start_of_a_preset_is_not_checked_against_the_bounds() -> None:
    # As before: a variant whose minimum is above the preset's 1 starts at 1 and is scaled up.
    setup = loader.from_document(
        document=document(
            variants=[{'name': 'h100', 'preset': 'llama-3.1-8b-h100', 'min_replicas': 2}],
            policies=['default'],
        )
    )
    assert starts(setup) == {'h100': 1}


@pytest.mark.parametrize(
    ('text', 'expected'),
    [
        ('h100', 'expected VARIANT=N[,VARIANT=N...]'),
        ('=3', 'expected VARIANT=N'),
        ('h100=x', 'h100: replicas must be a whole number >= 0'),
        ('h100=-1', 'h100: replicas must be a whole number >= 0'),
        ('h100=1.5', 'h100: replicas must be a whole number >= 0'),
        ('h100=1,h100=2', 'h100: given twice'),
        ('h100=1,', 'expected VARIANT=N'),
    ],
)
def test_bad_initial_text_gives_one_line(text: str, expected: str) -> None:
    with pytest.raises(ScenarioError) as caught:
        parse_initial(text=text)
    message = str(caught.value)
    assert message.startswith('--initial: ')
    assert expected in message


def test_warm_start_is_set_from_the_command_line() -> None:
    setup = loader.from_document(
        document=with_overrides(document=DEFAULT_DOCUMENT, warm_start=True)
    )
    assert setup.warm_start


def arrivals_at(*spans: tuple[float, float, float]) -> Trace:
    """A trace with `rate` req/s evenly over each [start, start + length)."""
    times = np.sort(
        np.concatenate(
            [start + np.arange(int(rate * length)) / rate for start, length, rate in spans]
        )
    )
    n = times.shape[0]
    return Trace(
        name='spans',
        arrivals=times,
        input_tokens=np.full(n, 100, dtype=np.int64),
        output_tokens=np.full(n, 100, dtype=np.int64),
    )


def test_the_warm_fleet_covers_the_peak_of_the_first_startup_delay_and_five_minutes() -> None:
    variants = loader.default().variants  # H100 $3.90/h, L40S $1.90/h; start-up 90 s
    capacities = {'h100': 4.0, 'l40s': 1.5}
    # 10 req/s for the first 100 s, then a burst of 50 req/s at 1000 s: too late to count
    # (windows starting within 90 + 300 s do).
    early = arrivals_at((0.0, 100.0, 10.0), (1000.0, 60.0, 50.0))
    fleet = warm_fleet(variants=variants, workload=early, capacities=capacities)
    # 10 req/s at least cost: 1 × H100 (4) + 4 × L40S (6) = $11.50/h; 3 × H100 = $11.70/h,
    # 2 + 2 = $11.60/h, 2 + 1 falls short (9.5).
    assert fleet == {'h100': 1, 'l40s': 4}
    # A 20 req/s burst whose first window starts at 380 s (< 390) counts.
    burst = arrivals_at((0.0, 100.0, 10.0), (380.0, 60.0, 20.0))
    bigger = warm_fleet(variants=variants, workload=burst, capacities=capacities)
    assert bigger['h100'] * 4.0 + bigger['l40s'] * 1.5 >= 20.0
    # Nothing in the first minutes: every variant at its minimum.
    quiet = arrivals_at((1000.0, 60.0, 5.0))
    assert warm_fleet(variants=variants, workload=quiet, capacities=capacities) == {
        'h100': 0,
        'l40s': 0,
    }


def test_a_warm_start_run_starts_every_policy_at_the_warm_fleet() -> None:
    doc = with_overrides(
        document=DEFAULT_DOCUMENT,
        duration=300.0,
        rate_scale=3.0,
        warm_start=True,
        policies=['static:1'],
    )
    outcome = simulate.run(setup=loader.from_document(document=doc), out=None, progress=False)
    assert outcome.setup is not None
    assert outcome.capacities is not None
    workload = outcome.workload
    expected = warm_fleet(
        variants=loader.from_document(document=doc).variants,
        workload=workload,
        capacities=outcome.capacities,
    )
    assert starts(outcome.setup) == expected
    (result,) = outcome.results
    assert {v: series[0] for v, series in result.timeline.replicas.items()} == expected
    # Three times the built-in load (39 req/s on average) needs more than the cold start's
    # one replica of each.
    assert sum(n * outcome.capacities[v] for v, n in expected.items()) >= 39.0


def test_request_timeout_setting() -> None:
    doc = with_overrides(document=DEFAULT_DOCUMENT, request_timeout=90.0)
    assert doc['settings'] == {'request_timeout': 90.0}
    assert loader.from_document(document=doc).settings.request_timeout == 90.0
    assert loader.default().settings.request_timeout is None


@pytest.mark.parametrize(
    ('value', 'expected'),
    [
        (0, 'settings.request_timeout must be > 0 and finite'),
        (-5, 'settings.request_timeout must be > 0 and finite'),
        (float('inf'), 'settings.request_timeout must be > 0 and finite'),
        ('soon', 'settings.request_timeout: Input should be a valid number'),
    ],
)
def test_bad_request_timeout_gives_one_line(value: object, expected: str) -> None:
    with pytest.raises(ScenarioError) as caught:
        loader.from_document(document=document(settings={'request_timeout': value}), where='f')
    assert str(caught.value).startswith('f: ')
    assert expected in str(caught.value)


def test_describe_workload() -> None:
    assert loader.default().workload_text == 'synthetic azure-conv at 13 req/s, 2 rate events'
    traced = with_overrides(
        document=DEFAULT_DOCUMENT,
        trace_path='/data/AzureLLMInferenceTrace_conv.csv',
        rate_scale=4.0,
        start=60.0,
        duration=1800.0,
    )
    workload = WorkloadModel.model_validate(traced['workload'])
    assert describe_workload(workload=workload) == (
        'trace AzureLLMInferenceTrace_conv.csv ×4, from 60 s, for 1800 s'
    )
    plain = WorkloadModel.model_validate({'trace': {'path': Path('t.jsonl').as_posix()}})
    assert describe_workload(workload=plain) == 'trace t.jsonl'
    synthetic = WorkloadModel.model_validate(
        {'synthetic': {'preset': 'azure-code', 'diurnal': True, 'events': [[0, 10, 2]]}}
    )
    assert describe_workload(workload=synthetic) == 'synthetic azure-code, diurnal, 1 rate event'
