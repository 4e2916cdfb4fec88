"""Peer autoscalers that end in a Kubernetes HPA, run on the exact HPA (`llmscaler.hpa`).

Why: `llmscaler simulate` compares the project with what people deploy today. Two of those
deployments are plain HPAs with different inputs, so both run here on the same reconcile as
upstream's controller, one HPA per variant, synced every `sync_period` (15 s,
`--horizontal-pod-autoscaler-sync-period`):

- `KedaQueuePolicy` (`keda-queue`): the common KEDA configuration on vLLM's queue (vLLM
  production-stack's helm/templates/scaledobject-vllm.yaml uses the same queue trigger), the
  configuration `llmscaler manifests` writes. A KEDA ScaledObject per variant with two Prometheus
  triggers, `sum(vllm:num_requests_waiting)` (AverageValue 5) and `sum(vllm:kv_cache_usage_perc)`
  (AverageValue 0.8), which KEDA turns into an HPA with two External metrics, minReplicas
  max(minReplicaCount, 1) and the behaviour the manifests write (Kubernetes' defaults written out:
  scale-up max(+4 pods, +100 %) per 15 s, scale-down 300 s window then 100 % per 15 s). KEDA's own
  loop (every control cycle here, its `pollingInterval` of 30 s) only moves between 0 and the floor:
  with `min_replicas=0` it parks an idle variant at 0 once no trigger has been active for
  `cooldown_period` (300 s; `initialCooldownPeriod` 0 from the first cycle, so a never-active
  variant goes at the next cycle, kedacore/keda#5008) and wakes it to 1 when a trigger is active
  (value > 0).
- `HpaKvPolicy` (`hpa-kv`): the common practice of an HPA on KV-cache usage through a custom
  metrics adapter: a Pods metric `vllm:kv_cache_usage_perc` with an AverageValue target of 0.7
  and no `behavior` (what `kubectl autoscale`-style manifests leave out, so the legacy path:
  300 s max-window, scale-up ≤ max(2 · current, 4)). 0.7 rather than 0.8: the metric pipeline
  reacts 15–60 s late and the 10 % tolerance only acts above 0.77, so a target at WVA's 0.80
  "saturated" threshold would act once replicas already queue. A Pods metric means the pod
  rules apply: pending pods are re-added at 0 on scale-up, a ready pod without a sample is
  assumed at the target on scale-down and at 0 on scale-up.

Between two control cycles the HPA syncs at every `sync_period` step ending at `now`; each sync
reads the same snapshot (the simulator builds one per cycle) and sees its own previous write
(spec.replicas, and status.replicas grown or shrunk by it). The snapshot's `queue_length` and
`kv_usage` are 1-minute maxima (what the controller's queries return), so these peers see
slightly pessimistic load. The gateway queue is not read: each HPA only sees its own pods.
`wake` returns {}.

What fails: the constructors raise `ValueError` on non-finite, negative or zero settings where
they make no sense. A replica's value that is None, NaN, ±Inf or negative is no series: the KEDA
sums run over the others, and with none at all the trigger is in error (the manifests set
`ignoreNullValues: "false"`), so the HPA holds on a scale-down and KEDA parks nothing; for
`hpa-kv` the pod has no sample.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from llmscaler.domain.basics import finite
from llmscaler.domain.snapshot import ReplicaMetrics, Variant
from llmscaler.hpa.behavior import Behavior
from llmscaler.hpa.pods import Pod, PodMetric
from llmscaler.hpa.reconcile import (
    ControllerSettings,
    HpaSpec,
    HpaState,
    MetricInput,
    MetricSpec,
    Scale,
    reconcile,
)
from llmscaler.sim.vocabulary import ControlView

SYNC_PERIOD = 15.0


def _milli(value: float) -> int:
    """Metric values reach the HPA as milli-quantities; integer arithmetic from there on."""
    return round(value * 1000)


def _positive(value: float | None) -> float | None:
    v = finite(value)
    return v if v is not None and v >= 0 else None


def _sum(values: Sequence[float | None]) -> int | None:
    """PromQL's `sum()` in milli-units: over the series present (None, NaN, ±Inf or negative is
    no series); no series at all is an empty result, None (`ignoreNullValues: "false"`)."""
    present = [v for v in (_positive(x) for x in values) if v is not None]
    return _milli(sum(present)) if present else None


def _check(label: str, value: float, *, zero_ok: bool) -> None:
    if not math.isfinite(value) or value < 0 or (value == 0 and not zero_ok):
        bound = '>= 0' if zero_ok else '> 0'
        raise ValueError(f'{label} must be a finite number {bound}, got {value}')


@dataclass(slots=True)
class _Hpa:
    """One variant's HPA memory and the last sync instant."""

    state: HpaState
    last_sync: float


