"""The main cycle against the fake apiserver: informers, an in-memory metric source, `/scale`,
VA status and Events, asserted through what reached the API.

The usual setup is tests/support/controller_harness.py's (VAs `a`, cost 5, and `b`, cost 20, of
model `m1` in namespace `ns`, one ready replica each; the scaling ConfigMaps in `ctl`).

Worked numbers with the built-in thresholds (kvCacheThreshold 0.80, queueLengthThreshold 5):
KV 0.95 and queue 10 saturate a replica; with no unsaturated replica the spare capacity is 0,
below the triggers, so the model scales up by one replica on its cheapest variant: `a`, 1 → 2.
Time runs on a ManualClock: the scale retries (0.5 s, 1 s, 2 s, ... on the work queue) and the
informer backoff (1 s) move only when a test advances it.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from llmscaler.clock import ManualClock
from llmscaler.collect.readings import ErrorReason, ModelScope, SourceError
from llmscaler.controller.app import Controller
from llmscaler.devcluster.fakeapi.server import FakeAPI
from llmscaler.domain.basics import Action
from tests.support.controller_harness import (
    CTL,
    IDLE,
    MODEL,
    NS,
    SATURATED,
    FakeSource,
    about,
    caught_up,
    condition_message,
    conditions,
    configmap,
    configmaps_changed,
    decision,
    events,
    informed,
    main_writes,
    replicas,
    run_options,
    samples,
    scale_path,
    scale_requests,
    scale_writes,
    seed_variant,
    settle,
    status,
    status_writes,
    update,
    va,
)
from tests.support.waiting import eventually


def seed_scale_to_zero(api: FakeAPI) -> None:
    """Scale-to-zero on for every model, with a retention period of one minute."""
    api.seed(
        configmap(
            'wva-model-scale-to-zero-config',
            {'default': 'enable_scale_to_zero: true\nretention_period: 1m'},
        )
    )


# --- scaling up -------------------------------------------------------------------------------


async def test_saturation_scales_the_cheapest_variant_up_through_scale_only(
    api: FakeAPI,
) -> None:
    seed_variant(api, 'a', cost='5')
    seed_variant(api, 'b', cost='20')
    source = FakeSource(api, load={'a': SATURATED, 'b': SATURATED})
    async with informed(api, source) as controller:
        report = await controller.cycle.run_once()
        assert decision(report, 'a') == (1, 2, Action.SCALE_UP)
        assert decision(report, 'b') == (1, 1, Action.NO_CHANGE)
        assert scale_writes(api) == [2]
        assert scale_writes(api, 'a') == [2]
        assert replicas(api, 'a') == 2
        assert replicas(api, 'b') == 1
        assert main_writes(api) == []
        # The scale write carried the resourceVersion it read (optimistic concurrency).
        patch = api.requests_to(method='PATCH', path=scale_path('a'))[0].json()
        assert patch['metadata']['resourceVersion']

        a, b = status(api, 'a'), status(api, 'b')
        assert a['desiredOptimizedAlloc']['numReplicas'] == 2
        assert b['desiredOptimizedAlloc']['numReplicas'] == 1
        assert a['actuation'] == {'applied': True} == b['actuation']
        # What the cycle read of the targets (before the scale), for kubectl get va.
        alloc = {'numReplicas': 1, 'readyReplicas': 1, 'accelerator': 'NVIDIA-L40S'}
        assert a['currentAlloc'] == alloc == b['currentAlloc']
        assert conditions(api, 'a') == {
            'TargetResolved': ('True', 'TargetFound'),
            'MetricsAvailable': ('True', 'MetricsFound'),
            'OptimizationReady': ('True', 'OptimizationSucceeded'),
        }
        assert 'scale_up 1 -> 2' in condition_message(api, 'a', 'OptimizationReady')

        scaled = events(api, reason='ScaledUp')
        assert [about(e) for e in scaled] == [('Normal', 'VariantAutoscaling/a', 'ScaledUp')]
        assert scaled[0]['regarding']['namespace'] == NS
        assert 'Deployment ns/a: 1 -> 2' in scaled[0]['note']
        assert scaled[0]['reportingInstance'] == 'ctl-0'
        assert [e['type'] for e in events(api)] == ['Normal']

        page = samples(controller.metrics.render().decode())
        assert page[('llmscaler_decisions_total', (('action', 'scale_up'),))] == 1
        assert page[('wva_models_processed', ())] == 1
        scaling = (
            ('direction', 'up'),
            ('namespace', NS),
            ('reason', 'saturation-percentage'),
            ('variant_name', 'a'),
        )
        assert page[('wva_replica_scaling_total', scaling)] == 1


async def test_scale_to_zero_steps_down_to_one_then_zero(api: FakeAPI) -> None:
    """Idle for the retention period with scale-to-zero on: 2 → 1, then 1 → 0 (the safety rules:
    never straight from N to 0), each confirmed by a fresh zero request count."""
    seed_scale_to_zero(api)
    seed_variant(api, 'a', replicas=2, low=0, high=3)
    source = FakeSource(api, load={'a': IDLE}, request_count=0.0)
    async with informed(api, source) as controller:
        first = await controller.cycle.run_once()
        assert source.scopes[-1] == (ModelScope(model_id=MODEL, namespace=NS, retention_period=60),)
        assert decision(first, 'a') == (2, 1, Action.SCALE_DOWN)
        assert scale_writes(api, 'a') == [1]

        settle(api, 'a')
        await caught_up(controller, api)
        second = await controller.cycle.run_once()
        assert decision(second, 'a') == (1, 0, Action.SCALE_DOWN)
        assert scale_writes(api, 'a') == [1, 0]
        assert replicas(api, 'a') == 0
        assert status(api, 'a')['desiredOptimizedAlloc']['numReplicas'] == 0
        assert [about(e)[2] for e in events(api)] == ['ScaledDown', 'ScaledToZero']
        assert main_writes(api) == []


async def test_requests_within_the_retention_period_keep_one_replica(api: FakeAPI) -> None:
    seed_scale_to_zero(api)
    seed_variant(api, 'a', replicas=1, low=0, high=3)
    source = FakeSource(api, load={'a': IDLE}, request_count=3.0)
    async with informed(api, source) as controller:
        report = await controller.cycle.run_once()
        assert decision(report, 'a') == (1, 1, Action.NO_CHANGE)
        source.request_count = None  # the count could not be read: never to zero either
        report = await controller.cycle.run_once()
        assert decision(report, 'a') == (1, 1, Action.NO_CHANGE)
        assert scale_requests(api, 'GET', 'a') == 0


# --- metric source failures -------------------------------------------------------------------


@pytest.mark.parametrize(
    ('source_args', 'reason'),
    [
        ((), 'MetricsMissing'),
        (('--metrics-source', 'prometheus', '--prometheus-url', 'http://127.0.0.1:9'),
         'PrometheusError'),
    ],
)  # fmt: skip
async def test_failing_source_holds_and_says_why(
    api: FakeAPI, source_args: tuple[str, ...], reason: str
) -> None:
    seed_variant(api, 'a')
    failure = SourceError(
        target='http://10.0.1.1:8000/metrics',
        reason=ErrorReason.UNREACHABLE,
        message='connection refused',
    )
    source = FakeSource(api, load={'a': SATURATED}, errors=(failure,))
    async with informed(api, source, *source_args) as controller:
        report = await controller.cycle.run_once()
        assert report.source_errors == (failure,)
        assert decision(report, 'a') == (1, 1, Action.NO_CHANGE)
        assert scale_requests(api, 'GET', 'a') == 0
        assert scale_writes(api) == []
        assert conditions(api, 'a') == {
            'TargetResolved': ('True', 'TargetFound'),
            'MetricsAvailable': ('False', reason),
            'OptimizationReady': ('False', 'MetricsUnavailable'),
        }
        message = condition_message(api, 'a', 'MetricsAvailable')
        assert 'http://10.0.1.1:8000/metrics: Unreachable: connection refused' in message
        assert status(api, 'a')['desiredOptimizedAlloc']['numReplicas'] == 1
        page = samples(controller.metrics.render().decode())
        errors = (('component', 'metrics'), ('error_type', 'Unreachable'))
        assert page[('wva_errors_total', errors)] == 1
        available = (('model_id', MODEL), ('namespace', NS), ('variant_name', 'a'))
        assert page[('llmscaler_metrics_available', available)] == 0

        # The source recovers: the very next cycle scales.
        source.errors = ()
        report = await controller.cycle.run_once()
        assert decision(report, 'a') == (1, 2, Action.SCALE_UP)
        assert scale_writes(api, 'a') == [2]
        assert conditions(api, 'a')['MetricsAvailable'] == ('True', 'MetricsFound')
        page = samples(controller.metrics.render().decode())
        assert page[('llmscaler_metrics_available', available)] == 1


async def test_stale_readings_never_scale_down(api: FakeAPI) -> None:
    """Idle replicas whose samples are 90 s old (fresh means under 60 s): the core must hold
    rather than scale down on figures that may no longer be true."""
    seed_variant(api, 'a', replicas=2)
    source = FakeSource(api, load={'a': IDLE}, age=90.0)
    async with informed(api, source) as controller:
        report = await controller.cycle.run_once()
        assert decision(report, 'a') == (2, 2, Action.NO_CHANGE)
        assert scale_writes(api) == []
        assert conditions(api, 'a')['MetricsAvailable'] == ('False', 'MetricsStale')
        source.age = 0.0
        report = await controller.cycle.run_once()
        assert decision(report, 'a') == (2, 1, Action.SCALE_DOWN)
        assert scale_writes(api) == [1]


# --- /scale failures and retries --------------------------------------------------------------


@pytest.mark.parametrize(
    ('code', 'reason'), [(409, 'ScaleConflict'), (500, 'ScaleFailed'), (429, 'ScaleFailed')]
)
async def test_failed_scale_write_is_retried_through_the_queue(
    api: FakeAPI, code: int, reason: str
) -> None:
    seed_variant(api, 'a')
    source = FakeSource(api, load={'a': SATURATED})
    clock = ManualClock()
    async with informed(api, source, clock=clock) as controller:
        api.fail(status=code, method='PATCH', path_prefix=scale_path('a'))
        report = await controller.cycle.run_once()
        assert [(name, r.outcome.value) for name, r in report.scaled] == [
            ('ns/a', 'Conflict' if code == 409 else 'Failed')
        ]
        assert scale_requests(api, 'PATCH', 'a') == 1
        assert replicas(api, 'a') == 1  # nothing was written
        assert status(api, 'a')['actuation'] == {'applied': False}
        assert status(api, 'a')['desiredOptimizedAlloc']['numReplicas'] == 2
        warnings = [about(e) for e in events(api) if e['type'] == 'Warning']
        assert warnings == [('Warning', 'VariantAutoscaling/a', reason)]
        assert len(controller.cycle.queue) == 1

        worker = asyncio.create_task(controller.cycle.retry_worker())
        await clock.advance(0.4)
        assert scale_requests(api, 'PATCH', 'a') == 1  # the backoff is 0.5 s
        await clock.advance(0.1)
        await eventually(lambda: replicas(api, 'a') == 2, 'the retried write')
        await eventually(lambda: len(events(api, reason='ScaledUp')) == 1, 'the ScaledUp event')
        assert scale_writes(api, 'a') == [2, 2]
        assert len(controller.cycle.queue) == 0
        assert controller.cycle.queue.retries('ns/a') == 0

        # The next cycle sees the new count and reports the actuation as applied.
        await caught_up(controller, api)
        report = await controller.cycle.run_once()
        assert decision(report, 'a')[0] == 2
        assert status(api, 'a')['actuation'] == {'applied': True}
        controller.cycle.queue.shutdown()
        await asyncio.wait_for(worker, 1.0)


async def test_an_api_server_too_slow_to_answer_fails_the_writes_not_the_cycle(
    api: FakeAPI,
) -> None:
    """Every request takes 0.3 s against a 0.1 s client timeout: the `/scale` and status writes
    fail as values, the cycle returns, and the retry applies once the server is quick again."""
    seed_variant(api, 'a')
    source = FakeSource(api, load={'a': SATURATED})
    clock = ManualClock()
    async with informed(api, source, '--rest-client-timeout', '100ms', clock=clock) as controller:
        api.latency = 0.3
        report = await controller.cycle.run_once()
        assert report.scaled[0][1].outcome.value == 'Failed'
        assert report.statuses_written == 0
        page = samples(controller.metrics.render().decode())
        assert page[('wva_errors_total', (('component', 'actuator'), ('error_type', 'Failed')))]
        assert page[('wva_errors_total', (('component', 'status'), ('error_type', 'Failed')))]
        api.latency = 0.0
        await asyncio.sleep(0.4)  # the abandoned requests finish on the server
        assert replicas(api, 'a') == 1
        worker = asyncio.create_task(controller.cycle.retry_worker())
        await clock.advance(0.5)
        await eventually(lambda: replicas(api, 'a') == 2, 'the retried write')
        controller.cycle.queue.shutdown()
        await asyncio.wait_for(worker, 1.0)


async def test_target_moved_by_someone_else_is_not_overwritten(api: FakeAPI) -> None:
    """The Deployment goes to 3 between the snapshot and the write: CONFLICT, retried with
    backoff (0.5, 1, 2, 4, 8 s) while it keeps conflicting, never PATCHed, then dropped."""
    seed_variant(api, 'a', high=5)
    source = FakeSource(api, load={'a': SATURATED})
    clock = ManualClock()

    def someone_scales() -> None:
        if replicas(api, 'a') == 1:
            obj = api.get(api_version='apps/v1', kind='Deployment', namespace=NS, name='a')
            obj['spec']['replicas'] = 3
            update(api, obj)

    async with informed(api, source, clock=clock) as controller:
        source.on_read = someone_scales  # after the world was read, before the decision
        report = await controller.cycle.run_once()
        source.on_read = None
        assert decision(report, 'a') == (1, 2, Action.SCALE_UP)
        assert report.scaled[0][1].outcome.value == 'Conflict'
        assert 'has 3 replicas, expected 1' in report.scaled[0][1].message
        assert status(api, 'a')['actuation'] == {'applied': False}

        worker = asyncio.create_task(controller.cycle.retry_worker())
        for attempt, delay in enumerate((0.5, 1.0, 2.0, 4.0, 8.0), start=2):
            await clock.advance(delay)
            await eventually(
                lambda: scale_requests(api, 'GET', 'a') == attempt,  # noqa: B023
                f'attempt {attempt}',
            )
        await clock.advance(60.0)
        await asyncio.sleep(0.05)
        assert scale_requests(api, 'GET', 'a') == 6
        assert scale_requests(api, 'PATCH', 'a') == 0
        assert replicas(api, 'a') == 3
        assert len(controller.cycle.queue) == 0
        warnings = events(api, reason='ScaleConflict')
        assert len(warnings) == 1
        assert 'has 3 replicas, expected 1' in warnings[0]['note']
        assert events(api, reason='ScaledUp') == []
        controller.cycle.queue.shutdown()
        await asyncio.wait_for(worker, 1.0)


async def test_a_new_decision_replaces_a_queued_retry(api: FakeAPI) -> None:
    """The write of cycle 1 fails and waits on the queue; cycle 2 decides afresh (still 2: the
    core holds its last target while the variant is in transition) and writes it itself; the
    queued retry then finds nothing left to do."""
    seed_variant(api, 'a')
    source = FakeSource(api, load={'a': SATURATED})
    clock = ManualClock()
    async with informed(api, source, clock=clock) as controller:
        api.fail(status=500, method='PATCH', path_prefix=scale_path('a'))
        await controller.cycle.run_once()
        assert len(controller.cycle.queue) == 1
        source.load['a'] = (0.5, 0.0)
        report = await controller.cycle.run_once()
        assert decision(report, 'a') == (1, 2, Action.SCALE_UP)
        assert report.scaled[0][1].outcome.value == 'Applied'
        assert (scale_requests(api, 'GET', 'a'), scale_requests(api, 'PATCH', 'a')) == (2, 2)
        worker = asyncio.create_task(controller.cycle.retry_worker())
        await clock.advance(30.0)
        await asyncio.sleep(0.05)
        assert (scale_requests(api, 'GET', 'a'), scale_requests(api, 'PATCH', 'a')) == (2, 2)
        assert replicas(api, 'a') == 2
        assert len(controller.cycle.queue) == 0
        controller.cycle.queue.shutdown()
        await asyncio.wait_for(worker, 1.0)


async def test_a_queued_retry_of_a_deleted_va_is_dropped(api: FakeAPI) -> None:
    seed_variant(api, 'a')
    source = FakeSource(api, load={'a': SATURATED})
    clock = ManualClock()
    async with informed(api, source, clock=clock) as controller:
        api.fail(status=500, method='PATCH', path_prefix=scale_path('a'))
        await controller.cycle.run_once()
        assert len(controller.cycle.queue) == 1
        api.store.delete(api.store_resource(va('a')), NS, 'a')
        await eventually(lambda: len(controller.caches.vas) == 0, 'the VA to be gone')
        worker = asyncio.create_task(controller.cycle.retry_worker())
        await clock.advance(30.0)
        await asyncio.sleep(0.05)
        assert scale_requests(api, 'PATCH', 'a') == 1
        assert scale_requests(api, 'GET', 'a') == 1
        assert replicas(api, 'a') == 1
        controller.cycle.queue.shutdown()
        await asyncio.wait_for(worker, 1.0)


# --- watches, invalid objects, configuration --------------------------------------------------


async def test_va_deleted_while_the_watch_was_gone_is_not_acted_on(api: FakeAPI) -> None:
    seed_variant(api, 'a')
    seed_variant(api, 'c', cost='30')
    source = FakeSource(api, load={'a': SATURATED, 'c': SATURATED})
    clock = ManualClock()
    async with informed(api, source, clock=clock) as controller:
        informers = len(controller.caches.informers())
        await eventually(lambda: len(api.store.watchers) == informers, 'every watch open')
        api.force_watch_gone(times=informers)
        api.drop_watches()
        # Deleted while no watch is open; the re-watch is answered 410, so only the re-list
        # can tell. `a` was the cheaper variant of m1: a cycle still seeing it would grow `a`.
        api.store.delete(api.store_resource(va('a')), NS, 'a')
        await eventually(lambda: controller.caches.vas.last_error is not None, 'the 410')
        assert '410' in (controller.caches.vas.last_error or '')
        assert controller.caches.vas.get(namespace=NS, name='a') is not None  # not yet known
        await clock.advance(1.0)  # the informers' backoff before the re-list
        await eventually(lambda: controller.caches.vas.relists == 1, 'the re-list')
        await eventually(
            lambda: controller.caches.vas.get(namespace=NS, name='a') is None, 'the diff'
        )
        report = await controller.cycle.run_once()
        assert [d.variant for d in report.decisions] == ['c']
        assert scale_requests(api, 'GET', 'a') == 0
        assert status_writes(api, 'a') == 0
        assert scale_writes(api) == [2]  # `c`, the only variant left of model m1
        assert replicas(api, 'c') == 2


async def test_invalid_va_and_missing_target_do_not_stop_the_others(api: FakeAPI) -> None:
    seed_variant(api, 'a')
    # minReplicas > maxReplicas, stored directly (the apiserver's CEL rule would refuse it).
    seed_variant(api, 'bad', cost='1', low=3, high=1)
    api.seed(va('ghost', target='nowhere'))
    source = FakeSource(api, load={'a': SATURATED, 'bad': SATURATED})
    async with informed(api, source) as controller:
        report = await controller.cycle.run_once()
        assert [d.variant for d in report.decisions] == ['a']
        assert scale_writes(api) == [2]
        assert scale_writes(api, 'a') == [2]
        assert scale_requests(api, 'GET', 'bad') == 0

        assert conditions(api, 'bad') == {'OptimizationReady': ('False', 'InvalidConfiguration')}
        assert 'minReplicas' in condition_message(api, 'bad', 'OptimizationReady')
        assert 'desiredOptimizedAlloc' not in status(api, 'bad')
        assert 'currentAlloc' not in status(api, 'bad')
        assert 'currentAlloc' not in status(api, 'ghost')
        assert conditions(api, 'ghost') == {
            'TargetResolved': ('False', 'TargetNotFound'),
            'OptimizationReady': ('False', 'SkippedProcessing'),
        }
        assert 'Deployment ns/nowhere not found' in condition_message(
            api, 'ghost', 'TargetResolved'
        )
        assert conditions(api, 'a')['OptimizationReady'] == ('True', 'OptimizationSucceeded')
        assert sorted(about(e) for e in events(api)) == [
            ('Normal', 'VariantAutoscaling/a', 'ScaledUp'),
            ('Warning', 'VariantAutoscaling/bad', 'InvalidSpec'),
            ('Warning', 'VariantAutoscaling/ghost', 'TargetNotFound'),
        ]

        # A second cycle with the same facts (and `a` now comfortable at 2) repeats no status
        # write of the skipped VAs and creates no new Event (repeats are deduplicated).
        source.load['a'] = (0.5, 0.0)
        await caught_up(controller, api)
        before = (status_writes(api, 'bad'), status_writes(api, 'ghost'), len(events(api)))
        await controller.cycle.run_once()
        after = (status_writes(api, 'bad'), status_writes(api, 'ghost'), len(events(api)))
        assert after == before


async def test_bad_configmap_keeps_the_last_good_thresholds(api: FakeAPI) -> None:
    """KV 0.85 saturates a replica under the built-in kvCacheThreshold 0.80 but not under the
    ConfigMap's 0.99 (spare 0.14 above its trigger 0.05): scale-up happens only once the
    ConfigMap is gone, not when it turns malformed."""
    good = configmap(
        'wva-saturation-scaling-config',
        {'default': 'kvCacheThreshold: 0.99\nkvSpareTrigger: 0.05'},
    )
    api.seed(good)
    seed_variant(api, 'a')
    source = FakeSource(api, load={'a': (0.85, 0.0)})
    async with informed(api, source) as controller:
        report = await controller.cycle.run_once()
        assert decision(report, 'a') == (1, 1, Action.NO_CHANGE)

        broken = api.get(
            api_version='v1', kind='ConfigMap', namespace=CTL, name=good['metadata']['name']
        )
        broken['data'] = {'default': 'kvCacheThreshold: [0.5'}
        await configmaps_changed(controller, lambda: update(api, broken), 'the edit')
        report = await controller.cycle.run_once()
        assert decision(report, 'a') == (1, 1, Action.NO_CHANGE)
        assert scale_writes(api) == []
        await eventually(lambda: len(events(api)) == 1, 'the Warning on the ConfigMap')
        (event,) = events(api)
        assert about(event) == (
            'Warning',
            'ConfigMap/wva-saturation-scaling-config',
            'InvalidConfiguration',
        )
        assert event['regarding']['namespace'] == CTL
        assert 'last good configuration kept' in event['note']
        page = samples(controller.metrics.render().decode())
        key = (('component', 'config'), ('error_type', 'InvalidConfiguration'))
        assert page[('wva_errors_total', key)] == 1

        # Control: without the ConfigMap, the built-in thresholds apply and the same load scales.
        await configmaps_changed(
            controller,
            lambda: api.store.delete(api.store_resource(good), CTL, good['metadata']['name']),
            'the delete',
        )
        report = await controller.cycle.run_once()
        assert decision(report, 'a') == (1, 2, Action.SCALE_UP)
        assert scale_writes(api) == [2]


async def test_poisoned_tenant_configmap_gives_an_event_and_global_edits_still_apply(
    api: FakeAPI, caplog: pytest.LogCaptureFixture
) -> None:
    """A tenant's namespace-local ConfigMap that YAML cannot turn into data (`!!int "7x"` raised
    ValueError out of the reload) is rejected alone: the global ConfigMap (0.99, as above) holds
    KV 0.85, and its later edit to 0.80 / 0.10 applies and scales `a` up."""
    sat = 'wva-saturation-scaling-config'
    api.seed(configmap(sat, {'default': 'kvCacheThreshold: 0.99\nkvSpareTrigger: 0.05'}))
    api.seed(configmap(sat, {'default': 'kvCacheThreshold: !!int "7x"'}, namespace=NS))
    seed_variant(api, 'a')
    source = FakeSource(api, load={'a': (0.85, 0.0)})
    async with informed(api, source) as controller:
        with caplog.at_level('WARNING', logger='llmscaler.controller.va.cycle'):
            report = await controller.cycle.run_once()
        assert decision(report, 'a') == (1, 1, Action.NO_CHANGE)
        await eventually(lambda: len(events(api, reason='InvalidConfiguration')) == 1, 'the Event')
        (event,) = events(api, reason='InvalidConfiguration')
        assert about(event) == ('Warning', f'ConfigMap/{sat}', 'InvalidConfiguration')
        assert event['regarding']['namespace'] == NS
        assert 'not a valid !!int value' in event['note']
        assert f'ConfigMap {NS}/{sat} rejected' in caplog.text

        edited = api.get(api_version='v1', kind='ConfigMap', namespace=CTL, name=sat)
        edited['data'] = {'default': 'kvCacheThreshold: 0.80\nkvSpareTrigger: 0.10'}
        await configmaps_changed(controller, lambda: update(api, edited), 'the edit')
        report = await controller.cycle.run_once()
        assert decision(report, 'a') == (1, 2, Action.SCALE_UP)
        assert scale_writes(api) == [2]


async def test_a_reload_that_fails_keeps_the_config_and_is_retried(
    api: FakeAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reload fails once, unexpectedly: that cycle runs on the last good thresholds (0.99:
    KV 0.85 holds) and the next one applies the edit it missed (0.80 / 0.10: scale up)."""
    sat = 'wva-saturation-scaling-config'
    api.seed(configmap(sat, {'default': 'kvCacheThreshold: 0.99\nkvSpareTrigger: 0.05'}))
    seed_variant(api, 'a')
    source = FakeSource(api, load={'a': (0.85, 0.0)})
    async with informed(api, source) as controller:
        report = await controller.cycle.run_once()
        assert decision(report, 'a') == (1, 1, Action.NO_CHANGE)

        edited = api.get(api_version='v1', kind='ConfigMap', namespace=CTL, name=sat)
        edited['data'] = {'default': 'kvCacheThreshold: 0.80\nkvSpareTrigger: 0.10'}
        await configmaps_changed(controller, lambda: update(api, edited), 'the edit')
        apply = controller.config.update
        failures = [RuntimeError('reload failed')]

        def fails_once(**kwargs: Any) -> Any:
            if failures:
                raise failures.pop()
            return apply(**kwargs)

        monkeypatch.setattr(controller.config, 'update', fails_once)
        report = await controller.cycle.run_once()
        assert decision(report, 'a') == (1, 1, Action.NO_CHANGE)
        assert scale_writes(api) == []
        page = samples(controller.metrics.render().decode())
        assert (
            page[('wva_errors_total', (('component', 'config'), ('error_type', 'ReloadFailed')))]
            == 1
        )

        report = await controller.cycle.run_once()
        assert decision(report, 'a') == (1, 2, Action.SCALE_UP)
        assert scale_writes(api) == [2]


