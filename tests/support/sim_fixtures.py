"""Simulator helpers shared by the sim tests.

- A tiny finished run (six requests on two variants) whose summary figures test_sim_metrics works
  out by hand: `tiny_result`, `empty_result`, `tiny_timeline`, against `SLO_1`.
- The two vLLM replica engines and what drives them (test_sim_replica): `ENGINES`, the linear step
  model `LINEAR` of the worked numbers, `drive`, `stream`, `summary` and the step models `STEPS`;
  `assert_served_alike` and `assert_summaries_close` compare the two engines' runs.
- Control views of a small fleet for the policies (test_sim_policies): `running`, `replica`,
  `view`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np
import pytest

from llmscaler.domain.snapshot import PoolMetrics, ReplicaMetrics, Snapshot, Variant
from llmscaler.sim.hardware import presets
from llmscaler.sim.vllm.fast import FastReplica
from llmscaler.sim.vllm.reference import ReferenceReplica
from llmscaler.sim.vocabulary import (
    SLO,
    ControlView,
    PerfModel,
    ScaleEvent,
    SimRequest,
    SimResult,
    Timeline,
    VariantSpec,
)
from tests.support.engine_fixtures import NS, variant
from tests.support.strategies import NOW

# ---- a tiny run ------------------------------------------------------------------------------

NAN = math.nan
SLO_1 = SLO(ttft=1.0, itl=0.1)


def spec(name: str, *, gpus: int, price: float) -> VariantSpec:
    return VariantSpec(
        name=name,
        preset='test',
        model_id='m',
        accelerator='X',
        gpus_per_replica=gpus,
        price_per_gpu_hour=price,
        num_gpu_blocks=1000,
        perf=PerfModel(
            step_overhead=0.005, decode_per_seq=1e-4, prefill_per_token=5e-5, kv_read_per_token=0
        ),
    )


# 'a': 2 GPUs × $3 = $6 per replica-hour; 'b': 1 GPU × $1.5 = $1.5 per replica-hour.
VARIANTS = (spec('b', gpus=1, price=1.5), spec('a', gpus=2, price=3.0))


def req(
    rid: int,
    arrival: float,
    *,
    out: int = 2,
    first: float = NAN,
    finished: float = NAN,
    failed: bool = False,
    variant: str = 'a',
) -> SimRequest:
    return SimRequest(
        rid=rid,
        arrival=arrival,
        input_tokens=100,
        output_tokens=out,
        first_token=first,
        finished=finished,
        failed=failed,
        variant=variant,
    )


def tiny_requests() -> list[SimRequest]:
    """Six requests against SLO TTFT 1 s / ITL 0.1 s:

    r0 TTFT 0.5, ITL (1.0 − 0.5)/10 = 0.05 → met;     r1 TTFT 2.0, ITL 0.2/4 = 0.05 → TTFT miss;
    r2 TTFT 0.2, ITL 0.4/2 = 0.2 → ITL miss;           r3 TTFT 0.8, one token → met (TTFT only);
    r4 failed (timed out) → miss;                      r5 first token but no finish → incomplete.
    """
    return [
        req(0, 0.0, out=11, first=0.5, finished=1.0),
        req(1, 10.0, out=5, first=12.0, finished=12.2),
        req(2, 20.0, out=3, first=20.2, finished=20.6, variant='b'),
        req(3, 30.0, out=1, first=30.8, finished=30.8),
        req(4, 65.0, failed=True, variant=''),
        req(5, 3500.0, out=50, first=3500.3),
    ]


def tiny_timeline(n: int = 4, *, step: float = 10.0) -> Timeline:
    times = [i * step for i in range(n)]
    return Timeline(
        times=times,
        replicas={'a': [2] * n, 'b': [1 + (i % 2) for i in range(n)]},
        ready={'a': [1] * n, 'b': [1] * n},
        kv_usage=[0.1 * (i % 10) for i in range(n)],
        waiting=[i % 3 for i in range(n)],
        running=[5] * n,
        gateway_queue=[i % 2 for i in range(n)],
    )


def tiny_result(
    policy: str = 'default',
    *,
    requests: list[SimRequest] | None = None,
    replica_seconds: dict[str, float] | None = None,
    duration: float = 3600.0,
    timeline: Timeline | None = None,
) -> SimResult:
    return SimResult(
        policy=policy,
        trace='tiny',
        duration=duration,
        requests=tiny_requests() if requests is None else requests,
        variants=VARIANTS,
        # 2 h of 'a' and 1.5 h of 'b'.
        replica_seconds={'a': 7200.0, 'b': 5400.0} if replica_seconds is None else replica_seconds,
        events=[
            ScaleEvent(time=30.0, variant='a', before=1, after=2, reason='up'),
            ScaleEvent(time=60.0, variant='b', before=2, after=1, reason='down'),
            ScaleEvent(time=90.0, variant='b', before=1, after=1, reason='hold'),
        ],
        timeline=tiny_timeline() if timeline is None else timeline,
        sample_interval=10.0,
    )


def empty_result(policy: str = 'empty') -> SimResult:
    return SimResult(
        policy=policy,
        trace='none',
        duration=0.0,
        requests=[],
        variants=VARIANTS,
        replica_seconds={},
        events=[],
        timeline=Timeline(),
        sample_interval=10.0,
    )


# ---- the replica engines ---------------------------------------------------------------------

Engine = ReferenceReplica | FastReplica
ENGINES = pytest.mark.parametrize('cls', [ReferenceReplica, FastReplica], ids=['ref', 'fast'])

LINEAR = PerfModel(
    step_overhead=0.007,
    decode_per_seq=0.042e-3,
    prefill_per_token=24e-6,
    kv_read_per_token=0.052e-6,
)


def h100(**overrides: int) -> VariantSpec:
    return presets.preset(name='llama-3.1-8b-h100', variant_name='v', perf=LINEAR, **overrides)


def roofline(name: str = 'llama-3.1-8b-h100', **overrides: int) -> VariantSpec:
    """A preset with its derived step model."""
    return presets.preset(name=name, variant_name='v', **overrides)


def engine(cls: type[Engine], spec: VariantSpec, now: float = 0.0) -> Engine:
    return cls(spec=spec, name='v-0000', now=now)


def drive(
    e: Engine,
    rs: Sequence[SimRequest],
    *,
    probes: Sequence[float],
    cancels: Sequence[tuple[float, int]] = (),
    found: list[bool] | None = None,
) -> list[SimRequest]:
    """Advance to every arrival, probe and cancel time in order, submit at arrivals, cancel
    request i at (t, i) (appending what `cancel` returned to `found`), then run dry.

    Checks the gauges at every call.
    """
    events = sorted(
        [(r.arrival, 0, i) for i, r in enumerate(rs)]
        + [(t, 1, -1) for t in probes]
        + [(t, 2, i) for t, i in cancels]
    )
    done: list[SimRequest] = []
    usable = e.spec.num_gpu_blocks - 1
    for t, kind, i in events:
        done += e.advance(until=t)
        assert 0.0 <= e.kv_usage <= 1.0
        held = e.held_blocks()
        assert held == usable - e.free_blocks
        assert 0 <= held <= usable
        if kind == 0:
            e.submit(request=rs[i], now=t)
        elif kind == 2:
            hit = e.cancel(request=rs[i], now=t)
            if found is not None:
                found.append(hit)
            held = e.held_blocks()
            assert held == usable - e.free_blocks
    done += e.advance(until=math.inf)
    assert e.in_flight == 0
    return done


def stream(
    *,
    seed: int,
    n: int,
    rate: float,
    cv: float,
    log_in: tuple[float, float],
    log_out: tuple[float, float],
) -> list[tuple[float, int, int]]:
    rng = np.random.default_rng(seed)
    shape = 1.0 / cv**2
    arrivals = np.cumsum(rng.gamma(shape, 1.0 / (shape * rate), n))
    sizes = np.clip(np.exp(rng.normal(log_in[0], log_in[1], n)), 1, 30_000).astype(int)
    outs = np.clip(np.exp(rng.normal(log_out[0], log_out[1], n)), 1, 3000).astype(int)
    return [(float(a), int(i), int(o)) for a, i, o in zip(arrivals, sizes, outs, strict=True)]


def summary(rs: Sequence[SimRequest]) -> dict[str, float]:
    ttft = np.array([r.ttft for r in rs])
    itl = np.array([r.mean_itl for r in rs if r.output_tokens > 1])
    makespan = max(r.finished for r in rs) - min(r.arrival for r in rs)
    return {
        'ttft_p50': float(np.percentile(ttft, 50)),
        'ttft_p99': float(np.percentile(ttft, 99)),
        'itl_p50': float(np.percentile(itl, 50)),
        'itl_p99': float(np.percentile(itl, 99)),
        'throughput': sum(r.output_tokens for r in rs) / makespan,
    }


def assert_served_alike(ref: Sequence[SimRequest], fast: Sequence[SimRequest]) -> None:
    """The fast engine served every request as the reference one did: the first token and the
    finish within 1 µs, the same preemptions."""
    for a, b in zip(ref, fast, strict=True):
        assert b.finished == pytest.approx(a.finished, abs=1e-6), a.rid
        assert b.first_token == pytest.approx(a.first_token, abs=1e-6), a.rid
        assert a.preemptions == b.preemptions, a.rid


def assert_summaries_close(ref: Sequence[SimRequest], fast: Sequence[SimRequest]) -> None:
    """The two runs' TTFT and ITL percentiles and throughput (`summary`) within 1 %."""
    s_ref, s_fast = summary(ref), summary(fast)
    for key, value in s_ref.items():
        assert s_fast[key] == pytest.approx(value, rel=0.01), key


