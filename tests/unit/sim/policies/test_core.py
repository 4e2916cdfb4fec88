"""Simulator policies: the core as the controller runs it and a fixed fleet (the HPA peers are
in test_sim_peers.py).

| case | expectation |
|---|---|
| CorePolicy on a snapshot | the targets of a direct `engine.decide` call; state carried on |
| CorePolicy wake, idle model with a queue | cheapest variant to 1 |
| CorePolicy wake, a burst at the gateway | raised within seconds (the fast path) |
| Static parsing | static:N on the first variant, explicit lists, every error |
| properties | CorePolicy = decide on any snapshot |
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings

from llmscaler.config.resolved import Config
from llmscaler.domain.snapshot import PoolMetrics, Snapshot
from llmscaler.domain.state import EMPTY_STATE
from llmscaler.engine import decide
from llmscaler.sim.policies.core import CorePolicy, StaticPolicy, parse_static
from llmscaler.sim.vocabulary import ControlView
from tests.support.configs import TOKEN
from tests.support.engine_fixtures import MODEL, NS, variant
from tests.support.predictive_fixtures import CONFIG as PREDICTIVE
from tests.support.predictive_fixtures import NOW as PNOW
from tests.support.predictive_fixtures import fleet, observed
from tests.support.sim_fixtures import replica, running, view
from tests.support.strategies import NOW, snapshots

# ---- CorePolicy ------------------------------------------------------------------------------


def test_core_policy_returns_the_engine_decisions_and_carries_the_state() -> None:
    variants = [running('h100', 2, cost=3.9), running('l40s', 1, cost=1.9)]
    replicas = [
        replica('h100', 0, queue=8.0, kv=0.9),
        replica('h100', 1, queue=6.0, kv=0.85),
        replica('l40s', 0, queue=0.0, kv=0.2),
    ]
    first = view(variants, replicas)
    policy = CorePolicy(name='default', config=Config())
    assert policy.name == 'default'
    assert policy.state == EMPTY_STATE
    direct = decide(snapshot=first.snapshot, config=Config(), state=EMPTY_STATE, now=NOW)
    assert policy.targets(view=first) == {d.variant: d.target for d in direct.decisions}
    assert policy.last_decisions == direct.decisions
    assert policy.state == direct.state
    # The second cycle runs on the state the first one returned.
    second = view(variants, replicas, now=NOW + 30.0)
    again = decide(snapshot=second.snapshot, config=Config(), state=direct.state, now=NOW + 30.0)
    assert policy.targets(view=second) == {d.variant: d.target for d in again.decisions}
    assert policy.state == again.state


def test_core_policy_token_analyzer_keeps_its_memory() -> None:
    variants = [running('h100', 1, cost=3.9)]
    replicas = [replica('h100', 0, queue=12.0, kv=0.95)]
    policy = CorePolicy(name='saturation-token', config=TOKEN)
    policy.targets(view=view(variants, replicas))
    expected = decide(
        snapshot=view(variants, replicas).snapshot, config=TOKEN, state=EMPTY_STATE, now=NOW
    )
    assert policy.state == expected.state
    assert policy.state.last_desired == (('llm/h100', expected.decisions[0].target),)


def test_core_policy_wakes_the_cheapest_variant_of_an_idle_model_with_a_queue() -> None:
    variants = [variant('h100', cost=3.9), variant('l40s', cost=1.9)]
    queued = PoolMetrics(model_id=MODEL, namespace=NS, observed_at=NOW, queue_size=2.0)
    policy = CorePolicy(name='default', config=Config())
    assert policy.wake(view=view(variants, pools=[queued])) == {'l40s': 1}
    empty = PoolMetrics(model_id=MODEL, namespace=NS, observed_at=NOW, queue_size=0.0)
    assert policy.wake(view=view(variants, pools=[empty])) == {}
    # A model with a replica is the main cycle's business.
    awake = [running('h100', 1, cost=3.9), variant('l40s', cost=1.9)]
    assert policy.wake(view=view(awake, pools=[queued])) == {}


def test_core_policy_raises_a_model_whose_gateway_shows_a_burst() -> None:
    snapshot = observed(fleet(h100=1, l40s=0, rate=2.0), at=PNOW)
    policy = CorePolicy(name='predictive', config=PREDICTIVE)

    def at(now: float, arrived: float) -> ControlView:
        return ControlView(
            now=now,
            snapshot=observed(snapshot, at=now),
            replicas={'h100': 1, 'l40s': 0},
            ready={'h100': 1, 'l40s': 0},
            gateways={f'{MODEL}|{NS}': (round(arrived), 0)},
        )

    policy.targets(view=at(PNOW - 30, 0.0))
    # Ten seconds at the cycle's rate, then a burst of 40 req/s: raised within 5 s.
    arrived, raised_at = 0.0, None
    for second in range(1, 16):
        arrived += 2.0 if second <= 10 else 40.0
        wanted = policy.wake(view=at(PNOW - 30 + second, arrived))
        if wanted and raised_at is None:
            raised_at = second
            assert all(wanted[v] > {'h100': 1, 'l40s': 0}[v] for v in wanted)
    assert raised_at is not None
    assert raised_at <= 10 + 5
    assert [r.group for r in policy.bursts] == [f'{MODEL}|{NS}']
    # Before its first cycle, a policy has nothing to size a burst with.
    fresh = CorePolicy(name='predictive', config=PREDICTIVE)
    assert all(fresh.wake(view=at(PNOW + s, 40.0 * s)) == {} for s in range(12))
    # Without gateway counts, the same policy never raises.
    blind = CorePolicy(name='predictive', config=PREDICTIVE)
    blind.targets(view=at(PNOW - 30, 0.0))
    quiet = dataclasses.replace(at(PNOW - 15, 0.0), gateways={})
    assert blind.wake(view=quiet) == {}


@settings(max_examples=40, deadline=None)
@given(snapshot=snapshots())
def test_core_policy_equals_decide_on_any_snapshot(snapshot: Snapshot) -> None:
    policy = CorePolicy(name='token', config=TOKEN)
    control = ControlView(now=NOW, snapshot=snapshot, replicas={}, ready={})
    direct = decide(snapshot=snapshot, config=TOKEN, state=EMPTY_STATE, now=NOW)
    assert policy.targets(view=control) == {d.variant: d.target for d in direct.decisions}


# ---- StaticPolicy ----------------------------------------------------------------------------


def test_parse_static_count_goes_on_the_first_variant() -> None:
    policy = parse_static(text='static:3', variants=['l40s', 'h100'])
    assert policy.name == 'static:3'
    assert policy.fixed == {'h100': 0, 'l40s': 3}
    assert policy.targets(view=view([running('l40s', 1)])) == {'h100': 0, 'l40s': 3}
    assert policy.wake(view=view([variant('l40s')])) == {}


def test_parse_static_explicit_list() -> None:
    policy = parse_static(text='static:h100=2, l40s=1', variants=['h100', 'l40s', 'a100'])
    assert policy.fixed == {'a100': 0, 'h100': 2, 'l40s': 1}
    # The same targets every cycle.
    assert policy.targets(view=view([])) == policy.targets(view=view([], now=NOW + 30))


@pytest.mark.parametrize(
    ('text', 'message'),
    [
        ('static:a100=1', r'unknown variant .*a100.*valid: h100, l40s'),
        ('static:', 'empty'),
        ('static:-1', 'integer >= 0'),
        ('static:1.5', 'integer >= 0'),
        ('static:h100=x', 'integer >= 0'),
        ('static:h100=1,h100=2', 'twice'),
        ('static:h100=1,', 'VARIANT=N'),
        ('static:=2', 'VARIANT=N'),
        ('fixed:2', 'not a static policy'),
    ],
)
def test_parse_static_errors(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_static(text=text, variants=['h100', 'l40s'])


def test_parse_static_without_variants() -> None:
    with pytest.raises(ValueError, match='no variants'):
        parse_static(text='static:2', variants=[])


def test_static_policy_rejects_negative_targets() -> None:
    with pytest.raises(ValueError, match='>= 0'):
        StaticPolicy(targets={'h100': -1}, name='bad')
    assert StaticPolicy(targets={'b': 1, 'a': 2}, name='s').fixed == {'a': 2, 'b': 1}
