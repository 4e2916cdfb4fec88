"""`decide()`: one pure, deterministic decision cycle for every model in a snapshot.

Why: the controller and the simulator must run the very same decision code. This module wires the
stages of design.md §2 per model (variants grouped by modelID + namespace):

1. validity and freshness: every replica's and pool's figures are checked against the ranges the
   model declares (`analyze.validity`), and every replica's metrics are classified fresh / stale /
   unavailable against `now`; only fresh, valid metrics are analysed;
2. analysis: `saturation-percentage` (WVA V1, the default) produces targets directly;
   `saturation-token` (WVA V2) produces capacities that go through the threshold post-step, the
   ballot and the cost-aware optimizer;
3. enforcement: scale-to-zero / minimum one replica, then the safety rules, then [min, max].

Safety rules (design.md §5), applied whatever the analyzer said:

- a model whose ready replicas lack fresh metrics (stale, unavailable or missing series) never
  scales down and never goes to zero: every target is at least the current replica count, and the
  decisions say `MetricsAvailable=False` with the reason (`MetricsStale` / `MetricsMissing`);
- the same holds when any replica of the model is *not reporting*: a required figure (KV usage,
  queue length; for the token analyzer also the KV-cache size or a stored capacity) is missing,
  or any figure, or its `observed_at`, is non-finite or out of range, or a pool figure is. A
  missing or broken figure is never read as 0: the reason is `MetricsMissing` or
  `MetricsInvalid` and the message names the pods and metrics (at most `validity.MAX_NAMED_PROBLEMS`);
- pending replicas count as anticipated supply (inside the analyzers);
- targets never leave [minReplicas, maxReplicas];
- when the ballot cannot name an analyzer to trust, the model holds at
  max(current, last desired): a hold never lowers a target.

What fails: `decide()` raises ValueError for a `now` that is not a finite number (a caller's
error: adapters validate their clock first); nothing raises for odd metrics; a variant whose
config cannot be honoured holds. The result depends only on the arguments: no clock, no I/O,
iteration in sorted order.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from llmscaler.analyze import (
    ballot,
    capacity_knowledge,
    k2_history,
    saturation_percentage,
    saturation_tokens,
    thresholds,
    validity,
)
from llmscaler.analyze.types import AnalyzerResult, VariantTarget
from llmscaler.analyze.validity import Problem, metrics_status
from llmscaler.config.types import Config, CoreSettings, ModelConfig
from llmscaler.enforce import bounds, scale_to_zero
from llmscaler.model import (
    CapacityRecord,
    Decision,
    Freshness,
    K2Sample,
    PoolMetrics,
    ReplicaMetrics,
    Snapshot,
    State,
    Variant,
    action_for,
    group_key,
    sorted_items,
)
from llmscaler.optimize import cost_aware

SATURATION_PERCENTAGE = 'saturation-percentage'

HOLD_REASON = 'metrics unavailable: holding (never down on missing, invalid or stale metrics)'


@dataclass(frozen=True, slots=True)
class Outcome:
    """The decisions of one cycle (sorted by namespace/name) and the memory for the next."""

    decisions: tuple[Decision, ...]
    state: State


def freshness(*, observed_at: float, now: float, settings: CoreSettings) -> Freshness | None:
    """Age class of a sample; None when older than the unavailable threshold (dropped), or when
    either time is not a finite number (a NaN age must never read as fresh).

    A sample from the future (clock skew between scraper and caller) counts as fresh.
    """
    try:
        age = now - observed_at
    except OverflowError:  # an integer time too large for a float
        return None
    if not math.isfinite(age):
        return None
    age = max(0.0, age)
    if age < settings.fresh_threshold:
        return Freshness.FRESH
    if age < settings.stale_threshold:
        return Freshness.STALE
    if age < settings.unavailable_threshold:
        return Freshness.UNAVAILABLE
    return None


def decide(*, snapshot: Snapshot, config: Config, state: State, now: float) -> Outcome:
    """Decide the target replicas of every variant in the snapshot.

    Parameters:
        snapshot: variants, per-replica metrics and pool metrics, as the adapters saw them.
        config: the resolved configuration; `config.model()` gives each model's settings.
        state: the memory returned by the previous call (`EMPTY_STATE` at start); its k2 history
            and capacity knowledge older than their TTLs are dropped once, here.
        now: the current time in seconds, on the same clock as the metrics' `observed_at`; a
            value that is not a finite number raises ValueError.
    """
    try:
        finite_now = math.isfinite(now)
    except OverflowError:
        finite_now = False
    if not finite_now:
        raise ValueError(f'now must be a finite number of seconds, got {now!r:.40}')
    settings = config.settings
    by_group: dict[str, list[Variant]] = {}
    for variant in snapshot.variants:
        by_group.setdefault(variant.group, []).append(variant)
    replicas_by_variant: dict[str, list[ReplicaMetrics]] = {}
    for replica in snapshot.replicas:
        replicas_by_variant.setdefault(replica.variant_key, []).append(replica)
    pools = {pool.group: pool for pool in snapshot.pools}

    # Expired once per cycle, not per model: the analyzers read the memory as given.
    memory = _Memory(
        history=k2_history.expire(
            history=state.k2_history_map(), now=now, ttl=settings.k2_history_ttl
        ),
        knowledge=_by_model(
            capacity_knowledge.expire(
                knowledge=state.capacity_map(), now=now, ttl=settings.capacity_ttl
            )
        ),
        last_desired=state.last_desired_map(),
        last_informative=state.last_informative_map(),
    )
    decisions: list[Decision] = []
    for group in sorted(by_group):
        variants = sorted(by_group[group], key=lambda v: v.name)
        decisions.extend(
            _decide_model(
                variants=variants,
                replicas_by_variant=replicas_by_variant,
                pool=pools.get(group),
                model_config=config.model(
                    model_id=variants[0].model_id, namespace=variants[0].namespace
                ),
                settings=settings,
                memory=memory,
                now=now,
            )
        )
    new_state = State(
        k2_history=sorted_items(memory.history),
        capacity=sorted_items(
            {key: rec for records in memory.knowledge.values() for key, rec in records.items()}
        ),
        last_desired=sorted_items({d.key: d.target for d in decisions}),
        last_informative=sorted_items(memory.last_informative),
    )
    decisions.sort(key=lambda d: (d.namespace, d.variant))
    return Outcome(decisions=tuple(decisions), state=new_state)


@dataclass(slots=True)
class _Memory:
    """Mutable working copy of `State` for one `decide()` call; it never escapes the call."""

    history: dict[str, tuple[K2Sample, ...]]
    knowledge: dict[str, dict[str, CapacityRecord]]
    """Capacity records by modelID: an analysis only ever reads records of its own model (its
    variants' and compatible siblings' in other namespaces), so it is handed just that slice."""
    last_desired: dict[str, int]
    last_informative: dict[str, float]


def _by_model(knowledge: Mapping[str, CapacityRecord]) -> dict[str, dict[str, CapacityRecord]]:
    index: dict[str, dict[str, CapacityRecord]] = {}
    for key, record in knowledge.items():
        index.setdefault(record.model_id, {})[key] = record
    return index


def _decide_model(
    *,
    variants: Sequence[Variant],
    replicas_by_variant: Mapping[str, Sequence[ReplicaMetrics]],
    pool: PoolMetrics | None,
    model_config: ModelConfig,
    settings: CoreSettings,
    memory: _Memory,
    now: float,
) -> list[Decision]:
    fresh: list[ReplicaMetrics] = []
    classes: dict[str, list[Freshness | None]] = {}
    problems: dict[str, list[tuple[str, Problem]]] = {}
    pool_issues = (
        [(f'pool {pool.model_id}', p) for p in validity.pool_problems(pool)] if pool else []
    )
    for variant in variants:
        replicas = sorted(replicas_by_variant.get(variant.key, ()), key=lambda r: r.pod)
        classes[variant.name], problems[variant.name] = _classify(
            replicas=replicas, now=now, settings=settings, fresh=fresh
        )
        problems[variant.name].extend(pool_issues)
    desired = {
        v.name: d
        for v in variants
        if (d := memory.last_desired.get(v.key, v.desired_replicas)) is not None
    }

    saturation = model_config.saturation
    model_figures: tuple[tuple[str, float], ...] = ()
    analyzer: str = saturation.analyzer_path
    if analyzer == SATURATION_PERCENTAGE:
        targets = saturation_percentage.decide_percentage(
            variants=variants, replicas=fresh, config=saturation, desired=desired
        )
    else:
        analysis = saturation_tokens.analyze(
            model_id=variants[0].model_id,
            namespace=variants[0].namespace,
            variants=variants,
            replicas=fresh,
            pool=pool,
            config=saturation,
            settings=settings,
            history=memory.history,
            knowledge=memory.knowledge.get(variants[0].model_id, {}),
            now=now,
        )
        memory.history.update(analysis.history_updates)
        memory.knowledge.setdefault(variants[0].model_id, {}).update(analysis.knowledge_updates)
        # An instance the analyzer could not size is left out of supply and demand alike: it
        # is not reporting, as a replica without KV usage is.
        for replica in analysis.unsized:
            problems[replica.variant].append((replica.pod, _UNSIZED))
        targets, model_figures = _token_targets(
            result=analysis.result,
            variants=variants,
            model_config=model_config,
            settings=settings,
            memory=memory,
            desired=desired,
            now=now,
        )

    status = {
        v.name: metrics_status(variant=v, classes=classes[v.name], problems=problems[v.name])
        for v in variants
    }
    complete = all(s.available for s in status.values())
    proposed = {t.variant: t for t in targets}
    enforcement = scale_to_zero.enforce(
        variants=variants,
        targets={name: t.target for name, t in sorted(proposed.items())},
        config=model_config,
        settings=settings,
        request_count=pool.request_count if pool is not None else None,
        metrics_complete=complete,
    )
    enforced = dict(enforcement.targets)
    bounded = dict(
        bounds.clamp_all(
            variants=variants,
            targets={
                v.name: _safe_target(
                    target=enforced.get(v.name, v.current_replicas),
                    current=v.current_replicas,
                    complete=complete,
                )
                for v in variants
            },
        )
    )

    decisions = []
    for variant in variants:
        proposal = proposed.get(variant.name)
        reason = proposal.reason if proposal is not None else 'hold'
        if variant.name in enforcement.modified:
            reason = enforcement.reason
        if not complete and enforced.get(variant.name, 0) < variant.current_replicas:
            reason = HOLD_REASON
        target = bounded[variant.name]
        metrics = status[variant.name]
        figures = (proposal.figures if proposal is not None else ()) + model_figures
        decisions.append(
            Decision(
                variant=variant.name,
                namespace=variant.namespace,
                model_id=variant.model_id,
                accelerator=variant.accelerator,
                current=variant.current_replicas,
                target=target,
                action=action_for(current=variant.current_replicas, target=target),
                reason=reason,
                analyzer=analyzer,
                figures=tuple(sorted(figures)),
                metrics_available=metrics.available,
                metrics_reason=metrics.reason,
                message=metrics.message,
            )
        )
    return decisions


_UNSIZED = Problem(
    metric='num_gpu_blocks',
    what='missing (no cache_config_info and no stored capacity for the variant)',
    missing=True,
)


def _classify(
    *,
    replicas: Sequence[ReplicaMetrics],
    now: float,
    settings: CoreSettings,
    fresh: list[ReplicaMetrics],
) -> tuple[list[Freshness | None], list[tuple[str, Problem]]]:
    """Freshness classes of one variant's usable replicas, and the problems of the others.

    Fresh usable replicas are appended to `fresh`. A replica with a non-finite `observed_at` is
    invalid; one older than the unavailable threshold is dropped whatever its figures; any
    other replica with a missing or broken figure is not reporting and is not analysed.
    """
    found: list[Freshness | None] = []
    problems: list[tuple[str, Problem]] = []
    for replica in replicas:
        wrong = validity.replica_problems(replica)
        age = freshness(observed_at=replica.observed_at, now=now, settings=settings)
        if age is None and not any(p.metric == 'observed_at' for p in wrong):
            found.append(None)
            continue
        if wrong:
            problems.extend((replica.pod, p) for p in wrong)
            continue
        found.append(age)
        if age is Freshness.FRESH:
            fresh.append(replica)
    return found, problems


def _safe_target(*, target: int, current: int, complete: bool) -> int:
    """Missing, invalid or stale metrics never lower a target (design.md §5)."""
    return target if complete else max(target, current)


def _token_targets(
    *,
    result: AnalyzerResult,
    variants: Sequence[Variant],
    model_config: ModelConfig,
    settings: CoreSettings,
    memory: _Memory,
    desired: Mapping[str, int],
    now: float,
) -> tuple[tuple[VariantTarget, ...], tuple[tuple[str, float], ...]]:
    """Threshold post-step, ballot and cost-aware optimizer for a token-based analysis."""
    saturation = model_config.saturation
    result = _with_analyzer_overrides(result=result, model_config=model_config)
    variant = variants[0]
    live_key = (
        f'{group_key(model_id=variant.model_id, namespace=variant.namespace)}|{result.analyzer}'
    )
    if result.informative:
        memory.last_informative[live_key] = now
    live = ballot.is_live(
        last_informative=memory.last_informative.get(live_key),
        now=now,
        interval=settings.interval,
    )
    verdict = ballot.cast(
        model_id=variant.model_id,
        namespace=variant.namespace,
        votes=[ballot.Vote(result=result, voting=_saturation_votes(model_config), live=live)],
        priority=saturation.priority,
    )
    signal = thresholds.signal(result=result, live=live)
    figures = tuple(
        (f'{name}_{s.role}', value)
        for s in signal.roles
        for name, value in (('required', s.required), ('spare', s.spare))
    )
    if isinstance(verdict, ballot.Hold):
        held = tuple(
            VariantTarget(
                variant=v.name,
                target=max(v.current_replicas, desired.get(v.name, 0)),
                reason=f'hold: {verdict.reason}: {verdict.message}',
            )
            for v in variants
        )
        return held, figures
    return cost_aware.optimize(request=verdict), figures


def _saturation_votes(model_config: ModelConfig) -> bool:
    """§5.1: saturation votes when `analyzers:` is empty or lists it without `enabled: false`."""
    specs = model_config.saturation.analyzers
    if not specs:
        return True
    return any(s.name.startswith('saturation') and s.enabled for s in specs)


def _with_analyzer_overrides(
    *, result: AnalyzerResult, model_config: ModelConfig
) -> AnalyzerResult:
    """Apply `analyzers[].scaleUpThreshold/scaleDownBoundary/score` of the saturation entry."""
    for spec in model_config.saturation.analyzers:
        if spec.name.startswith('saturation') and spec.enabled:
            return dataclasses.replace(
                result,
                scale_up_threshold=spec.scale_up_threshold or result.scale_up_threshold,
                scale_down_boundary=spec.scale_down_boundary or result.scale_down_boundary,
                score=spec.score,
            )
    return result
