"""A replica or pool that is not reporting usable metrics holds its model (a safety rule,
docs/decision-core.md).

Matrix covered:

| input | path | expectation |
|---|---|---|
| KV NaN/-1/7, queue -1/Inf, running -3, hit rate 2 on a replica | both | hold, MetricsInvalid |
| KV or queue None on one replica | both | hold, MetricsMissing |
| `observed_at` NaN / Inf on a replica | both | hold, MetricsInvalid (never "fresh") |
| `now` NaN / Inf / huge int | - | ValueError before anything else |
| pool queue size NaN / negative, request count NaN | token; zero enabled | hold, no zero |
| no KV size and no stored capacity | token | hold, MetricsMissing naming num_gpu_blocks |
| 10 broken pods | both | message names 3 and counts the rest |
| properties | both | any broken replica/pool: no target below current, none to zero, bounds kept |
"""

from __future__ import annotations

import dataclasses
import json
import math

import pydantic
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmscaler.analyze import validity
from llmscaler.analyze.observation import freshness
from llmscaler.analyze.validity import MAX_NAMED_PROBLEMS, NO_READY_REPLICAS
from llmscaler.config.resolved import Config
from llmscaler.domain.basics import Action
from llmscaler.domain.snapshot import (
    Decision,
    LatencyHistogram,
    PoolMetrics,
    ReplicaMetrics,
    Snapshot,
    Variant,
)
from llmscaler.domain.state import EMPTY_STATE
from llmscaler.engine import decide
from tests.support.configs import TOKEN, TOKEN_ZERO_ON, ZERO_ON
from tests.support.strategies import NOW, snapshots

MODEL = 'm'
NS = 'ns'
CONFIGS = [Config(), TOKEN, ZERO_ON, TOKEN_ZERO_ON]
CONFIG_IDS = ['percentage', 'token', 'percentage-zero', 'token-zero']


def variant(name: str, *, current: int = 2, **kw: object) -> Variant:
    fields: dict[str, object] = {
        'name': name,
        'namespace': NS,
        'model_id': MODEL,
        'min_replicas': 0,
        'max_replicas': 10,
        'current_replicas': current,
        'ready_replicas': current,
    }
    fields.update(kw)
    return Variant(**fields)  # type: ignore[arg-type]


def replica(name: str, pod: int, **kw: object) -> ReplicaMetrics:
    fields: dict[str, object] = {
        'pod': f'{name}-{pod}',
        'variant': name,
        'namespace': NS,
        'observed_at': NOW - 5.0,
        'kv_usage': 0.05,
        'queue_length': 0.0,
        'num_gpu_blocks': 1000,
        'block_size': 16,
        'avg_input_tokens': 500.0,
        'avg_output_tokens': 100.0,
    }
    fields.update(kw)
    return ReplicaMetrics(**fields)  # type: ignore[arg-type]


def idle(
    *, broken: dict[str, object] | None = None, pool: dict[str, object] | None = None
) -> Snapshot:
    """Two variants of two replicas each, all nearly idle and none queued: every config scales
    this down (or to zero) when every figure is sound; `broken` replaces figures of `b-1`."""
    replicas = [replica(name, i) for name in ('a', 'b') for i in range(2)]
    if broken is not None:
        replicas[-1] = dataclasses.replace(replicas[-1], **broken)  # type: ignore[arg-type]
    pool_fields: dict[str, object] = {'observed_at': NOW, 'request_count': 0.0}
    pool_fields.update(pool or {})
    return Snapshot(
        variants=(variant('a', cost=2.0), variant('b', cost=4.0)),
        replicas=tuple(replicas),
        pools=(PoolMetrics(model_id=MODEL, namespace=NS, **pool_fields),),  # type: ignore[arg-type]
    )


def run(snapshot: Snapshot, config: Config) -> dict[str, Decision]:
    outcome = decide(snapshot=snapshot, config=config, state=EMPTY_STATE, now=NOW)
    return {d.variant: d for d in outcome.decisions}


@pytest.mark.parametrize('config', CONFIGS, ids=CONFIG_IDS)
def test_the_idle_reference_scales_down_when_every_figure_is_sound(config: Config) -> None:
    decisions = run(idle(), config)
    assert any(d.target < d.current for d in decisions.values())
    assert all(d.metrics_available for d in decisions.values())


