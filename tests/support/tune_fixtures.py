"""Small tuning problems for tests/unit/sim/tune: real simulations of a few minutes of load.

- `tiny_document()`: one model on an H100 and an L40S (one replica each at the start), ten
  minutes of conversation traffic at 4 req/s, the `default` and `keda-queue` peers; a few
  seconds to tune with a budget of a handful of runs.
- `SMALL_PREDICTIVE`: two targets, two delays, one horizon; with the variant subsets and the
  floors and caps of `space.Space`, about fifty candidates.
- `SMALL_SATURATION`: two KV-cache thresholds, one queue threshold, two spare factors.
- `SMALL_TOKEN`: two scale-up thresholds, one scale-down boundary, one KV-cache threshold.
- `written_back(counted=, out=)`: a tuning's objects written to `out` and its ConfigMap read
  back through the controller's own loader, as the model's resolved configuration.
- `tiny_tune(jobs=, budget=, seeds=, warm_start=, policy=)`: the tuning of that scenario (the
  predictive policy's small space unless `policy` says otherwise), with the number of runs its
  sweep executed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llmscaler.config.file import load_config_file
from llmscaler.config.resolved import ModelConfig
from llmscaler.sim.scenario import loader
from llmscaler.sim.scenario.validated import Scenario
from llmscaler.sim.sweep.sweep import Sweep
from llmscaler.sim.tune.predictive import PredictiveSpace
from llmscaler.sim.tune.run import tune, write
from llmscaler.sim.tune.saturation import SaturationSpace
from llmscaler.sim.tune.space import PolicySpace
from llmscaler.sim.tune.token import TokenSpace
from llmscaler.sim.tune.tuned import Options, Tuned

SMALL_PREDICTIVE = PredictiveSpace(margins=(1.0, 0.5), delays=(120.0, 300.0), horizons=(1.0,))
SMALL_SATURATION = SaturationSpace(kv=(0.7, 0.9), queue=(5.0,), spare=(0.5, 2.0))
SMALL_TOKEN = TokenSpace(up=(0.75, 0.95), down=(0.7,), kv=(0.8,))


def tiny_document(
    *, duration: float = 600.0, rate: float = 4.0, warm_start: bool = False
) -> dict[str, Any]:
    return {
        'warm_start': warm_start,
        'name': 'tiny',
        'variants': [
            {'name': 'h100', 'preset': 'llama-3.1-8b-h100', 'max_replicas': 4},
            {'name': 'l40s', 'preset': 'llama-3.1-8b-l40s', 'max_replicas': 4},
        ],
        'workload': {'synthetic': {'preset': 'azure-conv', 'duration': duration, 'rate': rate}},
        'policies': ['default', 'keda-queue'],
        'seed': 1,
    }


def tiny_scenario(**overrides: Any) -> Scenario:
    return loader.from_document(document=tiny_document(**overrides), where='tiny')


@dataclass(frozen=True)
class Counted:
    """A tuning and what its sweep ran."""

    tuned: Tuned
    executed: int


def tiny_tune(
    *,
    jobs: int = 1,
    budget: int = 6,
    seeds: int = 2,
    warm_start: bool = False,
    policy: PolicySpace[Any] = SMALL_PREDICTIVE,
) -> Counted:
    options = Options(budget=budget, seeds=seeds, holdout=0.3, policy=policy)
    with Sweep(jobs=jobs, progress=False) as sweep:
        scenario = tiny_scenario(warm_start=warm_start)
        tuned = tune(scenario=scenario, options=options, sweep=sweep)
        return Counted(tuned=tuned, executed=sweep.executed)


def written_back(*, counted: Counted, out: Path) -> ModelConfig:
    """`counted`'s objects written to `out`, checked to be what the search ran (within its
    budget, every run its sweep's, the choice one of its trials), and its ConfigMap read back
    through the controller's own loader: the tuned model's configuration there."""
    tuned = counted.tuned
    assert tuned.outcome.runs <= tuned.options.budget
    assert counted.executed == tuned.simulations
    assert tuned.chosen in [t.candidate for t in tuned.outcome.trials]
    write(tuned=tuned, out=out)
    config, errors = load_config_file(path=str(out / 'configmap.yaml'))
    assert errors == ()
    return config.model(model_id=tuned.problem.model.model_id, namespace=tuned.problem.namespace)
