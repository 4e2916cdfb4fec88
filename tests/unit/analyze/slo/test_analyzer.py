"""The SLO path through `engine.decide()`: needed vs current, targets' source, holds, tuner memory,
hybrid arbitration (`analyze.slo.analyzer`, `policies.wva.slo_queueing`)."""

from __future__ import annotations

import dataclasses

import pytest

from llmscaler.analyze.slo import analyzer
from llmscaler.config.resolved import (
    AnalyzerSpec,
    Config,
    ModelConfig,
    QueueingModelConfig,
    SaturationConfig,
)
from llmscaler.domain.basics import Action
from llmscaler.domain.snapshot import (
    Decision,
    EngineParams,
    PoolMetrics,
    ReplicaMetrics,
    Snapshot,
    Variant,
)
from llmscaler.domain.state import EMPTY_STATE, State
from llmscaler.engine import decide

NOW = 10_000.0
EXPLICIT = Config(
    default=ModelConfig(
        queueing=QueueingModelConfig(target_ttft=300.0, target_itl=25.0, tuning_enabled=False)
    )
)


def snapshot(
    *,
    rate: float,
    current: int = 2,
    kv: float = 0.3,
    queue: float = 0.0,
    pool_rate: bool = True,
    replica: dict[str, object] | None = None,
    engine: EngineParams | None = None,
) -> Snapshot:
    variant = Variant(
        name='v',
        namespace='ns',
        model_id='m',
        current_replicas=current,
        ready_replicas=current,
        min_replicas=1,
        max_replicas=30,
        engine=engine or EngineParams(max_num_seqs=64),
    )
    figures: dict[str, object] = {
        'kv_usage': kv,
        'queue_length': queue,
        'arrival_rate': rate / current,
        'avg_input_tokens': 500.0,
        'avg_output_tokens': 100.0,
        'avg_ttft': 0.06,
        'avg_itl': 0.011,
    }
    figures.update(replica or {})
    replicas = tuple(
        ReplicaMetrics(pod=f'v-{i}', variant='v', namespace='ns', observed_at=NOW - 5, **figures)  # type: ignore[arg-type]
        for i in range(current)
    )
    pool = PoolMetrics(
        model_id='m',
        namespace='ns',
        observed_at=NOW - 5,
        arrival_rate=rate if pool_rate else None,
        request_count=100.0,
    )
    return Snapshot(variants=(variant,), replicas=replicas, pools=(pool,))


def one(
    snap: Snapshot, config: Config = EXPLICIT, state: State = EMPTY_STATE
) -> tuple[Decision, State]:
    out = decide(snapshot=snap, config=config, state=state, now=NOW)
    return out.decisions[0], out.state


