"""How long one main cycle of the controller takes with 1,000 variants, and its status writes.

Setup: the in-repo fake kube-apiserver on loopback holds 1,000 VariantAutoscalings (334 models of
three variants, one variant at zero replicas, the others at 2) with their Deployments, and one Pod
per replica. The metric source is in memory (fresh readings for every pod, the same for a pod in
every cycle, so that the cycles after the first are steady), so the figure is the controller's own
cost: world building from the informer caches, attribution, `decide()`, the `/scale` writes and
the status writes over HTTP.

Two loads: busy, one load per pod drawn once (KV usage 0.1-0.9, 0-6 waiting), under which the
saturated variants keep asking for replicas on the fake cluster (it never creates the pods a
scale-up asks for), so every steady cycle writes; and quiet, every pod at 70 % KV usage and 2
waiting, inside WVA's thresholds, so that after the first cycle's status writes nothing changes:
the cycle the goal is about, whose cost is the controller's reading and deciding alone.

Status writes: the status PATCHes of each cycle are counted at the client. The cycles run three
times, each time by a controller built from its command line and from the same starting cluster
(a fresh fake API): under the busy load with the options as shipped (a status is written when
something in it changes, and `lastRunTime` alone every 5 minutes), then with
`--status-refresh-interval 0s` (`lastRunTime` stamped every cycle: how the writer behaved before,
one PATCH per VA per cycle), then under the quiet load as shipped. The figure to compare is the
PATCHes of a steady cycle in the first two.

The fake API server runs in a child process, so its own work (it deep-copies every object it
serves) is not counted in the controller's cycle; the cycles are spaced by one second, as real
cycles are spaced by their interval, so the informers have seen the previous cycle's writes.

Baseline, measured in the same run: the same number of status merge-patches sent alone through the
same client and concurrency — the irreducible API cost of a cycle that writes every status.
Prints the backend, the cycle time (first cycle, and the median of the next ones, in the busy
runs; every cycle of the quiet one), the share of `decide()`, the ratio to the baseline and the
status PATCHes per cycle. `--models N` makes a smaller cluster (3 variants per model, 1,000 at
most).

`--backend real` runs the same cycles against the real control plane (`realproc`: etcd,
kube-apiserver, kube-controller-manager and kube-scheduler built by `make binaries`; exit
status 2 and one line when they are not built). The controller signs in as its ServiceAccount,
bound by the shipped RBAC. The VAs and Deployments are created through the admin client, 16 at a
time; kube-controller-manager makes the ReplicaSets and the 1,334 pods, kube-scheduler binds
them to GPU nodes registered with room for every VA's maxReplicas, and the harness reports each
seeded pod Running and Ready once (the kubelet's part), so the pods' names are kube-controller-
manager's and the metric source is built from them after seeding. Not counted: starting the
control plane and seeding it (the time is printed, per run); each run gets a fresh control plane.
Counted as they happen: the real API server's work on every read and write (admission, RBAC,
etcd, watch fan-out to the controller's informers and to kube-controller-manager), and on this
machine the control plane's processes compete with the controller for the cores. After seeding
no kubelet runs: the pods a scale-up asks for are created by kube-controller-manager and bound,
and stay Pending (the fake cluster never creates them at all).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import statistics
import sys
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lightkube.types import PatchType

import realproc
from fakeproc import fake_api
from llmscaler import engine
from llmscaler.clock import LoopClock
from llmscaler.collect.readings import ModelScope, PodReading, Reading
from llmscaler.controller.app import Controller
from llmscaler.controller.options.resolve import resolve_options
from llmscaler.devcluster import objects as objects_
from llmscaler.kube.client import VariantAutoscalingResource
from llmscaler.sim.hardware import presets

MODELS = 334
NAMESPACE = 'bench'
CYCLES = 8
QUIET_GOAL = 0.3
"""Seconds: the goal for a steady cycle at 1,000 variants when nothing changes."""
QUIET_LOAD = (0.7, 2.0)
"""KV usage and waiting requests of every pod in the quiet run: no WVA threshold crossed."""


class MemorySource:
    """Fresh readings for every pod of the fake cluster (a stand-in for Prometheus)."""

    def __init__(self, *, pods: list[tuple[str, str]], clock: LoopClock, quiet: bool) -> None:
        self._pods = pods
        self._clock = clock
        # One load per pod, the same in every cycle: the cycles after the first are steady.
        draw = random.Random(7)
        self._load = {
            pod: QUIET_LOAD if quiet else (draw.uniform(0.1, 0.9), float(draw.randint(0, 6)))
            for pod, _ in pods
        }

    async def read(self, *, scope: tuple[ModelScope, ...], now: float) -> Reading:
        readings = tuple(
            PodReading(
                namespace=NAMESPACE,
                pod=pod,
                observed_at=now - 5.0,
                model_name=model,
                kv_usage=self._load[pod][0],
                queue_length=self._load[pod][1],
                num_gpu_blocks=8000,
                block_size=16,
                avg_input_tokens=900.0,
                avg_output_tokens=200.0,
            )
            for pod, model in self._pods
        )
        return Reading(pods=readings)


async def _baseline(controller: Controller, names: list[str]) -> float:
    gate = asyncio.Semaphore(16)

    async def one(name: str) -> None:
        async with gate:
            await controller.client.patch(
                VariantAutoscalingResource.Status,
                name,
                {'status': {'actuation': {'applied': True}}},
                namespace=NAMESPACE,
                patch_type=PatchType.MERGE,
            )

    started = time.perf_counter()
    await asyncio.gather(*(one(name) for name in names))
    return time.perf_counter() - started


def _objects(
    models: int, *, pods_too: bool
) -> tuple[list[dict[str, Any]], list[tuple[str, str]], list[str]]:
    """The cluster, built with the end-to-end tests' object builders: the objects, the pods
    (name, model) in variant order, and the VA names.

    Without `pods_too` (the real control plane: kube-controller-manager makes the pods of the
    Deployments) neither pods nor Deployment status are built."""
    objects: list[dict[str, Any]] = []
    pods: list[tuple[str, str]] = []
    names: list[str] = []
    variants = (
        ('llama-3.1-8b-l40s', 5.0),
        ('llama-3.1-8b-a100', 9.0),
        ('llama-3.1-8b-h100', 14.0),
    )
    for m in range(models):
        model = f'model-{m:03d}'
        for v, (preset, cost) in enumerate(variants):
            if len(names) == 1000:
                break
            name = f'{model}-v{v}'
            replicas = 0 if v == 2 else 2
            spec = presets.preset(name=preset)
            deploy = objects_.deployment(
                name=name,
                namespace=NAMESPACE,
                model_id=model,
                spec=spec,
                replicas=replicas,
                accelerator=spec.accelerator,
            )
            objects.append(deploy)
            objects.append(
                objects_.variant_autoscaling(
                    name=name,
                    namespace=NAMESPACE,
                    model_id=model,
                    target=name,
                    cost=cost,
                    min_replicas=0,
                    max_replicas=8,
                )
            )
            names.append(name)
            if not pods_too:
                continue
            deploy['status'] = objects_.deployment_status(
                generation=1, replicas=replicas, ready=replicas
            )
            for slot in range(replicas):
                pod = objects_.replica_pod(
                    deploy=deploy, pod_hash='abc12', replica_set_uid='u', slot=slot, port=8000
                )
                pod['status']['podIP'] = '10.0.0.1'
                objects.append(pod)
                pods.append((pod['metadata']['name'], model))
    return objects, pods, names


RUNS = (
    ('as shipped', (), False),
    ('lastRunTime every cycle (before)', ('--status-refresh-interval', '0s'), False),
    ('as shipped, quiet load', (), True),
)
"""Label, extra `llmscaler run` options and quiet load of each run."""


@dataclass(frozen=True, slots=True)
class Run:
    times: list[float]
    cpu: list[float]
    """The process's CPU time in each cycle (its informers' work in that time included)."""
    written: list[int]
    scaled: list[int]
    decide: list[float]
    baseline: float


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--models', type=int, default=MODELS, help='models (3 variants each)')
    realproc.add_backend_option(parser)
    args = parser.parse_args()
    if not 1 <= args.models <= MODELS:
        parser.error(f'--models must be in [1, {MODELS}]')
    realproc.require(parser, backend=args.backend)
    runs, seeding = [], []
    for _, extra, quiet in RUNS:
        # Every run starts from the same cluster: a fresh fake API, or a fresh control plane.
        async with _cluster(backend=args.backend, models=args.models) as served:
            runs.append(
                await _measure(served.server, served.pods, served.names, extra=extra, quiet=quiet)
            )
            if served.seeding is not None:
                seeding.append(served.seeding)
    shipped, before, quiet_run = runs
    print(realproc.describe(args.backend, seeding=seeding))
    _report(
        shipped=shipped,
        before=before,
        quiet=quiet_run,
        pods=served.pods,
        names=served.names,
        models=args.models,
    )


@dataclass(frozen=True, slots=True)
class Served:
    """A seeded API server as one run of the controller sees it."""

    server: tuple[str, ...]
    """The `llmscaler run` options that reach it."""
    pods: list[tuple[str, str]]
    """Its pods (name, model), in the order of the variants."""
    names: list[str]
    """The VA names."""
    seeding: float | None
    """Seconds the real control plane took to start and settle (None on the fake)."""


@contextlib.asynccontextmanager
async def _cluster(*, backend: str, models: int) -> AsyncIterator[Served]:
    objects, pods, names = _objects(models, pods_too=backend == 'fake')
    if backend == 'fake':
        with fake_api(objects) as url:
            yield Served(server=('--server', url), pods=pods, names=names, seeding=None)
        return
    async with realproc.real_api(objects, namespace=NAMESPACE) as real:
        model = {
            o['metadata']['name']: o['spec']['modelID'] for o in objects if 'modelID' in o['spec']
        }
        rank = {name: i for i, name in enumerate(names)}

        def variant(pod: dict[str, Any]) -> str:
            return str(pod['metadata']['labels'][objects_.APP_LABEL])

        made = sorted(real.pods, key=lambda p: (rank[variant(p)], p['metadata']['name']))
        pods = [(p['metadata']['name'], model[variant(p)]) for p in made]
        yield Served(server=real.argv, pods=pods, names=names, seeding=real.seconds)


async def _cycles(
    controller: Controller, patches: list[int]
) -> tuple[list[float], list[float], list[int], list[int]]:
    """CYCLES cycles, one second apart: their times, the process's CPU time in each, status
    PATCHes and `/scale` writes."""
    times, cpu, written, scaled = [], [], [], []
    for _ in range(CYCLES):
        before = patches[0]
        started, started_cpu = time.perf_counter(), time.process_time()
        report = await controller.cycle.run_once()
        times.append(time.perf_counter() - started)
        cpu.append(time.process_time() - started_cpu)
        written.append(patches[0] - before)
        scaled.append(len(report.scaled))
        await asyncio.sleep(1.0)
    return times, cpu, written, scaled


async def _measure(
    server: Sequence[str],
    pods: list[tuple[str, str]],
    names: list[str],
    *,
    extra: Sequence[str],
    quiet: bool,
) -> Run:
    options, _ = resolve_options(
        argv=[
            *server,
            '--metrics-source',
            'pods',
            '--metrics-bind-address',
            '0',
            '--health-probe-bind-address',
            '0',
            *extra,
        ],
        env={},
    )
    clock = LoopClock()
    controller = Controller(
        options=options, source=MemorySource(pods=pods, clock=clock, quiet=quiet)
    )
    informers = [asyncio.create_task(i.run()) for i in controller.caches.all()]
    while not controller.caches.synced():
        await asyncio.sleep(0.05)

    decide_seconds: list[float] = []
    real_decide = engine.decide

    def timed_decide(**kwargs: Any) -> engine.Outcome:
        started = time.perf_counter()
        outcome = real_decide(**kwargs)
        decide_seconds.append(time.perf_counter() - started)
        return outcome

    from llmscaler.controller.va import cycle as cycle_module

    setattr(cycle_module, 'decide', timed_decide)  # noqa: B010 - time decide() in place
    # Every status PATCH goes through the client: count them there (retries included).
    patches = [0]
    real_patch = controller.client.patch

    async def counting_patch(resource: Any, *args: Any, **kwargs: Any) -> Any:
        if resource is VariantAutoscalingResource.Status:
            patches[0] += 1
        return await real_patch(resource, *args, **kwargs)

    setattr(controller.client, 'patch', counting_patch)  # noqa: B010 - count in place
    try:
        times, cpu, written, scaled = await _cycles(controller, patches)
    finally:
        setattr(controller.client, 'patch', real_patch)  # noqa: B010
        setattr(cycle_module, 'decide', real_decide)  # noqa: B010
    baseline = await _baseline(controller, names)
    for task in informers:
        task.cancel()
    await asyncio.gather(*informers, return_exceptions=True)
    await controller._close()
    return Run(
        times=times,
        cpu=cpu,
        written=written,
        scaled=scaled,
        decide=decide_seconds,
        baseline=baseline,
    )


def _report(
    *,
    shipped: Run,
    before: Run,
    quiet: Run,
    pods: list[tuple[str, str]],
    names: list[str],
    models: int,
) -> None:
    steady = statistics.median(shipped.times[1:])
    steady_before = statistics.median(before.times[1:])
    print(f'variants: {len(names)}  pods: {len(pods)}  models: {models}')
    # The load is fixed. The fake cluster never creates the pods a scale-up asks for, so the
    # saturated variants keep scaling up: their statuses change, and are written, every cycle.
    # On the real one kube-controller-manager creates them (Pending: no kubelet runs), and the
    # controller waits for the replicas it asked for: the later cycles change nothing.
    print(f'status PATCHes per cycle, as shipped: {shipped.written}  (/scale: {shipped.scaled})')
    print(
        f'status PATCHes per cycle, lastRunTime every cycle (before): {before.written}  '
        f'(/scale: {before.scaled})'
    )
    print(
        f'status PATCHes of the last cycle: before {before.written[-1]}, '
        f'after {shipped.written[-1]} (VAs scaled in it: {shipped.scaled[-1]}); '
        'an unchanged VA is written once per 5 minutes'
    )
    print(
        f'first cycle: {shipped.times[0] * 1000:.0f} ms   steady cycle (median of {CYCLES - 1}): '
        f'{steady * 1000:.0f} ms (CPU {statistics.median(shipped.cpu[1:]) * 1000:.0f} ms), '
        f'with lastRunTime every cycle: {steady_before * 1000:.0f} ms'
    )
    print(f'decide() share: {statistics.median(shipped.decide[1:]) * 1000:.0f} ms')
    print(f'baseline ({len(names)} status patches alone): {shipped.baseline * 1000:.0f} ms')
    print(
        f'ratio steady cycle / baseline: {steady / shipped.baseline:.2f}x '
        f'(before: {steady_before / before.baseline:.2f}x, '
        f'its baseline {before.baseline * 1000:.0f} ms)'
    )
    print(
        f'quiet load: status PATCHes per cycle {quiet.written}  (/scale: {quiet.scaled}), '
        f'cycle times {", ".join(f"{t * 1000:.0f}" for t in quiet.times)} ms'
    )
    unchanged = [
        (seconds, cpu)
        for run in (shipped, quiet)
        for seconds, cpu, written, scaled in zip(
            run.times[1:], run.cpu[1:], run.written[1:], run.scaled[1:], strict=True
        )
        if written == scaled == 0
    ]
    goal = (
        f'goal at 1,000 variants, ≤ {QUIET_GOAL * 1000:.0f} ms for a steady cycle that changes '
        'nothing'
    )
    if not unchanged:
        print(f'{goal}: not measured (every steady cycle wrote a status or a /scale)')
        return
    median = statistics.median(seconds for seconds, _ in unchanged)
    print(
        f'{goal}: {"met" if median <= QUIET_GOAL else "not met"} '
        f'({median * 1000:.0f} ms, CPU {statistics.median(c for _, c in unchanged) * 1000:.0f} '
        f'ms: median of the {len(unchanged)} steady cycles that wrote nothing, both loads)'
    )


if __name__ == '__main__':
    asyncio.run(main())
