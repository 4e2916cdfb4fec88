"""Kaito's cron scaler: replicas set by the clock.

Source: Kaito's LLMAutoScaler proposal (kaito-project/kaito,
docs/proposals/20250602-auto-scaler-for-inference-workloads.md, "Cron Scaler Pseudocode").

Why: a workload with a predictable daily shape is better served by capacity that is there before
the morning ramp than by a reactive scaler that starts pods once requests queue. Each policy names
a schedule (a cron expression in an IANA time zone, `config.cron`) and a target replica count.

`calculate_desired_replicas_cron` follows the proposal's pseudocode step by step:

1. every policy whose schedule fires in the current minute (its last activation is within the
   minute, in its own zone) contributes its `target_replicas`;
2. no policy matches: the current replica count, unchanged (the scaler only acts at the
   scheduled minutes; between them the count is whatever the last action, or anyone else, left);
3. several match: the highest target, "to ensure capacity for the highest-demand schedule";
4. clamped to [min_replicas, max_replicas].

Deliberate difference: the proposal's pseudocode falls back to UTC for a zone it cannot load and
silently skips an expression it cannot parse. Here both are refused when the policy is built
(`CronRule` holds a parsed `Schedule`, so a bad policy cannot reach this function): a schedule that
silently runs at another hour than the user wrote is worse than an error on the object.

Daylight-saving transitions: as `config.cron` documents (a skipped wall time does not fire that
day; a repeated one fires at both occurrences).

Pure: `now` (Unix seconds) is an argument; nothing here reads a clock. Ties (equal targets) do not
matter, the result is a number; `matching` lists the names of the matching policies sorted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from llmscaler.config.cron import Schedule


@dataclass(frozen=True, slots=True)
class CronRule:
    """One cron policy of an LLMAutoScaler: at the minutes `schedule` fires, `target_replicas`
    replicas."""

    name: str
    schedule: Schedule
    target_replicas: int


@dataclass(frozen=True, slots=True)
class CronResult:
    """The desired count and the policies that produced it (empty: none matched, held)."""

    desired: int
    matching: tuple[str, ...]


def calculate_desired_replicas_cron(
    *,
    current_replicas: int,
    policies: Sequence[CronRule],
    min_replicas: int,
    max_replicas: int,
    now: float,
) -> CronResult:
    """The cron scaler's desired replicas at `now` (see the module docstring)."""
    matching = [p for p in policies if p.schedule.fires(now=now)]
    if not matching:
        return CronResult(desired=current_replicas, matching=())
    desired = max(p.target_replicas for p in matching)
    desired = max(desired, min_replicas)
    desired = min(desired, max_replicas)
    return CronResult(desired=desired, matching=tuple(sorted(p.name for p in matching)))
