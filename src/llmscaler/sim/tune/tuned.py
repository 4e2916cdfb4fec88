"""What a tuning is asked (`Options`) and what it found (`Tuned`), shared by `run` and `report`.

Why: the course (`run`) builds a `Tuned` and the report reads one; the types sit below both so
neither imports the other.

What fails: `Options` raises `ValueError` for a goal outside (0.5, 1) or a budget or seed count
below 1.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from llmscaler.config.resolved import ModelConfig
from llmscaler.sim.scenario.validated import Scenario
from llmscaler.sim.tune.predictive import PredictiveSpace
from llmscaler.sim.tune.problem import Problem, Row
from llmscaler.sim.tune.search import Outcome
from llmscaler.sim.tune.space import Candidate, PolicySpace, Space
from llmscaler.sim.vocabulary import SLO

DEFAULT_BUDGET = 40
DEFAULT_SEEDS = 2
DEFAULT_HOLDOUT = 0.25
DEFAULT_GOAL = 0.99


@dataclass(frozen=True, slots=True)
class Options:
    """What the user asks of the search."""

    goal: float = DEFAULT_GOAL
    """The share of requests that must meet the SLO."""
    budget: int = DEFAULT_BUDGET
    """Simulations the search may run."""
    seeds: int = DEFAULT_SEEDS
    holdout: float = DEFAULT_HOLDOUT
    slo: SLO | None = None
    """The SLO; None: the scenario's, else derived from the search part."""
    policy: PolicySpace[Any] = field(default_factory=PredictiveSpace)
    """The policy tuned and the settings searched (`tunables`)."""
    space: Space = field(default_factory=Space)
    """The variants offered and their bounds."""

    def __post_init__(self) -> None:
        if not 0.5 < self.goal < 1.0:
            raise ValueError(f'the attainment goal must be in (0.5, 1), got {self.goal}')
        if self.budget < 1 or self.seeds < 1:
            raise ValueError(f'budget and seeds must be ≥ 1, got {self.budget}, {self.seeds}')


@dataclass(frozen=True, slots=True)
class Tuned:
    """A finished tuning: the search, the choice and the held-back comparison."""

    scenario: Scenario
    options: Options
    problem: Problem
    candidates: int
    """Configurations in the grid."""
    outcome: Outcome[Candidate[Any]]
    chosen: Candidate[Any]
    settings: ModelConfig
    """The model's configuration under the chosen candidate (what the ConfigMap says)."""
    defaults: Candidate[Any]
    held_back: tuple[Row, ...]
    held_back_runs: int
    wall_seconds: float

    @property
    def slo(self) -> SLO:
        return self.problem.slo

    @property
    def simulations(self) -> int:
        """Every simulation the command ran or took from the cache."""
        return self.outcome.runs + self.problem.calibration_runs + self.held_back_runs
