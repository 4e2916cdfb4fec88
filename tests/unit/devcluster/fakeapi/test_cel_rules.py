"""devcluster.fakeapi.cel_rules: the CRDs' CEL rules as kube-apiserver evaluates them.

The wording and the paths were read from kube-apiserver 1.34's answers to the same objects
(tests/e2e/test_schemas.py sends some of them to both backends).
"""

from __future__ import annotations

from typing import Any

import pytest

from llmscaler.devcluster.fakeapi.cel_rules import check, compile_all
from llmscaler.devcluster.fakeapi.field_errors import FieldType


def node(*rules: dict[str, Any], **properties: dict[str, Any]) -> dict[str, Any]:
    return {'type': 'object', 'x-kubernetes-validations': list(rules), 'properties': properties}


ORDERED = {'rule': 'self.low <= self.high', 'message': 'low must be at most high'}
INTEGER = {'type': 'integer'}
RANGE = node(ORDERED, low=INTEGER, high=INTEGER)


def shown(errors: Any) -> list[str]:
    return [str(e) for e in errors]


def test_a_failing_rule_is_an_error_at_its_node_with_its_message() -> None:
    schema = node(spec=RANGE)
    assert check(schema=schema, obj={'spec': {'low': 1, 'high': 2}}) == []
    errors = check(schema=schema, obj={'spec': {'low': 3, 'high': 2}})
    assert shown(errors) == ['spec: Invalid value: "object": low must be at most high']
    assert errors[0].type is FieldType.INVALID


def test_the_items_of_a_list_are_each_judged_at_their_index() -> None:
    schema = node(spec=node(ranges={'type': 'array', 'items': RANGE}))
    obj = {
        'spec': {'ranges': [{'low': 5, 'high': 1}, {'low': 0, 'high': 1}, {'low': 2, 'high': 1}]}
    }
    assert shown(check(schema=schema, obj=obj)) == [
        'spec.ranges[0]: Invalid value: "object": low must be at most high',
        'spec.ranges[2]: Invalid value: "object": low must be at most high',
    ]


def test_has_tells_a_missing_field_and_a_missing_key_fails_naming_the_rule() -> None:
    either = {'rule': 'has(self.a) || has(self.b)', 'message': 'set a or b'}
    schema = node(spec=node(either))
    assert check(schema=schema, obj={'spec': {'b': 1}}) == []
    assert shown(check(schema=schema, obj={'spec': {}})) == [
        'spec: Invalid value: "object": set a or b'
    ]
    no_message = node(spec=node({'rule': 'self.a > 1'}))
    assert shown(check(schema=no_message, obj={'spec': {}})) == [
        'spec: Invalid value: "object": no such key: a evaluating rule: self.a > 1'
    ]
    assert shown(check(schema=no_message, obj={'spec': {'a': 0}})) == [
        'spec: Invalid value: "object": failed rule: self.a > 1'
    ]


def test_message_expression_reason_and_field_path_shape_the_error() -> None:
    rule = {
        'rule': 'self.low <= self.high',
        'messageExpression': "'low ' + string(self.low) + ' above high'",
        'message': 'fallback',
        'reason': 'FieldValueForbidden',
        'fieldPath': '.low',
    }
    errors = check(schema=node(spec=node(rule)), obj={'spec': {'low': 3, 'high': 2}})
    assert shown(errors) == ['spec.low: Forbidden: low 3 above high']
    # A message expression that cannot be evaluated falls back to the message.
    broken = rule | {'messageExpression': "'x' + string(self.missing)"}
    errors = check(schema=node(spec=node(broken)), obj={'spec': {'low': 3, 'high': 2}})
    assert shown(errors) == ['spec.low: Forbidden: fallback']


def test_an_unchanged_value_is_let_through_unless_the_rule_names_old_self() -> None:
    schema = node(spec=RANGE, other=INTEGER)
    old = {'spec': {'low': 3, 'high': 2}, 'other': 1}
    assert check(schema=schema, obj={'spec': {'low': 3, 'high': 2}, 'other': 2}, old=old) == []
    changed = check(schema=schema, obj={'spec': {'low': 4, 'high': 2}, 'other': 1}, old=old)
    assert len(changed) == 1
    # A list's item is unchanged when its list is: items are not correlated one by one.
    listed = node(spec=node(ranges={'type': 'array', 'items': RANGE}))
    before = {'spec': {'ranges': [{'low': 5, 'high': 1}]}}
    assert check(schema=listed, obj=before, old=before) == []
    grown = {'spec': {'ranges': [{'low': 5, 'high': 1}, {'low': 0, 'high': 1}]}}
    assert len(check(schema=listed, obj=grown, old=before)) == 1


def test_a_transition_rule_runs_on_updates_only() -> None:
    grow = {'rule': 'self >= oldSelf', 'message': 'may not shrink'}
    schema = node(spec=node(size={'type': 'integer', 'x-kubernetes-validations': [grow]}))
    assert check(schema=schema, obj={'spec': {'size': 1}}) == []
    assert check(schema=schema, obj={'spec': {'size': 3}}, old={'spec': {'size': 2}}) == []
    assert shown(check(schema=schema, obj={'spec': {'size': 1}}, old={'spec': {'size': 2}})) == [
        'spec.size: Invalid value: "integer": may not shrink'
    ]
    # Not ratcheted: it names oldSelf (an unchanged value passes it here anyway, 2 >= 2).
    assert check(schema=schema, obj={'spec': {'size': 2}}, old={'spec': {'size': 2}}) == []


def test_rules_the_fake_cannot_evaluate_fail_when_the_schema_is_read() -> None:
    with pytest.raises(ValueError, match='does not compile'):
        compile_all(schema=node(spec=node({'rule': 'self.a <='})))
    with pytest.raises(ValueError, match='optionalOldSelf'):
        compile_all(schema=node(spec=node({'rule': 'true', 'optionalOldSelf': True})))
    with pytest.raises(ValueError, match='unknown reason'):
        compile_all(schema=node(spec=node({'rule': 'true', 'reason': 'Nope'})))
