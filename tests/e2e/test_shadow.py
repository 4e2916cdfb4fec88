"""`llmscaler run --shadow` as a process, on the fake API and on the real control plane (there
with the shipped RBAC): under load it decides a scale-up and writes nothing but its own Lease.

| check | expectation |
|---|---|
| load above capacity, `--shadow --leader-elect` | CHEAP's `llmscaler_shadow_desired_replicas` ≥ 2 |
|  | and the comparison logged; CHEAP still at 1; no `/scale`, status or |
|  | Event written; the only writes are to the Lease `llmscaler-shadow.llm-d.ai` |
"""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from llmscaler.devcluster.cluster import Cluster
from llmscaler.devcluster.process import ControllerProcess
from llmscaler.kube.leader import SHADOW_LEASE_NAME
from llmscaler.sim.hardware.presets import MODEL_8B
from tests.support.e2e_controller import (
    CHEAP,
    CONTROLLER_NS,
    ELECTION,
    NS,
    controller,
    cycles_later,
    replicas,
    two_variants,
)

LEASES = f'/apis/coordination.k8s.io/v1/namespaces/{CONTROLLER_NS}/leases'


def shadow_desired(process: ControllerProcess, variant: str) -> float:
    """The variant's `llmscaler_shadow_desired_replicas` on the process's /metrics (0 if none)."""
    if process.metrics_url is None:
        return 0.0
    for family in text_string_to_metric_families(process.metrics_text()):
        for sample in family.samples:
            labels = sample.labels
            if sample.name == 'llmscaler_shadow_desired_replicas' and (
                labels.get('variant_name'),
                labels.get('namespace'),
            ) == (variant, NS):
                return float(sample.value)
    return 0.0


async def test_shadow_decides_under_load_and_writes_nothing_but_its_lease(
    cluster: Cluster,
) -> None:
    await two_variants(cluster, replicas=1, min_replicas=1)
    args = ('--metrics-source', 'pods', '--interval', '1s', '--shadow', *ELECTION)
    async with controller(cluster, *args) as process:
        cluster.set_rate(model_id=MODEL_8B, rate=12.0)
        await cluster.wait_for(
            lambda: shadow_desired(process, CHEAP) >= 2, timeout=40, what='a shadow scale-up'
        )
        await cycles_later(cluster, process, more=2)
        assert replicas(cluster, CHEAP) == 1
        assert f'shadow {NS}/{CHEAP}: llmscaler 2, running 1, peer none published' in process.log()
    assert process.returncode == 0
    writes = [(r.method, r.path) for r in cluster.requests if r.method not in ('GET', 'HEAD')]
    assert writes, 'the Lease is written'
    assert {path for _, path in writes} <= {LEASES, f'{LEASES}/{SHADOW_LEASE_NAME}'}, writes
    assert replicas(cluster, CHEAP) == 1
