"""`decide()`: one pure, deterministic decision cycle for every model in a snapshot.

Why: the controller and the simulator must run the very same decision code. This module runs
the stages of a cycle per model (variants grouped by modelID + namespace):

1. validity and freshness (`analyze.observation`): every replica's and pool's figures are checked
   against the ranges the model declares (`analyze.validity`), and every replica's metrics are
   classified fresh / stale / unavailable against `now`; only fresh, valid metrics are analysed;
2. the model's policy (`policies.registry.select`, by its configuration: predictive for
   `llmscaler-predictive-config`, WVA's SLO-queueing — model-only or hybrid — for
   `wva-queueing-model-config`, else WVA's percentage-based saturation analyzer, the default,
   or its token-based one) proposes targets from the context (`policies.protocol.Context`: the
   variants, the fresh replicas, the pool, the common memory, the last targets) and the
   model's own state under that policy; its writes to the common memory and its new state are
   kept only once the whole model succeeded;
3. enforcement: scale-to-zero / minimum one replica, then the model's capacity floors
   (`enforce.capacity_floors`: scheduled floors bought in the cheapest variant mix, adding
   replicas only; none by default), then the safety rules, then [min, max];
4. the GPU limiter (`optimize.limiter`), once over all models: with `enableLimiter`, their
   scale-ups are fair-shared greedy-by-score within the snapshot's per-accelerator GPU budgets
   (`Snapshot.gpu_limits`), and a limited decision says by how much; without it, nothing
   changes.

Safety rules, applied whatever the policy proposed:

- a model whose ready replicas lack fresh metrics (stale, unavailable or missing series) never
  scales down and never goes to zero: every target is at least the current replica count, and the
  decisions say `MetricsAvailable=False` with the reason (`MetricsStale` / `MetricsMissing`);
- the same holds when any replica of the model is *not reporting*: a required figure (KV usage,
  queue length; for the token analyzer also the KV-cache size or a stored capacity) is missing,
  or any figure, or its `observed_at`, is non-finite or out of range, or a pool figure is. A
  missing or broken figure is never read as 0: the reason is `MetricsMissing` or
  `MetricsInvalid` and the message names the pods and metrics (at most
  `validity.MAX_NAMED_PROBLEMS`);
- pending replicas count as anticipated supply (inside the analyzers);
- targets never leave [minReplicas, maxReplicas];
- when the ballot cannot name an analyzer to trust, the model holds at
  max(current, last desired): a hold never lowers a target;
- never to zero while requests are queued at the gateway or waiting or running on a replica
  (`enforce.scale_to_zero`, with the requests in flight counted by `analyze.observation` from the
  pool and the reporting replicas), nor while the request count over the retention period is
  unknown or above 0.

Only a ready pod's reading is a replica's report: the adapters (`collect.attribution`, the
simulator) leave out pods that are not ready, so the count of fresh, usable replicas of a variant
is compared with its `ready_replicas` and a ready pod without a reading cannot be covered by a
starting or stopping one.

One model cannot take down the others: an ArithmeticError or ValueError raised while analysing,
optimizing or enforcing one model (no input within the declared ranges should cause one; this
is the last line of defence) makes that model hold — every target at its current count, within
bounds, reason `hold: analysis failed (<error>)`, the `MetricsAvailable` judgement of its metrics
unchanged, nothing written to the memory for it — and every other model is decided as usual.

What fails: `decide()` raises ValueError for a `now` that is not a finite number (a caller's
error: adapters validate their clock first); nothing raises for odd metrics; a variant whose
config cannot be honoured holds. The result depends only on the arguments: no clock, no I/O,
iteration in sorted order.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from llmscaler.analyze.learning import capacity_knowledge
from llmscaler.analyze.observation import Observation, observe
from llmscaler.analyze.saturation import k2_history
from llmscaler.analyze.validity import MetricsStatus
from llmscaler.config.resolved import Config, CoreSettings, ModelConfig
from llmscaler.domain.snapshot import Decision, ReplicaMetrics, Snapshot, Variant, action_for
from llmscaler.domain.state import CapacityRecord, K2Sample, KalmanRecord, State, sorted_items
from llmscaler.enforce import bounds, capacity_floors, scale_to_zero
from llmscaler.optimize import limiter
from llmscaler.policies import registry
from llmscaler.policies.protocol import Context, Memory, Policy, Proposal, Writes

HOLD_REASON = 'metrics unavailable: holding (never down on missing, invalid or stale metrics)'

ANALYSIS_FAILED = 'hold: analysis failed'
"""The start of the reason of every decision of a model whose analysis raised (see above)."""
_MAX_ERROR_CHARS = 200


@dataclass(frozen=True, slots=True)
class Outcome:
    """The decisions of one cycle (sorted by namespace/name) and the memory for the next."""

    decisions: tuple[Decision, ...]
    state: State


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
    # By (namespace, variant): a tuple is cheaper to build than the key string, per replica.
    replicas_by_variant: dict[tuple[str, str], list[ReplicaMetrics]] = {}
    for replica in snapshot.replicas:
        replicas_by_variant.setdefault((replica.namespace, replica.variant), []).append(replica)
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
        kalman=state.kalman_map(),
        policies={name: dict(groups) for name, groups in state.policies},
    )
    decisions: list[Decision] = []
    for group in sorted(by_group):
        variants = sorted(by_group[group], key=lambda v: v.name)
        model_config = config.model(model_id=variants[0].model_id, namespace=variants[0].namespace)
        observed = observe(
            variants=variants,
            replicas_by_variant=replicas_by_variant,
            pool=pools.get(group),
            settings=settings,
            now=now,
        )
        policy = registry.select(model_config)
        try:
            decided, proposal, own = _decide_model(
                policy=policy,
                variants=variants,
                observed=observed,
                model_config=model_config,
                settings=settings,
                memory=memory,
                now=now,
            )
        except (ArithmeticError, ValueError) as error:
            decisions.extend(
                _analysis_failed(
                    variants=variants,
                    observed=observed,
                    analyzer=model_config.saturation.analyzer_path,
                    error=error,
                )
            )
            continue
        memory.apply(model_id=variants[0].model_id, writes=proposal.writes)
        states = memory.policies.setdefault(policy.name, {})
        if own is None:
            states.pop(group, None)
        else:
            states[group] = own
        decisions.extend(decided)
    # --- GPU limiter (`optimize.limiter`): with `enableLimiter`, the models' scale-ups are
    # fair-shared within the snapshot's GPU budgets (greedy-by-score); others pass unchanged.
    decisions = limiter.limit(decisions=decisions, snapshot=snapshot, config=config)
    # --- end GPU limiter
    keys = [v.key for v in snapshot.variants]
    new_state = State(
        k2_history=sorted_items(memory.history),
        capacity=sorted_items(
            {key: rec for records in memory.knowledge.values() for key, rec in records.items()}
        ),
        last_desired=sorted_items({d.key: d.target for d in decisions}),
        last_informative=sorted_items(memory.last_informative),
        # Tuner records of variants gone from the snapshot are dropped (as last_desired).
        kalman=sorted_items(_of_variants(memory.kalman, keys)),
        # A policy's state of a model gone from the snapshot is dropped.
        policies=tuple(
            (name, kept)
            for name, states in sorted(memory.policies.items())
            if (kept := sorted_items({g: states[g] for g in sorted(by_group) if g in states}))
        ),
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
    kalman: dict[str, KalmanRecord]
    policies: dict[str, dict[str, object]]
    """Each policy's own state by group."""

    def view(self, *, model_id: str) -> Memory:
        return Memory(
            history=self.history,
            knowledge=self.knowledge.get(model_id, {}),
            last_informative=self.last_informative,
            kalman=self.kalman,
        )

    def apply(self, *, model_id: str, writes: Writes) -> None:
        self.history.update(writes.history)
        self.kalman.update(writes.kalman)
        if writes.knowledge:
            self.knowledge.setdefault(model_id, {}).update(writes.knowledge)
        self.last_informative.update(writes.last_informative)


