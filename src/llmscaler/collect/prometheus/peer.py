"""Another autoscaler's desired replicas, read from Prometheus for `llmscaler run --shadow`.

Why: a user replacing llm-d's workload-variant-autoscaler runs llmscaler in shadow mode beside it
first, and wants each cycle's decision compared with the one the other controller made. WVA
publishes its decision as the gauge `wva_desired_replicas{variant_name, namespace,
accelerator_type}` (internal/constants/metrics.go and internal/metrics/metrics.go, v0.5.1); a
shadow llmscaler publishes no `wva_*` gauge of its own, so every such series in Prometheus is
the other autoscaler's.

What: `PeerDesired.read` runs one instant query through the Prometheus source (its credentials,
deadlines and size cap), `max by (namespace, exported_namespace, variant_name)
(wva_desired_replicas)`, and returns the desired count per (namespace, variant). The variant's
namespace is the series' `exported_namespace` when the scrape renamed it (a scrape that adds its
target's namespace, as the Prometheus Operator's ServiceMonitors do), else its `namespace`.

What fails: nothing raises. A failed query is a `PeerReading` with no counts and the error
(`SourceError`, target `peer_desired_replicas`); a series without a variant name or namespace, or
whose value is NaN, ±Inf, negative or not a whole number, is left out and counted in `dropped`
(the comparison then has nothing for that variant, never a guess). An empty answer means no
other autoscaler publishes: no counts, no error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from llmscaler.collect.prometheus.queries import Query
from llmscaler.collect.prometheus.source import PrometheusSource
from llmscaler.collect.readings import SourceError

PEER_QUERY: Final = Query(
    name='peer_desired_replicas',
    promql='max by (namespace, exported_namespace, variant_name) (wva_desired_replicas)',
    kind='peer',
    family='peer_desired_replicas',
    models=(),
)


@dataclass(frozen=True, slots=True)
class PeerReading:
    """Another autoscaler's desired replicas by (namespace, variant), or why there are none."""

    desired: tuple[tuple[tuple[str, str], int], ...] = ()
    """((namespace, variant), count) pairs, sorted."""
    error: SourceError | None = None
    dropped: int = 0
    """Series left out: no variant or namespace label, or a value that is not a count."""

    def of(self, *, namespace: str, variant: str) -> int | None:
        """The published count of one variant; None when there is none."""
        return dict(self.desired).get((namespace, variant))


class PeerDesired:
    """Reads `wva_desired_replicas` through `source` (see the module docstring)."""

    def __init__(self, *, source: PrometheusSource) -> None:
        self._source = source

    async def read(self, *, now: float) -> PeerReading:
        outcome = await self._source.instant(query=PEER_QUERY, now=now)
        if outcome.series is None:
            return PeerReading(error=outcome.error)
        found: dict[tuple[str, str], int] = {}
        dropped = 0
        for labels, _, value in outcome.series:
            namespace = labels.get('exported_namespace') or labels.get('namespace', '')
            variant = labels.get('variant_name', '')
            if not namespace or not variant or value is None or value < 0 or value % 1:
                dropped += 1
                continue
            # `max by` leaves one series per key; two keys that differ only in which namespace
            # label held the name keep the larger count.
            key = (namespace, variant)
            found[key] = max(found.get(key, 0), int(value))
        return PeerReading(
            desired=tuple(sorted(found.items())), error=outcome.error, dropped=dropped
        )
