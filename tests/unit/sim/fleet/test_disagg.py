"""Disaggregated serving (`sim.fleet.disagg`): two legs, the KV transfer, time-outs, both
engines."""

from __future__ import annotations

import math

import numpy as np
import pytest

from llmscaler.sim.fleet.cluster import Cluster
from llmscaler.sim.fleet.disagg import KvLink
from llmscaler.sim.fleet.observe import Observer
from llmscaler.sim.hardware import datasheets
from llmscaler.sim.hardware.presets import preset
from llmscaler.sim.policies.core import StaticPolicy
from llmscaler.sim.runner import SimSettings, run
from llmscaler.sim.vllm.fast import FastReplica
from llmscaler.sim.vocabulary import SimRequest, Trace, VariantSpec
from tests.support.sim_fixtures import LINEAR

BYTES = float(datasheets.model('meta-llama/Llama-3.1-8B-Instruct').kv_bytes_per_token(tp=1))


def pair(**overrides: object) -> list[VariantSpec]:
    return [
        preset(name='llama-3.1-8b-h100', variant_name='decode', role='decode', **overrides),
        preset(name='llama-3.1-8b-h100', variant_name='prefill', role='prefill', **overrides),
    ]


def advance(cluster: Cluster, until: float) -> None:
    """Step the fleet to `until` (KV transfers before it are delivered on the way)."""
    cluster.advance(until=until)
    cluster.expire(now=until)


def test_a_request_prefills_on_one_replica_and_decodes_on_another() -> None:
    cluster = Cluster(variants=pair(perf=LINEAR), kv_bandwidth=10e9, kv_latency=0.001)
    request = SimRequest(rid=0, arrival=0.0, input_tokens=1000, output_tokens=10)
    cluster.arrive(request=request, now=0.0)
    assert request.replica == 'prefill-0000'
    advance(cluster, 5.0)
    # Prefill leg: one 1000-token step, 7 + 24 ms.
    assert request.ttft == pytest.approx(0.031)
    assert request.replica == 'decode-0000'
    # The decode leg reaches its replica after the transfer, with the prompt's KV computed; it
    # is what an engine does with 1001 tokens of which 1000 arrive computed, 9 more to generate.
    transfer = 0.001 + 1000 * BYTES / 10e9
    assert transfer == pytest.approx(KvLink(kv_bytes_per_token=BYTES, bandwidth=10e9,
                                            latency=0.001).seconds(1000))  # fmt: skip
    alone = FastReplica(spec=pair(perf=LINEAR)[0], name='x', now=0.0)
    leg = SimRequest(rid=0, arrival=0.031 + transfer, input_tokens=1001, output_tokens=9)
    leg.kv_ready = 1000
    alone.submit(request=leg, now=leg.arrival)
    alone.advance(until=math.inf)
    assert request.finished == pytest.approx(leg.finished, abs=1e-12)
    assert request.output_tokens == 10
    gateway = cluster.gateways[cluster.model_names[0]]
    assert gateway.finished_total == 1
    # Each replica counted its own leg: the prefill one a 1-token request.
    engines = {r.name: r.engine for r in cluster.live}
    prefill, decode = engines['prefill-0000'], engines['decode-0000']
    assert prefill is not None
    assert decode is not None
    assert (prefill.counters.generation_tokens_sum, decode.counters.generation_tokens_sum) == (1, 9)


def test_a_one_token_request_ends_on_its_prefill_replica() -> None:
    cluster = Cluster(variants=pair(perf=LINEAR))
    request = SimRequest(rid=0, arrival=0.0, input_tokens=100, output_tokens=1)
    cluster.arrive(request=request, now=0.0)
    advance(cluster, 1.0)
    assert request.finished == request.first_token == pytest.approx(0.007 + 100 * 24e-6)
    assert cluster.next_transfer() == math.inf


