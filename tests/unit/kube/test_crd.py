"""The VariantAutoscaling models against the CRD YAML they mirror (WVA v0.8.0,
api/v1alpha1/variantautoscaling_types.go).

The CRD YAML is the source of truth: every node of its openAPIV3Schema under spec and status is
compared with the same node of the models' JSON schema (type, format, default, bounds, pattern,
enum, properties, required), so a field added, renamed or re-defaulted on one side only fails here.

`kubectl create --dry-run=client` is not used: the installed kubectl (1.32) needs an API server
even for a client-side dry run (it downloads the OpenAPI document and the discovery data).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pydantic
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from llmscaler.kube.crd import (
    CONDITION_OPTIMIZATION_READY,
    REASON_OPTIMIZATION_REFUSED,
    REASONS,
    VariantAutoscaling,
    VariantAutoscalingSpec,
    parse_va,
)
from llmscaler.kube.resource_model import (
    CONDITION_REASON_PATTERN,
    CONDITION_TYPE_PATTERN,
    INT32_MAX,
    InvalidObject,
    ScaleTargetRef,
)
from tests.support.crd_compare import crd_schema, differences, drift, load_crd, only_version, walk
from tests.support.paths import ROOT

CRD_PATH = ROOT / 'deploy' / 'base' / 'crds' / 'llmd.ai_variantautoscalings.yaml'

# Two VAs of one model, as WVA's documentation shows a multi-variant InferencePool.
SEED_EXAMPLES = """
apiVersion: llmd.ai/v1alpha1
kind: VariantAutoscaling
metadata:
  name: llama-8b-a10g
spec:
  scaleTargetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: llama-8b-a10g
  modelID: "meta/llama-3.1-8b"
  minReplicas: 1
  maxReplicas: 10
  variantCost: "5.0"
---
apiVersion: llmd.ai/v1alpha1
kind: VariantAutoscaling
metadata:
  name: llama-8b-a100
spec:
  scaleTargetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: llama-8b-a100
  modelID: "meta/llama-3.1-8b"
  minReplicas: 0
  maxReplicas: 5
  variantCost: "15.0"
