"""`engine.decide()`: wiring of the stages and the safety rules of docs/decision-core.md.

Matrix covered:

| case | path | expectation |
|---|---|---|
| saturated cheap variant, near-saturated expensive | percentage | cheapest +1 |
| stale metrics on one variant | percentage, token | no target below current, MetricsStale |
| ready replicas without metrics | percentage | MetricsMissing, hold |
| idle model, zero enabled, count 0 | percentage | step N→1, then 1→0 |
| idle model, count unknown | percentage | no zero |
| all variants at zero, zero disabled | percentage | cheapest gets 1 |
| token analyzer, demand over threshold | token | ⌈RC/PRC⌉ on the most efficient variant |
| properties | both | bounds, stale never lowers, pending is supply, determinism, order |
"""

from __future__ import annotations

import dataclasses
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from llmscaler.analyze.observation import freshness
from llmscaler.config.resolved import Config, ModelConfig, SaturationConfig, ScaleToZeroConfig
from llmscaler.domain.basics import Action
from llmscaler.domain.snapshot import PoolMetrics, Snapshot
from llmscaler.domain.state import EMPTY_STATE, CapacityRecord, K2Sample, State
from llmscaler.engine import decide
from tests.support.configs import TOKEN, ZERO_ON
from tests.support.engine_fixtures import MODEL, NS, by_name, replica, variant
from tests.support.strategies import NOW, snapshots


def pool(**kw: object) -> PoolMetrics:
    fields: dict[str, object] = {'model_id': MODEL, 'namespace': NS, 'observed_at': NOW}
    fields.update(kw)
    return PoolMetrics(**fields)  # type: ignore[arg-type]


def test_freshness_classes_follow_the_collector_thresholds() -> None:
    settings_ = Config().settings
    assert freshness(observed_at=NOW - 59, now=NOW, settings=settings_) == 'fresh'
    assert freshness(observed_at=NOW - 60, now=NOW, settings=settings_) == 'stale'
    assert freshness(observed_at=NOW - 119, now=NOW, settings=settings_) == 'stale'
    assert freshness(observed_at=NOW - 120, now=NOW, settings=settings_) == 'unavailable'
    assert freshness(observed_at=NOW - 300, now=NOW, settings=settings_) is None
    assert freshness(observed_at=NOW + 30, now=NOW, settings=settings_) == 'fresh'


def test_percentage_path_scales_the_cheapest_variant_by_one() -> None:
    # cheap: two replicas saturated (kv 0.85 >= 0.80); expensive: one replica, kv 0.75.
    # Non-saturated = the expensive one only: avgSpareKv = 0.80 - 0.75 = 0.05 < 0.10 → scale-up.
    snapshot = Snapshot(
        variants=(
            variant('cheap', cost=2.0, current_replicas=2, ready_replicas=2),
            variant('expensive', cost=4.0, current_replicas=1, ready_replicas=1),
        ),
        replicas=(
            replica('cheap', 0, kv_usage=0.85, queue_length=6),
            replica('cheap', 1, kv_usage=0.86, queue_length=2),
            replica('expensive', 0, kv_usage=0.75, queue_length=1),
        ),
        pools=(pool(request_count=100.0),),
    )
    outcome = decide(snapshot=snapshot, config=Config(), state=EMPTY_STATE, now=NOW)
    decisions = by_name(outcome.decisions)
    assert decisions['cheap'].target == 3
    assert decisions['cheap'].action is Action.SCALE_UP
    assert decisions['expensive'].target == 1
    assert decisions['cheap'].analyzer == 'saturation-percentage'
    assert dict(outcome.state.last_desired) == {f'{NS}/cheap': 3, f'{NS}/expensive': 1}


def test_next_cycle_is_blocked_while_the_new_replica_is_pending() -> None:
    # The decided 3rd replica of `cheap` now exists but is not ready: the model is in
    # transition and nothing moves, however saturated the metrics still are.
    snapshot = Snapshot(
        variants=(
            variant('cheap', cost=2.0, current_replicas=3, ready_replicas=2, pending_replicas=1),
            variant('expensive', cost=4.0, current_replicas=1, ready_replicas=1),
        ),
        replicas=(
            replica('cheap', 0, kv_usage=0.95, queue_length=9),
            replica('cheap', 1, kv_usage=0.95, queue_length=9),
            replica('expensive', 0, kv_usage=0.95, queue_length=9),
        ),
        pools=(pool(request_count=100.0),),
    )
    outcome = decide(snapshot=snapshot, config=Config(), state=EMPTY_STATE, now=NOW)
    assert [d.target for d in outcome.decisions] == [3, 1]


