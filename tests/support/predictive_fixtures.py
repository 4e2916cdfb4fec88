"""A two-variant fleet (H100, L40S) under the predictive analyzer, shared by the predictive and
collector tests."""

from __future__ import annotations

import dataclasses

from llmscaler.config.resolved import Config, ModelConfig, PredictiveConfig, QueueingModelConfig
from llmscaler.domain.snapshot import PoolMetrics, ReplicaMetrics, Snapshot
from llmscaler.domain.state import State
from llmscaler.policies.predictive.state import PredictiveState
from tests.support.engine_fixtures import MODEL, NS, replica, variant

NOW = 100_000.0
PARAMS = (
    ('H100', (8.0, 0.05, 20.0, 0.0006)),
    ('L40S', (20.0, 0.15, 50.0, 0.0015)),
)
SETTINGS = PredictiveConfig(
    slo=QueueingModelConfig(target_ttft=2000.0, target_itl=60.0, perf_parms=PARAMS),
    startup_seconds=90.0,
    scale_down_delay=120.0,
)
CONFIG = Config(default=ModelConfig(predictive=SETTINGS))


def fleet(*, h100: int, l40s: int, rate: float, itl: float = 0.02, ttft: float = 0.2) -> Snapshot:
    """Two variants at the given counts, each replica busy at an even share of `rate`."""
    variants = (
        variant('h100', accelerator='H100', cost=3.9, current_replicas=h100, ready_replicas=h100),
        variant('l40s', accelerator='L40S', cost=1.9, current_replicas=l40s, ready_replicas=l40s),
    )
    share = rate / max(1, h100 + l40s)
    replicas: list[ReplicaMetrics] = []
    for name, count in (('h100', h100), ('l40s', l40s)):
        for pod in range(count):
            replicas.append(
                replica(
                    name,
                    pod,
                    arrival_rate=share,
                    avg_ttft=ttft,
                    avg_itl=itl,
                    running_requests=4.0,
                )
            )
    pool = PoolMetrics(model_id=MODEL, namespace=NS, observed_at=NOW - 5, arrival_rate=rate)
    return Snapshot(variants=variants, replicas=tuple(replicas), pools=(pool,))


def own_state(state: State) -> PredictiveState:
    """The predictive policy's state of the fleet's model."""
    found = state.policy_states('predictive')[f'{MODEL}|{NS}']
    assert isinstance(found, PredictiveState)
    return found


def observed(snapshot: Snapshot, *, at: float) -> Snapshot:
    """`snapshot` as a cycle at `at` reads it: every reading taken 5 s before."""
    return dataclasses.replace(
        snapshot,
        replicas=tuple(dataclasses.replace(r, observed_at=at - 5) for r in snapshot.replicas),
        pools=tuple(dataclasses.replace(p, observed_at=at - 5) for p in snapshot.pools),
    )
