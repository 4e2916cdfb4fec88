"""Parsing and validation of WVA's three ConfigMaps into per-entry partial overrides.

Why: users keep the ConfigMaps of llm-d's Workload Variant Autoscaler (WVA v0.9.0, internal/config/)
when they move to llmscaler, so we read them with their exact names, keys, field spellings and
defaults:

- `wva-saturation-scaling-config`: key `default` plus per-model entries. A per-model entry is
  recognised by its `model_id` (+ optional `namespace`) fields (the form of WVA's documented
  examples) or by a key of the form `{modelID}#{namespace}` (the key WVA v0.9.0 looks up; an empty
  namespace part means every namespace).
- `wva-model-scale-to-zero-config`: `default` plus entries with `model_id`, `namespace`,
  `enable_scale_to_zero` (bool) and `retention_period` (Go duration, > 0 and at most 7 days;
  over 24 h warns).
- `wva-queueing-model-config`: `default{sloMultiplier in (1, 100], tuningEnabled}` plus per-model
  `{model_id, namespace, targetTTFT, targetITL, sloMultiplier, tuningEnabled}` (WVA main's keys,
  internal/interfaces `QueueingModelScalingConfig`); the targets are milliseconds, both in
  (0, 1 h] or both absent (also accepted in `default`, as a global SLO). llmscaler's own keys,
  in either kind of entry: `performanceModel` (`three-parameter`, the default, or
  `four-parameter`) and `perfParms`, which seeds the tuner per accelerator in the form of the
  entry's model (`config.perf_parms`; an entry whose perfParms are in the other form is
  rejected).

Each entry keeps only the fields that were explicitly present (None = absent), so that
`llmscaler.config.build` can merge layers field by field. This module holds what each map is:
its name, fields, checks across fields and overrides; reading an entry (its identity, YAML,
limits and errors) is `llmscaler.config.configmap_entries`' (`MapSpec`, `parse_map`).
`llmscaler-predictive-config` (`llmscaler.config.predictive`) is read by the same machinery
with the queueing map's fields and check (`QUEUEING_FIELDS`, `check_queueing`) plus its own.

Deliberate deviation from WVA: an explicitly set field overrides even when it is 0 or false.
WVA merges an override only where the value is non-zero, so a per-model entry could never turn
`enableLimiter` or `scaleToZero.enabled` off, or set `queueLengthThreshold: 0`, once `default`
had set them; here `analyzers: []` also explicitly clears an inherited analyzer list.

Other choices: a duplicate per-model entry (same model_id and namespace) in one ConfigMap loses to
the first key in sort order, for all three maps (WVA does this for scale-to-zero); `limiters`
(GPU inventory and quotas, `llmscaler.config.quota`) is read in `default` entries and an error
elsewhere; `capacityFloors` (scheduled capacity floors, `llmscaler.config.floors`) is read in
per-model entries and an error in `default`. Entries are read by the bounded YAML reader, with
caps per entry and per ConfigMap (`llmscaler.config.configmap_entries`). The field rules are in
`llmscaler.config.fields`.

What fails: nothing raises for bad data. An entry with a YAML error, a refused YAML feature, a
wrong type, an unknown field, a value out of range (NaN and ±Inf are out of every range) or
inconsistent fields is rejected whole with a `ConfigError` naming the ConfigMap, key, field and
value (never the value of a field whose name looks secret); every valid entry still loads. A
ConfigMap over its size or node cap is rejected whole, with one error saying so. An unexpected
exception while reading one entry is that entry's error. Validation (WVA's rules, plus a finite
maximum for every number, so no accepted value can overflow the core's arithmetic): fractions in
[0, 1]; queueLengthThreshold and queueSpareTrigger in [0, 1,000,000]; kvCacheThreshold ≥
kvSpareTrigger; priority and analyzer scores in [0, 1,000,000]; V2 thresholds in (0, 1] with
up > down (`llmscaler.config.fields` tables them).
"""

