"""`llmscaler run` as a process while one pod serves hostile `/metrics` pages.

One bad pod must not hurt the controller (docs/reliability.md, "Hostile pages"): the pages of
`emulate.hostile` (the shapes found, each over a cap, then pages just within every cap) are planted
one after the other on one of two idle pods of a model, while a second model runs beside it with
pages of its own. Each check runs on the fake API and on the real control plane, the controller
scraping the pods and electing a leader on a short Lease.

| check | expectation |
|---|---|
| a page over a cap | MetricsAvailable False, naming the pod and the cap; the model held at 2 |
| a page at the caps | held (the page lacks KV usage), the pod named |
| meanwhile | the other model is scaled down as usual; the Lease is kept, no renewal late |
| the controller's memory | peak RSS, its scraping process's included, within 300 MiB of before |
| the pod repaired | its model is scaled down as usual |
"""

from __future__ import annotations

import re
from pathlib import Path

from llmscaler.devcluster.cluster import Cluster
from llmscaler.devcluster.process import ControllerProcess
from llmscaler.emulate.hostile import PAGES
from llmscaler.sim.hardware.presets import MODEL_8B, MODEL_70B
from tests.support.e2e_controller import (
    CHEAP,
    ELECTION,
    SPEC,
    condition,
    controller,
    cycles_later,
    lease_holder,
    main_resource_writes,
    reading_cluster,
    replicas,
    scale_writes,
    show,
    source_args,
    unavailable_naming,
)
from tests.support.processes import tree_memory

OTHER = 'other'
IDENTITY = 'hostile-pages'
MiB = 1024 * 1024
MEMORY_ROOM = 300 * MiB
"""What the hostile pages may add to the controller's resident memory at their peak."""


def memory(process: ControllerProcess, field: str) -> int:
    """`VmRSS` or `VmHWM` (the peak) of the controller and its scraping process, in bytes."""
    assert process.pid is not None
    return tree_memory(process.pid, field)


def renewals(process: ControllerProcess) -> tuple[float, float, float]:
    """(renewed, failed, renewals started at most 0.5 s late) from the controller's metrics."""
    text = process.metrics_text()

    def value(pattern: str) -> float:
        found = re.search(rf'^{pattern} (\S+)$', text, re.MULTILINE)
        return float(found.group(1)) if found else 0.0

    return (
        value(r'llmscaler_lease_renewals_total\{outcome="renewed"\}'),
        value(r'llmscaler_lease_renewals_total\{outcome="failed"\}'),
        value(r'llmscaler_lease_renewal_lateness_seconds_bucket\{le="0\.5"\}'),
    )


async def test_hostile_pages_on_one_pod_cost_neither_memory_nor_the_lease_nor_other_models(
    backend: bool, tmp_path: Path
) -> None:
    async with reading_cluster(backend=backend, workdir=tmp_path, source='pods') as cluster:
        # Two replicas each for a trickle of load: one would do, so a scale-down is due at once.
        for name, model in ((CHEAP, MODEL_8B), (OTHER, MODEL_70B)):
            await cluster.add_variant(
                name=name, model_id=model, preset=SPEC, cost=1.0, replicas=2, min_replicas=1
            )
            cluster.set_rate(model_id=model, rate=0.5)
        hostile = cluster.pod_name(CHEAP, 1)
        emulator = cluster.emulator(CHEAP).emulator
        # Planted before the controller starts, so that no cycle sees the pod's own page and
        # scales down before the first hostile one.
        first, *rest = PAGES.values()
        emulator.show_page(slot=1, page=first.page(model=MODEL_8B))
        args = (*source_args(cluster, interval='1s'), *ELECTION, '--identity', IDENTITY)

        async with controller(cluster, *args) as process:
            await cluster.wait_for(
                lambda: lease_holder(cluster) == IDENTITY, timeout=30, what='the Lease'
            )
            await cycles_later(cluster, process, more=1)
            before = memory(process, 'VmRSS')
            for shape in (first, *rest):
                emulator.show_page(slot=1, page=shape.page(model=MODEL_8B))
                await held_naming(cluster, process, pod=hostile, cap=shape.cap, over=shape.kind)
            # Meanwhile the other model was decided as usual.
            await cluster.wait_for(
                lambda: replicas(cluster, OTHER) == 1, timeout=30, what=f'{OTHER} scaled down'
            )
            assert scale_writes(cluster, CHEAP) == []
            assert replicas(cluster, CHEAP) == 2
            peak = memory(process, 'VmHWM')
            assert peak - before < MEMORY_ROOM, (before // MiB, peak // MiB)
            assert lease_holder(cluster) == IDENTITY
            renewed, failed, on_time = renewals(process)
            assert renewed >= 10, process.metrics_text()
            assert failed == 0, process.metrics_text()
            assert on_time == renewed + failed, process.metrics_text()  # none over 0.5 s late

            emulator.show_page(slot=1, page=None)
            await cluster.wait_for(
                lambda: replicas(cluster, CHEAP) == 1, timeout=30, what='the scale-down, repaired'
            )
            assert main_resource_writes(cluster) == []
            assert process.returncode is None
            assert lease_holder(cluster) == IDENTITY


async def held_naming(
    cluster: Cluster, process: ControllerProcess, *, pod: str, cap: str, over: str
) -> None:
    """Wait until the model is held with MetricsAvailable False naming `pod` (and, for a page
    over a cap, the cap), then a few cycles more: still held."""

    def named() -> bool:
        if not unavailable_naming(cluster, CHEAP, pod):
            return False
        cond = condition(cluster, CHEAP, 'MetricsAvailable')
        return over == 'at' or (cond is not None and f'({cap})' in cond['message'])

    await cluster.wait_for(named, timeout=30, what=f'MetricsAvailable naming {pod} and {cap}')
    await cycles_later(cluster, process, more=2)
    cond = condition(cluster, CHEAP, 'MetricsAvailable')
    assert cond is not None
    assert cond['status'] == 'False', show(cond)
    assert pod in cond['message'], show(cond)
    assert replicas(cluster, CHEAP) == 2
