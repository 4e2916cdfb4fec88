"""The cycle's world from informer caches: VAs → targets → variants, pods, scopes, scrape pages."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from llmscaler.collect.attribution import TargetRef
from llmscaler.collect.readings import ModelScope
from llmscaler.controller.cluster.pods import epp_targets, scrape_targets
from llmscaler.controller.cluster.world import build_world, flat_text
from llmscaler.kube import resource_model
from tests.support.workloads import deployment, stateful_set
from tests.support.world_objects import (
    CONFIG,
    DEFAULT_RETENTION,
    JSON,
    LLAMA,
    QWEN,
    TARGETS,
    VA_DEPLOY,
    VA_LWS,
    VA_STS,
    deployment_pod,
    index,
    lws_pod,
    pod,
    va,
    with_json_at,
    world,
)

# --- VAs and targets ---------------------------------------------------------------------------


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=12,
)


def test_three_kinds_resolve_to_variants_and_target_refs() -> None:
    w = world(VA_STS, VA_LWS, VA_DEPLOY)
    assert [e.key for e in w.entries] == ['llm/llama-405b', 'llm/llama-a100', 'pd/qwen-h100']
    assert all(e.target_problem == '' and e.target is not None for e in w.entries)
    assert [(v.namespace, v.name) for v in w.variants] == [
        ('llm', 'llama-405b'),
        ('llm', 'llama-a100'),
        ('pd', 'qwen-h100'),
    ]
    lws_v, deploy_v, sts_v = w.variants
    # Deployment: spec.replicas 3, ready 2, pending 3 − 2; bounds and cost from the VA spec.
    assert (deploy_v.current_replicas, deploy_v.ready_replicas, deploy_v.pending_replicas) == (
        3,
        2,
        1,
    )
    assert (deploy_v.min_replicas, deploy_v.max_replicas, deploy_v.cost) == (1, 6, 10.0)
    assert deploy_v.accelerator == 'NVIDIA-A100-SXM4-80GB'
    assert deploy_v.model_id == LLAMA
    assert deploy_v.desired_replicas is None
    assert (sts_v.role, sts_v.gpus_per_replica, sts_v.model_id) == ('decode', 2, QWEN)
    # LWS: 8 leader GPUs + 3 workers × 8.
    assert (lws_v.gpus_per_replica, lws_v.current_replicas) == (32, 2)
    assert w.targets == (
        TargetRef(namespace='llm', kind='Deployment', name='llama-8b-a100', variant='llama-a100'),
        TargetRef(namespace='llm', kind='LeaderWorkerSet', name='vllm-405b', variant='llama-405b'),
        TargetRef(namespace='pd', kind='StatefulSet', name='qwen-decode', variant='qwen-h100'),
    )
    assert w.invalid == ()
    entry = w.entries[1]
    assert entry.obj is VA_DEPLOY
    assert entry.va.spec.max_replicas == 6
    assert entry.target is not None
    assert entry.target.name == 'llama-8b-a100'
    assert entry.variant == deploy_v


def test_desired_replicas_come_from_the_published_status() -> None:
    w = world(va('a', 'llm', kind='Deployment', target='llama-8b-a100', desired=4))
    assert w.variants[0].desired_replicas == 4
    w = world(va('a', 'llm', kind='Deployment', target='llama-8b-a100', desired=0))
    assert w.variants[0].desired_replicas == 0


def test_missing_target_is_a_problem_not_a_variant() -> None:
    w = world(va('gone', 'llm', kind='Deployment', target='llama-a100'))
    (entry,) = w.entries
    assert entry.target is None
    assert entry.variant is None
    assert entry.target_problem == 'Deployment llm/llama-a100 not found'
    assert (w.variants, w.targets, w.scopes) == ((), (), ())


def test_a_target_named_by_two_vas_is_scaled_by_neither() -> None:
    first = va('a', 'llm', kind='Deployment', target='llama-8b-a100')
    second = va('b', 'llm', kind='Deployment', target='llama-8b-a100')
    w = world(second, VA_STS, first)
    shared = [e for e in w.entries if e.key in ('llm/a', 'llm/b')]
    assert [e.key for e in shared] == ['llm/a', 'llm/b']
    assert all(e.target is None and e.variant is None for e in shared)
    assert shared[0].target_problem == (
        'Deployment llm/llama-8b-a100 is also the scale target of VariantAutoscaling llm/b; '
        'none of them scales it'
    )
    assert 'VariantAutoscaling llm/a;' in shared[1].target_problem
    # The VA with a target of its own is untouched.
    assert [(v.namespace, v.name) for v in w.variants] == [('pd', 'qwen-h100')]
    assert [r.variant for r in w.targets] == ['qwen-h100']


def test_target_in_another_namespace_is_not_found() -> None:
    (entry,) = world(va('x', 'pd', kind='Deployment', target='llama-8b-a100')).entries
    assert entry.target_problem == 'Deployment pd/llama-8b-a100 not found'


def test_unsupported_kind_names_the_supported_ones() -> None:
    (entry,) = world(va('rs', 'llm', kind='ReplicaSet', target='llama-8b-a100')).entries
    assert entry.variant is None
    assert entry.target_problem == (
        "scaleTargetRef.kind 'ReplicaSet' is not supported "
        '(supported: Deployment, LeaderWorkerSet, StatefulSet)'
    )


def test_api_version_of_another_group_is_a_problem() -> None:
    obj = va('x', 'llm', kind='Deployment', target='llama-8b-a100')
    obj['spec']['scaleTargetRef']['apiVersion'] = 'example.com/v1'
    (entry,) = world(obj).entries
    assert entry.target_problem == (
        "scaleTargetRef.apiVersion 'example.com/v1' is not apps/v1 for Deployment"
    )
    obj['spec']['scaleTargetRef']['apiVersion'] = 'apps/v1'
    assert world(obj).entries[0].target_problem == ''


def test_accessor_problem_names_the_target() -> None:
    broken = deployment()
    broken['spec']['replicas'] = '3'
    targets = index(broken)
    (entry,) = world(VA_DEPLOY, targets=targets).entries
    assert entry.variant is None
    assert entry.target_problem.startswith('Deployment llm/llama-8b-a100: spec.replicas:')
    assert "'3'" in entry.target_problem
    assert '\n' not in entry.target_problem


def test_target_cached_without_kind_and_api_version_is_read() -> None:
    bare = deployment()
    del bare['kind'], bare['apiVersion'], bare['metadata']['namespace']
    (entry,) = world(VA_DEPLOY, targets={('Deployment', 'llm', 'llama-8b-a100'): bare}).entries
    assert entry.target_problem == ''
    assert entry.target is not None
    assert entry.target.kind == 'Deployment'
    assert entry.variant is not None
    assert entry.variant.namespace == 'llm'
    assert world(VA_DEPLOY, targets={('Deployment', 'llm', 'llama-8b-a100'): bare}).targets == (
        TargetRef(namespace='llm', kind='Deployment', name='llama-8b-a100', variant='llama-a100'),
    )


def test_invalid_vas_are_listed_with_their_reason() -> None:
    bad_bounds = va('b', 'llm', kind='Deployment', target='x', minReplicas=5, maxReplicas=2)
    no_spec = {
        'apiVersion': 'llmd.ai/v1alpha1',
        'kind': 'VariantAutoscaling',
        'metadata': {'name': 'a', 'namespace': 'llm'},
    }
    nameless = va('', 'llm', kind='Deployment', target='llama-8b-a100')
    w = world(bad_bounds, VA_DEPLOY, no_spec, nameless)
    assert [e.key for e in w.entries] == ['llm/llama-a100']
    assert [(p.namespace, p.name) for _, p in w.invalid] == [
        ('llm', ''),
        ('llm', 'a'),
        ('llm', 'b'),
    ]
    objs = [obj for obj, _ in w.invalid]
    assert objs == [nameless, no_spec, bad_bounds]
    messages = [p.message for _, p in w.invalid]
    assert messages[0] == 'metadata.name: missing'
    assert messages[1].startswith('spec:')
    assert 'minReplicas' in messages[2]


def test_non_mapping_va_is_invalid_not_fatal() -> None:
    odd: list[Any] = [[1, 2], None]
    w = build_world(vas=odd, targets=TARGETS, pods=[], config=CONFIG)
    assert w.entries == ()
    assert len(w.invalid) == 1  # both land on the same (nameless) key; one is kept
    assert isinstance(w.invalid[0][1], resource_model.InvalidObject)


def test_duplicate_va_keys_keep_one_whatever_the_order() -> None:
    other = copy.deepcopy(VA_DEPLOY)
    other['spec']['maxReplicas'] = 9
    first = world(VA_DEPLOY, other)
    second = world(other, VA_DEPLOY)
    assert first == second
    assert len(first.entries) == 1


def nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth):
        value = {'f:x': value}
    return value


def test_deeply_nested_vas_never_raise_and_keep_the_order_free_choice() -> None:
    """5,000 levels: past the JSON encoder's and repr's recursion limits."""
    # Two copies of one VA (the same key): one valid, deep in metadata the parser ignores; one
    # invalid, deep in its spec. Which is kept must not depend on the order they come in.
    ignored = copy.deepcopy(VA_DEPLOY)
    ignored['metadata']['managedFields'] = [{'fieldsV1': nested(5_000)}]
    broken = copy.deepcopy(VA_DEPLOY)
    broken['spec']['scaleTargetRef']['name'] = nested(5_000)
    other = va('deep-b', 'llm', kind='Deployment', target='x')
    other['spec']['modelID'] = nested(5_000)
    first = world(ignored, broken, other)
    second = world(other, broken, ignored)
    assert first == second
    # The copy whose canonical text sorts first is kept: "managedFields" < "name".
    assert [e.key for e in first.entries] == ['llm/llama-a100']
    assert first.entries[0].obj is ignored
    assert [(p.name, p.message.split(':')[0]) for _, p in first.invalid] == [
        ('deep-b', 'spec.modelID')
    ]


@given(JSON_VALUES)
def test_the_recursion_free_text_is_the_canonical_json(value: Any) -> None:
    assert flat_text(value) == json.dumps(value, sort_keys=True)


def test_the_recursion_free_text_cuts_cycles() -> None:
    loop: dict[str, Any] = {'b': 1}
    loop['a'] = [loop, 'x']
    assert flat_text(loop) == '{"a": [<cycle>, "x"], "b": 1}'


def test_scopes_one_per_model_group_with_its_retention() -> None:
    a100 = va('llama-a100', 'llm', kind='Deployment', target='llama-8b-a100')
    also_llama = va('llama-big', 'llm', kind='LeaderWorkerSet', target='vllm-405b')
    qwen = va('qwen', 'pd', kind='StatefulSet', target='qwen-decode', model=QWEN)
    other = va('zzz', 'pd', kind='StatefulSet', target='other-decode', model='other/model')
    unresolved = va('gone', 'llm', kind='Deployment', target='nope', model='never/read')
    second = stateful_set()
    second['metadata'] = {**second['metadata'], 'name': 'other-decode'}
    targets = {**TARGETS, **index(second)}
    w = world(qwen, other, a100, also_llama, unresolved, targets=targets)
    assert w.scopes == (
        ModelScope(model_id=LLAMA, namespace='llm', retention_period=1200.0),
        ModelScope(model_id=QWEN, namespace='pd', retention_period=90.0),
        ModelScope(model_id='other/model', namespace='pd', retention_period=DEFAULT_RETENTION),
    )


# --- properties --------------------------------------------------------------------------------

ALL_VAS = [
    VA_DEPLOY,
    VA_STS,
    VA_LWS,
    va('gone', 'llm', kind='Deployment', target='nope'),
    va('rs', 'llm', kind='ReplicaSet', target='x'),
    va('bad', 'llm', kind='Deployment', target='x', minReplicas=3, maxReplicas=1),
    {**copy.deepcopy(VA_DEPLOY), 'spec': {**VA_DEPLOY['spec'], 'maxReplicas': 4}},  # duplicate
]
ALL_PODS = [
    deployment_pod('d1', ip='10.0.0.1'),
    deployment_pod('d1', ip='10.0.0.9', ready=False),  # duplicate key
    lws_pod('vllm-405b-0', worker_index='0', ip='10.0.0.2'),
    lws_pod('vllm-405b-0-1', worker_index='1', ip='10.0.0.3'),
    pod('q-0', 'pd', owners=[('StatefulSet', 'qwen-decode', True)], ip='10.0.0.4'),
    pod('labelled', labels={'llm-d.ai/variant': 'qwen-h100'}, ip='10.0.0.5'),
    {'metadata': {'name': 'x'}},
]


@settings(max_examples=60, deadline=None)
@given(
    vas=st.permutations(ALL_VAS),
    pods=st.permutations(ALL_PODS),
    target_order=st.permutations(sorted(TARGETS)),
)
def test_shuffled_inputs_give_an_equal_world(
    vas: list[dict[str, Any]],
    pods: list[dict[str, Any]],
    target_order: list[tuple[str, str, str]],
) -> None:
    reference = build_world(vas=ALL_VAS, targets=TARGETS, pods=ALL_PODS, config=CONFIG)
    targets = {key: TARGETS[key] for key in target_order}
    shuffled = build_world(vas=vas, targets=targets, pods=pods, config=CONFIG)
    assert shuffled == reference
    assert scrape_targets(
        variants=shuffled.variants, targets=shuffled.targets, pods=pods
    ) == scrape_targets(variants=reference.variants, targets=reference.targets, pods=ALL_PODS)
    assert len(reference.entries) == 5
    assert len(reference.invalid) == 1


@st.composite
def odd_object(draw: st.DrawFn, *, base: Mapping[str, Any]) -> Any:
    """A real object with some fields replaced by arbitrary JSON."""
    if draw(st.booleans()):
        return draw(JSON)
    fields = [
        ('metadata',),
        ('metadata', 'labels'),
        ('metadata', 'ownerReferences'),
        ('metadata', 'annotations'),
        ('metadata', 'name'),
        ('status',),
        ('status', 'podIP'),
        ('status', 'conditions'),
        ('spec',),
        ('spec', 'scaleTargetRef'),
    ]
    return draw(with_json_at(copy.deepcopy(dict(base)), paths=fields, at_most=3))


@settings(max_examples=150, deadline=None)
@given(
    vas=st.lists(odd_object(base=VA_DEPLOY), max_size=3),
    pods=st.lists(odd_object(base=deployment_pod('d1')), max_size=4),
)
def test_odd_objects_never_raise(vas: list[Any], pods: list[Any]) -> None:
    w = build_world(vas=vas, targets=TARGETS, pods=pods, config=CONFIG)
    assert len(w.entries) + len(w.invalid) <= len(vas)
    found = scrape_targets(variants=w.variants, targets=w.targets, pods=pods)
    assert all(t.url.startswith('http://') for t in found)
    assert all(t.kind == 'epp' for t in epp_targets(pods=pods, selector={'app': 'llama-8b'}))


def test_a_world_built_with_remembered_parses_is_the_same_and_sees_changes() -> None:
    from llmscaler.controller.cluster.parsed import ParsedObjects

    def versioned(o: Mapping[str, Any], rv: str) -> dict[str, Any]:
        out = copy.deepcopy(dict(o))
        out['metadata']['resourceVersion'] = rv
        return out

    vas = [versioned(v, f'va{i}') for i, v in enumerate(ALL_VAS)]
    targets = {key: versioned(t, f't{i}') for i, (key, t) in enumerate(sorted(TARGETS.items()))}
    memo = ParsedObjects()
    first = build_world(vas=vas, targets=targets, pods=ALL_PODS, config=CONFIG, parsed=memo)
    assert first == build_world(vas=vas, targets=targets, pods=ALL_PODS, config=CONFIG)
    again = build_world(vas=vas, targets=targets, pods=ALL_PODS, config=CONFIG, parsed=memo)
    assert again == first
    # One target scaled (a new resourceVersion): the next build reads it, not the old parse.
    key = next(k for k in sorted(targets) if k[0] == 'Deployment')
    scaled = versioned(targets[key], 'scaled')
    scaled['spec']['replicas'] = scaled['spec'].get('replicas', 1) + 5
    changed = {**targets, key: scaled}
    after = build_world(vas=vas, targets=changed, pods=ALL_PODS, config=CONFIG, parsed=memo)
    assert after == build_world(vas=vas, targets=changed, pods=ALL_PODS, config=CONFIG)
    assert after != first
    replicas = {e.target.name: e.target.replicas for e in after.entries if e.target is not None}
    assert replicas[key[2]] == scaled['spec']['replicas']
