"""Tests of the pod-scraping source's figures, computed from windows filled by hand.

Windows are filled the way a successful scrape fills them (`feed`, in tests.support.scrape_pages):
every sample of a parsed page but `_created` series and the histogram buckets no figure reads, at
chosen `now` values. Pages come from the real example page (a page captured from a vLLM server,
placed beside the repository; values substituted per scrape) and from
`prometheus_client.generate_latest` of private registries. Every window figure below is worked out
by hand from the Prometheus rules in `collect.windows` (left-open range, extrapolation to the range
edges).
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Gauge, Histogram, generate_latest

from llmscaler.collect.readings import ErrorReason, ModelScope, Reading, SourceError
from llmscaler.collect.scrape.gateway import LOOKBACK
from llmscaler.collect.scrape.reading import compute_reading
from tests.support.scrape_pages import (
    MODEL,
    NS,
    SCOPE,
    TIMES,
    Pods,
    check_gateway_figures,
    epp_page,
    epp_pages,
    example_page,
    feed,
    read,
    scrape_values,
    scraped,
)

# --- the registry's figures -----------------------------------------------------------------------


def test_window_figures_match_the_registry_queries() -> None:
    pods = scraped(lambda i: {'p1': example_page(scrape_values(i))})
    reading = read(pods, now=1045.0)
    (pod,) = reading.pods
    assert (pod.namespace, pod.pod, pod.model_name, pod.observed_at) == (NS, 'p1', MODEL, 1045.0)
    assert pod.labels == (('model_name', MODEL),)
    # max_over_time[1m] at 1045 holds (985, 1045]: all four samples
    assert pod.kv_usage == 0.9
    assert pod.queue_length == 3.0
    assert pod.running_requests == 38.0  # instant: the newest sample
    assert (pod.num_gpu_blocks, pod.block_size) == (27863, 16)  # the page's cache_config_info
    # 5-min rates at 1045: range (745, 1045], samples at 1000..1045, sampled 45 s, step 15 s;
    # the gap to the range start (255 s) is over 1.1 steps, so half a step (7.5 s) is added.
    # prompt sum: raw 900, increase 900 × 52.5 / 45 = 1050; count: raw 6, 6 × 52.5/45 = 7
    assert pod.avg_input_tokens == pytest.approx(150.0)  # (1050/300) / (7/300)
    assert pod.avg_output_tokens == pytest.approx(30.0)  # raw 180 / raw 6, same factor
    assert pod.prefix_cache_hit_rate == pytest.approx(0.3)  # raw 180 / raw 600
    # 1-min rates at 1045: range (985, 1045], the 15 s gap to the start is kept in full
    assert pod.avg_ttft == pytest.approx(4.0 / 30.0)  # (14 − 10) / (130 − 100)
    assert pod.avg_itl == pytest.approx(6.0 / 300.0)
    # No gateway scraped: the pod's own admissions, TTFT count 100 → 130 over 45 s of the
    # minute, extrapolated in full (the counter's first sample is within 1.1 steps of 985).
    assert pod.arrival_rate == pytest.approx(30 * 60 / 45 / 60)
    assert reading.errors == ()
    assert reading.models == ()  # 45 s of scraping < the 60 s retention, and no gateway

    later = read(pods, now=1080.0).pods[0]
    # (1020, 1080] keeps the samples of 1030 and 1045 only
    assert (later.kv_usage, later.queue_length) == (0.4, 1.0)
    # ttft: raw sum 1.5, raw count 10 over the same span → 0.15
    assert later.avg_ttft == pytest.approx(0.15)
    assert later.running_requests == 38.0  # within the 5-min lookback

    # nothing in the last minute: no KV or queue series, so the pod is not reported
    assert read(pods, now=1106.0).pods == ()


def test_without_a_gateway_the_arrival_rate_is_the_pods_admissions_once_measured() -> None:
    """TTFT count 100, 110, 120, 130 at 1000..1045, counting before scraping began: at 1030
    the minute (970, 1030] is seen from 1000 on only (Prometheus' rule: 20 × 37.5 / 30 / 60 =
    0.42/s for 0.67/s), so it is unknown; at 1045 the first sample is within 1.1 steps of the
    minute's start and the rate is measured."""
    pods = scraped(lambda i: {'p1': example_page(scrape_values(i))})
    assert [p.arrival_rate for p in read(pods, now=1030.0).pods] == [None]
    assert [p.arrival_rate for p in read(pods, now=1045.0).pods] == [pytest.approx(2 / 3)]
    # With a gateway scraped as well, its dispatches are the pods' arrival rates (1.5, 0.75).
    check_gateway_figures(read(scraped(epp_pages, kinds={'epp': 'epp'}), now=1045.0))


