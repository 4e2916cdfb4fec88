"""How soon the controller process answers a burst: from the load's step to the `/scale` write.

Setup: the development cluster on the fake kube-apiserver (`--backend real`: the real control
plane `make binaries` built), one model of two variants of a small emulated vLLM replica (4
sequences at a time, about 1.4 req/s each within the SLO), one replica each, behind the
cluster's gateway; `llmscaler run` with `llmscaler-predictive-config` (start-up 5 s, scale-down
delay 20 s, the replica's fitted α, β, γ, δ), its metrics read from the pods, a 30 s cycle.
The load runs at 1 req/s; `--bursts` times (6 by default) it steps to 12 req/s, and the time
from the step (the gateway's first request at the new rate) to the first `/scale` write the API
server records is one figure; then the load falls back, and the next burst waits until no write
has come for 70 s (a cycle's rate that is the low one) and the fleet is at half its maxima or
less (after a burst `predictive` keeps a fleet for a while, and a burst must have room).

Printed: each burst's seconds and who wrote (the fast path's reasons start with `burst:`), and
their median and maximum (the p99 of so few), against the goal of 5 s and against the main
cycle's own answer, measured in the same run by one more burst with `fastPath: false` in the
ConfigMap. `--write-docs` puts the table into docs/controller.md between
`<!-- burst-controller:begin -->` and `<!-- burst-controller:end -->`.

Run: `.venv/bin/python bench/burst_controller.py [--bursts N] [--backend fake|real]
[--write-docs]` (about two minutes per burst).
"""

from __future__ import annotations

import argparse
import asyncio
import re
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import doc_blocks
from llmscaler.devcluster import objects
from llmscaler.devcluster.cluster import Cluster
from llmscaler.devcluster.process import ControllerProcess
from llmscaler.sim.hardware.presets import MODEL_8B, preset

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / 'docs' / 'controller.md'
MARKERS = ('<!-- burst-controller:begin -->', '<!-- burst-controller:end -->')
NS, CONTROLLER_NS = 'llm', 'llmscaler-system'
SPEC = preset(name='llama-3.1-8b-l4', max_num_seqs=4)
VARIANTS = (('cheap', 1.0), ('dear', 5.0))
LOW, HIGH = 1.0, 12.0
INTERVAL = 30.0
MAX_REPLICAS = 4
QUIET = 70.0
"""Seconds without a write before a burst: the cycle's rate (the minute's) is the low one."""
SETTINGS = {
    'startupSeconds': 5,
    'scaleDownDelaySeconds': 20,
    'historySeconds': 300,
    'targetTTFT': 2000,
    'targetITL': 200,
}
SCALED = re.compile(r'scaled Deployment llm/([a-z0-9-]+): (\d+) -> (\d+) \((.*)\)$', re.MULTILINE)


@dataclass(frozen=True)
class Answer:
    """One burst: seconds from the step to the first `/scale` write, and whether the fast path
    wrote it."""

    seconds: float
    fast: bool


def configmap(*, fast_path: bool) -> dict[str, object]:
    made = objects.predictive_configmap(
        namespace=CONTROLLER_NS, spec=SPEC, input_tokens=64, output_tokens=32, settings=SETTINGS
    )
    data = made['data']
    assert isinstance(data, dict)
    data['default'] += f'fastPath: {"true" if fast_path else "false"}\n'
    return made


def replicas(cluster: Cluster, name: str) -> int:
    return int(cluster.deployment(name)['spec']['replicas'])


def writes(cluster: Cluster) -> int:
    return sum(1 for r in cluster.requests if r.method == 'PATCH' and r.path.endswith('/scale'))


async def settled(cluster: Cluster) -> None:
    """Until no `/scale` write has come for `QUIET` seconds and the fleet is back at half its
    maxima or less (the fleet the low rate leaves, with room for a burst to be answered)."""
    count, since = writes(cluster), time.monotonic()
    while time.monotonic() - since < QUIET or fleet(cluster) > len(VARIANTS) * MAX_REPLICAS / 2:
        await asyncio.sleep(1.0)
        if writes(cluster) != count:
            count, since = writes(cluster), time.monotonic()


