"""Pod → variant attribution: turn a source's `Reading` into the core's replica and pool metrics.

Why: both metric sources (Prometheus, pod scraping) hand over per-pod and per-model readings; the
decision core wants `ReplicaMetrics` tagged with the variant they belong to and `PoolMetrics` per
model group. This module is that one step, shared by both sources, so they cannot drift. It is pure:
no I/O, no clock; the caller passes the pods and scale targets it watched.

Rules (WVA's, llm-d workload-variant-autoscaler v0.9.0, internal/collector/), applied to each
`PodReading` in this order:

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
6. a pod that is not ready is skipped as `not-ready`, whatever its figures: only a ready pod's
   reading is a replica's report. The core's rule is "every ready replica reports fresh, usable
   figures, else the model holds", checked by comparing the reports of a variant with its ready
   count (`Variant.ready_replicas`, the scale target's status); a starting, stopping or
   probe-failing pod that still serves a page would otherwise stand in for a ready pod whose page
   failed (3 replicas, 2 ready, one of them silent: 2 reports, `MetricsFound`, scale down). Its
   figures would also describe a replica the analyzers already count as pending. The simulator
   builds its snapshots the same way (ready replicas only);
7. figures are copied as they are read: a missing series stays None and a NaN, ±Inf or
   out-of-range value stays what it is. Attribution does not judge them and never reads a missing
   or broken figure as 0; the core does (`analyze.validity`): a replica without KV usage or queue
   length, or with a broken figure, is not reporting and its model holds (`MetricsMissing` /
   `MetricsInvalid`, naming the pod and metric). Such a pod is attributed and listed in
   `Attribution.partial` (`kv-missing`, `queue-missing`, `invalid`).

Block counts and sizes that are not positive mean "size unknown" (None), as vLLM's
`cache_config_info` before profiling. Pool metrics are built for each `ModelReading` whose
(model_id, namespace) is a variant group, with every figure passed on as the source read it: a
queue size or byte count of 0.0 where the model has no gateway queue, None where its query
failed, NaN or negative as read (for these three the core holds), and an absent request count
None (which forbids scale-to-zero).

`Attribution.silent` lists ready pods that resolve to a variant but have no attributed reading
(WVA warns "ready pods but none attributed"), for logs and tests: the core sees them as a ready
count its reports do not reach (`MetricsMissing`, "1 of 2 ready replicas report metrics").
The scale target's ready count lags its pods by a moment, so `with_ready_pods` raises each
variant's `ready_replicas` to the ready pods seen (never lowers it): a pod that just turned ready
cannot cover for a silent one while the status catches up. Freshness is left to the core, which
judges `observed_at` against its `now`.

Determinism: every output tuple is sorted; duplicate pods or targets resolve to the entry that
sorts first, so the result does not depend on the order of the inputs. Nothing raises.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

from llmscaler.analyze.validity import replica_problems
from llmscaler.collect.readings import ModelReading, PodReading, Reading, SourceError, label_value
from llmscaler.domain.snapshot import PoolMetrics, ReplicaMetrics, Variant

VARIANT_SERIES_LABEL = 'llm_d_ai_variant'
VARIANT_POD_LABEL = 'llm-d.ai/variant'
LWS_WORKER_INDEX_LABEL = 'leaderworkerset.sigs.k8s.io/worker-index'

_T = TypeVar('_T')

_MISSING = {'kv_usage': 'kv-missing', 'queue_length': 'queue-missing'}


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

    `unattributed` and `partial` hold (namespace, pod, reason); `partial` lists attributed pods
    with a missing or broken figure (the core holds their model; this list is for logs and
    tests); `silent` holds (namespace, pod, variant) of ready pods with no attributed reading.
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
    groups: dict[tuple[str, str], list[Variant]] = {}
    for variant in variants:
        groups.setdefault((variant.namespace, variant.name), []).append(variant)
    # Of two variants with one name, the least repr: the choice does not depend on input order
    # (computed for duplicates only: a repr per variant was most of the cost of a large fleet).
    return {
        key: group[0] if len(group) == 1 else min(group, key=repr)
        for key, group in sorted(groups.items())
    }


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
        kv_usage=reading.kv_usage,
        queue_length=reading.queue_length,
        num_gpu_blocks=_positive_int(reading.num_gpu_blocks),
        block_size=_positive_int(reading.block_size),
        avg_input_tokens=reading.avg_input_tokens,
        avg_output_tokens=reading.avg_output_tokens,
        prefix_cache_hit_rate=reading.prefix_cache_hit_rate,
        arrival_rate=reading.arrival_rate,
        avg_ttft=reading.avg_ttft,
        avg_itl=reading.avg_itl,
        running_requests=reading.running_requests,
        ttft_histogram=reading.ttft_histogram,
        tpot_histogram=reading.tpot_histogram,
    )


def _pool(reading: ModelReading) -> PoolMetrics:
    return PoolMetrics(
        model_id=reading.model_id,
        namespace=reading.namespace,
        observed_at=reading.observed_at,
        queue_size=reading.queue_size,
        queue_bytes=reading.queue_bytes,
        request_count=reading.request_count,
        arrival_rate=reading.arrival_rate,
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


def _pod_variants(
    *,
    pod_index: dict[tuple[str, str], PodInfo],
    targets: dict[tuple[str, str, str], str],
    variants: dict[tuple[str, str], Variant],
) -> list[tuple[str, str, str, bool]]:
    found = []
    for key in sorted(pod_index):
        info = pod_index[key]
        variant, _ = _resolve(series_variant=None, pod=info, targets=targets, variants=variants)
        if variant is not None:
            found.append((*key, variant.name, info.ready))
    return found


def pod_variants(
    *, pods: Sequence[PodInfo], variants: Sequence[Variant], targets: Sequence[TargetRef]
) -> tuple[tuple[str, str, str], ...]:
    """(namespace, pod, variant) of every pod its labels or owners give to a variant, ready or
    not (LWS workers excluded), sorted: the pods whose pages are worth reading. `attribute` uses
    the same rules, then keeps only the readings of ready pods."""
    found = _pod_variants(
        pod_index=_first_by_key(pods),
        targets=_target_index(targets),
        variants=_variant_index(variants),
    )
    return tuple((namespace, name, variant) for namespace, name, variant, _ in found)


def with_ready_pods(
    *, variants: Sequence[Variant], pods: Sequence[PodInfo], targets: Sequence[TargetRef]
) -> tuple[Variant, ...]:
    """`variants` with `ready_replicas` raised to the ready pods attribution gives each one.

    The scale target's `status.readyReplicas` lags the pods by a moment; while it does, a ready
    pod whose page failed could go uncounted and a newly ready pod's report would cover for it.
    Counting the ready pods too closes that gap: the core's rule "every ready replica reports"
    then holds for every ready pod seen. The count is only ever raised, so it can only make the
    core hold, never scale down. For an LWS only the leader pod counts (a group is one replica).
    """
    ready: dict[tuple[str, str], int] = {}
    found = _pod_variants(
        pod_index=_first_by_key(pods),
        targets=_target_index(targets),
        variants=_variant_index(variants),
    )
    for namespace, _, variant, is_ready in found:
        if is_ready:
            ready[(namespace, variant)] = ready.get((namespace, variant), 0) + 1
    return tuple(
        v
        if ready.get((v.namespace, v.name), 0) <= v.ready_replicas
        else replace(v, ready_replicas=ready[(v.namespace, v.name)])
        for v in variants
    )


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
        if not info.ready:
            # Its figures are no ready replica's report: counted, they would stand in for a
            # ready pod whose page failed, and be counted twice beside the pending replicas.
            unattributed.append((*where, 'not-ready'))
            continue
        replica = _replica(reading=pod_reading, variant=variant)
        problems = replica_problems(replica)
        labels = {_MISSING.get(p.metric, 'invalid') if p.missing else 'invalid' for p in problems}
        partial.extend((*where, label) for label in sorted(labels))
        replicas.append(replica)
        attributed.add(where)

    silent = [
        (namespace, name, variant)
        for namespace, name, variant, ready in _pod_variants(
            pod_index=pod_index, targets=target_index, variants=variant_index
        )
        if ready and (namespace, name) not in attributed
    ]

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
