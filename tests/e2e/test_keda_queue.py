"""The queue-based ScaledObjects of `llmscaler manifests` drive a real HPA as documented.

On the real control plane only (kube-apiserver, kube-controller-manager and its HPA controller,
KEDA v2.21.0's operator and metrics server, built by `make binaries`; skipped without them,
failed with CI=true). The ScaledObjects are what `llmscaler manifests --from-cluster` writes
(queue actuation, the default), applied with kubectl; the cluster's real Prometheus scrapes the
emulated vLLM pods (labels `namespace` and `pod`, as Kubernetes service discovery gives them),
and KEDA asks it the rendered queries. The queue is held, not generated: requests submitted to
the first pod's engine with thousands of output tokens on a replica whose every step takes 1 s
(`SLOW`), so its 4 sequences stay running and the rest wait for the whole test; new pods get
nothing, so Σ `vllm:num_requests_waiting` stays what the test submitted.

| test | expectation (docs/manifests.md) |
|---|---|
| queue, `prod`, unpaused | 1 replica → the floor 2 at once; 17 waiting → ⌈17/5⌉ = 4; 40 |
|  | waiting → ⌈40/5⌉ = 8, held at the VA's maxReplicas 6 |
| KV, `dev` | nothing waiting, Σ KV usage ≈ 0.9 on one pod → ⌈0.9/0.8⌉ = 2 (beyond the HPA's |
|  | default 10 % tolerance, which the queue objects keep) |
| paused (the default) | KEDA reports Paused, makes no HPA, spec.replicas stays 1 under 17 |
|  | waiting; without the annotation the floor and the queue apply (4) |
| `cost` | HPA floor 1; `initialCooldownPeriod` keeps a running, idle target up while |
|  | the same object without it parks its target at once (kedacore/keda#5008) |

Only kube-controller-manager (and KEDA's operator, when it parks a `cost` target) may write
spec.replicas; every wait is a poll with a deadline, its trail printed (-s shows the figures).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from llmscaler.devcluster import binaries, keda
from llmscaler.devcluster.cluster import Cluster
from llmscaler.devcluster.fakeapi.semantics import ApiError
from llmscaler.devcluster.rest import Rest
from llmscaler.sim.hardware.presets import MODEL_8B, preset
from tests.support import prom
from tests.support.e2e_controller import replicas, scale_writes, show
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

NS = 'llm'
_BASE = preset(name='llama-3.1-8b-l4', max_num_seqs=4)
# 4 sequences at a time, 1 s per engine step, 1000 KV blocks of 16 tokens: held requests stay
# held for the whole test, and 4 prompts of 3600 tokens fill 0.9 of the KV cache.
SLOW = dataclasses.replace(
    _BASE, num_gpu_blocks=1000, perf=dataclasses.replace(_BASE.perf, weight_read=1.0)
)
RUNNING = SLOW.max_num_seqs
TOP = 6  # the VAs' maxReplicas
QUEUE_PER_REPLICA, KV_TARGET = 5.0, 0.8  # the rendered defaults
TOLERANCE = 0.1  # kube-controller-manager's default: the queue objects set no tolerance
KEDA_VERSION = 'v2.21.0'  # the version docs/deploy.md says these tests checked
Obj = dict[str, Any]


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    need_keda()
    prom.binary('prometheus-2')  # the cluster's own Prometheus, Debian's
    assert binaries.FAMILIES['keda'].version == KEDA_VERSION, 'update docs/deploy.md, then this'
    async with Cluster(namespace=NS, workdir=tmp_path, control_plane=True, prometheus=True) as c:
        yield c


class _Nobody:
    """No client waits for a held request."""

    def progress(self, *, tokens: int) -> None:
        pass

    def finish(self, *, tokens: int, reason: str) -> None:
        pass

    def reject(self, *, status: int, message: str) -> None:
        raise AssertionError(f'a held request was rejected: {status} {message}')


def hold(cluster: Cluster, variant: str, *, count: int, input_tokens: int, max_tokens: int) -> None:
    """Submit `count` requests to the variant's first pod, which works on them far longer than
    the test lasts (1 s per step)."""
    emulator = cluster.emulator(variant).emulator
    for _ in range(count):
        emulator.detach(
            emulator.submit(
                input_tokens=input_tokens, max_tokens=max_tokens, listener=_Nobody(), slot=0
            )
        )


def queue(cluster: Cluster, variant: str, *, waiting: int) -> None:
    """A queue: RUNNING short prompts run (first call only), `waiting` more wait."""
    hold(cluster, variant, count=waiting, input_tokens=64, max_tokens=3000)


def documented(*, waiting: float, kv: float, floor: int, current: int) -> int:
    """What docs/manifests.md says the HPA asks at `current` replicas: per trigger ⌈Σ / target⌉,
    or `current` while Σ / (target × current) is within the default 10 % tolerance; the larger
    proposal, within [max(floor, 1), maxReplicas] (an HPA keeps one replica)."""

    def proposal(total: float, target: float) -> int:
        if abs(total / (target * current) - 1) <= TOLERANCE:
            return current
        return math.ceil(total / target)

    wanted = max(proposal(waiting, QUEUE_PER_REPLICA), proposal(kv, KV_TARGET))
    return min(TOP, max(floor, 1, wanted))


@dataclasses.dataclass
class Watch:
    """One ScaledObject's target, its triggers' values in Prometheus, its HPA: polled."""

    cluster: Cluster
    rest: Rest
    scaled_object: Obj
    prometheus: str
    trail: Trail = dataclasses.field(default_factory=Trail)

    @property
    def name(self) -> str:
        name = self.scaled_object['metadata']['name']
        assert isinstance(name, str)
        return name

    @property
    def path(self) -> str:
        return hpa_path(namespace=NS, scaled_object=self.name)

    def query(self, trigger: str) -> str:
        for spec in self.scaled_object['spec']['triggers']:
            if spec['name'] == trigger:
                text = spec['metadata']['query']
                assert isinstance(text, str)
                return text
        raise KeyError(trigger)

    def sample(self) -> dict[str, object]:
        status = hpa(self.rest, path=self.path).get('status', {})
        return {
            'waiting': instant(self.prometheus, self.query('queue')),
            'kv': instant(self.prometheus, self.query('kv-cache')),
            'HPA reads/replica': hpa_reads(self.rest, path=self.path),
            'HPA current/desired': (
                status.get('currentReplicas'),
                status.get('desiredReplicas'),
            ),
            'spec.replicas': replicas(self.cluster, self.name),
        }

    def status(self) -> str:
        return f'HPA status: {show(hpa(self.rest, path=self.path).get("status"))}'

    async def replicas(self, count: int, *, timeout: float, what: str) -> float:
        """Wait until spec.replicas is `count`; the seconds it took."""
        took = await until(
            self.cluster,
            trail=self.trail,
            sample=self.sample,
            done=lambda values: values['spec.replicas'] == count,
            timeout=timeout,
            what=what,
            explain=self.status,
        )
        print(f'{self.name}: {what}: {count} replicas after {took:.1f} s')
        return took

    async def hpa_reads_total(self, waiting: float, *, replicas: int) -> None:
        """Wait until the HPA, at `replicas`, reads `waiting` in all (its figure is per replica)."""

        def done(values: Mapping[str, object]) -> bool:
            reads, hpa_status = values['HPA reads/replica'], values['HPA current/desired']
            assert isinstance(reads, tuple)
            assert isinstance(hpa_status, tuple)
            current = hpa_status[0]
            return (
                current == replicas
                and bool(reads)
                and reads[0] is not None
                and abs(reads[0] * replicas - waiting) < 0.05
            )

        await until(
            self.cluster,
            trail=self.trail,
            sample=self.sample,
            done=done,
            timeout=30,
            what=f'the HPA at {replicas} replicas reading {waiting} waiting',
            explain=self.status,
        )

    async def prometheus_sees(self, *, waiting: float, timeout: float = 30) -> None:
        await until(
            self.cluster,
            trail=self.trail,
            sample=self.sample,
            done=lambda values: values['waiting'] == waiting,
            timeout=timeout,
            what=f'Prometheus seeing {waiting} waiting',
            explain=self.status,
        )


async def add(cluster: Cluster, name: str) -> None:
    await cluster.add_variant(
        name=name, model_id=MODEL_8B, preset=SLOW, cost=1.0, replicas=1, max_replicas=TOP
    )


async def setup(cluster: Cluster, *args: str, workdir: Path) -> tuple[str, list[Obj]]:
    """The queue-based ScaledObjects for the cluster's VAs, against its Prometheus."""
    assert cluster.prometheus_url is not None
    return await manifests(cluster, '--prometheus', cluster.prometheus_url, *args, workdir=workdir)


