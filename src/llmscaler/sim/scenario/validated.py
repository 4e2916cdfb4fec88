"""The scenario as the simulator runs it: its models, variants, workload, policies and settings.

Why: a `Scenario` is what `sim.scenario.loader` hands out once a document is valid, and what
every later step reads: each model's workload and SLO (`sim.scenario.workloads`), the start fleet
and the policies (`sim.scenario.setup`), the run and its report (`sim.simulate`). The loader
itself asks the set-up which policy names exist, so the type sits below both.
What fails: nothing; the loader validates.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from llmscaler.sim.runner import SimSettings
from llmscaler.sim.scenario.document import WorkloadModel, describe_workload
from llmscaler.sim.vocabulary import SLO, VariantSpec


@dataclass(frozen=True, slots=True)
class ModelSetup:
    """One model of a scenario: its variants, its workload, the SLO it is judged by."""

    name: str
    model_id: str
    variants: tuple[VariantSpec, ...]
    workload: WorkloadModel | None
    """Its own workload; None: its rows of the scenario's shared trace."""
    slo: SLO | None = None
    """Its SLO or the scenario's; None: derived (`sim.scenario.workloads.derive_slo`)."""
    where: str = ''
    """Its place in the document, a prefix of field names ('' or 'models.1.')."""


@dataclass(frozen=True, slots=True)
class Scenario:
    """A validated scenario, ready to run. `variants` are every model's, models in document
    order; `workload` the one model's, or the trace the models share (else empty)."""

    name: str
    variants: tuple[VariantSpec, ...]
    workload: WorkloadModel
    policies: tuple[str, ...]
    settings: SimSettings
    slo: SLO | None = None
    seed: int = 1
    source: str = '<built-in>'
    document: dict[str, Any] = field(default_factory=dict)
    warm_start: bool = False
    models: tuple[ModelSetup, ...] = ()
    inventory: dict[str, int] | None = None
    """GPUs per accelerator type; None: unlimited."""

    @property
    def several_models(self) -> bool:
        return len(self.models) > 1

    @property
    def first_variants(self) -> tuple[str, ...]:
        """The first variant of each model: where `static:N` puts its N."""
        return tuple(m.variants[0].name for m in self.models if m.variants)

    @property
    def workload_text(self) -> str:
        """The workload in a few words (`describe_workload`), per model with several."""
        if not self.several_models:
            return describe_workload(workload=self.workload)
        if self.workload.trace is not None:
            return describe_workload(workload=self.workload) + ', split by model'
        return '; '.join(
            f'{m.name}: {describe_workload(workload=m.workload or WorkloadModel())}'
            for m in self.models
        )
