"""Pods: owner chains, readiness, and the pages to scrape (controller.cluster.pods).

Worked examples use the objects of tests/support/world_objects.py: a Deployment
`llama-8b-a100` whose pods carry `pod-template-hash=7c9f5d` and are owned by ReplicaSet
`llama-8b-a100-7c9f5d`, a LeaderWorkerSet `vllm-405b` and a StatefulSet `qwen-decode`.
"""

from __future__ import annotations

from typing import Any

import pytest

from llmscaler.collect.attribution import PodInfo
from llmscaler.collect.scrape.source import ScrapeTarget
from llmscaler.controller.cluster.pods import epp_targets, parse_selector, pod_info, scrape_targets
from tests.support.world_objects import (
    HASH,
    LLAMA,
    LLAMA_405B,
    LWS_NAME,
    QWEN,
    VA_DEPLOY,
    VA_LWS,
    VA_STS,
    deployment_pod,
    lws_pod,
    pod,
    va,
    world,
)

# --- pods --------------------------------------------------------------------------------------


def test_pod_info_finds_the_deployment_through_the_template_hash() -> None:
    info = pod_info(deployment_pod('llama-8b-a100-7c9f5d-abcde'))
    assert info == PodInfo(
        namespace='llm',
        name='llama-8b-a100-7c9f5d-abcde',
        labels=(('app', 'llama-8b'), ('pod-template-hash', HASH)),
        owners=(('ReplicaSet', f'llama-8b-a100-{HASH}'), ('Deployment', 'llama-8b-a100')),
        ready=True,
    )


@pytest.mark.parametrize(
    'rs',
    [
        'llama-8b-a100-other',  # the hash label does not match the suffix
        HASH,  # nothing before the hash
        f'-{HASH}',  # an empty Deployment name
    ],
)
def test_replica_set_without_matching_hash_gives_no_deployment(rs: str) -> None:
    info = pod_info(deployment_pod('p', rs=rs))
    assert info is not None
    assert info.owners == (('ReplicaSet', rs),)


def test_replica_set_without_hash_label_gives_no_deployment() -> None:
    info = pod_info(pod('p', owners=[('ReplicaSet', f'llama-{HASH}', True)]))
    assert info is not None
    assert info.owners == (('ReplicaSet', f'llama-{HASH}'),)


def test_pod_info_lws_leader_worker_and_bare_label() -> None:
    leader = pod_info(lws_pod('vllm-405b-0', worker_index='0'))
    assert leader is not None
    assert leader.owners == (('StatefulSet', 'vllm-405b'), ('LeaderWorkerSet', 'vllm-405b'))
    worker = pod_info(lws_pod('vllm-405b-0-1', worker_index='1'))
    assert worker is not None
    assert worker.owners == (('StatefulSet', 'vllm-405b-0'), ('LeaderWorkerSet', 'vllm-405b'))
    bare = pod_info(pod('lonely', labels={LWS_NAME: 'vllm-405b'}))
    assert bare is not None
    assert bare.owners == (('LeaderWorkerSet', 'vllm-405b'),)
    plain_sts = pod_info(pod('qwen-decode-0', 'pd', owners=[('StatefulSet', 'qwen-decode', True)]))
    assert plain_sts is not None
    assert plain_sts.owners == (('StatefulSet', 'qwen-decode'),)


def test_controller_owner_comes_first() -> None:
    info = pod_info(
        pod('p', owners=[('ConfigMap', 'aside', False), ('StatefulSet', 'qwen-decode', True)])
    )
    assert info is not None
    assert info.owners == (('StatefulSet', 'qwen-decode'), ('ConfigMap', 'aside'))


@pytest.mark.parametrize(
    ('changes', 'ready'),
    [
        ({}, True),
        ({'phase': 'Pending'}, False),
        ({'ready': False}, False),
        ({'deleting': True}, False),
        ({'phase': 'Succeeded'}, False),
    ],
)
def test_readiness(changes: dict[str, Any], ready: bool) -> None:
    info = pod_info(pod('p', **changes))
    assert info is not None
    assert info.ready is ready


def test_pod_without_conditions_is_not_ready() -> None:
    obj = pod('p')
    del obj['status']['conditions']
    info = pod_info(obj)
    assert info is not None
    assert info.ready is False


@pytest.mark.parametrize(
    'obj',
    [
        {},
        {'metadata': None},
        {'metadata': {'name': 'p'}},
        {'metadata': {'namespace': 'ns'}},
        {'metadata': {'name': 3, 'namespace': 'ns'}},
        'not an object',
        None,
    ],
)
def test_pod_info_needs_namespace_and_name(obj: Any) -> None:
    assert pod_info(obj) is None


