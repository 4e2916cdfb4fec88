"""Tests of the simulator's summary figures, worked by hand on a six-request run."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmscaler.sim.report.summary import grouped_percentile, per_minute, summarize, summarize_all
from llmscaler.sim.vocabulary import SLO, Failure, SimRequest
from tests.support.sim_fixtures import NAN, SLO_1, empty_result, req, tiny_result


def test_costs_hours_and_replicas() -> None:
    s = summarize(result=tiny_result(), slo=SLO_1)
    # cost = 2 h × $6 + 1.5 h × $1.5 = 12 + 2.25; GPU hours = 2 h × 2 + 1.5 h × 1.
    assert s.cost_usd == pytest.approx(14.25)
    assert s.gpu_hours == pytest.approx(5.5)
    assert s.replica_hours == {'a': 2.0, 'b': 1.5}
    assert list(s.replica_hours) == ['a', 'b']
    # (7200 + 5400) replica-seconds over 3600 s.
    assert s.mean_replicas == pytest.approx(3.5)
    assert s.cost_vs_reference is None
    assert (s.policy, s.trace, s.duration) == ('default', 'tiny', 3600.0)
    assert s.tail_cost_usd == 0.0


def test_the_tail_after_the_work_is_reported_not_charged() -> None:
    result = replace(
        tiny_result(duration=4000.0),
        charged_until=3200.0,
        tail_replica_seconds={'a': 1600.0, 'b': 800.0},
    )
    s = summarize(result=result, slo=SLO_1)
    assert s.cost_usd == pytest.approx(14.25)
    # 1600 s of 'a' at $6/h and 800 s of 'b' at $1.5/h.
    assert s.tail_cost_usd == pytest.approx(6.0 * 1600 / 3600 + 1.5 * 800 / 3600)
    # The mean is over the charged time, like the cost.
    assert s.mean_replicas == pytest.approx((7200.0 + 5400.0) / 3200.0)
    assert s.duration == 4000.0


def test_outcomes_percentiles_and_attainment() -> None:
    s = summarize(result=tiny_result(), slo=SLO_1)
    assert (s.requests, s.completed, s.failed, s.incomplete) == (6, 4, 1, 1)
    # TTFTs sorted [0.2, 0.5, 0.8, 2.0]; 'linear' rank (n − 1)·q:
    # p50 rank 1.5 → 0.5 + 0.5·0.3 = 0.65; p90 rank 2.7 → 0.8 + 0.7·1.2 = 1.64;
    # p99 rank 2.97 → 0.8 + 0.97·1.2 = 1.964.
    assert s.ttft_p50 == pytest.approx(0.65)
    assert s.ttft_p90 == pytest.approx(1.64)
    assert s.ttft_p99 == pytest.approx(1.964)
    # ITLs (r3 has one token, none) sorted [0.05, 0.05, 0.2]: p50 rank 1 → 0.05;
    # p90 rank 1.8 → 0.05 + 0.8·0.15 = 0.17; p99 rank 1.98 → 0.05 + 0.98·0.15 = 0.197.
    assert s.itl_p50 == pytest.approx(0.05)
    assert s.itl_p90 == pytest.approx(0.17)
    assert s.itl_p99 == pytest.approx(0.197)
    # r0 and r3 meet the SLO; the failed and the incomplete request count as misses: 2 / 6.
    assert s.slo_attainment == pytest.approx(2 / 6)
    # Output tokens of completed requests: 11 + 5 + 3 + 1 = 20 over 3600 s.
    assert s.throughput == pytest.approx(20 / 3600)


def test_scale_event_counts() -> None:
    s = summarize(result=tiny_result(), slo=SLO_1)
    # up 1→2, down 2→1, and a 1→1 event that counts as an event only.
    assert (s.scale_events, s.scale_ups, s.scale_downs) == (3, 1, 1)


def test_reference_ratio() -> None:
    assert summarize(result=tiny_result(), slo=SLO_1, reference_cost=28.5).cost_vs_reference == (
        pytest.approx(0.5)
    )
    assert summarize(result=tiny_result(), slo=SLO_1, reference_cost=0.0).cost_vs_reference == (
        math.inf
    )
    free = tiny_result(replica_seconds={})
    ratio = summarize(result=free, slo=SLO_1, reference_cost=0.0).cost_vs_reference
    assert ratio is not None
    assert math.isnan(ratio)


def test_empty_result_gives_nans_and_zeros() -> None:
    s = summarize(result=empty_result(), slo=SLO_1, reference_cost=10.0)
    assert (s.requests, s.completed, s.failed, s.incomplete) == (0, 0, 0, 0)
    assert (s.cost_usd, s.gpu_hours, s.scale_events) == (0.0, 0.0, 0)
    assert s.replica_hours == {'a': 0.0, 'b': 0.0}
    assert s.cost_vs_reference == 0.0
    for value in (s.ttft_p50, s.ttft_p99, s.itl_p90, s.slo_attainment):
        assert math.isnan(value)
    # Zero duration: no rate can be given.
    assert math.isnan(s.throughput)
    assert math.isnan(s.mean_replicas)


def test_only_failures_give_nan_percentiles_and_zero_attainment() -> None:
    result = tiny_result(requests=[req(0, 1.0, failed=True), req(1, 2.0, failed=True)])
    s = summarize(result=result, slo=SLO_1)
    assert (s.completed, s.failed, s.slo_attainment, s.throughput) == (0, 2, 0.0, 0.0)
    assert math.isnan(s.ttft_p50)
    assert math.isnan(s.itl_p99)


def test_failed_flag_wins_over_a_finish_time() -> None:
    result = tiny_result(requests=[req(0, 0.0, first=0.1, finished=0.2, failed=True)])
    s = summarize(result=result, slo=SLO_1)
    assert (s.completed, s.failed, s.incomplete, s.slo_attainment) == (0, 1, 0, 0.0)


def test_completed_without_first_token_misses_and_is_not_a_percentile() -> None:
    # r1 finished but has no first-token time: completed, NaN TTFT, a miss.
    result = tiny_result(
        requests=[req(0, 0.0, first=0.4, finished=0.5), req(1, 0.0, finished=3.0)],
    )
    s = summarize(result=result, slo=SLO_1)
    assert s.completed == 2
    assert s.ttft_p50 == pytest.approx(0.4)
    assert s.slo_attainment == pytest.approx(0.5)


def test_nan_slo_is_never_met_and_infinite_slo_always() -> None:
    result = tiny_result()
    assert summarize(result=result, slo=SLO(ttft=NAN, itl=NAN)).slo_attainment == 0.0
    # Every completed request passes: 4 of 6.
    loose = summarize(result=result, slo=SLO(ttft=math.inf, itl=math.inf))
    assert loose.slo_attainment == pytest.approx(4 / 6)


def test_unpriceable_or_negative_replica_seconds_raise() -> None:
    with pytest.raises(ValueError, match='unknown variants'):
        summarize(result=tiny_result(replica_seconds={'zz': 1.0}), slo=SLO_1)
    with pytest.raises(ValueError, match='negative'):
        summarize(result=tiny_result(replica_seconds={'a': -1.0}), slo=SLO_1)


def test_nan_replica_seconds_make_the_cost_nan() -> None:
    s = summarize(result=tiny_result(replica_seconds={'a': NAN}), slo=SLO_1)
    assert math.isnan(s.cost_usd)


def test_summarize_all_uses_the_reference_policy_cost() -> None:
    cheap = tiny_result('clairvoyant', replica_seconds={'b': 3600.0})  # $1.50
    dear = tiny_result('static:3')  # $14.25
    summaries = summarize_all(results=[dear, cheap], slo=SLO_1)
    assert [s.policy for s in summaries] == ['static:3', 'clairvoyant']
    assert summaries[0].cost_vs_reference == pytest.approx(14.25 / 1.5)
    assert summaries[1].cost_vs_reference == pytest.approx(1.0)


def test_summarize_all_without_reference_gives_no_ratio() -> None:
    summaries = summarize_all(results=[tiny_result('a'), tiny_result('b')], slo=SLO_1)
    assert [s.cost_vs_reference for s in summaries] == [None, None]
    other = summarize_all(
        results=[tiny_result('a'), tiny_result('b', replica_seconds={'b': 3600.0})],
        slo=SLO_1,
        reference='b',
    )
    assert other[0].cost_vs_reference == pytest.approx(14.25 / 1.5)
    assert summarize_all(results=[], slo=SLO_1) == []


def test_per_minute_by_hand() -> None:
    series = per_minute(result=tiny_result())
    # 3600 s → 60 minutes; r0..r3 arrive in minute 0, r4 (failed) in 1, r5 (incomplete) in 58.
    assert {len(v) for v in series.values()} == {60}
    assert series['start'][:3].tolist() == [0.0, 60.0, 120.0]
    assert series['arrivals'][[0, 1, 58]].tolist() == [4.0, 1.0, 1.0]
    assert series['arrivals'].sum() == 6.0
    assert series['completed'][0] == 4.0
    assert series['completed'].sum() == 4.0
    assert series['failed'][1] == 1.0
    # Minute 0 holds all four completed TTFTs: p99 = 1.964 as in the summary.
    assert series['ttft_p99'][0] == pytest.approx(1.964)
    assert math.isnan(series['ttft_p99'][1])
    assert math.isnan(series['ttft_p99'][58])


def test_per_minute_covers_late_early_and_unknown_arrivals() -> None:
    requests = [
        req(0, -5.0, first=-4.0, finished=-3.0),
        req(1, 150.0, first=151.0, finished=152.0),
        req(2, NAN),
    ]
    series = per_minute(result=tiny_result(requests=requests, duration=60.0))
    # Duration says one minute; the arrival at 150 s stretches the series to minute 2.
    assert series['arrivals'].tolist() == [1.0, 0.0, 1.0]
    assert series['ttft_p99'][2] == pytest.approx(1.0)


def test_per_minute_empty() -> None:
    assert all(len(v) == 0 for v in per_minute(result=empty_result()).values())
    quiet = tiny_result(requests=[], duration=120.0)
    series = per_minute(result=quiet)
    assert series['arrivals'].tolist() == [0.0, 0.0]
    assert np.isnan(series['ttft_p99']).all()


@settings(max_examples=200, deadline=None)
@given(
    pairs=st.lists(
        st.tuples(st.integers(0, 4), st.floats(-1e3, 1e3, allow_nan=False)), max_size=40
    ),
    q=st.sampled_from([0.0, 1.0, 37.5, 50.0, 90.0, 99.0, 100.0]),
)
def test_grouped_percentile_equals_numpy_per_group(
    pairs: list[tuple[int, float]], q: float
) -> None:
    groups = np.array([g for g, _ in pairs], dtype=np.int64)
    values = np.array([v for _, v in pairs], dtype=np.float64)
    got = grouped_percentile(groups=groups, values=values, n_groups=5, q=q)
    for g in range(5):
        members = values[groups == g]
        if members.size == 0:
            assert math.isnan(got[g])
        else:
            assert got[g] == np.percentile(members, q, method='linear')


@st.composite
def requests_strategy(draw: st.DrawFn) -> list[SimRequest]:
    out = []
    for rid in range(draw(st.integers(0, 12))):
        arrival = draw(st.floats(0.0, 600.0))
        kind = draw(st.sampled_from(['done', 'failed', 'open']))
        tokens = draw(st.integers(1, 50))
        ttft = draw(st.floats(0.0, 5.0))
        itl = draw(st.floats(0.0, 0.5))
        first = arrival + ttft if kind != 'failed' else NAN
        finished = first + itl * (tokens - 1) if kind == 'done' else NAN
        out.append(
            req(rid, arrival, out=tokens, first=first, finished=finished, failed=kind == 'failed')
        )
    return out


@settings(max_examples=100, deadline=None)
@given(
    requests=requests_strategy(),
    ttft=st.floats(0.0, 6.0),
    itl=st.floats(0.0, 0.6),
    extra=st.floats(0.0, 2.0),
)
def test_summary_invariants(
    requests: list[SimRequest], ttft: float, itl: float, extra: float
) -> None:
    result = tiny_result(requests=requests)
    s = summarize(result=result, slo=SLO(ttft=ttft, itl=itl))
    assert s.completed + s.failed + s.incomplete == s.requests == len(requests)
    if s.requests:
        assert 0.0 <= s.slo_attainment <= s.completed / s.requests
    if s.completed:
        assert s.ttft_p50 <= s.ttft_p90 <= s.ttft_p99
    # A looser SLO never attains less.
    looser = summarize(result=result, slo=SLO(ttft=ttft + extra, itl=itl + extra))
    if s.requests:
        assert looser.slo_attainment >= s.slo_attainment
    minutes = per_minute(result=result)
    assert minutes['arrivals'].sum() == s.requests
    assert minutes['completed'].sum() == s.completed


def test_failures_are_counted_by_reason() -> None:
    requests = [
        req(0, 0.0, failed=True),
        req(1, 1.0, failed=True),
        req(2, 2.0, failed=True),
        req(3, 3.0, failed=True),
        req(4, 4.0, failed=True),
        req(5, 5.0, first=5.1, finished=5.2),
    ]
    reasons: tuple[Failure, ...] = (
        'queue-timeout', 'replica-timeout', 'replica-timeout', 'rejected', '',
    )  # fmt: skip
    for request, reason in zip(requests, reasons, strict=False):
        request.failure = reason
    s = summarize(result=tiny_result(requests=requests), slo=SLO_1)
    assert (s.failed, s.completed) == (5, 1)
    # The one without a recorded reason is in `failed` only.
    assert (s.failed_queue_timeout, s.failed_replica_timeout, s.failed_rejected) == (1, 2, 1)
    none = summarize(result=tiny_result(requests=[req(0, 0.0, first=0.1, finished=0.2)]), slo=SLO_1)
    assert (none.failed_queue_timeout, none.failed_replica_timeout, none.failed_rejected) == (
        0,
        0,
        0,
    )
