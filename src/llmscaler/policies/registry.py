"""Which analyzer decides a model, and what its decision leaves in the memory.

Why: `engine.decide()` wires the stages of a cycle; the analysis stage has one path per
analyzer, each with its own inputs from the memory and its own writes back to it. This module
holds that stage: `analyze_model` picks the path from the model's configuration, in this order —
`llmscaler-predictive-config` (`policies.predictive.policy`), `wva-queueing-model-config` (the SLO
path, `policies.wva.slo_queueing`), the saturation config's percentage analyzer (WVA V1), else the
token analyzer (WVA V2) through the threshold post-step, ballot and cost-aware optimizer — and
returns the proposed targets, the model's figures, the analyzer's name, the replicas it could
not size and the writes (`Writes`) the engine applies to the cycle's working memory (`Memory`)
only once the whole model succeeded.

What fails: whatever the analyzers raise (ArithmeticError, ValueError on inputs outside the
snapshot's ranges); the engine turns that into a hold of the model.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from llmscaler.analyze.observation import Observation
from llmscaler.analyze.saturation import percentage, tokens
from llmscaler.analyze.slo import analyzer as slo_queueing
from llmscaler.analyze.validity import Problem
from llmscaler.config.resolved import CoreSettings, ModelConfig
from llmscaler.domain.signals import VariantTarget
from llmscaler.domain.snapshot import Variant
from llmscaler.domain.state import (
    CapacityRecord,
    K2Sample,
    KalmanRecord,
    RateSample,
    VariantLearning,
)
from llmscaler.policies.predictive import policy
from llmscaler.policies.wva import slo_queueing as slo_path
from llmscaler.policies.wva.pipeline import token_targets

SATURATION_PERCENTAGE = 'saturation-percentage'

UNSIZED = Problem(
    metric='num_gpu_blocks',
    what='missing (no cache_config_info and no stored capacity for the variant)',
    missing=True,
)


@dataclass(slots=True)
class Writes:
    """What one model's decision adds to the memory, applied only once it succeeded."""

    history: dict[str, tuple[K2Sample, ...]] = field(default_factory=dict)
    knowledge: dict[str, CapacityRecord] = field(default_factory=dict)
    last_informative: dict[str, float] = field(default_factory=dict)
    kalman: dict[str, KalmanRecord] = field(default_factory=dict)
    forecast: dict[str, tuple[RateSample, ...]] = field(default_factory=dict)
    learning: dict[str, VariantLearning] = field(default_factory=dict)


@dataclass(slots=True)
class Memory:
    """Mutable working copy of `State` for one `decide()` call; it never escapes the call."""

    history: dict[str, tuple[K2Sample, ...]]
    knowledge: dict[str, dict[str, CapacityRecord]]
    """Capacity records by modelID: an analysis only ever reads records of its own model (its
    variants' and compatible siblings' in other namespaces), so it is handed just that slice."""
    last_desired: dict[str, int]
    last_informative: dict[str, float]
    kalman: dict[str, KalmanRecord]
    forecast: dict[str, tuple[RateSample, ...]]
    learning: dict[str, VariantLearning]

    def apply(self, *, model_id: str, writes: Writes) -> None:
        self.history.update(writes.history)
        self.kalman.update(writes.kalman)
        self.forecast.update(writes.forecast)
        self.learning.update(writes.learning)
        if writes.knowledge:
            self.knowledge.setdefault(model_id, {}).update(writes.knowledge)
        self.last_informative.update(writes.last_informative)


@dataclass(frozen=True, slots=True)
class Analysed:
    """One model's analysis: proposed targets, figures, analyzer, unsized replicas, writes."""

    targets: Sequence[VariantTarget]
    figures: tuple[tuple[str, float], ...]
    analyzer: str
    unsized: dict[str, list[tuple[str, Problem]]]
    writes: Writes


def analyze_model(
    *,
    variants: Sequence[Variant],
    observed: Observation,
    model_config: ModelConfig,
    settings: CoreSettings,
    memory: Memory,
    desired: Mapping[str, int],
    now: float,
) -> Analysed:
    """The analysis stage of one model (see the module docstring)."""
    writes = Writes()
    saturation = model_config.saturation
    model_figures: tuple[tuple[str, float], ...] = ()
    unsized: dict[str, list[tuple[str, Problem]]] = {}
    analyzer: str = saturation.analyzer_path
    if model_config.predictive is not None:
        # `llmscaler-predictive-config` applies: the forecast-driven exact mix.
        group = variants[0].group
        ahead = policy.predict(
            variants=variants,
            replicas=observed.fresh,
            pool=observed.pool,
            config=model_config.predictive,
            records=memory.kalman,
            samples=memory.forecast.get(group, ()),
            learning=memory.learning,
            interval=settings.interval,
            desired=desired,
            now=now,
        )
        writes.kalman.update(ahead.kalman_updates)
        writes.forecast[group] = ahead.samples
        writes.learning.update(ahead.learning)
        targets, model_figures, analyzer = ahead.targets, ahead.figures, policy.ANALYZER
    elif model_config.queueing is not None:
        # `wva-queueing-model-config` applies: the SLO path (model-only or hybrid).
        live_key = f'{variants[0].group}|{slo_queueing.ANALYZER}'
        slo = slo_path.slo_path(
            variants=variants,
            replicas=observed.fresh,
            pool=observed.pool,
            model_config=model_config,
            records=memory.kalman,
            last_informative=memory.last_informative.get(live_key),
            interval=settings.interval,
            desired=desired,
            now=now,
        )
        writes.kalman.update(slo.kalman_updates)
        if slo.informative_at is not None:
            writes.last_informative[live_key] = slo.informative_at
        targets, model_figures, analyzer = slo.targets, slo.figures, slo.analyzer
    elif analyzer == SATURATION_PERCENTAGE:
        targets = percentage.decide_percentage(
            variants=variants, replicas=observed.fresh, config=saturation, desired=desired
        )
    else:
        model_id = variants[0].model_id
        analysis = tokens.analyze(
            model_id=model_id,
            namespace=variants[0].namespace,
            variants=variants,
            replicas=observed.fresh,
            pool=observed.pool,
            config=saturation,
            settings=settings,
            history=memory.history,
            knowledge=memory.knowledge.get(model_id, {}),
            now=now,
        )
        writes.history.update(analysis.history_updates)
        writes.knowledge.update(analysis.knowledge_updates)
        # An instance the analyzer could not size is left out of supply and demand alike: it
        # is not reporting, as a replica without KV usage is.
        for replica in analysis.unsized:
            unsized.setdefault(replica.variant, []).append((replica.pod, UNSIZED))
        live_key = f'{variants[0].group}|{analysis.result.analyzer}'
        path = token_targets(
            result=analysis.result,
            variants=variants,
            model_config=model_config,
            last_informative=memory.last_informative.get(live_key),
            interval=settings.interval,
            desired=desired,
            now=now,
        )
        if path.informative_at is not None:
            writes.last_informative[live_key] = path.informative_at
        targets, model_figures = path.targets, path.figures

    return Analysed(
        targets=targets,
        figures=model_figures,
        analyzer=analyzer,
        unsized=unsized,
        writes=writes,
    )
