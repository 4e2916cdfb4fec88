"""The predictive policy as `llmscaler tune` searches it: its settings, and the ConfigMap.

Why: the predictive policy's cost and attainment on a workload move with a few settings of
`llmscaler-predictive-config`; this is the `space.PolicySpace` that lists them and resolves a
choice into the `PredictiveConfig` the simulation runs and the ConfigMap says, one value for
both. The dimensions:

- the attainment target the policy sizes for (`attainmentTarget`, which sets `sloAttainment`,
  `forecastQuantile` and `latencyMargin` through `config.predictive.sizing_for`), as the user's
  goal with its error budget scaled by a margin factor: 1 − (1 − goal) × k, k in `MARGINS`
  (k > 1 spends more of the budget, k < 1 keeps a margin);
- the scale-down delay (`scaleDownDelaySeconds`, the policy's hysteresis);
- the forecast horizon, as a factor on the model's start-up time (`startupSeconds`, which the
  forecast looks ahead by, plus two cycles).

The ConfigMap is `llmscaler-predictive-config` in the model's namespace with one per-model
entry (a namespace-local map: it applies to that model only and, by its presence, puts it on
the predictive analyzer), every key written out, so that what the controller resolves is
exactly the `PredictiveConfig` the simulations ran (a test reads it back through
`config.file.load_config_file` and compares).

What fails: `margin_targets` raises `ValueError` for a goal outside (0.5, 1); a factor or delay
that puts a setting out of the ConfigMap's range raises `ValueError` in `over` (the ranges are
`config.predictive`'s); `entry` raises `ValueError` for performance parameters that are not the
four-parameter form the predictive map takes, and for a configuration without the predictive
part.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from llmscaler.config.predictive import DURATION_MAX, PREDICTIVE_CONFIGMAP, PredictiveOverrides
from llmscaler.config.resolved import ModelConfig, PredictiveConfig
from llmscaler.sim.scenario.setup import PREDICTIVE

MARGINS = (2.0, 1.0, 0.5)
"""Factors on the goal's error budget (1 − goal) that give the policy's attainment target."""
DELAYS = (120.0, 300.0, 600.0)
"""Scale-down delays (s); 300 is the default."""
HORIZONS = (0.75, 1.0, 1.5)
"""Factors on the start-up time the forecast looks ahead by; 1 is the default."""


@dataclass(frozen=True, slots=True)
class PredictiveSettings:
    """One choice: None fields keep the recommended value."""

    target: float | None = None
    """The policy's attainment target (`attainmentTarget`); None: the default's."""
    delay: float | None = None
    """`scaleDownDelaySeconds`; None: the default's."""
    horizon: float = 1.0
    """Factor on `startupSeconds`."""

    @property
    def text(self) -> str:
        if self.target is None and self.delay is None and self.horizon == 1.0:
            return ''
        target = 'default' if self.target is None else f'{self.target:.4g}'
        delay = 'default' if self.delay is None else f'{self.delay:g}s'
        return f'target {target}, delay {delay}, horizon ×{self.horizon:g}'


def margin_targets(*, goal: float, margins: Sequence[float]) -> tuple[float, ...]:
    """The policy targets 1 − (1 − goal) × k for each k, those inside (0.5, 1), in order."""
    if not 0.5 < goal < 1.0:
        raise ValueError(f'the attainment goal must be in (0.5, 1), got {goal}')
    found = (1.0 - (1.0 - goal) * k for k in margins)
    return tuple(dict.fromkeys(round(t, 6) for t in found if 0.5 < round(t, 6) < 1.0))


def over(*, settings: PredictiveSettings, base: PredictiveConfig) -> PredictiveConfig:
    """`base` (the recommended configuration of the model) with `settings`, set as an entry of
    `llmscaler-predictive-config` sets them (`PredictiveOverrides.over`)."""
    startup = base.startup_seconds * settings.horizon
    delay = settings.delay
    for name, value, low in (
        ('startupSeconds', startup, 0.0),
        ('scaleDownDelaySeconds', delay, -1),
    ):
        if value is not None and not (low < value <= DURATION_MAX):
            raise ValueError(f'{name} {value:g} is outside the ConfigMap range')
    # The default target's own sizing is the defaults' (not a float's width from it).
    target = None if settings.target == base.attainment else settings.target
    overrides = PredictiveOverrides(
        attainment_target=target,
        scale_down_delay=delay,
        startup_seconds=startup if settings.horizon != 1.0 else None,
    )
    return overrides.over(base)


def _predictive(config: ModelConfig) -> PredictiveConfig:
    if config.predictive is None:
        raise ValueError('the configuration has no llmscaler-predictive-config part')
    return config.predictive


def _perf_parms(accelerator: str, values: Sequence[float]) -> dict[str, Any]:
    if len(values) != 4:
        raise ValueError(
            f'perfParms of {accelerator}: the predictive map takes four parameters, '
            f'got {len(values)}'
        )
    alpha, beta, gamma, delta = values
    return {
        'acc': accelerator,
        'decodeParms': {'alpha': alpha, 'beta': beta},
        'prefillParms': {'gamma': gamma, 'delta': delta},
    }


def entry(*, settings: PredictiveConfig, model_id: str, namespace: str) -> dict[str, Any]:
    """The per-model entry of `llmscaler-predictive-config` that resolves to `settings`."""
    slo = settings.slo
    fields: dict[str, Any] = {'model_id': model_id, 'namespace': namespace}
    if slo.target_ttft is not None and slo.target_itl is not None:
        fields['targetTTFT'] = slo.target_ttft
        fields['targetITL'] = slo.target_itl
    fields['sloMultiplier'] = slo.slo_multiplier
    fields['tuningEnabled'] = slo.tuning_enabled
    if slo.perf_parms is not None:
        fields['perfParms'] = [_perf_parms(acc, values) for acc, values in slo.perf_parms]
    fields |= {
        'startupSeconds': settings.startup_seconds,
        'forecastQuantile': settings.quantile,
        'scaleDownDelaySeconds': settings.scale_down_delay,
        'latencyMargin': settings.latency_margin,
        'historySeconds': settings.history_seconds,
        'sloAttainment': settings.attainment,
        'fastPath': settings.fast_path,
        'periodic': settings.periodic,
    }
    if settings.period_seconds is not None:
        fields['periodSeconds'] = settings.period_seconds
    return fields


@dataclass(frozen=True, slots=True)
class PredictiveSpace:
    """The predictive policy's `PolicySpace` (module docstring)."""

    margins: tuple[float, ...] = MARGINS
    delays: tuple[float, ...] = DELAYS
    horizons: tuple[float, ...] = HORIZONS
    policy: str = PREDICTIVE
    configmap_name: str = PREDICTIVE_CONFIGMAP

    def recommended(self) -> PredictiveSettings:
        return PredictiveSettings()

    def choices(self, *, goal: float, base: ModelConfig) -> list[PredictiveSettings]:
        return [
            PredictiveSettings(target=t, delay=d, horizon=h)
            for t in margin_targets(goal=goal, margins=self.margins)
            for d in self.delays
            for h in self.horizons
        ]

    def resolve(self, *, settings: PredictiveSettings, base: ModelConfig) -> ModelConfig:
        return replace(base, predictive=over(settings=settings, base=_predictive(base)))

    def entry(self, *, config: ModelConfig, model_id: str, namespace: str) -> dict[str, Any]:
        return entry(settings=_predictive(config), model_id=model_id, namespace=namespace)
