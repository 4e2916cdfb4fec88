"""Tests of `collect.scrape.store`: what is kept of the pages, in the process that keeps it.

Most of the store's behaviour is tested through the source (`test_source.py`), which hands it
real pages over loopback HTTP; here, what only shows in the store's own process.
"""

from __future__ import annotations

import collections
import gc

from llmscaler import gc_pause
from llmscaler.collect.scrape.source import ScrapeConfig
from llmscaler.collect.scrape.store import PodStore, Scraped
from tests.support.scrape_pages import MODEL, NS, SCOPE


def store_for(config: ScrapeConfig) -> PodStore:
    return PodStore(
        limits=config.page_limits(),
        horizon=config.horizon,
        request_count_horizon=config.request_count_horizon,
        max_series_per_pod=config.max_series_per_pod,
        max_series_chars_per_pod=config.max_series_chars_per_pod,
    )


def test_a_page_absorbed_again_leaves_nothing_for_the_collector_to_walk() -> None:
    # 2,000 series of 40 labels: each page builds 82,000 label tuples, equal to the kept ones.
    labels = ','.join(f'l{j:02d}="v"' for j in range(39))
    body = ''.join(
        f'vllm:num_requests_waiting{{engine="{i}",{labels}}} 1\n' for i in range(2000)
    ).encode()
    page = Scraped(key=(NS, 'p1'), url='http://p1/metrics', kind='vllm', hint=MODEL, body=body)
    store = store_for(ScrapeConfig())
    store.absorb(page, now=1000.0)
    gc.collect()
    # Held off, so that what the next page leaves is still counted as it left it.
    with gc_pause.paused():
        before = {id(o) for o in gc.get_objects()}
        absorbed = store.absorb(page, now=1015.0)
        left = [o for o in gc.get_objects() if id(o) not in before]
    assert absorbed.error is not None  # a queue-length-only page: PARTIAL_DATA, not refused
    assert 'refused' not in absorbed.error.message
    assert store.series_count == 2000
    # The page's samples went by reference counting: not one object per series or per label.
    assert len(left) < 200, collections.Counter(type(o).__name__ for o in left)
    (pod,) = store.reading(scope=SCOPE, now=1015.0).pods
    assert pod.queue_length == 1.0


def test_a_pod_no_longer_targeted_goes_once_its_series_are_stale() -> None:
    store = store_for(ScrapeConfig(horizon=60.0))
    body = f'vllm:num_requests_waiting{{model_name="{MODEL}"}} 1\n'.encode()

    def absorb(pod: str, now: float) -> None:
        scraped = Scraped(key=(NS, pod), url=f'http://{pod}', kind='vllm', hint='', body=body)
        store.absorb(scraped, now=now)

    absorb('p1', 1000.0)
    absorb('p2', 1000.0)
    assert store.finish(now=1000.0, targeted=[(NS, 'p1'), (NS, 'p2')], absorbed=[]) == 2
    # p2 untargeted: kept while its series are within their horizon, then forgotten.
    absorb('p1', 1030.0)
    assert store.finish(now=1030.0, targeted=[(NS, 'p1')], absorbed=[]) == 2
    absorb('p1', 1061.0)
    assert store.finish(now=1061.0, targeted=[(NS, 'p1')], absorbed=[]) == 1
    assert [pod.pod for pod in store.reading(scope=SCOPE, now=1061.0).pods] == ['p1']
