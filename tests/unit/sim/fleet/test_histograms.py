"""Tests of the replicas' latency histograms: what the engines count and what the snapshot shows.

The engines run a linear step (`PerfModel`: 5 ms + 0.2 ms per prefill token + 0.1 ms per context
token read), so a request served alone has TTFT = 5 ms + 0.2 ms·prompt (its prefill step reads
no context) and, with two output tokens, TPOT = 5 ms + 0.1 ms·prompt (its one decode step reads
the prompt): prompts of 30, 250 and 850 tokens give TPOTs of 8, 30 and 90 ms.
"""

from __future__ import annotations

import numpy as np
import pytest

from llmscaler.analyze.validity import histogram_violation
from llmscaler.domain.snapshot import LatencyHistogram, Snapshot
from llmscaler.sim.fleet.cluster import Cluster
from llmscaler.sim.fleet.observe import Observer, ReplicaSample
from llmscaler.sim.fleet.pods import EngineKind, engine_factory
from llmscaler.sim.hardware.presets import preset
from llmscaler.sim.vllm.latency_buckets import ITL_BUCKETS, TTFT_BUCKETS
from llmscaler.sim.vocabulary import PerfModel, SimRequest, VariantSpec

LINEAR = PerfModel(
    step_overhead=0.005, decode_per_seq=0.0, prefill_per_token=0.0002, kv_read_per_token=0.0001
)
KINDS = pytest.mark.parametrize('kind', ['fast', 'reference'])
# (prompt, output tokens): TPOT 8, 30, 90 ms and one single-token request (TPOT 0);
# TTFT 11, 55, 175 and 25 ms.
REQUESTS = ((30, 2), (250, 2), (850, 2), (100, 1))


def spec(**overrides: object) -> VariantSpec:
    values: dict[str, object] = {'perf': LINEAR, 'initial_replicas': 1, 'max_replicas': 1}
    values.update(overrides)
    return preset(name='llama-3.1-8b-h100', variant_name='h100', **values)


def le(histogram: LatencyHistogram, bound: float) -> float:
    return histogram.counts[histogram.bounds.index(bound)]


@KINDS
def test_engine_counts_each_ttft_and_each_requests_mean_tpot(kind: EngineKind) -> None:
    engine = engine_factory(kind=kind)(spec=spec(), name='h100-0000', now=0.0)
    for rid, (prompt, out) in enumerate(REQUESTS):
        engine.submit(
            request=SimRequest(rid=rid, arrival=float(rid), input_tokens=prompt, output_tokens=out),
            now=float(rid),
        )
        assert len(engine.advance(until=rid + 0.9)) == 1  # served alone
    c = engine.counters
    tpot = dict.fromkeys((0.01, 0.05, 0.1), 0)
    ttft = dict.fromkeys((0.02, 0.04, 0.06, 0.25), 0)
    for bounds, buckets, want in (
        (ITL_BUCKETS, c.tpot_buckets, tpot),
        (TTFT_BUCKETS, c.ttft_buckets, ttft),
    ):
        for bound in want:
            want[bound] = buckets[bounds.index(bound)]
        assert sum(buckets) == len(REQUESTS)
        assert len(buckets) == len(bounds) + 1
    # 8 ms and the single token's 0 in le=0.01, 30 ms in le=0.05, 90 ms in le=0.1.
    assert tpot == {0.01: 2, 0.05: 1, 0.1: 1}
    assert ttft == {0.02: 1, 0.04: 1, 0.06: 1, 0.25: 1}
    assert c.ttft_count == len(REQUESTS)


def scrape_run(
    *, kind: EngineKind, until: float, arrivals: dict[float, int]
) -> tuple[Cluster, Observer]:
    """One replica scraped every 5 s from 0 to `until`; request i of `REQUESTS` arrives at the
    time `arrivals` maps to it."""
    cluster = Cluster(variants=[spec()], engine=kind)
    obs = Observer(scrape_interval=5.0, scrape_lag=10.0, retention_period=600.0)
    pending = sorted(arrivals.items())
    t = 0.0
    while t <= until:
        while pending and pending[0][0] <= t:
            at, i = pending.pop(0)
            cluster.advance(until=at)
            prompt, out = REQUESTS[i]
            cluster.arrive(
                request=SimRequest(rid=i, arrival=at, input_tokens=prompt, output_tokens=out),
                now=at,
            )
        cluster.advance(until=t)
        obs.scrape(now=t, cluster=cluster)
        t += 5.0
    return cluster, obs