async def test_unlabelled_configmap_is_ignored(api: FakeAPI) -> None:
    unlabelled = configmap('wva-saturation-scaling-config', {'default': 'kvCacheThreshold: 0.99'})
    del unlabelled['metadata']['labels']
    api.seed(unlabelled)
    seed_variant(api, 'a')
    source = FakeSource(api, load={'a': (0.85, 0.0)})
    async with informed(api, source) as controller:
        report = await controller.cycle.run_once()
        assert decision(report, 'a') == (1, 2, Action.SCALE_UP)


# --- actuation through metrics ----------------------------------------------------------------


async def test_metrics_actuation_publishes_instead_of_scaling(api: FakeAPI) -> None:
    """`--actuation metrics`: the decision (a 1 → 2) goes to the gauges an HPA or KEDA reads,
    served on the controller's own /metrics port; nothing touches `/scale`."""
    seed_variant(api, 'a', cost='5')
    seed_variant(api, 'b', cost='20')
    source = FakeSource(api, load={'a': SATURATED, 'b': SATURATED})
    controller = Controller(
        options=run_options(api, '--actuation', 'metrics'), clock=ManualClock(), source=source
    )
    assert controller.metrics_port is None
    stop = asyncio.Event()
    run = asyncio.create_task(controller.run(stop=stop))
    try:
        await eventually(lambda: status_writes(api, 'b') > 0, 'the first cycle')
        port = controller.metrics_port
        assert port is not None
        assert port != controller.health_port
        async with httpx.AsyncClient() as http:
            page = (await http.get(f'http://127.0.0.1:{port}/metrics')).text
    finally:
        stop.set()
        assert await asyncio.wait_for(run, 5.0) == 0
    assert controller.metrics_port is None
    found = samples(page)
    for family in ('wva_desired_replicas', 'inferno_desired_replicas'):
        for name, want in (('a', 2.0), ('b', 1.0)):
            labels = (
                ('accelerator_type', 'NVIDIA-L40S'),
                ('namespace', NS),
                ('variant_name', name),
            )
            assert found[(family, labels)] == want, (family, name)
    labels = (('accelerator_type', 'NVIDIA-L40S'), ('namespace', NS), ('variant_name', 'a'))
    assert found[('wva_current_replicas', labels)] == 1.0
    assert found[('wva_desired_ratio', labels)] == 2.0
    assert [r for r in api.requests if r.path.endswith('/scale')] == []
    assert replicas(api, 'a') == 1
    a = status(api, 'a')
    assert a['desiredOptimizedAlloc']['numReplicas'] == 2
    assert a['actuation'] == {'applied': False}  # an HPA has yet to act on the signal
    assert status(api, 'b')['actuation'] == {'applied': True}
    assert events(api, reason='ScaledUp') == []