_R = TypeVar('_R')


def _of_variants(records: Mapping[str, _R], keys: Sequence[str]) -> dict[str, _R]:
    """The records of the snapshot's variants (by key): those of variants gone are dropped."""
    return {key: records[key] for key in keys if key in records}


def _seeded_desired(variant: Variant) -> int | None:
    """The published desired count (VA status) as memory after a restart, unless it is below
    the current count.

    A process that died between its `/scale` write and its status write left a status that lags
    the scale target (1 published, 2 written): read as the target of a scale in flight, it would
    take the new pods away again. A desired count this process decided itself is trusted as it
    is (behind an HPA, `current` follows it only later).
    """
    wanted = variant.desired_replicas
    if wanted is None or wanted < variant.current_replicas:
        return None
    return wanted


def _by_model(knowledge: Mapping[str, CapacityRecord]) -> dict[str, dict[str, CapacityRecord]]:
    index: dict[str, dict[str, CapacityRecord]] = {}
    for key, record in knowledge.items():
        index.setdefault(record.model_id, {})[key] = record
    return index


def _decide_model(
    *,
    policy: Policy[Any],
    variants: Sequence[Variant],
    observed: Observation,
    model_config: ModelConfig,
    settings: CoreSettings,
    memory: _Memory,
    now: float,
) -> tuple[list[Decision], Proposal, object | None]:
    desired = {
        v.name: d
        for v in variants
        if (d := memory.last_desired.get(v.key, _seeded_desired(v))) is not None
    }
    group = variants[0].group
    proposal, own = policy.decide(
        context=Context(
            variants=variants,
            observed=observed,
            model_config=model_config,
            settings=settings,
            memory=memory.view(model_id=variants[0].model_id),
            desired=desired,
            now=now,
        ),
        state=memory.policies.get(policy.name, {}).get(group),
    )
    targets, model_figures = proposal.targets, proposal.figures
    analyzer, unsized = proposal.analyzer, proposal.unsized

    status = {v.name: observed.status(v, unsized.get(v.name, ())) for v in variants}
    complete = all(s.available for s in status.values())
    proposed = {t.variant: t for t in targets}
    enforcement = scale_to_zero.enforce(
        variants=variants,
        targets={name: t.target for name, t in sorted(proposed.items())},
        config=model_config,
        settings=settings,
        request_count=observed.pool.request_count if observed.pool is not None else None,
        in_flight=observed.in_flight,
        metrics_complete=complete,
    )
    enforced = dict(enforcement.targets)
    # ---- capacity floors (enforce.capacity_floors): the model's scheduled capacity floors,
    # bought in the cheapest variant mix; they only add replicas, before the safety rules and
    # the bounds. A model without floors is untouched. ------------------------------------------
    floored = None
    if model_config.capacity_floors:
        floored = capacity_floors.apply(
            variants=variants,
            targets=enforced,
            floors=model_config.capacity_floors,
            replicas=observed.fresh,
            now=now,
        )
        enforced = floored.targets
    # --------------------------------------------------------------------------------------------
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
        target = proposed.get(variant.name)
        reason = target.reason if target is not None else 'hold'
        if variant.name in enforcement.modified:
            reason = enforcement.reason
        if floored is not None and variant.name in floored.raised:
            reason = floored.reason
        if not complete and enforced.get(variant.name, 0) < variant.current_replicas:
            reason = HOLD_REASON
        figures = (target.figures if target is not None else ()) + model_figures
        decisions.append(
            _decision(
                variant=variant,
                target=bounded[variant.name],
                reason=reason,
                analyzer=analyzer,
                figures=tuple(sorted(figures)),
                metrics=status[variant.name],
            )
        )
    return decisions, proposal, own