class _HpaPeer:
    """One HPA per variant, reconciled every `sync_period` up to each control instant."""

    def __init__(
        self, *, name: str, tolerance: float, down_stabilization: float, sync_period: float
    ) -> None:
        _check('tolerance', tolerance, zero_ok=True)
        _check('down_stabilization', down_stabilization, zero_ok=True)
        _check('sync_period', sync_period, zero_ok=False)
        self._name = name
        self.tolerance = tolerance
        self.down_stabilization = down_stabilization
        self.sync_period = sync_period
        self._settings = ControllerSettings(
            tolerance=tolerance, downscale_stabilization=down_stabilization
        )
        self._hpas: dict[str, _Hpa] = {}

    @property
    def name(self) -> str:
        return self._name

    def wake(self, *, view: ControlView) -> dict[str, int]:
        return {}

    def targets(self, *, view: ControlView) -> dict[str, int]:
        by_variant: dict[str, list[ReplicaMetrics]] = {}
        for replica in view.snapshot.replicas:
            by_variant.setdefault(replica.variant_key, []).append(replica)
        result: dict[str, int] = {}
        for variant in sorted(view.snapshot.variants, key=lambda v: (v.namespace, v.name)):
            replicas = sorted(by_variant.get(variant.key, ()), key=lambda r: r.pod)
            result[variant.name] = self._target(variant=variant, replicas=replicas, now=view.now)
        return result

    def _floor(self, variant: Variant) -> int:
        return max(1, variant.min_replicas)

    def _spec(self, *, variant: Variant, lower: int) -> HpaSpec:
        raise NotImplementedError

    def _values(self, *, variant: Variant, replicas: Sequence[ReplicaMetrics]) -> list[MetricInput]:
        raise NotImplementedError

    def _pods(self, *, variant: Variant, replicas: Sequence[ReplicaMetrics]) -> tuple[Pod, ...]:
        """Running and Ready pods (those reporting first), then the pending ones."""
        names = [r.pod for r in replicas]
        pods = [Pod(name=n) for n in names[: variant.ready_replicas]]
        pods += [
            Pod(name=f'{variant.name}-ready-{i}') for i in range(len(pods), variant.ready_replicas)
        ]
        pods += [
            Pod(name=f'{variant.name}-pending-{i}', phase='Pending', ready=False)
            for i in range(variant.pending_replicas)
        ]
        return tuple(pods)

    def _gate(
        self, *, variant: Variant, current: int, values: list[MetricInput], now: float
    ) -> int | None:
        """KEDA's own step between 0 and the floor (None: leave it to the HPA)."""
        return None

    def _target(self, *, variant: Variant, replicas: Sequence[ReplicaMetrics], now: float) -> int:
        upper = variant.max_replicas
        if upper < 1:
            return 0
        lower = min(self._floor(variant), upper)
        current = variant.current_replicas
        values = self._values(variant=variant, replicas=replicas)
        gated = self._gate(variant=variant, current=current, values=values, now=now)
        if gated is not None:
            return gated
        spec = self._spec(variant=variant, lower=lower)
        hpa = self._hpas.get(variant.key)
        if hpa is None:
            hpa = self._hpas[variant.key] = _Hpa(state=HpaState(), last_sync=now - self.sync_period)
        syncs = max(1, math.floor((now - hpa.last_sync) / self.sync_period + 1e-9))
        pods = self._pods(variant=variant, replicas=replicas)
        status = variant.ready_replicas + variant.pending_replicas
        for k in range(syncs - 1, -1, -1):
            at = now - k * self.sync_period
            outcome = reconcile(
                spec=spec,
                scale=Scale(spec_replicas=current, status_replicas=status, pods=pods),
                values=values,
                state=hpa.state,
                now=at,
                settings=self._settings,
            )
            hpa.state = outcome.state
            if outcome.rescale:
                status = max(0, status + outcome.desired_replicas - current)
                current = outcome.desired_replicas
        hpa.last_sync = now
        return current


