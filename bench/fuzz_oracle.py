"""The safety rules (docs/decision-core.md), judged from outside the core on one `decide()` call.

Why: a fuzzer needs an oracle that does not share the code it checks. This module restates the
rules from the snapshot `decide()` was given and the decisions it returned, with its own table of
metric ranges, so a bug in `analyze.validity` or the engine cannot hide itself.

Rules (each violation names one):

- `bounds`: every target lies in [min_replicas, max_replicas].
- `down-on-bad-metrics`: a model with a replica that is not reporting never goes down (a target
  below min(current, max_replicas); the maximum itself may force a variant down). Not reporting:
  a replica of one of its variants has a required figure (KV usage, queue length) missing or any
  figure non-finite or out of range (`observed_at` non-finite included; a replica older than
  the unavailable threshold is dropped, not judged), or a variant has fewer fresh, usable
  replicas than ready replicas, or the model's pool has a broken figure. The caller may name more
  models that must hold (`must_hold`: what it fed upstream of the snapshot, a page without a
  usable KV line for instance).
- `status`: the decisions of the variant that is not reporting (every variant of the model, for a
  broken pool) say `metrics_available=False`.
- `zero-with-requests`: a running model never goes to 0 replicas in all while requests may be
  queued or may have arrived within the retention period: no pool, a request count that is
  unknown or above 0, a gateway queue above 0, or a fresh replica with waiting requests.
- `zero-in-one-step`: a model goes to 0 only from 1 replica per variant (N → 1 before 1 → 0).
- `one-decision`: one decision per variant, no more, no less.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from llmscaler.config.resolved import CoreSettings
from llmscaler.domain.snapshot import Decision, PoolMetrics, ReplicaMetrics, Snapshot, Variant

INT32_MAX = 2**31 - 1
_UNIT = (0.0, 1.0)
_NON_NEGATIVE = (0.0, math.inf)
_COUNT = (1.0, float(INT32_MAX))
REPLICA_RANGES: Mapping[str, tuple[float, float]] = {
    'kv_usage': _UNIT,
    'queue_length': _NON_NEGATIVE,
    'num_gpu_blocks': _COUNT,
    'block_size': _COUNT,
    'avg_input_tokens': _NON_NEGATIVE,
    'avg_output_tokens': _NON_NEGATIVE,
    'prefix_cache_hit_rate': _UNIT,
    'arrival_rate': _NON_NEGATIVE,
    'avg_ttft': _NON_NEGATIVE,
    'avg_itl': _NON_NEGATIVE,
    'running_requests': _NON_NEGATIVE,
}
REQUIRED = ('kv_usage', 'queue_length')
INTEGERS = ('num_gpu_blocks', 'block_size')
POOL_RANGES: Mapping[str, tuple[float, float]] = {
    'queue_size': _NON_NEGATIVE,
    'queue_bytes': _NON_NEGATIVE,
    'request_count': _NON_NEGATIVE,
    'arrival_rate': _NON_NEGATIVE,
}


@dataclass(frozen=True, slots=True)
class Violation:
    rule: str
    what: str


def usable(value: object, low: float, high: float, *, integer: bool = False) -> bool:
    """A number (not a bool) that is finite and in [low, high]; an int where one is needed."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    if integer and not isinstance(value, int):
        return False
    try:
        return math.isfinite(value) and low <= value <= high
    except OverflowError:
        return False


def _age(*, now: float, observed_at: float) -> float | None:
    try:
        age = now - observed_at
    except (OverflowError, TypeError):
        return None
    return age if math.isfinite(age) else None


def replica_faults(replica: ReplicaMetrics) -> list[str]:
    """What is wrong with one replica's figures; empty when it reports usable ones."""
    faults = []
    for name, (low, high) in REPLICA_RANGES.items():
        value = getattr(replica, name)
        if value is None:
            if name in REQUIRED:
                faults.append(f'{name} missing')
        elif not usable(value, low, high, integer=name in INTEGERS):
            faults.append(f'{name}={value!r:.30}')
    if not usable(replica.observed_at, -math.inf, math.inf):
        faults.append(f'observed_at={replica.observed_at!r:.30}')
    return faults


def pool_faults(pool: PoolMetrics) -> list[str]:
    faults = [
        f'pool {name}={value!r:.30}'
        for name, (low, high) in POOL_RANGES.items()
        if (value := getattr(pool, name)) is not None and not usable(value, low, high)
    ]
    if not usable(pool.observed_at, -math.inf, math.inf):
        faults.append(f'pool observed_at={pool.observed_at!r:.30}')
    return faults


