"""The predictive policy: the cheapest variant mix that keeps the SLO over the start-up horizon.

Why: the other analyzers size for the load of the last minute, with saturation signals that miss
latency misses (a slow variant past its ITL target with a short queue), and move a replica or a
variant at a time; a replica asked for now serves only after its start-up. This analyzer asks,
per model and cycle, "which mix of variants, as cheap as possible, serves within the latency
targets the load that may arrive before the replicas I ask for now are ready?" and answers it in
one step:

1. **SLO model** (`analyze.slo.analyzer`, shared with the SLO path): the Kalman-tuned
   α, β, γ, δ of each variant, the token mix, the latency targets (explicit, service class,
   inferred, fallback) and the largest rate one replica sustains within them. The targets are
   scaled by `latencyMargin`: the model predicts *mean* TTFT and ITL, the SLO is about each
   request. Missing inputs hold (max(current, last desired)), with the reason; a model known
   to receive and hold nothing is idle, not missing its token mix, and goes to its minimum
   once that has lasted `scaleDownDelaySeconds` (`policies.predictive.inputs`).
2. **Prefill interference** (`interference_rate`): the rate is capped where the mean ITL,
   stretched by the share of the engine's time that prompts take, reaches the ITL target. A
   variant whose busy replicas meet both targets now (and drain no backlog) shows ITLs that
   already hold that stretch at their rate, and its tuned line was fitted on them: only the
   stretch's growth beyond that rate is counted (figure `stretch_from_rate`). A variant not
   seen meeting them, idle or overloaded, is counted with the whole stretch.
3. **Observed latency** (`analyze.slo.capacity`): each variant busy at `LOADED_SHARE` or more
   of what it is believed to sustain is a reading of the model's error: the rates r' at which
   the model predicts the TTFT and the ITL the variant shows, against the rate r it shows them
   at. The smaller r/r' is this cycle's capacity scale κ, smoothed in log space, kept in
   [`SCALE_MIN`, `SCALE_MAX`] and remembered (the policy's state) with the highest rate the
   variant was seen meeting its targets at; the variant's capacity is the model's × κ. A cycle
   that drains a backlog (requests at the gateway, or more than `QUEUED_READING` waiting per
   replica) is no reading: that TTFT says how long the backlog was, not what a replica
   sustains (the SLO path's observed-latency guard is not used for the same reason: after a
   burst it reports the fleet worth a fraction of itself and buys every maximum).
4. **Forecast** (`analyze.learning.rate_forecast`): the upper `forecastQuantile` of the model's
   arrival rate over the horizon startupSeconds + 2 cycles; the requests already waiting (replicas'
   queues and the gateway's) add backlog / horizon: load the arrival rate no longer shows.
   With `periodic: auto`, while a learnt period holds (`policies.predictive.periodic`), the
   need is at least what the period brings within the horizon (at the quantile of a 1-minute
   Poisson count), and load bought ahead of its arrival is bought as more of the variants that
   serve. An idle model the period brings load back to is sized as any other
   (within the horizon) or held (within a start-up plus the scale-down delay).
5. **Mix** (`optimize.exact_mix`): exact, over the variants' counts within [min, max], with the
   capacities coupled as a least-loaded router couples them. Variants without a performance
   model (no configured `perfParms`, never busy) keep their count.
6. **Hysteresis** (`policies.predictive.hysteresis`): when the fleet (pending replicas included)
   covers less than the need, it scales up in one step to the cheapest cover; otherwise a
   scale-down takes the cheapest part of the current fleet that still covers the largest need
   of the last `scaleDownDelaySeconds` with a margin, counting on each variant for little more
   than the rate it was seen meeting its targets at, and only once the memory holds that long
   a history (a restarted controller, or the first cycles, never scale down on one sample) and
   not in a cycle whose arrival rate more than doubled (after a lull as long as that delay, the
   return of the load would otherwise trim the fleet as it arrives), nor, while any replica is
   starting (`pending_replicas`), below the replicas that serve (`ready_replicas`); else the
   counts hold.

A model back from a lull (no busy replica, so no token mix in the windows) is sized on the mix
it last showed, kept in its state; the policy asks for the fast path for bursts (`burst`) unless
`fastPath` is off.

Every decision's reason says what it was sized for and what it bought (forecast, backlog, need,
mix and its cost, capacity per replica per variant), and its figures carry the numbers
(`forecast_*`, `need_rate`, `mix_cost`, `mix_capacity`, per variant `capacity_alone`,
`capacity_coupled`, `rate_cap`).

What fails: nothing raises for inputs within the snapshot's declared ranges; `rate_forecast`
raises ValueError for a configuration outside its ranges (the config loaders reject those).
Selected for a model `llmscaler-predictive-config` applies to, ahead of every other policy. Its
own state per model (`policies.predictive.state`) holds the forecast's samples and what each
variant's latencies taught; the tuner records are common memory, shared with the SLO-queueing
policy.

Pure: the caller passes and keeps the samples, what was learnt and the tuner records.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from llmscaler.analyze.learning import kalman, rate_forecast
from llmscaler.analyze.learning.rate_forecast import RateSample
from llmscaler.analyze.learning.recurring import EMPTY, History
from llmscaler.analyze.slo import analyzer, attainment, capacity
from llmscaler.analyze.slo.capacity import VariantLearning
from llmscaler.analyze.slo.workload import Workload, workload
from llmscaler.config.resolved import ModelConfig, PredictiveConfig, QueueingModelConfig
from llmscaler.domain.signals import VariantTarget, held
from llmscaler.domain.snapshot import PoolMetrics, ReplicaMetrics, Variant
from llmscaler.domain.state import KalmanRecord
from llmscaler.optimize import exact_mix
from llmscaler.policies.predictive import hysteresis, inputs, periodic
from llmscaler.policies.predictive.state import PredictiveState
from llmscaler.policies.protocol import Context, Intent, Proposal, Writes
from llmscaler.policies.wva.slo_queueing import queueing_config

ANALYZER: Final = 'predictive'
MAX_SAMPLES: Final = 256
"""Forecast samples kept per model at most."""


@dataclass(frozen=True, slots=True)
class PredictivePath:
    """One model's predictive targets and what the memory keeps of this cycle."""

    targets: tuple[VariantTarget, ...]
    figures: tuple[tuple[str, float], ...]
    kalman_updates: dict[str, KalmanRecord] = field(default_factory=dict)
    samples: tuple[RateSample, ...] = ()
    learning: dict[str, VariantLearning] = field(default_factory=dict)
    """Per variant key: what was learnt of it, as of this cycle."""
    mix: tuple[float, float] | None = None
    """The token mix (input, output tokens per request) the model last showed."""
    recurring: History = EMPTY
    """The arrival-rate history the period is learnt from, with this cycle's rate."""