def _decision(
    *,
    variant: Variant,
    target: int,
    reason: str,
    analyzer: str,
    figures: tuple[tuple[str, float], ...],
    metrics: MetricsStatus,
) -> Decision:
    return Decision(
        variant=variant.name,
        namespace=variant.namespace,
        model_id=variant.model_id,
        accelerator=variant.accelerator,
        current=variant.current_replicas,
        target=target,
        action=action_for(current=variant.current_replicas, target=target),
        reason=reason,
        analyzer=analyzer,
        figures=figures,
        metrics_available=metrics.available,
        metrics_reason=metrics.reason,
        message=metrics.message,
    )


def _analysis_failed(
    *, variants: Sequence[Variant], observed: Observation, analyzer: str, error: Exception
) -> list[Decision]:
    """Every variant of a model whose analysis raised holds at its current count (bounded)."""
    text = ' '.join(str(error).split())[:_MAX_ERROR_CHARS]
    reason = f'{ANALYSIS_FAILED} ({type(error).__name__}: {text}); targets kept'
    held = dict(
        bounds.clamp_all(variants=variants, targets={v.name: v.current_replicas for v in variants})
    )
    return [
        _decision(
            variant=variant,
            target=held[variant.name],
            reason=reason,
            analyzer=analyzer,
            figures=(),
            metrics=observed.status(variant),
        )
        for variant in variants
    ]


def _safe_target(*, target: int, current: int, complete: bool) -> int:
    """Missing, invalid or stale metrics never lower a target (docs/decision-core.md, "Safety
    rules")."""
    return target if complete else max(target, current)