def scaled_by_the_hpa_alone(cluster: Cluster, name: str) -> None:
    """spec.replicas was written through `/scale` by kube-controller-manager, and no client
    outside the cluster's own components (the test, kubectl, llmscaler) wrote `/scale`."""
    managers = {
        (f['manager'], f.get('subresource', ''))
        for f in cluster.deployment(name)['metadata']['managedFields']
    }
    assert ('kube-controller-manager', 'scale') in managers, managers
    assert scale_writes(cluster, name) == []


async def test_the_queue_sets_the_replicas_within_the_prod_floor_and_the_maximum(
    cluster: Cluster, tmp_path: Path
) -> None:
    began = time.monotonic()
    await add(cluster, 'llama')
    rendered, (scaled,) = await setup(cluster, '--unpaused', workdir=tmp_path)
    assert (scaled['spec']['minReplicaCount'], scaled['spec']['maxReplicaCount']) == (2, TOP)
    rest = admin(cluster)
    async with keda.Keda(plane=cluster.control_plane, workdir=tmp_path / 'keda'):
        assert cluster.prometheus_url is not None
        watch = Watch(cluster, rest, scaled, cluster.prometheus_url)
        await kubectl(cluster, 'apply', '-f', '-', workdir=tmp_path, stdin=rendered)
        # The floor: 1 → 2 with nothing waiting.
        await watch.replicas(2, timeout=90, what='the prod floor, nothing waiting')
        found = hpa(rest, path=watch.path)['spec']
        assert (found['minReplicas'], found['maxReplicas']) == (2, TOP), show(found)

        queue(cluster, 'llama', waiting=RUNNING + 17)
        await watch.prometheus_sees(waiting=17)
        assert documented(waiting=17, kv=0.1, floor=2, current=2) == 4
        await watch.replicas(4, timeout=90, what='17 waiting')
        await watch.hpa_reads_total(17, replicas=4)

        queue(cluster, 'llama', waiting=23)
        await watch.prometheus_sees(waiting=40)
        assert documented(waiting=40, kv=0.1, floor=2, current=4) == TOP
        await watch.replicas(TOP, timeout=90, what='40 waiting (8 asked, max 6)')
        scaled_by_the_hpa_alone(cluster, 'llama')
        await watch.hpa_reads_total(40, replicas=TOP)
        # No overshoot: the HPA's decision is the maximum.
        assert hpa(rest, path=watch.path)['status']['desiredReplicas'] == TOP
    rest.close()
    print(f'\n{watch.trail}\ntest took {time.monotonic() - began:.1f} s')


