"""The three conditions of a VariantAutoscaling, worked from the facts of one cycle.

| facts | condition |
|---|---|
| target read / not found | TargetResolved True TargetFound / False TargetNotFound + problem |
| every replica fresh | MetricsAvailable True MetricsFound |
| no ready replica | True MetricsFound, the core's 'no ready replicas' (not "fresh metrics") |
| core says missing / stale / invalid | False, the core's reason (MetricsInvalid, ...) + message |
| ... and Prometheus failed | False PrometheusError, first error (sorted) + '(and N more)' |
| ... and the pod scrape failed | the core's reason kept, the error added to the message |
| decision made | OptimizationReady True OptimizationSucceeded 'scale_up 2 -> 4 (...)' |
| decision held on metrics | False MetricsUnavailable 'holding at 3 ...' |
| no decision / unresolved / bad spec | False SkippedProcessing / InvalidConfiguration |

Every reason belongs to `crd.REASONS` of its condition type and every message is one line.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmscaler.analyze.validity import NO_READY_REPLICAS
from llmscaler.collect.readings import ErrorReason, SourceError
from llmscaler.controller.va.conditions import (
    for_decision,
    invalid_spec,
    metrics_available,
    optimization_ready,
    skipped,
    target_resolved,
)
from llmscaler.domain.basics import Action
from llmscaler.domain.snapshot import Decision
from llmscaler.engine import ANALYSIS_FAILED, HOLD_REASON
from llmscaler.kube import crd
from llmscaler.kube.nextstatus import ConditionUpdate

LLAMA = 'meta-llama/Llama-3.1-8B-Instruct'
TRUE_REASONS = {
    crd.REASON_TARGET_FOUND,
    crd.REASON_METRICS_FOUND,
    crd.REASON_OPTIMIZATION_SUCCEEDED,
}


def decision(**kw: object) -> Decision:
    fields: dict[str, object] = {
        'variant': 'llama-a100',
        'namespace': 'llm',
        'model_id': LLAMA,
        'accelerator': 'A100',
        'current': 2,
        'target': 4,
        'action': Action.SCALE_UP,
        'reason': 'kv spare capacity 0.04 below trigger 0.10',
        'analyzer': 'saturation',
    }
    fields.update(kw)
    return Decision(**fields)  # type: ignore[arg-type]


def unavailable(reason: str = crd.REASON_METRICS_MISSING, message: str = '') -> Decision:
    return decision(
        current=3,
        target=3,
        action=Action.HOLD,
        reason=HOLD_REASON,
        metrics_available=False,
        metrics_reason=reason,
        message=message,
    )


def as_tuple(update: ConditionUpdate) -> tuple[str, str, str, str]:
    return (update.type, update.status, update.reason, update.message)


TIMEOUT = SourceError('kv_cache_usage', ErrorReason.TIMEOUT, 'no answer within 5s')
REFUSED = SourceError('kv_cache_usage', ErrorReason.UNREACHABLE, 'connection refused')
BAD_GATEWAY = SourceError('queue_length', ErrorReason.HTTP_5XX, '502 Bad Gateway')
SCRAPE = SourceError(
    'http://10.1.2.3:8000/metrics', ErrorReason.UNREACHABLE, 'ConnectError: refused'
)


# --- TargetResolved ----------------------------------------------------------------------------


def test_target_found() -> None:
    update = target_resolved(kind='Deployment', name='llama-8b-a100', problem='')
    assert as_tuple(update) == (
        'TargetResolved',
        'True',
        'TargetFound',
        'Deployment llama-8b-a100 found',
    )


def test_target_not_found_carries_the_problem_on_one_line() -> None:
    update = target_resolved(
        kind='Deployment', name='gone', problem='Deployment llm/gone\n  not found\n'
    )
    assert as_tuple(update) == (
        'TargetResolved',
        'False',
        'TargetNotFound',
        'Deployment llm/gone not found',
    )


# --- MetricsAvailable --------------------------------------------------------------------------


def test_metrics_found_ignores_source_errors() -> None:
    for errors in ((), (TIMEOUT,)):
        update = metrics_available(decision=decision(), source_errors=errors, source='prometheus')
        assert as_tuple(update) == (
            'MetricsAvailable',
            'True',
            'MetricsFound',
            'every ready replica has fresh metrics',
        )


def test_metrics_found_without_ready_replicas_does_not_claim_fresh_metrics() -> None:
    # A variant at zero (or with every pod starting) has nothing to measure; "every ready
    # replica has fresh metrics" beside a no-metrics decision would be false.
    held = decision(current=0, target=0, action=Action.NO_CHANGE, message=NO_READY_REPLICAS)
    update = metrics_available(decision=held, source_errors=(), source='pods')
    assert as_tuple(update) == (
        'MetricsAvailable',
        'True',
        'MetricsFound',
        'no ready replicas: nothing to measure',
    )


def test_metrics_invalid_is_a_reason_of_metrics_available() -> None:
    assert crd.REASON_METRICS_INVALID in crd.REASONS[crd.CONDITION_METRICS_AVAILABLE]


@pytest.mark.parametrize(
    'reason', [crd.REASON_METRICS_MISSING, crd.REASON_METRICS_STALE, crd.REASON_METRICS_INVALID]
)
def test_core_reason_and_message_without_source_errors(reason: str) -> None:
    update = metrics_available(
        decision=unavailable(reason, 'pod llama-a100-x: newest sample\n130 s old'),
        source_errors=(),
        source='prometheus',
    )
    assert as_tuple(update) == (
        'MetricsAvailable',
        'False',
        reason,
        'pod llama-a100-x: newest sample 130 s old',
    )


def test_empty_core_message_gets_a_default() -> None:
    update = metrics_available(decision=unavailable(), source_errors=(), source='pods')
    assert (update.reason, update.message) == ('MetricsMissing', 'metrics unavailable')


@pytest.mark.parametrize('reason', ['MetricsFound', '', 'something else'])
def test_unavailable_with_another_reason_counts_as_missing(reason: str) -> None:
    # An unavailable decision that kept the default reason must not read False/MetricsFound.
    update = metrics_available(decision=unavailable(reason), source_errors=(), source='pods')
    assert (update.status, update.reason) == ('False', 'MetricsMissing')


def test_prometheus_error_names_the_first_error_sorted_and_counts_the_rest() -> None:
    # Sorted by (target, reason, message): kv_cache_usage/Timeout < kv_cache_usage/Unreachable <
    # queue_length/HTTPServerError, whatever the order given.
    update = metrics_available(
        decision=unavailable(crd.REASON_METRICS_STALE, 'no fresh metrics for 2 replicas'),
        source_errors=(BAD_GATEWAY, REFUSED, TIMEOUT),
        source='prometheus',
    )
    assert as_tuple(update) == (
        'MetricsAvailable',
        'False',
        'PrometheusError',
        'no fresh metrics for 2 replicas; prometheus failed: '
        'kv_cache_usage: Timeout: no answer within 5s (and 2 more)',
    )


def test_prometheus_error_with_one_error_has_no_count() -> None:
    update = metrics_available(
        decision=unavailable(), source_errors=(BAD_GATEWAY,), source='prometheus'
    )
    assert as_tuple(update) == (
        'MetricsAvailable',
        'False',
        'PrometheusError',
        'metrics unavailable; prometheus failed: queue_length: HTTPServerError: 502 Bad Gateway',
    )


def test_prometheus_error_message_is_one_line() -> None:
    error = SourceError('kv_cache_usage', ErrorReason.BAD_RESPONSE, 'not JSON:\n<html>\r\n')
    update = metrics_available(decision=unavailable(), source_errors=[error], source='prometheus')
    assert update.message == (
        'metrics unavailable; prometheus failed: kv_cache_usage: BadResponse: not JSON: <html>'
    )


@pytest.mark.parametrize('reason', [crd.REASON_METRICS_MISSING, crd.REASON_METRICS_STALE])
def test_pod_scrape_errors_keep_the_core_reason(reason: str) -> None:
    update = metrics_available(
        decision=unavailable(reason, '1 of 2 ready replicas unreported'),
        source_errors=(SCRAPE, SCRAPE),
        source='pods',
    )
    assert as_tuple(update) == (
        'MetricsAvailable',
        'False',
        reason,
        '1 of 2 ready replicas unreported; pods failed: '
        'http://10.1.2.3:8000/metrics: Unreachable: ConnectError: refused (and 1 more)',
    )


# --- OptimizationReady -------------------------------------------------------------------------


def test_optimization_succeeded_states_the_decision() -> None:
    assert as_tuple(optimization_ready(decision=decision())) == (
        'OptimizationReady',
        'True',
        'OptimizationSucceeded',
        'scale_up 2 -> 4 (saturation: kv spare capacity 0.04 below trigger 0.10)',
    )


def test_optimization_without_a_reason_says_no_change() -> None:
    update = optimization_ready(
        decision=decision(current=3, target=3, action=Action.NO_CHANGE, reason='')
    )
    assert update.message == 'no_change 3 -> 3 (saturation: no change)'


def test_optimization_held_on_metrics() -> None:
    assert as_tuple(optimization_ready(decision=unavailable())) == (
        'OptimizationReady',
        'False',
        'MetricsUnavailable',
        'holding at 3 (never down on missing, invalid or stale metrics): '
        'metrics unavailable: holding (never down on missing, invalid or stale metrics)',
    )


def test_optimization_failed_when_the_analysis_failed_and_the_targets_were_kept() -> None:
    failed = decision(
        current=3,
        target=3,
        action=Action.NO_CHANGE,
        reason=f'{ANALYSIS_FAILED} (OverflowError: math range error); targets kept',
    )
    assert as_tuple(optimization_ready(decision=failed)) == (
        'OptimizationReady',
        'False',
        'OptimizationFailed',
        f'holding at 3: {ANALYSIS_FAILED} (OverflowError: math range error); targets kept',
    )


def test_skipped_and_invalid_spec_fold_newlines() -> None:
    assert as_tuple(skipped(why='scale target not resolved:\nDeployment llm/x not found')) == (
        'OptimizationReady',
        'False',
        'SkippedProcessing',
        'scale target not resolved: Deployment llm/x not found',
    )
    assert as_tuple(invalid_spec(message='spec.minReplicas: must be <= maxReplicas\n(3 > 2)')) == (
        'OptimizationReady',
        'False',
        'InvalidConfiguration',
        'spec.minReplicas: must be <= maxReplicas (3 > 2)',
    )


# --- for_decision ------------------------------------------------------------------------------


def test_for_decision_gives_the_three_conditions_in_order() -> None:
    updates = for_decision(
        kind='Deployment',
        name='llama-8b-a100',
        decision=unavailable(crd.REASON_METRICS_STALE, 'stale'),
        source_errors=(TIMEOUT,),
        source='prometheus',
    )
    assert [(u.type, u.status, u.reason) for u in updates] == [
        ('TargetResolved', 'True', 'TargetFound'),
        ('MetricsAvailable', 'False', 'PrometheusError'),
        ('OptimizationReady', 'False', 'MetricsUnavailable'),
    ]


def test_for_decision_without_a_decision_skips() -> None:
    updates = for_decision(
        kind='StatefulSet', name='qwen-decode', decision=None, source_errors=(), source='pods'
    )
    assert [as_tuple(u) for u in updates] == [
        ('TargetResolved', 'True', 'TargetFound', 'StatefulSet qwen-decode found'),
        (
            'OptimizationReady',
            'False',
            'SkippedProcessing',
            'no decision was made for this variant this cycle',
        ),
    ]


# --- properties over random facts --------------------------------------------------------------

TEXT = st.text(alphabet=st.sampled_from('ab c\n\r\t\x0b\x0c\x1c\x85\u2028\u00e9:;()-'), max_size=30)
METRICS_REASONS = st.sampled_from(
    [
        crd.REASON_METRICS_FOUND,
        crd.REASON_METRICS_MISSING,
        crd.REASON_METRICS_STALE,
        crd.REASON_METRICS_INVALID,
        '',
    ]
)


@st.composite
def decisions(draw: st.DrawFn) -> Decision:
    current = draw(st.integers(min_value=0, max_value=10))
    target = draw(st.integers(min_value=0, max_value=10))
    return decision(
        variant=draw(TEXT),
        current=current,
        target=target,
        action=draw(st.sampled_from(list(Action))),
        reason=draw(TEXT),
        analyzer=draw(TEXT),
        metrics_available=draw(st.booleans()),
        metrics_reason=draw(METRICS_REASONS | TEXT),
        message=draw(TEXT),
    )


SOURCE_ERRORS = st.lists(
    st.builds(SourceError, TEXT, st.sampled_from(list(ErrorReason)), TEXT), max_size=4
)


def check(updates: Sequence[ConditionUpdate]) -> None:
    for update in updates:
        assert update.reason in crd.REASONS[update.type], update
        assert update.status == ('True' if update.reason in TRUE_REASONS else 'False'), update
        assert update.message.splitlines() in ([update.message], []), update
        assert update.message == update.message.strip(), update


@given(
    kind=TEXT,
    name=TEXT,
    problem=TEXT,
    found=st.booleans(),
    made=st.none() | decisions(),
    errors=SOURCE_ERRORS,
    source=st.sampled_from(['prometheus', 'pods']) | TEXT,
)
def test_every_reason_is_of_its_type_and_every_message_one_line(
    kind: str,
    name: str,
    problem: str,
    found: bool,
    made: Decision | None,
    errors: list[SourceError],
    source: str,
) -> None:
    updates = list(
        for_decision(kind=kind, name=name, decision=made, source_errors=errors, source=source)
    )
    updates += [
        target_resolved(kind=kind, name=name, problem='' if found else problem),
        skipped(why=problem),
        invalid_spec(message=problem),
    ]
    check(updates)
    if made is not None:
        available = updates[1]
        assert available.status == ('True' if made.metrics_available else 'False')
        expected_prometheus = not made.metrics_available and errors and source == 'prometheus'
        assert (available.reason == crd.REASON_PROMETHEUS_ERROR) == bool(expected_prometheus)
        if not made.metrics_available and errors and len(errors) > 1:
            assert available.message.endswith(f'(and {len(errors) - 1} more)')
