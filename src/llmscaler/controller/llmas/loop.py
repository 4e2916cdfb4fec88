"""`llmscaler run` serving Kaito's LLMAutoScaler objects beside VariantAutoscalings.

Why: the auto-scaler of Kaito's proposal (kaito-project/kaito,
docs/proposals/20250602-auto-scaler-for-inference-workloads.md) is one controller that, for each
LLMAutoScaler, scrapes the target's pods (realtime scaler) or reads the clock (cron scaler) and
writes the target's `/scale` directly. The decision is the pure
`policies.kaito.autoscaler.decide_llmautoscaler` (the simulator's `kaito-realtime` and `kaito-cron`
run it too); this loop gathers its inputs and acts on it.

One cycle every `interval` seconds (15 s, the proposal's scrape interval, or the main cycle's
interval when that is shorter), for every cached LLMAutoScaler in name order:

1. parse the object (`kube.llmautoscaler`); an invalid one gets `AbleToScale=False InvalidSpec`
   and a Warning event, and nothing else happens for it;
2. read the target's `/scale` (replicas and pod selector) through the project's scale client
   (`kube.scale`, the kinds of `kube.client.SCALE_KINDS`: the workloads VAs scale, and Kaito's
   InferenceSet, which only LLMAutoScalers target); a kind outside them, or a target that
   a VariantAutoscaling or another LLMAutoScaler also scales, is refused (two autoscalers on one
   `/scale` would undo each other);
3. realtime scaler: list the target's pods by that selector and read every metric from every pod
   (`controller.llmas.scrape`, the scrape configuration's TLS and limits), averaged with the
   proposal's missing-pod rule;
4. decide, with the realtime scaler's history kept in this loop's memory (lost on restart: the
   windows fill again) and `status.lastScaleTime` (kept in memory too, so a status write that
   failed does not shorten a cooldown);
5. a changed count is written to `/scale` with the count it was decided from as the expected
   one (someone else's change in between is a conflict: decided again next cycle); a write sets
   `lastScaleTime` and records a `SuccessfulRescale` event, a failed one `FailedRescale`;
6. the status (currentReplicas, desiredReplicas, lastScaleTime, conditions AbleToScale,
   ScalingActive, ScalingLimited) is written with a merge patch on `/status` when it changed.

Safety (missing metrics never cause a scale-down, docs/decision-core.md): a pod that did not report
a metric makes `ScalingActive=False MetricsMissing` and forbids a realtime scale-down
(`decide_llmautoscaler`); a bad object, an unreadable target or a failed write never ends the loop:
each is a condition and an event, and an unexpected error in one object is logged and the others are
still served.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import httpx
from lightkube import AsyncClient

from llmscaler.clock import Clock, parse_rfc3339, rfc3339
from llmscaler.collect import http
from llmscaler.collect.http import ssl_context
from llmscaler.collect.scrape.source import ScrapeConfig
from llmscaler.controller.cluster.pods import as_text
from llmscaler.controller.llmas.scrape import list_target_pods, read_pods
from llmscaler.controller.llmas.status import (
    Conditions,
    conditions_of,
    limited,
    status_of,
    with_condition,
    write_status,
)
from llmscaler.kube import llmautoscaler as llmas
from llmscaler.kube import resource_model
from llmscaler.kube.client import SCALE_KINDS, ObjectRef, describe_error, scale_resource
from llmscaler.kube.events import EventRecorder
from llmscaler.kube.informer import Informer
from llmscaler.kube.scale import ScaleClient, ScaleOutcome
from llmscaler.policies.kaito.autoscaler import AutoscalerDecision, decide_llmautoscaler
from llmscaler.policies.kaito.realtime import History, MetricReading

log = logging.getLogger(__name__)

INTERVAL: Final = 15.0
"""The proposal's scrape interval: how often each LLMAutoScaler is served."""


