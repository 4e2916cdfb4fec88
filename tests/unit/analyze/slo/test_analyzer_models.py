"""`analyze.slo.analyzer` under each performance model: three parameters by default, four when
configured; configured seeds in the model's form; a record of the other model restarts."""

from __future__ import annotations

import dataclasses

from llmscaler.analyze.slo import analyzer
from llmscaler.config.resolved import FOUR_PARAMETER, QueueingModelConfig
from llmscaler.domain.snapshot import Snapshot
from llmscaler.domain.state import KalmanRecord
from tests.support.predictive_fixtures import NOW, fleet

THREE = (('H100', (6.0, 0.04, 0.0001)), ('L40S', (15.0, 0.1, 0.0003)))
FOUR = (('H100', (8.0, 0.05, 20.0, 0.0006)), ('L40S', (20.0, 0.15, 50.0, 0.0015)))


def run(
    config: QueueingModelConfig, records: dict[str, KalmanRecord] | None = None
) -> analyzer.SloAnalysis:
    snap: Snapshot = fleet(h100=2, l40s=1, rate=6.0)
    return analyzer.analyze(
        variants=snap.variants,
        replicas=snap.replicas,
        pool=None,
        config=config,
        records=records or {},
        now=NOW,
        interval=30.0,
    )


def test_the_default_model_sizes_on_three_configured_parameters() -> None:
    got = run(QueueingModelConfig(target_ttft=2000.0, target_itl=60.0, perf_parms=THREE))
    assert {len(r.x) for r in got.kalman_updates.values()} == {3}
    assert {r.seed for r in got.kalman_updates.values()} == {v for _, v in THREE}
    figures = dict(got.variant_figures['h100'])
    assert 'perf_gamma' in figures
    assert 'perf_delta' not in figures
    assert figures['max_rate_per_replica'] > 0


def test_four_parameters_when_configured() -> None:
    config = QueueingModelConfig(
        target_ttft=2000.0, target_itl=60.0, perf_parms=FOUR, performance_model=FOUR_PARAMETER
    )
    got = run(config)
    assert {r.seed for r in got.kalman_updates.values()} == {v for _, v in FOUR}
    assert 'perf_delta' in dict(got.variant_figures['h100'])


def test_a_record_of_the_other_model_restarts_and_a_mismatched_seed_is_not_used() -> None:
    four = QueueingModelConfig(
        target_ttft=2000.0, target_itl=60.0, perf_parms=FOUR, performance_model=FOUR_PARAMETER
    )
    learnt = run(four).kalman_updates
    # The three-parameter model with four-parameter perfParms (a merge of entries can give
    # them): the seeds are not this model's, and the four-parameter records restart.
    three = dataclasses.replace(four, performance_model='three-parameter')
    got = run(three, learnt)
    assert {len(r.x) for r in got.kalman_updates.values()} == {3}
    assert all(r.seed not in {v for _, v in FOUR} for r in got.kalman_updates.values())
    assert 'tuner restarted: performance model is three-parameter' in got.notes['h100']
