"""Tests of `collect.sliced_json`: the same value as `json.loads`, decoded a member at a time."""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmscaler.collect.prometheus.answers import release
from llmscaler.collect.sliced_json import loads
from llmscaler.gc_pause import paused

VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(value=VALUES, descend=st.integers(min_value=0, max_value=4), spaced=st.booleans())
def test_every_document_reads_as_json_loads_reads_it(
    value: Any, descend: int, spaced: bool
) -> None:
    text = json.dumps(value, indent=1 if spaced else None)
    assert loads(data=text, descend=descend) == json.loads(text)
    assert loads(data=f' \n{text}\t ', descend=descend) == json.loads(f' \n{text}\t ')
    assert loads(data=text.encode('utf-16'), descend=descend) == json.loads(text.encode('utf-16'))


def test_a_prometheus_answer_and_its_oddities() -> None:
    text = (
        '{"status":"success","data":{"resultType":"vector","result":[{"metric":{"pod":"a"},'
        '"value":[1.5,"NaN"]}, {"metric":{},"value":[2,"1"]} ]},"warnings":["w"],"status":"x"}'
    )
    assert loads(data=text.encode(), descend=3) == json.loads(text)  # the repeated key: last
    assert loads(data=b'\xef\xbb\xbf[1, NaN]', descend=1)[0] == 1  # a BOM in bytes is read
    assert loads(data='{ }', descend=2) == {}
    assert loads(data='[ ]', descend=2) == []


@pytest.mark.parametrize(
    'text',
    ['', '{', '[1,', '[1 2]', '{"a" 1}', '{"a":1,}', '{1:2}', '[1]]', '\ufeff[1]', '{"a":[}'],
)
def test_what_json_loads_refuses_is_refused(text: str) -> None:
    with pytest.raises(json.JSONDecodeError, match=r'Expecting|Extra data|BOM'):
        json.loads(text)
    with pytest.raises(json.JSONDecodeError, match=r'Expecting|Extra data|BOM'):
        loads(data=text, descend=3)


def test_not_the_detected_encoding_is_refused() -> None:
    with pytest.raises(UnicodeDecodeError, match='utf-8'):
        loads(data=b'["\xff"]', descend=1)


def test_a_large_document_lets_other_threads_run() -> None:
    # 300,000 series: `json.loads` would hold the interpreter lock for the whole document.
    series = [
        {'metric': {'pod': f'p{i}', 'le': '0.5'}, 'value': [1.0, '2']} for i in range(300_000)
    ]
    body = json.dumps({'data': {'result': series}}).encode()
    gaps: list[float] = []
    done = threading.Event()

    def watch() -> None:
        last = time.perf_counter()
        while not done.is_set():
            time.sleep(0.001)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    watcher = threading.Thread(target=watch)
    interval = sys.getswitchinterval()
    # As it is used: with the collector off, whose passes over the new objects hold the lock
    # too (`gc_pause`); they come after, and are not this module's.
    with paused():
        watcher.start()
        try:
            started = time.perf_counter()
            found = loads(data=body, descend=3)
            took = time.perf_counter() - started
        finally:
            done.set()
            watcher.join()
        assert found['data']['result'][-1]['metric']['pod'] == 'p299999'
        release(found['data']['result'])
    assert took > 0.3, took
    assert max(gaps) < max(0.1, 20 * interval), (max(gaps), took)
