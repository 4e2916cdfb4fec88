"""Tests of the token-based saturation analyzer (WVA v0.9.0,
internal/engines/analyzers/saturation_v2/) with worked numbers.

Unless a test says otherwise: kvCacheThreshold 0.8, queueLengthThreshold 5, accelerator H100,
one GPU, a KV cache of 16000 tokens (1000 blocks × 16), so k1 = ⌊16000 × 0.8⌋ = 12800.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmscaler.analyze.learning import capacity_knowledge as ck
from llmscaler.analyze.saturation import k2_history as kh
from llmscaler.analyze.saturation import tokens as stk
from llmscaler.config.resolved import CoreSettings, SaturationConfig
from llmscaler.domain.basics import Role
from llmscaler.domain.snapshot import EngineParams, PoolMetrics, ReplicaMetrics, Variant
from llmscaler.domain.state import CapacityRecord, K2Sample

NOW = 1_000_000.0
DAY = 24 * 3600.0
SHORT_KEY = 'm|H100|1|short'


def variant(
    name: str = 'v1',
    *,
    current: int = 1,
    pending: int = 0,
    role: Role = 'both',
    accelerator: str = 'H100',
    engine: EngineParams | None = None,
) -> Variant:
    return Variant(
        name=name,
        namespace='ns',
        model_id='m',
        accelerator=accelerator,
        role=role,
        current_replicas=current,
        ready_replicas=max(0, current - pending),
        pending_replicas=pending,
        max_replicas=10,
        engine=engine,
    )


def replica(
    pod: str = 'p1',
    name: str = 'v1',
    *,
    usage: float = 0.25,
    queue: float = 0.0,
    blocks: int | None = 1000,
    inp: float | None = 100.0,
    out: float | None = 50.0,
    hit: float | None = None,
) -> ReplicaMetrics:
    return ReplicaMetrics(
        pod=pod,
        variant=name,
        namespace='ns',
        observed_at=NOW,
        kv_usage=usage,
        queue_length=queue,
        num_gpu_blocks=blocks,
        block_size=16 if blocks is not None else None,
        avg_input_tokens=inp,
        avg_output_tokens=out,
        prefix_cache_hit_rate=hit,
    )


def run(
    variants: Sequence[Variant],
    replicas: Sequence[ReplicaMetrics] = (),
    *,
    pool: PoolMetrics | None = None,
    config: SaturationConfig | None = None,
    history: Mapping[str, tuple[K2Sample, ...]] | None = None,
    knowledge: Mapping[str, CapacityRecord] | None = None,
    now: float = NOW,
) -> stk.TokenAnalysis:
    return stk.analyze(
        model_id='m',
        namespace='ns',
        variants=variants,
        replicas=replicas,
        pool=pool,
        config=config or SaturationConfig(),
        settings=CoreSettings(),
        history=history or {},
        knowledge=knowledge or {},
        now=now,
    )


def pool(size: float, size_bytes: float = 0.0) -> PoolMetrics:
    return PoolMetrics(
        model_id='m', namespace='ns', observed_at=NOW, queue_size=size, queue_bytes=size_bytes
    )


def kkey(name: str) -> str:
    return ck.knowledge_key(namespace='ns', model_id='m', variant=name)


def live_record(
    name: str,
    capacity: float,
    *,
    at: float = NOW,
    engine: EngineParams | None = None,
    accelerator: str = 'H100',
) -> CapacityRecord:
    return CapacityRecord(
        namespace='ns',
        model_id='m',
        variant=name,
        accelerator=accelerator,
        gpus_per_replica=1,
        effective_capacity=capacity,
        total_kv_capacity_tokens=16000,
        source='live',
        updated_at=at,
        engine=engine,
    )


# --- per-replica capacity -------------------------------------------------------------------


def test_k1_fallback_when_nothing_else_applies() -> None:
    # tokens = round(0.25 × 16000) = 4000; queue 0 < 5; no history, no engine → k2 = k1 = 12800
    out = run([variant()], [replica()])
    (r,) = out.replicas
    assert (r.k1, r.k2, r.k_eff, r.demand, r.source, r.saturated) == (
        12800,
        12800,
        12800,
        4000,
        'P4-k1',
        False,
    )
    (v,) = out.result.variants
    assert (v.per_replica_capacity, v.replica_count, v.total_demand, v.reason) == (
        12800.0,
        1,
        4000.0,
        'P4-k1',
    )
    assert out.history_updates == {}


def test_p1_observed_and_recorded() -> None:
    # tokens = 0.5 × 16000 = 8000, queue 6 >= 5 → k2 = 8000, k_eff = min(12800, 8000) = 8000
    # demand = 8000 + 6 × (100 + 50) = 8900 >= 8000 → saturated
    out = run([variant()], [replica(usage=0.5, queue=6)])
    (r,) = out.replicas
    assert (r.k2, r.k_eff, r.demand, r.source, r.saturated) == (8000, 8000, 8900, 'P1-obs', True)
    assert out.history_updates == {SHORT_KEY: (K2Sample(value=8000.0, at=NOW),)}


def test_p1_needs_tokens_in_use() -> None:
    out = run([variant()], [replica(usage=0.0, queue=9)])
    assert out.replicas[0].source == 'P4-k1'
    assert out.history_updates == {}


def test_queue_threshold_is_truncated_to_int() -> None:
    # int(5.9) = 5: a queue of 5 is saturated
    out = run(
        [variant()],
        [replica(usage=0.5, queue=5)],
        config=SaturationConfig(queue_length_threshold=5.9),
    )
    assert out.replicas[0].source == 'P1-obs'


def test_p2_historical_floor_of_mean() -> None:
    history = {SHORT_KEY: (K2Sample(value=8000.0, at=NOW - 60), K2Sample(6001.0, NOW - 30))}
    # mean = (8000 + 6001) / 2 = 7000.5 → ⌊⌋ = 7000; queue 2 < 5
    out = run([variant()], [replica(queue=2)], history=history)
    (r,) = out.replicas
    assert (r.k2, r.k_eff, r.source) == (7000, 7000, 'P2-hist')
    assert out.history_updates == {}  # P2 only reads the history


def test_p2_is_per_output_bucket() -> None:
    history = {SHORT_KEY: (K2Sample(value=8000.0, at=NOW),)}
    # O = 600 → long bucket, which has no history: k1
    out = run([variant()], [replica(out=600.0)], history=history)
    assert out.replicas[0].source == 'P4-k1'


def test_p3_derived_from_engine_params() -> None:
    # KV = 25000 × 16 = 400000, k1 = 320000; B = 8192, S = 256, I = 1000, O = 200:
    # N = min(8192·200/1200, 256) = min(1365.33, 256) = 256; k2 = ⌊256 × 1100⌋ = 281600
    out = run(
        [variant(engine=EngineParams())],
        [replica(blocks=25000, usage=0.1, inp=1000.0, out=200.0)],
    )
    (r,) = out.replicas
    assert (r.k1, r.k2, r.k_eff, r.source) == (320000, 281600, 281600, 'P3-k2')
    assert r.demand == 40000  # 0.1 × 400000, queue 0


def test_p3_above_k1_is_memory_bound() -> None:
    out = run([variant(engine=EngineParams())], [replica(inp=1000.0, out=200.0)])
    (r,) = out.replicas
    assert (r.k1, r.k2, r.k_eff, r.source) == (12800, 281600, 12800, 'P3-k2')


def test_p3_needs_output_tokens() -> None:
    out = run([variant(engine=EngineParams())], [replica(out=None)])
    assert out.replicas[0].source == 'P4-k1'


def test_history_expires_after_24_hours() -> None:
    history = {SHORT_KEY: (K2Sample(value=8000.0, at=0.0),)}
    kept = run([variant()], [replica()], history=history, now=DAY)
    assert kept.replicas[0].source == 'P2-hist'
    assert kept.history_updates == {}
    # 1 s later the sample is 86401 s old: ignored even when the caller has not expired it yet
    gone = run([variant()], [replica()], history=history, now=DAY + 1)
    assert gone.replicas[0].source == 'P4-k1'
    # and the caller's once-per-cycle expiry drops it from the memory
    assert kh.expire(history=history, now=DAY + 1, ttl=CoreSettings().k2_history_ttl) == {}


def test_expired_samples_do_not_count_in_a_new_window() -> None:
    # An old sample (age 86401 s) and a P1 observation now (tokens 8000): the new window keeps
    # both (the caller expires), but a second replica's P2 mean sees only the live sample: 8000.
    history = {SHORT_KEY: (K2Sample(value=2000.0, at=NOW - DAY - 1),)}
    out = run(
        [variant(current=2)],
        [replica('p1', usage=0.5, queue=6), replica('p2')],
        history=history,
    )
    assert [(r.pod, r.k2, r.source) for r in out.replicas] == [
        ('p1', 8000, 'P1-obs'),
        ('p2', 8000, 'P2-hist'),
    ]
    assert out.history_updates == {SHORT_KEY: (*history[SHORT_KEY], K2Sample(8000.0, NOW))}


def test_in_cycle_history_and_lower_median_label() -> None:
    # p-a: P1 with 8000; p-b: P1 with round(0.625 × 16000) = 10000; p-c: queue 0 → P2 with the
    # mean of this cycle's samples (8000 + 10000) / 2 = 9000. Median of {8000, 9000, 10000} = 9000,
    # the lower-median instance (index (3-1)//2 = 1 by k_eff) is p-c → P2-hist.
    out = run(
        [variant(current=3)],
        [replica('p-c'), replica('p-b', usage=0.625, queue=7), replica('p-a', usage=0.5, queue=6)],
    )
    assert [(r.pod, r.k_eff, r.source) for r in out.replicas] == [
        ('p-a', 8000, 'P1-obs'),
        ('p-b', 10000, 'P1-obs'),
        ('p-c', 9000, 'P2-hist'),
    ]
    (v,) = out.result.variants
    assert (v.per_replica_capacity, v.replica_count, v.reason) == (9000.0, 3, 'P2-hist')


def test_even_median_truncates_the_mean() -> None:
    # k_eff 8000 and round(0.6250625 × 16000) = 10001: (8000 + 10001) / 2 = 9000.5 → 9000;
    # the lower median is the 8000 instance (P1-obs)
    out = run(
        [variant(current=2)],
        [replica('p1', usage=0.5, queue=6), replica('p2', usage=0.6250625, queue=6)],
    )
    (v,) = out.result.variants
    assert (v.per_replica_capacity, v.reason) == (9000.0, 'P1-obs')


def test_reason_is_the_label_of_the_lower_median_instance() -> None:
    # p1: short bucket, P1 with 8000; p2: O = 600 (long bucket, no history) → P4 with 12800.
    # Sorted by k_eff: [8000 (P1-obs), 12800 (P4-k1)]; index (2-1)//2 = 0 → P1-obs.
    # Median (8000 + 12800) / 2 = 10400.
    out = run(
        [variant(current=2)],
        [replica('p1', usage=0.5, queue=6), replica('p2', out=600.0)],
    )
    (v,) = out.result.variants
    assert (v.per_replica_capacity, v.reason) == (10400.0, 'P1-obs')


@pytest.mark.parametrize(
    ('values', 'expected'),
    [([], 0), ([42], 42), ([5, 1, 3], 3), ([1, 3, 5, 7], 4), ([8000, 10001], 9000), ([2, 3], 2)],
)
def test_integer_median(values: list[int], expected: int) -> None:
    assert stk.integer_median(values=values) == expected


@pytest.mark.parametrize(
    ('role', 'expected'),
    # queue 4, I = 1000, O = 200: prefill 4 × 1000 = 4000; otherwise 4 × 1200 = 4800
    [('prefill', 4000), ('decode', 4800), ('both', 4800)],
)
def test_waiting_queue_demand_per_role(role: Role, expected: int) -> None:
    got = stk.waiting_queue_demand(queue_length=4, avg_input=1000.0, avg_output=200.0, role=role)
    assert got == expected


@pytest.mark.parametrize(
    ('queue', 'inp', 'out'),
    [
        (math.nan, 100.0, 50.0),
        (math.inf, 100.0, 50.0),
        (-3.0, 100.0, 50.0),
        (4.0, math.nan, math.inf),
        (4.0, None, None),
        (1e18, 1e4, 0.0),  # 1e22 >= 2^63: rejected
        (0.0, 100.0, 50.0),
    ],
)
def test_waiting_queue_demand_rejects_bad_products(
    queue: float, inp: float | None, out: float | None
) -> None:
    assert (
        stk.waiting_queue_demand(queue_length=queue, avg_input=inp, avg_output=out, role='both')
        == 0
    )


def test_prefill_replica_demand_uses_input_only() -> None:
    # tokens 4000 + queue 3 × I 100 = 4300 (decode/both would be 4000 + 3 × 150 = 4450)
    out = run([variant(role='prefill')], [replica(queue=3)])
    assert out.replicas[0].demand == 4300


# --- the fallback without cache_config_info ---------------------------------------------------


def test_fallback_uses_stored_capacity_and_does_not_rewrite_it() -> None:
    knowledge = {kkey('v1'): live_record('v1', 12000.0)}
    # k_eff = ⌊12000 × 0.8⌋ = 9600; demand = ⌊0.5 × 9600⌋ + 2 × 150 = 4800 + 300 = 5100
    out = run([variant()], [replica(blocks=None, usage=0.5, queue=2)], knowledge=knowledge)
    (r,) = out.replicas
    assert (r.k1, r.k2, r.k_eff, r.demand, r.source) == (9600, 9600, 9600, 5100, 'P4-k1')
    assert out.knowledge_updates == {}  # the stored 12000 stays as it is


def test_fallback_with_deployment_record_is_the_step_budget() -> None:
    # seeded record: capacity = max_num_batched_tokens 8192 → ⌊8192 × 0.8⌋ = 6553 (#1198)
    out = run([variant(engine=EngineParams())], [replica(blocks=None)])
    assert out.replicas[0].k_eff == 6553


def test_fallback_without_record_skips_the_replica() -> None:
    out = run([variant()], [replica(blocks=None)])
    assert out.replicas == ()
    (v,) = out.result.variants
    assert (v.reason, v.per_replica_capacity, v.replica_count) == ('no-data', 0.0, 0)
    assert not out.result.informative


# --- the knowledge store ----------------------------------------------------------------------


def test_live_record_written_with_engine_params() -> None:
    engine = EngineParams(max_num_seqs=64)
    out = run([variant(engine=engine)], [replica()])
    record = out.knowledge_updates[kkey('v1')]
    # O = 50: N = min(8192·50/150, 64) = 64, k2 = 64 × (100 + 25) = 8000 < k1 → k_eff 8000
    assert (record.source, record.effective_capacity, record.engine) == ('live', 8000.0, engine)
    assert record.total_kv_capacity_tokens == 16000


def test_seeding_never_overwrites_live() -> None:
    knowledge = {kkey('v2'): live_record('v2', 12000.0)}
    out = run([variant('v2', current=0, engine=EngineParams())], knowledge=knowledge)
    assert out.knowledge_updates == {}
    seeded = run([variant('v3', current=0, engine=EngineParams())], knowledge=knowledge)
    assert set(seeded.knowledge_updates) == {kkey('v3')}
    assert seeded.knowledge_updates[kkey('v3')].source == 'deployment'
    assert seeded.knowledge_updates[kkey('v3')].effective_capacity == 8192.0


def test_zero_replica_variant_with_live_knowledge() -> None:
    out = run([variant('v1', current=0)], knowledge={kkey('v1'): live_record('v1', 12000.0)})
    (v,) = out.result.variants
    assert (v.per_replica_capacity, v.replica_count, v.current_replicas, v.reason) == (
        12000.0,
        0,
        0,
        'P0-store',
    )
    assert out.result.informative


def test_zero_replica_variant_derives_from_model_workload() -> None:
    # v2 on A100, seeded from its defaults (B 8192, S 256); model-level I = 500, O = 100 from v1:
    # N = min(8192·100/600, 256) = 256, 256 × 550 = 140800
    out = run(
        [variant('v1'), variant('v2', current=0, accelerator='A100', engine=EngineParams())],
        [replica(inp=500.0, out=100.0)],
    )
    v1, v2 = out.result.variants
    assert (v2.variant, v2.per_replica_capacity, v2.reason) == ('v2', 140800.0, 'P0-store')
    assert v1.per_replica_capacity == 12800.0


def test_zero_replica_variant_bounded_by_compatible_live() -> None:
    # v1 (same hardware and engine) is live with k_eff = min(k1 12800, P3 140800) = 12800; v2's
    # derived 140800 is bounded by it → 12800
    out = run(
        [variant('v1', engine=EngineParams()), variant('v2', current=0, engine=EngineParams())],
        [replica(inp=500.0, out=100.0)],
    )
    assert out.result.variants[1].per_replica_capacity == 12800.0


def test_compatible_sees_this_cycles_record_over_the_stored_one() -> None:
    # The stored v1 record says 5000; this cycle v1 measures 12800 (as above) and rewrites it.
    # v2 is bounded by the rewritten record: min(140800, 12800) = 12800, not 5000.
    stored = {kkey('v1'): live_record('v1', 5000.0, engine=EngineParams())}
    out = run(
        [variant('v1', engine=EngineParams()), variant('v2', current=0, engine=EngineParams())],
        [replica(inp=500.0, out=100.0)],
        knowledge=stored,
    )
    assert out.result.variants[1].per_replica_capacity == 12800.0
    assert out.knowledge_updates[kkey('v1')].effective_capacity == 12800.0
    assert stored[kkey('v1')].effective_capacity == 5000.0


def test_zero_replica_variant_without_anything_is_no_data() -> None:
    out = run([variant('v1', current=0)])
    (v,) = out.result.variants
    assert (v.reason, v.per_replica_capacity) == ('no-data', 0.0)


def test_cross_variant_branch_when_own_budget_is_zero() -> None:
    engine = EngineParams(max_num_batched_tokens=0)
    knowledge = {kkey('other'): live_record('other', 30000.0, engine=engine)}
    out = run([variant('v1', current=0, engine=engine)], knowledge=knowledge)
    (v,) = out.result.variants
    assert (v.per_replica_capacity, v.reason) == (30000.0, 'P0-store')


def test_knowledge_expires_after_7_days() -> None:
    # The caller expires the knowledge once per cycle (as the engine does), then analyzes.
    knowledge = {kkey('v2'): live_record('v2', 12000.0, at=0.0)}
    ttl = CoreSettings().capacity_ttl
    week = 7 * DAY
    at_week = ck.expire(knowledge=knowledge, now=week, ttl=ttl)
    kept = run([variant('v2', current=0)], knowledge=at_week, now=week)
    assert kept.result.variants[0].per_replica_capacity == 12000.0
    # 1 s later the record is 604801 s old: expired, so the variant has no data
    after = ck.expire(knowledge=knowledge, now=week + 1, ttl=ttl)
    assert after == {}
    gone = run([variant('v2', current=0)], knowledge=after, now=week + 1)
    assert gone.result.variants[0].reason == 'no-data'
    assert gone.knowledge_updates == {}


# --- units: DP > 1 ----------------------------------------------------------------------------


def test_dp2_converts_to_replica_units() -> None:
    # DP = 2, current 3, pending 1: 4 instances on the 2 ready pods, each k_eff 12800.
    # PRC = 12800 × 2 = 25600, replica_count = ⌈4/2⌉ = 2, pending 1 (replicas).
    # supply = 2 × 25600 = 51200, anticipated = (2 + 1) × 25600 = 76800, demand = 4 × 4000
    engine = EngineParams(data_parallel_size=2, max_num_seqs=1024)
    out = run(
        [variant(current=3, pending=1, engine=engine)],
        [replica(f'p{i}', inp=None, out=None) for i in range(4)],
    )
    (v,) = out.result.variants
    assert (v.per_replica_capacity, v.replica_count, v.pending) == (25600.0, 2, 1)
    totals = out.result.totals
    assert (totals.supply, totals.anticipated_supply, totals.demand) == (51200.0, 76800.0, 16000.0)


def test_dp_inferred_from_instances_per_ready_replica() -> None:
    # no engine params: 4 instances / (2 current - 0 pending) = 2 per replica
    out = run([variant(current=2)], [replica(f'p{i}') for i in range(4)])
    (v,) = out.result.variants
    assert (v.per_replica_capacity, v.replica_count) == (25600.0, 2)


def test_dp2_zero_replica_scales_stored_instance_capacity() -> None:
    engine = EngineParams(data_parallel_size=2)
    knowledge = {kkey('v1'): live_record('v1', 12000.0, engine=engine)}
    out = run([variant(current=0, engine=engine)], knowledge=knowledge)
    assert out.result.variants[0].per_replica_capacity == 24000.0


# --- model totals -----------------------------------------------------------------------------


def test_scheduler_queue_with_bytes_and_hit_rate() -> None:
    # Ī = 100, Ō = 50, h̄ = 0.5; q = 10, b = 4000: input = max(4000/4, 10 × 100) × 0.5 = 500,
    # output = 10 × 50 = 500, Q = 1000; demand = 5000 + 1000 = 6000
    out = run([variant()], [replica(usage=0.3125, hit=0.5)], pool=pool(10, 4000))
    assert out.result.totals.demand == 6000.0


def test_pending_counts_as_anticipated_supply() -> None:
    # current 2, pending 1; one live instance: supply 12800, anticipated (1 + 1) × 12800
    out = run([variant(current=2, pending=1)], [replica()])
    totals = out.result.totals
    assert (totals.supply, totals.anticipated_supply) == (12800.0, 25600.0)


def test_result_metadata() -> None:
    config = SaturationConfig(scale_up_threshold=0.9, scale_down_boundary=0.6)
    result = run([variant()], [replica()], config=config).result
    assert (result.analyzer, result.scale_up_threshold, result.scale_down_boundary) == (
        'saturation-token',
        0.9,
        0.6,
    )
    assert result.score == 1.0
    assert result.roles == ()


# --- P/D roles --------------------------------------------------------------------------------


def test_pd_role_totals_with_queue_shares() -> None:
    # prefill tokens 0.1875 × 16000 = 3000, decode 0.125 × 16000 = 2000; q = 10, Ī 100, Ō 50:
    # inputTok 1000, outputTok 500. prefill 3000 + 1000 = 4000, decode 2000 + 1500 = 3500,
    # model 5000 + 1500 = 6500
    out = run(
        [variant('pre', role='prefill'), variant('dec', role='decode')],
        [replica('p', 'pre', usage=0.1875), replica('d', 'dec', usage=0.125)],
        pool=pool(10),
    )
    roles = dict(out.result.roles)
    assert [r for r, _ in out.result.roles] == ['decode', 'prefill']
    assert roles['prefill'].demand == 4000.0
    assert roles['decode'].demand == 3500.0
    assert roles['prefill'].supply == roles['decode'].supply == 12800.0
    assert out.result.totals.demand == 6500.0


def test_role_without_variants_gets_nothing() -> None:
    out = run(
        [variant('pre', role='prefill'), variant('both', role='both')],
        [replica('p', 'pre'), replica('b', 'both')],
        pool=pool(10),
    )
    roles = dict(out.result.roles)
    assert set(roles) == {'both', 'prefill'}
    assert roles['both'].demand == 4000.0 + 1500.0
    assert roles['prefill'].demand == 4000.0 + 1000.0


# --- bad input and odd cases ------------------------------------------------------------------


def test_nan_inf_and_negative_metrics() -> None:
    reps = [
        replica('a', usage=math.nan, queue=math.inf, inp=math.nan, out=-1.0, hit=math.nan),
        replica('b', usage=-0.5, queue=-2, inp=math.inf, out=math.inf),
    ]
    out = run([variant(current=2)], reps, pool=pool(math.nan, math.inf))
    assert [(r.k_eff, r.demand, r.source) for r in out.replicas] == [
        (12800, 0, 'P4-k1'),
        (12800, 0, 'P4-k1'),
    ]
    assert out.result.totals.demand == 0.0


def test_absurd_kv_usage_is_clamped() -> None:
    # usage 1e305 × 16000 would overflow; clamped to 1 → tokens = 16000, demand 16000 >= 12800
    (r,) = run([variant()], [replica(usage=1e305)]).replicas
    assert (r.demand, r.saturated) == (16000, True)


def test_bad_thresholds_fall_back() -> None:
    config = SaturationConfig(kv_cache_threshold=math.nan, queue_length_threshold=math.nan)
    # kv threshold → 0.8: k1 = 12800; NaN queue threshold disables P1
    out = run([variant()], [replica(usage=0.5, queue=50)], config=config)
    assert (out.replicas[0].k1, out.replicas[0].source) == (12800, 'P4-k1')


def test_replica_of_unknown_variant_is_ignored() -> None:
    out = run([variant('v1')], [replica('x', 'ghost'), replica('p', 'v1')])
    assert [r.pod for r in out.replicas] == ['p']
    assert out.result.totals.demand == 4000.0


def test_updates_hold_only_this_models_keys() -> None:
    # Memory of other models (one of them long expired) is neither returned nor touched, and
    # only the keys written for model m come back: v1's P1 sample and live record, v2's seed.
    other_history = {'other|H100|1|short': (K2Sample(value=3.0, at=0.0),)}
    other_knowledge = {
        'ns|other|x': live_record('x', 7.0, at=0.0),
        'elsewhere|m|y': live_record('y', 9.0),
    }
    history = {**other_history, 'm|A100|1|short': (K2Sample(value=5.0, at=NOW),)}
    knowledge = dict(other_knowledge)
    out = run(
        [variant('v1'), variant('v2', current=0, accelerator='A100', engine=EngineParams())],
        [replica(usage=0.5, queue=6)],
        history=history,
        knowledge=knowledge,
    )
    # P1: 0.5 × 16000 = 8000 tokens, k_eff = min(12800, 8000) = 8000
    assert out.history_updates == {SHORT_KEY: (K2Sample(value=8000.0, at=NOW),)}
    assert set(out.knowledge_updates) == {kkey('v1'), kkey('v2')}
    assert out.knowledge_updates[kkey('v1')].effective_capacity == 8000.0
    assert out.knowledge_updates[kkey('v2')].source == 'deployment'
    assert history == {**other_history, 'm|A100|1|short': (K2Sample(value=5.0, at=NOW),)}
    assert knowledge == other_knowledge


def test_inputs_are_not_mutated() -> None:
    history = {SHORT_KEY: (K2Sample(value=8000.0, at=NOW),)}
    knowledge = {kkey('v1'): live_record('v1', 12000.0)}
    run([variant()], [replica(usage=0.5, queue=6)], history=history, knowledge=knowledge)
    assert history == {SHORT_KEY: (K2Sample(value=8000.0, at=NOW),)}
    assert knowledge == {kkey('v1'): live_record('v1', 12000.0)}


# --- properties -------------------------------------------------------------------------------

names = st.sampled_from(['a', 'b', 'c'])
roles_st = st.sampled_from(['both', 'prefill', 'decode'])
maybe_float = st.one_of(
    st.none(), st.floats(allow_nan=True, allow_infinity=True), st.floats(0, 5000)
)
replica_st = st.builds(
    ReplicaMetrics,
    pod=st.text('pqrs', min_size=1, max_size=3),
    variant=names,
    namespace=st.just('ns'),
    observed_at=st.just(NOW),
    kv_usage=st.one_of(st.floats(0, 1), st.floats(allow_nan=True, allow_infinity=True)),
    queue_length=st.one_of(st.floats(0, 20), st.floats(allow_nan=True, allow_infinity=True)),
    num_gpu_blocks=st.one_of(st.none(), st.integers(-5, 50000)),
    block_size=st.sampled_from([None, 16, 32]),
    avg_input_tokens=maybe_float,
    avg_output_tokens=maybe_float,
    prefix_cache_hit_rate=maybe_float,
)
variant_st = st.builds(
    Variant,
    name=names,
    namespace=st.just('ns'),
    model_id=st.just('m'),
    role=roles_st,
    current_replicas=st.integers(0, 4),
    pending_replicas=st.integers(0, 2),
    engine=st.one_of(
        st.none(),
        st.builds(
            EngineParams,
            data_parallel_size=st.integers(1, 2),
            max_num_batched_tokens=st.integers(0, 16384),
        ),
    ),
)
pool_st = st.one_of(
    st.none(),
    st.builds(
        PoolMetrics,
        model_id=st.just('m'),
        namespace=st.just('ns'),
        observed_at=st.just(NOW),
        queue_size=maybe_float.map(lambda x: x or 0.0),
        queue_bytes=maybe_float.map(lambda x: x or 0.0),
    ),
)


OTHER_HISTORY = {'other|H100|1|short': (K2Sample(value=3.0, at=NOW),)}
OTHER_KNOWLEDGE = {
    ck.knowledge_key(namespace='ns', model_id='other', variant='a'): CapacityRecord(
        namespace='ns',
        model_id='other',
        variant='a',
        accelerator='H100',
        gpus_per_replica=1,
        effective_capacity=7.0,
        total_kv_capacity_tokens=0,
        source='live',
        updated_at=NOW,
    )
}


@settings(max_examples=150, deadline=None)
@given(
    st.lists(variant_st, max_size=3, unique_by=lambda v: v.name),
    st.lists(replica_st, max_size=6, unique_by=lambda r: r.pod),
    pool_st,
    st.data(),
)
def test_properties(
    variants: list[Variant],
    replicas: list[ReplicaMetrics],
    epp: PoolMetrics | None,
    data: st.DataObject,
) -> None:
    out = run(variants, replicas, pool=epp, history=OTHER_HISTORY, knowledge=OTHER_KNOWLEDGE)
    # Only model m's keys are written back; other models' memory is left alone.
    assert all(key.startswith('m|') for key in out.history_updates)
    assert all(key.startswith('ns|m|') for key in out.knowledge_updates)
    totals = out.result.totals
    assert totals.demand >= 0
    assert totals.supply <= totals.anticipated_supply
    for r in out.replicas:
        assert r.demand >= 0
        assert 0 <= r.k_eff <= r.k1
    for v in out.result.variants:
        assert v.per_replica_capacity >= 0
        assert v.replica_count >= 0
    for _, role_totals in out.result.roles:
        assert role_totals.supply <= role_totals.anticipated_supply
    # Input order never matters.
    shuffled_variants = data.draw(st.permutations(variants))
    shuffled_replicas = data.draw(st.permutations(replicas))
    again = run(
        shuffled_variants,
        shuffled_replicas,
        pool=epp,
        history=OTHER_HISTORY,
        knowledge=OTHER_KNOWLEDGE,
    )
    assert again == out
