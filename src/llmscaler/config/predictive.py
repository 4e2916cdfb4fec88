"""`llmscaler-predictive-config`: the settings of the `predictive` analyzer, per model.

Why: the predictive analyzer sizes on the SLO path's tuned performance model and targets, so it
takes the keys it shares with `wva-queueing-model-config` (`targetTTFT`, `targetITL`,
`sloMultiplier`, `tuningEnabled`, `perfParms`) read by the very code that reads that map
(`configmaps.QUEUEING_FIELDS`, `configmaps.check_queueing`, `configmap_entries.parse_map`), and
adds its own (defaults: `config.resolved.PredictiveConfig`). It sizes on the four-parameter
model, so its `perfParms` are in that form (`decodeParms`/`prefillParms`) and it has no
`performanceModel` key:

| key | range |
|---|---|
| `startupSeconds` | (0, 86400]: from a scale-up decision to a ready replica |
| `forecastQuantile` | (0.5, 1): the upper quantile of the forecast sized for |
| `scaleDownDelaySeconds` | [0, 86400]: hysteresis before a replica goes |
| `latencyMargin` | (0, 1]: the share of each target the mean latency may use |
| `historySeconds` | (0, 86400]: the arrival-rate history the forecast keeps |
| `sloAttainment` | (0.5, 1): the share of requests that must meet both targets |
| `fastPath` | true or false: a burst between cycles is decided at once (`burst`) |
| `attainmentTarget` | (0.5, 1): the share of requests to keep within the SLO (`sizing_for`) |
| `periodic` | `auto` or `off`: learn the period the load repeats with (`recurring`) |
| `periodSeconds` | [60, 86400]: a fixed period instead of the learnt one |

`attainmentTarget` sets `sloAttainment` to itself and the `forecastQuantile` and `latencyMargin` it
implies (`sizing_for`); keys the same entry sets explicitly win over it.

YAML reads an unquoted `off` as false: `periodic: off` and `periodic: false` are the same;
`true` (and `on`) name no mode and are refused.

A duration is a number of seconds (the keys say so) or a Go duration string with a unit
(`"2m"`, `"1m30s"`), as the other maps write durations. The layout and layering are the queueing
map's: a `default` entry and per-model entries (`model_id` + optional `namespace`, or a
`{modelID}#{namespace}` key), global in the controller namespace and namespace-local elsewhere
(`config.build`, which also gives the service-class targets their place). The map's presence
puts the models it applies to on the predictive analyzer, ahead of the SLO path.

What fails: nothing raises for bad data. An entry with a value out of range (NaN and ±Inf are
out of every range), a wrong type, an unknown field or the targets not set together is rejected
whole with a `ConfigError` naming the map, key, field and value, as the other maps do, and the
entry's model and namespace when it names them (`... must be in (0.5, 1) (model 'meta/llama'
in namespace 'llm')`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace
from typing import Any, Final

from llmscaler.config.configmap_entries import ConfigMapSource, Entry, MapSpec, parse_map
from llmscaler.config.configmaps import (
    QUEUEING_FIELDS,
    QueueingOverrides,
    check_perf_form,
    check_queueing,
)
from llmscaler.config.durations import parse_duration
from llmscaler.config.errors import ConfigError
from llmscaler.config.fields import Invalid, boolean, type_name
from llmscaler.config.resolved import (
    FOUR_PARAMETER,
    PERIOD_MIN,
    PERIODIC_MODES,
    PERIODIC_OFF,
    PredictiveConfig,
)

PREDICTIVE_CONFIGMAP: Final = 'llmscaler-predictive-config'
DURATION_MAX: Final = 24 * 3600.0
"""Longest start-up, delay or history: a day; longer is a typo, and the history is kept in the
decision state, so it must stay bounded."""

_SHARED: Final = frozenset(item.name for item in fields(QueueingOverrides))
DEFAULT_BUDGET: Final = 0.01
"""The error budget of the default `attainmentTarget`, 0.99."""
DEFAULT_MARGIN: Final = 0.7
"""The `latencyMargin` the default target implies (`PredictiveConfig.latency_margin`)."""
QUANTILE_SLOPE: Final = 5.0
QUANTILE_MIN, QUANTILE_MAX = 0.55, 0.995
MARGIN_MIN: Final = 0.3


@dataclass(frozen=True, slots=True)
class PredictiveOverrides:
    """The keys one entry set explicitly (None = not set): the shared ones in `slo`."""

    slo: QueueingOverrides = field(default_factory=QueueingOverrides)
    startup_seconds: float | None = None
    quantile: float | None = None
    scale_down_delay: float | None = None
    latency_margin: float | None = None
    history_seconds: float | None = None
    attainment: float | None = None
    fast_path: bool | None = None
    attainment_target: float | None = None
    periodic: str | None = None
    period_seconds: float | None = None

    def over(self, config: PredictiveConfig) -> PredictiveConfig:
        """`config` with this entry's own keys set (the shared ones are merged apart, with the
        service-class targets, by `config.build`); an `attainmentTarget` sets what it implies
        (`sizing_for`), and the entry's explicit keys win over it."""
        changes = {
            item.name: getattr(self, item.name)
            for item in fields(self)
            if item.name not in ('slo', 'attainment_target')
            and getattr(self, item.name) is not None
        }
        if self.attainment_target is not None:
            quantile, margin = sizing_for(self.attainment_target)
            implied = {
                'attainment': self.attainment_target,
                'quantile': quantile,
                'latency_margin': margin,
            }
            changes = {**implied, **changes}
        return replace(config, **changes) if changes else config


