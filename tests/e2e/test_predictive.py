"""`llmscaler run` with `llmscaler-predictive-config`: the predictive analyzer as a process.

The analyzer's pieces (forecast, SLO model, exact mix, hysteresis, its holds) have unit tests;
here the controller process runs it against emulated vLLM pods whose latency histograms it reads
through a real Prometheus or by scraping the pods, on the fake API and on the real control plane.
Two variants of one model, CHEAP and DEAR, run the same small replica; the ConfigMap shortens the
start-up and the scale-down delay so a run takes a minute or two.

| check | expectation |
|---|---|
| load step (pods; Prom.) | up only, to the mix the reason names |
| a restart under that load | nothing taken away |
| the fall | held through the scale-down delay, then trimmed |
| TTFT histogram NaN on 1 of 2 pods | held, MetricsAvailable False names it; repaired: trimmed |
| a burst between two cycles (pods) | raised before the next cycle, a `burst:` reason |
"""

from __future__ import annotations

import contextlib
import math
import re
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from llmscaler.devcluster import objects
from llmscaler.devcluster.cluster import Cluster
from llmscaler.sim.hardware.presets import MODEL_8B
from tests.support.e2e_controller import (
    CHEAP,
    CONTROLLER_NS,
    DEAR,
    SPEC,
    Obj,
    condition,
    controller,
    cycles_later,
    events,
    main_resource_writes,
    reading_cluster,
    replicas,
    scale_writes,
    source_args,
    two_variants,
    unavailable_naming,
)

SCALE_DOWN_DELAY = 20.0
"""Seconds: `scaleDownDelaySeconds` of the test's ConfigMap."""
BURST_INTERVAL = 45.0
"""Seconds: the cycle of the burst test, long beside the fast path's few seconds."""
FALLEN = 0.5
"""Requests a second after the fall: one replica of either variant serves it."""
INPUT_TOKENS, OUTPUT_TOKENS = 64, 32
MIX = re.compile(r'mix ((?:[a-z0-9.-]+=\d+(?:, )?)+) costs')
HOLD = re.compile(r'; hold[;)]')
"""A predictive decision that holds (the recurrence's note may follow the verdict)."""
NOW = re.compile(r'\(now (\d+(?:\.\d+)?),')
SCALED = re.compile(r'scaled Deployment llm/([a-z0-9-]+): (\d+) -> (\d+) \((.*)\)$', re.MULTILINE)


def predictive_configmap() -> Obj:
    """Short delays, the SLO, and the replica's α, β, γ, δ."""
    return objects.predictive_configmap(
        namespace=CONTROLLER_NS,
        spec=SPEC,
        input_tokens=INPUT_TOKENS,
        output_tokens=OUTPUT_TOKENS,
        settings={
            'startupSeconds': 5,
            'scaleDownDelaySeconds': SCALE_DOWN_DELAY,
            'historySeconds': 300,
            'targetTTFT': 2000,
            'targetITL': 200,
        },
    )


@contextlib.asynccontextmanager
async def predictive_cluster(
    *, backend: bool, workdir: Path, replicas: int, source: str = 'pods'
) -> AsyncIterator[Cluster]:
    """CHEAP and DEAR at `replicas` each (minimum 1) under the test's ConfigMap, at 1 req/s."""
    async with reading_cluster(
        backend=backend,
        workdir=workdir,
        source=source,
        input_tokens=INPUT_TOKENS,
        output_tokens=OUTPUT_TOKENS,
    ) as cluster:
        cluster.seed(predictive_configmap())
        await two_variants(cluster, replicas=replicas, min_replicas=1)
        cluster.set_rate(model_id=MODEL_8B, rate=1.0)
        yield cluster


def scaled(log: str) -> list[tuple[str, int, int, str]]:
    """The controller's `/scale` writes as its log states them: (VA, from, to, the reason)."""
    return [(va, int(a), int(b), why) for va, a, b, why in SCALED.findall(log)]


def reason(cluster: Cluster, va: str) -> str:
    """The VA's OptimizationReady message: the predictive decision's explanation."""
    cond = condition(cluster, va, 'OptimizationReady')
    return str(cond.get('message', '')) if cond is not None else ''


