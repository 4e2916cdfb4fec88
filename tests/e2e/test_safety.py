"""`llmscaler run` as a process, fed broken metrics, a hostile ConfigMap and a slow Prometheus.

The safety rules (docs/decision-core.md) as the operator meets them: whatever the metrics, the
ConfigMaps or the servers do, the controller keeps cycling, never scales down on figures it cannot
trust, and says why on the VA or an Event. Every check runs on the fake API and on the real
control plane and reads the stored objects and the request log; cycles are counted on the
controller's own `/metrics` (`wva_optimization_duration_seconds_count`).

| check | expectation |
|---|---|
| 1 of 2 idle pods: KV usage NaN (pods; Prom.) | held, MetricsAvailable False names it; fixed: 2→1 |
| hostile YAML in a tenant's saturation ConfigMap | InvalidConfiguration Event; global edits apply |
| Prometheus drips a byte / 0.5 s, or never ends | cycles in time; PrometheusError says why; held |
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from llmscaler.devcluster.cluster import Cluster
from llmscaler.devcluster.process import ControllerProcess
from llmscaler.devcluster.slowhttp import Mode, SlowServer
from llmscaler.sim.hardware.presets import MODEL_8B
from tests.support.e2e_controller import (
    CHEAP,
    CONTROLLER_NS,
    NS,
    SPEC,
    condition,
    controller,
    cycles_later,
    main_resource_writes,
    metrics_available,
    reading_cluster,
    replicas,
    scale_writes,
    show,
    source_args,
    unavailable_naming,
)

Obj = dict[str, Any]


@pytest.fixture
async def cluster(backend: bool, tmp_path: Path) -> AsyncIterator[Cluster]:
    async with Cluster(
        namespace=NS, workdir=tmp_path, input_tokens=64, output_tokens=32, control_plane=backend
    ) as c:
        yield c


# ---- a NaN on one pod's page --------------------------------------------------------------


@pytest.mark.parametrize(
    'source', ['pods', pytest.param('prometheus', marks=pytest.mark.integration)]
)
async def test_nan_kv_usage_on_one_of_two_idle_pods_holds_until_it_is_repaired(
    backend: bool, tmp_path: Path, source: str
) -> None:
    async with reading_cluster(backend=backend, workdir=tmp_path, source=source) as cluster:
        # Two replicas for a trickle of load: one would do, so a scale-down is due at once.
        await cluster.add_variant(
            name=CHEAP, model_id=MODEL_8B, preset=SPEC, cost=1.0, replicas=2, min_replicas=1
        )
        cluster.set_rate(model_id=MODEL_8B, rate=0.5)
        broken = cluster.pod_name(CHEAP, 1)
        cluster.emulator(CHEAP).emulator.show_kv_usage(slot=1, value=math.nan)
        args = source_args(cluster, interval='1s')

        async with controller(cluster, *args) as process:
            await cluster.wait_for(
                lambda: unavailable_naming(cluster, CHEAP, broken),
                timeout=30,
                what=f'MetricsAvailable False naming {broken}',
            )
            await cycles_later(cluster, process, more=4)
            assert scale_writes(cluster, CHEAP) == []
            assert replicas(cluster, CHEAP) == 2
            cond = condition(cluster, CHEAP, 'MetricsAvailable')
            assert cond is not None
            assert cond['status'] == 'False', show(cond)
            assert cond['reason'] in ('MetricsMissing', 'MetricsInvalid'), show(cond)
            assert broken in cond['message'], show(cond)
            assert 'kv' in cond['message'].lower(), show(cond)  # the metric is named too
            ready = condition(cluster, CHEAP, 'OptimizationReady')
            assert ready is not None
            assert ready['status'] == 'False', show(ready)

            cluster.emulator(CHEAP).emulator.show_kv_usage(slot=1, value=None)
            await cluster.wait_for(
                lambda: replicas(cluster, CHEAP) == 1, timeout=30, what='the scale-down, repaired'
            )
            # The real API server's audit log, read from its file, may lag the answer a little.
            await cluster.wait_for(
                lambda: scale_writes(cluster, CHEAP) == [1], timeout=5, what='the one /scale write'
            )
            await cluster.wait_for(
                lambda: metrics_available(cluster, CHEAP), timeout=10, what='MetricsAvailable'
            )
            assert main_resource_writes(cluster) == []
            assert process.returncode is None


# ---- a hostile tenant ConfigMap -----------------------------------------------------------

SATURATION = 'wva-saturation-scaling-config'


def saturation_configmap(*, namespace: str, default: str) -> Obj:
    return {
        'apiVersion': 'v1',
        'kind': 'ConfigMap',
        'metadata': {
            'name': SATURATION,
            'namespace': namespace,
            'labels': {'app.kubernetes.io/name': 'workload-variant-autoscaler'},
        },
        'data': {'default': default},
    }


def alias_bomb(*, levels: int = 9, width: int = 9) -> str:
    """A few hundred bytes of YAML that expand to width**levels nodes."""
    lines = [f'a0: &a0 [{", ".join(["x"] * width)}]']
    for n in range(1, levels):
        lines.append(f'a{n}: &a{n} [{", ".join([f"*a{n - 1}"] * width)}]')
    return '\n'.join(lines)


HOSTILE = (
    ('nested', '[' * 20_000),
    ('date', 'kvCacheThreshold: 2001-13-45'),
    ('aliases', alias_bomb()),
    ('int tag', 'queueLengthThreshold: !!int "7x"'),
)


def configmap_warnings(cluster: Cluster, *, namespace: str) -> list[Obj]:
    """InvalidConfiguration events about the saturation ConfigMap of `namespace`."""
    return [
        e
        for e in cluster.list(api_version='events.k8s.io/v1', kind='Event', namespace=namespace)
        if e.get('reason') == 'InvalidConfiguration'
        and e.get('regarding', {}).get('kind') == 'ConfigMap'
        and e.get('regarding', {}).get('name') == SATURATION
    ]


async def warned(cluster: Cluster, *, count: int, what: str) -> None:
    """Wait for the `count`th InvalidConfiguration event on the tenant's ConfigMap."""
    await cluster.wait_for(
        lambda: len(configmap_warnings(cluster, namespace=NS)) >= count,
        timeout=10,
        what=f'an InvalidConfiguration event for the {what} entry',
    )