async def test_kv_cache_usage_alone_raises_the_replicas_when_nothing_waits(
    cluster: Cluster, tmp_path: Path
) -> None:
    began = time.monotonic()
    await add(cluster, 'llama')
    rendered, (scaled,) = await setup(cluster, '--unpaused', '--profile', 'dev', workdir=tmp_path)
    assert scaled['spec']['minReplicaCount'] == 1
    rest = admin(cluster)
    async with keda.Keda(plane=cluster.control_plane, workdir=tmp_path / 'keda'):
        assert cluster.prometheus_url is not None
        watch = Watch(cluster, rest, scaled, cluster.prometheus_url)
        await kubectl(cluster, 'apply', '-f', '-', workdir=tmp_path, stdin=rendered)
        await until(
            cluster,
            trail=watch.trail,
            sample=watch.sample,
            done=lambda v: v['HPA reads/replica'] != (),
            timeout=90,
            what="KEDA's HPA reading both triggers",
            explain=watch.status,
        )
        assert replicas(cluster, 'llama') == 1, str(watch.trail)
        # 4 prompts of 3600 tokens: all 4 run (max_num_seqs), nothing waits, 904 of 1000 blocks:
        # above the 10 % tolerance (0.877 was within it, 0.877 / 0.8 = 1.096, and held 1).
        hold(cluster, 'llama', count=RUNNING, input_tokens=3600, max_tokens=400)
        await until(
            cluster,
            trail=watch.trail,
            sample=watch.sample,
            done=kv_alone_above_tolerance,
            timeout=60,
            what='Prometheus seeing KV usage above 0.8, nothing waiting',
            explain=watch.status,
        )
        await watch.replicas(2, timeout=90, what='KV usage above its target, queue empty')
        # What the HPA read: no queue; KV per replica, over 1 replica then 2, above 0.8 / 2.
        queue_read, kv_read = hpa_reads(rest, path=watch.path)
        assert queue_read == 0, watch.trail
        assert kv_read is not None, watch.trail
        assert kv_read > KV_TARGET / 2, watch.trail
        kv = instant(cluster.prometheus_url, watch.query('kv-cache'))
        assert kv is not None
        assert documented(waiting=0, kv=kv, floor=1, current=1) == 2
        scaled_by_the_hpa_alone(cluster, 'llama')
    rest.close()
    print(f'\n{watch.trail}\ntest took {time.monotonic() - began:.1f} s')


