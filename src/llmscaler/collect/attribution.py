"""Pod → variant attribution: turn a source's `Reading` into the core's replica and pool metrics.

Why: both metric sources (Prometheus, pod scraping) hand over per-pod and per-model readings; the
decision core wants `ReplicaMetrics` tagged with the variant they belong to and `PoolMetrics` per
model group. This module is that one step, shared by both sources, so they cannot drift. It is pure:
no I/O, no clock; the caller passes the pods and scale targets it watched.

Rules (reference/wva.md §2.1), applied to each `PodReading` in this order:

1. the pod must still exist (a `PodInfo` with the same namespace and name), else `pod-gone`: a
   window such as "max over the last minute" still holds series of a deleted pod;
2. an LWS pod whose `leaderworkerset.sigs.k8s.io/worker-index` label is not `'0'` is a worker,
   skipped as `lws-worker`: only the leader represents the replica;
3. the `llm_d_ai_variant` label on the pod's series names the variant directly. Pods scraped
   directly carry no such series label, so the pod label it is copied from when Prometheus scrapes
   (`llm-d.ai/variant`) is honoured next, which keeps both sources equivalent;
4. otherwise the owner chain is walked from the pod upwards and the first owner that is a scale
   target (`TargetRef`) names the variant: a Deployment through its ReplicaSet, a StatefulSet, a
   LeaderWorkerSet directly or through its StatefulSet. No owners: `no-owner`; no owner is a known
   target: `unknown-target`; a name that is not a known variant: `unknown-variant`;
5. a pod whose series name a model other than its variant's is `model-mismatch` (WVA's queries
   filter on `model_name`, so such a pod never reaches its analyzers either);
6. saturation figures. `ReplicaMetrics.kv_usage` and `queue_length` are plain floats, and a missing
   series must never look like an idle pod: a pod with neither a KV-usage nor a queue-length figure
   is `no-saturation-metrics`; a pod missing one of them gets 0.0 for it, as WVA does, and is listed
   in `Attribution.partial` (`kv-missing` / `queue-missing`) so status can say so.

Every other figure is copied from the reading; None stays None. NaN and ±Inf count as absent
(`model.finite`), negative block counts and sizes as absent. Pool metrics are built for each
`ModelReading` whose (model_id, namespace) is a variant group; an absent queue size or byte count
is 0.0 (no queue seen), an absent request count stays None (which forbids scale-to-zero).

`Attribution.silent` lists ready pods that resolve to a variant but have no attributed reading
(WVA warns "ready pods but none attributed"); freshness is left to the core, which judges
`observed_at` against its `now`.

Determinism: every output tuple is sorted; duplicate pods or targets resolve to the entry that
sorts first, so the result does not depend on the order of the inputs. Nothing raises.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from llmscaler.collect.types import ModelReading, PodReading, Reading, SourceError, label_value
from llmscaler.model import PoolMetrics, ReplicaMetrics, Variant, finite

VARIANT_SERIES_LABEL = 'llm_d_ai_variant'
VARIANT_POD_LABEL = 'llm-d.ai/variant'
LWS_WORKER_INDEX_LABEL = 'leaderworkerset.sigs.k8s.io/worker-index'

_T = TypeVar('_T')


@dataclass(frozen=True, slots=True)
class PodInfo:
    """What the watcher knows of one pod: labels, owner chain (pod upwards) and readiness.

    `owners` lists (kind, name) from the direct owner upwards, e.g.
    `(('ReplicaSet', 'llama-7c9f'), ('Deployment', 'llama'))`.
    """

    namespace: str
    name: str
    labels: tuple[tuple[str, str], ...] = ()
    owners: tuple[tuple[str, str], ...] = ()
    ready: bool = True

    def label(self, name: str) -> str | None:
        return label_value(labels=self.labels, name=name)


@dataclass(frozen=True, slots=True)
class TargetRef:
    """A variant's scale target (Deployment, StatefulSet or LeaderWorkerSet)."""

    namespace: str
    kind: str
    name: str
    variant: str


@dataclass(frozen=True, slots=True)
class Attribution:
    """The core's view of one reading.

    `unattributed` and `partial` hold (namespace, pod, reason); `silent` holds
    (namespace, pod, variant) of ready pods with no attributed reading.
    """

    replicas: tuple[ReplicaMetrics, ...] = ()
    pools: tuple[PoolMetrics, ...] = ()
    unattributed: tuple[tuple[str, str, str], ...] = ()
    partial: tuple[tuple[str, str, str], ...] = ()
    silent: tuple[tuple[str, str, str], ...] = ()
    errors: tuple[SourceError, ...] = ()
    dropped_non_finite: int = 0


def _pod_sort_key(pod: PodInfo) -> tuple[object, ...]:
    return (pod.namespace, pod.name, pod.labels, pod.owners, pod.ready)


def _first_by_key(pods: Sequence[PodInfo]) -> dict[tuple[str, str], PodInfo]:
    index: dict[tuple[str, str], PodInfo] = {}
    for pod in sorted(pods, key=_pod_sort_key):
        index.setdefault((pod.namespace, pod.name), pod)
    return index


def _target_index(targets: Sequence[TargetRef]) -> dict[tuple[str, str, str], str]:
    index: dict[tuple[str, str, str], str] = {}
    for ref in sorted(targets, key=lambda t: (t.namespace, t.kind, t.name, t.variant)):
        index.setdefault((ref.namespace, ref.kind, ref.name), ref.variant)
    return index


def _variant_index(variants: Sequence[Variant]) -> dict[tuple[str, str], Variant]:
    index: dict[tuple[str, str], Variant] = {}
    for variant in sorted(variants, key=lambda v: (v.namespace, v.name, repr(v))):
        index.setdefault((variant.namespace, variant.name), variant)
    return index


