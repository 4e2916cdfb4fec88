"""WVA's token-based saturation policy (V2): capacities in tokens, the ballot, the cost-aware
optimizer.

Why: llm-d's Workload Variant Autoscaler sizes on token capacities when asked to
(`analyzerName: saturation`, or an `analyzers:` list; v0.9.0,
internal/engines/analyzers/saturation_v2/): each replica's capacity (the smaller of its KV-cache
and compute bounds) against the tokens the model holds and queues
(`analyze.saturation.tokens`), then the universal threshold post-step, the ballot and the
cost-aware optimizer turn required and spare capacity into targets (`policies.wva.pipeline`).
A replica whose capacity cannot be known (no KV-cache size and no stored capacity) is left out
of supply and demand alike and reported as not reporting, so it holds the model.

Its memory is common (`policies.protocol.Memory`): the k2 history and the capacity knowledge are
shared across namespaces of one model ID, and the ballot's liveness time is kept per model and
analyzer.

What fails: nothing raises for inputs within the snapshot's declared ranges.
"""

from __future__ import annotations

from typing import Final

from llmscaler.analyze.saturation import tokens
from llmscaler.analyze.validity import Problem
from llmscaler.config.resolved import ModelConfig, SaturationConfig
from llmscaler.policies.protocol import Context, Intent, Proposal, Writes
from llmscaler.policies.wva.pipeline import token_targets

NAME: Final = 'saturation-token'

UNSIZED: Final = Problem(
    metric='num_gpu_blocks',
    what='missing (no cache_config_info and no stored capacity for the variant)',
    missing=True,
)


class SaturationToken:
    """The policy object the registry lists (see the module docstring)."""

    name: Final = NAME
    state_type: Final = None

    def selects(self, config: ModelConfig) -> bool:
        return config.saturation.analyzer_path == NAME

    def fast_path(self, config: ModelConfig) -> bool:
        return False  # WVA decides at its cycle only

    def configure(self, *, intent: Intent) -> ModelConfig:
        """`analyzerName: saturation`; the token analyzer sizes for no SLO."""
        return ModelConfig(saturation=SaturationConfig(analyzer_name='saturation'))

    def decide(self, *, context: Context, state: None) -> tuple[Proposal, None]:
        variants = context.variants
        model_id = variants[0].model_id
        memory = context.memory
        analysis = tokens.analyze(
            model_id=model_id,
            namespace=variants[0].namespace,
            variants=variants,
            replicas=context.observed.fresh,
            pool=context.observed.pool,
            config=context.model_config.saturation,
            settings=context.settings,
            history=memory.history,
            knowledge=memory.knowledge,
            now=context.now,
        )
        writes = Writes(
            history=dict(analysis.history_updates), knowledge=dict(analysis.knowledge_updates)
        )
        # An instance the analyzer could not size is left out of supply and demand alike: it
        # is not reporting, as a replica without KV usage is.
        unsized: dict[str, list[tuple[str, Problem]]] = {}
        for replica in analysis.unsized:
            unsized.setdefault(replica.variant, []).append((replica.pod, UNSIZED))
        live_key = f'{context.group}|{analysis.result.analyzer}'
        path = token_targets(
            result=analysis.result,
            variants=variants,
            model_config=context.model_config,
            last_informative=memory.last_informative.get(live_key),
            interval=context.settings.interval,
            desired=context.desired,
            now=context.now,
        )
        if path.informative_at is not None:
            writes.last_informative[live_key] = path.informative_at
        proposal = Proposal(
            targets=path.targets,
            figures=path.figures,
            analyzer=NAME,
            unsized=unsized,
            writes=writes,
        )
        return proposal, None


POLICY: Final = SaturationToken()