def fleet(cluster: Cluster) -> int:
    return sum(replicas(cluster, name) for name, _ in VARIANTS)


async def one_burst(cluster: Cluster, process: ControllerProcess) -> Answer:
    """Wait for a settled fleet at the low rate; step; time the first write."""
    await settled(cluster)
    before, mark = writes(cluster), len(process.log())
    cluster.set_rate(model_id=MODEL_8B, rate=HIGH)
    stepped = time.monotonic()
    await cluster.wait_for(lambda: writes(cluster) > before, timeout=120, what='a scale-up')
    seconds = time.monotonic() - stepped
    await asyncio.sleep(2.0)  # the log line follows the write
    ups = SCALED.findall(process.log()[mark:])
    fast = bool(ups) and ups[0][3].startswith('burst: ')
    await asyncio.sleep(15.0)
    cluster.set_rate(model_id=MODEL_8B, rate=LOW)
    return Answer(seconds=seconds, fast=fast)


async def run(*, bursts: int, backend: str) -> tuple[list[Answer], Answer]:
    with tempfile.TemporaryDirectory() as workdir:
        async with Cluster(
            namespace=NS,
            workdir=Path(workdir),
            prometheus=False,
            input_tokens=64,
            output_tokens=32,
            control_plane=backend == 'real',
        ) as cluster:
            cluster.seed(configmap(fast_path=True))
            for name, cost in VARIANTS:
                await cluster.add_variant(
                    name=name,
                    model_id=MODEL_8B,
                    preset=SPEC,
                    cost=cost,
                    replicas=1,
                    min_replicas=1,
                    max_replicas=MAX_REPLICAS,
                )
            cluster.set_rate(model_id=MODEL_8B, rate=LOW)
            args = [
                '--namespace', CONTROLLER_NS,
                '--metrics-bind-address', '127.0.0.1:0',
                '--health-probe-bind-address', '127.0.0.1:0',
                '--metrics-source', 'pods',
                '--interval', f'{INTERVAL:g}s',
            ]  # fmt: skip
            async with ControllerProcess(cluster=cluster, name='controller', args=args) as process:
                answers = []
                for index in range(bursts):
                    answers.append(await one_burst(cluster, process))
                    print(f'burst {index + 1}: {answers[-1]}', file=sys.stderr)
                cluster.replace(configmap(fast_path=False))
                without = await one_burst(cluster, process)
                print(f'without the fast path: {without}', file=sys.stderr)
    return answers, without


def block(answers: list[Answer], without: Answer, *, backend: str) -> str:
    seconds = [a.seconds for a in answers]
    fast = sum(1 for a in answers if a.fast)
    return '\n'.join(
        [
            f'Generated by `bench/burst_controller.py` (`--write-docs`), on the {backend} API '
            f'server: `llmscaler run` with `predictive` and a {INTERVAL:g} s cycle, the load '
            f'stepping from {LOW:g} to {HIGH:g} req/s {len(answers)} times; seconds from the '
            'step to the first `/scale` write.',
            '',
            '| | bursts | written by the fast path | median | max | goal |',
            '|---|---:|---:|---:|---:|---:|',
            f'| fast path | {len(answers)} | {fast} | {statistics.median(seconds):.1f} s | '
            f'{max(seconds):.1f} s | ≤ 5 s |',
            f'| `fastPath: false` | 1 | {int(without.fast)} | {without.seconds:.1f} s | '
            f'{without.seconds:.1f} s | |',
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--bursts', type=int, default=6)
    parser.add_argument('--backend', choices=('fake', 'real'), default='fake')
    parser.add_argument('--write-docs', action='store_true')
    args = parser.parse_args()
    answers, without = asyncio.run(run(bursts=max(1, args.bursts), backend=args.backend))
    doc_blocks.emit(
        DOC,
        markers=MARKERS,
        body=block(answers, without, backend=args.backend),
        write_docs=args.write_docs,
    )


if __name__ == '__main__':
    main()
