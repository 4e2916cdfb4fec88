"""WVA's percentage-based saturation analyzer as `llmscaler tune` searches it: its thresholds.

Why: a user who keeps WVA's default mode (`saturation-percentage`, `policies.wva.percentage`)
can still tune it on their trace: how full a replica may get before it counts as saturated, and
how much spare room the non-saturated ones must keep before a replica is added. This is the
`space.PolicySpace` of `wva-saturation-scaling-config`'s keys for that analyzer (ranges:
`config.configmaps`):

- `kvCacheThreshold`, the KV-cache usage at which a replica is saturated: `KV_THRESHOLDS`;
- `queueLengthThreshold`, the waiting requests at which it is: `QUEUE_THRESHOLDS`;
- `kvSpareTrigger` and `queueSpareTrigger` together, as a factor in `SPARE_FACTORS` on the
  recommended ones (WVA's defaults, 0.10 and 3): scale-up fires when the mean spare KV or spare
  queue of the non-saturated replicas falls below them, and scale-down needs both to stay above
  after one replica fewer, so the pair is the mode's hysteresis. A choice whose trigger exceeds its
  threshold is left out: the spare room (threshold − usage) could never reach it, and the model
  would grow every cycle.

Three values each, as the predictive space has, so that both grids are of a size.

The ConfigMap is `wva-saturation-scaling-config` in the model's namespace with one per-model
entry (a namespace-local map: it applies to that model only), holding the four keys and the
analyzer's selection (`analyzerName: ''` and `analyzers: []`, which override a `default` entry
choosing the token analyzer), so that the controller resolves exactly the `SaturationConfig` the
simulations ran (a test reads it back through `config.file.load_config_file`). The model runs
this mode only while no `llmscaler-predictive-config` or `wva-queueing-model-config` entry
applies to it (`policies.registry`): those take precedence.

What fails: `choices` raises `ValueError` for a goal outside (0.5, 1) (the goal does not move
these thresholds, but a goal no configuration could be judged by is refused as elsewhere).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from llmscaler.config.configmaps import SATURATION_CONFIGMAP
from llmscaler.config.resolved import ModelConfig, SaturationConfig
from llmscaler.policies.wva.percentage import NAME

KV_THRESHOLDS = (0.7, 0.8, 0.9)
"""`kvCacheThreshold` values; 0.80 is the default."""
QUEUE_THRESHOLDS = (3.0, 5.0, 10.0)
"""`queueLengthThreshold` values; 5 is the default."""
SPARE_FACTORS = (0.5, 1.0, 2.0)
"""Factors on the recommended `kvSpareTrigger` and `queueSpareTrigger`; 1 keeps them."""


@dataclass(frozen=True, slots=True)
class SaturationSettings:
    """One choice: None fields keep the recommended value."""

    kv: float | None = None
    """`kvCacheThreshold`; None: the default's."""
    queue: float | None = None
    """`queueLengthThreshold`; None: the default's."""
    spare: float = 1.0
    """Factor on the recommended spare triggers."""

    @property
    def text(self) -> str:
        if self.kv is None and self.queue is None and self.spare == 1.0:
            return ''
        kv = 'default' if self.kv is None else f'{self.kv:g}'
        queue = 'default' if self.queue is None else f'{self.queue:g}'
        return f'kv {kv}, queue {queue}, spare ×{self.spare:g}'


def over(*, settings: SaturationSettings, base: SaturationConfig) -> SaturationConfig:
    """`base` with `settings`, as a per-model entry of `wva-saturation-scaling-config` sets
    them."""
    return replace(
        base,
        kv_cache_threshold=base.kv_cache_threshold if settings.kv is None else settings.kv,
        queue_length_threshold=(
            base.queue_length_threshold if settings.queue is None else settings.queue
        ),
        kv_spare_trigger=base.kv_spare_trigger * settings.spare,
        queue_spare_trigger=base.queue_spare_trigger * settings.spare,
    )


def entry(*, settings: SaturationConfig, model_id: str, namespace: str) -> dict[str, Any]:
    """The per-model entry of `wva-saturation-scaling-config` that resolves to `settings`."""
    return {
        'model_id': model_id,
        'namespace': namespace,
        'analyzerName': settings.analyzer_name,
        'analyzers': [],
        'kvCacheThreshold': settings.kv_cache_threshold,
        'queueLengthThreshold': settings.queue_length_threshold,
        'kvSpareTrigger': settings.kv_spare_trigger,
        'queueSpareTrigger': settings.queue_spare_trigger,
    }


@dataclass(frozen=True, slots=True)
class SaturationSpace:
    """The percentage-based saturation analyzer's `PolicySpace` (module docstring)."""

    kv: tuple[float, ...] = KV_THRESHOLDS
    queue: tuple[float, ...] = QUEUE_THRESHOLDS
    spare: tuple[float, ...] = SPARE_FACTORS
    policy: str = NAME
    configmap_name: str = SATURATION_CONFIGMAP

    def recommended(self) -> SaturationSettings:
        return SaturationSettings()

    def choices(self, *, goal: float, base: ModelConfig) -> list[SaturationSettings]:
        if not 0.5 < goal < 1.0:
            raise ValueError(f'the attainment goal must be in (0.5, 1), got {goal}')
        found = []
        for kv in self.kv:
            for queue in self.queue:
                for spare in self.spare:
                    settings = SaturationSettings(kv=kv, queue=queue, spare=spare)
                    got = over(settings=settings, base=base.saturation)
                    if (
                        got.kv_spare_trigger <= got.kv_cache_threshold
                        and got.queue_spare_trigger <= got.queue_length_threshold
                    ):
                        found.append(settings)
        return found

    def resolve(self, *, settings: SaturationSettings, base: ModelConfig) -> ModelConfig:
        return replace(base, saturation=over(settings=settings, base=base.saturation))

    def entry(self, *, config: ModelConfig, model_id: str, namespace: str) -> dict[str, Any]:
        return entry(settings=config.saturation, model_id=model_id, namespace=namespace)
