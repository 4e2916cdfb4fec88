"""`llmscaler run` serving LLMAutoScalers (Kaito's proposal), as a child process, on both backends.

Each test seeds a Deployment, its pods and an LLMAutoScaler; every pod's metrics page is a small
HTTP server on its own loopback address (127.0.0.2, 127.0.0.3, ...), all on one port, as pods of
one workload are: the scraper reads `http://{pod IP}:{port}/metrics`. The controller runs with
`--interval 1s`, so the LLMAutoScaler loop runs every second (the proposal's 15 s is the default).

On the real control plane the ReplicaSet controller makes the Deployment's pods and the test
plays their kubelet: it reports each one Running with its IP (or leaves it Pending). A pod made
later (a scale-up) stays Pending: nothing runs it; one deleted (a scale-down) stays Terminating.
Kaito's InferenceSet has no CRD here, so its test runs on the fake alone.

| check | expectation |
|---|---|
| a metric above High for the window | `/scale` 2 → 3, SuccessfulRescale, status and conditions;
  on the real server, `kubectl get llmas -o wide` shows them in the CRD's columns |
| a bad LLMAutoScaler beside it | AbleToScale False InvalidSpec and a Warning; the good one scales |
| cooldown | the next step only after the cooldown counted from lastScaleTime |
| cron in a zone whose date is not UTC's | the zone's policy fires; the same expression in UTC not |
| a pending pod (no IP) and idle pods | no scale-down, ScalingActive False MetricsMissing; the pod
  reports, the scale-down follows |
| Kaito's InferenceSet as the target | its `/scale` 1 → 2, pods found by its `/scale` selector; the
  InferenceSet itself never read or listed |
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from llmscaler.devcluster import objects
from llmscaler.devcluster.cluster import Cluster
from tests.support.cluster_kubectl import kubectl
from tests.support.cron_minutes import coming_minutes
from tests.support.e2e_controller import controller, events

NS = 'kaito'
DEPLOYMENT = 'phi'
SCALE_PATH = f'/apis/apps/v1/namespaces/{NS}/deployments/{DEPLOYMENT}/scale'
Obj = dict[str, Any]


class Pages:
    """One metrics page per loopback address, all on one port; `values[ip]` is what it shows."""

    def __init__(self) -> None:
        self.values: dict[str, float] = {}
        self.port = 0
        self._runners: list[web.AppRunner] = []

    async def serve(self, ip: str, value: float) -> None:
        self.values[ip] = value

        async def page(_: web.Request) -> web.Response:
            text = (
                '# TYPE vllm:num_requests_waiting gauge\n'
                f'vllm:num_requests_waiting{{model_name="phi"}} {self.values[ip]}\n'
            )
            return web.Response(text=text, content_type='text/plain')

        app = web.Application()
        app.router.add_get('/metrics', page)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        self._runners.append(runner)
        await web.TCPSite(runner, ip, self.port).start()
        self.port = int(runner.addresses[0][1])

    async def close(self) -> None:
        for runner in self._runners:
            await runner.cleanup()


@pytest.fixture
async def cluster(backend: bool, tmp_path: Path) -> AsyncIterator[Cluster]:
    async with Cluster(namespace=NS, workdir=tmp_path, control_plane=backend) as c:
        yield c


@pytest.fixture
async def pages() -> AsyncIterator[Pages]:
    served = Pages()
    try:
        yield served
    finally:
        await served.close()


PODS_EVERY_SECOND = ('--metrics-source', 'pods', '--interval', '1s')


POD_SPEC = {'containers': [{'name': 'vllm', 'image': 'vllm/vllm-openai:e2e'}]}


def deployment(*, replicas: int) -> Obj:
    return {
        'apiVersion': 'apps/v1',
        'kind': 'Deployment',
        'metadata': {'name': DEPLOYMENT, 'namespace': NS},
        'spec': {
            'replicas': replicas,
            'selector': {'matchLabels': {'app': DEPLOYMENT}},
            'template': {'metadata': {'labels': {'app': DEPLOYMENT}}, 'spec': POD_SPEC},
        },
    }


def pod(name: str, ip: str | None) -> Obj:
    return {
        'apiVersion': 'v1',
        'kind': 'Pod',
        'metadata': {'name': name, 'namespace': NS, 'labels': {'app': DEPLOYMENT}},
        'spec': {**POD_SPEC, 'nodeName': objects.NODE_NAME},
        'status': running(ip),
    }


def running(ip: str | None) -> Obj:
    """Running with `ip`, or Pending (None): a pod's status as its kubelet reports it."""
    return {'phase': 'Running', 'podIP': ip} if ip else {'phase': 'Pending'}


