"""The memory `engine.decide()` returns and is handed back next cycle (`State`).

Why: the decision core is pure, so whatever it must remember (k2 history, capacity knowledge,
last targets, tuner records, and each policy's own state per model) travels in this value;
the controller and the simulator keep it between cycles, and a restart starts from
`EMPTY_STATE` (or a saved copy).

What fails: nothing raises; construction does not validate.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal, TypeVar

from annotated_types import Ge, Le, MaxLen, MinLen

from llmscaler.domain.basics import STRICT_KEYS, Count, NonNegative
from llmscaler.domain.snapshot import EngineParams

_V = TypeVar('_V')


@dataclass(frozen=True, slots=True)
class K2Sample:
    """One observed compute-bound capacity (tokens in use at a saturated queue), with its time."""

    __pydantic_config__ = STRICT_KEYS

    value: NonNegative
    at: float


@dataclass(frozen=True, slots=True)
class CapacityRecord:
    """What is known of one variant's per-replica capacity, kept for when it has no replicas.

    `source` is `live` (measured from running replicas) or `deployment` (derived from the engine
    arguments of the scale target). The memory bound k1 follows from `total_kv_capacity_tokens`
    (0 when unknown) and the KV-cache threshold.
    """

    __pydantic_config__ = STRICT_KEYS

    namespace: str
    model_id: str
    variant: str
    accelerator: str
    gpus_per_replica: Count
    effective_capacity: NonNegative
    total_kv_capacity_tokens: Annotated[int, Ge(0), Le(2**63 - 1)]
    source: Literal['live', 'deployment']
    updated_at: float
    engine: EngineParams | None = None


@dataclass(frozen=True, slots=True)
class KalmanRecord:
    """One variant's performance-model tuner (`analyze.learning.kalman`): state, covariance and
    origin.

    `x` is [α, β, γ] in ms (WVA main's three-parameter service model: iteration overhead, per
    token computed, per token of KV cache held) or [α, β, γ, δ] in ms (the WVA design paper's
    ITL = α + β·b, prefill = γ + δ·n_in·b); its length names the model, and the analyzer
    restarts a record whose model is not the configured one. `p` its n×n covariance, row-major;
    `seed` the values the filter started from (its bounds are
    [seed/100, seed×100]); `engine` the fingerprint of the serving arguments and accelerator it
    learnt on (a change restarts from the seed); `nis` the last normalised innovation;
    `rejected` the count of rejected steps in a row; `updated_at` the last accepted step.
    """

    __pydantic_config__ = STRICT_KEYS

    x: Annotated[tuple[float, ...], MinLen(3), MaxLen(4)]
    p: Annotated[tuple[float, ...], MinLen(9), MaxLen(16)]
    seed: Annotated[tuple[float, ...], MinLen(3), MaxLen(4)]
    engine: str
    nis: float = 0.0
    rejected: Count = 0
    updated_at: float = 0.0


@dataclass(frozen=True, slots=True)
class State:
    """The decision core's memory between cycles, explicit so it can be persisted.

    - `k2_history`: rolling windows of observed compute-bound capacity, keyed
      `modelID|accelerator|gpusPerReplica|outputBucket`; samples expire (default 24 h).
    - `capacity`: capacity knowledge per variant, keyed `namespace|modelID|variant`; records expire
      (default 7 days).
    - `last_desired`: the last target decided per variant key (`namespace/name`).
    - `last_informative`: per `group|analyzer`, the time of the last informative result (liveness).
    - `kalman`: the SLO analyzer's tuner per variant key (`namespace/name`); variants gone from
      the snapshot are dropped, and a restart (an empty state) seeds each variant again from
      its first observation.
    - `policies`: each policy's own state per model, by policy name then group
      (`modelID|namespace`), sorted; its type is the policy's (`policies.protocol.Policy
      .state_type`), which the JSON face (`llmscaler.io`) validates it against. A model's state
      under a policy is dropped once the model is gone from the snapshot.
    """

    __pydantic_config__ = STRICT_KEYS

    k2_history: tuple[tuple[str, tuple[K2Sample, ...]], ...] = ()
    capacity: tuple[tuple[str, CapacityRecord], ...] = ()
    last_desired: tuple[tuple[str, Count], ...] = ()
    last_informative: tuple[tuple[str, float], ...] = ()
    kalman: tuple[tuple[str, KalmanRecord], ...] = ()
    policies: tuple[tuple[str, tuple[tuple[str, object], ...]], ...] = ()

    def k2_history_map(self) -> dict[str, tuple[K2Sample, ...]]:
        return dict(self.k2_history)

    def capacity_map(self) -> dict[str, CapacityRecord]:
        return dict(self.capacity)

    def last_desired_map(self) -> dict[str, int]:
        return dict(self.last_desired)

    def last_informative_map(self) -> dict[str, float]:
        return dict(self.last_informative)

    def kalman_map(self) -> dict[str, KalmanRecord]:
        return dict(self.kalman)

    def policy_states(self, name: str) -> dict[str, object]:
        """Policy `name`'s states by group (empty when it keeps none)."""
        return dict(dict(self.policies).get(name, ()))


def sorted_items(mapping: dict[str, _V]) -> tuple[tuple[str, _V], ...]:
    """Freeze a mapping into a tuple of pairs sorted by key, the form `State` stores."""
    return tuple(sorted(mapping.items(), key=lambda item: item[0]))


EMPTY_STATE = State()
