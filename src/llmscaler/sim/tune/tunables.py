"""The policies `llmscaler tune` can tune, by the name `--tune-policy` takes.

Why: the command line, the benchmark and the tests name a tunable policy by its core name
(`policies.registry`: `predictive`, `saturation-percentage`, `saturation-token`), and each maps
to its search space; adding one is a `space.PolicySpace` and a line here. The predictive
policy is the default: it is the one the project recommends.

What fails: `by_name` returns None for a name that is no tunable policy.
"""

from __future__ import annotations

from typing import Any, Final

from llmscaler.sim.tune.predictive import PredictiveSpace
from llmscaler.sim.tune.saturation import SaturationSpace
from llmscaler.sim.tune.space import PolicySpace
from llmscaler.sim.tune.token import TokenSpace

SPACES: Final[tuple[PolicySpace[Any], ...]] = (
    PredictiveSpace(),
    SaturationSpace(),
    TokenSpace(),
)
NAMES: Final = tuple(space.policy for space in SPACES)
DEFAULT: Final = NAMES[0]


def by_name(name: str) -> PolicySpace[Any] | None:
    """The search space of the policy called `name`, or None."""
    for space in SPACES:
        if space.policy == name:
            return space
    return None
