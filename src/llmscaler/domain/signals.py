"""What analyzers hand to the ballot and the optimizer.

Why: analyzers quantify capacity (tokens, requests/s, ...) and never pick variants; the optimizer
picks variants and never looks at metrics. These types are the narrow waist between the two,
in the shape of WVA's `AnalyzerResult` / `VariantCapacity` (llm-d workload-variant-autoscaler
v0.9.0, internal/domain/).

All capacities of one analyzer share one unit (the analyzer's own); `per_replica_capacity` is in
scale-target replica units (an LWS group, a DP>1 pod), never engine-instance units.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from llmscaler.domain.basics import Role
from llmscaler.domain.snapshot import Variant, effective_cost

UNINFORMATIVE_REASONS = frozenset({'no-data', 'error'})


@dataclass(frozen=True, slots=True)
class VariantCapacity:
    """One variant as an analyzer sees it."""

    variant: str
    namespace: str
    role: Role
    cost: float
    accelerator: str
    gpus_per_replica: int
    min_replicas: int
    max_replicas: int
    current_replicas: int
    per_replica_capacity: float
    replica_count: int
    """Replicas whose capacity is live (measured), in scale-target units."""
    pending: int
    total_demand: float
    reason: str
    """Where the capacity came from (`P1-obs`, `P2-hist`, `P3-k2`, `P4-k1`, `P0-store`,
    `no-data`, `error`, or an analyzer's own label)."""

    @property
    def effective_cost(self) -> float:
        """`cost` under the one cost rule (`domain.snapshot.effective_cost`)."""
        return effective_cost(self.cost)

    @property
    def total_capacity(self) -> float:
        return self.replica_count * self.per_replica_capacity

    @property
    def utilization(self) -> float:
        capacity = self.total_capacity
        return self.total_demand / capacity if capacity > 0 else 0.0


@dataclass(frozen=True, slots=True)
class Totals:
    """The three linear aggregates of a scope (model or role)."""

    supply: float = 0.0
    anticipated_supply: float = 0.0
    demand: float = 0.0


@dataclass(frozen=True, slots=True)
class AnalyzerResult:
    """One analyzer's view of one model.

    `roles` is empty for a model whose variants all have role `both`; otherwise it has one entry
    per role present (sorted by role), each with its share of the scheduler-queue demand.
    `scale_up_threshold`/`scale_down_boundary` are the thresholds the universal post-step
    (`policies.wva.thresholds`) applies to this analyzer.
    """

    analyzer: str
    variants: tuple[VariantCapacity, ...]
    totals: Totals
    roles: tuple[tuple[Role, Totals], ...] = ()
    scale_up_threshold: float = 0.85
    scale_down_boundary: float = 0.70
    score: float = 1.0

    @property
    def informative(self) -> bool:
        """At least one variant has a capacity figure that is not `no-data`/`error`."""
        return any(v.reason not in UNINFORMATIVE_REASONS for v in self.variants)


@dataclass(frozen=True, slots=True)
class RoleSignal:
    """Required (RC) and spare (SC) capacity of one scope after the threshold post-step."""

    role: Role
    required: float
    spare: float


@dataclass(frozen=True, slots=True)
class AnalyzerSignal:
    """One voting analyzer's demand on the optimizer.

    `roles` holds one `RoleSignal` per role the optimizer works on (just `both` for a
    non-disaggregated model); `capacity` maps variant name → per-replica capacity in this
    analyzer's unit. `live` is False for an analyzer whose last informative result is older than
    the liveness window: it neither vetoes nor constrains scale-down (as in WVA's ballot).
    """

    analyzer: str
    live: bool
    score: float
    roles: tuple[RoleSignal, ...]
    capacity: tuple[tuple[str, float], ...]

    def role(self, role: Role) -> RoleSignal | None:
        for signal in self.roles:
            if signal.role == role:
                return signal
        return None

    def capacity_of(self, variant: str) -> float:
        for name, value in self.capacity:
            if name == variant:
                return value
        return 0.0


@dataclass(frozen=True, slots=True)
class ScalingRequest:
    """What the ballot hands the optimizer for one model.

    `variants` come from the anchor analyzer (identity fields plus its capacities), sorted by
    name; `signals` from every voting analyzer, sorted by analyzer name.
    """

    model_id: str
    namespace: str
    variants: tuple[VariantCapacity, ...]
    signals: tuple[AnalyzerSignal, ...]
    priority: float = 1.0

    @property
    def roles(self) -> tuple[Role, ...]:
        return tuple(sorted({v.role for v in self.variants}))


@dataclass(frozen=True, slots=True)
class VariantTarget:
    """The optimizer's answer for one variant."""

    variant: str
    target: int
    reason: str
    figures: tuple[tuple[str, float], ...] = ()
    """Named numbers behind the target (e.g. `required`, `spare`, `per_replica_capacity`)."""


def held(
    *, variants: Sequence[Variant], desired: Mapping[str, int], why: str
) -> tuple[VariantTarget, ...]:
    """Every variant held at max(current, last desired): a hold never lowers a target."""
    return tuple(
        VariantTarget(
            variant=v.name,
            target=max(v.current_replicas, desired.get(v.name, 0)),
            reason=f'hold: {why}; targets kept',
        )
        for v in variants
    )