def mix(text: str) -> dict[str, int]:
    """The variant counts a predictive reason names (`mix cheap=2, dear=0 costs ...`)."""
    found = MIX.search(text)
    if found is None:
        return {}
    pairs = (part.split('=') for part in found.group(1).split(', '))
    return {name: int(count) for name, count in pairs}


def reading(text: str) -> float:
    """The arrival rate a predictive reason read (`(now 2.46, ...`), in req/s."""
    found = NOW.search(text)
    assert found is not None, text
    return float(found.group(1))


def deciding(cluster: Cluster) -> bool:
    """Both VAs decided by the predictive analyzer on a forecast (not held for its inputs)."""
    return all('(predictive: forecast' in reason(cluster, va) for va in (CHEAP, DEAR))


@pytest.mark.parametrize(
    'source', ['pods', pytest.param('prometheus', marks=pytest.mark.integration)]
)
async def test_a_step_scales_up_to_the_explained_mix_a_restart_keeps_it_the_fall_waits(
    backend: bool, tmp_path: Path, source: str
) -> None:
    async with predictive_cluster(
        backend=backend, workdir=tmp_path, replicas=1, source=source
    ) as cluster:
        args = source_args(cluster, interval='2s')
        async with controller(cluster, *args) as process:
            # The arrival rate is a 1-minute rate: the first decisions wait for a minute of history.
            await cluster.wait_for(lambda: deciding(cluster), timeout=90, what='predictive')
            assert scale_writes(cluster, CHEAP) == scale_writes(cluster, DEAR) == []

            # The step: more than two replicas serve (about 1.4 req/s each within the SLO), fewer
            # than the maxima.
            cluster.set_rate(model_id=MODEL_8B, rate=4.0)
            await cluster.wait_for(
                lambda: replicas(cluster, CHEAP) + replicas(cluster, DEAR) >= 3,
                timeout=60,
                what='a scale-up',
            )
            await cycles_later(cluster, process, more=2)
            for va in (CHEAP, DEAR):
                writes = [1, *scale_writes(cluster, va)]
                assert writes == sorted(writes), (va, writes)  # only up while the load is high
            # Every write is the mix its decision explains (the 1-minute rate shows a step over
            # a minute, so the fleet may follow it in more than one write).
            ups = scaled(process.log())
            assert ups, process.log()
            for va, _, to, why in ups:
                assert 'scale up' in why, why
                assert mix(why)[va] == to, why

            def as_explained() -> bool:
                explained = mix(reason(cluster, CHEAP))
                fleet = {CHEAP: replicas(cluster, CHEAP), DEAR: replicas(cluster, DEAR)}
                return explained == mix(reason(cluster, DEAR)) == fleet

            await cluster.wait_for(
                as_explained, timeout=10, what='the fleet the status explains, on both VAs'
            )
            up = {va: replicas(cluster, va) for va in (CHEAP, DEAR)}
            assert process.returncode is None

        # A restart under the same load: its memory is empty, so it may add but never trim.
        restarted = controller(cluster, *args, name='restarted')
        async with restarted:
            await cluster.wait_for(lambda: restarted.cycles() >= 1, timeout=30, what='a cycle')
            await cycles_later(cluster, restarted, more=4)
            for va in (CHEAP, DEAR):
                assert replicas(cluster, va) >= up[va], (va, reason(cluster, va))

            # The step absorbed (through Prometheus the rate lags the load a little longer).
            await cluster.wait_for(
                lambda: all(HOLD.search(reason(cluster, va)) for va in (CHEAP, DEAR)),
                timeout=60,
                what='both VAs holding under the load',
            )
            # The fall: held while the need of the last SCALE_DOWN_DELAY seconds is in memory.
            mark = len(restarted.log())
            cluster.set_rate(model_id=MODEL_8B, rate=FALLEN)
            fell = time.monotonic()

            def since_the_fall() -> list[tuple[str, int, int, str]]:
                return scaled(restarted.log()[mark:])

            def trimmed() -> bool:
                return any(to < was for _, was, to, _ in since_the_fall())

            await cluster.wait_for(trimmed, timeout=120, what='a scale-down after the delay')
            assert time.monotonic() - fell >= SCALE_DOWN_DELAY
            after = since_the_fall()
            first_down = next(i for i, (_, was, to, _) in enumerate(after) if to < was)
            # A rate read through Prometheus may still be rising when the load falls: an addition
            # then is the lag, made on a reading well above the new load, never after a trim.
            for _, _, _, why in after[:first_down]:
                assert 'scale up' in why, why
                assert reading(why) > 2 * FALLEN, why
            for va, was, to, why in after[first_down:]:
                assert to < was, why  # only down once the fall is seen
                assert to >= 1, why  # never below minReplicas
                assert 'scale down' in why, why
                assert mix(why)[va] == to, why
            assert main_resource_writes(cluster) == []
            assert restarted.returncode is None
        assert restarted.returncode == 0