def not_reporting(
    *,
    variants: Sequence[Variant],
    replicas: Sequence[ReplicaMetrics],
    pool: PoolMetrics | None,
    settings: CoreSettings,
    now: float,
) -> list[tuple[str, str]]:
    """Why one model (its variants, their replicas, its pool) is not reporting, as (variant,
    why) pairs; variant '' for the model as a whole. Empty when it reports."""
    why: list[tuple[str, str]] = []
    for variant in variants:
        usable_fresh = 0
        for replica in (r for r in replicas if r.variant == variant.name):
            age = _age(now=now, observed_at=replica.observed_at)
            faults = replica_faults(replica)
            if age is not None and age >= settings.unavailable_threshold:
                continue  # dropped as too old: judged by the ready count below
            if faults:
                why.append((variant.name, f'{replica.pod}: {", ".join(faults)}'))
            elif age is not None and age < settings.fresh_threshold:
                usable_fresh += 1
        if usable_fresh < variant.ready_replicas:
            count = f'{usable_fresh} of {variant.ready_replicas} ready replicas fresh and usable'
            why.append((variant.name, f'{variant.name}: {count}'))
    if pool is not None:
        why.extend(('', fault) for fault in pool_faults(pool))
    return why


def _requests_may_wait(
    *,
    replicas: Sequence[ReplicaMetrics],
    pool: PoolMetrics | None,
    settings: CoreSettings,
    now: float,
) -> str:
    if pool is None:
        return 'no pool metrics (request count unknown)'
    count = pool.request_count
    if count is None or not usable(count, 0.0, math.inf):
        return f'request count {count!r:.30}'
    if count > 0:
        return f'{count:g} requests within the retention period'
    if not usable(pool.queue_size, 0.0, 0.0):
        return f'gateway queue {pool.queue_size!r:.30}'
    for replica in replicas:
        age = _age(now=now, observed_at=replica.observed_at)
        fresh = age is not None and age < settings.fresh_threshold
        if fresh and replica.queue_length is not None and replica.queue_length != 0:
            return f'{replica.pod} has queue length {replica.queue_length!r:.30}'
    return ''


def check(
    *,
    snapshot: Snapshot,
    decisions: Sequence[Decision],
    settings: CoreSettings,
    now: float,
    must_hold: Mapping[str, Sequence[tuple[str, str]]] | None = None,
) -> list[Violation]:
    """Every rule that `decisions`, the answer to `snapshot` at `now`, breaks.

    `must_hold` adds, by group key (`modelID|namespace`), (variant, why) pairs the caller knows
    of: the model must hold, and that variant (every variant for '') must say why.
    """
    found: list[Violation] = []
    by_key: dict[str, list[Decision]] = {}
    for decision in decisions:
        by_key.setdefault(decision.key, []).append(decision)
    groups: dict[str, list[Variant]] = {}
    for variant in snapshot.variants:
        groups.setdefault(variant.group, []).append(variant)
        count = len(by_key.get(variant.key, []))
        if count != 1:
            found.append(Violation('one-decision', f'{variant.key}: {count} decisions'))
    pools = {pool.group: pool for pool in snapshot.pools}
    for group, variants in sorted(groups.items()):
        names = {v.name for v in variants}
        namespace = variants[0].namespace
        replicas = [r for r in snapshot.replicas if r.namespace == namespace and r.variant in names]
        pool = pools.get(group)
        why = not_reporting(
            variants=variants, replicas=replicas, pool=pool, settings=settings, now=now
        )
        why.extend((must_hold or {}).get(group, ()))
        said = '; '.join(text for _, text in why)[:300]
        pairs = [(v, by_key[v.key][0]) for v in variants if len(by_key.get(v.key, [])) == 1]
        for variant, decision in pairs:
            low, high = variant.min_replicas, max(variant.min_replicas, variant.max_replicas)
            if not low <= decision.target <= high:
                found.append(
                    Violation(
                        'bounds',
                        f'{variant.key}: target {decision.target} outside '
                        f'[{variant.min_replicas}, {variant.max_replicas}]',
                    )
                )
            floor = min(decision.current, high)
            if why and decision.target < floor:
                found.append(
                    Violation(
                        'down-on-bad-metrics',
                        f'{variant.key}: {decision.current} -> {decision.target} while {said}',
                    )
                )
            own = [text for name, text in why if name in ('', variant.name)]
            if own and decision.metrics_available:
                found.append(
                    Violation(
                        'status',
                        f'{variant.key}: MetricsAvailable=True while {"; ".join(own)[:300]}',
                    )
                )
        current = sum(d.current for _, d in pairs)
        if pairs and current > 0 and sum(d.target for _, d in pairs) == 0:
            waiting = _requests_may_wait(replicas=replicas, pool=pool, settings=settings, now=now)
            if waiting:
                found.append(Violation('zero-with-requests', f'{group}: to 0 while {waiting}'))
            steps = [f'{v.name} {d.current} -> 0' for v, d in pairs if d.current > 1]
            if steps:
                found.append(Violation('zero-in-one-step', f'{group}: {", ".join(steps)}'))
    return found
