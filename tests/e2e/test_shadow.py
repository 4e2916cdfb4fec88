"""`llmscaler run --shadow` as a process, on the fake API and on the real control plane (there
with the shipped RBAC): under load it decides a scale-up and writes nothing but its own Lease;
beside another autoscaler that publishes `wva_desired_replicas` (a second llmscaler with
`--actuation metrics`, scraped by a real Prometheus 3 as a pod of `llmscaler-system`, so the
gauge's own namespace is `exported_namespace`), it reads that decision each cycle and, both
deciding on the same load, agrees with it.

| check | expectation |
|---|---|
| load above capacity, `--shadow --leader-elect` | CHEAP's `llmscaler_shadow_desired_replicas` ≥ 2 |
|  | and the comparison logged; CHEAP still at 1; no `/scale`, status or |
|  | Event written; the only writes are to the Lease `llmscaler-shadow.llm-d.ai` |
| beside a peer, load above capacity | the peer's count read (`..._peer_desired_replicas` ≥ 2), |
|  | and the latest comparison with it `equal`; CHEAP never scaled |
"""

from __future__ import annotations

from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from llmscaler.devcluster.cluster import Cluster
from llmscaler.devcluster.process import ControllerProcess
from llmscaler.kube.leader import SHADOW_LEASE_NAME
from llmscaler.sim.hardware.presets import MODEL_8B
from tests.support import prom
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


def sampled(process: ControllerProcess, name: str, **labels: str) -> float:
    """The sample `name` of CHEAP with these labels on the process's /metrics (0 if none)."""
    if process.metrics_url is None:
        return 0.0
    wanted = {'variant_name': CHEAP, 'namespace': NS, **labels}
    for family in text_string_to_metric_families(process.metrics_text()):
        for sample in family.samples:
            if sample.name == name and wanted.items() <= sample.labels.items():
                return float(sample.value)
    return 0.0


def shadow_desired(process: ControllerProcess) -> float:
    return sampled(process, 'llmscaler_shadow_desired_replicas')


async def test_shadow_decides_under_load_and_writes_nothing_but_its_lease(
    cluster: Cluster,
) -> None:
    await two_variants(cluster, replicas=1, min_replicas=1)
    args = ('--metrics-source', 'pods', '--interval', '1s', '--shadow', *ELECTION)
    async with controller(cluster, *args) as process:
        cluster.set_rate(model_id=MODEL_8B, rate=12.0)
        await cluster.wait_for(
            lambda: shadow_desired(process) >= 2, timeout=40, what='a shadow scale-up'
        )
        await cycles_later(cluster, process, more=2)
        assert replicas(cluster, CHEAP) == 1
        assert f'shadow {NS}/{CHEAP}: llmscaler 2, running 1, peer none published' in process.log()
    assert process.returncode == 0
    writes = [(r.method, r.path) for r in cluster.requests if r.method not in ('GET', 'HEAD')]
    assert writes, 'the Lease is written'
    assert {path for _, path in writes} <= {LEASES, f'{LEASES}/{SHADOW_LEASE_NAME}'}, writes
    assert replicas(cluster, CHEAP) == 1


async def test_shadow_reads_a_peers_decision_and_agrees_with_it(
    cluster: Cluster, tmp_path: Path
) -> None:
    await two_variants(cluster, replicas=1, min_replicas=1)
    every = ('--metrics-source', 'pods', '--interval', '1s')
    async with controller(cluster, *every, '--actuation', 'metrics', name='peer') as peer:
        await cluster.wait_for(
            lambda: peer.metrics_url is not None, timeout=30, what="the peer's /metrics"
        )
        assert peer.metrics_url is not None
        target = prom.Target(
            address=peer.metrics_url.removeprefix('http://').removesuffix('/metrics'),
            labels=(('namespace', CONTROLLER_NS), ('pod', 'peer-0')),
            job='peer',
        )
        (tmp_path / 'prometheus').mkdir()
        async with (
            prom.running(
                targets=[target], workdir=tmp_path / 'prometheus', server='prometheus-3'
            ) as url,
            controller(cluster, *every, '--shadow', '--prometheus-url', url) as shadow,
        ):
            await cluster.wait_for(
                lambda: sampled(shadow, 'llmscaler_shadow_comparisons_total', against='peer') > 0,
                timeout=40,
                what="a first comparison with the peer's count",
            )
            cluster.set_rate(model_id=MODEL_8B, rate=12.0)

            def agreed_up() -> bool:
                theirs = sampled(shadow, 'llmscaler_shadow_peer_desired_replicas')
                return theirs >= 2 and shadow_desired(shadow) == theirs

            await cluster.wait_for(agreed_up, timeout=60, what='both deciding a scale-up')
            before = sampled(
                shadow, 'llmscaler_shadow_comparisons_total', against='peer', result='equal'
            )
            await cycles_later(cluster, shadow, more=2)
            after = sampled(
                shadow, 'llmscaler_shadow_comparisons_total', against='peer', result='equal'
            )
            assert after > before, (before, after)
            assert f'shadow {NS}/{CHEAP}: llmscaler ' in shadow.log()
    # The peer publishes (`--actuation metrics`) and the shadow writes nothing: no /scale at all.
    assert replicas(cluster, CHEAP) == 1
