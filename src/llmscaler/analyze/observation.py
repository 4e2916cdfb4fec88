"""One model's metrics as judged before any analysis: validity, freshness, requests in flight.

Why: the first stage of `engine.decide()` for each model (docs/decision-core.md: its stages and its
safety rules) decides which replicas may be analysed and whether the model's metrics are complete
enough to let it scale down or to zero. It only compares and adds, so it cannot fail, and what it
finds stands when an analysis fails: the engine still says what it knows of the metrics.

What it computes (`observe`), per model:

- each replica's figures against the declared ranges (`analyze.validity`); a replica with a
  missing or broken figure (or a non-finite `observed_at`) is *not reporting*: its problems are
  listed under its variant and it is not analysed; a broken pool figure is listed under every
  variant of the model;
- each usable replica's age class against `now` (`freshness`): fresh (< 60 s), stale, unavailable
  (< 300 s), or dropped; only fresh ones are analysed (`Observation.fresh`), and one older than
  the unavailable threshold is dropped whatever its figures;
- `in_flight`: the requests the model holds now — the gateway queue (at least one when it holds
  bytes) plus the waiting and running requests of every usable replica that is not dropped.
  The request count over the retention period only counts completed requests, so scale-to-zero
  needs this figure as well.

`Observation.status` turns a variant's classes and problems into what the `MetricsAvailable`
condition says (`validity.metrics_status`). Replicas are visited in pod order; nothing depends on
input order.

What fails: nothing raises. An integer `observed_at` too large for a float, or a time that is not
finite, is never fresh.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from llmscaler.analyze import finite_sums, validity
from llmscaler.analyze.validity import MetricsStatus, Problem, metrics_status
from llmscaler.config.resolved import CoreSettings
from llmscaler.domain.basics import Freshness
from llmscaler.domain.snapshot import PoolMetrics, ReplicaMetrics, Variant


def freshness(*, observed_at: float, now: float, settings: CoreSettings) -> Freshness | None:
    """Age class of a sample; None when older than the unavailable threshold (dropped), or when
    either time is not a finite number (a NaN age must never read as fresh).

    A sample from the future (clock skew between scraper and caller) counts as fresh.
    """
    return _age_class(
        observed_at,
        now,
        (settings.fresh_threshold, settings.stale_threshold, settings.unavailable_threshold),
    )


def _age_class(
    observed_at: float, now: float, thresholds: tuple[float, float, float]
) -> Freshness | None:
    # Positional, with the thresholds read once per model: it runs once per replica.
    try:
        age = now - observed_at
    except OverflowError:  # an integer time too large for a float
        return None
    if not math.isfinite(age):
        return None
    age = max(0.0, age)
    fresh, stale, unavailable = thresholds
    if age < fresh:
        return Freshness.FRESH
    if age < stale:
        return Freshness.STALE
    if age < unavailable:
        return Freshness.UNAVAILABLE
    return None


@dataclass(frozen=True, slots=True)
class Observation:
    """One model's metrics as judged before any analysis.

    `classes` and `problems` are by variant name (a pool problem is listed under every variant);
    `fresh` holds the replicas to analyse; `in_flight` the requests the model holds now.
    """

    pool: PoolMetrics | None
    fresh: tuple[ReplicaMetrics, ...]
    classes: Mapping[str, Sequence[Freshness | None]]
    problems: Mapping[str, Sequence[tuple[str, Problem]]]
    in_flight: float

    def status(self, variant: Variant, extra: Sequence[tuple[str, Problem]] = ()) -> MetricsStatus:
        """The variant's `MetricsAvailable` judgement, with `extra` problems found later (the
        token analyzer's replicas it could not size)."""
        return metrics_status(
            variant=variant,
            classes=self.classes.get(variant.name, ()),
            problems=[*self.problems.get(variant.name, ()), *extra],
        )


def observe(
    *,
    variants: Sequence[Variant],
    replicas_by_variant: Mapping[tuple[str, str], Sequence[ReplicaMetrics]],
    pool: PoolMetrics | None,
    settings: CoreSettings,
    now: float,
) -> Observation:
    """Judge the metrics of one model's variants (`replicas_by_variant` is keyed by
    (namespace, variant name))."""
    fresh: list[ReplicaMetrics] = []
    reporting: list[ReplicaMetrics] = []
    classes: dict[str, list[Freshness | None]] = {}
    problems: dict[str, list[tuple[str, Problem]]] = {}
    pool_issues = (
        [(f'pool {pool.model_id}', p) for p in validity.pool_problems(pool)] if pool else []
    )
    for variant in variants:
        replicas = sorted(replicas_by_variant.get((variant.namespace, variant.name), ()), key=_POD)
        classes[variant.name], problems[variant.name] = _classify(
            replicas=replicas, now=now, settings=settings, fresh=fresh, reporting=reporting
        )
        problems[variant.name].extend(pool_issues)
    return Observation(
        pool=pool,
        fresh=tuple(fresh),
        classes=classes,
        problems=problems,
        in_flight=_in_flight(pool=pool, reporting=reporting),
    )


_POD = operator.attrgetter('pod')


def _in_flight(*, pool: PoolMetrics | None, reporting: Sequence[ReplicaMetrics]) -> float:
    figures: list[float] = []
    if pool is not None:
        # An unread queue adds nothing here: it is a missing pool figure, which holds the model.
        figures += [pool.queue_size or 0.0, 1.0 if (pool.queue_bytes or 0.0) > 0 else 0.0]
    # Exact sums: the order of the figures does not matter.
    figures += [f for f in map(_QUEUED, reporting) if f is not None]
    figures += [f for f in map(_RUNNING, reporting) if f is not None]
    return finite_sums.total(figures)


_QUEUED = operator.attrgetter('queue_length')
_RUNNING = operator.attrgetter('running_requests')


def _classify(
    *,
    replicas: Sequence[ReplicaMetrics],
    now: float,
    settings: CoreSettings,
    fresh: list[ReplicaMetrics],
    reporting: list[ReplicaMetrics],
) -> tuple[list[Freshness | None], list[tuple[str, Problem]]]:
    """Freshness classes of one variant's usable replicas, and the problems of the others.

    Fresh usable replicas are appended to `fresh`, usable ones of any age class to `reporting`.
    """
    found: list[Freshness | None] = []
    problems: list[tuple[str, Problem]] = []
    thresholds = (
        settings.fresh_threshold,
        settings.stale_threshold,
        settings.unavailable_threshold,
    )
    replica_problems = validity.replica_problems
    fresh_below = thresholds[0]
    for replica in replicas:
        wrong = replica_problems(replica)
        # The common case inline (a float time in the past, younger than the fresh
        # threshold): one comparison instead of a call per replica.
        observed = replica.observed_at
        if observed.__class__ is float and 0.0 <= now - observed < fresh_below:
            age: Freshness | None = Freshness.FRESH
        else:
            age = _age_class(observed, now, thresholds)
        if age is None and not any(p.metric == 'observed_at' for p in wrong):
            found.append(None)
            continue
        if wrong:
            problems.extend((replica.pod, p) for p in wrong)
            continue
        found.append(age)
        reporting.append(replica)
        if age is Freshness.FRESH:
            fresh.append(replica)
    return found, problems
