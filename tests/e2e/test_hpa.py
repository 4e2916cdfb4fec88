"""A real HPA controller scales a real Deployment after llmscaler's `wva_desired_replicas`.

On the real control plane only (its binaries, KEDA's and Prometheus 3's built by `make
binaries`; skipped without them, failed with CI=true): the controller runs with `--actuation
metrics` and scrapes the emulated pods, Prometheus 3.16 scrapes the controller's /metrics as a
pod of `llmscaler-system` would be scraped, KEDA's operator and metrics server run as processes
behind the APIService `v1beta1.external.metrics.k8s.io` (`devcluster.keda`), and the
ScaledObjects are what `llmscaler manifests --from-cluster --actuation metrics --via keda`
writes for the cluster's VAs. Nothing but kube-controller-manager's HPA controller may change
the Deployment's replicas.

| step | expectation |
|---|---|
| the ScaledObjects applied | KEDA makes HPA `keda-hpa-<VA>` on the external metric, with the |
|  | rendered behaviour (windows 0, tolerance 0); it reads 1 |
| load on the model | the gauge goes up; spec.replicas follows it, written through `/scale` by |
|  | kube-controller-manager; no other client writes `/scale` |
| no load | the gauge comes back to 1, and spec.replicas with it |
| leaving | no KEDA process is left |
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path

import pytest

from llmscaler.devcluster import keda
from llmscaler.devcluster.cluster import Cluster
from llmscaler.sim.hardware.presets import MODEL_8B
from tests.support import prom
from tests.support.e2e_controller import (
    CHEAP,
    CONTROLLER_NS,
    DEAR,
    NS,
    controller,
    replicas,
    scale_writes,
    show,
    two_variants,
)
from tests.support.keda_cluster import (
    Trail,
    admin,
    hpa,
    hpa_path,
    hpa_reads,
    instant,
    kubectl,
    manifests,
    need_keda,
    until,
)

HPA = hpa_path(namespace=NS, scaled_object=CHEAP)
RATE = 24.0  # requests/s: more than one small replica serves
DESIRED = f'max(wva_desired_replicas{{exported_namespace="{NS}",variant_name="{CHEAP}"}})'


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    need_keda()
    async with Cluster(
        namespace=NS, workdir=tmp_path, input_tokens=64, output_tokens=32, control_plane=True
    ) as c:
        yield c


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def test_a_real_hpa_follows_wva_desired_replicas_through_keda(
    cluster: Cluster, tmp_path: Path
) -> None:
    rest = admin(cluster)
    await two_variants(cluster, replicas=1, min_replicas=1)
    args = ('--metrics-source', 'pods', '--interval', '1s', '--actuation', 'metrics')
    async with controller(cluster, *args) as process:
        await cluster.wait_for(
            lambda: process.metrics_url is not None, timeout=30, what='the controller /metrics'
        )
        assert process.metrics_url is not None
        address = process.metrics_url.removeprefix('http://').removesuffix('/metrics')
        # Labelled as Kubernetes service discovery labels the controller's pod, so the gauge's
        # own namespace label becomes exported_namespace, as the ScaledObject expects.
        target = prom.Target(
            address=address,
            labels=(('namespace', CONTROLLER_NS), ('pod', 'llmscaler-controller-0')),
            job='llmscaler',
        )
        (tmp_path / 'prometheus').mkdir()
        async with (
            prom.running(
                targets=[target], workdir=tmp_path / 'prometheus', server='prometheus-3'
            ) as prometheus,
            keda.Keda(plane=cluster.control_plane, workdir=tmp_path / 'keda') as installed,
        ):
            args = ('--actuation', 'metrics', '--via', 'keda', '--prometheus', prometheus)
            rendered, _ = await manifests(cluster, *args, '--unpaused', workdir=tmp_path)
            await kubectl(cluster, 'apply', '-f', '-', workdir=tmp_path, stdin=rendered)
            await cluster.wait_for(
                lambda: hpa_reads(rest, path=HPA) == (1.0,),
                timeout=90,
                what=f"KEDA's HPA reading the gauge at 1\n{show(hpa(rest, path=HPA))}\n"
                f'{installed.log("keda-operator")[-3000:]}',
            )
            assert replicas(cluster, CHEAP) == 1
            # The rendered behaviour reaches the HPA, tolerance 0 included (KEDA's CRD carries
            # it, and the control plane honours it as Kubernetes 1.35 does).
            behavior = hpa(rest, path=HPA)['spec']['behavior']
            for rules in (behavior['scaleUp'], behavior['scaleDown']):
                assert rules['stabilizationWindowSeconds'] == 0, show(behavior)
                assert rules['tolerance'] == '0', show(behavior)

            trail = Trail()

            def sample() -> dict[str, object]:
                # The other variant's replicas explain the gauge's moves (the model's load is
                # shared).
                return {
                    'gauge': instant(prometheus, DESIRED),
                    'spec.replicas': replicas(cluster, CHEAP),
                    DEAR: replicas(cluster, DEAR),
                }

            def following(
                wanted: Callable[[float], bool],
            ) -> Callable[[Mapping[str, object]], bool]:
                def done(values: Mapping[str, object]) -> bool:
                    value = values['gauge']
                    return (
                        isinstance(value, float)
                        and wanted(value)
                        and values['spec.replicas'] == value
                    )

                return done

            def status() -> str:
                return f'HPA status: {show(hpa(rest, path=HPA).get("status"))}'

            cluster.set_rate(model_id=MODEL_8B, rate=RATE)
            await until(
                cluster,
                trail=trail,
                sample=sample,
                done=following(lambda value: value >= 2),
                timeout=90,
                what='the HPA following up',
                explain=status,
            )
            # What the HPA read is the gauge (per replica), and what it wrote, through /scale
            # as kube-controller-manager, is what it decided; no other client wrote /scale.
            found = hpa(rest, path=HPA)['status']
            assert found['desiredReplicas'] == replicas(cluster, CHEAP), show(found)
            managers = {
                (f['manager'], f.get('subresource', ''))
                for f in cluster.deployment(CHEAP)['metadata']['managedFields']
            }
            assert ('kube-controller-manager', 'scale') in managers, managers
            assert scale_writes(cluster, CHEAP) == []

            cluster.set_rate(model_id=MODEL_8B, rate=0.0)
            await until(
                cluster,
                trail=trail,
                sample=sample,
                done=following(lambda value: value == 1),
                timeout=180,
                what='the HPA following down',
                explain=status,
            )
            assert scale_writes(cluster, CHEAP) == []
            pids = list(installed.pids.values())
            print(f'\n{trail}')
    rest.close()
    assert pids
    assert not any(alive(pid) for pid in pids)
