"""The event recorder against the fake apiserver over HTTP, with time driven by hand.

Worked example (dedup 600 s, series interval 30 s): occurrences at t = 0, 10, 20, 30, 31, 60 make
one Event (created at 0) and two merge patches: at 30 with series.count 4, at 60 with count 6;
the occurrences at 10, 20 and 31 are only counted (suppressed). An occurrence at t = 600 creates
a second Event object.
"""

from __future__ import annotations

import asyncio
import itertools
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lightkube import AsyncClient

from llmscaler.clock import ManualClock, parse_rfc3339, rfc3339
from llmscaler.devcluster.fakeapi.resources import by_kind
from llmscaler.devcluster.fakeapi.server import FakeAPI
from llmscaler.kube.client import ObjectRef, make_client
from llmscaler.kube.events import NOTE_LIMIT, EventRecorder, truncate_note

EVENTS_PATH = '/apis/events.k8s.io/v1/namespaces/ns/events'
EVENT_KIND = by_kind(api_version='events.k8s.io/v1', kind='Event')
VA = ObjectRef(
    api_version='llmd.ai/v1alpha1',
    kind='VariantAutoscaling',
    namespace='ns',
    name='va-1',
    uid='5f0c-uid',
)
TARGET = ObjectRef(api_version='apps/v1', kind='Deployment', namespace='ns', name='vllm-a')


@dataclass
class Harness:
    api: FakeAPI
    clock: ManualClock
    client: AsyncClient
    recorder: EventRecorder

    def events(self, namespace: str = 'ns') -> list[dict[str, Any]]:
        assert EVENT_KIND is not None
        found = self.api.store.list(EVENT_KIND, namespace)
        return sorted(found, key=lambda e: e['eventTime'])

    def wall(self, t: float) -> str:
        return rfc3339(wall=self.clock.wall() - self.clock.monotonic() + t, micro=True)

    async def at(self, t: float, **fields: Any) -> None:
        """Record one occurrence at monotonic time t (default: a scaling Warning about VA)."""
        await self.clock.advance(t - self.clock.monotonic())
        event: dict[str, Any] = {
            'regarding': VA,
            'type': 'Warning',
            'reason': 'TargetUnreadable',
            'action': 'Scale',
            'note': 'deployment vllm-a: not found',
            **fields,
        }
        await self.recorder.record(**event)


@pytest.fixture
async def h() -> AsyncIterator[Harness]:
    async with FakeAPI() as api:
        clock = ManualClock()
        client = make_client(server=api.url, timeout=5.0)
        try:
            recorder = EventRecorder(client=client, clock=clock, instance='llmscaler-7d9f-x2')
            yield Harness(api=api, clock=clock, client=client, recorder=recorder)
        finally:
            await client.aclose()


async def test_the_first_occurrence_creates_an_event(h: Harness) -> None:
    await h.at(0, related=TARGET, type='Normal', reason='Scaled', note='2 -> 3 replicas')
    [event] = h.events()
    meta = event['metadata']
    assert re.fullmatch(r'va-1\.[0-9a-f]{16}', meta['name'])
    assert meta['namespace'] == 'ns'
    assert event['eventTime'] == h.wall(0)
    assert event['eventTime'].endswith('.000000Z')
    assert {k: event[k] for k in ('type', 'reason', 'action', 'note')} == {
        'type': 'Normal',
        'reason': 'Scaled',
        'action': 'Scale',
        'note': '2 -> 3 replicas',
    }
    assert event['reportingController'] == 'llmscaler.io/controller'
    assert event['reportingInstance'] == 'llmscaler-7d9f-x2'
    assert event['regarding'] == {
        'apiVersion': 'llmd.ai/v1alpha1',
        'kind': 'VariantAutoscaling',
        'namespace': 'ns',
        'name': 'va-1',
        'uid': '5f0c-uid',
    }
    assert event['related'] == {
        'apiVersion': 'apps/v1',
        'kind': 'Deployment',
        'namespace': 'ns',
        'name': 'vllm-a',
    }
    assert 'series' not in event
    assert len(h.api.requests_to(method='POST', path=EVENTS_PATH)) == 1
    assert (h.recorder.sent, h.recorder.suppressed, h.recorder.failed) == (1, 0, 0)


async def test_names_are_unique_per_object(h: Harness) -> None:
    for reason in ('A', 'B', 'C'):
        await h.at(0, reason=reason)
    names = {e['metadata']['name'] for e in h.events()}
    assert len(names) == 3
    assert all(name.startswith('va-1.') for name in names)