"""


def model_schema() -> dict[str, Any]:
    return VariantAutoscaling.model_json_schema(by_alias=True, mode='validation')


def every_path() -> list[str]:
    schema = crd_schema(CRD_PATH)
    paths: list[str] = []
    for section in ('spec', 'status'):
        paths.extend(p for p, _, _ in walk(schema['properties'][section], {}, {}, section))
    return paths


# --- the CRD document itself -------------------------------------------------------------------


def test_crd_names_scope_and_version() -> None:
    crd = load_crd(CRD_PATH)
    assert crd['apiVersion'] == 'apiextensions.k8s.io/v1'
    assert crd['kind'] == 'CustomResourceDefinition'
    assert crd['metadata']['name'] == 'variantautoscalings.llmd.ai'
    assert crd['spec']['group'] == 'llmd.ai'
    assert crd['spec']['scope'] == 'Namespaced'
    names = crd['spec']['names']
    assert names['kind'] == 'VariantAutoscaling'
    assert names['plural'] == 'variantautoscalings'
    assert names['singular'] == 'variantautoscaling'
    assert names['shortNames'] == ['va']
    v = only_version(CRD_PATH)
    assert (v['name'], v['served'], v['storage']) == ('v1alpha1', True, True)


def test_status_subresource_only_no_scale() -> None:
    # The VA points at the scaled workload; it is not a scale target itself.
    assert only_version(CRD_PATH)['subresources'] == {'status': {}}


def test_schema_is_structural_without_preserved_unknown_fields() -> None:
    def nodes(node: Any) -> Iterator[dict[str, Any]]:
        if isinstance(node, dict):
            yield node
            for value in node.values():
                yield from nodes(value)
        elif isinstance(node, list):
            for value in node:
                yield from nodes(value)

    schema = crd_schema(CRD_PATH)
    assert not [n for n in nodes(schema) if 'x-kubernetes-preserve-unknown-fields' in n]
    # Structural: every schema node under spec and status states its type.
    for section in ('spec', 'status'):
        for path, node, _ in walk(schema['properties'][section], {}, {}, section):
            assert 'type' in node, path
    assert schema['required'] == ['spec']
    assert set(schema['properties']) == {'apiVersion', 'kind', 'metadata', 'spec', 'status'}


def test_scale_target_api_version_is_not_enum_restricted() -> None:
    ref = crd_schema(CRD_PATH)['properties']['spec']['properties']['scaleTargetRef']
    assert 'enum' not in ref['properties']['apiVersion']
    assert ref['required'] == ['kind', 'name']
    for kind in ('Deployment', 'StatefulSet', 'LeaderWorkerSet'):
        assert kind in ref['description']


def test_cel_rule_min_not_above_max() -> None:
    (rule,) = crd_schema(CRD_PATH)['properties']['spec']['x-kubernetes-validations']
    assert rule['rule'] == 'self.minReplicas <= self.maxReplicas'
    assert 'minReplicas' in rule['message']
    assert 'maxReplicas' in rule['message']


def test_conditions_are_a_map_list_keyed_by_type() -> None:
    conditions = crd_schema(CRD_PATH)['properties']['status']['properties']['conditions']
    assert conditions['x-kubernetes-list-type'] == 'map'
    assert conditions['x-kubernetes-list-map-keys'] == ['type']
    assert conditions['items']['properties']['status']['enum'] == ['True', 'False', 'Unknown']


def test_printer_columns() -> None:
    columns = [
        (c['name'], c['type'], c.get('priority', 0), c['jsonPath'])
        for c in only_version(CRD_PATH)['additionalPrinterColumns']
    ]
    # WVA's seven, plus the target's replicas and ready replicas; -o wide (priority 1) adds the
    # accelerator, the cost and why the last optimization did or did not act.
    assert columns == [
        ('Target', 'string', 0, '.spec.scaleTargetRef.name'),
        ('Model', 'string', 0, '.spec.modelID'),
        ('Min', 'integer', 0, '.spec.minReplicas'),
        ('Max', 'integer', 0, '.spec.maxReplicas'),
        ('Current', 'integer', 0, '.status.currentAlloc.numReplicas'),
        ('Ready', 'integer', 0, '.status.currentAlloc.readyReplicas'),
        ('Optimized', 'integer', 0, '.status.desiredOptimizedAlloc.numReplicas'),
        ('MetricsReady', 'string', 0, '.status.conditions[?(@.type=="MetricsAvailable")].status'),
        ('Age', 'date', 0, '.metadata.creationTimestamp'),
        ('Accelerator', 'string', 1, '.status.currentAlloc.accelerator'),
        ('Cost', 'string', 1, '.spec.variantCost'),
        ('Reason', 'string', 1, '.status.conditions[?(@.type=="OptimizationReady")].reason'),
    ]


@pytest.mark.parametrize(
    'column', [c for c in only_version(CRD_PATH)['additionalPrinterColumns'] if c['type'] != 'date']
)
def test_printer_column_points_at_a_schema_field_of_its_type(column: dict[str, Any]) -> None:
    node = crd_schema(CRD_PATH)
    # A filter selects list items; the field after it is looked up in the item schema.
    for part in re.sub(r'\[\?\(.*?\)\]', '.[]', column['jsonPath']).strip('.').split('.'):
        node = node['items'] if part == '[]' else node['properties'][part]
    assert node['type'] == column['type']


# --- the models against the CRD ----------------------------------------------------------------


@pytest.mark.parametrize('path', every_path())
def test_model_field_matches_crd(path: str) -> None:
    found = [
        d for d in differences(crd_schema(CRD_PATH), model_schema()) if d.split(':')[0] == path
    ]
    assert found == []


def test_no_differences_anywhere() -> None:
    assert differences(crd_schema(CRD_PATH), model_schema()) == []


def test_top_level_fields_and_required_match() -> None:
    model = model_schema()
    assert set(model['properties']) == set(crd_schema(CRD_PATH)['properties'])
    assert model['required'] == ['spec']


@pytest.mark.parametrize(
    ('path', 'key', 'value'),
    [
        (('spec', 'minReplicas'), 'default', 0),
        (('spec', 'maxReplicas'), 'minimum', 0),
        (('spec', 'variantCost'), 'pattern', r'^\d+$'),
        (('spec', 'modelID'), 'minLength', 2),
        (('status', 'actuation'), 'required', []),
        (('spec', 'scaleTargetRef', 'apiVersion'), 'type', 'integer'),
    ],
)
def test_the_comparison_catches_a_drift(path: tuple[str, ...], key: str, value: Any) -> None:
    schema = crd_schema(CRD_PATH)
    drift(schema, path=path, key=key, value=value)
    assert differences(schema, model_schema()) != []


def test_the_comparison_catches_a_field_missing_from_the_model() -> None:
    schema = crd_schema(CRD_PATH)
    schema['properties']['spec']['properties']['extra'] = {'type': 'string'}
    assert differences(schema, model_schema()) == [
        'spec: properties ' + str(sorted(schema['properties']['spec']['properties'])),
        "spec.extra: CRD {'type': 'string'} != model {}",
    ]


# --- parsing ------------------------------------------------------------------------------------


def seed_objects() -> list[dict[str, Any]]:
    return list(yaml.safe_load_all(SEED_EXAMPLES))


def test_seed_examples_round_trip() -> None:
    for obj in seed_objects():
        va = parse_va(obj)
        assert isinstance(va, VariantAutoscaling), va
        assert va.to_object() == obj


def test_seed_examples_values() -> None:
    a10g, a100 = (parse_va(obj) for obj in seed_objects())
    assert isinstance(a10g, VariantAutoscaling)
    assert isinstance(a100, VariantAutoscaling)
    assert a10g.metadata.name == 'llama-8b-a10g'
    assert a10g.spec.scale_target_ref == ScaleTargetRef(
        api_version='apps/v1', kind='Deployment', name='llama-8b-a10g'
    )
    assert (a10g.spec.model_id, a10g.spec.min_replicas, a10g.spec.max_replicas) == (
        'meta/llama-3.1-8b',
        1,
        10,
    )
    assert a10g.spec.cost == 5.0
    assert (a100.spec.min_replicas, a100.spec.max_replicas, a100.spec.cost) == (0, 5, 15.0)


def minimal(**spec: Any) -> dict[str, Any]:
    return {
        'apiVersion': 'llmd.ai/v1alpha1',
        'kind': 'VariantAutoscaling',
        'metadata': {'name': 'v', 'namespace': 'ns'},
        'spec': {'scaleTargetRef': {'kind': 'Deployment', 'name': 'd'}, 'modelID': 'm', **spec},
    }


def test_defaults_applied() -> None:
    va = parse_va(minimal())
    assert isinstance(va, VariantAutoscaling)
    assert (va.spec.min_replicas, va.spec.max_replicas, va.spec.variant_cost) == (1, 2, '10.0')
    assert va.spec.cost == 10.0
    assert va.status is None
    assert va.to_object()['spec'] == {
        'scaleTargetRef': {'kind': 'Deployment', 'name': 'd'},
        'modelID': 'm',
        'minReplicas': 1,
        'maxReplicas': 2,
        'variantCost': '10.0',
    }


def test_keyword_construction_by_field_name() -> None:
    spec = VariantAutoscalingSpec(
        scale_target_ref=ScaleTargetRef(kind='LeaderWorkerSet', name='lws'),
        model_id='m',
        min_replicas=0,
        max_replicas=4,
        variant_cost='2.5',
    )
    va = VariantAutoscaling(spec=spec)
    assert va.spec.cost == 2.5
    assert va.to_object()['apiVersion'] == 'llmd.ai/v1alpha1'
    assert va.to_object()['spec']['minReplicas'] == 0


@pytest.mark.parametrize(
    ('spec', 'prefix'),
    [
        # minReplicas 3 with maxReplicas defaulted to 2: 3 > 2, as the CEL rule would say.
        ({'minReplicas': 3}, 'spec.minReplicas: must be <= maxReplicas (3 > 2)'),
        ({'minReplicas': 5, 'maxReplicas': 4}, 'spec.minReplicas: must be <= maxReplicas (5 > 4)'),
        ({'minReplicas': 0, 'maxReplicas': 0}, 'spec.maxReplicas:'),
        ({'minReplicas': -1}, 'spec.minReplicas:'),
        ({'minReplicas': '1'}, 'spec.minReplicas:'),
        ({'minReplicas': True}, 'spec.minReplicas:'),
        ({'minReplicas': 1.0}, 'spec.minReplicas:'),
        ({'maxReplicas': INT32_MAX + 1}, 'spec.maxReplicas:'),
        ({'modelID': ''}, 'spec.modelID:'),
        ({'scaleTargetRef': {'kind': 'Deployment'}}, 'spec.scaleTargetRef.name: Field required'),
        ({'unknownField': 1}, 'spec.unknownField:'),
    ],
)
def test_invalid_spec_names_the_path(spec: dict[str, Any], prefix: str) -> None:
    result = parse_va(minimal(**spec))
    assert isinstance(result, InvalidObject)
    assert (result.name, result.namespace) == ('v', 'ns')
    assert result.message.startswith(prefix), result.message
    assert '\n' not in result.message


def test_min_equal_max_and_scale_to_zero_accepted() -> None:
    assert isinstance(parse_va(minimal(minReplicas=3, maxReplicas=3)), VariantAutoscaling)
    assert isinstance(parse_va(minimal(minReplicas=0, maxReplicas=1)), VariantAutoscaling)
    with pytest.raises(pydantic.ValidationError):
        VariantAutoscalingSpec(
            scale_target_ref=ScaleTargetRef(kind='Deployment', name='d'),
            model_id='m',
            min_replicas=3,
        )


@pytest.mark.parametrize(('cost', 'value'), [('10', 10.0), ('0.5', 0.5), ('007.250', 7.25)])
def test_good_cost(cost: str, value: float) -> None:
    va = parse_va(minimal(variantCost=cost))
    assert isinstance(va, VariantAutoscaling)
    assert va.spec.cost == value


@pytest.mark.parametrize(
    'cost', ['1e3', '-1', '.5', '5.', '5.0.0', '', ' 5', '5\n', 'inf', 'nan', '١٢', '9' * 400, 5.0]
)
def test_bad_cost_rejected(cost: object) -> None:
    result = parse_va(minimal(variantCost=cost))
    assert isinstance(result, InvalidObject)
    assert result.message.startswith('spec.variantCost:'), result.message


@pytest.mark.parametrize(
    ('obj', 'prefix'),
    [
        ([], '<root>: expected an object, got list'),
        (None, '<root>: expected an object, got null'),
        ({'metadata': {'name': 'x'}}, 'spec: Field required'),
        ({**minimal(), 'apiVersion': 'llmd.ai/v1'}, 'apiVersion:'),
        ({**minimal(), 'kind': 'Deployment'}, 'kind:'),
        ({**minimal(), 'status': {'actuation': {}}}, 'status.actuation.applied: Field required'),
        (
            {**minimal(), 'status': {'desiredOptimizedAlloc': {'lastRunTime': 'yesterday'}}},
            'status.desiredOptimizedAlloc.lastRunTime: expected an RFC 3339 date-time',
        ),
    ],
)
def test_invalid_object_message(obj: Any, prefix: str) -> None:
    result = parse_va(obj)
    assert isinstance(result, InvalidObject)
    assert result.message.startswith(prefix), result.message


def test_metadata_extras_ignored_and_status_round_trips() -> None:
    obj = minimal()
    obj['metadata'] |= {'uid': 'u-1', 'generation': 7, 'creationTimestamp': '2025-01-01T00:00:00Z'}
    obj['status'] = {
        'desiredOptimizedAlloc': {'lastRunTime': '2025-01-01T00:01:00Z', 'numReplicas': 3},
        'currentAlloc': {'accelerator': 'NVIDIA-A100', 'numReplicas': 2, 'readyReplicas': 1},
        'actuation': {'applied': True},
        'conditions': [
            {
                'type': 'MetricsAvailable',
                'status': 'True',
                'observedGeneration': 7,
                'lastTransitionTime': '2025-01-01T00:00:30Z',
                'reason': 'MetricsFound',
                'message': '',
            }
        ],
    }
    va = parse_va(obj)
    assert isinstance(va, VariantAutoscaling), va
    assert va.metadata.generation == 7
    out = va.to_object()
    assert 'creationTimestamp' not in out['metadata']
    assert out['status'] == obj['status']


@pytest.mark.parametrize(
    ('current', 'prefix'),
    [
        ({'readyReplicas': -1}, 'status.currentAlloc.readyReplicas:'),
        ({'numReplicas': '2'}, 'status.currentAlloc.numReplicas:'),
        ({'numReplicas': 2**31}, 'status.currentAlloc.numReplicas:'),
        ({'accelerator': 7}, 'status.currentAlloc.accelerator:'),
        ({'pending': 1}, 'status.currentAlloc.pending:'),
    ],
)
def test_current_alloc_is_validated(current: dict[str, Any], prefix: str) -> None:
    result = parse_va({**minimal(), 'status': {'currentAlloc': current}})
    assert isinstance(result, InvalidObject)
    assert result.message.startswith(prefix), result.message


def nested(depth: int, *, leaf: Any = 1, key: str | None = None) -> Any:
    """`depth` lists (or one-key objects) around `leaf`, built without recursion."""
    value = leaf
    for _ in range(depth):
        value = [value] if key is None else {key: value}
    return value


DEEP = 5_000


@pytest.mark.parametrize(
    'place',
    [
        ('spec', 'modelID'),
        ('spec', 'extra'),
        ('spec', 'scaleTargetRef', 'name'),
        ('status', 'conditions'),
        ('status', 'other'),
        ('metadata', 'labels'),
        ('extra',),
    ],
    ids='.'.join,
)
@pytest.mark.parametrize('key', [None, 'a'], ids=['lists', 'objects'])
def test_a_deeply_nested_value_is_an_invalid_object(
    place: tuple[str, ...], key: str | None
) -> None:
    obj = minimal()
    obj['metadata'] = {'name': 'deep', 'namespace': 'ns'}
    node = obj
    for part in place[:-1]:
        node = node.setdefault(part, {})
    node[place[-1]] = nested(DEEP, key=key)
    result = parse_va(obj)
    assert isinstance(result, InvalidObject)
    assert (result.name, result.namespace) == ('deep', 'ns')
    # The path of the bad field, the pydantic error, and the start of the value.
    assert result.message.startswith('.'.join(place)), result.message
    assert ('(got [[[[' if key is None else "(got {'a': {'a':") in result.message
    assert '\n' not in result.message
    assert len(result.message) < 200


def test_a_deep_value_in_ignored_metadata_is_still_a_valid_object() -> None:
    obj = minimal()
    obj['metadata'] = {'name': 'v', 'managedFields': [{'fieldsV1': nested(DEEP, key='f:x')}]}
    assert isinstance(parse_va(obj), VariantAutoscaling)


@pytest.mark.parametrize(
    ('bad', 'shown'),
    [
        ('x' * 100_000, r"'x+\.\.\.x+'"),
        (10**5000, '<int>'),
        (nested(3, key='a'), re.escape("{'a': {'a': {'a': 1}}}")),
        (nested(4, key='a'), re.escape("{'a': {'a': {'a': {...}}}}")),
    ],
    ids=['long-string', 'huge-int', 'nested', 'deeper'],
)
def test_the_bad_value_shown_is_bounded(bad: Any, shown: str) -> None:
    result = parse_va(minimal(minReplicas=bad))
    assert isinstance(result, InvalidObject)
    got = re.fullmatch(r'spec\.minReplicas: [^(]+ \(got (.*)\)', result.message)
    assert got is not None, result.message
    assert re.fullmatch(shown, got[1]), result.message
    assert len(got[1]) <= 60


def test_repeated_condition_type_rejected() -> None:
    condition = {
        'type': 'TargetResolved',
        'status': 'True',
        'lastTransitionTime': '2025-01-01T00:00:00Z',
        'reason': 'TargetFound',
        'message': '',
    }
    result = parse_va({**minimal(), 'status': {'conditions': [condition, condition]}})
    assert isinstance(result, InvalidObject)
    assert result.message.startswith("status.conditions: repeated type ['TargetResolved']")


def test_timestamp_digits_must_be_ascii() -> None:
    ts = '٢٠٢٥-01-01T00:00:00Z'
    result = parse_va({**minimal(), 'status': {'desiredOptimizedAlloc': {'lastRunTime': ts}}})
    assert isinstance(result, InvalidObject)
    assert result.message.startswith('status.desiredOptimizedAlloc.lastRunTime:')


# --- conditions ---------------------------------------------------------------------------------


def test_condition_constants() -> None:
    assert sorted(REASONS) == ['MetricsAvailable', 'OptimizationReady', 'TargetResolved']
    assert [len(REASONS[t]) for t in sorted(REASONS)] == [5, 9, 2]
    for kind, reasons in REASONS.items():
        assert re.fullmatch(CONDITION_TYPE_PATTERN, kind)
        assert all(re.fullmatch(CONDITION_REASON_PATTERN, r) for r in reasons)
    assert REASON_OPTIMIZATION_REFUSED in REASONS[CONDITION_OPTIMIZATION_READY]


# --- properties ---------------------------------------------------------------------------------

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
SPEC_KEYS = st.sampled_from(
    ['scaleTargetRef', 'modelID', 'minReplicas', 'maxReplicas', 'variantCost', 'other']
)


@given(JSON)
def test_parse_va_never_raises_on_any_json(obj: Any) -> None:
    result = parse_va(obj)
    assert isinstance(result, VariantAutoscaling | InvalidObject)


@given(st.dictionaries(SPEC_KEYS, JSON, max_size=5), st.dictionaries(st.text(max_size=6), JSON))
def test_parse_va_never_raises_on_near_valid_objects(
    spec: dict[str, Any], metadata: dict[str, Any]
) -> None:
    obj = minimal()
    obj['spec'] |= spec
    obj['metadata'] = metadata
    result = parse_va(obj)
    if isinstance(result, InvalidObject):
        assert result.message
        assert '\n' not in result.message
    else:
        assert result.spec.min_replicas <= result.spec.max_replicas


@given(
    st.integers(0, INT32_MAX),
    st.integers(0, INT32_MAX),
    st.from_regex(r'\A[0-9]{1,6}(\.[0-9]{1,4})?\Z'),
)
def test_valid_specs_round_trip(low: int, span: int, cost: str) -> None:
    high = max(1, min(INT32_MAX, low + span))
    obj = minimal(minReplicas=min(low, high), maxReplicas=high, variantCost=cost)
    va = parse_va(obj)
    assert isinstance(va, VariantAutoscaling), va
    assert va.to_object() == obj
    assert va.spec.cost == float(cost)