def test_instant_figures_need_the_last_page_and_the_lookback() -> None:
    pods: Pods = {}
    feed(pods, 'epp', epp_page(queue=[('0', MODEL, 4.0)], attempts=[]), now=1000.0, kind='epp')
    assert [m.queue_size for m in read(pods, now=1000.0 + LOOKBACK - 1).models] == [4.0]
    # LOOKBACK later the sample is out of the left-open range (1000, 1300]
    assert read(pods, now=1000.0 + LOOKBACK).models == ()

    pods = scraped(lambda i: {'p1': example_page(scrape_values(i))})
    pods[(NS, 'p1')].present_at = None  # what a failed scrape leaves
    (pod,) = read(pods, now=1045.0).pods
    assert pod.kv_usage == 0.9  # the window still holds its samples
    assert (pod.running_requests, pod.num_gpu_blocks, pod.block_size) == (None, None, None)


def test_the_old_name_generation_gives_the_same_figures() -> None:
    pods = scraped(lambda i: {'p1': example_page(scrape_values(i), old_names=True)})
    (pod,) = read(pods, now=1045.0).pods
    assert pod.kv_usage == 0.9  # vllm:gpu_cache_usage_perc
    assert pod.prefix_cache_hit_rate == pytest.approx(0.3)  # vllm:gpu_prefix_cache_*
    assert pod.avg_itl == pytest.approx(0.02)  # vllm:time_per_output_token_seconds


def test_the_new_name_wins_where_a_pod_exposes_both() -> None:
    old = b'vllm:gpu_cache_usage_perc{engine="0",model_name="%s"} 0.95\n' % MODEL.encode()
    pods: Pods = {}
    feed(pods, 'p1', example_page({'vllm:kv_cache_usage_perc': 0.5}) + old, now=1000.0)
    (pod,) = read(pods, now=1000.0).pods
    assert pod.kv_usage == 0.5  # `new or old` per engine, not the max of both


def test_new_names_win_for_the_ratios_too() -> None:
    labels = f'{{engine="0",model_name="{MODEL}"}}'

    def page(i: int) -> dict[str, bytes]:
        # vLLM 0.9.2-0.11 serve both generations; here the old series tell another story:
        # ITL 6 s over 30 tokens (0.2) and a prefix hit rate of 1.0
        old = (
            f'vllm:time_per_output_token_seconds_sum{labels} {50.0 + 2 * i}\n'
            f'vllm:time_per_output_token_seconds_count{labels} {1000.0 + 10 * i}\n'
            f'vllm:gpu_prefix_cache_hits_total{labels} {100.0 + 60 * i}\n'
            f'vllm:gpu_prefix_cache_queries_total{labels} {100.0 + 60 * i}\n'
        )
        return {'p1': example_page(scrape_values(i)) + old.encode()}

    (pod,) = read(scraped(page), now=1045.0).pods
    assert pod.avg_itl == pytest.approx(0.02)  # 6 / 300 from inter_token_latency_seconds
    assert pod.prefix_cache_hit_rate == pytest.approx(0.3)  # 180 / 600 from the new names


def test_an_idle_pod_has_no_averages_rather_than_zero() -> None:
    (pod,) = read(scraped(lambda i: {'p1': example_page(scrape_values(0))}), now=1045.0).pods
    # every counter stood still: rate(sum) / rate(count) is 0 / 0, NaN in PromQL
    assert (pod.avg_input_tokens, pod.avg_ttft, pod.avg_itl) == (None, None, None)
    assert pod.prefix_cache_hit_rate is None
    assert pod.kv_usage == 0.2