def _is_lws_worker(pod: PodInfo) -> bool:
    index = pod.label(LWS_WORKER_INDEX_LABEL)
    return index is not None and index != '0'


def _resolve(
    *,
    series_variant: str | None,
    pod: PodInfo,
    targets: dict[tuple[str, str, str], str],
    variants: dict[tuple[str, str], Variant],
) -> tuple[Variant | None, str]:
    """The pod's variant, or None and the reason (rules 2-4 of the module docstring)."""
    if _is_lws_worker(pod):
        return None, 'lws-worker'
    name = series_variant or pod.label(VARIANT_POD_LABEL) or None
    if name is None:
        if not pod.owners:
            return None, 'no-owner'
        for kind, owner in pod.owners:
            name = targets.get((pod.namespace, kind, owner))
            if name is not None:
                break
        else:
            return None, 'unknown-target'
    variant = variants.get((pod.namespace, name))
    if variant is None:
        return None, 'unknown-variant'
    return variant, ''


def _positive_int(value: int | None) -> int | None:
    return value if value is not None and value > 0 else None


def _replica(*, reading: PodReading, variant: Variant) -> ReplicaMetrics:
    return ReplicaMetrics(
        pod=reading.pod,
        variant=variant.name,
        namespace=reading.namespace,
        observed_at=reading.observed_at,
        kv_usage=finite(reading.kv_usage) or 0.0,
        queue_length=finite(reading.queue_length) or 0.0,
        num_gpu_blocks=_positive_int(reading.num_gpu_blocks),
        block_size=_positive_int(reading.block_size),
        avg_input_tokens=finite(reading.avg_input_tokens),
        avg_output_tokens=finite(reading.avg_output_tokens),
        prefix_cache_hit_rate=finite(reading.prefix_cache_hit_rate),
        arrival_rate=finite(reading.arrival_rate),
        avg_ttft=finite(reading.avg_ttft),
        avg_itl=finite(reading.avg_itl),
        running_requests=finite(reading.running_requests),
    )


def _pool(reading: ModelReading) -> PoolMetrics:
    return PoolMetrics(
        model_id=reading.model_id,
        namespace=reading.namespace,
        observed_at=reading.observed_at,
        queue_size=finite(reading.queue_size) or 0.0,
        queue_bytes=finite(reading.queue_bytes) or 0.0,
        request_count=finite(reading.request_count),
        arrival_rate=finite(reading.arrival_rate),
    )


def _sorted(items: list[_T], *, key: Callable[[_T], tuple[str, ...]]) -> tuple[_T, ...]:
    """`items` sorted by `key`, ties broken by `repr` (the whole value).

    Ties are rare (one reading per pod and per model), and `repr` of a wide dataclass costs more
    than the rest of the sort, so it is only computed when two keys are equal.
    """
    ordered = sorted(items, key=key)
    if len({key(item) for item in items}) < len(items):
        ordered = sorted(items, key=lambda item: (*key(item), repr(item)))
    return tuple(ordered)


def attribute(
    *,
    reading: Reading,
    variants: Sequence[Variant],
    targets: Sequence[TargetRef],
    pods: Sequence[PodInfo],
) -> Attribution:
    """Attribute every pod reading to a variant and every model reading to a variant group."""
    pod_index = _first_by_key(pods)
    target_index = _target_index(targets)
    variant_index = _variant_index(variants)

    replicas: list[ReplicaMetrics] = []
    unattributed: list[tuple[str, str, str]] = []
    partial: list[tuple[str, str, str]] = []
    attributed: set[tuple[str, str]] = set()
    for pod_reading in reading.pods:
        where = (pod_reading.namespace, pod_reading.pod)
        info = pod_index.get(where)
        if info is None:
            unattributed.append((*where, 'pod-gone'))
            continue
        variant, reason = _resolve(
            series_variant=pod_reading.label(VARIANT_SERIES_LABEL),
            pod=info,
            targets=target_index,
            variants=variant_index,
        )
        if variant is None:
            unattributed.append((*where, reason))
            continue
        if pod_reading.model_name and pod_reading.model_name != variant.model_id:
            unattributed.append((*where, 'model-mismatch'))
            continue
        kv = finite(pod_reading.kv_usage)
        queue = finite(pod_reading.queue_length)
        if kv is None and queue is None:
            unattributed.append((*where, 'no-saturation-metrics'))
            continue
        if kv is None:
            partial.append((*where, 'kv-missing'))
        if queue is None:
            partial.append((*where, 'queue-missing'))
        replicas.append(_replica(reading=pod_reading, variant=variant))
        attributed.add(where)

    silent: list[tuple[str, str, str]] = []
    for key in sorted(pod_index):
        info = pod_index[key]
        if not info.ready or key in attributed:
            continue
        variant, _ = _resolve(
            series_variant=None, pod=info, targets=target_index, variants=variant_index
        )
        if variant is not None:
            silent.append((*key, variant.name))

    groups = {variant.group for variant in variant_index.values()}
    pools = [pool for pool in map(_pool, reading.models) if pool.group in groups]

    return Attribution(
        replicas=_sorted(replicas, key=lambda r: (r.namespace, r.variant, r.pod)),
        pools=_sorted(pools, key=lambda p: (p.namespace, p.model_id)),
        unattributed=tuple(sorted(unattributed)),
        partial=tuple(sorted(partial)),
        silent=tuple(silent),
        errors=tuple(sorted(reading.errors, key=lambda e: (e.target, e.reason, e.message))),
        dropped_non_finite=reading.dropped_non_finite,
    )
