"""`llmscaler run --shadow` against the fake apiserver and a fake Prometheus (both on loopback):
it decides, publishes the comparison, and nothing but its own Lease reaches the API as a write.

Setup: tests/support/controller_harness.py's VAs `a` (cost 5) and `b` (cost 20), one ready
replica each, both saturated: the cycle decides `a` 1 → 2 (the cheapest variant), `b` stays.
The fake Prometheus answers the peer query with another autoscaler's decision: `a` at 1
(exported_namespace, as a ServiceMonitor scrape renames it) and `b` at 3.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging

import httpx
import pytest

from llmscaler.clock import ManualClock
from llmscaler.collect.prometheus.peer import PEER_QUERY, PeerReading
from llmscaler.controller.app import Controller
from llmscaler.controller.publish import ReplicaRow, ShadowRow
from llmscaler.controller.va.shadow import ShadowLog, shadow_rows
from llmscaler.devcluster.fakeapi.server import FakeAPI
from llmscaler.domain.basics import Action
from llmscaler.domain.snapshot import Decision
from llmscaler.kube.leader import SHADOW_LEASE_NAME
from llmscaler.kube.scale import ScaleOutcome
from tests.support.controller_harness import (
    NS,
    SATURATED,
    FakeSource,
    replicas,
    run_options,
    samples,
    seed_variant,
)
from tests.support.fake_prometheus import FakePrometheus, prom, sample, vector
from tests.support.waiting import eventually

__all__ = ['prom']  # the fixture

LEASES = '/apis/coordination.k8s.io/'


def decided(variant: str, *, current: int, target: int) -> Decision:
    action = Action.SCALE_UP if target > current else Action.NO_CHANGE
    return Decision(
        variant=variant,
        namespace=NS,
        model_id='m1',
        accelerator='NVIDIA-L40S',
        current=current,
        target=target,
        action=action,
        reason='saturation',
    )


def test_rows_pair_each_decision_with_the_peer_count_of_its_variant() -> None:
    peer = PeerReading(desired=(((NS, 'a'), 4),))
    rows = shadow_rows(
        decisions=[decided('b', current=1, target=1), decided('a', current=1, target=2)],
        peer=peer,
    )
    assert rows == [
        ShadowRow(
            replicas=ReplicaRow(
                variant='a', namespace=NS, accelerator='NVIDIA-L40S', current=1, desired=2
            ),
            peer=4,
        ),
        ShadowRow(
            replicas=ReplicaRow(
                variant='b', namespace=NS, accelerator='NVIDIA-L40S', current=1, desired=1
            ),
            peer=None,
        ),
    ]


def test_a_comparison_is_logged_when_it_changes_only(caplog: pytest.LogCaptureFixture) -> None:
    shadow = ShadowLog()
    row = ShadowRow(
        replicas=ReplicaRow(variant='a', namespace=NS, accelerator='', current=1, desired=2), peer=1
    )
    caplog.set_level(logging.INFO)
    shadow.compare(rows=[row], reasons={f'{NS}/a': 'saturation'})
    shadow.compare(rows=[row], reasons={f'{NS}/a': 'saturation'})
    assert [r.getMessage() for r in caplog.records] == [
        f'shadow {NS}/a: llmscaler 2, running 1, peer 1 (saturation)'
    ]
    caplog.clear()
    shadow.compare(rows=[dataclasses.replace(row, peer=None)], reasons={})
    assert [r.getMessage() for r in caplog.records] == [
        f'shadow {NS}/a: llmscaler 2, running 1, peer none published ()'
    ]


async def test_shadow_decides_publishes_and_writes_nothing_but_its_lease(
    api: FakeAPI, prom: FakePrometheus
) -> None:
    seed_variant(api, 'a', cost='5')
    seed_variant(api, 'b', cost='20')
    prom.canned[PEER_QUERY.promql] = vector(
        sample('1', exported_namespace=NS, namespace='wva-system', variant_name='a'),
        sample('3', namespace=NS, variant_name='b'),
    )
    source = FakeSource(api, load={'a': SATURATED, 'b': SATURATED})
    argv = ('--shadow', '--leader-elect', '--prometheus-url', prom.url)
    controller = Controller(options=run_options(api, *argv), clock=ManualClock(), source=source)
    stop = asyncio.Event()
    run = asyncio.create_task(controller.run(stop=stop))
    try:
        await eventually(lambda: controller.cycle.last_completed is not None, 'the first cycle')
        port = controller.metrics_port
        assert port is not None
        async with httpx.AsyncClient() as http:
            page = samples((await http.get(f'http://127.0.0.1:{port}/metrics')).text)
        # A write the controller would send is refused at the client: nothing reaches the API.
        result = await controller.scale.scale(
            api_version='apps/v1', kind='Deployment', namespace=NS, name='a', replicas=5, expect=1
        )
        assert result.outcome is ScaleOutcome.FAILED
        assert 'writes nothing' in result.message
    finally:
        stop.set()
        assert await asyncio.wait_for(run, 5.0) == 0

    writes = [r for r in api.requests if r.method not in ('GET', 'HEAD')]
    assert writes, 'the Lease is written'
    assert all(r.path.startswith(LEASES) for r in writes), [(r.method, r.path) for r in writes]
    assert any(r.path.endswith(f'/leases/{SHADOW_LEASE_NAME}') for r in api.requests)
    assert replicas(api, 'a') == 1
    assert [q.query for q in prom.log].count(PEER_QUERY.promql) >= 1

    def labelled(variant: str) -> tuple[tuple[str, str], ...]:
        return (('accelerator_type', 'NVIDIA-L40S'), ('namespace', NS), ('variant_name', variant))

    assert page[('llmscaler_shadow_desired_replicas', labelled('a'))] == 2
    assert page[('llmscaler_shadow_current_replicas', labelled('a'))] == 1
    assert page[('llmscaler_shadow_desired_replicas', labelled('b'))] == 1
    peer = 'llmscaler_shadow_peer_desired_replicas'
    assert page[(peer, (('namespace', NS), ('variant_name', 'a')))] == 1
    assert page[(peer, (('namespace', NS), ('variant_name', 'b')))] == 3

    def compared(variant: str, against: str, result: str) -> float:
        labels = (
            ('against', against),
            ('namespace', NS),
            ('result', result),
            ('variant_name', variant),
        )
        return page.get(('llmscaler_shadow_comparisons_total', labels), 0.0)

    assert compared('a', 'current', 'above') == compared('a', 'peer', 'above') == 1
    assert compared('b', 'current', 'equal') == compared('b', 'peer', 'below') == 1
    # The gauges an HPA reads belong to the autoscaler beside it: none published here.
    assert not [key for key in page if key[0].startswith(('wva_desired', 'inferno_desired'))]
