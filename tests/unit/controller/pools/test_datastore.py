"""The InferencePool datastore: reading both versions, membership, conflicts, orphans, EPP pages.

Worked example: namespace `llm` holds pool `chat` (v1, selecting `pool=chat`, picker Service
`chat-epp` port 9002) and the Deployments `cheap` and `dear` whose pod templates carry
`pool=chat`; both variants of model `m` belong to `llm/chat`, and the model's pools are
(`llm/chat`,). The Service's EndpointSlice lists two EPP pods, one ready and one not, and a port
named `http-metrics` 9090: the pool's EPP pages are the ready pod's `http://10.0.0.1:9090/metrics`.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from llmscaler.controller.pools.datastore import (
    V1,
    V1ALPHA2,
    Membership,
    Pool,
    assign,
    epp_targets,
    parse_pool,
    read_pools,
    slim_endpoint_slice,
)
from llmscaler.controller.pools.sources import hold
from tests.support.paths import ROOT
from tests.support.pool_objects import ALPHA, GA, NS, alpha_pool, v1_pool, world

CRDS = ROOT / 'src/llmscaler/devcluster/crds/inferencepools.yaml'


def pools(*objects: dict[str, Any]) -> tuple[Pool, ...]:
    by_version: dict[str, list[dict[str, Any]]] = {}
    for obj in objects:
        by_version.setdefault(obj['apiVersion'], []).append(obj)
    return read_pools(by_version)


def endpoint_slice(
    service: str,
    *,
    namespace: str = NS,
    endpoints: list[tuple[str, bool | None, str]],
    ports: list[tuple[str, int]],
) -> dict[str, Any]:
    eps: list[dict[str, Any]] = []
    for ip, ready, pod in endpoints:
        ep: dict[str, Any] = {'addresses': [ip], 'targetRef': {'kind': 'Pod', 'name': pod}}
        if ready is not None:
            ep['conditions'] = {'ready': ready}
        eps.append(ep)
    return {
        'apiVersion': 'discovery.k8s.io/v1',
        'kind': 'EndpointSlice',
        'metadata': {
            'name': f'{service}-x1',
            'namespace': namespace,
            'resourceVersion': '3',
            'labels': {'kubernetes.io/service-name': service},
        },
        'addressType': 'IPv4',
        'endpoints': eps,
        'ports': [{'name': n, 'port': p, 'protocol': 'TCP'} for n, p in ports],
    }


# --- reading the two versions ------------------------------------------------------------------


def test_a_v1_pool_reads_selector_ports_and_picker() -> None:
    pool = parse_pool(v1_pool(failureMode='FailOpen'), api_version=GA)
    assert pool is not None
    assert (pool.key, pool.selector, pool.target_ports) == (
        'llm/chat',
        (('pool', 'chat'),),
        (8000,),
    )
    assert pool.epp is not None
    assert (pool.epp.service, pool.epp.port, pool.epp.failure_mode) == (
        'chat-epp',
        9002,
        'FailOpen',
    )
    assert pool.problem == ''


def test_a_v1alpha2_pool_takes_the_defaults_of_its_version() -> None:
    pool = parse_pool(alpha_pool(), api_version=ALPHA)
    assert pool is not None
    assert pool.epp is not None
    # portNumber defaults to 9002 and failureMode to FailClose in v1alpha2.
    assert (pool.epp.port, pool.epp.failure_mode) == (9002, 'FailClose')
    assert (pool.selector, pool.target_ports, pool.problem) == ((('pool', 'chat'),), (8000,), '')


@pytest.mark.parametrize(
    ('obj', 'api_version', 'expected'),
    [
        (v1_pool(labels={}), GA, 'spec.selector.matchLabels is missing or empty'),
        ({**v1_pool(), 'spec': {}}, GA, 'spec.endpointPickerRef is missing'),
        (v1_pool(port={}), GA, 'spec.endpointPickerRef.port.number is missing'),
        (v1_pool(failureMode='Maybe'), GA, "failureMode 'Maybe' is not FailOpen or FailClose"),
        (v1_pool(kind='Deployment', group='apps'), GA, 'names apps/Deployment, not a Service'),
        (alpha_pool(portNumber=0), ALPHA, 'spec.extensionRef.portNumber is missing'),
        (
            alpha_pool(labels={'a': 1}),
            ALPHA,
            'spec.selector holds a value that is not a string',
        ),
        ({**alpha_pool(), 'spec': 'x'}, ALPHA, 'spec.selector is missing or empty'),
    ],
)
def test_missing_or_bad_fields_give_a_problem_not_a_crash(
    obj: dict[str, Any], api_version: str, expected: str
) -> None:
    pool = parse_pool(obj, api_version=api_version)
    assert pool is not None
    assert expected in pool.problem


def test_a_pool_served_in_both_versions_is_read_once_from_v1() -> None:
    both = pools(alpha_pool(labels={'old': 'x'}), v1_pool(), v1_pool('other'))
    assert [(p.key, p.api_version) for p in both] == [('llm/chat', GA), ('llm/other', GA)]


def violations(value: Any, schema: dict[str, Any], path: str = '') -> list[str]:
    """What of `value` the structural schema refuses (the keywords these CRDs use)."""
    kind = schema.get('type')
    types = {'object': dict, 'array': list, 'string': str, 'integer': int}
    if kind in types and not isinstance(value, types[kind]):
        return [f'{path}: not {kind}']
    found = [
        f'{path}: {value!r} not in enum' for _ in [0] if value not in schema.get('enum', [value])
    ]
    if kind == 'integer' and not schema.get('minimum', value) <= value <= schema.get(
        'maximum', value
    ):
        found.append(f'{path}: out of range')
    if kind == 'object':
        found += [f'{path}.{k}: required' for k in schema.get('required', ()) if k not in value]
        props = schema.get('properties', {})
        extra = schema.get('additionalProperties')
        for key, item in value.items():
            if key in props:
                found += violations(item, props[key], f'{path}.{key}')
            elif isinstance(extra, dict):
                found += violations(item, extra, f'{path}.{key}')
            elif props and not schema.get('x-kubernetes-preserve-unknown-fields') and path:
                found.append(f'{path}.{key}: unknown field')
    if kind == 'array':
        for index, item in enumerate(value):
            found += violations(item, schema.get('items', {}), f'{path}[{index}]')
    return found


def has_path(schema: dict[str, Any], path: str) -> bool:
    for part in path.split('.'):
        schema = schema.get('items', schema).get('properties', {}).get(part)
        if schema is None:
            return False
    return True


READ = {
    V1: ('spec.selector.matchLabels', 'spec.targetPorts.number', 'spec.endpointPickerRef.name',
         'spec.endpointPickerRef.port.number', 'spec.endpointPickerRef.failureMode',
         'spec.endpointPickerRef.kind', 'spec.endpointPickerRef.group'),
    V1ALPHA2: ('spec.selector', 'spec.targetPortNumber', 'spec.extensionRef.name',
               'spec.extensionRef.portNumber', 'spec.extensionRef.failureMode',
               'spec.extensionRef.kind', 'spec.extensionRef.group'),
}  # fmt: skip


def test_the_crd_schemas_hold_every_field_read_and_accept_the_samples() -> None:
    crds = {doc['spec']['group']: doc for doc in yaml.safe_load_all(CRDS.read_text())}
    for (group, version), sample in ((V1, v1_pool()), (V1ALPHA2, alpha_pool(portNumber=9003))):
        (served,) = crds[group]['spec']['versions']
        assert served['name'] == version
        schema = served['schema']['openAPIV3Schema']
        assert [p for p in READ[(group, version)] if not has_path(schema, p)] == []
        assert violations(sample, schema) == []
        pool = parse_pool(sample, api_version=f'{group}/{version}')
        assert pool is not None
        assert pool.problem == ''
    schema = crds[V1[0]]['spec']['versions'][0]['schema']['openAPIV3Schema']
    assert violations(v1_pool(failureMode='Maybe'), schema) == [
        ".spec.endpointPickerRef.failureMode: 'Maybe' not in enum"
    ]


# --- membership --------------------------------------------------------------------------------


def test_variants_belong_to_the_pool_that_selects_their_pods() -> None:
    w = world((NS, 'cheap', {'pool': 'chat'}), (NS, 'dear', {'pool': 'chat'}))
    found = assign(pools=pools(v1_pool()), entries=w.entries)
    assert dict(found.pool_of) == {'llm/cheap': 'llm/chat', 'llm/dear': 'llm/chat'}
    assert dict(found.problems) == {}
    assert dict(found.model_pools) == {(NS, 'm'): ('llm/chat',)}


def test_a_pool_of_another_namespace_selects_nothing_here() -> None:
    w = world((NS, 'cheap', {'pool': 'chat'}), ('other', 'cheap', {'pool': 'chat'}))
    found = assign(pools=pools(v1_pool(namespace='other')), entries=w.entries)
    assert dict(found.pool_of) == {'other/cheap': 'other/chat'}
    assert 'no InferencePool in namespace llm selects' in found.problems['llm/cheap']
    assert dict(found.model_pools) == {('other', 'm'): ('other/chat',)}


def test_two_pools_claiming_one_variant_use_neither() -> None:
    w = world((NS, 'cheap', {'pool': 'chat', 'tier': 'a'}))
    both = pools(v1_pool(), v1_pool('tiered', labels={'tier': 'a'}))
    found = assign(pools=both, entries=w.entries)
    assert dict(found.pool_of) == {}
    assert 'InferencePools chat, tiered all select' in found.problems['llm/cheap']
    assert dict(found.model_pools) == {}


def test_a_variant_of_an_unusable_pool_is_held_and_says_why() -> None:
    w = world((NS, 'cheap', {'pool': 'chat'}))
    found = assign(pools=pools(v1_pool(failureMode='Maybe')), entries=w.entries)
    assert found.problems['llm/cheap'].startswith('InferencePool chat cannot be used: ')


def test_without_any_pool_the_datastore_is_inactive_and_holds_nothing() -> None:
    w = world((NS, 'cheap', {'pool': 'chat'}))
    found = assign(pools=(), entries=w.entries)
    assert not found.active
    assert hold(w, found) is w


def test_hold_keeps_the_entry_with_its_reason_and_drops_the_variant() -> None:
    w = world((NS, 'cheap', {'pool': 'chat'}), (NS, 'dear', {'pool': 'none'}))
    held = hold(w, assign(pools=pools(v1_pool()), entries=w.entries))
    assert [v.name for v in held.variants] == ['cheap']
    entries = {e.key: e for e in held.entries}
    assert (entries['llm/cheap'].pool, entries['llm/cheap'].pool_problem) == ('llm/chat', '')
    assert entries['llm/dear'].variant is None
    assert entries['llm/dear'].target is not None
    assert 'labels app=dear,pool=none' in entries['llm/dear'].pool_problem
    assert [v.name for v in w.variants] == ['cheap', 'dear']  # the input is left as it was


def test_membership_is_sorted_whatever_the_order_of_pools() -> None:
    w = world((NS, 'cheap', {'pool': 'chat'}), ('b', 'x', {'pool': 'chat'}))
    given = pools(v1_pool(), v1_pool(namespace='b'))
    assert assign(pools=given, entries=w.entries) == assign(
        pools=tuple(reversed(given)), entries=tuple(reversed(w.entries))
    )
    assert Membership().pool('llm/chat') is None


# --- the EPP pages -----------------------------------------------------------------------------


def test_the_pool_reads_the_ready_endpoints_of_its_service_at_the_metrics_port() -> None:
    (pool,) = pools(v1_pool())
    slices = [
        endpoint_slice(
            'chat-epp',
            endpoints=[('10.0.0.1', True, 'epp-a'), ('10.0.0.2', False, 'epp-b')],
            ports=[('grpc-ext-proc', 9002), ('http-metrics', 9090)],
        ),
        endpoint_slice('chat-epp', namespace='b', endpoints=[('10.9.9.9', True, 'x')], ports=[]),
        endpoint_slice('other-epp', endpoints=[('10.0.0.3', True, 'epp-c')], ports=[]),
    ]
    slim = [s for s in map(slim_endpoint_slice, slices) if s is not None]
    found = epp_targets(pool=pool, slices=slim, default_port=9191)
    assert [(t.namespace, t.pod, t.url, t.kind) for t in found] == [
        ('llm', 'epp-a', 'http://10.0.0.1:9090/metrics', 'epp')
    ]


def test_without_a_named_metrics_port_the_default_port_is_used() -> None:
    (pool,) = pools(alpha_pool())
    raw = endpoint_slice('chat-epp', endpoints=[('10.0.0.1', None, '')], ports=[('grpc', 9002)])
    slim = slim_endpoint_slice(raw)
    assert slim is not None
    (target,) = epp_targets(pool=pool, slices=[slim], default_port=9191, scheme='https')
    # No ready condition means ready (the API's own reading); no pod name: the address names it.
    assert (target.pod, target.url) == ('10.0.0.1', 'https://10.0.0.1:9191/metrics')


def test_a_slice_without_a_service_label_is_not_kept() -> None:
    raw = endpoint_slice('x', endpoints=[], ports=[])
    raw['metadata']['labels'] = {}
    assert slim_endpoint_slice(raw) is None


_LABELS = st.dictionaries(st.sampled_from(['a', 'b', 'c']), st.sampled_from(['1', '2']), max_size=3)


@settings(max_examples=150, deadline=None)
@given(
    variants=st.lists(st.tuples(st.sampled_from(['x', 'y']), _LABELS), min_size=1, max_size=6),
    selectors=st.lists(st.tuples(st.sampled_from(['x', 'y']), _LABELS), max_size=5),
)
def test_membership_is_exactly_the_pools_whose_selector_matches(
    variants: list[tuple[str, dict[str, str]]], selectors: list[tuple[str, dict[str, str]]]
) -> None:
    w = world(*((ns, f'v{i}', labels) for i, (ns, labels) in enumerate(variants)))
    given_pools = pools(
        *(v1_pool(f'p{i}', namespace=ns, labels=sel) for i, (ns, sel) in enumerate(selectors))
    )
    found = assign(pools=given_pools, entries=w.entries)
    for i, (ns, labels) in enumerate(variants):
        key = f'{ns}/v{i}'
        template = {'app': f'v{i}', **labels}
        matching = [
            f'{ns}/p{j}'
            for j, (pool_ns, sel) in enumerate(selectors)
            if pool_ns == ns and sel and all(template.get(k) == v for k, v in sel.items())
        ]
        if not given_pools:
            assert key not in found.problems
            assert key not in found.pool_of
        elif len(matching) == 1 and not found.pool(matching[0]).problem:  # type: ignore[union-attr]
            assert found.pool_of[key] == matching[0]
            assert key not in found.problems
        else:
            assert key not in found.pool_of
            assert key in found.problems
