"""The LLMAutoScaler loop's pure pieces: the target's pods and its /scale selector."""

from __future__ import annotations

from typing import Any

import pytest
from lightkube.core.selector import build_selector

from llmscaler.controller.llmas.scrape import TargetPod, selector_terms, target_pods


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
