"""Tests of the simulated fleet: lifecycle, removal order, cost, router and gateway queue.

The replicas are the real engines on the Llama-3.1-8B/H100 preset with one override that makes
the arithmetic visible: every engine step lasts exactly 1 s (step_overhead 1, all other terms 0),
so a request of k output tokens dispatched to an idle replica at t finishes at t + k.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmscaler.sim.fleet.cluster import Cluster
from llmscaler.sim.fleet.gateway import BYTES_PER_TOKEN
from llmscaler.sim.fleet.pods import EngineKind, engine_factory
from llmscaler.sim.hardware.presets import preset
from llmscaler.sim.vllm.fast import FastReplica
from llmscaler.sim.vllm.reference import ReferenceReplica
from llmscaler.sim.vocabulary import PerfModel, SimRequest, VariantSpec

UNIT_STEP = PerfModel(
    step_overhead=1.0, decode_per_seq=0.0, prefill_per_token=0.0, kv_read_per_token=0.0
)


def spec(name: str = 'h100', **overrides: object) -> VariantSpec:
    values: dict[str, object] = {
        'perf': UNIT_STEP,
        'startup_delay': 90.0,
        'initial_replicas': 2,
        'max_replicas': 5,
    }
    values.update(overrides)
    return preset(name='llama-3.1-8b-h100', variant_name=name, **values)


def request(rid: int, arrival: float, *, output: int = 10, prompt: int = 100) -> SimRequest:
    return SimRequest(rid=rid, arrival=arrival, input_tokens=prompt, output_tokens=output)


def arrive(cluster: Cluster, req: SimRequest) -> None:
    cluster.advance(until=req.arrival)
    cluster.expire(now=req.arrival)
    cluster.arrive(request=req, now=req.arrival)


def names(cluster: Cluster) -> list[str]:
    return [r.name for r in cluster.routable]


# ---- construction ----------------------------------------------------------------------------


def test_initial_replicas_are_ready_at_zero_named_in_creation_order() -> None:
    cluster = Cluster(variants=[spec(initial_replicas=3)])
    assert names(cluster) == ['h100-0000', 'h100-0001', 'h100-0002']
    assert cluster.targets == {'h100': 3}
    assert (cluster.ready_count(variant='h100'), cluster.pending_count(variant='h100')) == (3, 0)
    assert cluster.existing == {'h100': 3}
    assert cluster.next_ready_time() == math.inf


def test_initial_replicas_are_clamped_to_max() -> None:
    cluster = Cluster(variants=[spec(initial_replicas=7, max_replicas=4)])
    assert cluster.targets == {'h100': 4}


def test_engine_kinds() -> None:
    assert engine_factory(kind='fast') is FastReplica
    assert engine_factory(kind='reference') is ReferenceReplica
    with pytest.raises(ValueError, match='unknown engine'):
        engine_factory(kind='slow')  # type: ignore[arg-type]


@pytest.mark.parametrize('timeout', [0.0, -1.0, math.nan])
def test_bad_gateway_timeout(timeout: float) -> None:
    with pytest.raises(ValueError, match='gateway_timeout'):
        Cluster(variants=[spec()], gateway_timeout=timeout)


def test_bad_router_and_duplicate_names() -> None:
    with pytest.raises(ValueError, match='unknown router'):
        Cluster(variants=[spec()], router='random')  # type: ignore[arg-type]
    with pytest.raises(ValueError, match='duplicate'):
        Cluster(variants=[spec(), spec()])


# ---- lifecycle and cost ----------------------------------------------------------------------


def test_created_replica_is_pending_until_startup_delay() -> None:
    cluster = Cluster(variants=[spec()])
    assert cluster.set_target(variant='h100', target=3, now=10.0) == (2, 3)
    assert (cluster.ready_count(variant='h100'), cluster.pending_count(variant='h100')) == (2, 1)
    assert cluster.existing == {'h100': 3}
    # ready at 10 + 90 = 100
    assert cluster.next_ready_time() == 100.0
    assert cluster.promote(now=99.999) == []
    assert cluster.promote(now=100.0) == ['h100-0002']
    assert (cluster.ready_count(variant='h100'), cluster.pending_count(variant='h100')) == (3, 0)
    assert names(cluster) == ['h100-0000', 'h100-0001', 'h100-0002']


def test_negative_startup_delay_counts_as_zero() -> None:
    cluster = Cluster(variants=[spec(startup_delay=-5.0)])
    cluster.set_target(variant='h100', target=3, now=10.0)
    assert cluster.next_ready_time() == 10.0
    assert cluster.promote(now=10.0) == ['h100-0002']


def test_cost_accrues_from_creation_not_readiness() -> None:
    cluster = Cluster(variants=[spec()])
    cluster.set_target(variant='h100', target=3, now=10.0)
    # two initial replicas 0 → 200 and one created at 10 (ready at 100): 2 × 200 + 190 = 590
    assert cluster.finish(end=200.0) == {'h100': 590.0}


def test_removed_pending_replica_disappears_at_once_and_costs_its_life() -> None:
    cluster = Cluster(variants=[spec()])
    cluster.set_target(variant='h100', target=3, now=10.0)
    assert cluster.set_target(variant='h100', target=2, now=50.0) == (3, 2)
    assert cluster.pending_count(variant='h100') == 0
    assert cluster.existing == {'h100': 2}
    assert cluster.next_ready_time() == math.inf
    assert cluster.promote(now=100.0) == []  # it never becomes ready
    # 50 − 10 = 40 for the removed one, 2 × 200 for the others
    assert cluster.finish(end=200.0) == {'h100': 440.0}


def test_target_is_clamped_to_zero_and_max() -> None:
    cluster = Cluster(variants=[spec(max_replicas=4)])
    assert cluster.set_target(variant='h100', target=99, now=0.0) == (2, 4)
    assert cluster.set_target(variant='h100', target=-3, now=0.0) == (4, 0)
    assert cluster.targets == {'h100': 0}
    assert cluster.existing == {'h100': 0}
    with pytest.raises(KeyError):
        cluster.set_target(variant='a100', target=1, now=0.0)


def test_idle_ready_replica_removed_disappears_at_once_newest_first() -> None:
    cluster = Cluster(variants=[spec()])
    assert cluster.set_target(variant='h100', target=1, now=5.0) == (2, 1)
    # both idle: the newest (h100-0001, created with h100-0000 but numbered after) goes
    assert names(cluster) == ['h100-0000']
    assert [(r.name, r.gone) for r in cluster.history] == [('h100-0001', 5.0)]
    # 5 s for the removed one, 20 s for the kept one
    assert cluster.finish(end=20.0) == {'h100': 25.0}


def test_removal_order_pending_newest_first_then_fewest_in_flight() -> None:
    cluster = Cluster(variants=[spec(initial_replicas=3)])
    reqs = [request(i, 0.0) for i in range(4)]
    for r in reqs:
        arrive(cluster, r)
    # least-loaded: 0000, 0001, 0002, then 0000 again (all at 1) → in flight 2, 1, 1
    assert [r.replica for r in reqs] == ['h100-0000', 'h100-0001', 'h100-0002', 'h100-0000']
    cluster.set_target(variant='h100', target=5, now=0.0)  # h100-0003, h100-0004 pending
    cluster.advance(until=1.0)
    assert cluster.set_target(variant='h100', target=2, now=1.0) == (5, 2)
    # pending first, newest first; then the ready one with the fewest in flight, newest of the tie
    assert [r.name for r in cluster.history] == ['h100-0004', 'h100-0003']
    terminating = [r for r in cluster.live if r.terminating]
    assert [r.name for r in terminating] == ['h100-0002']
    assert names(cluster) == ['h100-0000', 'h100-0001']
    assert (cluster.ready_count(variant='h100'), cluster.pending_count(variant='h100')) == (2, 0)
    assert cluster.existing == {'h100': 3}  # the terminating one still costs


def test_terminating_replica_drains_then_disappears() -> None:
    cluster = Cluster(variants=[spec(initial_replicas=2)])
    first, second = request(0, 0.0, output=10), request(1, 0.0, output=10)
    arrive(cluster, first)
    arrive(cluster, second)
    assert second.replica == 'h100-0001'
    cluster.advance(until=3.0)
    cluster.set_target(variant='h100', target=1, now=3.0)  # tie at 1 in flight: the newest goes
    # no new request reaches the terminating replica
    third = request(2, 4.0, output=1)
    arrive(cluster, third)
    assert third.replica == 'h100-0000'
    cluster.advance(until=8.5)
    assert cluster.existing == {'h100': 2}
    cluster.advance(until=9.5)  # the step 9 → 10 starts before 9.5: it runs whole
    # 10 one-second steps from 0 → finished at 10, and the replica with it
    assert second.finished == 10.0
    assert [(r.name, r.gone) for r in cluster.history] == [('h100-0001', 10.0)]
    assert cluster.existing == {'h100': 1}
    assert cluster.finish(end=100.0) == {'h100': 110.0}  # 10 + 100


def test_finish_trims_a_replica_that_outlived_the_end() -> None:
    cluster = Cluster(variants=[spec(initial_replicas=1)])
    arrive(cluster, request(0, 0.0, output=10))
    cluster.set_target(variant='h100', target=0, now=2.0)
    cluster.advance(until=9.5)  # the step starting at 9 runs to 10
    assert [r.gone for r in cluster.history] == [10.0]
    assert cluster.finish(end=9.5) == {'h100': 9.5}


# ---- router ----------------------------------------------------------------------------------


def test_least_loaded_picks_fewest_in_flight_after_advancing() -> None:
    cluster = Cluster(variants=[spec(initial_replicas=2)])
    long, short = request(0, 0.0, output=10), request(1, 0.0, output=2)
    arrive(cluster, long)
    arrive(cluster, short)
    assert (long.replica, short.replica) == ('h100-0000', 'h100-0001')
    # at 0.5 both work on their first step (0 → 1): tie at 1 in flight → lowest name
    tie = request(2, 0.5, output=5)
    arrive(cluster, tie)
    assert tie.replica == 'h100-0000'
    # at 1.5 the step 1 → 2 that finishes `short` has started, so it has run: h100-0001 is empty
    later = request(3, 1.5, output=5)
    arrive(cluster, later)
    assert short.finished == 2.0
    assert later.replica == 'h100-0001'
    assert later.dispatched == 1.5
    assert later.variant == 'h100'


def test_least_loaded_ties_across_variants_by_name() -> None:
    cluster = Cluster(variants=[spec('h100', initial_replicas=1), spec('a100', initial_replicas=1)])
    first, second = request(0, 0.0), request(1, 0.0)
    arrive(cluster, first)
    arrive(cluster, second)
    assert (first.replica, first.variant) == ('a100-0000', 'a100')
    assert (second.replica, second.variant) == ('h100-0000', 'h100')


def test_round_robin_cycles_in_name_order_across_membership_changes() -> None:
    cluster = Cluster(variants=[spec(initial_replicas=3)], router='round-robin')
    picked = []
    for i in range(5):
        r = request(i, 0.0, output=1)
        arrive(cluster, r)
        picked.append(r.replica)
    # load is ignored: 0000 gets a second request while 0002 has one
    assert picked == ['h100-0000', 'h100-0001', 'h100-0002', 'h100-0000', 'h100-0001']
    cluster.set_target(variant='h100', target=4, now=0.0)
    cluster.advance(until=90.0)
    cluster.promote(now=90.0)
    # continues after the last one picked (h100-0001): h100-0002, then the new h100-0003
    more = [request(10 + i, 90.0, output=1) for i in range(3)]
    for r in more:
        arrive(cluster, r)
    assert [r.replica for r in more] == ['h100-0002', 'h100-0003', 'h100-0000']


# ---- gateway queue ---------------------------------------------------------------------------


def test_requests_queue_without_ready_replica_and_dispatch_fifo_on_ready() -> None:
    cluster = Cluster(variants=[spec(initial_replicas=0)])
    first, second = request(0, 1.0, prompt=100), request(1, 50.0, prompt=300)
    arrive(cluster, first)
    cluster.set_target(variant='h100', target=2, now=2.0)  # ready at 92
    arrive(cluster, second)
    assert list(cluster.queue) == [first, second]
    # the EPP's byte count: (100 + 300) × 4
    assert cluster.queue_bytes == 400 * BYTES_PER_TOKEN == 1600
    assert math.isnan(first.dispatched)
    cluster.advance(until=92.0)
    cluster.expire(now=92.0)
    assert cluster.promote(now=92.0) == ['h100-0000', 'h100-0001']
    assert len(cluster.queue) == 0
    assert cluster.queue_bytes == 0
    # FIFO through the least-loaded router: the first queued goes first, to the lowest name
    assert (first.replica, second.replica) == ('h100-0000', 'h100-0001')
    assert first.dispatched == second.dispatched == 92.0
    cluster.advance(until=200.0)
    assert (first.finished, second.finished) == (102.0, 102.0)
    assert cluster.finished_total == 2
    assert cluster.arrivals_total == 2


def test_queued_request_fails_at_gateway_timeout() -> None:
    cluster = Cluster(variants=[spec(initial_replicas=0)], gateway_timeout=120.0)
    early, late = request(0, 0.0, prompt=100), request(1, 30.0, prompt=50)
    arrive(cluster, early)
    arrive(cluster, late)
    assert cluster.expire(now=119.999) == []
    # 0 + 120 ≤ 120: the first fails; the second (deadline 150) stays
    assert cluster.expire(now=120.0) == [early]
    assert early.failed
    assert not late.failed
    assert cluster.queue_bytes == 50 * BYTES_PER_TOKEN
    assert cluster.expire(now=150.0) == [late]
    assert cluster.queue_bytes == 0
    assert math.isnan(early.finished)


# ---- client time-outs ------------------------------------------------------------------------


def run_until(cluster: Cluster, until: float) -> None:
    """What the event loop does: expire at every deadline that comes up to `until`, then at it."""
    while (deadline := cluster.next_deadline()) <= until:
        cluster.advance(until=deadline)
        cluster.expire(now=deadline)
    cluster.advance(until=until)
    cluster.expire(now=until)


def test_a_running_request_fails_at_its_deadline_and_a_quicker_one_does_not() -> None:
    cluster = Cluster(variants=[spec(initial_replicas=1)], request_timeout=5.0)
    slow, quick = request(0, 0.0, output=10), request(1, 0.0, output=3)
    arrive(cluster, slow)
    arrive(cluster, quick)
    assert cluster.next_deadline() == 5.0
    cluster.advance(until=5.0)
    assert cluster.expire(now=5.0) == [slow]
    # It had its first token; the client gave up before the rest.
    assert (slow.failed, slow.failure, slow.first_token) == (True, 'replica-timeout', 1.0)
    assert math.isnan(slow.finished)
    assert (quick.failed, quick.failure, quick.finished) == (False, '', 3.0)
    assert cluster.next_deadline() == math.inf


def test_a_request_waiting_in_a_replica_fails_at_its_deadline() -> None:
    # One sequence at a time: the second request waits in the replica behind the first.
    cluster = Cluster(variants=[spec(initial_replicas=1, max_num_seqs=1)], request_timeout=5.0)
    first, second = request(0, 0.0, output=10), request(1, 0.5, output=2)
    arrive(cluster, first)
    arrive(cluster, second)
    assert second.replica == 'h100-0000'
    run_until(cluster, 5.5)
    assert [(r.failed, r.failure) for r in (first, second)] == [(True, 'replica-timeout')] * 2
    assert math.isnan(second.finished)


@pytest.mark.parametrize(('output', 'failed'), [(2, False), (3, False), (4, True)])
def test_a_request_finished_after_its_deadline_fails(output: int, failed: bool) -> None:
    # Deadline 3: finished at 2 or at 3 is in time; the step 3 → 4 that would finish the last
    # request has started at its deadline: the client left before its last token.
    cluster = Cluster(variants=[spec(initial_replicas=1)], request_timeout=3.0)
    late = request(0, 0.0, output=output)
    arrive(cluster, late)
    run_until(cluster, 3.0)
    cluster.advance(until=3.5)
    cluster.expire(now=3.5)
    assert late.failed is failed
    assert late.failure == ('replica-timeout' if failed else '')
    if output < 4:
        assert late.finished == float(output)


@pytest.mark.parametrize(
    ('gateway', 'client', 'fails_at'), [(120.0, 30.0, 30.0), (10.0, 30.0, 10.0)]
)
def test_the_gateway_queue_times_out_at_the_shorter_time_out(
    gateway: float, client: float, fails_at: float
) -> None:
    cluster = Cluster(
        variants=[spec(initial_replicas=0)], gateway_timeout=gateway, request_timeout=client
    )
    queued = request(0, 0.0)
    arrive(cluster, queued)
    assert cluster.expire(now=fails_at - 0.001) == []
    assert cluster.expire(now=fails_at) == [queued]
    assert (queued.failed, queued.failure) == (True, 'queue-timeout')


def test_without_a_request_timeout_nothing_in_a_replica_times_out() -> None:
    cluster = Cluster(variants=[spec(initial_replicas=1)])
    slow = request(0, 0.0, output=500)
    arrive(cluster, slow)
    assert cluster.next_deadline() == math.inf
    cluster.advance(until=400.0)
    assert cluster.expire(now=400.0) == []
    assert not slow.failed


def test_a_request_too_long_for_the_replica_is_rejected_with_its_reason() -> None:
    cluster = Cluster(variants=[spec(initial_replicas=1, max_model_len=1000)])
    long = request(0, 0.0, prompt=1001)
    arrive(cluster, long)
    assert (long.failed, long.failure) == (True, 'rejected')


@pytest.mark.parametrize('timeout', [0.0, -1.0, math.nan])
def test_bad_request_timeout(timeout: float) -> None:
    with pytest.raises(ValueError, match='request_timeout'):
        Cluster(variants=[spec()], request_timeout=timeout)


@pytest.mark.parametrize('kind', ['fast', 'reference'])
def test_an_abandoned_request_frees_its_blocks_and_its_seat_at_its_deadline(
    kind: EngineKind,
) -> None:
    cluster = Cluster(
        variants=[spec(initial_replicas=1, max_num_seqs=1)], engine=kind, request_timeout=10.0
    )
    first, second = request(0, 0.0, output=100), request(1, 5.0, output=2)
    arrive(cluster, first)
    arrive(cluster, second)
    run_until(cluster, 20.0)
    assert (first.failed, first.failure) == (True, 'replica-timeout')
    # The second gets the seat at 10 (its prefill step 10 → 11, one more token at 12), well
    # inside its own deadline of 15; behind the first it would have waited until 100.
    assert (second.failed, second.first_token, second.finished) == (False, 11.0, 12.0)
    (replica,) = cluster.live
    assert replica.engine is not None
    assert replica.engine.in_flight == 0
    assert replica.engine.kv_usage == 0.0


@pytest.mark.parametrize('kind', ['fast', 'reference'])
def test_a_terminating_replica_goes_when_its_last_request_is_abandoned(kind: EngineKind) -> None:
    cluster = Cluster(variants=[spec(initial_replicas=1)], engine=kind, request_timeout=10.0)
    arrive(cluster, request(0, 0.0, output=100))
    cluster.set_target(variant='h100', target=0, now=1.0)
    run_until(cluster, 20.0)
    assert [(r.name, r.gone) for r in cluster.history] == [('h100-0000', 10.0)]
    assert cluster.finish(end=20.0) == {'h100': 10.0}


# ---- properties ------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    steps=st.lists(
        st.tuples(st.integers(min_value=-2, max_value=8), st.floats(min_value=0.0, max_value=50.0)),
        max_size=12,
    )
)
def test_idle_fleet_follows_targets_and_costs_their_integral(
    steps: list[tuple[int, float]],
) -> None:
    """Without requests a replica exists exactly while the target counts it: cost = ∫ target dt."""
    cluster = Cluster(variants=[spec(initial_replicas=2, max_replicas=6, startup_delay=30.0)])
    now, expected, target = 0.0, 0.0, 2
    for wanted, gap in steps:
        cluster.advance(until=now + gap)
        cluster.promote(now=now + gap)
        expected += target * gap
        now += gap
        _, target = cluster.set_target(variant='h100', target=wanted, now=now)
        assert target == max(0, min(wanted, 6))
        assert cluster.ready_count(variant='h100') + cluster.pending_count(variant='h100') == target
        assert cluster.existing['h100'] == target
    end = now + 10.0
    expected += target * 10.0
    assert cluster.finish(end=end)['h100'] == pytest.approx(expected)
    replica_names = names(cluster)
    assert replica_names == sorted(replica_names)
