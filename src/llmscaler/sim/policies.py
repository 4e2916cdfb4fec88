"""The policies the simulator compares: the decision core, a KEDA/HPA baseline, a fixed fleet.

Why: `llmscaler simulate` answers "what would this autoscaler have done on my traffic, and what
would the usual alternative have done?". Each policy here turns a `ControlView` (what the
controller would see at a control instant) into replica targets:

- `CorePolicy` runs `engine.decide()` exactly as the controller does, carrying the core `State`
  from one cycle to the next, and `scale_from_zero.wake()` on the short wake period.
- `KedaQueuePolicy` is the convergent vendor default of seed 003: one KEDA ScaledObject per
  variant, Prometheus triggers `sum(vllm:num_requests_waiting)` (AverageValue 5) and
  `sum(vllm:kv_cache_usage_perc)` (AverageValue 0.8), turned into an HPA with default behaviour
  (reference/peers.md §1-2). Its arithmetic is spelt out on the class.
- `StaticPolicy` holds a fixed fleet: the cost/latency of not autoscaling at all.

Every policy decides for every model of the fleet at once: the core's `decide()` groups the
snapshot's variants by model, the KEDA baseline is one ScaledObject per variant, and a static
fleet names variants of any model.

What fails: `parse_static` raises `ValueError` (naming the valid variants) on a malformed
`static:` policy name; `StaticPolicy` and `KedaQueuePolicy` raise `ValueError` on negative or
non-finite settings. Metric values that are None, NaN, ±Inf or negative count as 0 in the KEDA
sums (the Prometheus scaler's `ignoreNullValues` default turns a missing value into 0).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from llmscaler.config.types import Config
from llmscaler.enforce import scale_from_zero
from llmscaler.engine import decide
from llmscaler.model import EMPTY_STATE, Decision, ReplicaMetrics, State, Variant, finite
from llmscaler.sim.types import ControlView


class CorePolicy:
    """The decision core with one configuration, exactly as the controller runs it.

    `targets` calls `engine.decide()` on the view's snapshot and keeps the returned `State` for
    the next call; `last_decisions` holds the decisions of the latest cycle (analyzer figures for
    the report). `wake` is `scale_from_zero.wake()` on the same snapshot. Targets are keyed by
    variant name: the simulated fleet has one namespace.
    """

    def __init__(self, *, name: str, config: Config) -> None:
        self._name = name
        self.config = config
        self._state: State = EMPTY_STATE
        self._decisions: tuple[Decision, ...] = ()

    @property
    def name(self) -> str:
        return self._name

    @property
    def state(self) -> State:
        """The core's memory after the latest cycle (`EMPTY_STATE` before the first)."""
        return self._state

    @property
    def last_decisions(self) -> tuple[Decision, ...]:
        """The decisions of the latest `targets` call, sorted by namespace and variant."""
        return self._decisions

    def targets(self, *, view: ControlView) -> dict[str, int]:
        outcome = decide(
            snapshot=view.snapshot, config=self.config, state=self._state, now=view.now
        )
        self._state = outcome.state
        self._decisions = outcome.decisions
        return {d.variant: d.target for d in outcome.decisions}

    def wake(self, *, view: ControlView) -> dict[str, int]:
        woken = scale_from_zero.wake(variants=view.snapshot.variants, pools=view.snapshot.pools)
        return {w.variant: w.target for w in woken}


def _total(values: Sequence[float | None]) -> float:
    """Σ of the finite non-negative values; anything else counts as 0 (`ignoreNullValues`)."""
    total = 0.0
    for value in values:
        v = finite(value)
        if v is not None and v > 0:
            total += v
    return total


def _milli(value: float) -> int:
    """KEDA hands the HPA metric values as milli-quantities; integer arithmetic like the HPA."""
    return round(value * 1000)


