"""WVA's percentage-based saturation policy (V1), the default: one replica more or fewer per cycle.

Why: llm-d's Workload Variant Autoscaler makes its percentage analyzer the default (v0.9.0,
internal/saturationv1/analyzer.go), and users coming from it expect its behaviour: when the
model's replicas cross the KV-cache or queue-length thresholds, one replica is added to the
cheapest variant; when scaling down is safe, one is removed from the dearest
(`analyze.saturation.percentage`). The analyzer decides the targets itself, so this policy adds
no optimizer and keeps no state.

Selected when the saturation ConfigMap entry neither names the token analyzer
(`analyzerName: saturation`) nor lists `analyzers:`: the configuration nobody wrote.

What fails: nothing raises for inputs within the snapshot's declared ranges.
"""

from __future__ import annotations

from typing import Final

from llmscaler.analyze.saturation import percentage
from llmscaler.config.resolved import ModelConfig
from llmscaler.policies.protocol import Context, Intent, Proposal

NAME: Final = 'saturation-percentage'


class SaturationPercentage:
    """The policy object the registry lists (see the module docstring)."""

    name: Final = NAME
    state_type: Final = None

    def selects(self, config: ModelConfig) -> bool:
        return config.saturation.analyzer_path == NAME

    def fast_path(self, config: ModelConfig) -> bool:
        return False  # WVA decides at its cycle only

    def configure(self, *, intent: Intent) -> ModelConfig:
        """The default configuration: the percentage analyzer sizes for no SLO."""
        return ModelConfig()

    def decide(self, *, context: Context, state: None) -> tuple[Proposal, None]:
        targets = percentage.decide_percentage(
            variants=context.variants,
            replicas=context.observed.fresh,
            config=context.model_config.saturation,
            desired=context.desired,
        )
        return Proposal(targets=targets, figures=(), analyzer=NAME), None


POLICY: Final = SaturationPercentage()
