"""`analyze.slo.workload`: arrival-weighted means over busy replicas, per variant and per
model."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmscaler.analyze.slo import workload
from llmscaler.domain.snapshot import ReplicaMetrics

# Rates of 0 (idle replicas), figures sometimes missing: every branch of the means.
figure = st.one_of(st.none(), st.floats(min_value=0.0, max_value=1e4))
replica_figures = st.tuples(
    st.one_of(st.none(), st.just(0.0), st.floats(min_value=1e-6, max_value=1e3)),
    figure,
    st.one_of(st.none(), st.floats(min_value=1.0, max_value=1e4)),
    figure,
    figure,
    figure,
)


def replicas_of(rows: list[tuple[float | None, ...]], variant: str) -> list[ReplicaMetrics]:
    return [
        ReplicaMetrics(
            pod=f'{variant}-{i}',
            variant=variant,
            namespace='ns',
            observed_at=0.0,
            arrival_rate=rate,
            avg_input_tokens=tokens_in,
            avg_output_tokens=tokens_out,
            avg_ttft=ttft,
            avg_itl=itl,
            running_requests=running,
        )
        for i, (rate, tokens_in, tokens_out, ttft, itl, running) in enumerate(rows)
    ]


# Every figure reported (the common case, summed without joining the columns) or not.
value = st.floats(min_value=0.0, max_value=1e4)
complete = st.tuples(
    st.one_of(st.just(0.0), st.floats(min_value=1e-6, max_value=1e3)),
    value,
    st.floats(min_value=1.0, max_value=1e4),
    value,
    value,
    st.one_of(st.none(), value),
)
variants = st.lists(
    st.lists(st.one_of(complete, replica_figures), max_size=6), min_size=1, max_size=4
) | st.lists(st.lists(complete, max_size=6), min_size=1, max_size=4)


@given(groups=variants)
def test_the_models_workload_is_the_joined_columns_to_the_last_bit(
    groups: list[list[tuple[float | None, ...]]],
) -> None:
    parts = [workload.columns(replicas_of(rows, f'v{k}')) for k, rows in enumerate(groups)]
    joined = workload.workload_of(workload.joined(parts), running=False)
    assert workload.joined_workload(parts) == joined
    assert joined.running is None


@given(rows=st.lists(replica_figures, max_size=8))
def test_the_running_mean_alone_is_the_workloads(rows: list[tuple[float | None, ...]]) -> None:
    columns = workload.columns(replicas_of(rows, 'v'))
    whole = workload.workload_of(columns)
    assert workload.running_mean(columns) == whole.running
    assert workload.workload_of(columns, running=False) == whole._replace(running=None)


@given(rows=st.lists(replica_figures, min_size=2, max_size=8), seed=st.integers(0, 2**16))
def test_the_means_do_not_depend_on_replica_order(
    rows: list[tuple[float | None, ...]], seed: int
) -> None:
    shuffled = list(rows)
    random.Random(seed).shuffle(shuffled)
    assert workload.workload(replicas_of(rows, 'v')) == workload.workload(
        replicas_of(shuffled, 'v')
    )


def test_means_are_weighted_by_arrival_rate_over_busy_replicas() -> None:
    rows: list[tuple[float | None, ...]] = [
        (1.0, 100.0, 10.0, 0.1, 0.01, 2.0),
        (3.0, 200.0, 20.0, 0.2, 0.02, None),
        (0.0, 900.0, 90.0, 0.9, 0.09, 9.0),  # idle: not counted
    ]
    got = workload.workload(replicas_of(rows, 'v'))
    assert (got.arrival_rate, got.busy) == (4.0, 2)
    assert got.avg_input_tokens == 175.0
    assert got.avg_output_tokens == 17.5
    assert got.ttft_ms == pytest.approx(175.0)  # seconds to milliseconds
    assert got.itl_ms == pytest.approx(17.5)
    assert got.running == 2.0  # only the replica that reports it