def test_pod_info_skips_odd_fields() -> None:
    obj: dict[str, Any] = {
        'metadata': {
            'name': 'p',
            'namespace': 'ns',
            'labels': {'good': 'yes', 'number': 3, 7: 'x'},
            'ownerReferences': [
                'junk',
                {'kind': 'StatefulSet'},
                {'kind': 5, 'name': 'x'},
                {'kind': 'StatefulSet', 'name': 's', 'controller': 'yes'},
            ],
        },
        'status': {'phase': 'Running', 'conditions': 'nope'},
    }
    info = pod_info(obj)
    assert info == PodInfo(
        namespace='ns',
        name='p',
        labels=(('good', 'yes'),),
        owners=(('StatefulSet', 's'),),
        ready=False,
    )
    obj['metadata']['ownerReferences'] = {'kind': 'StatefulSet'}
    obj['metadata']['labels'] = ['a']
    obj['status'] = 'broken'
    assert pod_info(obj) == PodInfo(namespace='ns', name='p', ready=False)


def test_world_pods_are_sorted_and_unique() -> None:
    pods = [pod('b'), pod('a', 'pd'), pod('a'), {'metadata': {}}, pod('b', ready=False)]
    w = world(pods=pods)
    assert [(p.namespace, p.name) for p in w.pods] == [('llm', 'a'), ('llm', 'b'), ('pd', 'a')]
    # Of the two 'b', the one attribution would pick (ready False sorts first).
    assert w.pods[1].ready is False


# --- scrape targets ----------------------------------------------------------------------------


def vllm(pod_name: str, url: str, model: str = LLAMA, namespace: str = 'llm') -> ScrapeTarget:
    return ScrapeTarget(namespace, pod_name, url, kind='vllm', model_name=model)


def test_scrape_targets_follow_attribution() -> None:
    pods = [
        deployment_pod('d1', ip='10.0.0.1'),
        lws_pod('vllm-405b-0', worker_index='0', ip='10.0.0.2'),
        lws_pod('vllm-405b-0-1', worker_index='1', ip='10.0.0.3'),  # worker: skipped
        pod('q-0', 'pd', owners=[('StatefulSet', 'qwen-decode', True)], ip='10.0.0.4'),
        # The variant label names the variant directly, even without owners.
        pod('labelled', labels={'llm-d.ai/variant': 'llama-a100'}, ip='10.0.0.5'),
        pod('stranger', owners=[('StatefulSet', 'unknown', True)], ip='10.0.0.6'),
        pod('orphan', ip='10.0.0.7'),
        pod('bad-label', labels={'llm-d.ai/variant': 'nope'}, ip='10.0.0.8'),
    ]
    w = world(VA_DEPLOY, VA_STS, VA_LWS, pods=pods)
    assert scrape_targets(variants=w.variants, targets=w.targets, pods=pods) == (
        vllm('d1', 'http://10.0.0.1:8000/metrics'),
        vllm('labelled', 'http://10.0.0.5:8000/metrics'),
        vllm('vllm-405b-0', 'http://10.0.0.2:8000/metrics', model=LLAMA_405B),
        vllm('q-0', 'http://10.0.0.4:8000/metrics', model=QWEN, namespace='pd'),
    )


def test_scrape_targets_skip_pods_not_to_scrape() -> None:
    pods = [
        deployment_pod('no-ip', ip=None),
        deployment_pod('bad-ip', ip='not-an-ip'),
        deployment_pod('deleting', deleting=True),
        deployment_pod('failed', phase='Failed'),
        deployment_pod('done', phase='Succeeded'),
        deployment_pod('pending', phase='Pending', ready=False),  # starting: scraped
    ]
    w = world(VA_DEPLOY, pods=pods)
    assert scrape_targets(variants=w.variants, targets=w.targets, pods=pods) == (
        vllm('pending', 'http://10.1.2.3:8000/metrics'),
    )


def test_scrape_targets_of_unresolved_variants_are_skipped() -> None:
    pods = [deployment_pod('d1')]
    w = world(va('llama-a100', 'llm', kind='Deployment', target='gone'), pods=pods)
    assert scrape_targets(variants=w.variants, targets=w.targets, pods=pods) == ()


@pytest.mark.parametrize(
    ('annotations', 'url'),
    [
        ({}, 'http://10.1.2.3:8000/metrics'),
        ({'prometheus.io/port': '8080'}, 'http://10.1.2.3:8080/metrics'),
        ({'prometheus.io/port': ' 9000 '}, 'http://10.1.2.3:9000/metrics'),
        ({'prometheus.io/port': '65535'}, 'http://10.1.2.3:65535/metrics'),
        ({'prometheus.io/port': '0'}, 'http://10.1.2.3:8000/metrics'),
        ({'prometheus.io/port': '65536'}, 'http://10.1.2.3:8000/metrics'),
        ({'prometheus.io/port': 'http'}, 'http://10.1.2.3:8000/metrics'),
        ({'prometheus.io/port': '-1'}, 'http://10.1.2.3:8000/metrics'),
        ({'prometheus.io/port': '٣'}, 'http://10.1.2.3:8000/metrics'),
        ({'prometheus.io/path': '/vllm/metrics'}, 'http://10.1.2.3:8000/vllm/metrics'),
        ({'prometheus.io/path': 'metrics'}, 'http://10.1.2.3:8000/metrics'),
        ({'prometheus.io/path': '/a b'}, 'http://10.1.2.3:8000/metrics'),
        ({'prometheus.io/path': ''}, 'http://10.1.2.3:8000/metrics'),
    ],
)
def test_scrape_annotations(annotations: dict[str, str], url: str) -> None:
    pods = [deployment_pod('d1', annotations=annotations)]
    w = world(VA_DEPLOY, pods=pods)
    assert scrape_targets(variants=w.variants, targets=w.targets, pods=pods) == (vllm('d1', url),)


