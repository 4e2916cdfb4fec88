"""WVA's SLO-queueing policy: model-only or hybrid, with the safety rule for missing inputs.

Why: llm-d's Workload Variant Autoscaler sizes on latency targets for a model its
`wva-queueing-model-config` ConfigMap applies to (its presence selects the policy, as in WVA):

- **model-only** (default): `analyze.slo.analyzer` sizes the variants and the universal
  post-step, ballot and cost-aware optimizer (`policies.wva.pipeline`) turn needed vs current
  into targets;
- **hybrid** (WVA v0.4.2 `EXPERIMENTAL_HYBRID_OPTIMIZATION=on`): when the saturation config's
  `analyzers:` list holds an enabled `queueing-model` entry, the percentage-based saturation
  analysis (V1) runs too and `policies.wva.hybrid.arbitrate` combines the two per variant (capacity
  veto, safety block, capacity-driven scale-up, model recommendation);
- **missing inputs hold**: without an arrival rate, a token mix or targets every variant holds
  at max(current, last desired), with a reason naming what is missing. In hybrid mode the
  capacity analysis still decides alone then (the model-based side has nothing to say).

The chosen target source (`explicit` / `inferred` / `fallback`) is in every decision's reason
(`slo targets inferred: TTFT 123 ms, ITL 45 ms`; explicit targets from `service-classes-config`
read `slo targets explicit (service class Premium): ...`) and figures (`slo_target_source` 1/2/3,
`slo_ttft_ms`, `slo_itl_ms`), which the VA status shows.

What fails: nothing raises for inputs within the snapshot's declared ranges.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from llmscaler.analyze.saturation import percentage
from llmscaler.analyze.slo import analyzer as slo_queueing
from llmscaler.config.resolved import (
    FOUR_PARAMETER,
    PARAMETER_COUNT,
    THREE_PARAMETER,
    ModelConfig,
    QueueingModelConfig,
)
from llmscaler.domain.signals import VariantTarget, held
from llmscaler.domain.snapshot import PoolMetrics, ReplicaMetrics, Variant
from llmscaler.domain.state import KalmanRecord
from llmscaler.policies.protocol import Context, Intent, Proposal, Writes
from llmscaler.policies.wva import hybrid
from llmscaler.policies.wva.pipeline import token_targets

NAME: Final = 'slo-queueing'
HYBRID_ANALYZER = 'hybrid'


@dataclass(frozen=True, slots=True)
class SloPath:
    targets: tuple[VariantTarget, ...]
    figures: tuple[tuple[str, float], ...]
    analyzer: str
    kalman_updates: dict[str, KalmanRecord] = field(default_factory=dict)
    informative_at: float | None = None


def is_hybrid(model_config: ModelConfig) -> bool:
    """An enabled `queueing-model` entry in `analyzers:` asks for hybrid arbitration."""
    return any(
        spec.name == slo_queueing.ANALYZER and spec.enabled
        for spec in model_config.saturation.analyzers
    )


def _without_analyzers(model_config: ModelConfig) -> ModelConfig:
    """The model's configuration with an empty `analyzers:` list (itself when it is empty:
    the common case, and two dataclass copies per model and cycle otherwise)."""
    if not model_config.saturation.analyzers:
        return model_config
    return dataclasses.replace(
        model_config, saturation=dataclasses.replace(model_config.saturation, analyzers=())
    )


def slo_path(
    *,
    variants: Sequence[Variant],
    replicas: Sequence[ReplicaMetrics],
    pool: PoolMetrics | None,
    model_config: ModelConfig,
    records: Mapping[str, KalmanRecord],
    last_informative: float | None,
    interval: float,
    desired: Mapping[str, int],
    now: float,
) -> SloPath:
    """The targets of one model on the SLO path (see the module docstring)."""
    assert model_config.queueing is not None
    analysis = slo_queueing.analyze(
        variants=variants,
        replicas=replicas,
        pool=pool,
        config=model_config.queueing,
        records=records,
        now=now,
        interval=interval,
    )
    hybrid_mode = is_hybrid(model_config)
    analyzer = HYBRID_ANALYZER if hybrid_mode else slo_queueing.ANALYZER
    model_targets: dict[str, VariantTarget] = {}
    figures = analysis.figures
    informative_at = None
    if analysis.result is not None and analysis.targets is not None:
        # The queueing-model result is the only vote here: the `analyzers:` list (which may
        # name `queueing-model` for hybrid mode) must not disenfranchise it or override its
        # thresholds of 1.0.
        path = token_targets(
            result=analysis.result,
            variants=variants,
            model_config=_without_analyzers(model_config),
            last_informative=last_informative,
            interval=interval,
            desired=desired,
            now=now,
        )
        informative_at = path.informative_at
        figures = figures + path.figures
        source = analysis.targets
        origin: str = source.source
        if origin == 'explicit' and model_config.queueing.service_class is not None:
            origin = f'explicit (service class {model_config.queueing.service_class})'
        prefix = f'slo targets {origin}: TTFT {source.ttft:.4g} ms, ITL {source.itl:.4g} ms'
        for target in path.targets:
            note = analysis.notes.get(target.variant)
            reason = f'{prefix}; {target.reason}' + (f'; {note}' if note else '')
            model_targets[target.variant] = VariantTarget(
                variant=target.variant,
                target=target.target,
                reason=reason,
                figures=target.figures + analysis.variant_figures.get(target.variant, ()),
            )
    if not hybrid_mode:
        if not model_targets:
            return SloPath(
                targets=held(variants=variants, desired=desired, why=analysis.missing),
                figures=figures,
                analyzer=analyzer,
                kalman_updates=analysis.kalman_updates,
            )
        return SloPath(
            targets=tuple(model_targets[v.name] for v in variants if v.name in model_targets),
            figures=figures,
            analyzer=analyzer,
            kalman_updates=analysis.kalman_updates,
            informative_at=informative_at,
        )
    return SloPath(
        targets=_arbitrated(
            variants=variants,
            replicas=replicas,
            model_config=model_config,
            desired=desired,
            model_targets=model_targets,
            missing=analysis.missing,
        ),
        figures=figures,
        analyzer=analyzer,
        kalman_updates=analysis.kalman_updates,
        informative_at=informative_at,
    )


def _arbitrated(
    *,
    variants: Sequence[Variant],
    replicas: Sequence[ReplicaMetrics],
    model_config: ModelConfig,
    desired: Mapping[str, int],
    model_targets: Mapping[str, VariantTarget],
    missing: str,
) -> tuple[VariantTarget, ...]:
    """Hybrid: V1 capacity targets arbitrated against the model-based ones, per variant."""
    config = model_config.saturation
    capacity = {
        t.variant: t
        for t in percentage.decide_percentage(
            variants=variants, replicas=replicas, config=config, desired=desired
        )
    }
    safe = percentage.analyze(replicas=replicas, config=config).scale_down_safe
    out = []
    for variant in variants:
        cap = capacity.get(variant.name)
        cap_target = cap.target if cap is not None else variant.current_replicas
        model = model_targets.get(variant.name)
        if model is None:
            reason = f'hybrid: model-based {missing or "no target"}; capacity only'
            out.append(VariantTarget(variant=variant.name, target=cap_target, reason=reason))
            continue
        verdict = hybrid.arbitrate(
            current=variant.current_replicas,
            capacity_target=cap_target,
            model_target=model.target,
            scale_down_safe=safe,
        )
        out.append(
            VariantTarget(
                variant=variant.name,
                target=verdict.target,
                reason=f'hybrid: {verdict.reason} [{model.reason}]',
                figures=(
                    *model.figures,
                    ('hybrid_capacity_target', float(cap_target)),
                    ('hybrid_model_target', float(model.target)),
                    ('hybrid_safety_override', float(verdict.safety_override)),
                    ('hybrid_capacity_based', float(verdict.capacity_based)),
                    ('hybrid_model_based', float(verdict.model_based)),
                ),
            )
        )
    return tuple(out)


def queueing_config(*, intent: Intent) -> QueueingModelConfig:
    """The `wva-queueing-model-config` entry of a user stating `intent`: its targets as
    explicit `targetTTFT`/`targetITL` (ms; none: WVA infers them) and its `perfParms`, with the
    performance model they are written for (α, β, γ: three-parameter; α, β, γ, δ, as the
    simulator's presets state them: four-parameter); none stated: the default model."""
    sizes = {len(values) for _, values in intent.perf_parms or ()}
    model = FOUR_PARAMETER if sizes == {PARAMETER_COUNT[FOUR_PARAMETER]} else THREE_PARAMETER
    return QueueingModelConfig(
        target_ttft=intent.ttft * 1000 if intent.ttft is not None else None,
        target_itl=intent.itl * 1000 if intent.itl is not None else None,
        perf_parms=intent.perf_parms,
        performance_model=model,
    )


class SloQueueing:
    """The policy object the registry lists (see the module docstring). Its memory is common
    (`policies.protocol.Memory`): the tuner records, shared with every policy that sizes on the
    queueing model, and the ballot's liveness time."""

    name: Final = NAME
    state_type: Final = None

    def selects(self, config: ModelConfig) -> bool:
        return config.queueing is not None

    def fast_path(self, config: ModelConfig) -> bool:
        return False  # WVA decides at its cycle only

    def configure(self, *, intent: Intent) -> ModelConfig:
        return ModelConfig(queueing=queueing_config(intent=intent))

    def decide(self, *, context: Context, state: None) -> tuple[Proposal, None]:
        memory = context.memory
        live_key = f'{context.group}|{slo_queueing.ANALYZER}'
        slo = slo_path(
            variants=context.variants,
            replicas=context.observed.fresh,
            pool=context.observed.pool,
            model_config=context.model_config,
            records=memory.kalman,
            last_informative=memory.last_informative.get(live_key),
            interval=context.settings.interval,
            desired=context.desired,
            now=context.now,
        )
        writes = Writes(kalman=dict(slo.kalman_updates))
        if slo.informative_at is not None:
            writes.last_informative[live_key] = slo.informative_at
        proposal = Proposal(
            targets=slo.targets, figures=slo.figures, analyzer=slo.analyzer, writes=writes
        )
        return proposal, None


POLICY: Final = SloQueueing()
