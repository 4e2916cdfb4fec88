"""`collect.prometheus.peer`: another autoscaler's `wva_desired_replicas`, read from a fake
Prometheus on loopback, with empty, NaN, ±Inf, negative and fractional answers and failures."""

from __future__ import annotations

import pytest

from llmscaler.collect.prometheus.peer import PEER_QUERY, PeerDesired, PeerReading
from llmscaler.collect.prometheus.source import PrometheusConfig, PrometheusSource
from llmscaler.collect.readings import ErrorReason
from tests.support.fake_prometheus import (
    NOW,
    Canned,
    FakePrometheus,
    prometheus_error,
    sample,
    vector,
)
from tests.support.fake_prometheus import prom as prom  # the fixture


async def read(prom: FakePrometheus, **config: object) -> PeerReading:
    source = PrometheusSource(config=PrometheusConfig(base_url=prom.url, **config))  # type: ignore[arg-type]
    try:
        return await PeerDesired(source=source).read(now=NOW)
    finally:
        await source.aclose()


async def test_counts_by_namespace_and_variant(prom: FakePrometheus) -> None:
    prom.canned[PEER_QUERY.promql] = vector(
        sample('2', namespace='llm', variant_name='b'),
        # A ServiceMonitor scrape: the series' own namespace is kept as exported_namespace.
        sample('4', exported_namespace='llm', namespace='wva-system', variant_name='a'),
        sample('0', namespace='other', variant_name='a'),
    )
    reading = await read(prom)
    assert reading == PeerReading(
        desired=((('llm', 'a'), 4), (('llm', 'b'), 2), (('other', 'a'), 0))
    )
    assert reading.of(namespace='llm', variant='a') == 4
    assert reading.of(namespace='llm', variant='c') is None
    assert [entry.query for entry in prom.log] == [PEER_QUERY.promql]
    assert prom.log[0].time == f'{NOW:.3f}'


async def test_nothing_published_is_no_counts_and_no_error(prom: FakePrometheus) -> None:
    assert await read(prom) == PeerReading()


@pytest.mark.parametrize('value', ['NaN', '+Inf', '-Inf', '-1', '2.5'])
async def test_a_value_that_is_not_a_count_is_left_out(prom: FakePrometheus, value: str) -> None:
    prom.canned[PEER_QUERY.promql] = vector(
        sample(value, namespace='llm', variant_name='a'),
        sample('3', namespace='llm', variant_name='b'),
    )
    assert await read(prom) == PeerReading(desired=((('llm', 'b'), 3),), dropped=1)


async def test_a_series_without_its_labels_is_left_out(prom: FakePrometheus) -> None:
    prom.canned[PEER_QUERY.promql] = vector(
        sample('3', variant_name='a'), sample('3', namespace='llm'), sample('1')
    )
    assert await read(prom) == PeerReading(dropped=3)


async def test_a_failed_query_gives_its_error_and_no_counts(prom: FakePrometheus) -> None:
    prom.canned[PEER_QUERY.promql] = Canned(prometheus_error('bad_data', 'parse error'), status=400)
    reading = await read(prom)
    assert reading.desired == ()
    assert reading.error is not None
    assert (reading.error.target, reading.error.reason) == (
        'peer_desired_replicas',
        ErrorReason.HTTP_4XX,
    )
    assert 'parse error' in reading.error.message


async def test_the_query_has_the_source_deadline(prom: FakePrometheus) -> None:
    # The answer comes after the deadline, yet before the server's own shutdown timeout (1 s
    # after the test), so the server ends its side of the connection itself.
    prom.canned[PEER_QUERY.promql] = Canned(vector().body, delay=0.6)
    reading = await read(prom, timeout=0.2, read_deadline=0.3)
    assert reading.error is not None
    assert reading.error.reason is ErrorReason.TIMEOUT


async def test_a_token_is_not_sent_in_clear(prom: FakePrometheus) -> None:
    reading = await read(prom, bearer_token='secret')
    assert reading.error is not None
    assert reading.error.reason is ErrorReason.UNREACHABLE
    assert prom.log == []