async def seed_workload(cluster: Cluster, *, ips: list[str | None]) -> list[str]:
    """The Deployment `phi` with one pod per entry of `ips`, running with that IP (None:
    pending); the pods' names, in the order of `ips`."""
    if not cluster.real:
        cluster.seed({**deployment(replicas=len(ips)), 'status': {'replicas': len(ips)}})
        names = [f'phi-{chr(ord("a") + index)}' for index in range(len(ips))]
        for name, ip in zip(names, ips, strict=True):
            cluster.seed(pod(name, ip))
        return names
    # The ReplicaSet controller makes the pods; the harness plays their kubelet.
    cluster.seed(deployment(replicas=len(ips)))
    made: list[Obj] = []

    def created() -> bool:
        made[:] = cluster.list(api_version='v1', kind='Pod', namespace=NS)
        return len(made) == len(ips)

    await cluster.wait_for(created, timeout=30, what="the ReplicaSet's pods")
    names = sorted(p['metadata']['name'] for p in made)
    for name, ip in zip(names, ips, strict=True):
        started = cluster.get(api_version='v1', kind='Pod', namespace=NS, name=name)
        cluster.report_status({**started, 'status': running(ip)})
    return names


def autoscaler(
    name: str,
    *,
    target: str = DEPLOYMENT,
    scaler: Obj,
    min_replicas: int = 1,
    kind: tuple[str, str] = ('apps/v1', 'Deployment'),
) -> Obj:
    return {
        'apiVersion': 'kaito.sh/v1alpha1',
        'kind': 'LLMAutoScaler',
        'metadata': {'name': name, 'namespace': NS},
        'spec': {
            'scaleTargetRef': {'apiVersion': kind[0], 'kind': kind[1], 'name': target},
            'minReplicas': min_replicas,
            'maxReplicas': 6,
            'scaler': scaler,
        },
    }


# A rule that never lets the scaler move that way within a test: an hour's cooldown and window.
FOREVER = {'cooldownSeconds': 3600, 'stabilizationWindowSeconds': 3600}


def realtime(port: int, *, up: Obj, down: Obj) -> Obj:
    metric = {'source': {'port': str(port)}, 'threshold': {'high': 5, 'low': 1}}
    return {'realtime': {'metrics': [metric], 'scaleUpRule': dict(up), 'scaleDownRule': dict(down)}}


def get(cluster: Cluster, name: str) -> Obj:
    return cluster.get(
        api_version='kaito.sh/v1alpha1', kind='LLMAutoScaler', namespace=NS, name=name
    )


def condition(obj: Obj, type: str) -> Obj | None:
    for found in (obj.get('status') or {}).get('conditions') or []:
        if found['type'] == type:
            return dict(found)
    return None


def scaling_active_reason(cluster: Cluster) -> str | None:
    """The reason of the LLMAutoScaler `phi`'s ScalingActive condition, if it has one."""
    reason = (condition(get(cluster, 'phi'), 'ScalingActive') or {}).get('reason')
    return reason if isinstance(reason, str) else None


def replicas(cluster: Cluster) -> int:
    value = cluster.deployment(DEPLOYMENT)['spec']['replicas']
    assert isinstance(value, int)
    return value


def scale_writes(cluster: Cluster) -> list[tuple[float, int]]:
    """(arrival time, spec.replicas) of every PATCH to the Deployment's `/scale`."""
    return [
        (r.at, r.json()['spec']['replicas'])
        for r in cluster.requests
        if r.method == 'PATCH' and r.path == SCALE_PATH
    ]


def scale_reads(cluster: Cluster) -> int:
    """GETs of the Deployment's `/scale`: one per cycle of its LLMAutoScaler."""
    return sum(1 for r in cluster.requests if r.method == 'GET' and r.path == SCALE_PATH)