def test_decode_legs_wait_for_a_decode_replica() -> None:
    specs = pair(perf=LINEAR)
    specs[0] = preset(
        name='llama-3.1-8b-h100', variant_name='decode', role='decode', perf=LINEAR,
        initial_replicas=0, startup_delay=10.0,
    )  # fmt: skip
    cluster = Cluster(variants=specs)
    request = SimRequest(rid=0, arrival=0.0, input_tokens=100, output_tokens=5)
    cluster.arrive(request=request, now=0.0)
    advance(cluster, 1.0)
    assert math.isfinite(request.first_token)
    assert math.isnan(request.finished)
    cluster.set_target(variant='decode', target=1, now=1.0)
    advance(cluster, 11.0)
    cluster.promote(now=11.0)
    advance(cluster, 12.0)
    assert request.finished > 11.0
    assert request.replica == 'decode-0000'


@pytest.mark.parametrize('timeout', [0.02, 0.035, 0.06], ids=['prefill', 'transfer', 'decode'])
def test_a_client_time_out_cancels_whichever_leg_holds_it(timeout: float) -> None:
    # 1000 tokens: prefill to 31 ms; transfer 2 ms + 1000 · 131 kB / 12.5 GB/s ≈ 12.5 ms; decode
    # from ~43.5 ms. A time-out in the prefill, in the transfer or in the decode leg fails the
    # request and leaves both engines empty.
    cluster = Cluster(variants=pair(perf=LINEAR), request_timeout=timeout)
    request = SimRequest(rid=0, arrival=0.0, input_tokens=1000, output_tokens=200)
    cluster.arrive(request=request, now=0.0)
    advance(cluster, timeout)
    assert request.failed
    assert request.failure == 'replica-timeout'
    advance(cluster, 1.0)
    assert all(r.engine is not None and r.engine.in_flight == 0 for r in cluster.live)
    assert math.isnan(request.finished)


def poisson(seed: int, n: int) -> Trace:
    rng = np.random.default_rng(seed)
    arrivals = np.sort(rng.uniform(0.0, 120.0, n))
    return Trace(
        name='p',
        arrivals=arrivals,
        input_tokens=np.clip(rng.lognormal(6.6, 0.9, n), 1, 6000).astype(np.int64),
        output_tokens=np.clip(rng.lognormal(5.0, 0.9, n), 1, 1000).astype(np.int64),
    )


def test_both_engines_agree_on_a_disaggregated_fleet() -> None:
    trace = poisson(3, 600)
    variants = pair(initial_replicas=2, num_gpu_blocks=1500)
    results = []
    for engine in ('reference', 'fast'):
        policy = StaticPolicy(targets={'prefill': 2, 'decode': 2}, name='static')
        settings = SimSettings(engine=engine, tail=120.0)
        results.append(run(trace=trace, variants=variants, policy=policy, settings=settings))
    ref, fast = results
    assert all(math.isfinite(r.finished) for r in ref.requests)
    for a, b in zip(ref.requests, fast.requests, strict=True):
        assert b.first_token == pytest.approx(a.first_token, abs=1e-6)
        assert b.finished == pytest.approx(a.finished, abs=1e-6)
        assert (a.replica, a.preemptions) == (b.replica, b.preemptions)
    # Every request's decode leg ran on a decode replica, after its prefill's first token.
    assert {r.variant for r in fast.requests if r.output_tokens > 1} == {'decode'}


def test_the_snapshot_shows_each_pool_with_its_role_and_its_own_lengths() -> None:
    cluster = Cluster(variants=pair())
    observer = Observer(scrape_interval=5.0, scrape_lag=0.0, retention_period=600.0)
    rng = np.random.default_rng(1)
    for rid, t in enumerate(np.arange(0.0, 60.0, 0.5)):
        advance(cluster, float(t))
        if t % 5.0 == 0:
            observer.scrape(now=float(t), cluster=cluster)
        size = int(rng.integers(200, 2000))
        cluster.arrive(
            request=SimRequest(rid=rid, arrival=float(t), input_tokens=size, output_tokens=50),
            now=float(t),
        )
    snapshot = observer.snapshot(now=55.0, cluster=cluster)
    assert {v.name: v.role for v in snapshot.variants} == {'decode': 'decode', 'prefill': 'prefill'}
    by_variant = {r.variant: r for r in snapshot.replicas}
    # A prefill replica generates one token per request; a decode replica the other 49.
    assert by_variant['prefill'].avg_output_tokens == pytest.approx(1.0)
    assert by_variant['decode'].avg_output_tokens == pytest.approx(49.0)
