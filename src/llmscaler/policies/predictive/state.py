"""What the predictive policy keeps of one model between cycles.

Why: the forecast needs the model's recent arrival rates and what was sized for then, the
period the load repeats with needs a longer, coarser history of them, the
capacity each variant is counted for carries what its latencies taught (`VariantLearning`), and
a model coming back from a lull has no token mix in its replicas' windows but the one it last
showed; all belong to this policy alone, so they are its own state per model (`State.policies`), not
fields of the common memory.

`from_legacy` reads the two fields a state file had before policies kept their own state
(`forecast`, per model group, and `learning`, per variant key): a variant's learning goes to
every model of its namespace that has samples, and each model keeps only its own variants'
entries at its next decision.

What fails: nothing raises; construction does not validate (the JSON face does, strictly).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from llmscaler.analyze.learning.rate_forecast import RateSample
from llmscaler.analyze.learning.recurring import EMPTY, History
from llmscaler.analyze.slo.capacity import VariantLearning
from llmscaler.domain.basics import STRICT_KEYS


@dataclass(frozen=True, slots=True)
class PredictiveState:
    """One model's memory under the predictive policy."""

    __pydantic_config__ = STRICT_KEYS

    samples: tuple[RateSample, ...] = ()
    """The recent cycles' arrival rates and needs, oldest first, kept for `historySeconds`."""
    learning: tuple[tuple[str, VariantLearning], ...] = ()
    """Per variant key (`namespace/name`), sorted: what its latencies taught."""
    mix: tuple[float, float] | None = None
    """The token mix (input, output tokens per request) the model last showed: what a burst
    after a lull is sized on before a replica has finished one of its requests."""
    recurring: History = EMPTY
    """The arrival rates in buckets, for the period the load repeats with (bounded:
    `analyze.learning.recurring.MAX_BUCKETS`); empty while `periodic` is off."""


def from_legacy(
    *,
    forecast: Sequence[tuple[str, Sequence[RateSample]]],
    learning: Sequence[tuple[str, VariantLearning]],
) -> tuple[tuple[str, PredictiveState], ...]:
    """The states of a state file's `forecast` and `learning` fields, by group, sorted."""
    states = []
    for group, samples in sorted(forecast, key=lambda item: item[0]):
        namespace = group.rsplit('|', 1)[-1]
        mine = tuple(
            (key, known)
            for key, known in sorted(learning, key=lambda item: item[0])
            if key.split('/', 1)[0] == namespace
        )
        states.append((group, PredictiveState(samples=tuple(samples), learning=mine)))
    return tuple(states)
