"""WVA's token-based saturation analyzer (V2) as `llmscaler tune` searches it: its thresholds.

Why: a user who runs WVA's token mode (`saturation-token`, `policies.wva.token`) tunes it on
their trace like the percentage mode: how close to its token capacity a model may run before
capacity is added, how far below it before capacity is removed, and how full a replica's KV
cache may get before its memory bounds what it is counted for. This is the `space.PolicySpace`
of the `wva-saturation-scaling-config` keys that mode reads (ranges: `config.configmaps`):

- `scaleUpThreshold`, the utilisation of the anticipated supply above which capacity is
  required (`policies.wva.thresholds`): `UP_THRESHOLDS`;
- `scaleDownBoundary`, the utilisation below which supply is spare: `DOWN_BOUNDARIES`; the pair
  is the mode's hysteresis band, so a choice whose boundary is not below its threshold is left
  out (the ConfigMap refuses it: the band would be empty and the model would flap);
- `kvCacheThreshold`, the KV-cache usage the memory-bound capacity of a replica is counted
  at (`analyze.saturation.tokens`): `KV_THRESHOLDS` (the percentage mode's values).

`queueLengthThreshold` is left as it is: in this mode it is the queue at which a replica's
tokens in use are taken for its compute-bound capacity (k2 observed), a rule of measurement, not
a margin.

The ConfigMap is `wva-saturation-scaling-config` with one per-model entry holding the keys of
the percentage mode's entry (`tune.saturation.entry`: the selection `analyzerName: saturation`
comes with the resolved settings) and the two thresholds, so that the controller resolves
exactly the `SaturationConfig` the simulations ran and selects this mode for the model only.

What fails: `choices` raises `ValueError` for a goal outside (0.5, 1), as the other spaces do.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from llmscaler.config.configmaps import SATURATION_CONFIGMAP
from llmscaler.config.resolved import ModelConfig, SaturationConfig
from llmscaler.policies.wva.token import NAME
from llmscaler.sim.tune import saturation

UP_THRESHOLDS = (0.75, 0.85, 0.95)
"""`scaleUpThreshold` values; 0.85 is the default."""
DOWN_BOUNDARIES = (0.5, 0.7, 0.8)
"""`scaleDownBoundary` values; 0.70 is the default."""


@dataclass(frozen=True, slots=True)
class TokenSettings:
    """One choice: None fields keep the recommended value."""

    up: float | None = None
    """`scaleUpThreshold`; None: the default's."""
    down: float | None = None
    """`scaleDownBoundary`; None: the default's."""
    kv: float | None = None
    """`kvCacheThreshold`; None: the default's."""

    @property
    def text(self) -> str:
        if self.up is None and self.down is None and self.kv is None:
            return ''
        up = 'default' if self.up is None else f'{self.up:g}'
        down = 'default' if self.down is None else f'{self.down:g}'
        kv = 'default' if self.kv is None else f'{self.kv:g}'
        return f'up {up}, down {down}, kv {kv}'


def over(*, settings: TokenSettings, base: SaturationConfig) -> SaturationConfig:
    """`base` with `settings`, as a per-model entry of `wva-saturation-scaling-config` sets
    them."""
    return replace(
        base,
        scale_up_threshold=base.scale_up_threshold if settings.up is None else settings.up,
        scale_down_boundary=base.scale_down_boundary if settings.down is None else settings.down,
        kv_cache_threshold=base.kv_cache_threshold if settings.kv is None else settings.kv,
    )


@dataclass(frozen=True, slots=True)
class TokenSpace:
    """The token-based saturation analyzer's `PolicySpace` (module docstring)."""

    up: tuple[float, ...] = UP_THRESHOLDS
    down: tuple[float, ...] = DOWN_BOUNDARIES
    kv: tuple[float, ...] = saturation.KV_THRESHOLDS
    policy: str = NAME
    configmap_name: str = SATURATION_CONFIGMAP

    def recommended(self) -> TokenSettings:
        return TokenSettings()

    def choices(self, *, goal: float, base: ModelConfig) -> list[TokenSettings]:
        if not 0.5 < goal < 1.0:
            raise ValueError(f'the attainment goal must be in (0.5, 1), got {goal}')
        return [
            TokenSettings(up=up, down=down, kv=kv)
            for up in self.up
            for down in self.down
            for kv in self.kv
            if down < up
        ]

    def resolve(self, *, settings: TokenSettings, base: ModelConfig) -> ModelConfig:
        return replace(base, saturation=over(settings=settings, base=base.saturation))

    def entry(self, *, config: ModelConfig, model_id: str, namespace: str) -> dict[str, Any]:
        return {
            **saturation.entry(settings=config.saturation, model_id=model_id, namespace=namespace),
            'scaleUpThreshold': config.saturation.scale_up_threshold,
            'scaleDownBoundary': config.saturation.scale_down_boundary,
        }