def test_scrape_defaults_and_ipv6() -> None:
    pods = [deployment_pod('d1', ip='fd00::5')]
    w = world(VA_DEPLOY, pods=pods)
    assert scrape_targets(
        variants=w.variants, targets=w.targets, pods=pods, port=9100, path='/m'
    ) == (vllm('d1', 'http://[fd00::5]:9100/m'),)


def test_non_string_annotations_fall_back_to_defaults() -> None:
    obj = deployment_pod('d1')
    obj['metadata']['annotations'] = {'prometheus.io/port': 8080, 'prometheus.io/path': None}
    w = world(VA_DEPLOY, pods=[obj])
    assert scrape_targets(variants=w.variants, targets=w.targets, pods=[obj]) == (
        vllm('d1', 'http://10.1.2.3:8000/metrics'),
    )


# --- EPP ---------------------------------------------------------------------------------------

EPP_LABELS = {'app': 'epp', 'inferencepool': 'llama'}


def test_epp_targets_select_by_labels_in_any_namespace() -> None:
    pods = [
        pod('epp-b', 'gw', labels=EPP_LABELS, ip='10.9.0.2'),
        pod(
            'epp-a',
            'llm',
            labels={**EPP_LABELS, 'extra': 'x'},
            ip='10.9.0.1',
            annotations={'prometheus.io/port': '9191'},
        ),
        pod('other-pool', 'gw', labels={'app': 'epp', 'inferencepool': 'qwen'}, ip='10.9.0.3'),
        pod('no-ip', 'gw', labels=EPP_LABELS, ip=None),
        pod('going', 'gw', labels=EPP_LABELS, deleting=True),
        deployment_pod('vllm'),
    ]
    assert epp_targets(pods=pods, selector=EPP_LABELS) == (
        ScrapeTarget('gw', 'epp-b', 'http://10.9.0.2:9090/metrics', kind='epp', model_name=''),
        ScrapeTarget('llm', 'epp-a', 'http://10.9.0.1:9191/metrics', kind='epp', model_name=''),
    )
    assert epp_targets(pods=pods, selector={'app': 'epp'}, port=1, path='/x')[0].url == (
        'http://10.9.0.2:1/x'
    )


def test_urls_take_the_configured_scheme_never_the_pods() -> None:
    # An annotation naming a scheme is not a port: the default port stays, the scheme is ours.
    annotations = {'prometheus.io/scheme': 'http', 'prometheus.io/port': 'https'}
    pods = [
        deployment_pod('d1', ip='10.0.0.1'),
        pod('epp', 'gw', labels=EPP_LABELS, ip='fd00::9', annotations=annotations),
    ]
    w = world(VA_DEPLOY, pods=pods)
    assert scrape_targets(variants=w.variants, targets=w.targets, pods=pods, scheme='https') == (
        vllm('d1', 'https://10.0.0.1:8000/metrics'),
    )
    assert [t.url for t in epp_targets(pods=pods, selector=EPP_LABELS, scheme='https')] == [
        'https://[fd00::9]:9090/metrics'
    ]


def test_empty_epp_selector_selects_nothing() -> None:
    assert epp_targets(pods=[pod('any', labels=EPP_LABELS)], selector={}) == ()


def test_epp_targets_skip_odd_objects() -> None:
    pods: list[Any] = [None, 'x', {'metadata': {'labels': EPP_LABELS}}]
    assert epp_targets(pods=pods, selector=EPP_LABELS) == ()


@pytest.mark.parametrize(
    ('text', 'expected'),
    [
        ('', {}),
        ('  ', {}),
        ('app=epp', {'app': 'epp'}),
        ('app=epp,inferencepool=llama', {'app': 'epp', 'inferencepool': 'llama'}),
        (' app = epp , tier==gw ', {'app': 'epp', 'tier': 'gw'}),
        ('llm-d.ai/role=decode', {'llm-d.ai/role': 'decode'}),
        ('empty=', {'empty': ''}),
        ('a=b,a=b', {'a': 'b'}),
    ],
)
def test_parse_selector(text: str, expected: dict[str, str]) -> None:
    assert parse_selector(text) == expected


@pytest.mark.parametrize(
    'text',
    [
        'app',
        'app!=epp',
        'app in (a,b)',
        '!app',
        'a=b,',
        '=b',
        'a=b=c',
        'a=b,a=c',
        'bad key=x',
        'a=' + 'x' * 64,
        'Upper.Case/name=x',
        'a=-leading',
    ],
)
def test_parse_selector_rejects(text: str) -> None:
    with pytest.raises(ValueError, match='selector'):
        parse_selector(text)