async def test_a_nan_ttft_histogram_on_one_busy_pod_holds_until_repaired(
    backend: bool, tmp_path: Path
) -> None:
    # A trickle: one replica of each would do, so a scale-down is due once the delay passed
    # (a scale-down counts on a replica for at most about half its modelled capacity when it
    # was seen serving less, so the load must leave room for that).
    async with predictive_cluster(backend=backend, workdir=tmp_path, replicas=2) as cluster:
        broken = cluster.pod_name(CHEAP, 1)
        cluster.emulator(CHEAP).emulator.show_sample(
            slot=1, name='vllm:time_to_first_token_seconds_sum', value=math.nan
        )

        async with controller(cluster, *source_args(cluster, interval='2s')) as process:
            # The first decision waits for a minute of arrival-rate history.
            await cluster.wait_for(
                lambda: unavailable_naming(cluster, CHEAP, broken),
                timeout=100,
                what=f'MetricsAvailable False naming {broken}',
            )
            started = process.cycles()
            # Longer than the scale-down delay: a healthy model would have been trimmed.
            await cluster.wait_for(
                lambda: process.cycles() >= started + SCALE_DOWN_DELAY / 2 + 5,
                timeout=SCALE_DOWN_DELAY * 3 + 30,
                what='the scale-down delay, and more',
            )
            assert scale_writes(cluster, CHEAP) == [], reason(cluster, CHEAP)
            assert replicas(cluster, CHEAP) == 2
            # Held throughout. Which reading the hold names varies: after the first minute it is
            # mostly the model's arrival rate, reported as missing without naming the pod
            # (docs/experiments.md), so only the first naming is checked above.

            cluster.emulator(CHEAP).emulator.show_sample(
                slot=1, name='vllm:time_to_first_token_seconds_sum', value=None
            )
            await cluster.wait_for(
                lambda: replicas(cluster, CHEAP) + replicas(cluster, DEAR) < 4,
                timeout=180,
                what='a scale-down, repaired',
            )
            assert main_resource_writes(cluster) == []
            assert process.returncode is None


async def test_a_burst_between_cycles_is_raised_before_the_next_cycle(
    backend: bool, tmp_path: Path
) -> None:
    async with predictive_cluster(backend=backend, workdir=tmp_path, replicas=1) as cluster:
        # A long cycle, so that a raise within seconds can only be the fast path's.
        args = source_args(cluster, interval=f'{BURST_INTERVAL:g}s')
        async with controller(cluster, *args) as process:
            await cluster.wait_for(
                lambda: deciding(cluster), timeout=3 * BURST_INTERVAL, what='predictive'
            )
            # Right after a cycle: the next one is an interval away.
            done = process.cycles()
            await cluster.wait_for(
                lambda: process.cycles() > done, timeout=BURST_INTERVAL + 10, what='a cycle'
            )
            cycle = process.cycles()
            mark = len(process.log())
            cluster.set_rate(model_id=MODEL_8B, rate=12.0)
            stepped = time.monotonic()
            await cluster.wait_for(
                lambda: bool(scaled(process.log()[mark:])), timeout=30, what='a raise'
            )
            seconds = time.monotonic() - stepped
            assert process.cycles() == cycle, 'the raise waited for the next cycle'
            ups = scaled(process.log()[mark:])
            for va, before, to, why in ups:
                assert to > before, why
                assert why.startswith('burst: '), why
                assert mix(why)[va] == to, why
            # The Event follows the write it reports.
            await cluster.wait_for(
                lambda: any('burst: ' in e.get('note', '') for e in events(cluster, 'ScaledUp')),
                timeout=10,
                what='a ScaledUp Event of the burst',
            )
            print(f'burst raised {seconds:.1f} s after the step')
            assert main_resource_writes(cluster) == []
