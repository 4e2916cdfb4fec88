"""Capacity floors from the saturation ConfigMap, applied by `llmscaler run` at their schedule.

CHEAP and DEAR serve one model with the same replica at 1 and 5 per replica, both at 1 replica
with no load. A floor of DEAR's capacity times 3, opening in the current minute of
Pacific/Kiritimati (UTC+14, so the same expressions read in Etc/UTC name another day and hour),
is bought on CHEAP: the model holds 2 replicas' capacity, so CHEAP goes 1 → 2 in one write and DEAR
stays at 1. A second floor, with the same expressions in Etc/UTC and 4 replicas, never opens, or
CHEAP would reach 3.
"""

from __future__ import annotations

import json

from llmscaler.devcluster.cluster import Cluster
from llmscaler.sim.hardware.presets import MODEL_8B
from tests.support.cron_minutes import coming_minutes
from tests.support.e2e_controller import (
    CHEAP,
    CONTROLLER_NS,
    DEAR,
    NS,
    Obj,
    condition,
    controller,
    cycles_later,
    replicas,
    scale_writes,
    two_variants,
)


def floors_configmap(expressions: list[str]) -> Obj:
    def floor(name: str, expression: str, zone: str, count: int) -> Obj:
        capacity = {'variant': DEAR, 'replicas': count}
        return {
            'name': name,
            'schedule': expression,
            'timeZone': zone,
            'duration': '30m',
            'capacity': capacity,
        }

    floors = [
        floor(f'kiritimati-{i}', e, 'Pacific/Kiritimati', 3) for i, e in enumerate(expressions)
    ]
    floors += [floor(f'utc-{i}', e, 'Etc/UTC', 4) for i, e in enumerate(expressions)]
    entry = {'model_id': MODEL_8B, 'namespace': NS, 'capacityFloors': floors}
    return {
        'apiVersion': 'v1',
        'kind': 'ConfigMap',
        'metadata': {
            'name': 'wva-saturation-scaling-config',
            'namespace': CONTROLLER_NS,
            'labels': {'app.kubernetes.io/name': 'workload-variant-autoscaler'},
        },
        'data': {'llama': json.dumps(entry)},
    }


async def test_a_floor_raises_the_cheapest_variant_at_its_schedule(cluster: Cluster) -> None:
    await two_variants(cluster, replicas=1, min_replicas=1)
    cluster.seed(floors_configmap(coming_minutes('Pacific/Kiritimati')))
    async with controller(cluster, '--metrics-source', 'pods', '--interval', '1s') as process:
        await cluster.wait_for(
            lambda: replicas(cluster, CHEAP) == 2, timeout=30, what='the floor bought on CHEAP'
        )
        await cycles_later(cluster, process, more=3)
    assert scale_writes(cluster, CHEAP) == [2]
    assert scale_writes(cluster, DEAR) == []
    assert replicas(cluster, DEAR) == 1
    ready = condition(cluster, CHEAP, 'OptimizationReady')
    assert ready is not None
    assert 'capacity floor kiritimati-' in ready['message'], ready
    assert 'utc-' not in ready['message']