async def test_a_cluster_scoped_object_is_reported_in_default(h: Harness) -> None:
    node = ObjectRef(api_version='v1', kind='Node', namespace='', name='gpu-node-1')
    await h.at(0, regarding=node)
    [event] = h.events('default')
    assert event['regarding'] == {'apiVersion': 'v1', 'kind': 'Node', 'name': 'gpu-node-1'}


@pytest.mark.parametrize(
    ('note', 'chars'),
    [('x' * 2000, 1024), ('é' * 700, 512), ('ok', 2), ('ab' + '€' * 400, 342)],
)
def test_notes_are_cut_to_1024_bytes_on_a_character_boundary(note: str, chars: int) -> None:
    cut = truncate_note(note)
    assert len(cut) == chars
    assert len(cut.encode()) <= NOTE_LIMIT
    assert note.startswith(cut)


async def test_a_long_note_is_cut_in_the_event(h: Harness) -> None:
    await h.at(0, note='n' * 5000)
    [event] = h.events()
    assert event['note'] == 'n' * 1024


async def test_repeats_are_counted_and_patched_once_per_series_interval(h: Harness) -> None:
    for t in (0, 10, 20, 30, 31, 60):
        await h.at(t)
    [event] = h.events()
    assert event['series'] == {'count': 6, 'lastObservedTime': h.wall(60)}
    patches = h.api.requests_to(method='PATCH', path=f'{EVENTS_PATH}/{event["metadata"]["name"]}')
    assert [p.json() for p in patches] == [
        {'series': {'count': 4, 'lastObservedTime': h.wall(30)}},
        {'series': {'count': 6, 'lastObservedTime': h.wall(60)}},
    ]
    assert {p.content_type for p in patches} == {'application/merge-patch+json'}
    assert (h.recorder.sent, h.recorder.suppressed, h.recorder.failed) == (3, 3, 0)


async def test_a_new_object_after_the_dedup_window(h: Harness) -> None:
    await h.at(0)
    await h.at(599)
    assert len(h.events()) == 1
    await h.at(600)
    first, second = h.events()
    assert first['series']['count'] == 2
    assert second['eventTime'] == h.wall(600)
    assert 'series' not in second
    assert first['metadata']['name'] != second['metadata']['name']
    assert (h.recorder.sent, h.recorder.suppressed) == (3, 0)


async def test_every_field_of_the_key_tells_occurrences_apart(h: Harness) -> None:
    await h.at(0)
    await h.at(1, note='other note')
    await h.at(2, reason='OtherReason')
    await h.at(3, action='Other')
    await h.at(4, type='Normal')
    await h.at(5, regarding=TARGET)
    await h.at(6)  # the first again: deduplicated
    assert len(h.events()) == 6
    assert (h.recorder.sent, h.recorder.suppressed) == (6, 1)


async def test_a_server_error_never_raises_and_is_counted(h: Harness) -> None:
    h.api.fail(status=500, method='POST', path_prefix=EVENTS_PATH)
    await h.at(0)
    assert h.events() == []
    assert (h.recorder.sent, h.recorder.suppressed, h.recorder.failed) == (0, 0, 1)
    await h.at(10)  # a broken sink is not retried on every occurrence
    assert len(h.api.requests_to(method='POST', path=EVENTS_PATH)) == 1
    await h.at(30)
    [event] = h.events()
    assert event['series'] == {'count': 3, 'lastObservedTime': h.wall(30)}
    assert (h.recorder.sent, h.recorder.suppressed, h.recorder.failed) == (1, 1, 1)


async def test_a_failed_series_patch_is_counted_and_retried_later(h: Harness) -> None:
    await h.at(0)
    h.api.fail(status=429, method='PATCH', path_prefix=EVENTS_PATH)
    await h.at(30)
    await h.at(40)
    assert 'series' not in h.events()[0]
    await h.at(60)
    assert h.events()[0]['series']['count'] == 4
    assert (h.recorder.sent, h.recorder.suppressed, h.recorder.failed) == (2, 1, 1)


async def test_an_event_deleted_meanwhile_is_created_again(h: Harness) -> None:
    await h.at(0)
    [old] = h.events()
    assert EVENT_KIND is not None
    h.api.store.delete(EVENT_KIND, 'ns', old['metadata']['name'])
    await h.at(30)
    [new] = h.events()
    assert new['metadata']['name'] != old['metadata']['name']
    assert new['eventTime'] == h.wall(30)
    assert len(h.api.requests_to(method='POST', path=EVENTS_PATH)) == 2
    assert (h.recorder.sent, h.recorder.failed) == (2, 0)


