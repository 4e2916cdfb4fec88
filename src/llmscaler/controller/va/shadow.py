"""Shadow mode (`llmscaler run --shadow`): each cycle's decisions set beside what runs, written
nowhere.

Why: before llmscaler replaces another autoscaler (llm-d's workload-variant-autoscaler, an HPA),
its operator wants to see, on the live cluster and for days, what llmscaler would have done:
cycle by cycle, against the replica count that runs and against the other autoscaler's own
decision where it publishes one (`wva_desired_replicas`, `collect.prometheus.peer`). The main
cycle decides as usual; this module turns its decisions into the rows `ControllerMetrics.set_shadow`
publishes and logs a variant's comparison when it changes.

What: `shadow_rows` pairs every decision with the peer's count for its variant (None when the
peer publishes none or could not be read). `ShadowLog.compare` logs one INFO line per variant
whose (llmscaler's count, running count, peer's count) differs from the previous cycle's, so a
steady cluster logs nothing and each disagreement is logged when it starts and when it ends.

What fails: nothing raises; variants gone from the decisions are forgotten without a line.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence

from llmscaler.collect.prometheus.peer import PeerReading
from llmscaler.controller.publish import ShadowRow, replica_rows
from llmscaler.domain.snapshot import Decision

log = logging.getLogger('llmscaler.controller.va.cycle')


def shadow_rows(*, decisions: Iterable[Decision], peer: PeerReading) -> list[ShadowRow]:
    """One row per decision, in key order, with the peer's count for its variant."""
    return [
        ShadowRow(replicas=row, peer=peer.of(namespace=row.namespace, variant=row.variant))
        for row in replica_rows(decisions=decisions)
    ]


class ShadowLog:
    """The comparisons that changed since the previous cycle, logged (see the module docstring)."""

    def __init__(self) -> None:
        self._seen: dict[tuple[str, str], tuple[int, int, int | None]] = {}

    def compare(self, *, rows: Sequence[ShadowRow], reasons: Mapping[str, str]) -> None:
        """Log each row whose counts changed; `reasons` holds each decision's reason by key."""
        seen: dict[tuple[str, str], tuple[int, int, int | None]] = {}
        for row in rows:
            ours = row.replicas
            key = (ours.namespace, ours.variant)
            counts = (ours.desired, ours.current, row.peer)
            seen[key] = counts
            if self._seen.get(key) == counts:
                continue
            peer = 'none published' if row.peer is None else str(row.peer)
            reason = reasons.get(f'{ours.namespace}/{ours.variant}', '')
            log.info(
                'shadow %s/%s: llmscaler %d, running %d, peer %s (%s)',
                ours.namespace,
                ours.variant,
                ours.desired,
                ours.current,
                peer,
                reason,
                extra={
                    'variant': ours.variant,
                    'namespace': ours.namespace,
                    'replicas': ours.desired,
                },
            )
        self._seen = seen
