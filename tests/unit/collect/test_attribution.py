"""Tests of pod → variant attribution (WVA v0.9.0's rules): owner walks, labels, skips."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmscaler.collect.attribution import (
    Attribution,
    PodInfo,
    TargetRef,
    attribute,
    pod_variants,
    with_ready_pods,
)
from llmscaler.collect.readings import ErrorReason, ModelReading, PodReading, Reading, SourceError
from llmscaler.config.resolved import Config
from llmscaler.domain.basics import Action
from llmscaler.domain.snapshot import Decision, PoolMetrics, ReplicaMetrics, Snapshot, Variant
from llmscaler.domain.state import EMPTY_STATE
from llmscaler.engine import decide
from tests.support.configs import PERCENTAGE, TOKEN

NOW = 5_000.0
NS = 'ns'
MODEL = 'meta-llama/Llama-3.1-8B-Instruct'
WORKER_INDEX = 'leaderworkerset.sigs.k8s.io/worker-index'

VARIANTS = (
    Variant(name='llama-h100', namespace=NS, model_id=MODEL),
    Variant(name='llama-sts', namespace=NS, model_id=MODEL),
    Variant(name='llama-lws', namespace=NS, model_id=MODEL),
    Variant(name='qwen', namespace='other', model_id='qwen'),
)
TARGETS = (
    TargetRef(namespace=NS, kind='Deployment', name='llama', variant='llama-h100'),
    TargetRef(namespace=NS, kind='StatefulSet', name='llama-s', variant='llama-sts'),
    TargetRef(namespace=NS, kind='LeaderWorkerSet', name='llama-l', variant='llama-lws'),
    TargetRef(namespace='other', kind='Deployment', name='qwen', variant='qwen'),
)
DEPLOYMENT_OWNERS = (('ReplicaSet', 'llama-7c9f'), ('Deployment', 'llama'))


def pod_reading(pod: str, **figures: Any) -> PodReading:
    base = PodReading(
        namespace=NS, pod=pod, observed_at=NOW, model_name=MODEL, kv_usage=0.5, queue_length=2.0
    )
    return replace(base, **figures)


def pod_info(name: str, *owners: tuple[str, str], **labels: str) -> PodInfo:
    return PodInfo(
        namespace=NS,
        name=name,
        labels=tuple(sorted(labels.items())),
        owners=owners,
    )


def run(readings: list[PodReading], pods: list[PodInfo]) -> Attribution:
    return attribute(
        reading=Reading(pods=tuple(readings)), variants=VARIANTS, targets=TARGETS, pods=pods
    )


def only_variant(result: Attribution) -> str:
    assert len(result.replicas) == 1, result
    return result.replicas[0].variant


# --- the owner walk ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ('owners', 'variant'),
    [
        (DEPLOYMENT_OWNERS, 'llama-h100'),
        ((('StatefulSet', 'llama-s'),), 'llama-sts'),
        ((('LeaderWorkerSet', 'llama-l'),), 'llama-lws'),
        ((('StatefulSet', 'llama-l-0'), ('LeaderWorkerSet', 'llama-l')), 'llama-lws'),
    ],
    ids=['deployment-via-replicaset', 'statefulset', 'lws-direct', 'lws-via-statefulset'],
)
def test_owner_walk_reaches_the_scale_target(
    owners: tuple[tuple[str, str], ...], variant: str
) -> None:
    result = run([pod_reading('p')], [pod_info('p', *owners)])
    assert only_variant(result) == variant
    assert result.unattributed == ()


def test_lws_leader_is_the_replica_and_workers_are_skipped() -> None:
    owners = (('StatefulSet', 'llama-l-0'), ('LeaderWorkerSet', 'llama-l'))
    result = run(
        [pod_reading('l-0'), pod_reading('l-0-1'), pod_reading('l-0-2')],
        [
            pod_info('l-0', *owners, **{WORKER_INDEX: '0'}),
            pod_info('l-0-1', *owners, **{WORKER_INDEX: '1'}),
            pod_info('l-0-2', *owners, **{WORKER_INDEX: '2'}),
        ],
    )
    assert [r.pod for r in result.replicas] == ['l-0']
    assert result.unattributed == ((NS, 'l-0-1', 'lws-worker'), (NS, 'l-0-2', 'lws-worker'))


@pytest.mark.parametrize(
    ('info', 'reason'),
    [
        (pod_info('p'), 'no-owner'),
        (
            pod_info('p', ('ReplicaSet', 'unmanaged-1'), ('Deployment', 'unmanaged')),
            'unknown-target',
        ),
        # a Deployment called like a StatefulSet target is not that target: kinds must match
        (pod_info('p', ('Deployment', 'llama-s')), 'unknown-target'),
        # a target in another namespace does not own pods of this one
        (pod_info('p', ('Deployment', 'qwen')), 'unknown-target'),
    ],
    ids=['no-owner', 'unmanaged', 'kind-mismatch', 'other-namespace'],
)
def test_pods_outside_every_target_are_unattributed(info: PodInfo, reason: str) -> None:
    result = run([pod_reading('p')], [info])
    assert result.replicas == ()
    assert result.unattributed == ((NS, 'p', reason),)


def test_target_naming_an_unknown_variant() -> None:
    result = attribute(
        reading=Reading(pods=(pod_reading('p'),)),
        variants=VARIANTS,
        targets=(TargetRef(namespace=NS, kind='Deployment', name='llama', variant='gone'),),
        pods=[pod_info('p', *DEPLOYMENT_OWNERS)],
    )
    assert result.unattributed == ((NS, 'p', 'unknown-variant'),)


# --- labels -----------------------------------------------------------------------------------


def test_series_label_overrides_the_owner_walk() -> None:
    reading = pod_reading('p', labels=(('llm_d_ai_variant', 'llama-sts'), ('engine', '0')))
    result = run([reading], [pod_info('p', *DEPLOYMENT_OWNERS)])
    assert only_variant(result) == 'llama-sts'


def test_pod_label_names_the_variant_when_the_series_has_none() -> None:
    info = pod_info('p', *DEPLOYMENT_OWNERS, **{'llm-d.ai/variant': 'llama-lws'})
    assert only_variant(run([pod_reading('p')], [info])) == 'llama-lws'
    # the series label still wins over the pod label
    reading = pod_reading('p', labels=(('llm_d_ai_variant', 'llama-sts'),))
    assert only_variant(run([reading], [info])) == 'llama-sts'


def test_label_naming_an_unknown_variant_is_not_silently_walked() -> None:
    reading = pod_reading('p', labels=(('llm_d_ai_variant', 'nope'),))
    result = run([reading], [pod_info('p', *DEPLOYMENT_OWNERS)])
    assert result.unattributed == ((NS, 'p', 'unknown-variant'),)


def test_worker_skip_applies_even_with_a_variant_label() -> None:
    reading = pod_reading('w', labels=(('llm_d_ai_variant', 'llama-lws'),))
    result = run([reading], [pod_info('w', ('LeaderWorkerSet', 'llama-l'), **{WORKER_INDEX: '3'})])
    assert result.unattributed == ((NS, 'w', 'lws-worker'),)


def test_model_mismatch_is_unattributed_and_empty_model_name_is_accepted() -> None:
    pods = [pod_info('a', *DEPLOYMENT_OWNERS), pod_info('b', *DEPLOYMENT_OWNERS)]
    result = run([pod_reading('a', model_name='qwen'), pod_reading('b', model_name='')], pods)
    assert [r.pod for r in result.replicas] == ['b']
    assert result.unattributed == ((NS, 'a', 'model-mismatch'),)


# --- pod gone, missing figures ----------------------------------------------------------------


def test_reading_of_a_deleted_pod_is_unattributed() -> None:
    result = run([pod_reading('gone'), pod_reading('here')], [pod_info('here', *DEPLOYMENT_OWNERS)])
    assert [r.pod for r in result.replicas] == ['here']
    assert result.unattributed == ((NS, 'gone', 'pod-gone'),)


def test_missing_kv_stays_missing_and_is_listed_as_partial() -> None:
    result = run([pod_reading('p', kv_usage=None)], [pod_info('p', *DEPLOYMENT_OWNERS)])
    (replica,) = result.replicas
    assert replica.kv_usage is None
    assert replica.queue_length == 2.0
    assert result.partial == ((NS, 'p', 'kv-missing'),)


def test_a_broken_queue_is_passed_on_as_it_is_and_listed_as_partial() -> None:
    result = run([pod_reading('p', queue_length=math.nan)], [pod_info('p', *DEPLOYMENT_OWNERS)])
    (replica,) = result.replicas
    assert replica.kv_usage == 0.5
    assert replica.queue_length is not None
    assert math.isnan(replica.queue_length)
    assert result.partial == ((NS, 'p', 'invalid'),)


@pytest.mark.parametrize(('kv', 'queue'), [(None, None), (math.nan, None), (math.inf, -math.inf)])
def test_ready_pod_with_neither_saturation_figure_is_attributed_not_dropped(
    kv: float | None, queue: float | None
) -> None:
    # Dropping it would leave the core to guess from counts; attributed, the core names it.
    result = run(
        [pod_reading('p', kv_usage=kv, queue_length=queue)], [pod_info('p', *DEPLOYMENT_OWNERS)]
    )
    assert [r.pod for r in result.replicas] == ['p']
    assert result.unattributed == ()
    assert result.partial


@pytest.mark.parametrize(
    ('kv', 'queue'), [(None, 2.0), (math.nan, 2.0), (0.5, -1.0), (0.5, 2.0), (0.0, 0.0)]
)
def test_a_pod_that_is_not_ready_is_skipped_whatever_its_figures(
    kv: float | None, queue: float | None
) -> None:
    starting = PodInfo(namespace=NS, name='p', owners=DEPLOYMENT_OWNERS, ready=False)
    result = run([pod_reading('p', kv_usage=kv, queue_length=queue)], [starting])
    assert result.replicas == ()
    assert result.partial == ()
    assert result.unattributed == ((NS, 'p', 'not-ready'),)


def test_every_figure_is_copied_as_read() -> None:
    reading = pod_reading(
        'p',
        kv_usage=0.25,
        queue_length=0.0,
        num_gpu_blocks=27863,
        block_size=-16,
        avg_input_tokens=1243.2,
        avg_output_tokens=math.inf,
        prefix_cache_hit_rate=0.35,
        avg_ttft=0.085,
        avg_itl=None,
        running_requests=41.0,
        arrival_rate=3.5,
    )
    (replica,) = run([reading], [pod_info('p', *DEPLOYMENT_OWNERS)]).replicas
    assert replica == ReplicaMetrics(
        pod='p',
        variant='llama-h100',
        namespace=NS,
        observed_at=NOW,
        kv_usage=0.25,
        queue_length=0.0,
        num_gpu_blocks=27863,
        # A non-positive block size means "size unknown", as before profiling.
        block_size=None,
        avg_input_tokens=1243.2,
        avg_output_tokens=math.inf,
        prefix_cache_hit_rate=0.35,
        arrival_rate=3.5,
        avg_ttft=0.085,
        avg_itl=None,
        running_requests=41.0,
    )
    assert run([reading], [pod_info('p', *DEPLOYMENT_OWNERS)]).partial == ((NS, 'p', 'invalid'),)
    # queue 0.0 is a real zero, not a missing series
    clean = replace(reading, avg_output_tokens=250.0)
    assert run([clean], [pod_info('p', *DEPLOYMENT_OWNERS)]).partial == ()


# --- a broken figure on one of two pods holds the model, through attribution and decide() ------


def shaped(pod: str, *, shape: str, kv: float | None) -> PodReading:
    """A reading as each source builds it: Prometheus series carry the variant label and the
    cache_config_info size; a scraped page names only the model (the owner walk resolves it)."""
    labels: tuple[tuple[str, str], ...] = (('model_name', MODEL),)
    if shape == 'prometheus':
        labels = (('llm_d_ai_variant', 'llama-h100'), ('model_name', MODEL), ('namespace', NS))
    return pod_reading(
        pod,
        labels=labels,
        kv_usage=kv,
        queue_length=0.0,
        num_gpu_blocks=1000,
        block_size=16,
        avg_input_tokens=500.0,
        avg_output_tokens=100.0,
    )


def attributed(
    variant: Variant, *, readings: tuple[PodReading, ...], pods: list[PodInfo]
) -> Attribution:
    """The pods' readings, and the model's 9 requests, attributed to `variant` alone."""
    return attribute(
        reading=Reading(
            pods=readings,
            models=(
                ModelReading(model_id=MODEL, namespace=NS, observed_at=NOW, request_count=9.0),
            ),
        ),
        variants=(variant,),
        targets=TARGETS,
        pods=pods,
    )


def decide_one(variant: Variant, found: Attribution, *, config: Config) -> Decision:
    """decide() on `variant` with the replicas and pools attributed to it, from an empty state."""
    snapshot = Snapshot(variants=(variant,), replicas=found.replicas, pools=found.pools)
    (decision,) = decide(snapshot=snapshot, config=config, state=EMPTY_STATE, now=NOW).decisions
    return decision


def decide_two_pods(*, shape: str, bad: float | None, config: Config) -> Decision:
    llama = Variant(
        name='llama-h100',
        namespace=NS,
        model_id=MODEL,
        min_replicas=0,
        max_replicas=4,
        current_replicas=2,
        ready_replicas=2,
    )
    found = attributed(
        llama,
        readings=(shaped('pod-a', shape=shape, kv=0.45), shaped('pod-b', shape=shape, kv=bad)),
        pods=[pod_info('pod-a', *DEPLOYMENT_OWNERS), pod_info('pod-b', *DEPLOYMENT_OWNERS)],
    )
    return decide_one(llama, found, config=config)


@pytest.mark.parametrize('config', [PERCENTAGE, TOKEN], ids=['percentage', 'token'])
@pytest.mark.parametrize('shape', ['prometheus', 'scrape'])
def test_both_pods_reporting_an_idle_load_scale_down(shape: str, config: Config) -> None:
    # The reference case: with pod-b's KV a real 0.0 the same load is a scale-down.
    decision = decide_two_pods(shape=shape, bad=0.0, config=config)
    assert (decision.current, decision.target) == (2, 1)
    assert decision.metrics_available


@pytest.mark.parametrize('config', [PERCENTAGE, TOKEN], ids=['percentage', 'token'])
@pytest.mark.parametrize('shape', ['prometheus', 'scrape'])
@pytest.mark.parametrize(
    ('bad', 'reason', 'what'),
    [
        (math.nan, 'MetricsInvalid', 'pod-b: kv_usage nan is not a finite number'),
        (-1.0, 'MetricsInvalid', 'pod-b: kv_usage -1 is below 0'),
        (7.0, 'MetricsInvalid', 'pod-b: kv_usage 7 is above 1'),
        (None, 'MetricsMissing', 'pod-b: kv_usage missing'),
    ],
    ids=['nan', 'negative', 'above-one', 'missing'],
)
def test_one_pod_with_a_broken_kv_figure_holds_the_model(
    shape: str, config: Config, bad: float | None, reason: str, what: str
) -> None:
    decision = decide_two_pods(shape=shape, bad=bad, config=config)
    assert (decision.current, decision.target) == (2, 2)
    assert decision.action is Action.NO_CHANGE
    assert not decision.metrics_available
    assert decision.metrics_reason == reason
    assert what in decision.message


# --- silent pods, pools, pass-through ---------------------------------------------------------


# 3 replicas, 2 ready by the Deployment's status; pods pod-a and pod-c report an idle page.
THREE_TWO_READY = Variant(
    name='llama-h100',
    namespace=NS,
    model_id=MODEL,
    min_replicas=1,
    max_replicas=3,
    current_replicas=3,
    ready_replicas=2,
)
IDLE = {'kv_usage': 0.05, 'queue_length': 0.0, 'num_gpu_blocks': 1000, 'block_size': 16}
A_AND_C_IDLE = (pod_reading('pod-a', **IDLE), pod_reading('pod-c', **IDLE))


def stand_in(*, config: Config) -> Decision:
    """3 replicas, 2 ready: pod-a reports, pod-b is ready without a reading (its page failed),
    pod-c is not ready (starting or stopping) and still serves a complete, idle page."""
    found = attributed(
        THREE_TWO_READY,
        readings=A_AND_C_IDLE,
        pods=[
            pod_info('pod-a', *DEPLOYMENT_OWNERS),
            pod_info('pod-b', *DEPLOYMENT_OWNERS),
            PodInfo(namespace=NS, name='pod-c', owners=DEPLOYMENT_OWNERS, ready=False),
        ],
    )
    assert found.silent == ((NS, 'pod-b', 'llama-h100'),)
    return decide_one(THREE_TWO_READY, found, config=config)


@pytest.mark.parametrize('config', [PERCENTAGE, TOKEN], ids=['percentage', 'token'])
def test_a_pod_that_is_not_ready_never_stands_in_for_a_silent_ready_pod(config: Config) -> None:
    decision = stand_in(config=config)
    assert decision.target >= decision.current == 3
    assert not decision.metrics_available
    assert (decision.metrics_reason, decision.message) == (
        'MetricsMissing',
        '1 of 2 ready replicas report metrics',
    )


@pytest.mark.parametrize('config', [PERCENTAGE, TOKEN], ids=['percentage', 'token'])
def test_a_lagging_ready_count_never_lets_a_new_pod_cover_for_a_silent_one(config: Config) -> None:
    # The Deployment's status still says 2 ready; the pods say 3, and pod-b's page failed.
    pods = [pod_info(name, *DEPLOYMENT_OWNERS) for name in ('pod-a', 'pod-b', 'pod-c')]
    found = attributed(THREE_TWO_READY, readings=A_AND_C_IDLE, pods=pods)
    (counted,) = with_ready_pods(variants=(THREE_TWO_READY,), pods=pods, targets=TARGETS)
    assert counted.ready_replicas == 3
    decision = decide_one(counted, found, config=config)
    assert decision.target >= decision.current == 3
    assert (decision.metrics_reason, decision.message) == (
        'MetricsMissing',
        '2 of 3 ready replicas report metrics',
    )


def test_the_ready_count_is_only_ever_raised_and_lws_workers_do_not_count() -> None:
    lws = Variant(name='llama-lws', namespace=NS, model_id=MODEL, ready_replicas=4)
    h100 = Variant(name='llama-h100', namespace=NS, model_id=MODEL, ready_replicas=0)
    pods = [
        pod_info('l-0', ('LeaderWorkerSet', 'llama-l'), **{WORKER_INDEX: '0'}),
        pod_info('l-0-1', ('LeaderWorkerSet', 'llama-l'), **{WORKER_INDEX: '1'}),
        pod_info('a', *DEPLOYMENT_OWNERS),
        PodInfo(namespace=NS, name='b', owners=DEPLOYMENT_OWNERS, ready=False),
    ]
    counted = with_ready_pods(variants=(lws, h100), pods=pods, targets=TARGETS)
    assert [v.ready_replicas for v in counted] == [4, 1]


POD_STATES = st.sampled_from(['reports', 'idle', 'silent', 'no-kv', 'nan-queue'])


@settings(max_examples=150, deadline=None)
@given(
    pods=st.lists(st.tuples(st.booleans(), POD_STATES), min_size=1, max_size=5),
    config=st.sampled_from([PERCENTAGE, TOKEN]),
)
def test_no_ready_pod_without_usable_figures_ever_lets_its_variant_go_down(
    pods: list[tuple[bool, str]], config: Config
) -> None:
    # Any mix of ready and not-ready pods, each with a busy or idle reading, none, or a broken
    # one: whenever a ready pod has no usable figures, the variant holds and says so.
    ready = sum(1 for is_ready, _ in pods if is_ready)
    llama = Variant(
        name='llama-h100',
        namespace=NS,
        model_id=MODEL,
        min_replicas=1,
        max_replicas=8,
        current_replicas=len(pods),
        ready_replicas=ready,
        pending_replicas=len(pods) - ready,
    )
    figures: dict[str, dict[str, Any]] = {
        'reports': {'kv_usage': 0.5, 'queue_length': 1.0},
        'idle': {'kv_usage': 0.0, 'queue_length': 0.0},
        'no-kv': {'kv_usage': None},
        'nan-queue': {'queue_length': math.nan},
    }
    readings = [
        pod_reading(f'p{i}', num_gpu_blocks=1000, block_size=16, **figures[state])
        for i, (_, state) in enumerate(pods)
        if state != 'silent'
    ]
    infos = [
        PodInfo(namespace=NS, name=f'p{i}', owners=DEPLOYMENT_OWNERS, ready=is_ready)
        for i, (is_ready, _) in enumerate(pods)
    ]
    found = attribute(
        reading=Reading(pods=tuple(readings)), variants=(llama,), targets=TARGETS, pods=infos
    )
    decision = decide_one(llama, found, config=config)
    troubled = [is_ready and state in ('silent', 'no-kv', 'nan-queue') for is_ready, state in pods]
    if any(troubled):
        assert decision.target >= decision.current
        assert not decision.metrics_available
    assert {r.pod for r in found.replicas} <= {
        f'p{i}' for i, (is_ready, _) in enumerate(pods) if is_ready
    }


def test_ready_pods_without_an_attributed_reading_are_silent() -> None:
    pods = [
        pod_info('reporting', *DEPLOYMENT_OWNERS),
        pod_info('quiet', *DEPLOYMENT_OWNERS),
        PodInfo(namespace=NS, name='starting', owners=DEPLOYMENT_OWNERS, ready=False),
        pod_info('worker', ('LeaderWorkerSet', 'llama-l'), **{WORKER_INDEX: '1'}),
        pod_info('stray', ('Deployment', 'unmanaged')),
    ]
    result = run([pod_reading('reporting')], pods)
    assert result.silent == ((NS, 'quiet', 'llama-h100'),)


def test_pools_for_variant_groups_only() -> None:
    reading = Reading(
        models=(
            ModelReading(model_id='unmanaged', namespace=NS, observed_at=NOW, queue_size=9.0),
            ModelReading(
                model_id=MODEL,
                namespace=NS,
                observed_at=NOW,
                queue_size=None,
                queue_bytes=math.nan,
                arrival_rate=2.5,
                request_count=None,
            ),
            ModelReading(
                model_id='qwen',
                namespace='other',
                observed_at=NOW,
                queue_size=3.0,
                request_count=0.0,
            ),
        )
    )
    result = attribute(reading=reading, variants=VARIANTS, targets=TARGETS, pods=())
    (first, second) = result.pools
    # An unread queue (None) and a NaN one are passed on for the core to judge.
    assert first.queue_bytes is not None
    assert math.isnan(first.queue_bytes)
    assert replace(first, queue_bytes=0.0) == PoolMetrics(
        model_id=MODEL,
        namespace=NS,
        observed_at=NOW,
        queue_size=None,
        queue_bytes=0.0,
        request_count=None,
        arrival_rate=2.5,
    )
    assert (second,) == (
        PoolMetrics(
            model_id='qwen', namespace='other', observed_at=NOW, queue_size=3.0, request_count=0.0
        ),
    )


def test_errors_and_drop_count_pass_through() -> None:
    errors = (
        SourceError(target='http://b/metrics', reason=ErrorReason.TIMEOUT, message='t'),
        SourceError(target='http://a/metrics', reason=ErrorReason.HTTP_5XX, message='500'),
    )
    result = attribute(
        reading=Reading(errors=errors, dropped_non_finite=3), variants=(), targets=(), pods=()
    )
    assert result.errors == (errors[1], errors[0])
    assert result.dropped_non_finite == 3
    assert (result.replicas, result.pools, result.unattributed) == ((), (), ())


def test_empty_inputs_give_an_empty_attribution() -> None:
    assert attribute(reading=Reading(), variants=(), targets=(), pods=()) == Attribution()


def test_duplicate_targets_resolve_to_the_first_variant_by_name() -> None:
    targets = (
        TargetRef(namespace=NS, kind='Deployment', name='llama', variant='llama-sts'),
        TargetRef(namespace=NS, kind='Deployment', name='llama', variant='llama-h100'),
    )
    for order in (targets, targets[::-1]):
        result = attribute(
            reading=Reading(pods=(pod_reading('p'),)),
            variants=VARIANTS,
            targets=order,
            pods=[pod_info('p', *DEPLOYMENT_OWNERS)],
        )
        assert only_variant(result) == 'llama-h100'


# --- property: order of the inputs does not matter --------------------------------------------

OWNER_CHOICES = [
    DEPLOYMENT_OWNERS,
    (('StatefulSet', 'llama-s'),),
    (('StatefulSet', 'llama-l-0'), ('LeaderWorkerSet', 'llama-l')),
    (('Deployment', 'unmanaged'),),
    (),
]


@st.composite
def worlds(draw: st.DrawFn) -> tuple[list[PodReading], list[PodInfo], list[ModelReading]]:
    names = draw(st.lists(st.sampled_from('abcdefgh'), min_size=0, max_size=8, unique=True))
    readings = []
    infos = []
    figure = st.one_of(st.none(), st.sampled_from([0.0, 0.3, 1.0, math.nan]))
    for name in names:
        readings.append(pod_reading(name, kv_usage=draw(figure), queue_length=draw(figure)))
        if draw(st.booleans()) or name == 'a':
            labels = (
                {WORKER_INDEX: draw(st.sampled_from(['0', '1']))} if draw(st.booleans()) else {}
            )
            infos.append(pod_info(name, *draw(st.sampled_from(OWNER_CHOICES)), **labels))
    models = [
        ModelReading(model_id=model, namespace=NS, observed_at=NOW, queue_size=1.0)
        for model in draw(st.lists(st.sampled_from([MODEL, 'x']), unique=True))
    ]
    return readings, infos, models


@given(world=worlds(), data=st.data())
def test_output_does_not_depend_on_input_order(
    world: tuple[list[PodReading], list[PodInfo], list[ModelReading]], data: st.DataObject
) -> None:
    readings, infos, models = world
    first = attribute(
        reading=Reading(pods=tuple(readings), models=tuple(models)),
        variants=VARIANTS,
        targets=TARGETS,
        pods=infos,
    )
    second = attribute(
        reading=Reading(
            pods=tuple(data.draw(st.permutations(readings))),
            models=tuple(data.draw(st.permutations(models))),
        ),
        variants=data.draw(st.permutations(VARIANTS)),
        targets=data.draw(st.permutations(TARGETS)),
        pods=data.draw(st.permutations(infos)),
    )
    assert first == second
    # every reading ends up in exactly one place
    assert len(first.replicas) + len(first.unattributed) == len(readings)


def test_two_readings_of_one_pod_sort_by_their_whole_value() -> None:
    # Same (namespace, variant, pod): the tie is broken by repr, where kv_usage=0.25 < 0.5.
    low, high = pod_reading('p', kv_usage=0.25), pod_reading('p', kv_usage=0.5)
    pods = [pod_info('p', *DEPLOYMENT_OWNERS)]
    for readings in ([low, high], [high, low]):
        result = run(readings, pods)
        assert [r.kv_usage for r in result.replicas] == [0.25, 0.5]


def test_pod_variants_names_ready_and_starting_pods_alike() -> None:
    pods = [
        pod_info('reporting', *DEPLOYMENT_OWNERS),
        PodInfo(namespace=NS, name='starting', owners=DEPLOYMENT_OWNERS, ready=False),
        pod_info('leader', ('LeaderWorkerSet', 'llama-l'), **{WORKER_INDEX: '0'}),
        pod_info('worker', ('LeaderWorkerSet', 'llama-l'), **{WORKER_INDEX: '1'}),
        pod_info('stray', ('Deployment', 'unmanaged')),
        pod_info('labelled', **{'llm-d.ai/variant': 'llama-sts'}),
    ]
    expected = (
        (NS, 'labelled', 'llama-sts'),
        (NS, 'leader', 'llama-lws'),
        (NS, 'reporting', 'llama-h100'),
        (NS, 'starting', 'llama-h100'),
    )
    for order in (pods, pods[::-1]):
        assert pod_variants(pods=order, variants=VARIANTS, targets=TARGETS) == expected