@dataclass(frozen=True, slots=True)
class Served:
    """What one cycle did for one LLMAutoScaler (for logs and tests)."""

    key: str
    current: int | None
    desired: int | None
    scaled: bool
    reason: str


@dataclass(frozen=True, slots=True)
class _Scale:
    replicas: int
    selector: str


class LlmAutoScalers:
    """The LLMAutoScaler loop of one controller process (see the module docstring)."""

    def __init__(
        self,
        *,
        client: AsyncClient,
        clock: Clock,
        scale: ScaleClient,
        events: EventRecorder,
        scrape: ScrapeConfig,
        namespace: str | None,
        interval: float = INTERVAL,
        claimed: Callable[[], Mapping[tuple[str, str, str], str]] = dict,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        self._client = client
        self._clock = clock
        self._scale = scale
        self._events = events
        self._scrape = scrape
        self._interval = interval
        self._claimed = claimed
        self._http = http.OwnedClient(
            client=http_client, verify=lambda: ssl_context(config=scrape), timeout=scrape.timeout
        )
        self.informer = Informer(
            client=client,
            resource=llmas.LLMAutoScalerResource,
            clock=clock,
            namespace=namespace,
            name=llmas.PLURAL,
        )
        self._history: dict[str, History] = {}
        self._last_scale: dict[str, float] = {}
        self.cycles = 0

    async def aclose(self) -> None:
        await self._http.aclose()

    async def run(self) -> None:
        """Serve every interval once the cache has listed (forever; cancel to stop)."""
        await self.informer.synced.wait()
        while True:
            started = self._clock.monotonic()
            try:
                await self.cycle()
            except Exception:  # the loop must outlive any one cycle's surprise
                log.exception('LLMAutoScaler cycle failed')
            left = self._interval - (self._clock.monotonic() - started)
            await self._clock.sleep(max(0.0, left))

    async def cycle(self) -> list[Served]:
        """Serve every cached LLMAutoScaler once."""
        objects = sorted(self.informer.items(), key=lambda o: ObjectRef.of(o).key)
        parsed = [(obj, llmas.parse_llmautoscaler(obj)) for obj in objects]
        claims = self._target_claims(parsed)
        served = []
        for obj, one in parsed:
            try:
                served.append(await self._serve(obj, one, claims))
            except Exception:  # one object's surprise must not starve the others
                log.exception('LLMAutoScaler %s failed', ObjectRef.of(obj).key)
        self.cycles += 1
        keys = {s.key for s in served}
        for memory in (self._history, self._last_scale):
            for key in [k for k in memory if k not in keys]:
                del memory[key]
        return served

    def _target_claims(
        self,
        parsed: Sequence[
            tuple[Mapping[str, Any], llmas.LLMAutoScaler | resource_model.InvalidObject]
        ],
    ) -> dict[tuple[str, str, str], list[str]]:
        """Who scales each target: the VAs, and the LLMAutoScalers that parse (an invalid
        object scales nothing, so it blocks no other)."""
        claims: dict[tuple[str, str, str], list[str]] = {}
        for where, va in self._claimed().items():
            claims.setdefault(where, []).append(f'VariantAutoscaling {va}')
        for obj, one in parsed:
            if isinstance(one, llmas.LLMAutoScaler):
                ref = ObjectRef.of(obj)
                target = one.spec.scale_target_ref
                where = (target.kind, ref.namespace, target.name)
                claims.setdefault(where, []).append(f'LLMAutoScaler {ref.key}')
        return claims

    async def _serve(
        self,
        obj: Mapping[str, Any],
        parsed: llmas.LLMAutoScaler | resource_model.InvalidObject,
        claims: Mapping[tuple[str, str, str], list[str]],
    ) -> Served:
        ref = ObjectRef.of(obj)
        ref = ObjectRef(llmas.API_VERSION, llmas.KIND, ref.namespace, ref.name, ref.uid)
        old = conditions_of(obj)
        if isinstance(parsed, resource_model.InvalidObject):
            await self._warn(ref, llmas.REASON_INVALID_SPEC, parsed.message)
            verdict = ('False', llmas.REASON_INVALID_SPEC, parsed.message)
            conditions = with_condition(
                old, llmas.CONDITION_ABLE_TO_SCALE, verdict, now=self._now()
            )
            await self._write(obj, ref, {}, conditions)
            return Served(ref.key, None, None, False, parsed.message)
        spec = parsed.spec
        target = spec.scale_target_ref
        where = f'{target.kind} {ref.namespace}/{target.name}'
        others = [
            c
            for c in claims.get((target.kind, ref.namespace, target.name), [])
            if c != f'LLMAutoScaler {ref.key}'
        ]
        problem = ''
        if scale_resource(api_version=target.api_version, kind=target.kind) is None:
            kinds = ', '.join(f'{av} {k}' for av, k in sorted(SCALE_KINDS))
            problem = f'{where}: not a supported scale target (supported: {kinds})'
        elif others:
            problem = (
                f'{where} is also scaled by {", ".join(others)}; this autoscaler does not scale it'
            )
        read = problem or await self._read_scale(target, ref.namespace)
        if isinstance(read, str):
            problem = read
            await self._warn(ref, llmas.REASON_FAILED_GET_SCALE, problem)
            verdict = ('False', llmas.REASON_FAILED_GET_SCALE, problem)
            conditions = with_condition(
                old, llmas.CONDITION_ABLE_TO_SCALE, verdict, now=self._now()
            )
            await self._write(obj, ref, {}, conditions)
            return Served(ref.key, None, None, False, problem)
        readings: list[MetricReading] = []
        complete = True
        active = ('True', llmas.REASON_SCHEDULE_ONLY, 'the cron scaler needs no metrics')
        realtime = spec.scaler.realtime
        if realtime is not None:
            readings, complete, active = await self._readings(
                realtime.metrics, ref.namespace, read.selector, where
            )
        key = ref.key
        stored = parse_rfc3339(as_text(status_of(obj).get('lastScaleTime')))
        remembered = self._last_scale.get(key)
        last = max((t for t in (stored, remembered) if t is not None), default=None)
        now = self._now()
        decision = decide_llmautoscaler(
            spec=llmas.core_spec(spec),
            current_replicas=read.replicas,
            readings=readings,
            history=self._history.get(key, {}),
            last_scale_time=last,
            now=now,
            metrics_complete=complete,
            interval=self._interval,
        )
        self._history[key] = dict(decision.history)
        scaled, able = await self._act(ref, target, read.replicas, decision, where)
        if scaled:
            self._last_scale[key] = now
            last = now
        conditions = with_condition(old, llmas.CONDITION_ABLE_TO_SCALE, able, now=now)
        conditions = with_condition(conditions, llmas.CONDITION_SCALING_ACTIVE, active, now=now)
        conditions = with_condition(
            conditions, llmas.CONDITION_SCALING_LIMITED, limited(spec, decision), now=now
        )
        fields: dict[str, Any] = {
            'currentReplicas': read.replicas,
            'desiredReplicas': decision.desired,
        }
        if last is not None:
            fields['lastScaleTime'] = rfc3339(wall=last)
        await self._write(obj, ref, fields, conditions)
        return Served(key, read.replicas, decision.desired, scaled, decision.reason)

    async def _readings(
        self, metrics: Sequence[llmas.Metric], namespace: str, selector: str, where: str
    ) -> tuple[list[MetricReading], bool, tuple[str, str, str]]:
        pods = await list_target_pods(self._client, namespace, selector)
        if isinstance(pods, str):
            return [], False, ('False', llmas.REASON_METRICS_MISSING, f'{where}: {pods}')
        found = await read_pods(
            client=self._http.client,
            config=self._scrape,
            namespace=namespace,
            pods=pods,
            metrics=metrics,
        )
        readings = []
        missing: list[str] = []
        for metric in metrics:
            values = found.values.get(metric.key, ())
            readings.append(
                MetricReading.of(
                    key=metric.key,
                    high=float(metric.threshold.high),
                    low=float(metric.threshold.low),
                    values=values,
                )
            )
            absent = found.missing(metric.key)
            if absent:
                missing.append(f'{metric.source.name} from {", ".join(absent)}')
        if not pods:
            return readings, False, ('False', llmas.REASON_METRICS_MISSING, f'{where} has no pods')
        if missing:
            message = 'no value of ' + '; '.join(missing)
            if found.problems:
                message += ' (' + '; '.join(found.problems) + ')'
            return readings, False, ('False', llmas.REASON_METRICS_MISSING, message)
        names = ', '.join(sorted({m.source.name for m in metrics}))
        return (
            readings,
            True,
            ('True', llmas.REASON_VALID_METRIC_FOUND, f'every pod reported {names}'),
        )

    async def _read_scale(
        self, target: resource_model.ScaleTargetRef, namespace: str
    ) -> _Scale | str:
        resource = scale_resource(api_version=target.api_version, kind=target.kind)
        assert resource is not None
        try:
            scale = await self._client.get(resource.Scale, target.name, namespace=namespace)
        except Exception as exc:  # every failure is a condition, never a crash
            return f'{target.kind} {namespace}/{target.name}: {describe_error(exc)}'
        spec = getattr(scale, 'spec', None)
        status = getattr(scale, 'status', None)
        replicas = getattr(spec, 'replicas', None) or 0
        if isinstance(replicas, bool) or not isinstance(replicas, int):
            return f'{target.kind} {namespace}/{target.name}: Scale spec.replicas is {replicas!r}'
        selector = getattr(status, 'selector', None)
        return _Scale(replicas=replicas, selector=selector if isinstance(selector, str) else '')

    async def _act(
        self,
        ref: ObjectRef,
        target: resource_model.ScaleTargetRef,
        current: int,
        decision: AutoscalerDecision,
        where: str,
    ) -> tuple[bool, tuple[str, str, str]]:
        ready = ('True', llmas.REASON_READY_FOR_NEW_SCALE, 'the target can be scaled')
        if decision.desired == current:
            return False, ready
        result = await self._scale.scale(
            api_version=target.api_version,
            kind=target.kind,
            namespace=ref.namespace,
            name=target.name,
            replicas=decision.desired,
            expect=current,
        )
        note = f'New size: {decision.desired}; reason: {decision.reason or decision.scaler}'
        if result.outcome is ScaleOutcome.APPLIED:
            log.info(
                'LLMAutoScaler %s: %s %d -> %d (%s)',
                ref.key,
                where,
                current,
                decision.desired,
                decision.reason,
            )
            await self._events.record(
                regarding=ref, type='Normal', reason='SuccessfulRescale', action='Scale', note=note
            )
            return True, (
                'True',
                llmas.REASON_SUCCEEDED_RESCALE,
                f'scaled {where} from {current} to {decision.desired}',
            )
        if result.outcome in (ScaleOutcome.UNCHANGED, ScaleOutcome.CONFLICT):
            # Someone else moved the target (or already set it): decided again next cycle.
            return False, ready
        message = f'{where}: {result.message}'
        await self._warn(ref, 'FailedRescale', message)
        return False, ('False', llmas.REASON_FAILED_UPDATE_SCALE, message)

    async def _warn(self, ref: ObjectRef, reason: str, note: str) -> None:
        await self._events.record(
            regarding=ref, type='Warning', reason=reason, action='Scale', note=note
        )

    async def _write(
        self,
        obj: Mapping[str, Any],
        ref: ObjectRef,
        fields: Mapping[str, Any],
        conditions: Conditions,
    ) -> None:
        await write_status(
            client=self._client, obj=obj, ref=ref, fields=fields, conditions=conditions
        )

    def _now(self) -> float:
        return self._clock.wall()