def restarted(*, published: int) -> Snapshot:
    """After a restart: `cheap` went 1 -> 2 (its new pod still starts, the load is gone); the
    VA status says `published`, the count the process got to write before it died."""
    return Snapshot(
        variants=(
            variant(
                'cheap',
                min_replicas=1,
                current_replicas=2,
                ready_replicas=1,
                pending_replicas=1,
                desired_replicas=published,
            ),
        ),
        replicas=(replica('cheap', 0, kv_usage=0.05, queue_length=0),),
        pools=(pool(request_count=100.0),),
    )


def test_a_stale_published_count_below_current_never_takes_starting_pods_away() -> None:
    outcome = decide(snapshot=restarted(published=1), config=Config(), state=EMPTY_STATE, now=NOW)
    (decision,) = outcome.decisions
    assert (decision.current, decision.target) == (2, 2)


def test_a_published_count_above_current_is_still_followed_after_a_restart() -> None:
    outcome = decide(snapshot=restarted(published=3), config=Config(), state=EMPTY_STATE, now=NOW)
    (decision,) = outcome.decisions
    assert (decision.current, decision.target, decision.reason) == (2, 3, 'in-transition')


def test_a_count_decided_in_this_process_is_followed_even_below_current() -> None:
    # Behind an HPA the scale target follows a scale-down later: the decision stands meanwhile.
    memory = State(last_desired=((f'{NS}/cheap', 1),))
    outcome = decide(snapshot=restarted(published=1), config=Config(), state=memory, now=NOW)
    (decision,) = outcome.decisions
    assert (decision.current, decision.target) == (2, 1)


def idle_snapshot(*, age: float = 5.0, count: float | None = 0.0, current: int = 1) -> Snapshot:
    return Snapshot(
        variants=(
            variant('cheap', cost=2.0, current_replicas=current, ready_replicas=current),
            variant('expensive', cost=4.0, current_replicas=1, ready_replicas=1),
        ),
        replicas=(
            *(replica('cheap', i, age=age, kv_usage=0.0) for i in range(current)),
            replica('expensive', 0, age=age, kv_usage=0.0),
        ),
        pools=(pool(request_count=count),),
    )


def test_idle_model_goes_to_zero_when_enabled_and_no_request_in_retention() -> None:
    outcome = decide(snapshot=idle_snapshot(), config=ZERO_ON, state=EMPTY_STATE, now=NOW)
    assert [d.target for d in outcome.decisions] == [0, 0]
    assert all('enforced' in d.reason for d in outcome.decisions)


def test_scale_to_zero_steps_down_to_one_first() -> None:
    outcome = decide(snapshot=idle_snapshot(current=3), config=ZERO_ON, state=EMPTY_STATE, now=NOW)
    assert by_name(outcome.decisions)['cheap'].target == 1


def test_unknown_request_count_never_allows_zero() -> None:
    outcome = decide(snapshot=idle_snapshot(count=None), config=ZERO_ON, state=EMPTY_STATE, now=NOW)
    assert all(d.target >= 1 for d in outcome.decisions)


def test_stale_metrics_forbid_zero_and_report_why() -> None:
    outcome = decide(snapshot=idle_snapshot(age=90.0), config=ZERO_ON, state=EMPTY_STATE, now=NOW)
    for decision in outcome.decisions:
        assert decision.target == decision.current
        assert not decision.metrics_available
        assert decision.metrics_reason == 'MetricsStale'


def test_ready_replicas_without_metrics_hold_with_metrics_missing() -> None:
    snapshot = Snapshot(
        variants=(variant('cheap', cost=2.0, current_replicas=2, ready_replicas=2),),
        replicas=(replica('cheap', 0, kv_usage=0.0),),
        pools=(pool(request_count=0.0),),
    )
    decision = decide(snapshot=snapshot, config=ZERO_ON, state=EMPTY_STATE, now=NOW).decisions[0]
    assert decision.target == 2
    assert decision.metrics_reason == 'MetricsMissing'
    assert '1 of 2' in decision.message


def test_all_at_zero_with_zero_disabled_wakes_the_cheapest() -> None:
    snapshot = Snapshot(
        variants=(
            variant('b-cheap', cost=2.0, current_replicas=0),
            variant('a-cheap', cost=2.0, current_replicas=0),
            variant('expensive', cost=4.0, current_replicas=0),
        ),
        pools=(pool(request_count=0.0),),
    )
    outcome = decide(snapshot=snapshot, config=Config(), state=EMPTY_STATE, now=NOW)
    # Cost tie between a-cheap and b-cheap: the alphabetically first name wins.
    assert {d.variant: d.target for d in outcome.decisions} == {
        'a-cheap': 1,
        'b-cheap': 0,
        'expensive': 0,
    }