def test_data_parallel_engines_combine_like_the_queries() -> None:
    def page(i: int) -> dict[str, bytes]:
        registry = CollectorRegistry()
        labels = ['engine', 'model_name']
        kv = Gauge('vllm:kv_cache_usage_perc', 'kv', labels, registry=registry)
        waiting = Gauge('vllm:num_requests_waiting', 'w', labels, registry=registry)
        running = Gauge('vllm:num_requests_running', 'r', labels, registry=registry)
        prompt = Histogram(
            'vllm:request_prompt_tokens', 'p', labels, buckets=(100, 1000), registry=registry
        )
        info = Gauge(
            'vllm:cache_config_info',
            'c',
            ['block_size', 'engine', 'num_gpu_blocks'],
            registry=registry,
        )
        for engine, (usage, queue, run, blocks) in enumerate(
            [(0.6, 2.0, 10.0, '900'), (0.3, 5.0, 12.0, '1000')]
        ):
            kv.labels(str(engine), MODEL).set(usage)
            waiting.labels(str(engine), MODEL).set(queue)
            running.labels(str(engine), MODEL).set(run)
            info.labels('16', str(engine), blocks).set(1)
        # engine 0 finishes 2 requests of 100 tokens per scrape, engine 1 one of 400
        for _ in range(2 * i):
            prompt.labels('0', MODEL).observe(100)
        for _ in range(i):
            prompt.labels('1', MODEL).observe(400)
        return {'dp': generate_latest(registry)}

    (pod,) = read(scraped(page), now=1045.0).pods
    assert (pod.kv_usage, pod.queue_length, pod.running_requests) == (0.6, 5.0, 12.0)
    assert (pod.num_gpu_blocks, pod.block_size) == (900, 16)  # the smaller capacity
    # summed rates: tokens 200·3 + 400·3 = 1800 over 6 + 3 = 9 requests (same extrapolation
    # for every series, as each starts at 0 and the cap to_start = 0 applies to all)
    assert pod.avg_input_tokens == pytest.approx(1800.0 / 9.0)


def test_scope_selects_pods_by_namespace_and_model() -> None:
    unlabelled = b'vllm:num_requests_waiting 4\nvllm:kv_cache_usage_perc 0.1\n'
    pods: Pods = {}
    feed(pods, 'mine', example_page({}), now=1000.0)
    feed(pods, 'other-model', example_page({}, model='qwen'), now=1000.0)
    feed(pods, 'other-ns', example_page({}), now=1000.0, namespace='elsewhere')
    feed(pods, 'hinted', unlabelled, now=1000.0, hint=MODEL)
    reading = read(pods, now=1000.0)
    assert [(p.namespace, p.pod) for p in reading.pods] == [(NS, 'hinted'), (NS, 'mine')]
    hinted = reading.pods[0]
    assert (hinted.model_name, hinted.queue_length, hinted.kv_usage) == (MODEL, 4.0, 0.1)
    assert (hinted.running_requests, hinted.num_gpu_blocks) == (None, None)


def test_figures_of_two_models_on_one_pod_combine_by_max() -> None:
    qwen = b'vllm:kv_cache_usage_perc{engine="0",model_name="qwen"} 0.7\n'
    pods: Pods = {}
    feed(pods, 'p1', example_page({'vllm:kv_cache_usage_perc': 0.5}) + qwen, now=1000.0)
    scope = (*SCOPE, ModelScope(model_id='qwen', namespace=NS))
    (pod,) = read(pods, now=1000.0, scope=scope).pods
    assert (pod.kv_usage, pod.model_name) == (0.7, MODEL)  # max; the first model names the pod
    assert read(pods, now=1000.0).pods[0].kv_usage == 0.5  # qwen out of scope


# --- the gateway (EPP) ------------------------------------------------------------------------


def test_gateway_figures() -> None:
    pods = scraped(epp_pages, kinds={'epp': 'epp'})
    check_gateway_figures(read(pods, now=1045.0))


