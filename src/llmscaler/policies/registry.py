"""The policies a model can be decided by, in the order they claim a model.

Why: the engine, the JSON face (which validates each policy's state) and the simulator (which
runs policies by name) must agree on which policies exist. A model is decided by the first
policy here whose `selects` accepts its configuration: `llmscaler-predictive-config`
(predictive) ahead of `wva-queueing-model-config` (WVA's SLO-queueing, model-only or hybrid),
then WVA's saturation analyzers, percentage-based (the default) or token-based, one of which
always selects. Adding a policy is one package of `policies/` and one line here.

What fails: `by_name` returns None for a name no policy has.
"""

from __future__ import annotations

from typing import Any, Final

from llmscaler.config.resolved import ModelConfig
from llmscaler.policies.predictive import policy as predictive
from llmscaler.policies.protocol import Policy
from llmscaler.policies.wva import percentage, slo_queueing, token

POLICIES: Final[tuple[Policy[Any], ...]] = (
    predictive.POLICY,
    slo_queueing.POLICY,
    percentage.POLICY,
    token.POLICY,
)


def select(config: ModelConfig) -> Policy[Any]:
    """The policy that decides a model with this configuration."""
    for policy in POLICIES:
        if policy.selects(config):
            return policy
    # The saturation analyzers between them accept every configuration.
    raise LookupError(f'no policy selects {config!r:.200}')


def by_name(name: str) -> Policy[Any] | None:
    """The policy called `name`, or None."""
    for policy in POLICIES:
        if policy.name == name:
            return policy
    return None


def names() -> tuple[str, ...]:
    """Every policy's name, in the registry's order."""
    return tuple(policy.name for policy in POLICIES)
