"""The LLMAutoScaler loop's pieces: the target's pods, its /scale selector, and a page over a cap
(against a loopback server)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from lightkube.core.selector import build_selector

from llmscaler.collect.scrape.source import ScrapeConfig
from llmscaler.controller.llmas.scrape import TargetPod, read_pods, selector_terms, target_pods
from llmscaler.kube.llmautoscaler import Metric
from tests.support.raw_http import RawServer, serve


@pytest.mark.parametrize(
    ('text', 'expected'),
    [
        ('app=phi', 'app=phi'),
        ('app==phi,tier!=cache', 'app=phi,tier!=cache'),
        ('app in (a, b),!canary,ready', 'app in (a,b),!canary,ready'),
        ('env notin (dev),app=x', 'env notin (dev),app=x'),
        ('leaderworkerset.sigs.k8s.io/name=x', 'leaderworkerset.sigs.k8s.io/name=x'),
    ],
)
def test_selectors_read_as_the_api_server_writes_them(text: str, expected: str) -> None:
    terms = selector_terms(text)
    assert not isinstance(terms, str)
    assert build_selector(terms) == expected


@pytest.mark.parametrize(
    ('text', 'message'),
    [
        ('app=phi,,x', 'an empty term'),
        ('app=a,app=b', "'app' appears twice"),
        ('app in a,b', 'is not a selector term'),
    ],
)
def test_selectors_it_cannot_read_are_problems(text: str, message: str) -> None:
    problem = selector_terms(text)
    assert isinstance(problem, str)
    assert message in problem


def test_target_pods_are_the_live_ones() -> None:
    def pod(name: str, **status: object) -> dict[str, Any]:
        return {'metadata': {'name': name}, 'status': status}

    pods = [
        pod('c', phase='Running', podIP='10.0.0.3'),
        pod('a', phase='Pending'),
        pod('b', phase='Succeeded', podIP='10.0.0.2'),
        {'metadata': {'name': 'd', 'deletionTimestamp': '2026-01-01T00:00:00Z'}, 'status': {}},
        pod('e', phase='Running', podIP='not-an-ip'),
    ]
    assert target_pods(pods) == (
        TargetPod(name='a', ip=''),
        TargetPod(name='c', ip='10.0.0.3'),
        TargetPod(name='e', ip=''),
    )


async def test_a_page_over_a_cap_is_a_problem_and_its_metrics_are_missing() -> None:
    page = b'vllm:num_requests_waiting{' + b','.join([b'a="b"'] * 200) + b'} 3\n'
    async with RawServer(serve(page)) as server:
        metric = Metric.model_validate(
            {'source': {'port': str(server.port)}, 'threshold': {'high': 10, 'low': 1}}
        )
        async with httpx.AsyncClient() as client:
            found = await read_pods(
                client=client,
                config=ScrapeConfig(),
                namespace='llm',
                pods=(TargetPod(name='phi-0', ip='127.0.0.1'),),
                metrics=(metric,),
            )
    assert found.values == {metric.key: (None,)}
    (problem,) = found.problems
    assert problem.startswith('phi-0 http://127.0.0.1:'), problem
    assert problem.endswith('page refused: line 1: a sample with 200 labels, over 128 (max_labels)')
