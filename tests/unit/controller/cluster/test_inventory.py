"""The controller's GPU inventory (Nodes minus other pods) and the limiter's status and Event."""

from __future__ import annotations

from llmscaler.controller.cluster.inventory import (
    gpu_limits,
    node_accelerator,
    slim_gpu_pod,
    slim_node,
)
from llmscaler.devcluster.fakeapi.server import FakeAPI
from llmscaler.domain.basics import Action
from llmscaler.domain.snapshot import GpuLimit
from tests.support.controller_harness import (
    NS,
    SATURATED,
    FakeSource,
    condition_message,
    conditions,
    decision,
    events,
    gpu_pod,
    informed,
    inventory_listed,
    node,
    scale_writes,
    seed_a_full_node,
)
from tests.support.waiting import eventually


def test_node_types_follow_the_gpu_product_labels_in_wvas_order() -> None:
    assert node_accelerator({'amd.com/gpu.product-name': 'MI300X'}) == 'MI300X'
    both = {'amd.com/gpu.product-name': 'MI300X', 'nvidia.com/gpu.product': 'H100'}
    assert node_accelerator(both) == 'H100'
    assert node_accelerator({'inference.optimization/acceleratorName': 'A100'}) == 'A100'
    assert node_accelerator({}) == 'unknown'


def test_allocatable_gpus_minus_other_pods_on_nodes_that_take_pods() -> None:
    nodes = [
        node('n1', gpus='8'),
        node('n2', gpus='4'),
        node('cordoned', cordoned=True),
        node('sick', ready='False'),
        node('h100', gpus='8', product='NVIDIA-H100'),
        node('cpu', gpus='0'),
        node('odd', gpus='1.5'),
    ]
    pods = [
        gpu_pod('other-1', on='n1', gpus=2),
        gpu_pod('mine-0', on='n1', gpus=1, namespace=NS),
        gpu_pod('done', on='n2', gpus=4, phase='Succeeded'),
        gpu_pod('on-sick-node', on='sick', gpus=8),
        gpu_pod('other-2', on='h100', gpus=8),
    ]
    limits = gpu_limits(nodes=nodes, pods=pods, managed={(NS, 'mine-0')})
    assert limits == (
        GpuLimit(provider='inventory', accelerator='NVIDIA-H100', limit=8, used=8),
        GpuLimit(provider='inventory', accelerator='NVIDIA-L40S', limit=12, used=2),
    )
    # The informers' slim copies give the same answer.
    slim_pods = [p for p in (slim_gpu_pod(x) for x in pods) if p is not None]
    slim_nodes = [n for n in (slim_node(x) for x in nodes) if n is not None]
    assert gpu_limits(nodes=slim_nodes, pods=slim_pods, managed={(NS, 'mine-0')}) == limits


def test_unbound_and_cpu_pods_are_not_kept() -> None:
    unbound = gpu_pod('p', on='n1')
    del unbound['spec']['nodeName']
    assert slim_gpu_pod(unbound) is None
    assert slim_gpu_pod(gpu_pod('p', on='n1', gpus=0)) is None
    assert slim_gpu_pod(gpu_pod('p', on='n1', phase='Failed')) is None
    kept = slim_gpu_pod(gpu_pod('p', on='n1', gpus=2))
    assert kept is not None
    assert kept['gpus'] == 2


async def test_a_full_node_holds_the_scale_up_and_the_va_says_why(api: FakeAPI) -> None:
    # One L40S node with 2 GPUs: one holds a's replica, another workload holds the other.
    seed_a_full_node(api)
    source = FakeSource(api, load={'a': SATURATED})
    async with informed(api, source) as controller:
        # The first cycle with the limiter on starts the inventory; until it has listed, the
        # limiter knows no GPUs and limits nothing (and says so).
        report = await controller.cycle.run_once()
        assert decision(report, 'a') == (1, 2, Action.SCALE_UP)
        assert conditions(api, 'a')['ResourcesAvailable'] == ('Unknown', 'NoGpuLimits')
        await inventory_listed(controller, api)
        report = await controller.cycle.run_once()
        # Saturated: V1 asks for a second replica; no GPU is free, so it is held back.
        assert decision(report, 'a') == (1, 1, Action.NO_CHANGE)
        (held,) = report.decisions
        assert held.limited == 1
        assert scale_writes(api) == [2]
        assert conditions(api, 'a')['ResourcesAvailable'] == ('False', 'ResourceConstrained')
        message = condition_message(api, 'a', 'ResourcesAvailable')
        assert '1 replica(s) held back: target 1' in message
        assert 'NVIDIA-L40S 0 GPUs free' in message
        (event,) = events(api, reason='ResourceConstrained')
        assert event['type'] == 'Warning'
        assert event['regarding']['name'] == 'a'
        assert 'held back by the GPU budget' in event['note']

        # The other workload ends: its GPU is free and the next cycle scales up.
        api.store.delete(api.store_resource(gpu_pod('x', on='n1')), 'other', 'batch-job')
        await eventually(lambda: len(controller.inventory.pods.items()) == 1, 'the pod to go')
        report = await controller.cycle.run_once()
        assert decision(report, 'a') == (1, 2, Action.SCALE_UP)
        assert scale_writes(api) == [2, 2]
        assert conditions(api, 'a')['ResourcesAvailable'] == ('True', 'ResourcesSufficient')
