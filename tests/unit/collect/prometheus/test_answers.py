"""Tests of `collect.prometheus.answers` on large answers: decoded in slices, read the same."""

from __future__ import annotations

import json

import httpx

from llmscaler.collect import http
from llmscaler.collect.prometheus.answers import SLICED_BYTES, outcome, release
from llmscaler.collect.prometheus.queries import Query
from llmscaler.collect.readings import ErrorReason

QUERY = Query(name='ttft_histogram', promql='x', kind='pod', family='ttft_histogram', models=())


def answer(series: int, *, tail: str = '') -> http.Answer:
    result = [
        {'metric': {'pod': f'pod-{i:06d}', 'le': '0.5'}, 'value': [1.5, 'NaN' if i == 7 else '2']}
        for i in range(series)
    ]
    text = json.dumps({'status': 'success', 'data': {'resultType': 'vector', 'result': result}})
    return http.Answer(status=200, headers=httpx.Headers(), body=(text + tail).encode())


def test_a_large_answer_reads_as_a_small_one_does() -> None:
    large = answer(70_000)
    assert len(large.body) > SLICED_BYTES  # decoded in slices
    found = outcome(query=QUERY, answer=large)
    assert found.error is None
    assert found.series is not None
    assert len(found.series) == 70_000
    assert found.dropped == 1
    assert found.series[7] == ({'pod': 'pod-000007', 'le': '0.5'}, 1.5, None)
    assert found.series[-1] == ({'pod': 'pod-069999', 'le': '0.5'}, 1.5, 2.0)
    small = outcome(query=QUERY, answer=answer(8))
    assert small.series == found.series[:8]


def test_a_large_malformed_answer_is_a_bad_response() -> None:
    found = outcome(query=QUERY, answer=answer(70_000, tail=' ]'))
    assert found.series is None
    assert found.error is not None
    assert found.error.reason is ErrorReason.BAD_RESPONSE
    assert 'Extra data' in found.error.message


def test_release_empties_a_list_in_place() -> None:
    items = list(range(10_000))
    release(items)
    assert items == []
