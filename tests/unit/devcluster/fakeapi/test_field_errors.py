"""devcluster.fakeapi.field_errors: field errors and the Invalid answer, as apimachinery words
them (k8s.io/apimachinery pkg/util/validation/field, pkg/api/errors `NewInvalid`, v0.34)."""

from __future__ import annotations

from llmscaler.devcluster.fakeapi.field_errors import FieldError, FieldType, invalid


def test_each_kind_shows_its_value_as_go_prints_it() -> None:
    assert str(FieldError(FieldType.INVALID, 'spec.a', -1, 'too low')) == (
        'spec.a: Invalid value: -1: too low'
    )
    assert str(FieldError(FieldType.INVALID, 'spec.a', 2.0, 'x')) == 'spec.a: Invalid value: 2: x'
    assert (
        str(FieldError(FieldType.INVALID, 'spec.a', 'on', 'x')) == 'spec.a: Invalid value: "on": x'
    )
    assert (
        str(FieldError(FieldType.INVALID, 'spec.a', True, 'x')) == 'spec.a: Invalid value: true: x'
    )
    assert str(FieldError(FieldType.INVALID, '<nil>', None, 'x')) == '<nil>: Invalid value: null: x'
    assert str(FieldError(FieldType.REQUIRED, 'spec.b')) == 'spec.b: Required value'
    assert str(FieldError(FieldType.TOO_LONG, 'spec.c', None, 'may not be more than 3 bytes')) == (
        'spec.c: Too long: may not be more than 3 bytes'
    )
    assert str(FieldError(FieldType.TOO_MANY, 'spec.d', 5, 'must have at most 3 items')) == (
        'spec.d: Too many: 5: must have at most 3 items'
    )


def test_the_answer_lists_distinct_errors_and_carries_the_causes_kubectl_prints() -> None:
    one = FieldError(FieldType.REQUIRED, 'spec.b')
    err = invalid(kind='VariantAutoscaling', group='llmd.ai', name='x', errors=[one])
    assert err.code == 422
    assert err.reason == 'Invalid'
    assert err.message == 'VariantAutoscaling.llmd.ai "x" is invalid: spec.b: Required value'
    assert err.details == {
        'name': 'x',
        'kind': 'VariantAutoscaling',
        'group': 'llmd.ai',
        'causes': [
            {'reason': 'FieldValueRequired', 'message': 'Required value', 'field': 'spec.b'}
        ],
    }
    two = FieldError(FieldType.INVALID, 'spec.a', 1, 'x')
    err = invalid(kind='Pod', group='', name='p', errors=[one, two, one])
    assert (
        err.message == 'Pod "p" is invalid: [spec.b: Required value, spec.a: Invalid value: 1: x]'
    )
    assert err.details is not None
    assert 'group' not in err.details
    assert len(err.details['causes']) == 3
