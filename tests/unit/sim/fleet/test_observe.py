"""Tests of the controller's view: windows, lag, freshness, pool counters, variant facts.

Most tests feed hand-made samples (`record_replica` / `record_gateway`) to an observer of a
one-replica fleet (the real engine on the Llama-3.1-8B/H100 preset), with the defaults of the
simulator: scrape every 5 s, lag 10 s, retention 600 s. So at `now` the horizon is h = now − 10,
the 1-minute window is (h − 60, h] and the 5-minute one (h − 300, h].
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmscaler.domain.snapshot import EngineParams, PoolMetrics, ReplicaMetrics
from llmscaler.sim.fleet.cluster import Cluster
from llmscaler.sim.fleet.observe import GatewaySample, Observer, ReplicaSample, engine_params
from llmscaler.sim.hardware.presets import preset
from llmscaler.sim.vocabulary import PerfModel, SimRequest, VariantSpec

UNIT_STEP = PerfModel(
    step_overhead=1.0, decode_per_seq=0.0, prefill_per_token=0.0, kv_read_per_token=0.0
)
POD = 'h100-0000'


def spec(**overrides: object) -> VariantSpec:
    values: dict[str, object] = {'perf': UNIT_STEP, 'initial_replicas': 1, 'max_replicas': 4}
    values.update(overrides)
    return preset(name='llama-3.1-8b-h100', variant_name='h100', **values)


def observer() -> Observer:
    return Observer(scrape_interval=5.0, scrape_lag=10.0, retention_period=600.0)


def sample(t: float, **values: float) -> ReplicaSample:
    fields: dict[str, float] = {
        'kv_usage': 0.1,
        'waiting': 0,
        'running': 1,
        'prompt_tokens': 0.0,
        'generation_tokens': 0.0,
        'success': 0.0,
        'ttft_sum': 0.0,
        'ttft_count': 0.0,
        'itl_sum': 0.0,
        'itl_count': 0.0,
        'dispatched': 0,
    }
    fields.update(values)
    return ReplicaSample(
        time=t,
        kv_usage=fields['kv_usage'],
        waiting=int(fields['waiting']),
        running=int(fields['running']),
        prompt_tokens=fields['prompt_tokens'],
        generation_tokens=fields['generation_tokens'],
        success=fields['success'],
        ttft_sum=fields['ttft_sum'],
        ttft_count=fields['ttft_count'],
        itl_sum=fields['itl_sum'],
        itl_count=fields['itl_count'],
        dispatched=int(fields['dispatched']),
    )


def gateway(t: float, *, queue: int = 0, finished: int = 0, arrivals: int = 0) -> GatewaySample:
    return GatewaySample(
        time=t, queue_size=queue, queue_bytes=queue * 400, finished=finished, arrivals=arrivals
    )


def feed(obs: Observer, *, until: float, replica: object = None, pool: object = None) -> None:
    """Scrapes at 0, 5, ..., until: replica(t) and pool(t) give each sample."""
    steps = int(until // 5) + 1
    for k in range(steps):
        t = 5.0 * k
        obs.record_replica(name=POD, sample=replica(t) if callable(replica) else sample(t))
        obs.record_gateway(sample=pool(t) if callable(pool) else gateway(t))


def only_replica(obs: Observer, cluster: Cluster, now: float) -> ReplicaMetrics:
    snap = obs.snapshot(now=now, cluster=cluster)
    assert len(snap.replicas) == 1
    return snap.replicas[0]


def only_pool(obs: Observer, cluster: Cluster, now: float) -> PoolMetrics:
    snap = obs.snapshot(now=now, cluster=cluster)
    assert len(snap.pools) == 1
    return snap.pools[0]


# ---- settings --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ('interval', 'lag', 'retention', 'what'),
    [
        (0.0, 10.0, 600.0, 'scrape_interval'),
        (math.inf, 10.0, 600.0, 'scrape_interval'),
        (5.0, -1.0, 600.0, 'scrape_lag'),
        (5.0, math.nan, 600.0, 'scrape_lag'),
        (5.0, 10.0, 0.0, 'retention_period'),
    ],
)
def test_bad_settings(interval: float, lag: float, retention: float, what: str) -> None:
    with pytest.raises(ValueError, match=what):
        Observer(scrape_interval=interval, scrape_lag=lag, retention_period=retention)


# ---- gauges: the 1-minute max, lag and freshness ---------------------------------------------


def kv_profile(t: float) -> ReplicaSample:
    kv = {40.0: 0.9, 95.0: 0.95}.get(t, 0.1)
    waiting = {45.0: 7, 100.0: 9}.get(t, 2)
    return sample(t, kv_usage=kv, waiting=waiting, running=3 if t < 90 else 4)


def test_kv_and_queue_are_one_minute_max_of_visible_samples() -> None:
    cluster, obs = Cluster(variants=[spec()]), observer()
    feed(obs, until=100.0, replica=kv_profile)
    # now 100 → h = 90, window (30, 90]: the 0.9 at 40 and the 7 waiting at 45 are in it;
    # 0.95 at 95 and 9 at 100 are newer than the horizon
    m = only_replica(obs, cluster, 100.0)
    assert (m.kv_usage, m.queue_length, m.observed_at) == (0.9, 7.0, 90.0)
    assert m.running_requests == 4.0  # the newest visible sample (90)
    # now 104.999 → h = 94.999: the sample at 95 is still invisible
    m = only_replica(obs, cluster, 104.999)
    assert (m.kv_usage, m.observed_at) == (0.9, 90.0)
    # now 105 → h = 95, window (35, 95]: 0.95 visible and the max
    m = only_replica(obs, cluster, 105.0)
    assert (m.kv_usage, m.observed_at) == (0.95, 95.0)
    # now 110 → h = 100, window (40, 100] is left-open: 40 is out, 0.95 and 9 in
    m = only_replica(obs, cluster, 110.0)
    assert (m.kv_usage, m.queue_length, m.observed_at) == (0.95, 9.0, 100.0)


def test_old_sample_leaves_the_window() -> None:
    cluster, obs = Cluster(variants=[spec()]), observer()
    feed(obs, until=100.0, replica=kv_profile)
    # keep the fleet scraped up to 200 with quiet samples; at now 170 → h = 160, window (100, 160]
    for k in range(21, 41):
        obs.record_replica(name=POD, sample=sample(5.0 * k))
        obs.record_gateway(sample=gateway(5.0 * k))
    m = only_replica(obs, cluster, 170.0)
    assert (m.kv_usage, m.queue_length) == (0.1, 0.0)


def test_nothing_is_visible_before_the_lag() -> None:
    cluster, obs = Cluster(variants=[spec()]), observer()
    feed(obs, until=5.0)
    # now 9.99 → h = −0.01: the sample at 0 is not visible yet
    snap = obs.snapshot(now=9.99, cluster=cluster)
    assert snap.replicas == ()
    assert snap.pools == ()
    assert [v.name for v in snap.variants] == ['h100']
    m = only_replica(obs, cluster, 10.0)
    assert m.observed_at == 0.0
    assert m.kv_capacity_tokens == 27_500 * 16


# ---- rates and averages ----------------------------------------------------------------------


def counters(t: float) -> ReplicaSample:
    """One request finished and dispatched every 5 s; the prompt doubles after 150 s and the
    TTFT grows from 0.2 to 0.5 s after 370 s; every request has 99 gaps of 10 ms."""
    done = t / 5
    prompt = 1000 * done if t <= 150 else 30_000 + 2000 * (t - 150) / 5
    ttft = 0.2 * done if t <= 370 else 0.2 * 74 + 0.5 * (t - 370) / 5
    return sample(
        t,
        success=done,
        prompt_tokens=prompt,
        generation_tokens=100 * done,
        ttft_sum=ttft,
        ttft_count=done,
        itl_sum=0.99 * done,
        itl_count=99 * done,
        dispatched=int(done),
    )


def test_five_minute_token_averages_and_one_minute_latencies() -> None:
    cluster, obs = Cluster(variants=[spec()]), observer()
    feed(obs, until=410.0, replica=counters)
    m = only_replica(obs, cluster, 410.0)
    # h = 400; 5-minute window (100, 400]: first sample 105, newest 400.
    # Δsuccess = (400 − 105)/5 = 59; Δprompt = (30000 + 2000·50) − 1000·21 = 109000
    assert m.avg_input_tokens == pytest.approx(109_000 / 59)
    assert m.avg_output_tokens == pytest.approx(100.0)
    # 1-minute window (340, 400]: first 345, newest 400: Δcount = 11;
    # Δttft_sum = (0.2·74 + 0.5·6) − 0.2·69 = 17.8 − 13.8 = 4.0
    assert m.avg_ttft == pytest.approx(4.0 / 11)
    assert m.avg_itl == pytest.approx(0.01)
    # 11 dispatches over 400 − 345 = 55 s
    assert m.arrival_rate == pytest.approx(0.2)
    assert m.prefix_cache_hit_rate is None


def test_averages_are_none_without_finished_requests() -> None:
    cluster, obs = Cluster(variants=[spec()]), observer()
    feed(obs, until=100.0, replica=lambda t: sample(t, success=3.0, prompt_tokens=300.0))
    m = only_replica(obs, cluster, 100.0)
    assert m.avg_input_tokens is None
    assert m.avg_output_tokens is None
    assert m.avg_ttft is None
    assert m.avg_itl is None
    assert m.arrival_rate == 0.0


def test_single_sample_has_no_rate() -> None:
    cluster, obs = Cluster(variants=[spec()]), observer()
    feed(obs, until=0.0, replica=lambda t: sample(t, dispatched=4, success=2.0))
    m = only_replica(obs, cluster, 10.0)
    assert m.arrival_rate is None
    assert m.avg_input_tokens is None


# ---- pool ------------------------------------------------------------------------------------


def test_request_count_covers_the_retention_window_behind_the_lag() -> None:
    cluster, obs = Cluster(variants=[spec()]), observer()
    # one request finished every 5 s until t = 100, none after
    feed(obs, until=700.0, pool=lambda t: gateway(t, finished=int(min(t, 100.0) // 5)))
    # now 700 → h = 690; window from 690 − 600 = 90: base = sample at 90 (18), newest 690 (20)
    assert only_pool(obs, cluster, 700.0).request_count == 2.0
    obs.record_gateway(sample=gateway(705.0, finished=20))
    # now 709.999 → h = 699.999; base = sample at 95 (19): the request of 100 still counts
    assert only_pool(obs, cluster, 709.999).request_count == 1.0
    obs.record_gateway(sample=gateway(710.0, finished=20))
    # now 710 → h = 700, base = sample at 100 (20): nothing left in the window
    assert only_pool(obs, cluster, 710.0).request_count == 0.0
    # long after, the buffer only keeps what the window needs and the count stays right
    for k in range(143, 400):
        obs.record_gateway(sample=gateway(5.0 * k, finished=20 + k))
    # now 2000 → h = 1990 (newest visible 1990: 20 + 398), base at 1390 (20 + 278): 120
    assert only_pool(obs, cluster, 2000.0).request_count == 120.0


def test_request_count_from_the_start_before_a_full_window() -> None:
    cluster, obs = Cluster(variants=[spec()]), observer()
    feed(obs, until=60.0, pool=lambda t: gateway(t, finished=int(t // 5)))
    # now 60 → h = 50, the window reaches before 0: everything since the start, 10 requests
    assert only_pool(obs, cluster, 60.0).request_count == 10.0


def test_pool_queue_and_arrival_rate() -> None:
    cluster, obs = Cluster(variants=[spec()]), observer()
    feed(
        obs,
        until=120.0,
        pool=lambda t: gateway(t, queue=int(t // 10), arrivals=int(2 * t // 5)),
    )
    p = only_pool(obs, cluster, 120.0)
    # newest visible: 110 → queue 11, bytes 11 × 400
    assert (p.observed_at, p.queue_size, p.queue_bytes) == (110.0, 11.0, 4400.0)
    # (50, 110]: first sample 55 (22 arrivals), newest 110 (44): 22 / 55 s
    assert p.arrival_rate == pytest.approx(0.4)
    assert (p.model_id, p.namespace) == ('meta-llama/Llama-3.1-8B-Instruct', 'default')


# ---- the fleet: variants, scraping, terminating replicas -------------------------------------


def test_variant_facts_follow_the_fleet() -> None:
    cluster, obs = Cluster(variants=[spec(initial_replicas=2, min_replicas=1)]), observer()
    cluster.set_target(variant='h100', target=4, now=0.0)
    v = obs.snapshot(now=0.0, cluster=cluster).variants[0]
    assert (v.current_replicas, v.ready_replicas, v.pending_replicas) == (4, 2, 2)
    assert (v.min_replicas, v.max_replicas) == (1, 4)
    assert v.cost == pytest.approx(3.90)  # one H100 at $3.90/GPU-hour
    assert (v.accelerator, v.gpus_per_replica, v.role) == ('H100', 1, 'both')
    assert v.model_id == 'meta-llama/Llama-3.1-8B-Instruct'
    assert v.engine == EngineParams(
        engine='vllm',
        max_num_seqs=1024,
        max_num_batched_tokens=8192,
        max_model_len=131_072,
        tensor_parallel_size=1,
        block_size=16,
    )
    cluster.promote(now=90.0)
    v = obs.snapshot(now=90.0, cluster=cluster).variants[0]
    assert (v.current_replicas, v.ready_replicas, v.pending_replicas) == (4, 4, 0)


def test_engine_params_of_a_tensor_parallel_preset() -> None:
    big = preset(name='llama-3.1-70b-h100-tp4', variant_name='big')
    params = engine_params(spec=big)
    assert params.tensor_parallel_size == 4
    assert params.num_gpu_blocks_override is None


def test_scrape_reads_the_engines_and_skips_terminating_replicas() -> None:
    # 1001 blocks → 1000 usable; a 1600-token prompt holds 100 blocks → kv 0.1
    cluster = Cluster(variants=[spec(initial_replicas=2, num_gpu_blocks=1001)])
    obs = observer()
    req = SimRequest(rid=0, arrival=0.0, input_tokens=1600, output_tokens=50)
    cluster.arrive(request=req, now=0.0)
    cluster.advance(until=0.5)  # the first step (0 → 1) admits and prefills it
    obs.scrape(now=0.5, cluster=cluster)
    snap = obs.snapshot(now=10.5, cluster=cluster)
    assert [m.pod for m in snap.replicas] == ['h100-0000', 'h100-0001']
    busy = snap.replicas[0]
    assert busy.kv_usage == pytest.approx(0.1)
    assert busy.tokens_in_use == round(0.1 * 1001 * 16)
    assert (busy.queue_length, busy.running_requests) == (0.0, 1.0)
    assert busy.num_gpu_blocks == 1001
    assert snap.pools[0].queue_size == 0.0
    # h100-0001 (idle, newest) is removed at once; h100-0000 drains: it is terminating
    cluster.set_target(variant='h100', target=0, now=1.0)
    snap = obs.snapshot(now=11.0, cluster=cluster)
    assert snap.replicas == ()
    assert snap.variants[0].current_replicas == 0


def test_pending_replicas_are_not_scraped_and_new_ones_appear_after_the_lag() -> None:
    cluster, obs = Cluster(variants=[spec(initial_replicas=1)]), observer()
    cluster.set_target(variant='h100', target=2, now=0.0)  # ready at 90
    for k in range(0, 21):
        t = 5.0 * k
        cluster.promote(now=t)
        obs.scrape(now=t, cluster=cluster)
    # first scrape of h100-0001 at 90, visible from now = 100
    assert [m.pod for m in obs.snapshot(now=99.0, cluster=cluster).replicas] == ['h100-0000']
    snap = obs.snapshot(now=100.0, cluster=cluster)
    assert [(m.pod, m.observed_at) for m in snap.replicas] == [
        ('h100-0000', 90.0),
        ('h100-0001', 90.0),
    ]


def test_snapshot_is_cached_until_a_new_sample_or_a_fleet_change() -> None:
    cluster, obs = Cluster(variants=[spec()]), observer()
    feed(obs, until=20.0)
    first = obs.snapshot(now=20.0, cluster=cluster)
    assert obs.snapshot(now=24.0, cluster=cluster) is first  # same newest visible sample (10)
    cluster.set_target(variant='h100', target=2, now=24.0)
    changed = obs.snapshot(now=24.0, cluster=cluster)
    assert changed is not first
    assert changed.variants[0].current_replicas == 2


@settings(max_examples=50, deadline=None)
@given(
    kvs=st.lists(st.floats(min_value=0.0, max_value=1.0), min_size=1, max_size=120),
    now=st.floats(min_value=0.0, max_value=700.0),
)
def test_kv_is_max_of_the_visible_minute(kvs: list[float], now: float) -> None:
    cluster, obs = Cluster(variants=[spec()]), observer()
    for k, kv in enumerate(kvs):
        obs.record_replica(name=POD, sample=sample(5.0 * k, kv_usage=kv))
        obs.record_gateway(sample=gateway(5.0 * k))
    horizon = now - 10.0
    visible = [(5.0 * k, kv) for k, kv in enumerate(kvs) if 5.0 * k <= horizon]
    snap = obs.snapshot(now=now, cluster=cluster)
    if not visible:
        assert snap.replicas == ()
        return
    in_minute = [kv for t, kv in visible if t > horizon - 60.0]
    expected = max(in_minute) if in_minute else visible[-1][1]
    assert snap.replicas[0].kv_usage == expected
    assert snap.replicas[0].observed_at == visible[-1][0]