async def test_scale_up_on_a_threshold_beside_a_bad_object(cluster: Cluster, pages: Pages) -> None:
    await pages.serve('127.0.0.2', 9)
    await pages.serve('127.0.0.3', 7)
    await seed_workload(cluster, ips=['127.0.0.2', '127.0.0.3'])
    # Above High (5) on average for 2 s: one step up; then the up cooldown holds it there.
    up = {'cooldownSeconds': 3600, 'stabilizationWindowSeconds': 2}
    cluster.seed(autoscaler('phi', scaler=realtime(pages.port, up=up, down=FOREVER)))
    # Valid to the CRD's schema (which cannot read a cron expression), refused by the controller.
    bad_cron = {'name': 'bad', 'schedule': '61 * * * *', 'targetReplicas': 2}
    cluster.seed(autoscaler('broken', target='other', scaler={'cron': {'policies': [bad_cron]}}))
    async with controller(cluster, *PODS_EVERY_SECOND):
        await cluster.wait_for(lambda: replicas(cluster) == 3, timeout=30, what='2 -> 3')
        await cluster.wait_for(
            lambda: (get(cluster, 'phi').get('status') or {}).get('desiredReplicas') == 3,
            timeout=10,
            what='the status',
        )
        await cluster.wait_for(
            lambda: bool(events(cluster, 'InvalidSpec', namespace=NS)),
            timeout=10,
            what='InvalidSpec',
        )
    status = get(cluster, 'phi')['status']
    assert status['currentReplicas'] == 2
    assert status['lastScaleTime'].endswith('Z')
    able = condition(get(cluster, 'phi'), 'AbleToScale')
    assert able is not None
    assert (able['status'], able['reason']) == ('True', 'SucceededRescale')
    active = condition(get(cluster, 'phi'), 'ScalingActive')
    assert active is not None
    assert (active['status'], active['reason']) == ('True', 'ValidMetricFound')
    [rescale] = events(cluster, 'SuccessfulRescale', namespace=NS)
    assert rescale['note'].startswith('New size: 3; reason: vllm:num_requests_waiting')
    assert [count for _, count in scale_writes(cluster)] == [3]
    broken = condition(get(cluster, 'broken'), 'AbleToScale')
    assert broken is not None
    assert (broken['status'], broken['reason']) == ('False', 'InvalidSpec')
    assert "schedule '61 * * * *' is not a valid cron expression" in broken['message']
    [warning] = events(cluster, 'InvalidSpec', namespace=NS)
    assert warning['type'] == 'Warning'
    if cluster.real:
        # `kubectl get llmas -o wide`: the CRD's printer columns, filled from the status.
        done = kubectl(cluster, 'get', 'llmas', 'phi', '-o', 'wide', namespace=NS)
        assert done.returncode == 0, done.stderr
        header, row = done.stdout.splitlines()
        shown = dict(zip(header.split(), row.split(), strict=True))
        assert {k: v for k, v in shown.items() if k not in ('LASTSCALE', 'AGE')} == {
            'NAME': 'phi',
            'TARGET': DEPLOYMENT,
            'MIN': '1',
            'MAX': '6',
            'CURRENT': '2',
            'DESIRED': '3',
            'ABLE': 'True',
            'KIND': 'Deployment',
            'REASON': 'SucceededRescale',
        }


async def test_the_cooldown_counts_from_the_last_scale(cluster: Cluster, pages: Pages) -> None:
    await pages.serve('127.0.0.2', 20)
    await seed_workload(cluster, ips=['127.0.0.2'])
    up = {'cooldownSeconds': 4, 'stabilizationWindowSeconds': 0}
    cluster.seed(autoscaler('phi', scaler=realtime(pages.port, up=up, down=FOREVER)))
    async with controller(cluster, *PODS_EVERY_SECOND):
        await cluster.wait_for(lambda: replicas(cluster) >= 3, timeout=40, what='1 -> 2 -> 3')
    writes = scale_writes(cluster)
    assert [count for _, count in writes][:2] == [2, 3]
    # Strictly more than the cooldown between two scalings (lastScaleTime has whole seconds,
    # so the gap may be up to a second shorter than it looks from the stored status).
    assert writes[1][0] - writes[0][0] > 3.0


async def test_cron_fires_in_its_time_zone_not_in_utc(cluster: Cluster) -> None:
    # Kiritimati is UTC+14: its date and hour are never UTC's, so the same expressions read in
    # Etc/UTC do not fire now.
    expressions = coming_minutes('Pacific/Kiritimati')
    await seed_workload(cluster, ips=[None])
    policies = [
        {
            'name': f'kiritimati-{index}',
            'schedule': expression,
            'targetReplicas': 3,
            'timeZone': 'Pacific/Kiritimati',
        }
        for index, expression in enumerate(expressions)
    ] + [
        {'name': f'utc-{index}', 'schedule': expression, 'targetReplicas': 5}
        for index, expression in enumerate(expressions)
    ]
    cluster.seed(autoscaler('phi', scaler={'cron': {'policies': policies}}))
    async with controller(cluster, *PODS_EVERY_SECOND):
        await cluster.wait_for(lambda: replicas(cluster) == 3, timeout=30, what='cron 1 -> 3')
        await cluster.wait_for(
            lambda: scaling_active_reason(cluster) == 'ScheduleOnly',
            timeout=10,
            what='the status',
        )
    assert [count for _, count in scale_writes(cluster)] == [3]
    [rescale] = events(cluster, 'SuccessfulRescale', namespace=NS)
    assert re.search(r'cron kiritimati-\d: 3', rescale['note'])


