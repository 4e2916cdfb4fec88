"""Replica bounds: every target ends inside the variant's [minReplicas, maxReplicas].

Why: the bounds are a safety rule of every policy and mode (docs/decision-core.md, "Safety rules":
bounds always win). The optimizer respects `max_replicas` on the way up and `min_replicas` on the
way down, but a target can still land outside them (a variant already above a lowered maximum, a
scale-from-zero wake-up, a minimum-replicas grant on a variant whose maximum is 0). This is the last
word before actuation: `clamp` one number, `clamp_all` a model's targets.

Rules:
- A negative `min_replicas` counts as 0; a negative target counts as 0 before clamping.
- Inconsistent bounds (`max_replicas < min_replicas`, which Kubernetes itself rejects for an
  HPA) resolve to the minimum: the result is `min_replicas`. Keeping the floor errs on the side
  of serving traffic; the adapter reports the bad object, the core only needs a safe number.
- `clamp_all` returns one (name, target) pair per variant, sorted by name; a variant missing
  from `targets` is clamped from its `current_replicas`, names that are not variants are ignored.

Nothing raises; every input is an int by type, so NaN and Inf cannot reach here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from llmscaler.domain.snapshot import Variant


def clamp(*, target: int, min_replicas: int, max_replicas: int) -> int:
    """`target` limited to [min, max]; with max < min the result is min (see module docstring)."""
    low = max(0, min_replicas)
    high = max(low, max_replicas)
    return min(high, max(low, target))


def clamp_all(
    *, variants: Sequence[Variant], targets: Mapping[str, int]
) -> tuple[tuple[str, int], ...]:
    """Every variant's target clamped to its bounds, as (name, target) sorted by name."""
    return tuple(
        (
            variant.name,
            clamp(
                target=targets.get(variant.name, variant.current_replicas),
                min_replicas=variant.min_replicas,
                max_replicas=variant.max_replicas,
            ),
        )
        for variant in sorted(variants, key=lambda v: v.name)
    )
