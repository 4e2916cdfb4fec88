"""The VariantAutoscaling status writer: next_status (pure) and StatusWriter against the fake.

Worked numbers: ManualClock starts at wall 1_767_225_600 = 2026-01-01T00:00:00Z. A first update
of a fresh VA (generation 1, RV 1) with desired 3, applied true and TargetResolved=True writes
`{"desiredOptimizedAlloc": {"lastRunTime": "2026-01-01T00:00:00Z", "numReplicas": 3},
"actuation": {"applied": true}, "conditions": [{"type": "TargetResolved", "status": "True",
"observedGeneration": 1, "lastTransitionTime": "2026-01-01T00:00:00Z", ...}]}`. A minute later
TargetResolved=False moves its lastTransitionTime to 00:01:00; TargetResolved=True again with a
new message would have kept 00:00:00.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Coroutine, Mapping, Sequence
from typing import Any, Protocol

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lightkube import AsyncClient
from lightkube.types import PatchType

from llmscaler.clock import ManualClock, parse_rfc3339, rfc3339
from llmscaler.devcluster.fakeapi.server import FakeAPI
from llmscaler.kube import crd, resource_model
from llmscaler.kube.client import VariantAutoscalingResource, make_client
from llmscaler.kube.nextstatus import MESSAGE_MAX, RUN_TIME_REFRESH, ConditionUpdate, next_status
from llmscaler.kube.status import StatusOutcome, StatusResult, StatusWriter

NS = 'ns'
VA_PATH = f'/apis/llmd.ai/v1alpha1/namespaces/{NS}/variantautoscalings'
T0 = '2026-01-01T00:00:00Z'
T1 = '2026-01-01T00:01:00Z'
MERGE = 'application/merge-patch+json'

FOUND = ConditionUpdate('TargetResolved', 'True', 'TargetFound', 'Deployment ns/d found')
LOST = ConditionUpdate('TargetResolved', 'False', 'TargetNotFound', 'Deployment ns/d not found')
METRICS = ConditionUpdate('MetricsAvailable', 'True', 'MetricsFound', 'all 2 replicas fresh')
READY = ConditionUpdate('OptimizationReady', 'True', 'OptimizationSucceeded', 'hold at 3')
SCALING = ConditionUpdate('OptimizationReady', 'True', 'OptimizationSucceeded', 'up 3 -> 4')
STALE = ConditionUpdate('MetricsAvailable', 'False', 'MetricsStale', 'pod p: stale')
# The facts of a cycle that finds everything as it was.
STEADY: Mapping[str, Any] = {
    'desired': 3,
    'applied': True,
    'conditions': [FOUND, METRICS, READY],
    'current_replicas': 3,
    'ready_replicas': 2,
    'accelerator': 'NVIDIA-A100',
}


def va(name: str = 'v', status: Any = None) -> dict[str, Any]:
    obj: dict[str, Any] = {
        'apiVersion': 'llmd.ai/v1alpha1',
        'kind': 'VariantAutoscaling',
        'metadata': {'name': name, 'namespace': NS},
        'spec': {
            'scaleTargetRef': {'apiVersion': 'apps/v1', 'kind': 'Deployment', 'name': 'd'},
            'modelID': 'meta-llama/Llama-3.1-8B-Instruct',
            'minReplicas': 1,
            'maxReplicas': 4,
        },
    }
    if status is not None:
        obj['status'] = status
    return obj


def stored(api: FakeAPI, name: str = 'v') -> dict[str, Any]:
    return api.get(api_version=crd.API_VERSION, kind=crd.KIND, namespace=NS, name=name)


def calls(api: FakeAPI) -> list[tuple[str, str]]:
    return [(r.method, r.path) for r in api.requests]


def condition(status: dict[str, Any], type: str) -> dict[str, Any]:
    found: list[dict[str, Any]] = [c for c in status['conditions'] if c['type'] == type]
    assert len(found) == 1
    return found[0]


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def writer(client: AsyncClient, clock: ManualClock) -> StatusWriter:
    return StatusWriter(client=client, clock=clock)


class UpdateV(Protocol):
    """`StatusWriter.update` of the VA ns/v."""

    def __call__(
        self,
        *,
        obj: Mapping[str, Any] | None,
        desired: int | None,
        applied: bool | None,
        conditions: Sequence[ConditionUpdate],
        ran: bool = ...,
        current_replicas: int | None = ...,
        ready_replicas: int | None = ...,
        accelerator: str | None = ...,
        remove_conditions: Sequence[str] = ...,
    ) -> Coroutine[Any, Any, StatusResult]: ...


@pytest.fixture
def update_v(writer: StatusWriter) -> UpdateV:
    return functools.partial(writer.update, namespace=NS, name='v')


# --- StatusWriter against the fake ------------------------------------------------------------


async def test_first_update_writes_only_the_status(api: FakeAPI, update_v: UpdateV) -> None:
    seeded = api.seed(va())
    result = await update_v(obj=None, desired=3, applied=True, conditions=[FOUND, METRICS])
    after = stored(api)
    assert result.outcome is StatusOutcome.WRITTEN
    assert result.message == ''
    assert result.resource_version == after['metadata']['resourceVersion'] == '2'
    expected = {
        'desiredOptimizedAlloc': {'lastRunTime': T0, 'numReplicas': 3},
        'actuation': {'applied': True},
        'conditions': [
            {
                'type': 'TargetResolved',
                'status': 'True',
                'observedGeneration': 1,
                'lastTransitionTime': T0,
                'reason': 'TargetFound',
                'message': 'Deployment ns/d found',
            },
            {
                'type': 'MetricsAvailable',
                'status': 'True',
                'observedGeneration': 1,
                'lastTransitionTime': T0,
                'reason': 'MetricsFound',
                'message': 'all 2 replicas fresh',
            },
        ],
    }
    assert after['status'] == expected
    assert after['spec'] == seeded['spec']
    assert after['metadata']['generation'] == 1
    assert calls(api) == [('GET', f'{VA_PATH}/v'), ('PATCH', f'{VA_PATH}/v/status')]
    [patch] = api.requests_to(method='PATCH', path=f'{VA_PATH}/v/status')
    assert patch.content_type == MERGE
    assert patch.json() == {'metadata': {'resourceVersion': '1'}, 'status': expected}
    assert isinstance(crd.parse_va(after), crd.VariantAutoscaling)


async def test_conditions_flip_keep_and_carry_over(
    api: FakeAPI, update_v: UpdateV, clock: ManualClock
) -> None:
    api.seed(va())
    await update_v(
        obj=None,
        desired=3,
        applied=True,
        conditions=[FOUND, METRICS, READY],
    )
    await clock.advance(60)
    still = ConditionUpdate('TargetResolved', 'True', 'TargetFound', 'Deployment ns/d2 found')
    result = await update_v(obj=stored(api), desired=2, applied=False, conditions=[STALE, still])
    assert result.outcome is StatusOutcome.WRITTEN
    status = stored(api)['status']
    assert [c['type'] for c in status['conditions']] == [
        'TargetResolved',
        'MetricsAvailable',
        'OptimizationReady',
    ]
    flipped = condition(status, 'MetricsAvailable')
    assert (flipped['status'], flipped['reason'], flipped['lastTransitionTime']) == (
        'False',
        'MetricsStale',
        T1,
    )
    kept = condition(status, 'TargetResolved')
    assert (kept['message'], kept['lastTransitionTime']) == ('Deployment ns/d2 found', T0)
    assert condition(status, 'OptimizationReady') == {
        'type': 'OptimizationReady',
        'status': 'True',
        'observedGeneration': 1,
        'lastTransitionTime': T0,
        'reason': 'OptimizationSucceeded',
        'message': 'hold at 3',
    }
    assert status['desiredOptimizedAlloc'] == {'lastRunTime': T1, 'numReplicas': 2}
    assert status['actuation'] == {'applied': False}


async def test_desired_and_applied_are_kept_when_none(
    api: FakeAPI, update_v: UpdateV, clock: ManualClock
) -> None:
    api.seed(va())
    await update_v(obj=None, desired=3, applied=True, conditions=[FOUND])
    await clock.advance(60)
    result = await update_v(
        obj=stored(api),
        desired=None,
        applied=None,
        conditions=[STALE],
        ran=False,
    )
    assert result.outcome is StatusOutcome.WRITTEN
    status = stored(api)['status']
    assert status['desiredOptimizedAlloc'] == {'lastRunTime': T0, 'numReplicas': 3}
    assert status['actuation'] == {'applied': True}
    assert condition(status, 'MetricsAvailable')['lastTransitionTime'] == T1


async def test_unchanged_status_is_not_written(
    api: FakeAPI, update_v: UpdateV, clock: ManualClock
) -> None:
    api.seed(va())
    first = await update_v(obj=None, desired=3, applied=True, conditions=[FOUND, METRICS])
    cached = stored(api)
    api.requests.clear()
    again = await update_v(obj=cached, desired=3, applied=True, conditions=[METRICS, FOUND])
    assert again.outcome is StatusOutcome.UNCHANGED
    assert again.resource_version == first.resource_version
    # Later, but the cycle did not run: lastRunTime stays, so nothing changes either.
    await clock.advance(300)
    later = await update_v(
        obj=cached,
        desired=None,
        applied=None,
        conditions=[FOUND],
        ran=False,
    )
    assert later.outcome is StatusOutcome.UNCHANGED
    assert api.requests == []  # the cached copy spared even the GET
    # A cycle that ran RUN_TIME_REFRESH after the last stamp moves lastRunTime: one write.
    ran = await update_v(obj=cached, desired=3, applied=True, conditions=[FOUND])
    assert ran.outcome is StatusOutcome.WRITTEN
    assert stored(api)['status']['desiredOptimizedAlloc']['lastRunTime'] == rfc3339(
        wall=clock.wall()
    )


async def test_steady_cycles_write_only_every_refresh_interval(
    api: FakeAPI, update_v: UpdateV, clock: ManualClock
) -> None:
    """A cycle every 30 s with nothing new: one write per RUN_TIME_REFRESH, not one per cycle."""
    api.seed(va())
    outcomes = []
    stamps = []
    for _ in range(21):  # 10 minutes
        result = await update_v(obj=stored(api), **STEADY)
        outcomes.append(result.outcome)
        stamps.append(stored(api)['status']['desiredOptimizedAlloc']['lastRunTime'])
        await clock.advance(30)
    written = [i for i, outcome in enumerate(outcomes) if outcome is StatusOutcome.WRITTEN]
    assert RUN_TIME_REFRESH == 300
    assert written == [0, 10, 20]
    assert sorted(set(stamps)) == [T0, '2026-01-01T00:05:00Z', '2026-01-01T00:10:00Z']
    assert len(api.requests_to(method='PATCH', path=f'{VA_PATH}/v/status')) == 3


@pytest.mark.parametrize(
    'change',
    [
        {'desired': 4},
        {'applied': False},
        {'current_replicas': 4},
        {'ready_replicas': 3},
        {'accelerator': 'NVIDIA-H100'},
        {'conditions': [FOUND, METRICS, SCALING]},
        {'conditions': [FOUND, STALE, READY]},
    ],
    ids=['desired', 'applied', 'current', 'ready', 'accelerator', 'message', 'status'],
)
async def test_any_change_an_operator_reads_is_written_at_once(
    api: FakeAPI, update_v: UpdateV, clock: ManualClock, change: dict[str, Any]
) -> None:
    api.seed(va())
    await update_v(obj=None, **STEADY)
    await clock.advance(30)
    same = await update_v(obj=stored(api), **STEADY)
    assert same.outcome is StatusOutcome.UNCHANGED
    await clock.advance(30)
    result = await update_v(obj=stored(api), **{**STEADY, **change})
    assert result.outcome is StatusOutcome.WRITTEN
    # The write happens anyway, so it carries the time of the cycle that caused it.
    assert stored(api)['status']['desiredOptimizedAlloc']['lastRunTime'] == '2026-01-01T00:01:00Z'


async def test_observed_replicas_and_accelerator_are_recorded_and_kept(
    api: FakeAPI, update_v: UpdateV
) -> None:
    api.seed(va())
    await update_v(
        obj=None,
        desired=3,
        applied=True,
        conditions=[FOUND],
        current_replicas=2,
        ready_replicas=1,
        accelerator='NVIDIA-L40S',
    )
    expected = {'accelerator': 'NVIDIA-L40S', 'numReplicas': 2, 'readyReplicas': 1}
    assert stored(api)['status']['currentAlloc'] == expected
    result = await update_v(obj=stored(api), desired=3, applied=True, conditions=[FOUND])
    assert result.outcome is StatusOutcome.UNCHANGED
    await update_v(
        obj=stored(api),
        desired=3,
        applied=True,
        conditions=[FOUND],
        ready_replicas=2,
    )
    assert stored(api)['status']['currentAlloc'] == {**expected, 'readyReplicas': 2}


async def test_an_unresolved_target_clears_the_counts(
    api: FakeAPI, update_v: UpdateV, clock: ManualClock
) -> None:
    """OPTIMIZED, CURRENT and READY never show an old count beside TargetResolved=False."""
    api.seed(va())
    await update_v(
        obj=None,
        desired=3,
        applied=True,
        conditions=[FOUND, READY],
        current_replicas=2,
        ready_replicas=2,
        accelerator='NVIDIA-L40S',
    )
    await clock.advance(60)
    skipped = ConditionUpdate('OptimizationReady', 'False', 'SkippedProcessing', 'not resolved')
    result = await update_v(
        obj=stored(api),
        desired=None,
        applied=None,
        conditions=[LOST, skipped],
        ran=False,
    )
    assert result.outcome is StatusOutcome.WRITTEN
    status = stored(api)['status']
    assert status['desiredOptimizedAlloc'] == {'lastRunTime': T0}
    assert 'currentAlloc' not in status
    assert status['actuation'] == {'applied': True}
    [_, patch] = api.requests_to(method='PATCH', path=f'{VA_PATH}/v/status')
    assert patch.json()['status']['desiredOptimizedAlloc']['numReplicas'] is None
    assert patch.json()['status']['currentAlloc'] is None
    # Found again: the counts come back with the next resolved cycle.
    await update_v(
        obj=stored(api),
        desired=2,
        applied=True,
        conditions=[FOUND, READY],
        current_replicas=2,
        ready_replicas=1,
    )
    status = stored(api)['status']
    assert status['desiredOptimizedAlloc']['numReplicas'] == 2
    assert status['currentAlloc'] == {'numReplicas': 2, 'readyReplicas': 1}


async def test_no_status_and_nothing_to_say_is_unchanged(api: FakeAPI, update_v: UpdateV) -> None:
    api.seed(va())
    result = await update_v(obj=None, desired=None, applied=None, conditions=[], ran=False)
    assert result.outcome is StatusOutcome.UNCHANGED
    assert result.resource_version == '1'
    assert 'status' not in stored(api)
    assert calls(api) == [('GET', f'{VA_PATH}/v')]


async def test_stale_cache_conflicts_then_refetches_and_retries(
    api: FakeAPI, update_v: UpdateV
) -> None:
    api.seed(va())
    stale = stored(api)  # RV 1
    # Another writer sets a condition of its own after our copy was cached: RV 2.
    other = resource_model.Condition(
        type='example.com/Paused',
        status='True',
        last_transition_time='2025-12-31T00:00:00Z',
        reason='Operator',
        message='paused by hand',
    )
    fresh = stored(api)
    fresh['status'] = {'conditions': [other.model_dump(mode='json', by_alias=True)]}
    api.store.update(api.store_resource(fresh), NS, 'v', fresh, part='status')
    api.requests.clear()
    result = await update_v(obj=stale, desired=2, applied=True, conditions=[FOUND])
    assert result.outcome is StatusOutcome.WRITTEN
    assert result.resource_version == '3'
    assert calls(api) == [
        ('PATCH', f'{VA_PATH}/v/status'),
        ('GET', f'{VA_PATH}/v'),
        ('PATCH', f'{VA_PATH}/v/status'),
    ]
    first, retry = api.requests_to(method='PATCH', path=f'{VA_PATH}/v/status')
    assert first.json()['metadata'] == {'resourceVersion': '1'}
    assert retry.json()['metadata'] == {'resourceVersion': '2'}
    status = stored(api)['status']
    assert [c['type'] for c in status['conditions']] == ['example.com/Paused', 'TargetResolved']
    assert condition(status, 'example.com/Paused')['message'] == 'paused by hand'


async def test_one_injected_conflict_is_retried(api: FakeAPI, update_v: UpdateV) -> None:
    api.seed(va())
    api.fail(status=409, method='PATCH', path_prefix=f'{VA_PATH}/v/status')
    result = await update_v(obj=stored(api), desired=1, applied=True, conditions=[FOUND])
    assert result.outcome is StatusOutcome.WRITTEN
    assert stored(api)['status']['desiredOptimizedAlloc']['numReplicas'] == 1


async def test_second_conflict_gives_up(api: FakeAPI, update_v: UpdateV) -> None:
    api.seed(va())
    api.fail(status=409, method='PATCH', path_prefix=f'{VA_PATH}/v/status', times=2)
    result = await update_v(obj=None, desired=1, applied=True, conditions=[FOUND])
    assert result.outcome is StatusOutcome.CONFLICT
    assert result.message.startswith('409 Conflict')
    assert result.resource_version is None
    assert [m for m, _ in calls(api)] == ['GET', 'PATCH', 'GET', 'PATCH']
    assert 'status' not in stored(api)


async def test_not_found(api: FakeAPI, writer: StatusWriter) -> None:
    missing = await writer.update(
        namespace=NS, name='gone', obj=None, desired=1, applied=None, conditions=[FOUND]
    )
    assert missing.outcome is StatusOutcome.NOT_FOUND
    assert '404' in missing.message
    # A cached copy of a VA deleted since: the PATCH itself answers 404.
    api.seed(va('deleted'))
    cached = stored(api, 'deleted')
    api.store.delete(api.store_resource(cached), NS, 'deleted')
    deleted = await writer.update(
        namespace=NS, name='deleted', obj=cached, desired=1, applied=None, conditions=[FOUND]
    )
    assert deleted.outcome is StatusOutcome.NOT_FOUND
    assert calls(api)[-1] == ('PATCH', f'{VA_PATH}/deleted/status')


@pytest.mark.parametrize(('status', 'method'), [(500, 'PATCH'), (429, 'PATCH'), (500, 'GET')])
async def test_server_errors_are_failed(
    api: FakeAPI, update_v: UpdateV, status: int, method: str
) -> None:
    api.seed(va())
    api.fail(status=status, method=method)
    result = await update_v(obj=None, desired=1, applied=True, conditions=[FOUND])
    assert result.outcome is StatusOutcome.FAILED
    assert result.message.startswith(str(status))
    assert 'status' not in stored(api)
    assert len(api.requests_to(method='PATCH', path=f'{VA_PATH}/v/status')) <= 1


async def test_timeout_is_failed(api: FakeAPI, clock: ManualClock) -> None:
    api.seed(va())
    cached = stored(api)
    api.latency = 0.4
    client = make_client(server=api.url, timeout=0.2)
    try:
        result = await StatusWriter(client=client, clock=clock).update(
            namespace=NS, name='v', obj=cached, desired=1, applied=True, conditions=[FOUND]
        )
    finally:
        await client.aclose()
    assert result.outcome is StatusOutcome.FAILED
    assert 'Timeout' in result.message


async def test_invalid_status_is_rebuilt(api: FakeAPI, update_v: UpdateV) -> None:
    broken = {
        'desiredOptimizedAlloc': {'numReplicas': 'three', 'accelerator': 'H100'},
        'conditions': [{'type': 'TargetResolved', 'status': 'Maybe'}],
        'leftover': {'from': 'an old version'},
    }
    api.seed(va(status=broken))
    result = await update_v(obj=None, desired=2, applied=None, conditions=[FOUND])
    assert result.outcome is StatusOutcome.WRITTEN
    expected = {
        'desiredOptimizedAlloc': {'lastRunTime': T0, 'numReplicas': 2},
        'conditions': [
            {
                'type': 'TargetResolved',
                'status': 'True',
                'observedGeneration': 1,
                'lastTransitionTime': T0,
                'reason': 'TargetFound',
                'message': 'Deployment ns/d found',
            }
        ],
    }
    assert stored(api)['status'] == expected
    [patch] = api.requests_to(method='PATCH', path=f'{VA_PATH}/v/status')
    assert patch.json()['status']['leftover'] is None  # merge-patch null: delete the field
    assert patch.json()['status']['desiredOptimizedAlloc']['accelerator'] is None


async def test_invalid_spec_still_gets_conditions(api: FakeAPI, update_v: UpdateV) -> None:
    bad = va()
    bad['spec']['minReplicas'] = 9  # above maxReplicas
    api.seed(bad)
    invalid = ConditionUpdate(
        'OptimizationReady', 'False', 'InvalidConfiguration', 'minReplicas 9 > maxReplicas 4'
    )
    result = await update_v(obj=None, desired=None, applied=None, conditions=[invalid])
    assert result.outcome is StatusOutcome.WRITTEN
    after = stored(api)
    assert condition(after['status'], 'OptimizationReady')['reason'] == 'InvalidConfiguration'
    assert after['spec'] == bad['spec']


async def test_accelerator_and_generation(
    api: FakeAPI, update_v: UpdateV, clock: ManualClock
) -> None:
    api.seed(va(status={'desiredOptimizedAlloc': {'accelerator': 'H100', 'numReplicas': 1}}))
    bumped = stored(api)
    bumped['spec']['maxReplicas'] = 8
    api.store.update(api.store_resource(bumped), NS, 'v', bumped, part='main')  # generation 2
    result = await update_v(obj=None, desired=4, applied=True, conditions=[READY])
    assert result.outcome is StatusOutcome.WRITTEN
    status = stored(api)['status']
    assert status['desiredOptimizedAlloc'] == {
        'accelerator': 'H100',
        'numReplicas': 4,
        'lastRunTime': T0,
    }
    assert condition(status, 'OptimizationReady')['observedGeneration'] == 2
    assert stored(api)['spec']['maxReplicas'] == 8


async def test_long_message_is_cut(api: FakeAPI, update_v: UpdateV) -> None:
    api.seed(va())
    long = ConditionUpdate('MetricsAvailable', 'False', 'PrometheusError', 'x' * 40_000)
    await update_v(obj=None, desired=None, applied=None, conditions=[long])
    message = condition(stored(api)['status'], 'MetricsAvailable')['message']
    assert message == 'x' * MESSAGE_MAX


@pytest.mark.parametrize(
    ('update', 'desired'),
    [
        (ConditionUpdate('TargetResolved', 'True', 'Target Found', 'space'), None),
        (ConditionUpdate('TargetResolved', 'True', '', 'empty'), None),
        (ConditionUpdate('TargetResolved', 'True', '9Lives', 'digit first'), None),
        (ConditionUpdate('TargetResolved', 'True', 'Found\n', 'newline'), None),
        (ConditionUpdate('TargetResolved', 'True', 'A' * 1025, 'too long'), None),
        (ConditionUpdate('Target Resolved', 'True', 'TargetFound', 'bad type'), None),
        (ConditionUpdate('TargetResolved', 'Yes', 'TargetFound', 'bad status'), None),  # type: ignore[arg-type]
        (FOUND, -1),
        (FOUND, 2**31),
    ],
)
async def test_programming_errors_raise_before_any_request(
    api: FakeAPI, update_v: UpdateV, update: ConditionUpdate, desired: int | None
) -> None:
    api.seed(va())
    with pytest.raises(ValueError, match=r'reason|type|status|desired'):
        await update_v(obj=None, desired=desired, applied=None, conditions=[update])
    with pytest.raises(ValueError, match=r'reason|type|status|desired'):
        next_status(
            current=None,
            generation=1,
            desired=desired,
            applied=None,
            conditions=[update],
            now=0.0,
            ran=True,
        )
    assert api.requests == []


@pytest.mark.parametrize(
    ('extra', 'match'),
    [
        ({'current_replicas': -1}, 'current replicas'),
        ({'ready_replicas': 2**31}, 'ready replicas'),
        ({'ready_replicas': True}, 'ready replicas'),
        ({'accelerator': ''}, 'accelerator'),
        ({'desired': 2, 'conditions': [LOST]}, 'unresolved target'),
        ({'current_replicas': 2, 'conditions': [LOST]}, 'unresolved target'),
        ({'run_time_refresh': -1.0}, 'run_time_refresh'),
        ({'run_time_refresh': float('nan')}, 'run_time_refresh'),
        ({'run_time_refresh': float('inf')}, 'run_time_refresh'),
    ],
)
def test_bad_observations_are_programming_errors(extra: dict[str, Any], match: str) -> None:
    args: dict[str, Any] = {
        'current': None,
        'generation': 1,
        'desired': None,
        'applied': None,
        'conditions': [FOUND],
        'now': NOW,
        'ran': True,
    }
    with pytest.raises(ValueError, match=match):
        next_status(**{**args, **extra})


def test_a_bad_refresh_interval_is_refused_at_construction(client: AsyncClient) -> None:
    with pytest.raises(ValueError, match='run_time_refresh'):
        StatusWriter(client=client, clock=ManualClock(), run_time_refresh=-5)


def test_a_type_twice_in_one_update_is_refused() -> None:
    with pytest.raises(ValueError, match='twice'):
        next_status(
            current=None,
            generation=1,
            desired=None,
            applied=None,
            conditions=[FOUND, LOST],
            now=0.0,
            ran=False,
        )


# --- next_status properties -------------------------------------------------------------------

NOW = 1_767_225_600.0
TYPES = ('TargetResolved', 'MetricsAvailable', 'OptimizationReady', 'example.com/Custom')
REASONS = ('TargetFound', 'MetricsStale', 'OptimizationSucceeded', 'Other_Reason')
STATUSES = ('True', 'False', 'Unknown')

updates = st.lists(
    st.builds(
        ConditionUpdate,
        type=st.sampled_from(TYPES),
        status=st.sampled_from(STATUSES),
        reason=st.sampled_from(REASONS),
        message=st.text(max_size=12),
    ),
    max_size=4,
    unique_by=lambda u: u.type,
)


@st.composite
def existing_condition(draw: st.DrawFn) -> resource_model.Condition:
    ago = draw(st.integers(min_value=1, max_value=10**7))
    return resource_model.Condition(
        type=draw(st.sampled_from(TYPES)),
        status=draw(st.sampled_from(STATUSES)),
        observed_generation=draw(st.none() | st.integers(min_value=0, max_value=5)),
        last_transition_time=rfc3339(wall=NOW - ago),
        reason=draw(st.sampled_from(REASONS)),
        message=draw(st.text(max_size=12)),
    )


@st.composite
def current_status(draw: st.DrawFn) -> crd.Status:
    alloc = None
    if draw(st.booleans()):
        alloc = crd.DesiredOptimizedAlloc(
            last_run_time=draw(st.none() | st.sampled_from(PAST_RUNS)),
            accelerator=draw(st.none() | st.just('H100')),
            num_replicas=draw(st.none() | st.integers(min_value=0, max_value=9)),
        )
    observed = None
    if draw(st.booleans()):
        observed = crd.CurrentAlloc(
            accelerator=draw(st.none() | st.just('L40S')),
            num_replicas=draw(st.none() | st.integers(min_value=0, max_value=9)),
            ready_replicas=draw(st.none() | st.integers(min_value=0, max_value=9)),
        )
    applied = draw(st.none() | st.booleans())
    conditions = draw(st.lists(existing_condition(), max_size=4, unique_by=lambda c: c.type))
    return crd.Status(
        desired_optimized_alloc=alloc,
        current_alloc=observed,
        actuation=None if applied is None else crd.Actuation(applied=applied),
        conditions=tuple(conditions),
    )


# Stored lastRunTimes: recent, about to expire, expired, and ahead of the clock.
PAST_RUNS = tuple(rfc3339(wall=NOW - ago) for ago in (30, 299, 300, 3600, -60))
OBSERVED = ('desired', 'current_replicas', 'ready_replicas', 'accelerator')


def unresolves(conditions: list[ConditionUpdate]) -> bool:
    return any(u.type == 'TargetResolved' and u.status != 'True' for u in conditions)


def consistent(args: dict[str, Any]) -> dict[str, Any]:
    """No counts beside an update that says the target is unresolved (a programming error)."""
    if unresolves(args['conditions']):
        return {**args, **dict.fromkeys(OBSERVED)}
    return args


inputs = st.fixed_dictionaries(
    {
        'current': st.none() | current_status(),
        'generation': st.none() | st.integers(min_value=0, max_value=5),
        'desired': st.none() | st.integers(min_value=0, max_value=9),
        'applied': st.none() | st.booleans(),
        'conditions': updates,
        'now': st.floats(min_value=NOW, max_value=NOW + 10**6),
        'ran': st.booleans(),
        'current_replicas': st.none() | st.integers(min_value=0, max_value=9),
        'ready_replicas': st.none() | st.integers(min_value=0, max_value=9),
        'accelerator': st.none() | st.sampled_from(['L40S', 'A100']),
    }
).map(consistent)


def without_run(status: crd.Status) -> crd.Status:
    """The status an operator reads: all but lastRunTime (an empty alloc is no alloc)."""
    alloc = status.desired_optimized_alloc
    if alloc is not None:
        alloc = crd.DesiredOptimizedAlloc(
            accelerator=alloc.accelerator, num_replicas=alloc.num_replicas
        )
        alloc = None if alloc == crd.DesiredOptimizedAlloc() else alloc
    return crd.Status(
        desired_optimized_alloc=alloc,
        current_alloc=status.current_alloc,
        actuation=status.actuation,
        conditions=status.conditions,
    )


def run_time(status: crd.Status | None) -> str | None:
    alloc = status.desired_optimized_alloc if status is not None else None
    return alloc.last_run_time if alloc is not None else None


@settings(max_examples=200, deadline=None)
@given(args=inputs)
def test_property_next_status_is_idempotent(args: dict[str, Any]) -> None:
    once = next_status(**args)
    twice = next_status(**{**args, 'current': once})
    assert twice == once


@settings(max_examples=200, deadline=None)
# lastRunTime has whole seconds: a stamp is up to 1 s older than the `now` it was made at.
@given(args=inputs, later=st.floats(min_value=0, max_value=RUN_TIME_REFRESH - 1))
def test_property_steady_cycles_change_nothing_until_the_refresh(
    args: dict[str, Any], later: float
) -> None:
    once = next_status(**args)
    again = next_status(**{**args, 'current': once, 'now': args['now'] + later})
    stamped = run_time(once)
    if args['ran'] and stamped is not None and stamped != rfc3339(wall=args['now']):
        return  # an older stamp kept by `once` may expire within `later`
    assert again == once
    expired = next_status(**{**args, 'current': once, 'now': args['now'] + RUN_TIME_REFRESH})
    assert without_run(expired) == without_run(once)
    assert (expired != once) == args['ran']


@settings(max_examples=200, deadline=None)
@given(args=inputs)
def test_property_transition_time_moves_iff_status_flips(args: dict[str, Any]) -> None:
    before = args['current'].conditions if args['current'] is not None else ()
    result = next_status(**args)
    stamp = rfc3339(wall=args['now'])
    mentioned = {u.type: u for u in args['conditions']}
    # Order: existing conditions in place, new types appended in the order given.
    new_types = [u.type for u in args['conditions'] if u.type not in {c.type for c in before}]
    assert [c.type for c in result.conditions] == [c.type for c in before] + new_types
    for cond in result.conditions:
        prior = resource_model.find_condition(conditions=before, type=cond.type)
        if cond.type not in mentioned:
            assert cond == prior
            continue
        update = mentioned[cond.type]
        assert (cond.status, cond.reason, cond.message) == (
            update.status,
            update.reason,
            update.message,
        )
        assert cond.observed_generation == args['generation']
        if prior is None:
            assert cond.last_transition_time == stamp
        else:
            moved = cond.last_transition_time != prior.last_transition_time
            assert moved == (cond.status != prior.status)
            assert cond.last_transition_time == (stamp if moved else prior.last_transition_time)


@settings(max_examples=300, deadline=None)
@given(args=inputs)
def test_property_fields_kept_when_not_given(args: dict[str, Any]) -> None:
    current = args['current'] or crd.Status()
    result = next_status(**args)
    alloc = result.desired_optimized_alloc
    old = current.desired_optimized_alloc
    observed = result.current_alloc
    old_observed = current.current_alloc or crd.CurrentAlloc()
    if unresolves(args['conditions']):
        assert (alloc.num_replicas if alloc else None) is None
        assert observed is None
    else:
        if args['desired'] is not None:
            assert alloc is not None
            assert alloc.num_replicas == args['desired']
        else:
            assert (alloc.num_replicas if alloc else None) == (old.num_replicas if old else None)
        given_or_kept = crd.CurrentAlloc(
            accelerator=args['accelerator'] or old_observed.accelerator,
            num_replicas=(
                args['current_replicas']
                if args['current_replicas'] is not None
                else old_observed.num_replicas
            ),
            ready_replicas=(
                args['ready_replicas']
                if args['ready_replicas'] is not None
                else old_observed.ready_replicas
            ),
        )
        assert (observed or crd.CurrentAlloc()) == given_or_kept
    assert (alloc.accelerator if alloc else None) == (old.accelerator if old else None)
    if args['applied'] is None:
        assert result.actuation == current.actuation
    else:
        assert result.actuation == crd.Actuation(applied=args['applied'])


@settings(max_examples=300, deadline=None)
@given(args=inputs)
def test_property_run_time_moves_only_with_a_change_or_after_the_refresh(
    args: dict[str, Any],
) -> None:
    result = next_status(**args)
    before = run_time(args['current'])
    after = run_time(result)
    stamp = rfc3339(wall=args['now'])
    if not args['ran']:
        assert after == before
        return
    assert after in (before, stamp)
    changed = args['current'] is None or without_run(result) != without_run(args['current'])
    age = args['now'] - parse_rfc3339(before) if before is not None else None
    fresh = age is not None and 0 <= age < RUN_TIME_REFRESH
    if changed or not fresh:
        assert after == stamp
    else:
        assert after == before


def test_next_status_does_not_mutate_its_input() -> None:
    current = next_status(
        current=None, generation=1, desired=2, applied=True, conditions=[FOUND], now=NOW, ran=True
    )
    snapshot = copy.deepcopy(current.model_dump())
    flipped = next_status(
        current=current,
        generation=2,
        desired=None,
        applied=None,
        conditions=[LOST],
        now=NOW + 60,
        ran=False,
    )
    assert current.model_dump() == snapshot
    assert flipped.conditions[0].last_transition_time == T1
    assert flipped.conditions[0].observed_generation == 2
    # The target is lost: its desired count goes, the time of the last run stays.
    assert flipped.desired_optimized_alloc == crd.DesiredOptimizedAlloc(last_run_time=T0)


async def test_a_condition_that_no_longer_applies_is_removed(
    api: FakeAPI, update_v: UpdateV, clock: ManualClock
) -> None:
    limits = ConditionUpdate('ResourcesAvailable', 'False', 'ResourceConstrained', '1 held back')
    api.seed(va())
    await update_v(obj=None, desired=3, applied=True, conditions=[FOUND, limits])
    await clock.advance(60)
    result = await update_v(
        obj=stored(api),
        desired=3,
        applied=True,
        conditions=[FOUND],
        remove_conditions=('ResourcesAvailable',),
    )
    assert result.outcome is StatusOutcome.WRITTEN
    status = stored(api)['status']
    assert [c['type'] for c in status['conditions']] == ['TargetResolved']
    assert condition(status, 'TargetResolved')['lastTransitionTime'] == T0
    # Gone already: nothing to write; a type absent from the status is no error either.
    again = await update_v(
        obj=stored(api),
        desired=3,
        applied=True,
        conditions=[FOUND],
        remove_conditions=('ResourcesAvailable', 'PoolResolved'),
    )
    assert again.outcome is StatusOutcome.UNCHANGED
    with pytest.raises(ValueError, match='both set and removed: ResourcesAvailable'):
        await update_v(
            obj=stored(api),
            desired=3,
            applied=True,
            conditions=[limits],
            remove_conditions=('ResourcesAvailable',),
        )


# --- Updates found unchanged are remembered ----------------------------------------------------


def _counting_next_status(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the statuses the writer computes (its one call into `kube.nextstatus`)."""
    from llmscaler.kube import status as status_module

    count = [0]

    def counted(**kwargs: Any) -> crd.Status:
        count[0] += 1
        return next_status(**kwargs)

    monkeypatch.setattr(status_module, 'next_status', counted)
    return count