STEP = PerfModel(
    step_overhead=0.0071,
    decode_per_seq=0.00043,
    prefill_per_token=0.000027,
    kv_read_per_token=3.1e-6,
)
# Roofline steps at the scale of these small streams (tens of tokens): one whose decode
# attention is memory-bound, one that starts compute-bound and turns memory-bound as contexts
# grow (kv 3.1 µs against 2.9 µs per pair: at context ≥ 14.5 tokens per sequence), each with a
# plain and a smooth linear-layer maximum.
ROOFLINE_STEP = PerfModel(
    step_overhead=0.002,
    decode_per_seq=0.00043,
    prefill_per_token=0.00041,
    kv_read_per_token=3.1e-6,
    weight_read=0.005,
    token_traffic=0.00002,
    attention_per_pair=2.9e-6,
    comm_per_token=0.00001,
)
STEPS = (
    STEP,
    ROOFLINE_STEP,
    dataclasses.replace(ROOFLINE_STEP, sharpness=1.0),
    dataclasses.replace(ROOFLINE_STEP, attention_per_pair=0.2e-6, sharpness=2.0),
)


# ---- control views ---------------------------------------------------------------------------


def running(name: str, count: int, **kw: object) -> Variant:
    """A variant with `count` replicas, all ready."""
    return variant(name, current_replicas=count, ready_replicas=count, **kw)


def replica(name: str, pod: int, *, queue: float = 0.0, kv: float = 0.0) -> ReplicaMetrics:
    return ReplicaMetrics(
        pod=f'{name}-{pod}',
        variant=name,
        namespace=NS,
        observed_at=NOW - 5.0,
        kv_usage=kv,
        queue_length=queue,
        num_gpu_blocks=1000,
        block_size=16,
        avg_input_tokens=1000.0,
        avg_output_tokens=200.0,
    )


def view(
    variants: list[Variant],
    replicas: list[ReplicaMetrics] = (),  # type: ignore[assignment]
    pools: list[PoolMetrics] = (),  # type: ignore[assignment]
    *,
    now: float = NOW,
) -> ControlView:
    return ControlView(
        now=now,
        snapshot=Snapshot(variants=tuple(variants), replicas=tuple(replicas), pools=tuple(pools)),
        replicas={v.name: v.current_replicas for v in variants},
        ready={v.name: v.ready_replicas for v in variants},
    )
