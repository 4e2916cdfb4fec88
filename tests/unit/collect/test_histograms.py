"""Tests of the latency histograms: the folding shared by both sources, the Prometheus answers
folded into readings (through a loopback fake Prometheus), and the scraped windows' increase.

Every expected histogram is worked out by hand; `analyze.validity.histogram_violation` (the
core's rules) must accept every histogram the folding gives.
"""

from __future__ import annotations

import logging
import math
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmscaler.analyze.validity import histogram_violation
from llmscaler.collect.histograms import (
    HORIZON,
    TTFT_BUCKET,
    fold,
    parse_le,
    window_histogram,
    window_increase,
)
from llmscaler.collect.prometheus.source import PrometheusConfig
from llmscaler.collect.readings import ErrorReason
from llmscaler.collect.windows import SeriesWindow
from llmscaler.domain.snapshot import LatencyHistogram
from tests.support.fake_prometheus import LLAMA, FakePrometheus, read, reasons, sample, vector
from tests.support.fake_prometheus import prom as prom  # the fixture, shared

H = LatencyHistogram


def folded(*buckets: tuple[str, float | None], pod: str = 'ns/p') -> LatencyHistogram | None:
    return fold(pod=pod, family=TTFT_BUCKET, buckets=buckets)


# --- folding ----------------------------------------------------------------------------------


def test_buckets_fold_sorted_by_their_numeric_bound() -> None:
    # '10' sorts before '2.5' as text; '1e-1' is 0.1.
    got = folded(('10', 9.0), ('+Inf', 10.0), ('2.5', 7.0), ('1e-1', 1.0))
    assert got == H(bounds=(0.1, 2.5, 10.0), counts=(1.0, 7.0, 9.0), total=10.0)
    assert histogram_violation(got) == ''


def test_extrapolated_counts_are_made_non_decreasing_and_capped_at_the_total() -> None:
    # increase() extrapolates each series alone: 5.1 then 4.9, and 10.2 above a total of 10.
    got = folded(('0.5', 5.1), ('1', 4.9), ('2', 10.2), ('+Inf', 10.0))
    assert got == H(bounds=(0.5, 1.0, 2.0), counts=(5.1, 5.1, 10.0), total=10.0)
    assert histogram_violation(got) == ''


def test_series_of_one_bound_add_up_and_negative_reads_as_zero() -> None:
    # Two data-parallel engines; a tiny negative increase (float noise) is 0.
    got = folded(('1', 2.0), ('+Inf', 3.0), ('1', 1.5), ('+Inf', 4.0), ('0.5', -1e-12))
    assert got == H(bounds=(0.5, 1.0), counts=(0.0, 3.5), total=7.0)


def test_a_bound_at_or_below_zero_is_left_out() -> None:
    got = folded(('0', 1.0), ('-1', 0.0), ('0.25', 2.0), ('+Inf', 3.0))
    assert got == H(bounds=(0.25,), counts=(2.0,), total=3.0)
    assert histogram_violation(got) == ''


def test_only_the_inf_bucket_is_an_empty_but_valid_histogram() -> None:
    assert folded(('+Inf', 0.0)) == H(bounds=(), counts=(), total=0.0)


@pytest.mark.parametrize(
    ('buckets', 'said'),
    [
        ((('0.5', 1.0), ('1', 2.0)), 'no le="+Inf" bucket'),
        ((('0.5', 1.0), ('fast', 2.0), ('+Inf', 2.0)), "le='fast' is not a number"),
        ((('NaN', 1.0), ('+Inf', 2.0)), "le='NaN' is not a number"),
        ((('', 1.0), ('+Inf', 2.0)), "le='' is not a number"),
        ((('0.5', None), ('+Inf', 2.0)), "le='0.5' is not a finite number"),
        ((('0.5', 1.0), ('+Inf', math.inf)), "le='+Inf' is not a finite number"),
    ],
)
def test_a_malformed_answer_is_none_and_names_the_pod(
    buckets: tuple[tuple[str, float | None], ...], said: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger='llmscaler.collect.histograms'):
        assert folded(*buckets, pod='llm/pod-7') is None
    (record,) = caplog.records
    assert record.getMessage().startswith('llm/pod-7: vllm:time_to_first_token_seconds_bucket')
    assert said in record.getMessage()