from __future__ import annotations

from dataclasses import dataclass

from llmscaler.config.configmap_entries import (
    ConfigMapSource,
    Entry,
    Fields,
    MapSpec,
    parse_map,
)
from llmscaler.config.errors import ConfigError
from llmscaler.config.fields import (
    analyzer_list,
    boolean,
    fraction,
    latency_ms,
    queue_length,
    retention,
    scale_to_zero_block,
    slo_multiplier,
    string,
    threshold,
    weight,
)
from llmscaler.config.floors import capacity_floor_list
from llmscaler.config.perf_parms import (
    PerfParmsByAccelerator,
    form_mismatch,
    perf_parms_list,
    performance_model,
)
from llmscaler.config.quota import Limiters
from llmscaler.config.resolved import (
    THREE_PARAMETER,
    AnalyzerSpec,
    CapacityFloor,
    PerformanceModel,
    ScaleToZeroConfig,
)

SATURATION_CONFIGMAP = 'wva-saturation-scaling-config'
QUEUEING_CONFIGMAP = 'wva-queueing-model-config'
SCALE_TO_ZERO_CONFIGMAP = 'wva-model-scale-to-zero-config'


@dataclass(frozen=True, slots=True)
class SaturationOverrides:
    """The fields one saturation entry set explicitly (None = not set), as in SaturationConfig."""

    kv_cache_threshold: float | None = None
    queue_length_threshold: float | None = None
    kv_spare_trigger: float | None = None
    queue_spare_trigger: float | None = None
    scale_up_threshold: float | None = None
    scale_down_boundary: float | None = None
    priority: float | None = None
    analyzer_name: str | None = None
    analyzers: tuple[AnalyzerSpec, ...] | None = None
    enable_limiter: bool | None = None
    enable_rescale: bool | None = None
    scale_to_zero_enabled: bool | None = None
    limiters: Limiters | None = None
    capacity_floors: tuple[CapacityFloor, ...] | None = None
    """`capacityFloors` of a per-model entry (`config.floors`); not a SaturationConfig field."""


@dataclass(frozen=True, slots=True)
class QueueingOverrides:
    """The fields one queueing-model entry set explicitly (None = not set)."""

    slo_multiplier: float | None = None
    tuning_enabled: bool | None = None
    target_ttft: float | None = None
    target_itl: float | None = None
    perf_parms: PerfParmsByAccelerator | None = None
    performance_model: PerformanceModel | None = None
    """`performanceModel`: read in `wva-queueing-model-config` only (the predictive analyzer
    sizes on the four-parameter model)."""


_SATURATION_FIELDS: Fields = {
    'kvCacheThreshold': ('kv_cache_threshold', fraction),
    'queueLengthThreshold': ('queue_length_threshold', queue_length),
    'kvSpareTrigger': ('kv_spare_trigger', fraction),
    'queueSpareTrigger': ('queue_spare_trigger', queue_length),
    'scaleUpThreshold': ('scale_up_threshold', threshold),
    'scaleDownBoundary': ('scale_down_boundary', threshold),
    'priority': ('priority', weight),
    'analyzerName': ('analyzer_name', string),
    'analyzers': ('analyzers', analyzer_list),
    'enableLimiter': ('enable_limiter', boolean),
    'enableRescale': ('enable_rescale', boolean),
    'scaleToZero': ('scale_to_zero_enabled', scale_to_zero_block),
    'capacityFloors': ('capacity_floors', capacity_floor_list),
}
_SCALE_TO_ZERO_FIELDS: Fields = {
    'enable_scale_to_zero': ('enabled', boolean),
    'retention_period': ('retention_period', retention),
}
QUEUEING_FIELDS: Fields = {
    # Shared with `llmscaler-predictive-config` (`config.predictive`): one parser for both.
    'sloMultiplier': ('slo_multiplier', slo_multiplier),
    'tuningEnabled': ('tuning_enabled', boolean),
    'targetTTFT': ('target_ttft', latency_ms),
    'targetITL': ('target_itl', latency_ms),
    'perfParms': ('perf_parms', perf_parms_list),
}
_QUEUEING_FIELDS: Fields = {
    **QUEUEING_FIELDS,
    'performanceModel': ('performance_model', performance_model),
}