class KedaQueuePolicy(_HpaPeer):
    """KEDA on `num_requests_waiting` and KV usage, the common setup (see the module)."""

    def __init__(
        self,
        *,
        name: str = 'keda-queue',
        queue_per_replica: float = 5.0,
        kv_target: float = 0.8,
        tolerance: float = 0.1,
        down_stabilization: float = 300.0,
        min_replicas: int = 1,
        cooldown_period: float = 300.0,
        sync_period: float = SYNC_PERIOD,
    ) -> None:
        _check('queue_per_replica', queue_per_replica, zero_ok=False)
        _check('kv_target', kv_target, zero_ok=False)
        _check('cooldown_period', cooldown_period, zero_ok=True)
        if min_replicas < 0:
            raise ValueError(f'min_replicas must be >= 0, got {min_replicas}')
        super().__init__(
            name=name,
            tolerance=tolerance,
            down_stabilization=down_stabilization,
            sync_period=sync_period,
        )
        self.queue_per_replica = queue_per_replica
        self.kv_target = kv_target
        self.min_replicas = min_replicas
        self.cooldown_period = cooldown_period
        self._created: dict[str, float] = {}
        self._last_active: dict[str, float] = {}

    def _floor(self, variant: Variant) -> int:
        # KEDA gives the HPA max(minReplicaCount, 1); the variant's own floor binds too.
        return max(self.min_replicas, variant.min_replicas, 1)

    def _spec(self, *, variant: Variant, lower: int) -> HpaSpec:
        return HpaSpec(
            max_replicas=variant.max_replicas,
            min_replicas=lower,
            metrics=(
                MetricSpec(
                    'External', 's0-prometheus', 'AverageValue', _milli(self.queue_per_replica)
                ),
                MetricSpec('External', 's1-prometheus', 'AverageValue', _milli(self.kv_target)),
            ),
            behavior=Behavior(),
        )

    def _values(self, *, variant: Variant, replicas: Sequence[ReplicaMetrics]) -> list[MetricInput]:
        queue = _sum([r.queue_length for r in replicas])
        kv = _sum([r.kv_usage for r in replicas])
        return [None if queue is None else [queue], None if kv is None else [kv]]

    def _gate(
        self, *, variant: Variant, current: int, values: list[MetricInput], now: float
    ) -> int | None:
        created = self._created.setdefault(variant.key, now)
        active = any(isinstance(v, list) and sum(v) > 0 for v in values)
        # A trigger in error (no series) parks nothing: KEDA leaves the count to the HPA, whose
        # failing metric blocks any scale-down.
        errored = any(v is None for v in values)
        if active:
            self._last_active[variant.key] = now
        keda_min = max(self.min_replicas, variant.min_replicas)
        if current == 0:
            # The HPA is disabled at 0: KEDA wakes the target to the floor when a trigger is
            # active, or when minReplicaCount is above 0.
            return min(max(keda_min, 1), variant.max_replicas) if active or keda_min else 0
        if keda_min == 0 and not active and not errored:
            last = self._last_active.get(variant.key)
            # lastActiveTime + cooldownPeriod < now, or with no activity yet
            # creationTime + initialCooldownPeriod (0) < now: straight to 0 from any count.
            if (last is not None and last + self.cooldown_period < now) or (
                last is None and created < now
            ):
                return 0
        return None


class HpaKvPolicy(_HpaPeer):
    """An HPA on the per-pod KV-cache usage, the common practice (see the module)."""

    def __init__(
        self,
        *,
        name: str = 'hpa-kv',
        kv_target: float = 0.7,
        tolerance: float = 0.1,
        down_stabilization: float = 300.0,
        sync_period: float = SYNC_PERIOD,
    ) -> None:
        _check('kv_target', kv_target, zero_ok=False)
        super().__init__(
            name=name,
            tolerance=tolerance,
            down_stabilization=down_stabilization,
            sync_period=sync_period,
        )
        self.kv_target = kv_target

    def _spec(self, *, variant: Variant, lower: int) -> HpaSpec:
        return HpaSpec(
            max_replicas=variant.max_replicas,
            min_replicas=lower,
            metrics=(
                MetricSpec(
                    'Pods', 'vllm:kv_cache_usage_perc', 'AverageValue', _milli(self.kv_target)
                ),
            ),
        )

    def _values(self, *, variant: Variant, replicas: Sequence[ReplicaMetrics]) -> list[MetricInput]:
        samples: dict[str, PodMetric] = {}
        for replica in replicas[: variant.ready_replicas]:
            kv = _positive(replica.kv_usage)
            if kv is not None:
                samples[replica.pod] = PodMetric(value=_milli(kv), timestamp=replica.observed_at)
        return [samples]