def test_token_path_adds_ceil_required_over_capacity_to_the_most_efficient_variant() -> None:
    # One variant, 2 ready replicas, 1000 blocks x 16 = 16000 KV tokens each.
    # k1 = floor(16000 x 0.8) = 12800. Queue 0 < 5 → no P1; no history; engine params absent →
    # no P3; k2 = k1 → PRC = 12800. Demand per replica = round(0.9 x 16000) = 14400.
    # Model demand 28800, supply 25600. RC = 28800/0.85 - 25600 = 33882.35 - 25600 = 8282.35.
    # ⌈8282.35 / 12800⌉ = 1 → target 3.
    snapshot = Snapshot(
        variants=(variant('only', cost=2.0, current_replicas=2, ready_replicas=2),),
        replicas=(replica('only', 0, kv_usage=0.9), replica('only', 1, kv_usage=0.9)),
        pools=(pool(request_count=10.0),),
    )
    outcome = decide(snapshot=snapshot, config=TOKEN, state=EMPTY_STATE, now=NOW)
    decision = outcome.decisions[0]
    assert decision.analyzer == 'saturation-token'
    assert decision.target == 3
    figures = dict(decision.figures)
    assert math.isclose(figures['required_both'], 28800 / 0.85 - 25600)


def shift(snapshot: Snapshot, *, ages: float) -> Snapshot:
    return dataclasses.replace(
        snapshot,
        replicas=tuple(
            dataclasses.replace(r, observed_at=r.observed_at - ages) for r in snapshot.replicas
        ),
    )


CONFIGS = st.sampled_from(
    [
        Config(),
        TOKEN,
        ZERO_ON,
        Config(
            default=ModelConfig(
                saturation=SaturationConfig(analyzer_name='saturation'),
                scale_to_zero=ScaleToZeroConfig(enabled=True),
            )
        ),
    ]
)


@settings(max_examples=150, deadline=None)
@given(snapshot=snapshots(), config=CONFIGS)
def test_targets_stay_within_bounds(snapshot: Snapshot, config: Config) -> None:
    outcome = decide(snapshot=snapshot, config=config, state=EMPTY_STATE, now=NOW)
    bounds = {v.name: (v.min_replicas, v.max_replicas) for v in snapshot.variants}
    assert len(outcome.decisions) == len(snapshot.variants)
    for decision in outcome.decisions:
        low, high = bounds[decision.variant]
        assert low <= decision.target <= high


@settings(max_examples=150, deadline=None)
@given(snapshot=snapshots(), config=CONFIGS, age=st.sampled_from([70.0, 150.0, 400.0]))
def test_stale_or_missing_metrics_never_lower_a_target(
    snapshot: Snapshot, config: Config, age: float
) -> None:
    for degraded in (shift(snapshot, ages=age), dataclasses.replace(snapshot, replicas=())):
        outcome = decide(snapshot=degraded, config=config, state=EMPTY_STATE, now=NOW)
        currents = {v.name: v for v in degraded.variants}
        for decision in outcome.decisions:
            v = currents[decision.variant]
            if v.ready_replicas > 0:
                assert decision.target >= min(v.current_replicas, v.max_replicas)


@settings(max_examples=150, deadline=None)
@given(snapshot=snapshots(balanced=True), config=CONFIGS)
def test_pending_replicas_count_as_supply(snapshot: Snapshot, config: Config) -> None:
    # Balanced replicas and a first cycle on the same metrics fill the k2 history with one value
    # per variant, so capacity estimates are the same in the two cycles compared below (with
    # uneven replicas the rolling average legitimately moves between cycles).
    warm = decide(snapshot=snapshot, config=config, state=EMPTY_STATE, now=NOW - 30).state
    first = decide(snapshot=snapshot, config=config, state=warm, now=NOW)
    targets = {d.variant: d.target for d in first.decisions}
    # Apply the scale-ups as pending replicas (not ready yet, no metrics yet).
    started = tuple(
        dataclasses.replace(
            v,
            current_replicas=targets[v.name],
            pending_replicas=v.pending_replicas + targets[v.name] - v.current_replicas,
        )
        if targets[v.name] > v.current_replicas
        else v
        for v in snapshot.variants
    )
    # The next cycle sees the same load, scraped 30 s later.
    second = decide(
        snapshot=dataclasses.replace(
            snapshot, variants=started, replicas=shift(snapshot, ages=-30).replicas
        ),
        config=config,
        state=first.state,
        now=NOW + 30,
    )
    for decision in second.decisions:
        if targets[decision.variant] > by_name(first.decisions)[decision.variant].current:
            assert decision.target <= targets[decision.variant]