def sizing_for(target: float) -> tuple[float, float]:
    """The forecast quantile and latency margin an attainment target in (0.5, 1) implies.

    Both are set so that the default target, 0.99, implies the defaults (0.95 and 0.7) and the
    error budget b = 1 − target is spent on both: the forecast's upper quantile is 1 − 5b (a
    twentieth of the forecast's misses land on the budget), in [0.55, 0.995]; the share of each
    latency target the mean may use falls as the tail must reach further, as ln(1/b) for a tail
    that decays exponentially, 0.7 × ln(100) / ln(1/b), in [0.3, 1].
    """
    budget = 1.0 - target
    quantile = min(QUANTILE_MAX, max(QUANTILE_MIN, 1.0 - QUANTILE_SLOPE * budget))
    margin = DEFAULT_MARGIN * math.log(1.0 / DEFAULT_BUDGET) / math.log(1.0 / budget)
    return quantile, min(1.0, max(MARGIN_MIN, margin))


def _seconds(value: object, *, low_open: bool, low: float = 0.0) -> float:
    if isinstance(value, str):
        try:
            seconds = parse_duration(value)
        except ValueError as exc:
            raise Invalid(str(exc)) from None
    elif isinstance(value, bool) or not isinstance(value, int | float):
        raise Invalid(
            f'must be a number of seconds or a Go duration string such as "2m", '
            f'not {type_name(value)}'
        )
    else:
        try:
            seconds = float(value)
        except OverflowError:
            seconds = math.inf
    above_low = seconds > low if low_open else seconds >= low
    if not (above_low and seconds <= DURATION_MAX):  # NaN fails both, so it is refused too
        opening = '(' if low_open else '['
        reach = f'{low / 60:.15g}m to 24h' if low else '24h'
        raise Invalid(f'must be in {opening}{low:.15g}, {DURATION_MAX:.15g}] seconds ({reach})')
    return seconds


def positive_seconds(value: object) -> float:
    """startupSeconds, historySeconds: (0, 24 h]."""
    return _seconds(value, low_open=True)


def delay_seconds(value: object) -> float:
    """scaleDownDelaySeconds: [0, 24 h]."""
    return _seconds(value, low_open=False)


def _number(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise Invalid(f'must be a number, not {type_name(value)}')
    try:
        return float(value)
    except OverflowError:
        return math.inf


def quantile(value: object) -> float:
    """forecastQuantile, sloAttainment: (0.5, 1), both ends open (1 would size for an unbounded
    forecast, or allow no request to miss)."""
    number = _number(value)
    if not 0.5 < number < 1.0:
        raise Invalid('must be in (0.5, 1)')
    return number


def margin(value: object) -> float:
    """latencyMargin: (0, 1]."""
    number = _number(value)
    if not 0.0 < number <= 1.0:
        raise Invalid('must be in (0, 1]')
    return number


def periodic(value: object) -> str:
    """periodic: `auto` or `off` (an unquoted `off` is YAML's false, so false is `off`)."""
    if value is False:
        return PERIODIC_OFF
    if not isinstance(value, str):
        raise Invalid(f'must be {" or ".join(PERIODIC_MODES)}, not {type_name(value)}')
    if value not in PERIODIC_MODES:
        raise Invalid(f'must be {" or ".join(PERIODIC_MODES)}')
    return value


def period_seconds(value: object) -> float:
    """periodSeconds: [60, 86400] seconds."""
    return _seconds(value, low_open=False, low=PERIOD_MIN)


PREDICTIVE_FIELDS: Final = {
    **QUEUEING_FIELDS,
    'startupSeconds': ('startup_seconds', positive_seconds),
    'forecastQuantile': ('quantile', quantile),
    'scaleDownDelaySeconds': ('scale_down_delay', delay_seconds),
    'latencyMargin': ('latency_margin', margin),
    'historySeconds': ('history_seconds', positive_seconds),
    'sloAttainment': ('attainment', quantile),
    'fastPath': ('fast_path', boolean),
    'attainmentTarget': ('attainment_target', quantile),
    'periodic': ('periodic', periodic),
    'periodSeconds': ('period_seconds', period_seconds),
}


def _make(got: dict[str, Any]) -> PredictiveOverrides:
    shared = {name: value for name, value in got.items() if name in _SHARED}
    own = {name: value for name, value in got.items() if name not in _SHARED}
    return PredictiveOverrides(slo=QueueingOverrides(**shared), **own)


_PREDICTIVE: Final = MapSpec(
    fields=PREDICTIVE_FIELDS,
    empty=PredictiveOverrides(),
    check=lambda got: check_queueing(got) + check_perf_form(got, model=FOUR_PARAMETER),
    make=_make,
    name_model=True,
)


def parse_predictive_configmap(
    *, source: ConfigMapSource
) -> tuple[tuple[Entry[PredictiveOverrides], ...], tuple[ConfigError, ...]]:
    """Entries of a `llmscaler-predictive-config`, sorted by key, and the rejected ones."""
    return parse_map(spec=_PREDICTIVE, source=source)