def _check_saturation(got: dict[str, object]) -> list[tuple[str, str, object]]:
    problems: list[tuple[str, str, object]] = []
    kv, spare = got.get('kv_cache_threshold'), got.get('kv_spare_trigger')
    if isinstance(kv, float) and isinstance(spare, float) and kv < spare:
        msg = f'kvCacheThreshold {kv} must be >= kvSpareTrigger {spare}'
        problems.append(('kvCacheThreshold', msg, kv))
    up, down = got.get('scale_up_threshold'), got.get('scale_down_boundary')
    if isinstance(up, float) and isinstance(down, float) and up <= down:
        msg = f'scaleUpThreshold {up} must be greater than scaleDownBoundary {down}'
        problems.append(('scaleUpThreshold', msg, up))
    return problems


def check_queueing(got: dict[str, object]) -> list[tuple[str, str, object]]:
    has_ttft, has_itl = 'target_ttft' in got, 'target_itl' in got
    if has_ttft != has_itl:
        present = 'targetTTFT' if has_ttft else 'targetITL'
        value = got['target_ttft'] if has_ttft else got['target_itl']
        return [(present, 'targetTTFT and targetITL must be set together (or neither)', value)]
    return []


_SATURATION = MapSpec(
    fields=_SATURATION_FIELDS,
    empty=SaturationOverrides(),
    check=_check_saturation,
    default_only=frozenset({'limiters'}),
    model_only=frozenset({'capacityFloors'}),
)
_SCALE_TO_ZERO = MapSpec(
    fields=_SCALE_TO_ZERO_FIELDS, empty=ScaleToZeroConfig(), check=lambda got: []
)


def check_perf_form(
    got: dict[str, object], *, model: PerformanceModel
) -> list[tuple[str, str, object]]:
    """`perfParms` in the form of `model` (the entry's own `performanceModel`, else the map's
    default), never reinterpreted."""
    perf = got.get('perf_parms')
    why = form_mismatch(perf_parms=perf, model=model) if isinstance(perf, tuple) else None
    return [] if why is None else [('perfParms', why, None)]


def _check_queueing_model(got: dict[str, object]) -> list[tuple[str, str, object]]:
    chosen = got.get('performance_model')
    model = performance_model(chosen) if chosen is not None else THREE_PARAMETER
    return check_queueing(got) + check_perf_form(got, model=model)


_QUEUEING = MapSpec(fields=_QUEUEING_FIELDS, empty=QueueingOverrides(), check=_check_queueing_model)


def parse_saturation_configmap(
    *, source: ConfigMapSource
) -> tuple[tuple[Entry[SaturationOverrides], ...], tuple[ConfigError, ...]]:
    """Entries of a `wva-saturation-scaling-config`, sorted by key, and the rejected ones."""
    return parse_map(spec=_SATURATION, source=source)


def parse_scale_to_zero_configmap(
    *, source: ConfigMapSource
) -> tuple[tuple[Entry[ScaleToZeroConfig], ...], tuple[ConfigError, ...]]:
    """Entries of a `wva-model-scale-to-zero-config` (None = not set at this entry)."""
    return parse_map(spec=_SCALE_TO_ZERO, source=source)


def parse_queueing_configmap(
    *, source: ConfigMapSource
) -> tuple[tuple[Entry[QueueingOverrides], ...], tuple[ConfigError, ...]]:
    """Entries of a `wva-queueing-model-config`, sorted by key, and the rejected ones."""
    return parse_map(spec=_QUEUEING, source=source)