def kv_alone_above_tolerance(values: Mapping[str, object]) -> bool:
    """Nothing waits, and Σ KV usage is beyond the tolerance above its target at 1 replica."""
    kv = values['kv']
    return values['waiting'] == 0 and isinstance(kv, float) and kv > KV_TARGET * (1 + TOLERANCE)


def scaled_object(rest: Rest, name: str) -> Obj:
    try:
        return rest.raw(
            method='GET', path=f'/apis/keda.sh/v1alpha1/namespaces/{NS}/scaledobjects/{name}'
        )
    except ApiError:
        return {}


def condition(obj: Obj, kind: str) -> str | None:
    for cond in obj.get('status', {}).get('conditions') or []:
        if cond.get('type') == kind:
            status = cond.get('status')
            return status if isinstance(status, str) else None
    return None


async def test_a_paused_scaled_object_changes_nothing_until_unpaused(
    cluster: Cluster, tmp_path: Path
) -> None:
    began = time.monotonic()
    await add(cluster, 'llama')
    rendered, (scaled,) = await setup(cluster, workdir=tmp_path)  # the defaults: paused, prod
    assert scaled['metadata']['annotations'] == {'autoscaling.keda.sh/paused': 'true'}
    rest = admin(cluster)
    async with keda.Keda(plane=cluster.control_plane, workdir=tmp_path / 'keda') as installed:
        assert cluster.prometheus_url is not None
        watch = Watch(cluster, rest, scaled, cluster.prometheus_url)
        queue(cluster, 'llama', waiting=RUNNING + 17)
        await watch.prometheus_sees(waiting=17)
        await kubectl(cluster, 'apply', '-f', '-', workdir=tmp_path, stdin=rendered)
        await cluster.wait_for(
            lambda: condition(scaled_object(rest, 'llama'), 'Paused') == 'True',
            timeout=60,
            what='KEDA reporting the ScaledObject paused\n'
            + installed.log('keda-operator')[-2000:],
        )
        # A live object makes its HPA within a second or two, which then acts on its next sync
        # (5 s here): 30 s of nothing is six syncs and a KEDA polling interval.
        with pytest.raises(AssertionError, match='timed out'):
            await until(
                cluster,
                trail=watch.trail,
                sample=watch.sample,
                done=lambda v: v['spec.replicas'] != 1 or v['HPA current/desired'] != (None, None),
                timeout=30,
                what='a paused ScaledObject acting',
            )
        assert hpa(rest, path=watch.path) == {}
        assert replicas(cluster, 'llama') == 1
        await kubectl(
            cluster,
            'annotate',
            'scaledobject',
            'llama',
            'autoscaling.keda.sh/paused-',
            workdir=tmp_path,
        )
        await watch.replicas(4, timeout=90, what='unpaused, 17 waiting')
        scaled_by_the_hpa_alone(cluster, 'llama')
    rest.close()
    print(f'\n{watch.trail}\ntest took {time.monotonic() - began:.1f} s')


