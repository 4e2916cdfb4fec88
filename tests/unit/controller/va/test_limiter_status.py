"""The limiter's metrics and the fate of `ResourcesAvailable` when the limiter is turned off.

Worked example (as in test_controller_inventory): one NVIDIA-L40S node with 2 GPUs, one held by
VA `a`'s replica and one by another workload; `a` is saturated. With `enableLimiter: true` the
second replica is held back: `wva_decisions_limited_total{variant_name="a",limiter_name=
"gpu-limiter"}` is 1 and `wva_available_gpus{accelerator_vendor="nvidia",accelerator_model=
"NVIDIA-L40S",accelerator_type="NVIDIA-L40S"}` is 2 (the allocatable GPUs). Once the ConfigMap
turns the limiter off, the next cycle scales `a` up unlimited, its status no longer carries
`ResourcesAvailable` (which would still say the budget holds it back), and the GPU gauge is gone.
"""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from llmscaler.config.configmaps import SATURATION_CONFIGMAP
from llmscaler.controller.publish import (
    ControllerMetrics,
    GpuRow,
    available_gpu_rows,
    node_gpu_vendors,
)
from llmscaler.devcluster.fakeapi.server import FakeAPI
from llmscaler.domain.basics import Action
from llmscaler.domain.snapshot import GpuLimit
from tests.support.controller_harness import (
    NS,
    SATURATED,
    FakeSource,
    conditions,
    configmap,
    decision,
    informed,
    inventory_listed,
    node,
    seed_a_full_node,
)
from tests.support.waiting import eventually

Series = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def family(metrics: ControllerMetrics, name: str) -> Series:
    found: Series = {}
    for fam in text_string_to_metric_families(metrics.render().decode()):
        for sample in fam.samples:
            if sample.name == name:
                found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def labelled(name: str, **labels: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    return (name, tuple(sorted(labels.items())))


def test_gpu_rows_keep_the_inventory_and_name_the_vendor() -> None:
    amd = node('n2', product=None)
    amd['metadata']['labels'] = {'amd.com/gpu.product-name': 'MI300X'}
    amd['status']['allocatable'] = {'amd.com/gpu': '8'}
    vendors = node_gpu_vendors([node('n1'), amd, node('cpu', product=None, gpus='0')])
    assert vendors == {'NVIDIA-L40S': 'nvidia', 'MI300X': 'amd'}
    limits = (
        GpuLimit(provider='inventory', accelerator='NVIDIA-L40S', limit=8, used=3),
        GpuLimit(provider='inventory', accelerator='MI300X', limit=8),
        GpuLimit(provider='inventory', accelerator='TPU', limit=4),
        GpuLimit(provider='quota', accelerator='NVIDIA-L40S', limit=2),
        GpuLimit(provider='inventory', accelerator='X', limit=2, namespace='team'),
    )
    assert available_gpu_rows(limits=limits, vendors=vendors) == (
        GpuRow(vendor='amd', model='MI300X', type='MI300X', gpus=8),
        GpuRow(vendor='nvidia', model='NVIDIA-L40S', type='NVIDIA-L40S', gpus=8),
        GpuRow(vendor='unknown', model='TPU', type='TPU', gpus=4),
    )
    metrics = ControllerMetrics()
    metrics.set_available_gpus(rows=available_gpu_rows(limits=limits, vendors=vendors))
    assert len(family(metrics, 'wva_available_gpus')) == 3
    metrics.set_available_gpus(rows=())
    assert family(metrics, 'wva_available_gpus') == {}


async def test_limited_metrics_then_the_limiter_off_clears_the_condition(api: FakeAPI) -> None:
    seed_a_full_node(api)
    source = FakeSource(api, load={'a': SATURATED})
    async with informed(api, source) as controller:
        metrics = controller.metrics
        await controller.cycle.run_once()  # starts the inventory
        await inventory_listed(controller, api)
        report = await controller.cycle.run_once()
        assert decision(report, 'a') == (1, 1, Action.NO_CHANGE)
        assert conditions(api, 'a')['ResourcesAvailable'] == ('False', 'ResourceConstrained')
        limited = labelled(
            'wva_decisions_limited_total',
            variant_name='a',
            namespace=NS,
            limiter_name='gpu-limiter',
        )
        assert family(metrics, 'wva_decisions_limited_total') == {limited: 1.0}
        gpus = labelled(
            'wva_available_gpus',
            accelerator_vendor='nvidia',
            accelerator_model='NVIDIA-L40S',
            accelerator_type='NVIDIA-L40S',
        )
        assert family(metrics, 'wva_available_gpus') == {gpus: 2.0}

        # The limiter turned off: the condition goes, the scale-up is no longer held.
        off = configmap(SATURATION_CONFIGMAP, {'default': 'enableLimiter: false\n'})
        name = off['metadata']['name']
        api.store.update(
            api.store_resource(off), off['metadata']['namespace'], name, off, part='main'
        )
        await eventually(
            lambda: not controller.cycle.current_config().default.saturation.enable_limiter,
            'the ConfigMap to reload',
        )
        report = await controller.cycle.run_once()
        assert decision(report, 'a') == (1, 2, Action.SCALE_UP)
        await eventually(
            lambda: 'ResourcesAvailable' not in conditions(api, 'a'), 'the condition to go'
        )
        assert 'OptimizationReady' in conditions(api, 'a')  # the others stay
        assert family(metrics, 'wva_available_gpus') == {}
        assert family(metrics, 'wva_decisions_limited_total') == {limited: 1.0}
