"""Tests of the scheduler (EPP) queue demand (WVA v0.9.0's formula) with worked numbers."""

from __future__ import annotations

import math
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmscaler.analyze.saturation import scheduler_queue as sq
from llmscaler.domain.basics import Role
from llmscaler.domain.snapshot import PoolMetrics, ReplicaMetrics

NOW = 1_000_000.0


def replica(
    pod: str,
    *,
    inp: float | None = 100.0,
    out: float | None = 50.0,
    hit: float | None = None,
) -> ReplicaMetrics:
    return ReplicaMetrics(
        pod=pod,
        variant='v1',
        namespace='ns',
        observed_at=NOW,
        avg_input_tokens=inp,
        avg_output_tokens=out,
        prefix_cache_hit_rate=hit,
    )


def pool(size: float, size_bytes: float = 0.0) -> PoolMetrics:
    return PoolMetrics(
        model_id='m', namespace='ns', observed_at=NOW, queue_size=size, queue_bytes=size_bytes
    )


# --- workload averages ------------------------------------------------------------------------


def test_model_level_means_use_replicas_with_token_data() -> None:
    reps = [
        replica('a', inp=100.0, out=50.0, hit=0.5),
        replica('b', inp=300.0, out=150.0, hit=None),
        replica('c', inp=None, out=None, hit=0.9),  # no token data: not in the means
    ]
    averages = sq.workload_averages(replicas=reps)
    # Ī = 200, Ō = 100, h̄ = (0.5 + 0) / 2 = 0.25
    assert averages == sq.WorkloadAverages(avg_input=200.0, avg_output=100.0, hit_rate=0.25)
    queue = sq.scheduler_queue_demand(pool=pool(10), averages=averages)
    # input = 10 × 200 × 0.75 = 1500, output = 10 × 100 = 1000
    assert (queue.input_tokens, queue.output_tokens, queue.total) == (1500.0, 1000.0, 2500.0)


def test_no_token_data_gives_the_zero_defaults() -> None:
    assert sq.workload_averages(replicas=[]) == sq.WorkloadAverages(0.0, 0.0, 0.0)
    reps = [replica('a', inp=math.nan, out=-1.0, hit=0.5), replica('b', inp=0.0, out=math.inf)]
    assert sq.workload_averages(replicas=reps) == sq.WorkloadAverages()


def test_hit_rate_outside_unit_interval_counts_as_zero() -> None:
    # I and O are present on both: h̄ = (0 + 0.4) / 2 = 0.2 (the 1.5 is dropped to 0)
    reps = [replica('a', hit=1.5), replica('b', hit=0.4)]
    assert sq.workload_averages(replicas=reps).hit_rate == 0.2


def test_instance_with_only_an_output_length_counts() -> None:
    # 'b' has O only: Ī = (100 + 0) / 2 = 50, Ō = (50 + 150) / 2 = 100
    reps = [replica('a'), replica('b', inp=None, out=150.0)]
    averages = sq.workload_averages(replicas=reps)
    assert (averages.avg_input, averages.avg_output) == (50.0, 100.0)


def test_a_mean_whose_sum_exceeds_the_float_range_is_still_the_mean() -> None:
    # 2 × 1.79e308 overflows the sum, not the mean.
    huge = sys.float_info.max
    averages = sq.workload_averages(replicas=[replica('a', inp=huge), replica('b', inp=huge)])
    assert (averages.avg_input, averages.avg_output) == (huge, 50.0)


def test_a_demand_beyond_the_float_range_is_the_largest_float_not_zero() -> None:
    huge = sys.float_info.max
    averages = sq.WorkloadAverages(avg_input=huge, avg_output=huge)
    queue = sq.scheduler_queue_demand(pool=pool(10), averages=averages)
    assert (queue.input_tokens, queue.output_tokens, queue.total) == (huge, huge, huge)


# --- scheduler queue demand -------------------------------------------------------------------


def test_scheduler_queue_bytes_dominate() -> None:
    # Ī = 100, Ō = 50, h̄ = 0: input = max(20000/4, 10 × 100) × 1 = 5000, output = 10 × 50 = 500
    averages = sq.WorkloadAverages(avg_input=100.0, avg_output=50.0)
    queue = sq.scheduler_queue_demand(pool=pool(10, 20000), averages=averages)
    assert (queue.input_tokens, queue.output_tokens, queue.total) == (5000.0, 500.0, 5500.0)


def test_bytes_alone_without_a_queue_count() -> None:
    # q = 0 (NaN), b = 4000, h̄ = 0.5: input = max(4000/4, 0) × 0.5 = 500, output = 0 × 50 = 0
    averages = sq.WorkloadAverages(avg_input=100.0, avg_output=50.0, hit_rate=0.5)
    queue = sq.scheduler_queue_demand(pool=pool(math.nan, 4000), averages=averages)
    assert (queue.input_tokens, queue.output_tokens) == (500.0, 0.0)


@pytest.mark.parametrize(
    'bad', [None, pool(math.nan, math.nan), pool(-5, -100), pool(0, 0), pool(math.inf)]
)
def test_scheduler_queue_bad_or_empty_is_zero(bad: PoolMetrics | None) -> None:
    averages = sq.WorkloadAverages(avg_input=100.0, avg_output=50.0)
    assert sq.scheduler_queue_demand(pool=bad, averages=averages).total == 0.0


@pytest.mark.parametrize(
    ('role', 'expected'),
    # input 1000, output 500: prefill 1000; decode and both 1000 + 500 = 1500
    [('prefill', 1000.0), ('decode', 1500.0), ('both', 1500.0)],
)
def test_queue_share_per_role(role: Role, expected: float) -> None:
    assert sq.QueueDemand(input_tokens=1000.0, output_tokens=500.0).for_role(role) == expected


# --- properties -------------------------------------------------------------------------------

any_float = st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True))


@given(
    st.lists(st.tuples(any_float, any_float, any_float), max_size=5),
    st.one_of(st.none(), st.tuples(any_float, any_float)),
)
def test_demand_is_never_negative_nor_infinite(
    lengths: list[tuple[float | None, float | None, float | None]],
    queue: tuple[float | None, float | None] | None,
) -> None:
    reps = [replica(f'p{i}', inp=i_, out=o, hit=h) for i, (i_, o, h) in enumerate(lengths)]
    averages = sq.workload_averages(replicas=reps)
    assert 0.0 <= averages.hit_rate <= 1.0
    # NaN fails every comparison, so the chains also rule it out.
    assert 0.0 <= averages.avg_input < math.inf
    assert 0.0 <= averages.avg_output < math.inf
    epp = None if queue is None else pool(queue[0] or 0.0, queue[1] or 0.0)
    demand = sq.scheduler_queue_demand(pool=epp, averages=averages)
    for part in (demand.input_tokens, demand.output_tokens):
        assert 0.0 <= part < math.inf
    assert demand.for_role('prefill') <= demand.for_role('decode') == demand.total