def external_average_value(
    *, total: float, target: float, status_replicas: int, tolerance: float
) -> int:
    """The HPA proposal of one External metric with an `AverageValue` target (peers.md §1.2).

    r = total / (target · status.replicas); within tolerance (1 − tol ≤ r ≤ 1 + tol, both bounds
    inclusive and written as the HPA's `isWithin` so that r = 1.1 is within) the proposal is
    status.replicas, otherwise ceil(total / target), independent of the replica count. With
    status.replicas = 0 the ratio is undefined (Inf/NaN in the HPA) and never within.
    """
    usage, per_pod = _milli(total), _milli(target)
    if status_replicas > 0:
        ratio = usage / (per_pod * status_replicas)
        if 1.0 - tolerance <= ratio <= 1.0 + tolerance:
            return status_replicas
    return -(-usage // per_pod)


class KedaQueuePolicy:
    """KEDA on `num_requests_waiting` (and KV usage), one ScaledObject → HPA per variant.

    Per variant v, each control cycle (`now`):

    1. current = spec.replicas (`Variant.current_replicas`), status = ready + pending pods;
       lower = max(`min_replicas`, v.min_replicas) (KEDA sets the HPA's minReplicas to
       max(minReplicaCount, 1): without the HTTP add-on it cannot scale from 0, seed 003),
       upper = v.max_replicas. As the HPA does, current < lower gives lower and current > upper
       gives upper, without reading metrics (KEDA's activation lifts a parked workload to min).
    2. Triggers, External metrics with `AverageValue` targets (peers.md §1.2, §2.2):
       Q = Σ queue_length and K = Σ kv_usage over the variant's replicas in the snapshot; the
       proposal of each is status when 1 − tol ≤ Σ/(target·status) ≤ 1 + tol, else
       ceil(Σ/target) (Q/5 and K/0.8 by default, in milli-units as the HPA computes them).
       The tolerance is applied per trigger, then the proposal is the max of the two, as the
       HPA's `computeReplicasForMetrics` does.
    3. Scale-down stabilization: the applied value is the max of this proposal and every raw
       proposal younger than `down_stabilization` (age < window); the log is seeded with the
       current count on the first cycle, so a first scale-down waits the whole window.
    4. Scale-up limit: at most max(2·current, current + 4) (the default scale-up policies
       "100 % or 4 pods per 15 s", selectPolicy Max). It is applied once per control cycle,
       not per 15 s HPA sync, so with a 30 s cycle this baseline is slower to scale up than
       a real HPA (which could double twice); the stabilization and tolerance are exact.
       (An HPA whose `behavior` is nil takes the legacy limit max(2·current, 4) instead; the
       two differ only below 4 replicas.)
    5. Clamp to [lower, upper] (upper wins if they cross).

    The replicas' `queue_length` and `kv_usage` in the snapshot are 1-minute maxima (what the
    controller's queries return), so this baseline sees slightly pessimistic load. The gateway
    queue is not read: each ScaledObject only sees its own pods. `wake` returns {}.
    """

    def __init__(
        self,
        *,
        name: str = 'keda-queue',
        queue_per_replica: float = 5.0,
        kv_target: float = 0.8,
        tolerance: float = 0.1,
        down_stabilization: float = 300.0,
        min_replicas: int = 1,
    ) -> None:
        for label, value in (
            ('queue_per_replica', queue_per_replica),
            ('kv_target', kv_target),
        ):
            if not math.isfinite(value) or value <= 0:
                raise ValueError(f'{label} must be a finite number > 0, got {value}')
        for label, value in (('tolerance', tolerance), ('down_stabilization', down_stabilization)):
            if not math.isfinite(value) or value < 0:
                raise ValueError(f'{label} must be a finite number >= 0, got {value}')
        if min_replicas < 0:
            raise ValueError(f'min_replicas must be >= 0, got {min_replicas}')
        self._name = name
        self.queue_per_replica = queue_per_replica
        self.kv_target = kv_target
        self.tolerance = tolerance
        self.down_stabilization = down_stabilization
        self.min_replicas = min_replicas
        self._recommendations: dict[str, list[tuple[float, int]]] = {}

    @property
    def name(self) -> str:
        return self._name

    def targets(self, *, view: ControlView) -> dict[str, int]:
        by_variant: dict[str, list[ReplicaMetrics]] = {}
        for replica in view.snapshot.replicas:
            by_variant.setdefault(replica.variant_key, []).append(replica)
        result: dict[str, int] = {}
        for variant in sorted(view.snapshot.variants, key=lambda v: (v.namespace, v.name)):
            result[variant.name] = self._target(
                variant=variant,
                replicas=sorted(by_variant.get(variant.key, ()), key=lambda r: r.pod),
                now=view.now,
            )
        return result

    def wake(self, *, view: ControlView) -> dict[str, int]:
        return {}

    def _target(self, *, variant: Variant, replicas: Sequence[ReplicaMetrics], now: float) -> int:
        current = variant.current_replicas
        upper = variant.max_replicas
        lower = min(max(self.min_replicas, variant.min_replicas), upper)
        log = self._recommendations.setdefault(variant.key, [(now, current)])
        if current < lower or current > upper:
            return max(lower, min(current, upper))
        status = variant.ready_replicas + variant.pending_replicas
        proposal = max(
            external_average_value(
                total=_total([r.queue_length for r in replicas]),
                target=self.queue_per_replica,
                status_replicas=status,
                tolerance=self.tolerance,
            ),
            external_average_value(
                total=_total([r.kv_usage for r in replicas]),
                target=self.kv_target,
                status_replicas=status,
                tolerance=self.tolerance,
            ),
        )
        log[:] = [(at, n) for at, n in log if now - at < self.down_stabilization]
        stabilized = max([proposal, *(n for _, n in log)])
        log.append((now, proposal))
        if stabilized > current:
            stabilized = min(stabilized, max(2 * current, current + 4))
        return max(lower, min(stabilized, upper))


class StaticPolicy:
    """A fixed fleet: the same targets every cycle (in effect from the first one), never a wake.

    Variants not named in `targets` keep whatever target they have.
    """

    def __init__(self, *, targets: Mapping[str, int], name: str) -> None:
        for variant, count in sorted(targets.items()):
            if count < 0:
                raise ValueError(f'static target of {variant} must be >= 0, got {count}')
        self._name = name
        self._targets = dict(sorted(targets.items()))

    @property
    def name(self) -> str:
        return self._name

    @property
    def fixed(self) -> dict[str, int]:
        """The fixed targets, by variant name."""
        return dict(self._targets)

    def targets(self, *, view: ControlView) -> dict[str, int]:
        return dict(self._targets)

    def wake(self, *, view: ControlView) -> dict[str, int]:
        return {}


def _count(*, text: str, where: str) -> int:
    value = text.strip()
    if not value.isdigit() or not value.isascii():
        raise ValueError(f'{where}: replica count must be an integer >= 0, got {text!r}')
    return int(value)


def parse_static(*, text: str, variants: Sequence[str], first: Sequence[str] = ()) -> StaticPolicy:
    """Parse `static:N` or `static:VARIANT=N,...` into a `StaticPolicy` named `text`.

    `static:N` puts N replicas on each variant of `first` (default: the first of `variants`, in
    the order given; a fleet of several models gives the first variant of each model) and 0 on
    the others; `static:a=2,b=1` sets the named variants, 0 on the unnamed ones. Raises
    `ValueError` on a missing prefix, an empty or malformed list, a count that is not an
    integer >= 0, a repeated or unknown variant (the message lists the valid names).
    """
    valid = ', '.join(variants) if variants else '(none)'
    if not text.startswith('static:'):
        raise ValueError(f'not a static policy: {text!r} (expected static:N or static:VARIANT=N)')
    body = text.removeprefix('static:').strip()
    if not body:
        raise ValueError(f'{text}: empty; expected static:N or static:VARIANT=N,... ({valid})')
    targets = dict.fromkeys(variants, 0)
    if '=' not in body:
        if not variants:
            raise ValueError(f'{text}: no variants to place the replicas on')
        replicas = _count(text=body, where=text)
        for variant in first or variants[:1]:
            targets[variant] = replicas
        return StaticPolicy(targets=targets, name=text)
    seen: set[str] = set()
    for part in body.split(','):
        variant, sep, count = part.partition('=')
        variant = variant.strip()
        if not sep or not variant:
            raise ValueError(f'{text}: expected VARIANT=N, got {part!r}')
        if variant not in targets:
            raise ValueError(f'{text}: unknown variant {variant!r}; valid: {valid}')
        if variant in seen:
            raise ValueError(f'{text}: variant {variant!r} given twice')
        seen.add(variant)
        targets[variant] = _count(text=count, where=text)
    return StaticPolicy(targets=targets, name=text)
