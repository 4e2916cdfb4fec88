"""Resolve the ConfigMap layers into the one `Config` value the decision core reads.

Why: `Config.model()` (config/resolved.py) is a pure dictionary read, by_group → by_model →
by_namespace → default, so every layer must be merged here, ahead of time, into fully resolved
values. The layers, least to most specific (those of WVA's ConfigMaps: llm-d
workload-variant-autoscaler v0.9.0, internal/config/):

    built-in defaults < global `default` < namespace-local `default`
        < global per-model entry without namespace < global per-model entry for the namespace
        < namespace-local per-model entry

Global ConfigMaps are those in the controller namespace; a ConfigMap in any other namespace is
namespace-local and applies only to models of that namespace (its entries may omit `namespace`;
naming another namespace is an error; `llmscaler.config.layers` files the entries by layer).
A per-model entry without a namespace is stored in `by_model`, and `by_group` is also filled
for that model in every namespace that has a namespace-local ConfigMap, so the most specific
layer always wins the lookup.

Merging is field by field and an explicitly set field overrides even when it is 0 or false (see
`llmscaler.config.configmaps`). Checks on merged values:
- saturation `scaleUpThreshold` ≤ `scaleDownBoundary` after merging → both reset to the built-in
  0.85 / 0.70 (as WVA does) and an error is reported;
- `kvCacheThreshold` < `kvSpareTrigger` after merging a layer → that layer is skipped whole;
- scale-to-zero `enabled`/`retention_period` stay None when no layer set them (the enforcer
  applies the rest of the chain: inline `scaleToZero.enabled` → this → `WVA_SCALE_TO_ZERO`);
- `queueing` is None unless a `wva-queueing-model-config` applies (global, or local to the
  model's namespace); then it starts from the built-in defaults; `predictive` likewise with
  `llmscaler-predictive-config` (`llmscaler.config.predictive`), whose shared keys (targets,
  `sloMultiplier`, `tuningEnabled`, `perfParms`) resolve into `predictive.slo` from its own
  entries only, by the same function as the queueing map's;
- `service-classes-config` (`llmscaler.config.service_classes`) gives a model explicit
  targets when no per-model entry of the map (queueing or predictive) sets
  `targetTTFT`/`targetITL`: per-model entry > service class (namespace-local, then global) >
  the map's `default` entries' targets > inferred; it selects nothing by itself (`queueing`
  and `predictive` stay None without their ConfigMap), and `service_class` names the class used;
- `capacity_floors` come whole from the most specific saturation entry that sets
  `capacityFloors` (lists are not merged; `[]` clears the floors of a less specific entry).

What fails: nothing raises. ConfigMaps with other names are ignored; two ConfigMaps with the
same namespace and name keep the first in a fixed order and report the others. Results and the
error list are sorted, so the output does not depend on the order of the input.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Any, TypeVar

from llmscaler.config.configmap_entries import ConfigMapSource, Entry
from llmscaler.config.configmaps import (
    QUEUEING_CONFIGMAP,
    SATURATION_CONFIGMAP,
    SCALE_TO_ZERO_CONFIGMAP,
    QueueingOverrides,
    SaturationOverrides,
    parse_queueing_configmap,
    parse_saturation_configmap,
    parse_scale_to_zero_configmap,
)
from llmscaler.config.errors import ConfigError, sort_errors
from llmscaler.config.layers import Layers, split_layers
from llmscaler.config.predictive import (
    PREDICTIVE_CONFIGMAP,
    PredictiveOverrides,
    parse_predictive_configmap,
)
from llmscaler.config.resolved import (
    CapacityFloor,
    Config,
    CoreSettings,
    ModelConfig,
    PredictiveConfig,
    QueueingModelConfig,
    SaturationConfig,
    ScaleToZeroConfig,
)
from llmscaler.config.service_classes import (
    SERVICE_CLASSES_CONFIGMAP,
    ClassTarget,
    parse_service_classes,
)
from llmscaler.domain.basics import group_key

if TYPE_CHECKING:
    from _typeshed import DataclassInstance


_T = TypeVar('_T', bound='DataclassInstance')
_O = TypeVar('_O', bound='DataclassInstance')

_BUILTIN = SaturationConfig()


def apply_overrides(*, base: _T, overrides: DataclassInstance) -> _T:
    """`base` with every field that `overrides` set (not None) replaced; same field names."""
    changes: dict[str, Any] = {}
    for item in fields(overrides):
        value = getattr(overrides, item.name)
        if value is not None:
            changes[item.name] = value
    return replace(base, **changes) if changes else base


def _resolve_saturation(
    chain: list[Entry[SaturationOverrides]], errors: list[ConfigError]
) -> SaturationConfig:
    config = _BUILTIN
    last_threshold: Entry[SaturationOverrides] | None = None
    for entry in chain:
        # Floors are the model's, not the analyzer's: `_AllLayers.resolve` takes them apart.
        values = replace(entry.values, capacity_floors=None)
        merged = apply_overrides(base=config, overrides=values)
        if merged.kv_cache_threshold < merged.kv_spare_trigger:
            message = (
                f'merged kvCacheThreshold {merged.kv_cache_threshold} is below kvSpareTrigger '
                f'{merged.kv_spare_trigger}; this entry is ignored'
            )
            errors.append(
                ConfigError(
                    source=entry.source,
                    key=entry.key,
                    field='kvCacheThreshold',
                    value=repr(merged.kv_cache_threshold),
                    message=message,
                )
            )
            continue
        config = merged
        values = entry.values
        if values.scale_up_threshold is not None or values.scale_down_boundary is not None:
            last_threshold = entry
    if config.scale_up_threshold <= config.scale_down_boundary and last_threshold is not None:
        message = (
            f'merged scaleUpThreshold {config.scale_up_threshold} must be greater than '
            f'scaleDownBoundary {config.scale_down_boundary}; both reset to '
            f'{_BUILTIN.scale_up_threshold}/{_BUILTIN.scale_down_boundary}'
        )
        errors.append(
            ConfigError(
                source=last_threshold.source,
                key=last_threshold.key,
                field='scaleUpThreshold',
                value=repr(config.scale_up_threshold),
                message=message,
            )
        )
        config = replace(
            config,
            scale_up_threshold=_BUILTIN.scale_up_threshold,
            scale_down_boundary=_BUILTIN.scale_down_boundary,
        )
    return config


def _resolve_slo(
    chain: Sequence[tuple[bool, QueueingOverrides]], target: ClassTarget | None
) -> QueueingModelConfig:
    """The SLO keys of the queueing or the predictive map: their entries (is it a per-model
    entry, its values), least specific first, then the model's service class."""
    config = QueueingModelConfig()
    for _, values in chain:
        config = apply_overrides(base=config, overrides=values)
    # Targets: a per-model entry > the model's service class > the `default` entries (a global
    # SLO) > inferred by the analyzer.
    own = any(per_model and values.target_ttft is not None for per_model, values in chain)
    if target is not None and not own:
        config = replace(
            config,
            target_ttft=target.ttft,
            target_itl=target.itl,
            service_class=target.service_class,
        )
    return config