@pytest.mark.parametrize('config', CONFIGS, ids=CONFIG_IDS)
@pytest.mark.parametrize(
    ('broken', 'reason', 'named'),
    [
        ({'kv_usage': math.nan}, 'MetricsInvalid', 'b-1: kv_usage nan is not a finite number'),
        ({'kv_usage': -1.0}, 'MetricsInvalid', 'b-1: kv_usage -1 is below 0'),
        ({'kv_usage': 7.0}, 'MetricsInvalid', 'b-1: kv_usage 7 is above 1'),
        ({'queue_length': -1.0}, 'MetricsInvalid', 'b-1: queue_length -1 is below 0'),
        ({'queue_length': math.inf}, 'MetricsInvalid', 'b-1: queue_length inf is not a finite'),
        ({'running_requests': -3.0}, 'MetricsInvalid', 'b-1: running_requests -3 is below 0'),
        ({'prefix_cache_hit_rate': 2.0}, 'MetricsInvalid', 'b-1: prefix_cache_hit_rate 2 is'),
        ({'avg_output_tokens': -math.inf}, 'MetricsInvalid', 'b-1: avg_output_tokens -inf'),
        ({'observed_at': math.nan}, 'MetricsInvalid', 'b-1: observed_at nan is not a finite'),
        ({'observed_at': math.inf}, 'MetricsInvalid', 'b-1: observed_at inf is not a finite'),
        ({'kv_usage': None}, 'MetricsMissing', 'b-1: kv_usage missing'),
        ({'queue_length': None}, 'MetricsMissing', 'b-1: queue_length missing'),
        (
            {'tpot_histogram': LatencyHistogram(bounds=(0.05, 0.01), counts=(1, 2), total=2)},
            'MetricsInvalid',
            'b-1: tpot_histogram bound 0.01 is not finite and above the one before',
        ),
        (
            {'ttft_histogram': LatencyHistogram(bounds=(0.5, 1.0), counts=(3, 2), total=4)},
            'MetricsInvalid',
            'b-1: ttft_histogram count 2 at le=1 is not within',
        ),
        (
            {'ttft_histogram': LatencyHistogram(bounds=(0.5,), counts=(3,), total=2)},
            'MetricsInvalid',
            'b-1: ttft_histogram count 3 at le=0.5 is not within',
        ),
        (
            {'tpot_histogram': LatencyHistogram(bounds=(0.5,), counts=(1, 2), total=2)},
            'MetricsInvalid',
            'b-1: tpot_histogram has 1 bounds and 2 counts',
        ),
        (
            {'tpot_histogram': LatencyHistogram(bounds=(0.5,), counts=(1,), total=math.nan)},
            'MetricsInvalid',
            'b-1: tpot_histogram total nan is not a finite number',
        ),
    ],
    ids=lambda value: (
        str(value) if not isinstance(value, dict) else '-'.join(map(str, value.items()))
    ),
)
def test_one_broken_replica_holds_the_whole_model(
    config: Config, broken: dict[str, object], reason: str, named: str
) -> None:
    decisions = run(idle(broken=broken), config)
    for decision in decisions.values():
        assert decision.target == decision.current == 2
        assert decision.action is Action.NO_CHANGE
    # The variant of the broken pod says why; its sibling holds with it.
    assert not decisions['b'].metrics_available
    assert decisions['b'].metrics_reason == reason
    assert named in decisions['b'].message
    assert decisions['a'].metrics_available
    # The reference scales down: the variant that would have gone down says it was held.
    assert any(d.reason.startswith('metrics unavailable: holding') for d in decisions.values())


@pytest.mark.parametrize('config', CONFIGS, ids=CONFIG_IDS)
@pytest.mark.parametrize(
    'pool',
    [
        {'queue_size': math.nan},
        {'queue_size': -2.0},
        {'queue_bytes': math.inf},
        {'request_count': math.nan},
        {'request_count': -1.0},
        {'arrival_rate': math.nan},
        {'observed_at': math.nan},
    ],
    ids=lambda value: '-'.join(map(str, value.items())),
)
def test_a_broken_pool_figure_holds_the_model(config: Config, pool: dict[str, object]) -> None:
    decisions = run(idle(pool=pool), config)
    (metric,) = pool
    for decision in decisions.values():
        assert decision.target == decision.current
        assert decision.metrics_reason == 'MetricsInvalid'
        assert f'pool {MODEL}: {metric}' in decision.message