def test_absent_series_are_none_without_a_word(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG):
        assert folded() is None
    assert caplog.records == []


def test_parse_le() -> None:
    assert [parse_le(t) for t in ('+Inf', 'Inf', '0.005', '2560.0', '1e3')] == [
        math.inf,
        math.inf,
        0.005,
        2560.0,
        1000.0,
    ]
    assert [parse_le(t) for t in (None, '', 'nan', 'x')] == [None, None, None, None]


BOUNDS = ('0.01', '0.1', '1', '10')


@given(
    st.lists(st.floats(0, 100), min_size=4, max_size=4),
    st.floats(0, 100),
    st.randoms(use_true_random=False),
)
def test_property_any_answer_folds_valid_and_in_any_order(
    counts: list[float], total: float, rng: random.Random
) -> None:
    buckets = [*zip(BOUNDS, counts, strict=True), ('+Inf', total)]
    got = folded(*buckets)
    assert got is not None
    assert histogram_violation(got) == ''
    assert got.total == total
    shuffled = list(buckets)
    rng.shuffle(shuffled)
    assert folded(*shuffled) == got


# --- the Prometheus source ------------------------------------------------------------------------


def buckets(value_by_le: dict[str, str], **labels: str) -> list[dict[str, object]]:
    return [sample(value, le=le, **labels) for le, value in value_by_le.items()]


async def test_prometheus_answers_fold_into_each_pods_histograms(prom: FakePrometheus) -> None:
    a0 = {'namespace': 'ns-a', 'pod': 'llama-0', 'model_name': LLAMA}
    a1 = {'namespace': 'ns-a', 'pod': 'llama-1', 'model_name': LLAMA}
    a2 = {'namespace': 'ns-a', 'pod': 'llama-2', 'model_name': LLAMA}
    prom.answer(
        'kv_cache_usage', vector(sample('0.5', **a0), sample('0.2', **a1), sample('0', **a2))
    )
    prom.answer('queue_length', vector(sample('0', **a0), sample('0', **a1), sample('0', **a2)))
    prom.answer(
        'ttft_histogram',
        vector(
            # llama-0: extrapolated counts, 6.1 above 6.0 below it, and an out-of-scope series.
            *buckets({'0.1': '6.1', '0.5': '6.0', '+Inf': '12.3'}, **a0),
            *buckets(
                {'0.1': '99', '+Inf': '99'}, namespace='ns-a', pod='llama-0', model_name='qwen'
            ),
            # llama-1: no +Inf series; llama-2: an le that is not a number.
            *buckets({'0.1': '1', '0.5': '2'}, **a1),
            *buckets({'0.1': '1', 'slow': '2', '+Inf': '2'}, **a2),
        ),
    )
    prom.answer('tpot_histogram', vector(*buckets({'0.025': '3', '+Inf': 'NaN'}, **a1)))
    reading = await read(PrometheusConfig(base_url=prom.url))
    assert 'ttft_histogram' not in reasons(reading)
    assert 'tpot_histogram' not in reasons(reading)
    got = {p.pod: (p.ttft_histogram, p.tpot_histogram) for p in reading.pods}
    assert got == {
        'llama-0': (H(bounds=(0.1, 0.5), counts=(6.1, 6.1), total=12.3), None),
        'llama-1': (None, None),  # no +Inf bucket; a NaN total
        'llama-2': (None, None),
    }