# --- the fast path's raises ---------------------------------------------------------------------


async def raise_a(api: FakeAPI, controller: Controller, *, target: int) -> list[int]:
    """After a cycle, the fast path's raise of `a` from its current count to `target`; the
    `/scale` writes made before the raise."""
    report = await controller.cycle.run_once()
    (a,) = [d for d in report.decisions if d.variant == 'a']
    world = controller.worlds.variants(config=controller.cycle.current_config())
    current = next(v.current_replicas for v in world.variants if v.name == 'a')
    raised = dataclasses.replace(a, current=current, target=target, reason='burst: test')
    before = scale_writes(api)
    await controller.cycle.raise_targets(world=world, decisions=[raised])
    return before


async def test_a_raise_is_written_as_a_cycle_writes_a_scale_up(api: FakeAPI) -> None:
    seed_variant(api, 'a')
    seed_variant(api, 'b')
    source = FakeSource(api, load={'a': IDLE, 'b': IDLE})
    async with informed(api, source) as controller:
        await raise_a(api, controller, target=3)
        assert replicas(api, 'a') == 3
        (event,) = events(api, reason='ScaledUp')
        assert about(event) == ('Normal', 'VariantAutoscaling/a', 'ScaledUp')
        assert 'burst: test' in event['note']
        assert replicas(api, 'b') == 1
        page = samples(controller.metrics.render().decode())
        scaling = (
            ('direction', 'up'),
            ('namespace', NS),
            ('reason', 'burst'),
            ('variant_name', 'a'),
        )
        assert page[('wva_replica_scaling_total', scaling)] == 1