async def test_an_unchanged_update_of_the_same_copy_is_not_computed_again(
    api: FakeAPI,
    writer: StatusWriter,
    update_v: UpdateV,
    clock: ManualClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    computed = _counting_next_status(monkeypatch)
    api.seed(va())
    await update_v(obj=None, **STEADY)
    cached = stored(api)
    for _ in range(3):
        await clock.advance(30)
        same = await update_v(obj=cached, **STEADY)
        assert same.outcome is StatusOutcome.UNCHANGED
        assert same.resource_version == cached['metadata']['resourceVersion']
    assert computed[0] == 2  # the write, then the first unchanged; the others remembered
    # Other facts, or the same facts in another order, are computed.
    other = await update_v(obj=cached, **{**STEADY, 'conditions': [METRICS, FOUND, READY]})
    assert other.outcome is StatusOutcome.UNCHANGED
    assert computed[0] == 3
    # A forgotten VA is computed again.
    writer.forget_except(keys={(NS, 'another')})
    await update_v(obj=cached, **{**STEADY, 'conditions': [METRICS, FOUND, READY]})
    assert computed[0] == 4
    writer.forget_except(keys={(NS, 'v')})
    await update_v(obj=cached, **{**STEADY, 'conditions': [METRICS, FOUND, READY]})
    assert computed[0] == 4


async def test_a_remembered_update_still_stamps_the_run_time_when_due(
    api: FakeAPI, update_v: UpdateV, clock: ManualClock
) -> None:
    api.seed(va())
    await update_v(obj=None, **STEADY)
    cached = stored(api)
    await clock.advance(30)
    assert (await update_v(obj=cached, **STEADY)).outcome is StatusOutcome.UNCHANGED
    await clock.advance(RUN_TIME_REFRESH)
    due = await update_v(obj=cached, **STEADY)
    assert due.outcome is StatusOutcome.WRITTEN
    assert stored(api)['status']['desiredOptimizedAlloc']['lastRunTime'] == rfc3339(
        wall=clock.wall()
    )


async def test_a_status_changed_by_another_writer_is_computed_and_put_back(
    api: FakeAPI, client: AsyncClient, update_v: UpdateV, clock: ManualClock
) -> None:
    api.seed(va())
    await update_v(obj=None, **STEADY)
    cached = stored(api)
    await clock.advance(30)
    assert (await update_v(obj=cached, **STEADY)).outcome is StatusOutcome.UNCHANGED
    await client.patch(
        VariantAutoscalingResource.Status,
        'v',
        {'status': {'desiredOptimizedAlloc': {'numReplicas': 7}}},
        namespace=NS,
        patch_type=PatchType.MERGE,
    )
    changed = stored(api)
    assert changed['metadata']['resourceVersion'] != cached['metadata']['resourceVersion']
    result = await update_v(obj=changed, **STEADY)
    assert result.outcome is StatusOutcome.WRITTEN
    assert stored(api)['status']['desiredOptimizedAlloc']['numReplicas'] == 3
