"""apimachinery's condition rules as `set_condition` and `find_condition` follow them.

The condition types and reasons are VariantAutoscaling's (`kube.crd`), as a status carries them;
what a model accepts and refuses is tested through the resources built on it (test_crd,
test_llmautoscaler).
"""

from __future__ import annotations

from typing import Any

import pydantic
import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmscaler.kube.crd import (
    CONDITION_METRICS_AVAILABLE,
    CONDITION_TARGET_RESOLVED,
    REASON_TARGET_FOUND,
    REASON_TARGET_NOT_FOUND,
    REASONS,
)
from llmscaler.kube.resource_model import Condition, find_condition, set_condition

T1, T2, T3, T4 = (f'2025-06-01T12:0{m}:00Z' for m in range(4))


def test_set_condition_transition_times() -> None:
    # T1: new type → appended, lastTransitionTime = T1.
    first = set_condition(
        conditions=(),
        type=CONDITION_TARGET_RESOLVED,
        status='False',
        reason=REASON_TARGET_NOT_FOUND,
        message='no deployment d',
        observed_generation=1,
        now=T1,
    )
    assert [(c.type, c.status, c.last_transition_time) for c in first] == [
        ('TargetResolved', 'False', T1)
    ]
    # T2: same status, new message and generation → updated, lastTransitionTime stays T1.
    second = set_condition(
        conditions=first,
        type=CONDITION_TARGET_RESOLVED,
        status='False',
        reason=REASON_TARGET_NOT_FOUND,
        message='still no deployment d',
        observed_generation=2,
        now=T2,
    )
    (c,) = second
    assert (c.last_transition_time, c.message, c.observed_generation) == (
        T1,
        'still no deployment d',
        2,
    )
    # T3: status flips False → True → lastTransitionTime = T3.
    third = set_condition(
        conditions=second,
        type=CONDITION_TARGET_RESOLVED,
        status='True',
        reason=REASON_TARGET_FOUND,
        message='',
        observed_generation=2,
        now=T3,
    )
    assert [(c.status, c.reason, c.last_transition_time) for c in third] == [
        ('True', 'TargetFound', T3)
    ]
    # T4: another type is appended after it; the first one is untouched.
    fourth = set_condition(
        conditions=third,
        type=CONDITION_METRICS_AVAILABLE,
        status='Unknown',
        reason='MetricsMissing',
        message='',
        observed_generation=None,
        now=T4,
    )
    assert fourth[0] is third[0]
    assert [(c.type, c.last_transition_time) for c in fourth] == [
        ('TargetResolved', T3),
        ('MetricsAvailable', T4),
    ]
    # Updating the first of two keeps the order.
    fifth = set_condition(
        conditions=fourth,
        type=CONDITION_TARGET_RESOLVED,
        status='False',
        reason=REASON_TARGET_NOT_FOUND,
        message='gone',
        observed_generation=3,
        now=T4,
    )
    assert [(c.type, c.status, c.last_transition_time) for c in fifth] == [
        ('TargetResolved', 'False', T4),
        ('MetricsAvailable', 'Unknown', T4),
    ]
    assert find_condition(conditions=fifth, type='MetricsAvailable') is fourth[1]
    assert find_condition(conditions=fifth, type='OptimizationReady') is None


def test_set_condition_rejects_a_bad_timestamp() -> None:
    with pytest.raises(pydantic.ValidationError):
        set_condition(
            conditions=(),
            type=CONDITION_TARGET_RESOLVED,
            status='True',
            reason=REASON_TARGET_FOUND,
            message='',
            observed_generation=None,
            now='1717243200.0',
        )


@given(
    st.lists(
        st.tuples(st.sampled_from(sorted(REASONS)), st.sampled_from(['True', 'False', 'Unknown'])),
        max_size=30,
    )
)
def test_set_condition_one_per_type_and_time_of_last_flip(updates: list[tuple[str, Any]]) -> None:
    conditions: tuple[Condition, ...] = ()
    flipped_at: dict[str, str] = {}
    last_status: dict[str, str] = {}
    for i, (kind, status) in enumerate(updates):
        now = f'2025-01-01T00:00:{i:02d}Z'
        if last_status.get(kind) != status:
            flipped_at[kind] = now
        last_status[kind] = status
        conditions = set_condition(
            conditions=conditions,
            type=kind,
            status=status,
            reason=REASONS[kind][0],
            message=f'update {i}',
            observed_generation=i,
            now=now,
        )
    assert [c.type for c in conditions] == list(dict.fromkeys(k for k, _ in updates))
    assert {c.type: c.last_transition_time for c in conditions} == flipped_at
    assert {c.type: c.status for c in conditions} == last_status
