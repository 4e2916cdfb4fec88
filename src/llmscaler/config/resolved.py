"""Resolved configuration as the decision core consumes it.

Why: the core must not know where a setting came from (CLI, env, file, ConfigMap, default); it
receives one `Config` value and asks it for the effective settings of a model with
`config.model(model_id=..., namespace=...)`. The loaders in this package build that value from
the layers, in the precedence CLI > env > file > ConfigMap > defaults, and resolve the
ConfigMap entries (global `default` < namespace-local `default` < global per-model override <
namespace-local per-model override) ahead of time, so lookup here is a pure dictionary read.

Defaults are those of WVA (llm-d workload-variant-autoscaler v0.9.0, internal/config/). Durations
are seconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Final, Literal

from llmscaler.config.cron import Schedule
from llmscaler.config.quota import Limiters
from llmscaler.domain.basics import group_key

AnalyzerPath = Literal['saturation-percentage', 'saturation-token']
PerformanceModel = Literal['three-parameter', 'four-parameter']
"""The SLO path's performance model (`performanceModel`): WVA main's three parameters
(`analyze.queueing.service_model`) or the WVA design paper's four
(`analyze.queueing.perf_model`)."""
THREE_PARAMETER: PerformanceModel = 'three-parameter'
FOUR_PARAMETER: PerformanceModel = 'four-parameter'
PARAMETER_COUNT: dict[PerformanceModel, int] = {THREE_PARAMETER: 3, FOUR_PARAMETER: 4}


@dataclass(frozen=True, slots=True)
class AnalyzerSpec:
    """One entry of the `analyzers:` list of `wva-saturation-scaling-config`."""

    name: str
    enabled: bool = True
    score: float = 1.0
    scale_up_threshold: float | None = None
    scale_down_boundary: float | None = None
    parameters: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class SaturationConfig:
    """`wva-saturation-scaling-config`, one resolved entry."""

    kv_cache_threshold: float = 0.80
    queue_length_threshold: float = 5.0
    kv_spare_trigger: float = 0.10
    queue_spare_trigger: float = 3.0
    scale_up_threshold: float = 0.85
    scale_down_boundary: float = 0.70
    priority: float = 1.0
    analyzer_name: str = ''
    analyzers: tuple[AnalyzerSpec, ...] = ()
    enable_limiter: bool = False
    enable_rescale: bool = False
    scale_to_zero_enabled: bool | None = None
    limiters: Limiters | None = None
    """`limiters:` of the global `default` entry (None: the GPU inventory alone)."""

    @property
    def analyzer_path(self) -> AnalyzerPath:
        """As in WVA (v0.9.0, internal/engines/saturation/engine.go): `analyzerName: saturation`
        or a non-empty `analyzers:` list selects the token-based analyzer; anything else the
        percentage-based default."""
        if self.analyzer_name == 'saturation' or self.analyzers:
            return 'saturation-token'
        return 'saturation-percentage'


@dataclass(frozen=True, slots=True)
class ScaleToZeroConfig:
    """`wva-model-scale-to-zero-config`, one resolved entry (None = not set at this layer)."""

    enabled: bool | None = None
    retention_period: float | None = None


@dataclass(frozen=True, slots=True)
class QueueingModelConfig:
    """`wva-queueing-model-config`, one resolved entry. Targets are milliseconds, as in the map."""

    slo_multiplier: float = 3.0
    tuning_enabled: bool = True
    target_ttft: float | None = None
    target_itl: float | None = None
    service_class: str | None = None
    """The `service-classes-config` class the targets came from (None: this ConfigMap's own)."""
    perf_parms: tuple[tuple[str, tuple[float, ...]], ...] | None = None
    """`perfParms`: configured (accelerator, parameters in ms) pairs, sorted: (α, β, γ) for
    the three-parameter model, (α, β, γ, δ) for the four-parameter one (ITL = α + β·b,
    prefill = γ + δ·I·b): the tuner's seed for the model's variants on that accelerator, and
    where a restart starts; None or an unlisted accelerator: a guess from the first
    observation (`config.perf_parms`)."""
    performance_model: PerformanceModel = THREE_PARAMETER
    """`performanceModel`: WVA main's three-parameter model (the default) or the design
    paper's four-parameter one."""


PERIODIC_AUTO: Final = 'auto'
PERIODIC_OFF: Final = 'off'
PERIODIC_MODES: Final = (PERIODIC_AUTO, PERIODIC_OFF)
"""The values of `llmscaler-predictive-config`'s `periodic` key."""
PERIOD_MIN: Final = 60.0
PERIOD_MAX: Final = 86400.0
"""The range of `periodSeconds` (s): a minute to a day, the periods the learner looks for."""


@dataclass(frozen=True, slots=True)
class PredictiveConfig:
    """`llmscaler-predictive-config`, one resolved entry: the `predictive` analyzer's settings.

    `slo` holds the keys it shares with `wva-queueing-model-config` (targets, SLO multiplier,
    tuner, `perfParms`, service class): the predictive analyzer sizes on the same tuned
    performance model and targets. The rest are its own; durations are seconds.
    """

    slo: QueueingModelConfig = field(
        default_factory=lambda: QueueingModelConfig(performance_model=FOUR_PARAMETER)
    )
    """The shared SLO keys. The predictive analyzer sizes on the four-parameter model (its
    prefill-interference and decode-stretch terms are written in γ + δ·I and α + β·b), so its
    `slo.performance_model` is always `four-parameter`: its map has no `performanceModel` key,
    and a value built otherwise is set to it here."""
    startup_seconds: float = 120.0
    """`startupSeconds`: from a scale-up decision to a ready replica (scheduling, image pull,
    weights load, warm-up). The forecast looks this far ahead, plus two cycles."""
    quantile: float = 0.95
    """`forecastQuantile` in (0.5, 1): the upper quantile of the arrival-rate forecast sized for."""
    scale_down_delay: float = 300.0
    """`scaleDownDelaySeconds` >= 0: a replica goes only when the forecast's upper bound over
    this long has allowed it (hysteresis; the HPA's default scale-down stabilization)."""
    latency_margin: float = 0.7
    """`latencyMargin` in (0, 1]: the share of each latency target the model's *mean* TTFT and
    ITL may use; the rest is room for the tail, which the targets are about."""
    history_seconds: float = 900.0
    """`historySeconds` > 0: how much arrival-rate history the forecast keeps."""
    attainment: float = 0.99
    """`sloAttainment` in (0.5, 1): the share of requests that must meet both targets. The rest
    is the budget of misses a variant may show (vLLM's latency histograms) before it is counted
    for less than the rate it shows them at."""
    fast_path: bool = True
    """`fastPath`: a burst the gateway shows between cycles has the model decided again at once,
    on the burst's rate, upwards only (`burst`)."""
    periodic: str = PERIODIC_AUTO
    """`periodic`: `auto` learns the period the arrival rate repeats with from its history and
    provisions a start-up ahead of a rise it has seen before (`analyze.learning.recurring`);
    `off` sizes on the short-term forecast alone."""
    period_seconds: float | None = None
    """`periodSeconds` in [60, 86400]: the period to use instead of the one learnt (None:
    learnt). It still has to be seen once and hold before anything is sized on it."""

    def __post_init__(self) -> None:
        if self.slo.performance_model != FOUR_PARAMETER:
            # Frozen: the one field is set in place (see `slo`).
            object.__setattr__(self, 'slo', replace(self.slo, performance_model=FOUR_PARAMETER))


@dataclass(frozen=True, slots=True)
class CapacityFloor:
    """From each activation of `schedule`, for `duration` seconds: at least the capacity of
    `replicas` replicas of variant `reference`."""

    name: str
    schedule: Schedule
    duration: float
    reference: str
    replicas: int


@dataclass(frozen=True, slots=True)
class ModelConfig:
    """The effective configuration of one model (modelID + namespace)."""

    saturation: SaturationConfig = field(default_factory=SaturationConfig)
    scale_to_zero: ScaleToZeroConfig = field(default_factory=ScaleToZeroConfig)
    queueing: QueueingModelConfig | None = None
    predictive: PredictiveConfig | None = None
    """`llmscaler-predictive-config` applies: the `predictive` analyzer decides (it takes
    precedence over the SLO path of `wva-queueing-model-config`)."""
    capacity_floors: tuple[CapacityFloor, ...] = ()
    """Scheduled floors on the model's capacity (`enforce.capacity_floors`); none by default."""


@dataclass(frozen=True, slots=True)
class CoreSettings:
    """Global settings of the decision core (manager config: CLI > env > file > defaults)."""

    interval: float = 30.0
    """Main cycle period (`GLOBAL_OPT_INTERVAL`); liveness windows are multiples of it."""
    fresh_threshold: float = 60.0
    stale_threshold: float = 120.0
    unavailable_threshold: float = 300.0
    k2_window: int = 10
    k2_history_ttl: float = 24 * 3600.0
    capacity_ttl: float = 7 * 24 * 3600.0
    scale_to_zero: bool = False
    """`WVA_SCALE_TO_ZERO`: the last link of the scale-to-zero precedence chain."""
    default_retention_period: float = 600.0


@dataclass(frozen=True, slots=True)
class Config:
    """Everything configurable, pre-resolved per namespace and per model.

    `by_group` is keyed `modelID|namespace`, `by_model` (overrides that name a model but no
    namespace) by modelID, `by_namespace` by namespace; tuples are sorted by key.
    """

    settings: CoreSettings = field(default_factory=CoreSettings)
    default: ModelConfig = field(default_factory=ModelConfig)
    by_namespace: tuple[tuple[str, ModelConfig], ...] = ()
    by_model: tuple[tuple[str, ModelConfig], ...] = ()
    by_group: tuple[tuple[str, ModelConfig], ...] = ()

    def model(self, *, model_id: str, namespace: str) -> ModelConfig:
        """The effective configuration of a model: the most specific layer that names it."""
        group = group_key(model_id=model_id, namespace=namespace)
        for key, value in self.by_group:
            if key == group:
                return value
        for key, value in self.by_model:
            if key == model_id:
                return value
        for key, value in self.by_namespace:
            if key == namespace:
                return value
        return self.default