async def test_a_missing_pod_forbids_the_scale_down(cluster: Cluster, pages: Pages) -> None:
    await pages.serve('127.0.0.2', 0)
    await pages.serve('127.0.0.3', 0)
    # The third pod is pending: no IP, no page.
    *_, pending = await seed_workload(cluster, ips=['127.0.0.2', '127.0.0.3', None])
    # Down at once, no window, no cooldown: only the missing pod can hold it. The proposal's rule
    # counts it at High (5) down, (0 + 0 + 5) / 3 < Low (4), which alone would scale down;
    # the safety rule (missing metrics never scale down) holds it.
    down = {'cooldownSeconds': 0, 'stabilizationWindowSeconds': 0}
    scaler = realtime(pages.port, up=FOREVER, down=down)
    scaler['realtime']['metrics'][0]['threshold'] = {'high': 5, 'low': 4}
    cluster.seed(autoscaler('phi', scaler=scaler))
    async with controller(cluster, *PODS_EVERY_SECOND):
        await cluster.wait_for(
            lambda: scaling_active_reason(cluster) == 'MetricsMissing',
            timeout=20,
            what='MetricsMissing',
        )
        before = scale_reads(cluster)
        await cluster.wait_for(
            lambda: scale_reads(cluster) >= before + 3, timeout=20, what='three more cycles'
        )
        assert scale_writes(cluster) == []
        active = condition(get(cluster, 'phi'), 'ScalingActive')
        assert active is not None
        assert active['status'] == 'False'
        assert f'from {pending}' in active['message']
        # The pod starts and reports: the scale-down follows.
        await pages.serve('127.0.0.4', 0)
        started = cluster.get(api_version='v1', kind='Pod', namespace=NS, name=pending)
        cluster.report_status({**started, 'status': {'phase': 'Running', 'podIP': '127.0.0.4'}})
        await cluster.wait_for(lambda: replicas(cluster) == 2, timeout=20, what='3 -> 2')
    assert [count for _, count in scale_writes(cluster)][:1] == [2]


INFERENCE_SETS = f'/apis/kaito.sh/v1beta1/namespaces/{NS}/inferencesets'


@pytest.mark.fake_api  # Kaito's InferenceSet: no CRD on the real server
async def test_an_inference_set_is_scaled_through_its_scale(cluster: Cluster, pages: Pages) -> None:
    await pages.serve('127.0.0.2', 9)
    cluster.api.seed(
        {
            'apiVersion': 'kaito.sh/v1beta1',
            'kind': 'InferenceSet',
            'metadata': {'name': 'phi-set', 'namespace': NS},
            'spec': {'replicas': 1, 'labelSelector': {'matchLabels': {'app': DEPLOYMENT}}},
            'status': {'replicas': 1, 'selector': f'app={DEPLOYMENT}'},
        }
    )
    cluster.seed(pod('phi-a', '127.0.0.2'))  # labelled app=phi: the selector /scale reports
    up = {'cooldownSeconds': 3600, 'stabilizationWindowSeconds': 0}
    scaler = realtime(pages.port, up=up, down=FOREVER)
    kind = ('kaito.sh/v1beta1', 'InferenceSet')
    cluster.api.seed(autoscaler('phi', target='phi-set', scaler=scaler, kind=kind))

    def count() -> object:
        obj = cluster.api.get(
            api_version='kaito.sh/v1beta1', kind='InferenceSet', namespace=NS, name='phi-set'
        )
        return obj['spec']['replicas']

    async with controller(cluster, *PODS_EVERY_SECOND):
        await cluster.wait_for(lambda: count() == 2, timeout=30, what='InferenceSet 1 -> 2')
        await cluster.wait_for(
            lambda: (get(cluster, 'phi').get('status') or {}).get('currentReplicas') is not None,
            timeout=10,
            what='the status',
        )
    writes = [
        r.json()['spec']['replicas']
        for r in cluster.api.requests
        if r.method == 'PATCH' and r.path == f'{INFERENCE_SETS}/phi-set/scale'
    ]
    assert writes == [2]
    # Only /scale: the InferenceSet itself is never read, listed or watched.
    assert {r.path for r in cluster.api.requests if r.path.startswith(INFERENCE_SETS)} == {
        f'{INFERENCE_SETS}/phi-set/scale'
    }
    able = condition(get(cluster, 'phi'), 'AbleToScale')
    assert able is not None
    assert (able['status'], able['reason']) == ('True', 'SucceededRescale')
    [rescale] = events(cluster, 'SuccessfulRescale', namespace=NS)
    assert rescale['regarding']['name'] == 'phi'