@dataclass(frozen=True, slots=True)
class _AllLayers:
    saturation: Layers
    scale_to_zero: Layers
    queueing: Layers
    predictive: Layers
    class_targets: tuple[tuple[str | None, ClassTarget], ...] = ()
    """Service-class targets by the namespace of their ConfigMap (None: global)."""

    def class_target(self, model_id: str | None, namespace: str | None) -> ClassTarget | None:
        """The model's service-class targets: a namespace-local class first, then a global."""
        if model_id is None:
            return None
        for where in (namespace, None) if namespace is not None else (None,):
            for ns, target in self.class_targets:
                if ns == where and target.model_id == model_id:
                    return target
        return None

    def resolve(
        self, model_id: str | None, namespace: str | None, errors: list[ConfigError]
    ) -> ModelConfig:
        saturation = _resolve_saturation(
            self.saturation.chain(model_id=model_id, namespace=namespace), errors
        )
        scale_to_zero = ScaleToZeroConfig()
        for stz in self.scale_to_zero.chain(model_id=model_id, namespace=namespace):
            scale_to_zero = apply_overrides(base=scale_to_zero, overrides=stz.values)
        target = self.class_target(model_id, namespace)
        queueing: QueueingModelConfig | None = None
        if self.queueing.applies(namespace=namespace):
            chain = self.queueing.chain(model_id=model_id, namespace=namespace)
            queueing = _resolve_slo([(e.model_id is not None, e.values) for e in chain], target)
        predictive: PredictiveConfig | None = None
        if self.predictive.applies(namespace=namespace):
            entries: list[Entry[PredictiveOverrides]] = self.predictive.chain(
                model_id=model_id, namespace=namespace
            )
            slo = _resolve_slo([(e.model_id is not None, e.values.slo) for e in entries], target)
            predictive = PredictiveConfig(slo=slo)
            for entry in entries:
                predictive = entry.values.over(predictive)
        floors: tuple[CapacityFloor, ...] = ()
        for sat in self.saturation.chain(model_id=model_id, namespace=namespace):
            if sat.values.capacity_floors is not None:  # the most specific entry wins whole
                floors = sat.values.capacity_floors
        return ModelConfig(
            saturation=saturation,
            scale_to_zero=scale_to_zero,
            queueing=queueing,
            predictive=predictive,
            capacity_floors=floors,
        )


