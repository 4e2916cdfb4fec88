"""Several models in one simulated fleet, and the GPU inventory they share.

The replicas are the real engines on the Llama-3.1-8B/H100 preset with every engine step lasting
exactly 1 s (as in test_sim_cluster), so a request of k output tokens dispatched to an idle
replica at t finishes at t + k; start-up takes 90 s.

| case | expectation |
|---|---|
| a request of model m | dispatched to a replica of m's variants only, through m's gateway |
| the snapshot | a pool per model; every variant with its role; waiting-for-GPU replicas pending |
| scale-up beyond the inventory | the extra replicas wait unbound: pending, no cost, no clock |
| GPUs freed | bound first come: creation time, then model name, then variant name |
| a big replica waiting | does not hold back a smaller one that fits |
| scale-down | takes the replicas waiting for GPUs first |
| initial replicas beyond the inventory, a bad count | `ValueError` |
| a two-model run with a binding inventory | GPUs bound never exceed it; the waits are reported |
| equal decision times, one GPU left | the model whose name sorts first gets it |
| the clairvoyant baseline | within the inventory; says when its cheapest fleet did not fit |
| two runs | identical |
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from llmscaler.domain.snapshot import Snapshot
from llmscaler.sim.fleet.cluster import Cluster
from llmscaler.sim.fleet.observe import Observer
from llmscaler.sim.hardware.presets import preset
from llmscaler.sim.policies.clairvoyant import ClairvoyantPolicy
from llmscaler.sim.runner import SimSettings, run
from llmscaler.sim.vocabulary import SLO, ControlView, PerfModel, SimRequest, Trace, VariantSpec

UNIT_STEP = PerfModel(
    step_overhead=1.0, decode_per_seq=0.0, prefill_per_token=0.0, kv_read_per_token=0.0
)


def spec(name: str, *, model: str, **overrides: object) -> VariantSpec:
    values: dict[str, object] = {
        'perf': UNIT_STEP,
        'startup_delay': 90.0,
        'initial_replicas': 1,
        'max_replicas': 5,
        'model': model,
        'model_id': f'org/{model}',
    }
    values.update(overrides)
    return preset(name='llama-3.1-8b-h100', variant_name=name, **values)


def request(rid: int, arrival: float, *, model: str, output: int = 10) -> SimRequest:
    return SimRequest(rid=rid, arrival=arrival, input_tokens=100, output_tokens=output, model=model)


def two_models(**inventory: int) -> Cluster:
    return Cluster(
        variants=[spec('a-h100', model='alpha'), spec('z-h100', model='zeta')],
        inventory=inventory or None,
    )


# ---- routing and the controller's view -----------------------------------------------------


def test_a_request_goes_to_a_replica_of_its_own_model() -> None:
    cluster = two_models()
    for rid in range(6):
        model = 'alpha' if rid % 2 else 'zeta'
        req = request(rid, float(rid), model=model)
        cluster.advance(until=req.arrival)
        cluster.arrive(request=req, now=req.arrival)
        assert req.variant == ('a-h100' if model == 'alpha' else 'z-h100')
    assert cluster.gateways['alpha'].arrivals_total == 3
    assert cluster.gateways['zeta'].arrivals_total == 3
    cluster.advance(until=100.0)
    assert (cluster.gateways['alpha'].finished_total, cluster.finished_total) == (3, 6)
    with pytest.raises(KeyError, match='unknown model'):
        cluster.arrive(request=request(9, 100.0, model='omega'), now=100.0)
    with pytest.raises(KeyError, match='unknown model'):
        cluster.arrive(request=request(10, 100.0, model=''), now=100.0)


def test_a_model_without_a_ready_replica_queues_at_its_own_gateway() -> None:
    cluster = two_models()
    cluster.set_target(variant='z-h100', target=0, now=0.0)
    cluster.arrive(request=request(0, 1.0, model='zeta'), now=1.0)
    cluster.arrive(request=request(1, 1.0, model='alpha'), now=1.0)
    assert [len(g.queue) for g in cluster.gateways.values()] == [0, 1]
    assert cluster.queued == 1
    assert [r.rid for r in cluster.queue] == [0]


def test_the_snapshot_has_a_pool_per_model_and_every_variant_with_its_role() -> None:
    cluster = Cluster(
        variants=[
            spec('a-h100', model='alpha', role='prefill'),
            spec('z-h100', model='zeta', max_replicas=3),
        ],
        inventory={'H100': 2},
    )
    cluster.set_target(variant='z-h100', target=3, now=0.0)  # both new ones wait for GPUs
    cluster.arrive(request=request(0, 0.0, model='alpha'), now=0.0)
    observer = Observer(scrape_interval=5.0, scrape_lag=10.0, retention_period=600.0)
    for t in (0.0, 5.0, 10.0):
        cluster.advance(until=t)
        if t == 5.0:
            cluster.arrive(request=request(1, 5.0, model='alpha', output=40), now=5.0)
        observer.scrape(now=t, cluster=cluster)
    snapshot = observer.snapshot(now=20.0, cluster=cluster)
    assert [p.model_id for p in snapshot.pools] == ['org/alpha', 'org/zeta']
    assert [p.arrival_rate for p in snapshot.pools] == [0.1, 0.0]  # 1 arrival in 10 s: alpha's
    roles = {v.name: v.role for v in snapshot.variants}
    assert roles == {'a-h100': 'prefill', 'z-h100': 'both'}
    zeta = next(v for v in snapshot.variants if v.name == 'z-h100')
    # What Kubernetes shows for pods the scheduler cannot place: current 3, ready 1, pending 2.
    assert (zeta.current_replicas, zeta.ready_replicas, zeta.pending_replicas) == (3, 1, 2)
    # Each pool counts its own model's finished requests.
    assert {p.model_id: p.request_count for p in snapshot.pools} == {
        'org/alpha': 1.0,
        'org/zeta': 0.0,
    }


# ---- the GPU inventory ---------------------------------------------------------------------


def test_a_scale_up_beyond_the_inventory_waits_unbound_and_costs_nothing() -> None:
    cluster = Cluster(variants=[spec('h100', model='m', initial_replicas=2)], inventory={'H100': 3})
    assert cluster.set_target(variant='h100', target=5, now=10.0) == (2, 5)
    assert cluster.gpus_used == {'H100': 3}
    assert cluster.existing == {'h100': 3}  # bound: what costs
    assert (cluster.pending_count(variant='h100'), cluster.unbound_count(variant='h100')) == (3, 2)
    assert cluster.next_ready_time() == 100.0  # only the bound one starts its clock
    assert cluster.finish(end=50.0) == {'h100': pytest.approx(2 * 50.0 + 40.0)}
    waits = cluster.gpu_waits(end=50.0)
    assert [(w.replica, w.asked, w.until) for w in waits] == [
        ('h100-0003', 10.0, 50.0),
        ('h100-0004', 10.0, 50.0),
    ]
    assert all(math.isnan(w.bound) for w in waits)


def test_freed_gpus_go_first_come_then_by_model_then_variant_name() -> None:
    variants = [
        spec('a-h100', model='zeta'),
        spec('b-h100', model='alpha'),
        spec('c-h100', model='alpha'),
        spec('x-h100', model='other', initial_replicas=2),
    ]
    cluster = Cluster(variants=variants, inventory={'H100': 5})
    # Asked for at one instant: ties go by model name (alpha before zeta), then variant name.
    for name in ('a-h100', 'c-h100', 'b-h100'):
        cluster.set_target(variant=name, target=2, now=10.0, schedule=False)
    cluster.schedule(now=10.0)
    assert sum(cluster.unbound_count(variant=v) for v in cluster.variant_names) == 3
    cluster.set_target(variant='x-h100', target=1, now=20.0)  # an idle replica: gone at once
    assert cluster.unbound_count(variant='b-h100') == 0
    assert [cluster.unbound_count(variant=v) for v in ('a-h100', 'c-h100')] == [1, 1]
    # An earlier ask beats a model name that sorts first.
    cluster.set_target(variant='b-h100', target=3, now=30.0)
    cluster.set_target(variant='x-h100', target=0, now=40.0)
    assert cluster.unbound_count(variant='c-h100') == 0
    assert [cluster.unbound_count(variant=v) for v in ('a-h100', 'b-h100')] == [1, 1]
    bound = {w.replica: w.bound for w in cluster.gpu_waits(end=50.0) if not math.isnan(w.bound)}
    assert bound == {'b-h100-0001': 20.0, 'c-h100-0001': 40.0}
    assert cluster.next_ready_time() == 110.0


def test_a_big_waiting_replica_does_not_hold_back_a_small_one() -> None:
    big = spec('big', model='large', gpus_per_replica=4, initial_replicas=0)
    small = spec('small', model='little', initial_replicas=1)
    cluster = Cluster(variants=[big, small], inventory={'H100': 3})
    cluster.set_target(variant='big', target=1, now=10.0)
    cluster.set_target(variant='small', target=2, now=20.0)
    assert (cluster.unbound_count(variant='big'), cluster.unbound_count(variant='small')) == (1, 0)
    assert cluster.gpus_used == {'H100': 2}


def test_gpus_freed_by_a_draining_replica_are_bound_when_it_is_gone() -> None:
    cluster = Cluster(
        variants=[spec('a', model='alpha'), spec('z', model='zeta')], inventory={'H100': 2}
    )
    busy = request(0, 0.0, model='alpha', output=30)
    cluster.arrive(request=busy, now=0.0)
    cluster.set_target(variant='z', target=2, now=1.0)  # waits: both GPUs are bound
    cluster.set_target(variant='a', target=0, now=2.0)  # terminating, busy until t = 30
    assert cluster.unbound_count(variant='z') == 1
    cluster.advance(until=25.0)
    assert cluster.unbound_count(variant='z') == 1
    cluster.advance(until=40.0)
    assert busy.finished == 30.0
    assert cluster.unbound_count(variant='z') == 0
    [wait] = cluster.gpu_waits(end=50.0)
    assert (wait.asked, wait.bound) == (1.0, 40.0)  # noticed at the advance horizon
    assert cluster.next_ready_time() == 130.0


def test_scale_down_takes_the_replicas_waiting_for_gpus_first() -> None:
    cluster = Cluster(variants=[spec('h100', model='m', initial_replicas=1)], inventory={'H100': 2})
    cluster.set_target(variant='h100', target=4, now=10.0)  # one bound and starting, two waiting
    cluster.set_target(variant='h100', target=2, now=20.0)
    assert (cluster.pending_count(variant='h100'), cluster.unbound_count(variant='h100')) == (1, 0)
    assert cluster.next_ready_time() == 100.0
    assert [r.name for r in cluster.history] == ['h100-0003', 'h100-0002']
    # Never bound, never paid for: the cost is the two bound replicas' only.
    assert cluster.finish(end=100.0) == {'h100': pytest.approx(100.0 + 90.0)}


@pytest.mark.parametrize(
    ('inventory', 'expected'),
    [
        ({'H100': 1}, 'the initial replicas need 2 H100 GPUs; the inventory has 1'),
        ({'H100': -1}, 'inventory.H100: GPUs must be a whole number >= 0'),
        ({'H100': 1.5}, 'inventory.H100: GPUs must be a whole number >= 0'),
        ({'H100': True}, 'inventory.H100: GPUs must be a whole number >= 0'),
    ],
)
def test_bad_inventories_are_refused(inventory: dict[str, int], expected: str) -> None:
    with pytest.raises(ValueError, match=expected):
        two_models(**inventory)


def test_an_accelerator_the_inventory_does_not_name_is_unlimited() -> None:
    l40s = preset(name='llama-3.1-8b-l40s', variant_name='l40s', perf=UNIT_STEP, max_replicas=9)
    cluster = Cluster(variants=[spec('h100', model='m'), l40s], inventory={'H100': 1})
    cluster.set_target(variant='l40s', target=9, now=0.0)
    assert cluster.unbound_count(variant='l40s') == 0
    assert cluster.gpus_used == {'H100': 1, 'L40S': 9}


# ---- runs ----------------------------------------------------------------------------------


def steady(n: int, *, gap: float, output: int = 20) -> Trace:
    return Trace(
        name='steady',
        arrivals=np.arange(n, dtype=np.float64) * gap,
        input_tokens=np.full(n, 200, dtype=np.int64),
        output_tokens=np.full(n, output, dtype=np.int64),
    )


class Wants:
    """Asks for fixed targets at every cycle; records the views."""

    def __init__(self, wanted: dict[str, int]) -> None:
        self.wanted = wanted
        self.views: list[ControlView] = []

    @property
    def name(self) -> str:
        return 'wants'

    def targets(self, *, view: ControlView) -> dict[str, int]:
        self.views.append(view)
        return dict(self.wanted)

    def wake(self, *, view: ControlView) -> dict[str, int]:
        return {}


def test_a_two_model_run_serves_each_model_on_its_variants_and_is_deterministic() -> None:
    variants = [spec('a-h100', model='alpha'), spec('z-h100', model='zeta')]
    traces = {'alpha': steady(40, gap=3.0), 'zeta': steady(30, gap=4.0, output=5)}

    def once() -> list[tuple[str, str, float, float]]:
        result = run(trace=traces, variants=variants, policy=Wants({}), settings=SimSettings())
        return [(r.model, r.variant, r.first_token, r.finished) for r in result.requests]

    outcome = once()
    assert len(outcome) == 70
    assert {(model, variant) for model, variant, _, _ in outcome} == {
        ('alpha', 'a-h100'),
        ('zeta', 'z-h100'),
    }
    assert outcome == once()
    # Merged in time order, ties by model name: alpha's request at t = 0 comes first.
    assert [m for m, *_ in outcome[:2]] == ['alpha', 'zeta']


def test_a_run_needs_a_trace_per_model() -> None:
    variants = [spec('a-h100', model='alpha'), spec('z-h100', model='zeta')]
    settings = SimSettings()
    with pytest.raises(ValueError, match='one trace serves one model'):
        run(trace=steady(2, gap=1.0), variants=variants, policy=Wants({}), settings=settings)
    with pytest.raises(ValueError, match="no trace for model 'zeta'"):
        run(
            trace={'alpha': steady(2, gap=1.0)},
            variants=variants,
            policy=Wants({}),
            settings=settings,
        )
    with pytest.raises(ValueError, match="model 'omega', which no variant serves"):
        run(
            trace={
                'alpha': steady(2, gap=1.0),
                'zeta': steady(2, gap=1.0),
                'omega': steady(1, gap=1.0),
            },
            variants=variants,
            policy=Wants({}),
            settings=settings,
        )
    twins = [spec('a-h100', model='alpha'), spec('z-h100', model='zeta', model_id='org/alpha')]
    with pytest.raises(ValueError, match='both have model id org/alpha'):
        run(trace={'alpha': steady(2, gap=1.0), 'zeta': steady(2, gap=1.0)}, variants=twins,
            policy=Wants({}), settings=settings)  # fmt: skip


def test_a_binding_inventory_caps_the_gpus_and_the_waits_are_reported() -> None:
    variants = [spec('a-h100', model='alpha'), spec('z-h100', model='zeta')]
    traces = {'alpha': steady(200, gap=1.0), 'zeta': steady(200, gap=1.0)}
    policy = Wants({'a-h100': 4, 'z-h100': 4})
    result = run(
        trace=traces,
        variants=variants,
        policy=policy,
        settings=SimSettings(),
        inventory={'H100': 5},
    )
    gpus = result.timeline.gpus['H100']
    assert max(gpus) == 5
    bound = [
        sum(series[i] for series in result.timeline.replicas.values()) for i in range(len(gpus))
    ]
    assert bound == gpus  # one GPU per replica: the paid replicas are the bound ones
    assert max(sum(s[i] for s in result.timeline.unbound.values()) for i in range(len(gpus))) == 3
    # Both asked at 30 s (+2 s actuation) for 3 more; 3 GPUs were free: all went to alpha.
    waited = sorted((w.variant, w.asked) for w in result.gpu_waits)
    assert waited == [('z-h100', 32.0), ('z-h100', 32.0), ('z-h100', 32.0)]
    assert all(math.isnan(w.bound) for w in result.gpu_waits)
    assert result.inventory == {'H100': 5}
    # The controller sees what Kubernetes shows: 4 wanted, 1 ready, 3 pending.
    late = policy.views[-1].snapshot
    zeta = next(v for v in late.variants if v.name == 'z-h100')
    assert (zeta.current_replicas, zeta.ready_replicas, zeta.pending_replicas) == (4, 1, 3)


def test_equal_decision_times_give_the_last_gpu_to_the_model_that_sorts_first() -> None:
    variants = [spec('a-h100', model='zeta'), spec('z-h100', model='alpha')]
    traces = {'alpha': steady(10, gap=10.0), 'zeta': steady(10, gap=10.0)}
    result = run(
        trace=traces,
        variants=variants,
        policy=Wants({'a-h100': 2, 'z-h100': 2}),
        settings=SimSettings(),
        inventory={'H100': 3},
    )
    assert [(w.variant, w.asked) for w in result.gpu_waits] == [('a-h100', 32.0)]


def test_the_clairvoyant_baseline_stays_within_the_inventory_and_says_when_it_did_not_fit() -> None:
    variants = [
        spec('a-h100', model='alpha', max_replicas=6),
        spec('z-h100', model='zeta', max_replicas=6),
    ]
    traces = {'alpha': steady(600, gap=0.25), 'zeta': steady(600, gap=0.25)}
    capacities = {'a-h100': 1.0, 'z-h100': 1.0}
    view = ControlView(now=0.0, snapshot=Snapshot(), replicas={}, ready={})

    def policy(inventory: dict[str, int] | None) -> ClairvoyantPolicy:
        return ClairvoyantPolicy(
            trace=traces,
            variants=variants,
            slo=SLO(ttft=1.0, itl=0.1),
            cycle=30.0,
            capacities=capacities,
            inventory=inventory,
        )

    free = policy(None)
    assert free.targets(view=view) == {'a-h100': 4, 'z-h100': 4}
    roomy = policy({'H100': 8})
    assert roomy.targets(view=view) == {'a-h100': 4, 'z-h100': 4}
    assert roomy.notes() == []
    tight = policy({'H100': 6})
    assert tight.targets(view=view) == {'a-h100': 4, 'z-h100': 2}  # name order: alpha first
    assert tight.short == [0.0]
    [note] = tight.notes()
    assert 'did not fit the GPU inventory at 1 of 1 decisions' in note
