"""The VA statuses and Warning events of one cycle: what each VariantAutoscaling shows after it.

Why: the status is what an operator reads of the controller's work (`kubectl get va`), so every
VA of the cycle gets one: a resolved VA its decision (desired replicas, whether it was applied,
the three conditions) and what was read of its scale target (current and ready replicas,
accelerator); a VA whose target is not resolved `TargetResolved=False` and a `TargetNotFound`
event; an invalid VA `OptimizationReady=False` (InvalidConfiguration) and an `InvalidSpec` event.
While InferencePools exist, a VA shows its pool (`PoolResolved=True`), or, held for want of a
usable one (`VariantEntry.pool_problem`), `PoolResolved=False` and a `NoInferencePool` event.
`kube.status.StatusWriter` writes a status only when it changed (see `kube.nextstatus`).

The GPU limiter's part: a decision the limiter ran on gets `ResourcesAvailable`; one it did not
run on (the limiter turned off) loses a `ResourcesAvailable` left from before, which would
otherwise go on saying the budget holds the variant back. A variant the budget held back gets a
`ResourceConstrained` event and counts in `wva_decisions_limited_total`.

`applied`: with actuation `metrics`, whether current equals desired (an HPA does the rest);
otherwise whether the `/scale` write succeeded or nothing had to change.

What fails: nothing raises for API failures: a status not written (conflict, error) is logged
and counted (`wva_errors_total{component="status"}`); the next cycle writes it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from typing import Final

from llmscaler.collect.readings import SourceError
from llmscaler.controller.cluster.world import VariantEntry, World
from llmscaler.controller.publish import ControllerMetrics
from llmscaler.controller.va import conditions
from llmscaler.domain.snapshot import Decision
from llmscaler.kube.client import ObjectRef
from llmscaler.kube.events import EventRecorder
from llmscaler.kube.nextstatus import ConditionUpdate
from llmscaler.kube.scale import ScaleOutcome, ScaleResult
from llmscaler.kube.status import StatusOutcome, StatusWriter

log = logging.getLogger('llmscaler.controller.va.cycle')

APPLIED: Final = frozenset({ScaleOutcome.APPLIED, ScaleOutcome.UNCHANGED})
"""Outcomes of a `/scale` write after which the decision is in force."""


class VaStatuses:
    """Writes the statuses of one cycle (see the module docstring); `gate` bounds the writes in
    flight (shared with the cycle's `/scale` writes)."""

    def __init__(
        self,
        *,
        status: StatusWriter,
        events: EventRecorder,
        metrics: ControllerMetrics,
        gate: asyncio.Semaphore,
        source_name: str,
        metrics_only: bool,
    ) -> None:
        self._status = status
        self._events = events
        self._metrics = metrics
        self._gate = gate
        self._source_name = source_name
        self._metrics_only = metrics_only

    async def write(
        self,
        *,
        world: World,
        decisions: Mapping[str, Decision],
        results: Mapping[str, ScaleResult],
        errors: Sequence[SourceError],
    ) -> int:
        """Every VA's status; returns how many were written."""
        jobs = []
        for entry in world.entries:
            decision = decisions.get(entry.key)
            jobs.append(self._entry_status(entry, decision, results.get(entry.key), errors))
        for obj, invalid in world.invalid:
            jobs.append(self._invalid_status(obj, invalid.message))
        written = await asyncio.gather(*jobs)
        refs = (
            ObjectRef.of(obj)
            for obj in (*(e.obj for e in world.entries), *(o for o, _ in world.invalid))
        )
        self._status.forget_except(keys={(ref.namespace, ref.name) for ref in refs})
        return sum(written)

    async def _entry_status(
        self,
        entry: VariantEntry,
        decision: Decision | None,
        result: ScaleResult | None,
        errors: Sequence[SourceError],
    ) -> bool:
        ref = ObjectRef.of(entry.obj)
        kind = entry.va.spec.scale_target_ref.kind
        name = entry.va.spec.scale_target_ref.name
        updates: tuple[ConditionUpdate, ...]
        if entry.target is None:
            updates = (
                conditions.target_resolved(kind=kind, name=name, problem=entry.target_problem),
                conditions.skipped(why=f'scale target not resolved: {entry.target_problem}'),
            )
            return await self._held(
                ref, entry, updates, reason='TargetNotFound', note=entry.target_problem
            )
        if entry.pool_problem:
            # Held for want of a usable InferencePool: no decision, the pool condition says why.
            updates = (
                conditions.target_resolved(kind=kind, name=name, problem=''),
                conditions.pool_resolved(pool='', problem=entry.pool_problem),
                conditions.skipped(why=f'held: {entry.pool_problem}'),
            )
            return await self._held(
                ref, entry, updates, reason='NoInferencePool', note=entry.pool_problem
            )
        updates = conditions.for_decision(
            kind=kind, name=name, decision=decision, source_errors=errors, source=self._source_name
        )
        if entry.pool:
            updates = (*updates, conditions.pool_resolved(pool=entry.pool, problem=''))
        desired = decision.target if decision is not None else None
        target = entry.target
        applied: bool | None = None
        remove: tuple[str, ...] = ()
        if decision is not None:
            if self._metrics_only:
                applied = decision.current == decision.target
            elif result is None:
                applied = True
            else:
                applied = result.outcome in APPLIED
            limits = conditions.resources_available(decision=decision)
            if limits is not None:
                updates = (*updates, limits)
            else:
                remove = (conditions.CONDITION_RESOURCES_AVAILABLE,)
            if decision.limited > 0:
                self._metrics.limited(variant=ref.name, namespace=ref.namespace)
                # WVA's ResourceConstrained: the GPU budget held replicas back this cycle.
                await self._events.record(
                    regarding=ref,
                    type='Warning',
                    reason='ResourceConstrained',
                    action='Limit',
                    note=(
                        f'{decision.limited} replica(s) held back by the GPU budget: target '
                        f'{decision.target}; {decision.limiter}'
                    ),
                )
        return await self._update(
            ref,
            entry.obj,
            desired,
            applied,
            updates,
            ran=True,
            observed=(target.replicas, target.ready, target.accelerator or None),
            remove=remove,
        )

    async def _invalid_status(self, obj: Mapping[str, object], message: str) -> bool:
        ref = ObjectRef.of(obj)
        await self._events.record(
            regarding=ref, type='Warning', reason='InvalidSpec', action='Validate', note=message
        )
        update = (conditions.invalid_spec(message=message),)
        return await self._update(ref, obj, None, None, update, ran=False)

    async def _held(
        self,
        ref: ObjectRef,
        entry: VariantEntry,
        updates: Sequence[ConditionUpdate],
        *,
        reason: str,
        note: str,
    ) -> bool:
        """A variant that could not take part: the Warning event that says why, and its status
        without a decision."""
        await self._events.record(
            regarding=ref, type='Warning', reason=reason, action='Resolve', note=note
        )
        return await self._update(ref, entry.obj, None, None, updates, ran=False)

    async def _update(
        self,
        ref: ObjectRef,
        obj: Mapping[str, object],
        desired: int | None,
        applied: bool | None,
        updates: Sequence[ConditionUpdate],
        *,
        ran: bool,
        observed: tuple[int, int, str | None] | None = None,
        remove: Sequence[str] = (),
    ) -> bool:
        # `ran` stamps lastRunTime: only a VA that took part in the optimization gets it, so the
        # status of a skipped VA is written once per change of its conditions, not every cycle.
        async with self._gate:
            result = await self._status.update(
                namespace=ref.namespace,
                name=ref.name,
                obj=obj,
                desired=desired,
                applied=applied,
                conditions=updates,
                ran=ran,
                current_replicas=observed[0] if observed is not None else None,
                ready_replicas=observed[1] if observed is not None else None,
                accelerator=observed[2] if observed is not None else None,
                remove_conditions=remove,
            )
        if result.outcome in (StatusOutcome.CONFLICT, StatusOutcome.FAILED):
            log.warning('status of %s not written: %s', ref.key, result.message)
            self._metrics.error(component='status', error_type=result.outcome.value)
        return result.outcome is StatusOutcome.WRITTEN