def horizon(*, config: PredictiveConfig, interval: float) -> float:
    """Seconds from a decision to replicas that serve and a cycle that has seen them."""
    return config.startup_seconds + 2 * interval


def _scaled(config: PredictiveConfig) -> QueueingModelConfig:
    slo = config.slo
    margin = config.latency_margin
    return dataclasses.replace(
        slo,
        target_ttft=slo.target_ttft * margin if slo.target_ttft is not None else None,
        target_itl=slo.target_itl * margin if slo.target_itl is not None else None,
        slo_multiplier=slo.slo_multiplier * margin,
    )


def predict(
    *,
    variants: Sequence[Variant],
    replicas: Sequence[ReplicaMetrics],
    pool: PoolMetrics | None,
    config: PredictiveConfig,
    records: Mapping[str, KalmanRecord],
    samples: Sequence[RateSample],
    learning: Mapping[str, VariantLearning],
    interval: float,
    desired: Mapping[str, int],
    now: float,
    token_mix: tuple[float, float] | None = None,
    history: History = EMPTY,
) -> PredictivePath:
    """The targets of one model (see the module docstring); `token_mix` is the token mix the model
    last showed, sized on while no busy replica shows one; `history` the arrival rates the
    period is learnt from."""
    analysis = analyzer.analyze(
        variants=variants,
        replicas=replicas,
        pool=pool,
        config=_scaled(config),
        records=records,
        now=now,
        interval=interval,
        mix=token_mix,
    )
    kept = tuple(s for s in samples if s.at > now - config.history_seconds and s.at <= now)
    unreported = inputs.unreported(replicas)
    idle = not unreported and inputs.idle(replicas=replicas, pool=pool)
    ahead = horizon(config=config, interval=interval)
    outlook = periodic.look(
        config=config,
        history=history,
        now=now,
        rate=0.0 if idle else dict(analysis.figures).get('arrival_rate'),
        ahead=ahead,
    )
    sizable = analysis.result is not None and analysis.targets is not None
    if idle and not (sizable and outlook.rate > periodic.DUE_RATE):
        # An idle model the period brings no load back to within the horizon.
        quiet = (*kept, RateSample(at=now, rate=0.0, need=0.0))[-MAX_SAMPLES:]
        within = config.startup_seconds + config.scale_down_delay
        coming = periodic.due(outlook=outlook, now=now, within=within)
        quiet_targets = inputs.idle_targets(
            variants=variants,
            samples=quiet,
            desired=desired,
            scale_down_delay=config.scale_down_delay,
            now=now,
        )
        if coming is not None:
            until, returning = coming
            quiet_targets = held(
                variants=variants,
                desired=desired,
                why=periodic.silence_reason(
                    outlook=outlook, until=until, rate=returning, within=within
                ),
            )
        return PredictivePath(
            targets=quiet_targets,
            figures=(*analysis.figures, *_periodic_figures(outlook)),
            kalman_updates=analysis.kalman_updates,
            samples=quiet,
            mix=token_mix,
            recurring=outlook.history,
        )
    if analysis.result is None or analysis.targets is None or unreported:
        return PredictivePath(
            targets=held(
                variants=variants,
                desired=desired,
                why=unreported or analysis.missing or 'no SLO analysis',
            ),
            figures=analysis.figures,
            kalman_updates=analysis.kalman_updates,
            samples=kept,
            mix=token_mix,
            recurring=outlook.history,
        )
    model_figures = dict(analysis.figures)
    rate = model_figures.get('arrival_rate', 0.0)
    backlog = model_figures.get('backlog_requests', 0.0)
    predicted = rate_forecast.forecast(
        samples=(*kept, RateSample(at=now, rate=rate)),
        now=now,
        horizon=ahead,
        quantile=config.quantile,
    )
    sized_for = periodic.sized(outlook=outlook, forecast=predicted, quantile=config.quantile)
    need = max(0.0, sized_for) + backlog / ahead

    # The histograms count the last minute's requests: a backlog drained within it made some late.
    draining = capacity.draining(replicas=replicas, pool=pool)
    backlogged = draining or any(s.draining for s in kept if s.at > now - attainment.BACKLOG_MEMORY)
    by_variant: dict[str, list[ReplicaMetrics]] = {}
    for replica in replicas:
        by_variant.setdefault(replica.variant, []).append(replica)
    mix_load = workload(replicas)
    shown = _shown_mix(mix_load)
    in_tokens, out_tokens = shown or token_mix or (0.0, 1.0)
    out_tokens = max(1.0, out_tokens)
    capacities = {c.variant: c for c in analysis.result.variants}
    learnt: dict[str, VariantLearning] = {}
    modelled_at: dict[str, float] = {}
    stretch_from: dict[str, float] = {}
    trusted: dict[str, float] = {}
    options: list[exact_mix.MixOption] = []
    for variant in variants:
        sized = capacities.get(variant.name)
        guarded = sized.per_replica_capacity if sized is not None else 0.0
        modelled = dict(analysis.variant_figures.get(variant.name, ())).get(
            'model_rate_per_replica', guarded
        )
        mine = by_variant.get(variant.name, ())
        record = analysis.kalman_updates.get(variant.key)
        load = workload(mine)
        reading = not capacity.draining(replicas=mine, pool=pool)
        # The rate its busy replicas serve within both targets now (0: none, or missed).
        met_at = (
            capacity.demonstrated(
                previous=0.0, load=load, ttft=analysis.targets.ttft, itl=analysis.targets.itl
            )
            if reading
            else 0.0
        )
        if record is not None and modelled > 0:
            # The queue model knows nothing of prefill sharing the engine with decode steps.
            modelled = capacity.interference_rate(
                params=kalman.params_of(record),
                in_tokens=in_tokens,
                out_tokens=out_tokens,
                itl=analysis.targets.itl,
                ceiling=modelled,
                met_at=met_at,
            )
        modelled_at[variant.name] = modelled
        stretch_from[variant.name] = met_at
        before = learning.get(variant.key, VariantLearning())
        scale, demonstrated = before.scale, before.demonstrated
        missed = None
        if reading and not backlogged:
            missed = capacity.missed_targets(
                previous=before,
                seen=attainment.attainment(
                    replicas=mine,
                    ttft=analysis.targets.ttft / 1000 / config.latency_margin,
                    itl=analysis.targets.itl / 1000 / config.latency_margin,
                ),
                load=load,
                modelled=modelled,
                budget=1.0 - config.attainment,
            )
        if missed is not None:
            # Requests missed their targets: no reading of the means may raise what it is worth.
            scale, demonstrated = missed.scale, missed.demonstrated
        elif reading:
            demonstrated = capacity.demonstrated(
                previous=demonstrated,
                load=load,
                ttft=analysis.targets.ttft,
                itl=analysis.targets.itl,
            )
        if record is not None and modelled > 0 and reading and missed is None:
            scale = capacity.learnt_scale(
                previous=scale,
                load=load,
                params=kalman.params_of(record),
                batch=analyzer.max_batch(
                    variant=variant,
                    replicas=mine,
                    tokens_per_request=in_tokens + out_tokens / 2,
                ),
                modelled=modelled,
                ttft_target=analysis.targets.ttft,
                itl_target=analysis.targets.itl,
                met_at=met_at,
            )
        learnt[variant.key] = VariantLearning(scale=scale, demonstrated=demonstrated)
        alone = modelled * scale
        trusted[variant.name] = hysteresis.trusted_rate(alone=alone, demonstrated=demonstrated)
        if record is None or alone <= 0:
            # No performance model for it: it keeps its count, outside the mix.
            options.append(
                exact_mix.MixOption(
                    variant=variant.name,
                    rate=0.0,
                    cost=variant.cost,
                    low=variant.current_replicas,
                    high=variant.current_replicas,
                )
            )
            continue
        alpha, beta, gamma, delta = kalman.params_of(record).as_tuple()
        options.append(
            exact_mix.MixOption(
                variant=variant.name,
                rate=alone,
                cost=variant.cost,
                low=min(variant.min_replicas, variant.max_replicas),
                high=variant.max_replicas,
                t0=gamma + out_tokens * alpha,
                t1=delta * in_tokens + out_tokens * beta,
            )
        )
    current = {v.name: v.current_replicas for v in variants}
    have = exact_mix.capacity(options=options, counts=current)
    if periodic.leads(outlook=outlook, forecast=predicted, quantile=config.quantile):
        options = periodic.serving_only(options=options, current=current)
    recent_need = max(
        [need, *(s.need for s in kept if s.at > now - config.scale_down_delay)], default=need
    )
    # Scale-down needs the whole window behind it: no history is no evidence of a lull.
    settled = any(s.at <= now - config.scale_down_delay for s in kept)
    chosen = hysteresis.choose(
        options=options,
        trusted=[
            dataclasses.replace(o, rate=trusted.get(o.variant, 0.0)) if o.rate > 0 else o
            for o in options
        ],
        current=current,
        need=need,
        recent_need=recent_need if settled else math.inf,
        have=have,
        arriving=bool(kept) and hysteresis.rate_rises(previous=kept[-1].rate, rate=rate),
        serving=(
            {v.name: min(v.current_replicas, v.ready_replicas) for v in variants}
            if any(v.pending_replicas > 0 for v in variants)
            else None
        ),
    )
    targets, action, mix = chosen.targets, chosen.action, chosen.mix
    coupled = exact_mix.coupled_rates([o for o in options if targets.get(o.variant, 0) > 0])
    mix_text = ', '.join(f'{name}={count}' for name, count in mix.counts)
    reason = (
        f'forecast {predicted.upper:.3g} req/s over {ahead:.0f} s (now '
        f'{predicted.newest:.3g}, trend {60 * predicted.trend:+.3g}/min, σ {predicted.sigma:.2g})'
        f' + backlog {backlog:.0f} → need {need:.3g} req/s; mix {mix_text} costs '
        f'{mix.cost:.4g} for {mix.capacity:.3g} req/s; {action}{_periodic_text(outlook, ahead)}'
    )
    out = []
    by_option = {o.variant: o for o in options}
    for variant in variants:
        option = by_option[variant.name]
        known = learnt[variant.key]
        out.append(
            VariantTarget(
                variant=variant.name,
                target=targets[variant.name],
                reason=reason,
                figures=(
                    *analysis.variant_figures.get(variant.name, ()),
                    ('capacity_modelled', modelled_at.get(variant.name, 0.0)),
                    ('stretch_from_rate', stretch_from.get(variant.name, 0.0)),
                    ('capacity_alone', option.rate),
                    ('capacity_coupled', coupled.get(variant.name, 0.0)),
                    ('capacity_scale', known.scale),
                    ('demonstrated_rate', known.demonstrated),
                ),
            )
        )
    figures = (
        *analysis.figures,
        ('forecast_rate', predicted.upper),
        ('forecast_level', predicted.level),
        ('forecast_trend', predicted.trend),
        ('forecast_sigma', predicted.sigma),
        ('forecast_horizon_s', ahead),
        ('need_rate', need),
        ('fleet_capacity', have),
        ('mix_cost', mix.cost),
        ('mix_capacity', mix.capacity),
        *_periodic_figures(outlook),
    )
    new_samples = (*kept, RateSample(at=now, rate=rate, need=need, draining=draining))[
        -MAX_SAMPLES:
    ]
    return PredictivePath(
        targets=tuple(out),
        figures=figures,
        kalman_updates=analysis.kalman_updates,
        samples=new_samples,
        learning=learnt,
        mix=shown or token_mix,
        recurring=outlook.history,
    )