@pytest.mark.parametrize('config', CONFIGS, ids=CONFIG_IDS)
@pytest.mark.parametrize('figure', ['queue_size', 'queue_bytes'])
def test_an_unread_gateway_queue_holds_the_model(config: Config, figure: str) -> None:
    """None is a queue the source could not read (its query failed), not an empty one: the
    idle reference, which every config scales down, holds instead."""
    decisions = run(idle(pool={figure: None}), config)
    for decision in decisions.values():
        assert decision.target == decision.current
        assert decision.metrics_reason == 'MetricsMissing'
        assert f'pool {MODEL}: {figure}' in decision.message


def test_token_path_holds_on_a_replica_it_cannot_size() -> None:
    # No cache_config_info on b's pods, no engine arguments, no stored capacity: their load is
    # unknown. (One sized pod of the variant would do: its live record sizes the others.)
    unsized = idle()
    unsized = dataclasses.replace(
        unsized,
        replicas=tuple(
            dataclasses.replace(r, num_gpu_blocks=None, block_size=None) if r.variant == 'b' else r
            for r in unsized.replicas
        ),
    )
    decisions = run(unsized, TOKEN)
    assert [d.target for d in decisions.values()] == [2, 2]
    assert decisions['b'].metrics_reason == 'MetricsMissing'
    assert 'b-0: num_gpu_blocks missing' in decisions['b'].message
    assert 'b-1: num_gpu_blocks missing' in decisions['b'].message
    # The percentage analyzer does not need the KV size: the same snapshot scales down there.
    assert any(d.target < d.current for d in run(unsized, Config()).values())


def test_message_names_a_bounded_number_of_problems() -> None:
    snapshot = Snapshot(
        variants=(variant('a', current=10),),
        replicas=tuple(replica('a', i, kv_usage=math.nan) for i in range(10)),
    )
    (decision,) = run(snapshot, Config()).values()
    assert decision.message.count('kv_usage') == MAX_NAMED_PROBLEMS
    assert decision.message.endswith(f'(and {10 - MAX_NAMED_PROBLEMS} more)')
    assert 'a-0: kv_usage' in decision.message


@pytest.mark.parametrize('now', [math.nan, math.inf, -math.inf, 10**400])
def test_a_non_finite_now_is_refused(now: float) -> None:
    with pytest.raises(ValueError, match='now must be a finite number'):
        decide(snapshot=idle(), config=Config(), state=EMPTY_STATE, now=now)


def test_freshness_of_a_non_finite_time_is_never_fresh() -> None:
    settings_ = Config().settings
    assert freshness(observed_at=math.nan, now=NOW, settings=settings_) is None
    assert freshness(observed_at=NOW, now=math.nan, settings=settings_) is None
    assert freshness(observed_at=-math.inf, now=NOW, settings=settings_) is None
    assert freshness(observed_at=math.inf, now=NOW, settings=settings_) is None


# --- properties -------------------------------------------------------------------------------

BAD_REPLICA_FIGURES = st.sampled_from(
    [
        ('kv_usage', None),
        ('kv_usage', math.nan),
        ('kv_usage', -1.0),
        ('kv_usage', 1.5),
        ('kv_usage', math.inf),
        ('queue_length', None),
        ('queue_length', math.nan),
        ('queue_length', -0.5),
        ('queue_length', -math.inf),
        ('running_requests', -1.0),
        ('avg_input_tokens', math.nan),
        ('prefix_cache_hit_rate', -0.1),
        ('observed_at', math.nan),
        ('observed_at', math.inf),
        ('observed_at', -math.inf),
    ]
)
BAD_POOL_FIGURES = st.sampled_from(
    [
        ('queue_size', math.nan),
        ('queue_size', -1.0),
        ('queue_bytes', math.inf),
        ('request_count', math.nan),
        ('request_count', -5.0),
        ('observed_at', math.nan),
    ]
)


def assert_held(before: Snapshot, decisions: tuple[Decision, ...], models: set[str]) -> None:
    variants = {v.name: v for v in before.variants}
    for decision in decisions:
        v = variants[decision.variant]
        assert v.min_replicas <= decision.target <= v.max_replicas
        if v.model_id in models:
            assert decision.target >= decision.current, decision
            assert not (decision.target == 0 and decision.current > 0), decision