async def test_prometheus_without_the_families_gives_none_and_no_error(
    prom: FakePrometheus,
) -> None:
    a0 = {'namespace': 'ns-a', 'pod': 'llama-0', 'model_name': LLAMA}
    prom.answer('kv_cache_usage', vector(sample('0.5', **a0)))
    reading = await read(PrometheusConfig(base_url=prom.url))
    (pod,) = reading.pods
    assert (pod.ttft_histogram, pod.tpot_histogram) == (None, None)
    assert {'ttft_histogram', 'tpot_histogram'}.isdisjoint(reasons(reading))
    assert reasons(reading)['running'] is ErrorReason.PARTIAL_DATA  # the others do complain


# --- scraped windows ------------------------------------------------------------------------------


def window(*samples: tuple[float, float]) -> SeriesWindow:
    kept = SeriesWindow(horizon=HORIZON)
    for t, value in samples:
        kept.add(t=t, value=value)
    return kept


def test_window_increase_over_a_whole_minute() -> None:
    # Every 15 s from 990: (990, 1050] holds 1005..1050, 13 → 22 over 45 s, the first sample
    # 15 s after the start (within 1.1 steps): extrapolated to the whole minute, 9 × 60 / 45.
    counter = window(*((990.0 + 15 * i, 10.0 + 3 * i) for i in range(5)))
    assert window_increase(window=counter, now=1050.0) == pytest.approx(9 * 60 / 45)


def test_window_increase_is_none_for_part_of_a_minute_unless_the_counter_started_at_zero() -> None:
    # Scraping began at 1030, the counter had counted 500 before: 30 s of a minute.
    late = window((1030.0, 500.0), (1040.0, 510.0), (1050.0, 520.0))
    assert window_increase(window=late, now=1060.0) is None
    # A new server counting from 0 is measured (Prometheus caps the start there).
    fresh = window((1030.0, 0.0), (1040.0, 10.0), (1050.0, 20.0))
    assert window_increase(window=fresh, now=1060.0) == pytest.approx(20 * 30 / 20)
    assert window_increase(window=window((1050.0, 0.0)), now=1060.0) is None  # one sample


def test_window_increase_is_none_after_a_counter_reset_until_it_leaves_the_minute() -> None:
    counter = window(*((1000.0 + 10 * i, 100.0 + 10 * i) for i in range(7)))  # 1000..1060
    assert window_increase(window=counter, now=1060.0) == pytest.approx(50 * 60 / 50)
    for i in range(8):  # restarted: 0 at 1070
        counter.add(t=1070.0 + 10 * i, value=5.0 * i)
    assert window_increase(window=counter, now=1075.0) is None
    assert window_increase(window=counter, now=1119.0) is None  # 1060's 160 still in range
    # (1070, 1130]: 5 .. 30 every 10 s, the start 0 s before the first: 25 × 60 / 50.
    assert window_increase(window=counter, now=1130.0) == pytest.approx(25 * 60 / 50)


def test_window_histogram_sums_engines_and_needs_every_bucket() -> None:
    def engine(low: float, high: float) -> list[tuple[str | None, SeriesWindow]]:
        times = [1000.0 + 10 * i for i in range(7)]
        return [
            ('0.5', window(*((t, low * i) for i, t in enumerate(times)))),
            ('+Inf', window(*((t, high * i) for i, t in enumerate(times)))),
        ]

    got = window_histogram(
        pod='p', family=TTFT_BUCKET, series=engine(1, 2) + engine(2, 2), now=1060
    )
    # (1000, 1060] holds i = 1..6 of each counter (value × i): 5 steps seen over 50 s, the
    # start 10 s before the first (within 1.1 steps): 6 × value per series, engines added.
    assert got is not None
    assert got.bounds == (0.5,)
    assert got.counts == pytest.approx((6 * 1 + 6 * 2,))
    assert got.total == pytest.approx(6 * 2 + 6 * 2)
    stale = [*engine(1, 2), ('0.1', window((1000.0, 1.0)))]
    assert window_histogram(pod='p', family=TTFT_BUCKET, series=stale, now=1060) is None
    assert window_histogram(pod='p', family=TTFT_BUCKET, series=[], now=1060) is None