@settings(max_examples=100, deadline=None)
@given(snapshot=snapshots(), config=CONFIGS, data=st.data())
def test_same_snapshot_same_decisions_whatever_the_order(
    snapshot: Snapshot, config: Config, data: st.DataObject
) -> None:
    shuffled = Snapshot(
        variants=tuple(data.draw(st.permutations(snapshot.variants))),
        replicas=tuple(data.draw(st.permutations(snapshot.replicas))),
        pools=tuple(data.draw(st.permutations(snapshot.pools))),
    )
    first = decide(snapshot=snapshot, config=config, state=EMPTY_STATE, now=NOW)
    again = decide(snapshot=snapshot, config=config, state=EMPTY_STATE, now=NOW)
    other = decide(snapshot=shuffled, config=config, state=EMPTY_STATE, now=NOW)
    assert first == again == other


def test_state_round_trips_through_decide() -> None:
    snapshot = idle_snapshot()
    outcome = decide(snapshot=snapshot, config=TOKEN, state=EMPTY_STATE, now=NOW)
    assert isinstance(outcome.state, State)
    # Knowledge of both variants is kept for when they have no replicas.
    assert {key.split('|')[-1] for key, _ in outcome.state.capacity} == {'cheap', 'expensive'}


def test_decide_expires_old_history_and_knowledge() -> None:
    day, week = 24 * 3600.0, 7 * 24 * 3600.0
    old = State(
        k2_history=(('m|H100|1|short', (K2Sample(value=5000.0, at=NOW - day - 1),)),),
        capacity=(
            (
                'other|m|gone',
                CapacityRecord(
                    namespace='other',
                    model_id='m',
                    variant='gone',
                    accelerator='H100',
                    gpus_per_replica=1,
                    effective_capacity=9000.0,
                    total_kv_capacity_tokens=20000,
                    source='live',
                    updated_at=NOW - week - 1,
                ),
            ),
        ),
    )
    for config in (Config(), TOKEN):
        state = decide(snapshot=idle_snapshot(), config=config, state=old, now=NOW).state
        assert state.k2_history == ()
        assert 'other|m|gone' not in dict(state.capacity)
    kept = decide(snapshot=Snapshot(), config=TOKEN, state=old, now=NOW - 2).state
    assert kept == old


def test_a_model_that_changes_policy_keeps_its_tuner_and_drops_nothing_of_the_other() -> None:
    """The tuner records are common memory: the SLO-queueing policy's are where the predictive
    policy starts (both on the four-parameter model the predictive policy sizes on); the
    predictive policy's own state is kept under its name only."""
    from llmscaler.config.resolved import FOUR_PARAMETER, PredictiveConfig, QueueingModelConfig
    from tests.support.predictive_fixtures import fleet

    targets = QueueingModelConfig(target_ttft=1000, target_itl=60, performance_model=FOUR_PARAMETER)
    slo = Config(default=ModelConfig(queueing=targets))
    predictive = Config(default=ModelConfig(predictive=PredictiveConfig(slo=targets)))

    def at(now: float) -> Snapshot:
        snapshot = fleet(h100=2, l40s=1, rate=5.0)
        return dataclasses.replace(
            snapshot,
            replicas=tuple(dataclasses.replace(r, observed_at=now - 5) for r in snapshot.replicas),
            pools=tuple(dataclasses.replace(p, observed_at=now - 5) for p in snapshot.pools),
        )

    first = decide(snapshot=at(NOW), config=slo, state=EMPTY_STATE, now=NOW)
    assert first.state.kalman
    assert first.state.policies == ()
    second = decide(snapshot=at(NOW + 30), config=predictive, state=first.state, now=NOW + 30)
    assert {d.analyzer for d in second.decisions} == {'predictive'}
    # The tuner went on from where the SLO-queueing policy left it: not what a fresh start gives.
    fresh = decide(snapshot=at(NOW + 30), config=predictive, state=EMPTY_STATE, now=NOW + 30)
    assert {key for key, _ in second.state.kalman} == {key for key, _ in fresh.state.kalman}
    assert second.state.kalman != fresh.state.kalman
    assert set(second.state.policy_states('predictive')) == {f'{MODEL}|{NS}'}