@settings(max_examples=200, deadline=None)
@given(
    snapshot=snapshots(),
    config=st.sampled_from(CONFIGS),
    bad=st.lists(BAD_REPLICA_FIGURES, min_size=1, max_size=3),
    data=st.data(),
)
def test_any_broken_replica_figure_never_lowers_a_target(
    snapshot: Snapshot,
    config: Config,
    bad: list[tuple[str, float | None]],
    data: st.DataObject,
) -> None:
    if not snapshot.replicas:
        return
    replicas = list(snapshot.replicas)
    touched: set[str] = set()
    models = {v.key: v.model_id for v in snapshot.variants}
    for field, value in bad:
        index = data.draw(st.integers(min_value=0, max_value=len(replicas) - 1))
        replicas[index] = dataclasses.replace(replicas[index], **{field: value})  # type: ignore[arg-type]
        touched.add(models[replicas[index].variant_key])
    broken = dataclasses.replace(snapshot, replicas=tuple(replicas))
    outcome = decide(snapshot=broken, config=config, state=EMPTY_STATE, now=NOW)
    assert_held(broken, outcome.decisions, touched)
    for decision in outcome.decisions:
        if decision.model_id in touched:
            assert decision.action is not Action.SCALE_DOWN


@settings(max_examples=150, deadline=None)
@given(
    snapshot=snapshots(),
    config=st.sampled_from(CONFIGS),
    bad=BAD_POOL_FIGURES,
    data=st.data(),
)
def test_any_broken_pool_figure_never_lowers_a_target(
    snapshot: Snapshot, config: Config, bad: tuple[str, float], data: st.DataObject
) -> None:
    pools = list(snapshot.pools)
    index = data.draw(st.integers(min_value=0, max_value=len(pools) - 1))
    field, value = bad
    pools[index] = dataclasses.replace(pools[index], **{field: value})  # type: ignore[arg-type]
    broken = dataclasses.replace(snapshot, pools=tuple(pools))
    outcome = decide(snapshot=broken, config=config, state=EMPTY_STATE, now=NOW)
    assert_held(broken, outcome.decisions, {pools[index].model_id})
    for decision in outcome.decisions:
        if decision.model_id == pools[index].model_id:
            assert not decision.metrics_available
            assert decision.metrics_reason == 'MetricsInvalid'


def test_an_available_variant_without_ready_replicas_says_so() -> None:
    snapshot = Snapshot(variants=(variant('a', current=0, min_replicas=0),))
    (decision,) = run(snapshot, Config()).values()
    assert decision.metrics_available
    assert decision.message == NO_READY_REPLICAS
    # Variants with ready replicas that all report keep an empty message.
    assert all(d.message == '' for d in run(idle(), Config()).values())


# --- the engine and the JSON face judge a figure alike -----------------------------------------

REPLICA_JSON = pydantic.TypeAdapter(ReplicaMetrics)
NUMERIC_FIELDS = [
    'observed_at',
    'kv_usage',
    'queue_length',
    'num_gpu_blocks',
    'block_size',
    'avg_input_tokens',
    'prefix_cache_hit_rate',
    'running_requests',
]
ANY_NUMBER = (
    st.floats()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.sampled_from([0, 1, 0.0, 1.0, -0.0, 2**31 - 1, 2**31, 1.0000001, 5e-324])
)


@settings(max_examples=300, deadline=None)
@given(field=st.sampled_from(NUMERIC_FIELDS), value=ANY_NUMBER)
def test_a_figure_is_refused_by_the_engine_exactly_when_the_json_face_refuses_it(
    field: str, value: float
) -> None:
    sound = replica('a', 0)
    document = {f.name: getattr(sound, f.name) for f in dataclasses.fields(sound)}
    document[field] = value
    try:
        REPLICA_JSON.validate_json(json.dumps(document))
    except pydantic.ValidationError:
        refused = True
    else:
        refused = False
    problems = validity.replica_problems(dataclasses.replace(sound, **{field: value}))  # type: ignore[arg-type]
    assert bool(problems) == refused, (field, value, problems)
    assert all(p.metric == field for p in problems)