async def test_an_unreachable_server_never_raises() -> None:
    async with FakeAPI() as gone:
        url = gone.url
    client = make_client(server=url, timeout=5.0)
    try:
        recorder = EventRecorder(client=client, clock=ManualClock(), instance='i')
        await recorder.record(regarding=VA, type='Warning', reason='R', action='A', note='n')
        assert (recorder.sent, recorder.suppressed, recorder.failed) == (0, 0, 1)
    finally:
        await client.aclose()


async def test_concurrent_occurrences_create_one_event(h: Harness) -> None:
    await asyncio.gather(*(h.at(0) for _ in range(5)))
    assert len(h.events()) == 1
    assert (h.recorder.sent, h.recorder.suppressed) == (1, 4)


async def test_the_cache_is_bounded_by_age_and_size(h: Harness) -> None:
    small = EventRecorder(client=h.client, clock=h.clock, instance='i', max_entries=3)
    for reason in ('A', 'B', 'C', 'D'):
        await small.record(regarding=VA, type='Normal', reason=reason, action='x', note='n')
    assert small.cached == 3
    # 'A' was dropped as the oldest, so it is reported afresh; 'D' is still deduplicated.
    await small.record(regarding=VA, type='Normal', reason='A', action='x', note='n')
    await small.record(regarding=VA, type='Normal', reason='D', action='x', note='n')
    assert len(h.events()) == 5
    assert (small.sent, small.suppressed) == (5, 1)
    await h.clock.advance(600)
    await small.record(regarding=VA, type='Normal', reason='E', action='x', note='n')
    assert small.cached == 1
    with pytest.raises(ValueError, match='max_entries'):
        EventRecorder(client=h.client, clock=h.clock, instance='i', max_entries=0)


async def test_a_silent_recorder_sends_nothing(h: Harness) -> None:
    silent = EventRecorder(client=h.client, clock=h.clock, instance='i', silent=True)
    for reason in ('A', 'A', 'B'):
        await silent.record(regarding=VA, type='Warning', reason=reason, action='x', note='n')
    assert h.api.requests == []
    assert (silent.sent, silent.suppressed, silent.failed, silent.cached) == (0, 3, 0, 0)


# --- property ---------------------------------------------------------------------------------

KEYS = ('TargetUnreadable', 'MetricsStale', 'Scaled')


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ops=st.lists(
        st.tuples(
            st.integers(min_value=0, max_value=len(KEYS) - 1),
            st.sampled_from([0.0, 1.0, 7.5, 29.0, 30.0, 31.0, 200.0, 599.0, 600.0, 601.0]),
        ),
        min_size=1,
        max_size=25,
    )
)
def test_property_one_object_per_key_per_window(ops: list[tuple[int, float]]) -> None:
    """Any sequence of occurrences creates at most one Event per key per dedup window, every
    occurrence falls in the window of an Event of its key, and each call is counted once."""

    async def scenario() -> None:
        async with FakeAPI() as api:
            clock = ManualClock()
            client = make_client(server=api.url, timeout=5.0)
            try:
                recorder = EventRecorder(client=client, clock=clock, instance='i')
                seen: dict[str, list[float]] = {key: [] for key in KEYS}
                for index, step in ops:
                    await clock.advance(step)
                    seen[KEYS[index]].append(clock.wall())
                    await recorder.record(
                        regarding=VA, type='Warning', reason=KEYS[index], action='a', note='n'
                    )
                assert EVENT_KIND is not None
                events = api.store.list(EVENT_KIND, 'ns')
            finally:
                await client.aclose()
        assert recorder.sent + recorder.suppressed + recorder.failed == len(ops)
        assert recorder.failed == 0
        for key, times in seen.items():
            mine = [e for e in events if e['reason'] == key]
            starts = sorted(t for e in mine if (t := parse_rfc3339(e['eventTime'])) is not None)
            assert len(starts) == len(mine)
            assert all(b - a >= 600 for a, b in itertools.pairwise(starts))
            for t in times:
                assert any(s <= t < s + 600 for s in starts), (key, t, starts)
            for event in mine:
                assert event.get('series', {'count': 1})['count'] <= len(times)

    asyncio.run(scenario())
