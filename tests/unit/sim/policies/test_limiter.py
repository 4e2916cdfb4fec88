"""The simulator feeds its GPU inventory to the limiter: with one model a type limit binds."""

from __future__ import annotations

import numpy as np

from llmscaler.config.resolved import Config, ModelConfig, SaturationConfig
from llmscaler.sim.hardware.presets import preset
from llmscaler.sim.policies.core import CorePolicy
from llmscaler.sim.runner import SimSettings, run
from llmscaler.sim.vocabulary import ControlView, Trace


def overload(seconds: int) -> Trace:
    n = seconds * 40
    return Trace(
        name='overload',
        arrivals=np.arange(n, dtype=np.float64) / 40.0,
        input_tokens=np.full(n, 1500, dtype=np.int64),
        output_tokens=np.full(n, 300, dtype=np.int64),
    )


class Recording(CorePolicy):
    """The core's policy, remembering the replicas it asked for in all, cycle by cycle."""

    def __init__(self, *, name: str, config: Config) -> None:
        super().__init__(name=name, config=config)
        self.wanted: list[int] = []

    def targets(self, *, view: ControlView) -> dict[str, int]:
        targets = super().targets(view=view)
        self.wanted.append(sum(targets.values()))
        return targets


def simulate(*, limiter: bool) -> tuple[list[int], int]:
    variant = preset(
        name='llama-3.1-8b-h100',
        variant_name='h100',
        startup_delay=60.0,
        initial_replicas=1,
        max_replicas=8,
    )
    policy = Recording(
        name='limited' if limiter else 'unlimited',
        config=Config(default=ModelConfig(saturation=SaturationConfig(enable_limiter=limiter))),
    )
    result = run(
        trace=overload(600),
        variants=[variant],
        policy=policy,
        settings=SimSettings(),
        inventory={variant.accelerator: 3},
    )
    return policy.wanted, len(result.gpu_waits)


def test_the_scenarios_type_limit_binds_the_targets_of_one_model() -> None:
    unlimited, waits = simulate(limiter=False)
    # Without the limiter the model asks for more replicas than the 3 GPUs hold; they wait.
    assert max(unlimited) > 3
    assert waits > 0
    limited, waits = simulate(limiter=True)
    assert max(limited) == 3
    assert waits == 0