def _periodic_text(outlook: periodic.Outlook, ahead: float) -> str:
    if outlook.pattern is None:
        return f'; {outlook.why}' if outlook.history.buckets else ''
    return (
        f'; recurring load: {outlook.why} brings up to {outlook.rate:.3g} req/s within '
        f'{ahead:.0f} s (sized for)'
    )


def _periodic_figures(outlook: periodic.Outlook) -> tuple[tuple[str, float], ...]:
    if outlook.pattern is None:
        return ()
    return (('periodic_rate', outlook.rate), ('period_s', outlook.pattern.period))


def _shown_mix(load: Workload) -> tuple[float, float] | None:
    if load.avg_input_tokens is None or load.avg_output_tokens is None:
        return None
    return (load.avg_input_tokens, load.avg_output_tokens)


class Predictive:
    """The policy object the registry lists (see the module docstring)."""

    name: Final = ANALYZER
    state_type: Final = PredictiveState

    def selects(self, config: ModelConfig) -> bool:
        return config.predictive is not None

    def fast_path(self, config: ModelConfig) -> bool:
        return config.predictive is not None and config.predictive.fast_path

    def configure(self, *, intent: Intent) -> ModelConfig:
        """`llmscaler-predictive-config`: the stated SLO and performance model as its `slo`
        keys (as `wva-queueing-model-config` would hold them), the start-up time as
        `startupSeconds`."""
        settings = PredictiveConfig(slo=queueing_config(intent=intent))
        if intent.startup_seconds is not None:
            settings = dataclasses.replace(settings, startup_seconds=intent.startup_seconds)
        return ModelConfig(predictive=settings)

    def decide(
        self, *, context: Context, state: PredictiveState | None
    ) -> tuple[Proposal, PredictiveState | None]:
        config = context.model_config.predictive
        assert config is not None, 'selected for a model without llmscaler-predictive-config'
        keys = {v.key for v in context.variants}
        known = {key: v for key, v in state.learning if key in keys} if state else {}
        ahead = predict(
            variants=context.variants,
            replicas=context.observed.fresh,
            pool=context.observed.pool,
            config=config,
            records=context.memory.kalman,
            samples=state.samples if state else (),
            learning=known,
            interval=context.settings.interval,
            desired=context.desired,
            now=context.now,
            token_mix=state.mix if state else None,
            history=state.recurring if state else EMPTY,
        )
        proposal = Proposal(
            targets=ahead.targets,
            figures=ahead.figures,
            analyzer=ANALYZER,
            unsized=inputs.unreported_problems(context.observed.fresh),
            writes=Writes(kalman=dict(ahead.kalman_updates)),
        )
        learnt = {**known, **ahead.learning}
        if not ahead.samples and not learnt and ahead.mix is None and not ahead.recurring.buckets:
            return proposal, None
        kept = PredictiveState(
            samples=ahead.samples,
            learning=tuple(sorted(learnt.items(), key=lambda i: i[0])),
            mix=ahead.mix,
            recurring=ahead.recurring,
        )
        return proposal, kept


POLICY: Final = Predictive()
