"""Figures and tables of a fleet of several models, and of a GPU inventory.

The tiny result of test_sim_metrics, with its two variants serving two models: 'a' (2 GPUs,
$6/h) serves model 'big', 'b' (1 GPU, $1.5/h) model 'small'; requests r0, r1, r3, r5 ask for
'big', r2 and r4 for 'small'.

| case | expectation |
|---|---|
| `summarize(model=M)` | M's requests, replica-hours and events only |
| an SLO per model | each request judged by its model's; the total counts them all |
| `summarize_models` | costs against the reference's cost for the same model |
| the model table | per policy: each model, then 'all'; the policy named once; equal columns |
| GPU figures | peak and mean bound GPUs, waits, the lines under the table |
"""

from __future__ import annotations

import dataclasses
import math

import pytest

from llmscaler.sim.report.summary import gpu_summary, summarize, summarize_models
from llmscaler.sim.report.table import gpu_lines, model_table_cells, table_cells
from llmscaler.sim.vocabulary import SLO, GpuWait, SimResult
from tests.support.sim_fixtures import SLO_1, tiny_result

BIG = {0, 1, 3, 5}


def two_models(policy: str = 'default') -> SimResult:
    result = tiny_result(policy)
    for request in result.requests:
        request.model = 'big' if request.rid in BIG else 'small'
    result.variants = tuple(
        dataclasses.replace(v, model='big' if v.name == 'a' else 'small', model_id=f'm-{v.name}')
        for v in result.variants
    )
    return result


def test_one_models_part() -> None:
    big = summarize(result=two_models(), slo=SLO_1, model='big')
    assert (big.requests, big.completed, big.failed, big.incomplete) == (4, 3, 0, 1)
    assert big.cost_usd == pytest.approx(2 * 6.0)
    assert big.replica_hours == {'a': 2.0}
    assert (big.scale_events, big.scale_ups, big.scale_downs) == (1, 1, 0)
    assert big.slo_attainment == pytest.approx(2 / 4)  # r0 and r3 met; r1 late; r5 open
    small = summarize(result=two_models(), slo=SLO_1, model='small')
    assert (small.requests, small.failed) == (2, 1)
    assert small.cost_usd == pytest.approx(1.5 * 1.5)


def test_each_request_is_judged_by_its_models_slo() -> None:
    # r1 (TTFT 2.0 s) meets a 3 s TTFT; r2 (ITL 0.2 s) meets a 0.5 s ITL.
    slos = {'big': SLO(ttft=3.0, itl=0.1), 'small': SLO(ttft=1.0, itl=0.5)}
    total = summarize(result=two_models(), slo=slos)
    assert total.slo_attainment == pytest.approx(4 / 6)  # r0 r1 r3 (big), r2 (small)
    assert summarize(result=two_models(), slo=slos, model='small').slo_attainment == 0.5
    one = summarize(result=two_models(), slo=SLO_1)
    assert one.slo_attainment == pytest.approx(2 / 6)
    with pytest.raises(ValueError, match="no SLO for model 'small'"):
        summarize(result=two_models(), slo={'big': SLO_1, 'other': SLO_1})


def test_per_model_costs_are_against_the_references_for_the_same_model() -> None:
    cheap = two_models('clairvoyant')
    cheap.replica_seconds = {'a': 3600.0, 'b': 3600.0}
    [first, reference] = summarize_models(results=[two_models(), cheap], slo=SLO_1)
    assert list(first) == ['big', 'small']
    assert first['big'].cost_vs_reference == pytest.approx(12.0 / 6.0)
    assert first['small'].cost_vs_reference == pytest.approx(2.25 / 1.5)
    assert reference['small'].cost_vs_reference == pytest.approx(1.0)


def test_the_model_table_has_each_model_then_the_total_per_policy() -> None:
    results = [two_models('default'), two_models('static:1')]
    results[1].requests[4].failure = 'queue-timeout'  # a reason column appears for everyone
    summaries = [summarize(result=r, slo=SLO_1) for r in results]
    by_model = summarize_models(results=results, slo=SLO_1)
    headers, rows = model_table_cells(summaries=summaries, model_summaries=by_model)
    assert headers[:3] == ['Policy', 'Model', 'Cost\n$']
    assert [row[:2] for row in rows] == [
        ['default', 'big'],
        ['', 'small'],
        ['', 'all'],
        ['static:1', 'big'],
        ['', 'small'],
        ['', 'all'],
    ]
    assert {len(row) for row in rows} == {len(headers)}
    assert 'Failed by reason\nqueue / replica / rejected' in headers
    assert rows[2][2:] == table_cells(summaries=summaries)[1][0][1:]


def test_gpu_figures_and_lines() -> None:
    result = two_models('keda-queue')
    assert gpu_summary(result=result) is None
    assert gpu_lines(results=[result]) == []
    result.inventory = {'X': 4}
    result.timeline.gpus = {'X': [3, 4, 4, 1]}
    result.gpu_waits = [
        GpuWait(variant='a', replica='a-0002', asked=30.0, bound=90.0, until=90.0),
        GpuWait(variant='b', replica='b-0003', asked=30.0, bound=math.nan, until=210.0),
    ]
    gpus = gpu_summary(result=result)
    assert gpus is not None
    assert (gpus.peak, gpus.mean) == ({'X': 4}, {'X': 3.0})
    assert (gpus.waited, gpus.never_bound) == (2, 1)
    assert (gpus.wait_seconds, gpus.longest_wait) == (240.0, 180.0)
    assert gpu_lines(results=[result]) == [
        'keda-queue: peak GPUs X 4/4; 2 replicas waited for GPUs, 4.0 min in all, longest '
        '3.0 min (1 never got them)'
    ]
    result.gpu_waits = []
    assert gpu_lines(results=[result]) == [
        'keda-queue: peak GPUs X 4/4; no replica waited for GPUs'
    ]