async def test_a_hostile_tenant_configmap_is_refused_and_later_global_edits_apply(
    cluster: Cluster,
) -> None:
    await cluster.add_variant(
        name=CHEAP, model_id=MODEL_8B, preset=SPEC, cost=1.0, replicas=1, min_replicas=1
    )
    cluster.seed(saturation_configmap(namespace=CONTROLLER_NS, default='kvCacheThreshold: 0.8'))
    # There from the start: the first cycle already reads it.
    cluster.seed(saturation_configmap(namespace=NS, default=HOSTILE[0][1]))
    async with controller(cluster, '--metrics-source', 'pods', '--interval', '1s') as process:
        for count, (what, text) in enumerate(HOSTILE, start=1):
            if count > 1:
                cluster.replace(saturation_configmap(namespace=NS, default=text))
            await warned(cluster, count=count, what=what)
        await cycles_later(cluster, process, more=3)  # the loop goes on
        warnings = configmap_warnings(cluster, namespace=NS)
        assert len(warnings) == len(HOSTILE), show(warnings)
        for event in warnings:
            assert event['type'] == 'Warning', show(event)
            assert event['regarding']['namespace'] == NS, show(event)
            assert len(event['note']) <= 1024, show(event)
        assert configmap_warnings(cluster, namespace=CONTROLLER_NS) == []
        assert scale_writes(cluster, CHEAP) == []  # idle at 1 replica: nothing to do yet

        # Every replica saturated at any queue length: a scale-up at once, if the edit applies.
        cluster.replace(
            saturation_configmap(namespace=CONTROLLER_NS, default='queueLengthThreshold: 0'),
        )
        await cluster.wait_for(
            lambda: replicas(cluster, CHEAP) >= 2, timeout=15, what='the global edit applied'
        )
        assert scale_writes(cluster, CHEAP)[0] == 2
        assert 'configuration reloaded' in process.log()
        assert main_resource_writes(cluster) == []
        assert process.returncode is None


# ---- a Prometheus that never finishes an answer --------------------------------------------

CYCLE_BUCKET = re.compile(
    r'^wva_optimization_duration_seconds_bucket\{le="(?P<le>[^"]+)",status="(?P<status>\w+)"\} '
    r'(?P<n>\S+)$',
    re.M,
)


def cycles_within(process: ControllerProcess, *, seconds: str) -> tuple[int, int]:
    """(cycles that took at most `seconds`, all cycles), from the duration histogram."""
    within = total = 0
    for found in CYCLE_BUCKET.finditer(process.metrics_text()):
        if found['le'] == seconds:
            within += int(float(found['n']))
        if found['le'] == '+Inf':
            total += int(float(found['n']))
    return within, total


@pytest.mark.parametrize(
    ('mode', 'why'),
    [('drip', 'the read deadline of 0.5s'), ('endless', 'over 1048576 bytes')],
    ids=['drip', 'endless'],
)
async def test_a_prometheus_that_never_finishes_an_answer_fails_each_cycle_in_time(
    cluster: Cluster, mode: Mode, why: str
) -> None:
    await cluster.add_variant(
        name=CHEAP, model_id=MODEL_8B, preset=SPEC, cost=1.0, replicas=2, min_replicas=1
    )
    async with SlowServer(mode=mode) as slow:
        args = ['--metrics-source', 'prometheus', '--prometheus-url', slow.url]
        args += ['--interval', '1s', '--prometheus-read-deadline', '500ms']
        args += ['--prometheus-timeout', '10s', '--prometheus-max-answer-bytes', '1Mi']
        async with controller(cluster, *args) as process:

            def prometheus_error() -> bool:
                cond = condition(cluster, CHEAP, 'MetricsAvailable')
                return cond is not None and cond.get('reason') == 'PrometheusError'

            started = time.monotonic()
            await cluster.wait_for(prometheus_error, timeout=20, what='PrometheusError')
            await cycles_later(cluster, process, more=4)
            elapsed = time.monotonic() - started
            within, total = cycles_within(process, seconds='1.0')
            assert total >= 4, (within, total)
            assert within == total, (within, total)  # no cycle waited out the server
            # A cycle per second or so, not one per answer that never comes.
            assert process.cycles() >= elapsed / 2, (process.cycles(), elapsed)
            assert slow.requests >= total, (slow.requests, total)
            cond = condition(cluster, CHEAP, 'MetricsAvailable')
            assert cond is not None
            assert (cond['status'], cond['reason']) == ('False', 'PrometheusError'), show(cond)
            assert why in cond['message'], show(cond)
            assert scale_writes(cluster, CHEAP) == []
            assert replicas(cluster, CHEAP) == 2
            assert main_resource_writes(cluster) == []
            assert process.returncode is None