async def test_a_raise_that_does_not_raise_writes_nothing(api: FakeAPI) -> None:
    seed_variant(api, 'a', replicas=2)
    source = FakeSource(api, load={'a': IDLE})
    async with informed(api, source) as controller:
        before = await raise_a(api, controller, target=1)
        assert scale_writes(api) == before


async def test_a_raise_is_published_with_metrics_actuation(api: FakeAPI) -> None:
    seed_variant(api, 'a')
    seed_variant(api, 'b')
    source = FakeSource(api, load={'a': IDLE, 'b': IDLE})
    async with informed(api, source, '--actuation', 'metrics') as controller:
        await raise_a(api, controller, target=3)
        found = samples(controller.metrics.render().decode())
    assert [r for r in api.requests if r.path.endswith('/scale')] == []
    desired = {
        dict(labels)['variant_name']: value
        for (family, labels), value in found.items()
        if family == 'wva_desired_replicas'
    }
    # The raise replaced `a`'s signal and kept `b`'s from the cycle.
    assert desired == {'a': 3.0, 'b': 1.0}


async def test_nothing_is_raised_in_shadow_mode(api: FakeAPI) -> None:
    seed_variant(api, 'a')
    source = FakeSource(api, load={'a': IDLE})
    async with informed(api, source, '--shadow') as controller:
        await raise_a(api, controller, target=3)
    assert [r for r in api.requests if r.path.endswith('/scale')] == []
    assert replicas(api, 'a') == 1