def test_a_load_step_adds_replicas() -> None:
    calm, state = one(snapshot(rate=2.0))
    assert calm.analyzer == 'queueing-model'
    per_replica = dict(calm.figures)['max_rate_per_replica']
    assert per_replica > 0
    step, _ = one(snapshot(rate=40.0), state=state)
    needed = -(-40.0 // per_replica)
    # Sized from needed vs current: ⌈40 / max rate⌉ replicas, more than the 2 running.
    assert step.action is Action.SCALE_UP
    assert step.target == min(30, int(needed))
    assert dict(step.figures)['required_both'] > 0


def test_supply_is_built_from_current_replicas_not_desired() -> None:
    # WVA's main branch sizes supply from the replicas it wants, so demand never exceeds it
    # (RC = 0) and no count changes; here supply = current × max rate.
    decision, _ = one(snapshot(rate=40.0))
    figures = dict(decision.figures)
    assert figures['slo_supply'] == pytest.approx(2 * figures['max_rate_per_replica'])
    assert figures['required_both'] == pytest.approx(max(0.0, 40.0 - figures['slo_supply']))
    assert figures['spare_both'] == pytest.approx(max(0.0, figures['slo_supply'] - 40.0))


def test_low_load_sheds_whole_spare_replicas() -> None:
    decision, _ = one(snapshot(rate=0.5, current=6))
    assert decision.action is Action.SCALE_DOWN
    assert decision.target >= 1


def test_target_source_is_in_the_reason_and_figures() -> None:
    explicit, _ = one(snapshot(rate=2.0))
    assert 'slo targets explicit: TTFT 300 ms, ITL 25 ms' in explicit.reason
    assert dict(explicit.figures)['slo_target_source'] == 1.0
    inferred_config = Config(default=ModelConfig(queueing=QueueingModelConfig()))
    inferred, _ = one(snapshot(rate=2.0), config=inferred_config)
    assert 'slo targets inferred' in inferred.reason
    assert dict(inferred.figures)['slo_target_source'] == 2.0


@pytest.mark.parametrize(
    ('change', 'named'),
    [
        ({'pool_rate': False, 'replica': {'arrival_rate': None}}, 'arrival_rate'),
        ({'replica': {'avg_input_tokens': None}}, 'avg_input_tokens'),
        ({'replica': {'avg_output_tokens': None}}, 'avg_output_tokens'),
    ],
)
def test_missing_inputs_hold_and_name_what_is_missing(
    change: dict[str, object], named: str
) -> None:
    snap = snapshot(rate=40.0, current=3, **change)  # type: ignore[arg-type]
    decision, _ = one(snap, state=State(last_desired=(('ns/v', 4),)))
    assert decision.target == 4  # max(current, last desired): a hold never lowers
    assert decision.reason.startswith('hold: missing')
    assert named in decision.reason


def test_an_idle_model_without_a_token_mix_holds() -> None:
    snap = snapshot(
        rate=0.0, current=3, replica={'avg_input_tokens': None, 'avg_output_tokens': None}
    )
    decision, _ = one(snap)
    assert decision.target == 3
    assert decision.reason.startswith('hold: missing')
    assert 'no busy replica' in decision.reason


def test_the_tuner_lives_in_state_and_restarts_on_engine_change() -> None:
    config = Config(
        default=ModelConfig(queueing=QueueingModelConfig(target_ttft=300.0, target_itl=25.0))
    )
    _, state = one(snapshot(rate=5.0), config=config)
    ((key, record),) = state.kalman
    assert key == 'ns/v'
    assert record.engine == analyzer.engine_fingerprint(snapshot(rate=5.0).variants[0])
    _, again = one(snapshot(rate=6.0), config=config, state=state)
    assert again.kalman[0][1].seed == record.seed
    changed, after = one(
        snapshot(rate=6.0, engine=EngineParams(max_num_seqs=128)), config=config, state=again
    )
    assert 'tuner restarted' in changed.reason
    assert after.kalman[0][1].engine != record.engine
    # A variant gone from the snapshot takes its record with it.
    other = dataclasses.replace(snapshot(rate=1.0), variants=(), replicas=())
    gone = decide(snapshot=other, config=config, state=after, now=NOW).state
    assert gone.kalman == ()


def test_hybrid_capacity_vetoes_a_model_scale_down() -> None:
    hybrid = Config(
        default=ModelConfig(
            saturation=SaturationConfig(analyzers=(AnalyzerSpec(name='queueing-model'),)),
            queueing=QueueingModelConfig(target_ttft=300.0, target_itl=25.0, tuning_enabled=False),
        )
    )
    # Light arrival (the model would shed) but every replica is KV-saturated (capacity: up).
    decision, _ = one(snapshot(rate=0.5, current=6, kv=0.95, queue=6.0), config=hybrid)
    assert decision.analyzer == 'hybrid'
    assert decision.target == 6
    assert 'capacity veto' in decision.reason
    assert dict(decision.figures)['hybrid_safety_override'] == 1.0
    # Without saturation the model's scale-down goes through.
    calm, _ = one(snapshot(rate=0.5, current=6, kv=0.1, queue=0.0), config=hybrid)
    assert calm.target < 6
    assert 'model-based recommendation' in calm.reason


def test_a_backlog_is_demand_the_arrival_rate_no_longer_shows() -> None:
    # The arrival rate fits the two replicas, but 600 requests wait: drained over one cycle
    # (30 s) they are 20 more requests/s, which the current replicas cannot take.
    calm, _ = one(snapshot(rate=2.0))
    backed_up, _ = one(snapshot(rate=2.0, queue=300.0))
    assert calm.target <= 2
    figures = dict(backed_up.figures)
    assert figures['backlog_requests'] == 600.0
    assert backed_up.action is Action.SCALE_UP
    assert figures['required_both'] == pytest.approx(2.0 + 600.0 / 30 - figures['slo_supply'])


def test_the_va_status_names_the_target_source() -> None:
    from llmscaler.controller.va.conditions import optimization_ready

    decision, _ = one(snapshot(rate=40.0))
    condition = optimization_ready(decision=decision)
    assert condition.status == 'True'
    assert '(queueing-model: slo targets explicit: TTFT 300 ms, ITL 25 ms;' in condition.message


def test_replicas_that_miss_a_target_cap_their_capacity_at_what_they_carry() -> None:
    # The model (seeded from a fast observation) would let each replica take far more than the
    # 5 requests/s it carries, but the replicas report 3 s TTFTs against a 300 ms target: they
    # do not sustain 5/s within the targets, so capacity ≤ 5/s (at most halved per cycle).
    config = Config(
        default=ModelConfig(
            queueing=QueueingModelConfig(target_ttft=300.0, target_itl=25.0, tuning_enabled=False)
        )
    )
    _, state = one(snapshot(rate=10.0), config=config)
    slow, _ = one(snapshot(rate=10.0, replica={'avg_ttft': 3.0}), config=config, state=state)
    figures = dict(slow.figures)
    assert figures['max_rate_per_replica'] == pytest.approx(5.0 * 0.5)
    assert 'observed latency over target' in slow.reason
    assert slow.target == 4


def test_variants_on_the_same_figures_share_one_tuner_step() -> None:
    # Two variants of one model whose filters stand at the same place and see the same figures
    # take the step once within an analysis; each keeps its own fingerprint, and the step is
    # the one each would have taken alone.
    from llmscaler.analyze.learning import kalman
    from llmscaler.analyze.queueing.perf_model import PerfParams

    variants = tuple(
        Variant(
            name=f'v-{acc}',
            namespace='ns',
            model_id='m',
            accelerator=acc,
            current_replicas=2,
            ready_replicas=2,
            min_replicas=1,
            max_replicas=30,
            engine=EngineParams(max_num_seqs=64),
        )
        for acc in ('A100', 'H100')
    )
    replicas = tuple(
        ReplicaMetrics(
            pod=f'{v.name}-{i}',
            variant=v.name,
            namespace='ns',
            observed_at=NOW - 5,
            arrival_rate=3.0,
            avg_input_tokens=500.0,
            avg_output_tokens=100.0,
            avg_ttft=0.06,
            avg_itl=0.011,
        )
        for v in variants
        for i in range(2)
    )
    seed = PerfParams(alpha=8.0, beta=0.1, gamma=40.0, delta=5e-05)
    records = {
        v.key: kalman.seed_record(seed=seed, engine=analyzer.engine_fingerprint(v), now=NOW - 30)
        for v in variants
    }
    config = QueueingModelConfig(target_ttft=300.0, target_itl=25.0)
    analysis = analyzer.analyze(
        variants=variants,
        replicas=replicas,
        pool=None,
        config=config,
        records=records,
        now=NOW,
        interval=30.0,
    )
    for v in variants:
        alone = analyzer.analyze(
            variants=(v,),
            replicas=tuple(r for r in replicas if r.variant == v.name),
            pool=None,
            config=config,
            records={v.key: records[v.key]},
            now=NOW,
            interval=30.0,
        )
        assert analysis.kalman_updates[v.key] == alone.kalman_updates[v.key]
        assert analysis.kalman_updates[v.key].engine == analyzer.engine_fingerprint(v)
        assert analysis.kalman_updates[v.key].x != records[v.key].x