def test_arrival_rates_are_unknown_until_measured_over_a_whole_minute() -> None:
    """The scraper starts at 1000 on a gateway that had long been counting: p1 at 3600 (+30
    per 15 s, 2/s), p2 at 1800 (+15, 1/s); p3 starts at 1030 from 0 (+15, 1/s). Prometheus'
    rule reads p1 at 1030 as 60 × (30 + 7.5) / 30 / 60 = 1.25/s, its start taken inside the
    minute; here it is unknown, and so is every sum it is part of, until the first sample is
    within 1.1 steps of the minute's start (1045: 2/s, extrapolated in full)."""
    pods: Pods = {}
    for i, now in enumerate((1000.0, 1015.0, 1030.0, 1045.0, 1060.0)):
        attempts = [
            ('success', MODEL, 'p1', 3600.0 + 30 * i),
            ('success', MODEL, 'p2', 1800.0 + 15 * i),
        ]
        if now >= 1030:
            attempts.append(('success', MODEL, 'p3', 15.0 * (i - 2)))
        feed(pods, 'epp', epp_page(queue=[], attempts=attempts), now=now, kind='epp')
        for pod in ('p1', 'p2', 'p3'):
            feed(pods, pod, example_page(scrape_values(min(i, 3))), now=now)
        reading = read(pods, now=now)
        rates = {p.pod: p.arrival_rate for p in reading.pods}
        model = [m.arrival_rate for m in reading.models]
        if now <= 1030:  # at 1000 one sample: no rate at all, and no model reading
            assert (rates['p1'], rates['p2'], model) == (None, None, [None] if i else []), now
        else:
            assert rates['p1'] == pytest.approx(2.0)
            assert rates['p2'] == pytest.approx(1.0)
            assert model == [pytest.approx(math.fsum(r or 0.0 for r in rates.values()))]
        if now == 1045:
            # p3 counted from 0 inside the minute: measured, 15 requests in the minute.
            assert rates['p3'] == pytest.approx(15 / 60)
    # A gateway that did not answer for over a minute is unknown again once it is back.
    for now in (1200.0, 1215.0):
        attempts = [('success', MODEL, pod, 9000.0 + now) for pod in ('p1', 'p2', 'p3')]
        feed(pods, 'epp', epp_page(queue=[], attempts=attempts), now=now, kind='epp')
    assert [m.arrival_rate for m in read(pods, now=1215.0).models] == [None]
    # Prometheus' figure at 1215 would be 15 × (15 + 7.5) / 15 / 60 = 0.375/s per pod (1/s real).


def test_gateway_queue_applies_to_the_model_in_every_namespace_in_scope() -> None:
    pods: Pods = {}
    feed(pods, 'epp', epp_page(queue=[('0', MODEL, 4.0)], attempts=[]), now=1000.0, kind='epp')
    scope = (*SCOPE, ModelScope(model_id=MODEL, namespace='other'))
    reading = read(pods, now=1000.0, scope=scope)
    assert [(m.namespace, m.queue_size, m.observed_at) for m in reading.models] == [
        (NS, 4.0, 1000.0),
        ('other', 4.0, 1000.0),
    ]
    assert reading.pods == ()


# --- request count ----------------------------------------------------------------------------


def test_request_count_is_the_increase_over_the_retention() -> None:
    stop = (100.0, 103.0, 103.0, 110.0, 112.0)
    length = (5.0, 5.0, 6.0, 6.0, 7.0)
    pods: Pods = {}
    for i, now in enumerate((1000.0, 1015.0, 1030.0, 1045.0, 1060.0)):
        page = example_page(
            {
                'vllm:request_success_total{finished_reason="stop"': stop[i],
                'vllm:request_success_total{finished_reason="length"': length[i],
                'vllm:request_success_total{finished_reason="abort"': 0.0,
            }
        )
        feed(pods, 'p1', page, now=now)
    # scraping for 45 s < the 60 s retention: the count is not known yet, and with no gateway
    # there is no other model figure, so no model reading at all
    assert read(pods, now=1045.0).models == ()
    # range (1000, 1060]: samples at 1015..1060, sampled 45 s, the 15 s gap to the start is
    # under 1.1 steps so it counts in full: stop raw 9 → 9 × 60/45 = 12; length raw 2 →
    # 2 × 60/45 = 8/3; abort 0
    (model,) = read(pods, now=1060.0).models
    assert model.request_count == pytest.approx(12.0 + 8.0 / 3.0)
    assert (model.model_id, model.namespace, model.observed_at) == (MODEL, NS, 1060.0)
    assert model.queue_size == 0.0  # no gateway scraped: no flow-control queue

    # the pod goes away (no more samples): its counters still count while in the range
    (model,) = read(pods, now=1075.0).models
    # (1015, 1075]: stop 103, 110, 112 (raw 9, sampled 30, step 15, to_start 15 kept,
    # to_end 15 kept) → 9 × 60/30 = 18; length 6, 6, 7 → 1 × 60/30 = 2
    assert model.request_count == pytest.approx(20.0)
    assert read(pods, now=1075.0, since=None).models == ()  # never scraped: unknown


