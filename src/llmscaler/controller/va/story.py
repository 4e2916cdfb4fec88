"""What the main cycle logs between scales: holds, metric source errors and invalid VAs, each
when it starts, changes or ends, never again every cycle while it lasts.

Why: a controller that holds a variant for an hour on a broken pod should say so once, with the
reason, and say when it stops; repeating the line every 30 s buries the scales and the new
problems in the log. The main cycle hands each cycle's facts to one `Story`, which compares them
with the previous cycle's and logs the differences (`llmscaler.controller.va.cycle` logger, with the
variant, namespace or target as extra fields for `--log-format json`).

- A hold is a decision that keeps the current count because it could not decide safely: metrics
  missing, invalid or stale (`MetricsAvailable=False`) or an analyzer holding. Its key is the
  metrics reason and the decision's reason; a change of either is logged (INFO), and so is its end.
- A metric source error is keyed by its target (query or URL) and reason: a new one is a WARNING,
  one that cleared an INFO. At most `limit` of each are logged per cycle, then how many more.
- An invalid VA is logged (WARNING) when it becomes invalid or its message changes.

What fails: nothing raises; variants that disappear are forgotten without a line.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence

from llmscaler.collect.readings import SourceError
from llmscaler.domain.snapshot import Decision

log = logging.getLogger('llmscaler.controller.va.cycle')


def hold_of(decision: Decision) -> tuple[str, str] | None:
    """(metrics reason, reason) of a decision that holds, None for any other."""
    if decision.target != decision.current:
        return None
    if decision.metrics_available and 'hold' not in decision.reason:
        return None
    return decision.metrics_reason, decision.reason


class Story:
    """The differences between cycles, logged (see the module docstring)."""

    def __init__(self, *, limit: int = 10) -> None:
        self._limit = limit
        self._holds: dict[str, tuple[str, str]] = {}
        self._errors: dict[tuple[str, str], str] = {}
        self._invalid: dict[str, str] = {}

    def decisions(self, decisions: Iterable[Decision]) -> None:
        """Log the holds that started, changed or ended."""
        holds: dict[str, tuple[str, str]] = {}
        for decision in sorted(decisions, key=lambda d: d.key):
            hold = hold_of(decision)
            before = self._holds.get(decision.key)
            extra: dict[str, object] = {
                'variant': decision.variant,
                'namespace': decision.namespace,
            }
            if hold is None:
                if before is not None:
                    log.info('%s: no longer holding (%s)', decision.key, decision.reason,
                             extra=extra)  # fmt: skip
                continue
            holds[decision.key] = hold
            if hold != before:
                why = decision.reason
                if not decision.metrics_available:
                    why = f'{decision.metrics_reason}: {decision.message or decision.reason}'
                extra.update(reason=hold[0], replicas=decision.current)
                log.info('holding %s at %d replicas: %s', decision.key, decision.current, why,
                         extra=extra)  # fmt: skip
        self._holds = holds

    def source_errors(self, errors: Sequence[SourceError]) -> None:
        """Log the metric source errors that appeared and those that cleared."""
        now = {(e.target, e.reason.value): e.message for e in errors}
        new = sorted(key for key in now if key not in self._errors)
        gone = sorted(key for key in self._errors if key not in now)
        for target, reason in new[: self._limit]:
            log.warning('metrics: %s: %s: %s', target, reason, now[(target, reason)],
                        extra={'target': target, 'reason': reason})  # fmt: skip
        if len(new) > self._limit:
            log.warning('metrics: %d more sources failing', len(new) - self._limit)
        for target, reason in gone[: self._limit]:
            log.info('metrics: %s readable again (was %s)', target, reason,
                     extra={'target': target, 'reason': reason})  # fmt: skip
        if len(gone) > self._limit:
            log.info('metrics: %d more sources readable again', len(gone) - self._limit)
        self._errors = now

    def invalid(self, invalid: Iterable[tuple[str, str]]) -> None:
        """Log the VAs (key, message) that became invalid or whose problem changed."""
        now = dict(invalid)
        for key in sorted(now):
            if self._invalid.get(key) != now[key]:
                log.warning('VariantAutoscaling %s is invalid: %s', key, now[key],
                            extra={'variant': key})  # fmt: skip
        self._invalid = now
