"""Tests of the capacity knowledge store: seeding, live records, expiry, compatibility and the
P0-store estimate."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmscaler.analyze.learning import capacity_knowledge as ck
from llmscaler.config.resolved import CoreSettings
from llmscaler.domain.snapshot import EngineParams
from llmscaler.domain.state import CapacityRecord

WEEK = 7 * 24 * 3600.0
DEFAULTS = EngineParams()


def live(
    variant: str,
    capacity: float,
    *,
    accelerator: str = 'H100',
    engine: EngineParams | None = DEFAULTS,
    namespace: str = 'ns',
    model_id: str = 'm',
    at: float = 0.0,
) -> CapacityRecord:
    return CapacityRecord(
        namespace=namespace,
        model_id=model_id,
        variant=variant,
        accelerator=accelerator,
        gpus_per_replica=1,
        effective_capacity=capacity,
        total_kv_capacity_tokens=50000,
        source='live',
        updated_at=at,
        engine=engine,
    )


def deployment(
    variant: str, *, engine: EngineParams = DEFAULTS, total: int = 0, accelerator: str = 'H100'
) -> CapacityRecord:
    return CapacityRecord(
        namespace='ns',
        model_id='m',
        variant=variant,
        accelerator=accelerator,
        gpus_per_replica=1,
        effective_capacity=float(engine.max_num_batched_tokens),
        total_kv_capacity_tokens=total,
        source='deployment',
        updated_at=0.0,
        engine=engine,
    )


def key(variant: str) -> str:
    return ck.knowledge_key(namespace='ns', model_id='m', variant=variant)


def seed(
    knowledge: dict[str, CapacityRecord],
    *,
    variant: str = 'v',
    accelerator: str,
    gpus_per_replica: int = 1,
    engine: EngineParams | None,
    now: float,
) -> CapacityRecord | None:
    """`seed_from_deployment` for model 'm' in namespace 'ns'."""
    return ck.seed_from_deployment(
        knowledge=knowledge,
        namespace='ns',
        model_id='m',
        variant=variant,
        accelerator=accelerator,
        gpus_per_replica=gpus_per_replica,
        engine=engine,
        now=now,
    )


def record_live(
    knowledge: dict[str, CapacityRecord],
    *,
    capacity: float,
    kv_tokens: int,
    engine: EngineParams | None = None,
) -> CapacityRecord | None:
    """`record_live` for variant 'v' of model 'm' in namespace 'ns' (one H100 a replica) at t=5."""
    return ck.record_live(
        knowledge=knowledge,
        namespace='ns',
        model_id='m',
        variant='v',
        accelerator='H100',
        gpus_per_replica=1,
        effective_capacity=capacity,
        total_kv_capacity_tokens=kv_tokens,
        now=5.0,
        engine=engine,
    )


def compatible(
    knowledge: dict[str, CapacityRecord],
    *,
    model_id: str = 'm',
    accelerator: str = 'H100',
    gpus_per_replica: int = 1,
    engine: EngineParams | None = DEFAULTS,
) -> CapacityRecord | None:
    return ck.compatible(
        knowledge=knowledge,
        model_id=model_id,
        accelerator=accelerator,
        gpus_per_replica=gpus_per_replica,
        engine=engine,
    )


def test_knowledge_key_format() -> None:
    assert ck.knowledge_key(namespace='prod', model_id='llama', variant='a100') == 'prod|llama|a100'


@pytest.mark.parametrize(
    ('batched', 'seqs', 'inp', 'out', 'expected'),
    [
        # N = min(8192·200/1200, 256) = min(1365.33, 256) = 256; ⌊256 × (1000 + 100)⌋ = 281600
        (8192, 256, 1000.0, 200.0, 281600),
        # N = min(8192·200/300, 64) = min(5461.3, 64) = 64; 64 × (100 + 100) = 12800
        (8192, 64, 100.0, 200.0, 12800),
        # N = 2048·100/4100 = 49.9512...; ⌊49.9512... × (4000 + 50)⌋ = ⌊202302.44⌋ = 202302
        (2048, 256, 4000.0, 100.0, 202302),
        # I absent counts as 0: N = min(8192, 256) = 256; 256 × 100 = 25600
        (8192, 256, math.nan, 200.0, 25600),
        # O must be > 0
        (8192, 256, 1000.0, 0.0, 0),
        (8192, 256, 1000.0, math.nan, 0),
        (8192, 256, 1000.0, -5.0, 0),
        # no budget or no sequences: nothing derived
        (0, 256, 1000.0, 200.0, 0),
        (8192, 0, 1000.0, 200.0, 0),
        # a huge prompt is harmless: N·I ≈ B·O, N = 8192·200/(1e300 + 200); ⌊N × 1e300⌋ = 1638400
        (8192, 256, 1e300, 200.0, 1638400),
        # too large for int64 is rejected: N = 256; 256 × (1000 + 5e299) >= 2^63 → 0
        (8192, 256, 1000.0, 1e300, 0),
    ],
)
def test_capacity_from_params(
    batched: int, seqs: int, inp: float, out: float, expected: int
) -> None:
    engine = EngineParams(max_num_batched_tokens=batched, max_num_seqs=seqs)
    assert ck.capacity_from_params(engine=engine, avg_input=inp, avg_output=out) == expected


def test_capacity_from_params_without_engine() -> None:
    assert ck.capacity_from_params(engine=None, avg_input=500.0, avg_output=100.0) == 0


def test_seed_from_deployment_builds_a_deployment_record() -> None:
    engine = EngineParams(num_gpu_blocks_override=1875, block_size=16)
    record = seed({}, accelerator='A100', gpus_per_replica=2, engine=engine, now=42.0)
    assert record is not None
    assert (record.namespace, record.model_id, record.variant) == ('ns', 'm', 'v')
    assert record.source == 'deployment'
    assert record.effective_capacity == 8192.0  # the default max_num_batched_tokens
    assert record.total_kv_capacity_tokens == 30000  # 1875 blocks × 16 tokens
    assert (record.accelerator, record.gpus_per_replica, record.updated_at) == ('A100', 2, 42.0)
    assert record.engine == engine


def test_seed_without_override_has_unknown_kv_size_and_needs_engine() -> None:
    seeded = seed({}, accelerator='A100', engine=DEFAULTS, now=0.0)
    assert seeded is not None
    assert seeded.total_kv_capacity_tokens == 0
    none = seed({}, accelerator='A100', engine=None, now=0.0)
    assert none is None


def test_seed_never_overwrites_live_but_refreshes_deployment() -> None:
    existing = {key('a'): live('a', 40000.0), key('b'): deployment('b')}
    newer = EngineParams(max_num_batched_tokens=4096)
    seeded = {
        variant: seed(existing, variant=variant, accelerator='H100', engine=newer, now=10.0)
        for variant in ('a', 'b')
    }
    assert seeded['a'] is None  # live: nothing to write
    refreshed = seeded['b']
    assert refreshed is not None
    assert (refreshed.source, refreshed.effective_capacity) == ('deployment', 4096.0)
    assert (refreshed.updated_at, refreshed.engine) == (10.0, newer)
    assert existing[key('b')].effective_capacity == 8192.0  # the input is untouched


def test_record_live_preserves_engine_params() -> None:
    engine = EngineParams(max_num_seqs=64)
    before = {key('v'): deployment('v', engine=engine)}
    after = record_live(before, capacity=12800.0, kv_tokens=16000)
    assert after is not None
    assert (after.source, after.effective_capacity, after.engine) == ('live', 12800.0, engine)
    assert (after.variant, after.total_kv_capacity_tokens, after.updated_at) == ('v', 16000, 5.0)
    assert before[key('v')].source == 'deployment'


def test_record_live_keeps_a_given_engine_and_needs_no_previous_record() -> None:
    given_engine = EngineParams(max_num_seqs=32)
    before = {key('v'): deployment('v', engine=EngineParams(max_num_seqs=64))}
    after = record_live(before, capacity=12800.0, kv_tokens=-5, engine=given_engine)
    assert after is not None
    # The given engine wins over the stored one; a negative KV size is stored as 0.
    assert (after.engine, after.total_kv_capacity_tokens) == (given_engine, 0)
    fresh = record_live({}, capacity=100.0, kv_tokens=200)
    assert fresh is not None
    assert (fresh.source, fresh.effective_capacity, fresh.engine) == ('live', 100.0, None)


@pytest.mark.parametrize('capacity', [math.nan, math.inf, 0.0, -1.0])
def test_record_live_rejects_capacity_without_meaning(capacity: float) -> None:
    before = {key('v'): deployment('v')}
    after = record_live(before, capacity=capacity, kv_tokens=16000)
    assert after is None  # nothing to write: the deployment record stays


def test_expire_after_seven_days_by_default() -> None:
    ttl = CoreSettings().capacity_ttl
    assert ttl == WEEK
    knowledge = {key('old'): live('old', 1.0, at=0.0), key('new'): live('new', 2.0, at=3600.0)}
    # At exactly 7 days the old record is 604800 s old: not more than the TTL, kept.
    assert set(ck.expire(knowledge=knowledge, now=WEEK, ttl=ttl)) == {key('old'), key('new')}
    # One second later it goes; the other is 604801 - 3600 s old and stays.
    assert set(ck.expire(knowledge=knowledge, now=WEEK + 1.0, ttl=ttl)) == {key('new')}


def test_compatible_prefers_live_then_key() -> None:
    knowledge = {
        key('a-deploy'): deployment('a-deploy'),
        key('b-live'): live('b-live', 40000.0),
        key('c-live'): live('c-live', 30000.0),
    }
    found = compatible(knowledge)
    assert found is not None
    assert found.variant == 'b-live'
    only_deploy = {key('a-deploy'): deployment('a-deploy')}
    found = compatible(only_deploy)
    assert found is not None
    assert found.variant == 'a-deploy'


def test_compatible_matches_across_namespaces() -> None:
    other_ns = live('x', 40000.0, namespace='other')
    knowledge = {ck.knowledge_key(namespace='other', model_id='m', variant='x'): other_ns}
    assert compatible(knowledge) == other_ns


@pytest.mark.parametrize(
    ('accelerator', 'gpus', 'engine', 'model_id'),
    [
        ('A100', 1, DEFAULTS, 'm'),  # other accelerator
        ('H100', 2, DEFAULTS, 'm'),  # other GPU count
        ('H100', 1, EngineParams(tensor_parallel_size=2), 'm'),
        ('H100', 1, EngineParams(gpu_memory_utilization=0.95), 'm'),
        ('H100', 1, EngineParams(block_size=32), 'm'),
        ('H100', 1, EngineParams(kv_cache_dtype='fp8'), 'm'),
        ('H100', 1, EngineParams(num_gpu_blocks_override=1000), 'm'),
        ('H100', 1, EngineParams(max_num_batched_tokens=2048), 'm'),
        ('H100', 1, EngineParams(engine='sglang'), 'm'),
        ('H100', 1, None, 'm'),  # no engine parameters to compare
        ('H100', 1, DEFAULTS, 'other-model'),
    ],
)
def test_compatible_rejects_differences(
    accelerator: str, gpus: int, engine: EngineParams | None, model_id: str
) -> None:
    knowledge = {key('a'): live('a', 40000.0)}
    found = compatible(
        knowledge, model_id=model_id, accelerator=accelerator, gpus_per_replica=gpus, engine=engine
    )
    assert found is None


def test_compatible_ignores_max_num_seqs_and_unknown_accelerator() -> None:
    knowledge = {key('a'): live('a', 40000.0), key('u'): live('u', 1.0, accelerator='unknown')}
    found = compatible(knowledge, engine=EngineParams(max_num_seqs=64))
    assert found is not None
    assert found.variant == 'a'
    unknown = compatible(knowledge, accelerator='unknown')
    assert unknown is None


def estimate(knowledge: dict[str, CapacityRecord], variant: str, inp: float, out: float) -> float:
    return ck.estimate_stored_capacity(
        knowledge=knowledge,
        record=knowledge[key(variant)],
        kv_cache_threshold=0.8,
        avg_input=inp,
        avg_output=out,
    )


def test_estimate_live_record_is_authoritative() -> None:
    knowledge = {key('v'): live('v', 12000.0)}
    assert estimate(knowledge, 'v', 500.0, 100.0) == 12000.0


def test_estimate_deployment_record_derives_from_params() -> None:
    knowledge = {key('v'): deployment('v', accelerator='A100')}
    # N = min(8192·100/600, 256) = min(1365.3, 256) = 256; 256 × (500 + 50) = 140800
    assert estimate(knowledge, 'v', 500.0, 100.0) == 140800.0


def test_estimate_bounded_by_own_k1() -> None:
    engine = EngineParams(num_gpu_blocks_override=1875)
    knowledge = {key('v'): deployment('v', engine=engine, total=30000, accelerator='A100')}
    # derived 140800, k1 = ⌊30000 × 0.8⌋ = 24000 → 24000
    assert estimate(knowledge, 'v', 500.0, 100.0) == 24000.0


def test_estimate_bounded_by_compatible_live_capacity() -> None:
    knowledge = {key('new'): deployment('new'), key('old'): live('old', 40000.0)}
    # derived 140800, the compatible live record says 40000 → 40000
    assert estimate(knowledge, 'new', 500.0, 100.0) == 40000.0


def test_estimate_without_output_length_is_the_stored_budget() -> None:
    knowledge = {key('v'): deployment('v')}
    assert estimate(knowledge, 'v', 500.0, 0.0) == 8192.0
    assert estimate(knowledge, 'v', 500.0, math.nan) == 8192.0
    bare = {
        key('v'): CapacityRecord(
            namespace='ns',
            model_id='m',
            variant='v',
            accelerator='H100',
            gpus_per_replica=1,
            effective_capacity=8192.0,
            total_kv_capacity_tokens=0,
            source='deployment',
            updated_at=0.0,
            engine=None,
        )
    }
    assert estimate(bare, 'v', 500.0, 100.0) == 8192.0


@given(
    st.floats(min_value=0.0, max_value=1e5),
    st.floats(min_value=0.0, max_value=1e5),
    st.integers(min_value=0, max_value=1 << 20),
    st.integers(min_value=0, max_value=1024),
)
def test_capacity_from_params_is_bounded(inp: float, out: float, batched: int, seqs: int) -> None:
    engine = EngineParams(max_num_batched_tokens=batched, max_num_seqs=seqs)
    value = ck.capacity_from_params(engine=engine, avg_input=inp, avg_output=out)
    assert value >= 0
    # N never exceeds S and each request never holds more than I + O/2 tokens.
    assert value <= seqs * (inp + out / 2) + 1
