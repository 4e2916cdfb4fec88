"""What the predictive analyzer may size on: replicas that report all it needs, and idle models.

Why: the predictive analyzer (`policies.predictive.policy`) holds a model whose inputs are missing —
a mean over the replicas that report would hide the one that misses its targets — but a model
that serves no request at all has no token mix to size on either, and holding it would keep
an idle fleet forever. The two are told apart here:

- `unreported`: the busy replicas (arrival rate > 0) lacking their TTFT, ITL or token counts,
  named (the model holds); `unreported_problems` lists them per variant as metric problems, so
  the variant's `MetricsAvailable` is False and names them as for any missing figure;
- `idle`: the model is known to receive nothing and to hold nothing: its arrival rate reads 0
  (the gateway's, or every replica's when there is no gateway rate), and no request waits or
  runs anywhere. Unknown is not idle: a missing rate, queue or running count is not 0;
- `idle_targets`: for an idle model, every variant at its minimum once the memory holds
  `scale_down_delay` seconds of history in which nothing was needed (the same delay as any
  scale-down, and no scale-down on a memory shorter than that), else the counts hold.

What fails: nothing raises. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from llmscaler.analyze.learning.rate_forecast import RateSample
from llmscaler.analyze.validity import Problem
from llmscaler.domain.signals import VariantTarget, held
from llmscaler.domain.snapshot import PoolMetrics, ReplicaMetrics, Variant

BUSY_FIGURES: Final = ('avg_ttft', 'avg_itl', 'avg_input_tokens', 'avg_output_tokens')
"""What every busy replica must report: a mean over the others would hide the one that misses."""


def unreported(replicas: Sequence[ReplicaMetrics]) -> str:
    """'missing avg_itl on pod-a, ...' for busy replicas lacking a figure; '' when none do."""
    gaps = [
        f'{"/".join(absent)} on {replica.pod}'
        for replica, absent in _gaps(sorted(replicas, key=lambda r: r.pod))
    ]
    if not gaps:
        return ''
    more = f' and {len(gaps) - 3} more' if len(gaps) > 3 else ''
    return f'missing {", ".join(gaps[:3])}{more} (a busy replica must report its latency)'


def unreported_problems(
    replicas: Sequence[ReplicaMetrics],
) -> dict[str, list[tuple[str, Problem]]]:
    """Per variant, (pod, problem) for each busy replica lacking a figure `unreported` names."""
    found: dict[str, list[tuple[str, Problem]]] = {}
    for replica, absent in _gaps(sorted(replicas, key=lambda r: (r.variant, r.pod))):
        problem = Problem(
            metric='/'.join(absent),
            what='missing (a busy replica must report its latency)',
            missing=True,
        )
        found.setdefault(replica.variant, []).append((replica.pod, problem))
    return found


def _gaps(replicas: Sequence[ReplicaMetrics]) -> list[tuple[ReplicaMetrics, list[str]]]:
    """The busy replicas lacking a figure of `BUSY_FIGURES`, with the figures they lack."""
    found = []
    for replica in replicas:
        if replica.arrival_rate is None or replica.arrival_rate <= 0:
            continue
        absent = [name for name in BUSY_FIGURES if getattr(replica, name) is None]
        if absent:
            found.append((replica, absent))
    return found


def idle(*, replicas: Sequence[ReplicaMetrics], pool: PoolMetrics | None) -> bool:
    """The model is known to receive and hold no request (module docstring)."""
    if pool is not None and (pool.queue_size is None or pool.queue_size > 0):
        return False
    if pool is not None and pool.arrival_rate is not None:
        arriving = pool.arrival_rate > 0
    else:
        rates = [r.arrival_rate for r in replicas]
        arriving = not rates or any(rate is None or rate > 0 for rate in rates)
    return not arriving and all(r.queue_length == 0 and r.running_requests == 0 for r in replicas)


def idle_targets(
    *,
    variants: Sequence[Variant],
    samples: Sequence[RateSample],
    desired: Mapping[str, int],
    scale_down_delay: float,
    now: float,
) -> tuple[VariantTarget, ...]:
    """An idle model's targets (module docstring); `samples` already include this cycle's."""
    settled = any(s.at <= now - scale_down_delay for s in samples)
    recent = [s.need for s in samples if s.at > now - scale_down_delay]
    if not settled or any(need > 0 for need in recent):
        return held(
            variants=variants,
            desired=desired,
            why=f'idle, for less than {scale_down_delay:.0f} s (no request arriving or held)',
        )
    return tuple(
        VariantTarget(
            variant=v.name,
            target=min(v.min_replicas, v.max_replicas),
            reason=f'idle for {scale_down_delay:.0f} s (no request arriving or held): '
            'every variant to its minimum',
        )
        for v in variants
    )