# --- property ---------------------------------------------------------------------------------

LOADS = st.sampled_from([SATURATED, IDLE, (0.5, 1.0), (0.85, 0.0), (0.2, 6.0)])


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    variants=st.lists(
        st.tuples(
            st.integers(min_value=1, max_value=3),  # replicas
            st.integers(min_value=1, max_value=3),  # minReplicas
            st.integers(min_value=0, max_value=2),  # maxReplicas - minReplicas
            st.integers(min_value=1, max_value=40),  # cost
            LOADS,
        ),
        min_size=1,
        max_size=3,
    ),
)
# Found by hypothesis: the cheapest name is at its maximum, so the other one of the same cost grows.
@example(variants=[(1, 1, 0, 1, SATURATED), (1, 1, 1, 1, SATURATED)])
def test_property_writes_are_the_decisions_inside_the_bounds(
    variants: list[tuple[int, int, int, int, tuple[float, float]]],
) -> None:
    """Whatever the replica counts, bounds, costs and loads: each `/scale` write is the target of
    a decision that differs from the current count, lies in [min, max], moves by one replica
    unless a bound forced more, and every VA's status carries its decision."""

    async def scenario() -> None:
        async with FakeAPI() as server:
            names = [f'v{i}' for i in range(len(variants))]
            bounds: dict[str, tuple[int, int]] = {}
            costs: dict[str, int] = {}
            source = FakeSource(server)
            for name, (count, low, spread, cost, load) in zip(names, variants, strict=True):
                seed_variant(
                    server, name, replicas=count, low=low, high=low + spread, cost=str(cost)
                )
                bounds[name] = (low, low + spread)
                costs[name] = cost
                source.load[name] = load
            async with informed(server, source) as controller:
                report = await controller.cycle.run_once()
            decided = {d.variant: d for d in report.decisions}
            assert sorted(decided) == names
            for name in names:
                d = decided[name]
                low, high = bounds[name]
                assert low <= d.target <= high
                writes = scale_writes(server, name)
                if d.target == d.current:
                    assert writes == []
                else:
                    assert writes == [d.target]
                    inside = low <= d.current <= high
                    assert not inside or abs(d.target - d.current) == 1
                assert replicas(server, name) == d.target
                assert status(server, name)['desiredOptimizedAlloc']['numReplicas'] == d.target
                assert status(server, name)['actuation'] == {'applied': True}
            assert main_writes(server) == []
            ups = [d for d in report.decisions if d.action is Action.SCALE_UP]
            inside_all = all(bounds[n][0] <= decided[n].current <= bounds[n][1] for n in names)
            room = [n for n in names if decided[n].current < bounds[n][1]]
            if inside_all and ups:
                # One model: only its cheapest variant with room to grow does (ties go to the
                # first name).
                assert [d.variant for d in ups] == [min(room, key=lambda n: (costs[n], n))]

    asyncio.run(scenario())
