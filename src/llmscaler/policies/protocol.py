"""What a policy is: what it is handed for one model in one cycle, and what it hands back.

Why: a policy decides a model's targets from what the cycle observed and what it remembers. It
composes estimators (`analyze/`) and solvers (`optimize/`) and keeps memory of its own; the
engine knows it only through this protocol. Per model and cycle `engine.decide()` picks one
policy (`policies.registry.select`), hands it a `Context` and the model's own state under that
policy (None the first time), and takes back a `Proposal` and the new state. The enforcers
(scale-to-zero, capacity floors, the safety rules, bounds) and the GPU limiter then run on the
proposal whatever the policy, so a policy never has to re-implement them.

Memory comes in two kinds:
- the *common* memory (`Memory`), kept by the engine for every policy: the token analyzer's k2
  history and capacity knowledge (shared across namespaces of one model), the ballot's
  liveness times, and the SLO model's tuner records (shared by every policy that sizes on the
  queueing model, so a model keeps its tuned parameters when it changes policy). A policy reads
  it through the context and asks for changes in its proposal's `Writes`;
- the policy's *own* state for the model, a typed value (`Policy.state_type`) the engine keeps
  under the policy's name and the model's group, and persists in `State.policies`.

`Intent` is what a user states about a model when choosing a policy (an SLO, how long a replica
takes to start, a replica's performance model): `Policy.configure` turns it into the model's
configuration that selects the policy, as a user would write it. The simulator builds its
policies by name that way.

What fails: a policy raises ArithmeticError or ValueError only for inputs outside the
snapshot's declared ranges; the engine then holds the model and keeps its memory as it was.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from llmscaler.analyze.observation import Observation
from llmscaler.analyze.validity import Problem
from llmscaler.config.perf_parms import PerfParmsByAccelerator
from llmscaler.config.resolved import CoreSettings, ModelConfig
from llmscaler.domain.signals import VariantTarget
from llmscaler.domain.snapshot import Variant
from llmscaler.domain.state import CapacityRecord, K2Sample, KalmanRecord

S = TypeVar('S')


@dataclass(frozen=True, slots=True)
class Memory:
    """The common memory as one model's policy reads it (see the module docstring)."""

    history: Mapping[str, tuple[K2Sample, ...]]
    knowledge: Mapping[str, CapacityRecord]
    """The capacity records of the model's ID (its variants' and compatible siblings' in other
    namespaces): an analysis only ever reads those."""
    last_informative: Mapping[str, float]
    kalman: Mapping[str, KalmanRecord]


@dataclass(slots=True)
class Writes:
    """What one model's decision adds to the common memory, applied only once it succeeded."""

    history: dict[str, tuple[K2Sample, ...]] = field(default_factory=dict)
    knowledge: dict[str, CapacityRecord] = field(default_factory=dict)
    last_informative: dict[str, float] = field(default_factory=dict)
    kalman: dict[str, KalmanRecord] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Context:
    """Everything a policy reads to decide one model in one cycle."""

    variants: Sequence[Variant]
    """The model's variants, sorted by name (one model ID, one namespace)."""
    observed: Observation
    """The model's replicas and pool as judged before any analysis: `observed.fresh` are the
    replicas to analyse."""
    model_config: ModelConfig
    settings: CoreSettings
    memory: Memory
    desired: Mapping[str, int]
    """The last target decided per variant name (or the one its VA status published)."""
    now: float

    @property
    def group(self) -> str:
        """The model's group key (`modelID|namespace`)."""
        return self.variants[0].group


@dataclass(frozen=True, slots=True)
class Proposal:
    """A policy's answer for one model: targets before enforcement, and what to remember."""

    targets: Sequence[VariantTarget]
    figures: tuple[tuple[str, float], ...]
    """The model's named figures, added to every variant's decision."""
    analyzer: str
    """The name every decision of the model carries in `analyzer`."""
    unsized: Mapping[str, Sequence[tuple[str, Problem]]] = field(default_factory=dict)
    """Per variant: replicas the policy could not size, reported as not reporting (they hold
    the model as a missing metric does)."""
    writes: Writes = field(default_factory=Writes)


@dataclass(frozen=True, slots=True)
class Intent:
    """What a user states about a model when choosing a policy for it."""

    ttft: float | None = None
    """Time-to-first-token target (s), or None to leave targets to the policy."""
    itl: float | None = None
    """Mean inter-token latency target (s); set together with `ttft`."""
    startup_seconds: float | None = None
    """From a scale-up decision to a serving replica (s), or None for the policy's default."""
    perf_parms: PerfParmsByAccelerator | None = None
    """A replica's performance model per accelerator, where it is known."""


class Policy(Protocol[S]):
    """One way of deciding a model (see the module docstring)."""

    @property
    def name(self) -> str:
        """The policy's name: in the registry, in `State.policies` and in the simulator."""
        ...

    @property
    def state_type(self) -> type[S] | None:
        """The type of the policy's own state per model (None: it keeps none)."""
        ...

    def selects(self, config: ModelConfig) -> bool:
        """Whether a model with this configuration is decided by this policy, unless a policy
        ahead of it in the registry selects it first."""
        ...

    def configure(self, *, intent: Intent) -> ModelConfig:
        """The model configuration a user stating `intent` writes to have this policy."""
        ...

    def fast_path(self, config: ModelConfig) -> bool:
        """Whether a burst between cycles has this model decided again at once (`burst`)."""
        ...

    def decide(self, *, context: Context, state: S | None) -> tuple[Proposal, S | None]:
        """The model's proposal and its new state (None: nothing to keep)."""
        ...