@KINDS
def test_snapshot_shows_the_windows_increase_in_vllms_buckets(kind: EngineKind) -> None:
    # Scrapes at 0, 5, ..., 70; at now = 70 the minute is (0, 60]: from the scrape at 5 to the
    # one at 60, which saw the four requests of 20–23 s.
    arrivals = {20.0: 0, 21.0: 1, 22.0: 2, 23.0: 3}
    cluster, obs = scrape_run(kind=kind, until=70.0, arrivals=arrivals)
    (m,) = obs.snapshot(now=70.0, cluster=cluster).replicas
    tpot, ttft = m.tpot_histogram, m.ttft_histogram
    assert tpot is not None
    assert ttft is not None
    assert (tpot.bounds, ttft.bounds) == (ITL_BUCKETS, TTFT_BUCKETS)
    assert (le(tpot, 0.01), le(tpot, 0.025), le(tpot, 0.05), le(tpot, 0.075)) == (2, 2, 3, 3)
    assert (le(tpot, 0.1), tpot.counts[-1], tpot.total) == (4, 4, 4)
    assert (le(ttft, 0.01), le(ttft, 0.02), le(ttft, 0.04), le(ttft, 0.06)) == (0, 1, 2, 3)
    assert (le(ttft, 0.1), le(ttft, 0.25), ttft.total) == (3, 4, 4)
    assert histogram_violation(tpot) == histogram_violation(ttft) == ''
    # The same window as the mean TTFT: (11 + 55 + 175 + 25) ms over 4.
    assert m.avg_ttft == pytest.approx(0.266 / 4)


@KINDS
def test_a_quiet_window_gives_an_empty_histogram_and_one_sample_none(kind: EngineKind) -> None:
    cluster, obs = scrape_run(kind=kind, until=150.0, arrivals={20.0: 0, 21.0: 1})
    # now = 150: the minute (80, 140] saw nothing finish.
    (m,) = obs.snapshot(now=150.0, cluster=cluster).replicas
    for histogram in (m.ttft_histogram, m.tpot_histogram):
        assert histogram is not None
        assert histogram.total == 0
        assert set(histogram.counts) == {0.0}
        assert histogram_violation(histogram) == ''
    assert m.avg_ttft is None
    # now = 10: only the scrape at 0 is visible, and an increase needs two samples.
    cluster, obs = scrape_run(kind=kind, until=0.0, arrivals={})
    (m,) = obs.snapshot(now=10.0, cluster=cluster).replicas
    assert (m.ttft_histogram, m.tpot_histogram) == (None, None)


def test_samples_without_buckets_give_no_histogram() -> None:
    """A replica exposing no such histogram (an older vLLM) shows None, never an empty one."""
    cluster = Cluster(variants=[spec()])
    obs = Observer(scrape_interval=5.0, scrape_lag=10.0, retention_period=600.0)
    for k in range(13):
        obs.record_replica(
            name='h100-0000',
            sample=ReplicaSample(
                time=5.0 * k, kv_usage=0.1, waiting=0, running=0, prompt_tokens=0.0,
                generation_tokens=0.0, success=0.0, ttft_sum=0.0, ttft_count=0.0, itl_sum=0.0,
                itl_count=0.0, dispatched=0,
            ),
        )  # fmt: skip
    (m,) = obs.snapshot(now=70.0, cluster=cluster).replicas
    assert (m.ttft_histogram, m.tpot_histogram) == (None, None)


def busy_run(kind: EngineKind) -> list[Snapshot]:
    """Two replicas (the preset's own step model) under a random stream of about 5 req/s; a
    snapshot every 5 s after each scrape."""
    rng = np.random.default_rng(11)
    times = np.cumsum(rng.exponential(0.2, size=600))
    prompts = rng.integers(20, 2000, size=600)
    outs = rng.integers(1, 300, size=600)
    roofline = preset(
        name='llama-3.1-8b-h100', variant_name='h100', initial_replicas=2, max_replicas=2
    )
    cluster = Cluster(variants=[roofline], engine=kind)
    obs = Observer(scrape_interval=5.0, scrape_lag=10.0, retention_period=600.0)
    snaps: list[Snapshot] = []
    i, t = 0, 0.0
    while t <= float(times[-1]) + 60.0:
        while i < len(times) and times[i] <= t:
            cluster.advance(until=float(times[i]))
            cluster.arrive(
                request=SimRequest(
                    rid=i,
                    arrival=float(times[i]),
                    input_tokens=int(prompts[i]),
                    output_tokens=int(outs[i]),
                ),
                now=float(times[i]),
            )
            i += 1
        cluster.advance(until=t)
        obs.scrape(now=t, cluster=cluster)
        snaps.append(obs.snapshot(now=t, cluster=cluster))
        t += 5.0
    return snaps


def test_snapshots_are_deterministic_valid_and_agree_across_engines() -> None:
    fast, again, reference = busy_run('fast'), busy_run('fast'), busy_run('reference')
    assert fast == again
    seen = 0.0
    for snap, ref in zip(fast, reference, strict=True):
        for m, r in zip(snap.replicas, ref.replicas, strict=True):
            assert (m.ttft_histogram, m.tpot_histogram) == (r.ttft_histogram, r.tpot_histogram)
            for histogram in (m.ttft_histogram, m.tpot_histogram):
                assert histogram_violation(histogram) == ''
            if m.ttft_histogram is not None and m.tpot_histogram is not None:
                seen += m.tpot_histogram.total
                # Every TTFT of the window is in its histogram: the mean's count is its total.
                assert (m.avg_ttft is None) == (m.ttft_histogram.total == 0)
    assert seen > 5000  # the windows did hold requests