def _unique_sources(
    configmaps: Sequence[ConfigMapSource],
) -> tuple[list[ConfigMapSource], list[ConfigError]]:
    known = (
        SATURATION_CONFIGMAP,
        SCALE_TO_ZERO_CONFIGMAP,
        QUEUEING_CONFIGMAP,
        PREDICTIVE_CONFIGMAP,
        SERVICE_CLASSES_CONFIGMAP,
    )
    ordered = sorted(
        (cm for cm in configmaps if cm.name in known),
        key=lambda cm: (
            cm.namespace,
            cm.name,
            sorted((str(k), str(v)) for k, v in cm.data.items()),
        ),
    )
    kept: list[ConfigMapSource] = []
    errors: list[ConfigError] = []
    for cm in ordered:
        if kept and (kept[-1].namespace, kept[-1].name) == (cm.namespace, cm.name):
            errors.append(
                ConfigError(source=cm.source, message='ConfigMap given twice; one copy is used')
            )
            continue
        kept.append(cm)
    return kept, errors


def build_config(
    *,
    configmaps: Sequence[ConfigMapSource],
    settings: CoreSettings,
    controller_namespace: str,
) -> tuple[Config, tuple[ConfigError, ...]]:
    """The resolved `Config` of the scaling ConfigMaps, and every problem found in them."""
    sources, errors = _unique_sources(configmaps)
    saturation, scale_to_zero, queueing, predictive = Layers(), Layers(), Layers(), Layers()
    local_namespaces: set[str] = set()
    class_targets: list[tuple[str | None, ClassTarget]] = []
    for cm in sources:
        is_global = cm.namespace == controller_namespace
        if not is_global:
            local_namespaces.add(cm.namespace)
        layers: Layers
        if cm.name == SERVICE_CLASSES_CONFIGMAP:
            targets, class_errors = parse_service_classes(source=cm)
            class_targets.extend((None if is_global else cm.namespace, t) for t in targets)
            errors.extend(class_errors)
            continue
        if cm.name == SATURATION_CONFIGMAP:
            sat_entries, parse_errors = parse_saturation_configmap(source=cm)
            layers, split_errors = split_layers(entries=sat_entries, source=cm, is_global=is_global)
            saturation = saturation.merge(layers)
        elif cm.name == SCALE_TO_ZERO_CONFIGMAP:
            stz_entries, parse_errors = parse_scale_to_zero_configmap(source=cm)
            layers, split_errors = split_layers(entries=stz_entries, source=cm, is_global=is_global)
            scale_to_zero = scale_to_zero.merge(layers)
        elif cm.name == PREDICTIVE_CONFIGMAP:
            pred_entries, parse_errors = parse_predictive_configmap(source=cm)
            layers, split_errors = split_layers(
                entries=pred_entries, source=cm, is_global=is_global
            )
            predictive = predictive.merge(layers)
        else:
            qm_entries, parse_errors = parse_queueing_configmap(source=cm)
            layers, split_errors = split_layers(entries=qm_entries, source=cm, is_global=is_global)
            queueing = queueing.merge(layers)
        errors.extend(parse_errors)
        errors.extend(split_errors)
    every = _AllLayers(
        saturation=saturation,
        scale_to_zero=scale_to_zero,
        queueing=queueing,
        predictive=predictive,
        class_targets=tuple(class_targets),
    )
    wildcard_models: set[str] = set()
    groups: set[tuple[str, str]] = set()
    for layers in (saturation, scale_to_zero, queueing, predictive):
        for entry in layers.global_models:
            if entry.model_id is not None and entry.namespace is None:
                wildcard_models.add(entry.model_id)
            elif entry.model_id is not None and entry.namespace is not None:
                groups.add((entry.model_id, entry.namespace))
        for namespace, entry in layers.local_models:
            if entry.model_id is not None:
                groups.add((entry.model_id, namespace))
    for class_ns, class_target in class_targets:
        if class_ns is None:
            wildcard_models.add(class_target.model_id)
        else:
            groups.add((class_target.model_id, class_ns))
    groups.update((m, ns) for m in wildcard_models for ns in local_namespaces)
    config = Config(
        settings=settings,
        default=every.resolve(None, None, errors),
        by_namespace=tuple(
            (ns, every.resolve(None, ns, errors)) for ns in sorted(local_namespaces)
        ),
        by_model=tuple((m, every.resolve(m, None, errors)) for m in sorted(wildcard_models)),
        by_group=tuple(
            sorted(
                (
                    (group_key(model_id=m, namespace=ns), every.resolve(m, ns, errors))
                    for m, ns in groups
                ),
                key=lambda pair: pair[0],
            )
        ),
    )
    return config, sort_errors(errors)