async def test_the_cost_profile_keeps_a_running_idle_target_for_the_initial_cooldown(
    cluster: Cluster, tmp_path: Path
) -> None:
    began = time.monotonic()
    await add(cluster, 'kept')
    await add(cluster, 'control')
    _, objects = await setup(cluster, '--unpaused', '--profile', 'cost', workdir=tmp_path)
    by_name = {o['metadata']['name']: o for o in objects}
    assert by_name['kept']['spec']['minReplicaCount'] == 0
    assert by_name['kept']['spec']['initialCooldownPeriod'] == 300
    # The control: the same object without initialCooldownPeriod, as KEDA's own default (0).
    del by_name['control']['spec']['initialCooldownPeriod']
    rest = admin(cluster)
    async with keda.Keda(plane=cluster.control_plane, workdir=tmp_path / 'keda'):
        assert cluster.prometheus_url is not None
        kept = Watch(cluster, rest, by_name['kept'], cluster.prometheus_url)
        control = Watch(cluster, rest, by_name['control'], cluster.prometheus_url)
        await kept.prometheus_sees(waiting=0)
        await control.prometheus_sees(waiting=0)
        for obj in objects:
            await kubectl(cluster, 'apply', '-f', '-', workdir=tmp_path, stdin=show(obj))
        took = await control.replicas(0, timeout=90, what='no initialCooldownPeriod: parked')
        # KEDA has found `kept` inactive too, and its HPA has synced, yet it keeps its replica.
        await cluster.wait_for(
            lambda: condition(scaled_object(rest, 'kept'), 'Active') == 'False',
            timeout=60,
            what='KEDA finding kept inactive',
        )
        await until(
            cluster,
            trail=kept.trail,
            sample=kept.sample,
            done=lambda v: v['HPA current/desired'] == (1, 1),
            timeout=30,
            what="kept's HPA synced at 1",
            explain=kept.status,
        )
        assert time.monotonic() - began < 300  # within kept's initialCooldownPeriod
        assert replicas(cluster, 'kept') == 1, str(kept.trail)
        found = hpa(rest, path=kept.path)
        assert found['spec']['minReplicas'] == 1, show(found)
        # Once in use, the cost object scales on the queue as the others do.
        queue(cluster, 'kept', waiting=RUNNING + 12)
        await kept.prometheus_sees(waiting=12)
        assert documented(waiting=12, kv=0.1, floor=0, current=1) == 3
        await kept.replicas(3, timeout=90, what='12 waiting')
        print(f'control parked after {took:.1f} s')
    rest.close()
    print(f'\nkept:\n{kept.trail}\ncontrol:\n{control.trail}')
    print(f'test took {time.monotonic() - began:.1f} s')