def test_retention_longer_than_the_history_kept_is_unknown_and_reported() -> None:
    pods: Pods = {}
    feed(pods, 'p1', example_page({}), now=1000.0)
    scope = (ModelScope(model_id=MODEL, namespace=NS, retention_period=900.0),)
    reading = read(pods, now=2000.0, scope=scope, history=360.0)
    assert reading.models == ()
    assert reading.errors == (
        SourceError(
            'model_request_count',
            ErrorReason.PARTIAL_DATA,
            'retention 900s exceeds the 360s of history kept',
        ),
    )


@pytest.mark.parametrize('retention', [0.0, -60.0, math.nan, math.inf])
def test_a_retention_that_is_not_a_positive_number_gives_no_count(retention: float) -> None:
    pods = scraped(lambda i: {'p1': example_page(scrape_values(i))})
    scope = (ModelScope(model_id=MODEL, namespace=NS, retention_period=retention),)
    reading = read(pods, now=1045.0, scope=scope)
    assert (reading.models, reading.errors) == ((), ())
    assert len(reading.pods) == 1


def test_scope_entries_are_normalized() -> None:
    pods: Pods = {}
    for i, now in enumerate(TIMES):
        page = example_page({'vllm:request_success_total{finished_reason="stop"': 10.0 * i})
        feed(pods, 'p1', page, now=now)
    scope = (
        ModelScope(model_id=MODEL, namespace=NS, retention_period=math.nan),
        ModelScope(model_id=MODEL, namespace=NS, retention_period=30.0),
        ModelScope(model_id='', namespace=NS),
        ModelScope(model_id=MODEL, namespace=''),
    )
    (model,) = read(pods, now=1045.0, scope=scope).models
    # the valid 30 s retention counts: (1015, 1045] holds 20 at 1030 and 30 at 1045 (left-open:
    # the sample of 1015 is out); raw 10, sampled 15, step 15, the 15 s gap to the range start
    # is under 1.1 steps and kept, to_end 0 → 10 × (15 + 15) / 15 = 20; the other finished
    # reasons stood still
    assert model.request_count == pytest.approx(20.0)


# --- what the reading carries ---------------------------------------------------------------------


def test_scrape_errors_lead_and_the_dropped_count_passes_through() -> None:
    pods: Pods = {}
    feed(pods, 'p1', example_page({}), now=1000.0)
    scrape_error = SourceError('http://p2/metrics', ErrorReason.TIMEOUT, 'slow')
    scope = (ModelScope(model_id=MODEL, namespace=NS, retention_period=900.0),)
    reading = compute_reading(
        pods=pods,
        scope=scope,
        now=1000.0,
        history=360.0,
        scraping_since=1000.0,
        errors=(scrape_error,),
        dropped_non_finite=3,
    )
    assert [e.target for e in reading.errors] == ['http://p2/metrics', 'model_request_count']
    assert reading.dropped_non_finite == 3


def test_no_pods_or_no_scope() -> None:
    assert read({}, now=1.0) == Reading()
    assert read({}, now=1.0, scope=()) == Reading()
    assert read(
        scraped(lambda i: {'p1': example_page(scrape_values(i))}), now=1045.0, scope=()
    ) == (Reading())


@settings(max_examples=30, deadline=None)
@given(order=st.permutations(['p1', 'p2', 'epp']), now=st.sampled_from([1045.0, 1060.0, 1200.0]))
def test_the_reading_does_not_depend_on_the_order_of_the_pods(order: list[str], now: float) -> None:
    pods = scraped(epp_pages, kinds={'epp': 'epp'})
    shuffled = {(NS, pod): pods[(NS, pod)] for pod in order}
    # a windows dict filled in another order too
    for series in shuffled.values():
        series.series = dict(reversed(list(series.series.items())))
    assert read(shuffled, now=now) == read(scraped(epp_pages, kinds={'epp': 'epp'}), now=now)
