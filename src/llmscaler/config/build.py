"""Resolve the ConfigMap layers into the one `Config` value the decision core reads.

Why: `Config.model()` (config/types.py) is a pure dictionary read, by_group → by_model →
by_namespace → default, so every layer must be merged here, ahead of time, into fully resolved
values. The layers, least to most specific (seed 000, reference/wva.md §9.2):

    built-in defaults < global `default` < namespace-local `default`
        < global per-model entry without namespace < global per-model entry for the namespace
        < namespace-local per-model entry

Global ConfigMaps are those in the controller namespace; a ConfigMap in any other namespace is
namespace-local and applies only to models of that namespace (its entries may omit `namespace`;
naming another namespace is an error). A per-model entry without a namespace is stored in
`by_model`, and `by_group` is also filled for that model in every namespace that has a
namespace-local ConfigMap, so the most specific layer always wins the lookup.

Merging is field by field and an explicitly set field overrides even when it is 0 or false (see
`llmscaler.config.configmaps`). Checks on merged values:
- saturation `scaleUpThreshold` ≤ `scaleDownBoundary` after merging → both reset to the built-in
  0.85 / 0.70 (as WVA does) and an error is reported;
- `kvCacheThreshold` < `kvSpareTrigger` after merging a layer → that layer is skipped whole;
- scale-to-zero `enabled`/`retention_period` stay None when no layer set them (the enforcer
  applies the rest of the chain: inline `scaleToZero.enabled` → this → `WVA_SCALE_TO_ZERO`);
- `queueing` is None unless a `wva-queueing-model-config` applies (global, or local to the
  model's namespace); then it starts from the built-in defaults;
- `service-classes-config` (`llmscaler.config.service_classes`) gives a model explicit
  targets when no per-model `wva-queueing-model-config` entry sets `targetTTFT`/`targetITL`:
  per-model queueing entry > service class (namespace-local, then global) > the queueing
  `default` entries' targets > inferred; it selects nothing by itself (`queueing` stays None
  without a queueing-model ConfigMap), and `service_class` names the class used;
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

from llmscaler.config.configmaps import (
    QUEUEING_CONFIGMAP,
    SATURATION_CONFIGMAP,
    SCALE_TO_ZERO_CONFIGMAP,
    ConfigMapSource,
    Entry,
    SaturationOverrides,
    parse_queueing_configmap,
    parse_saturation_configmap,
    parse_scale_to_zero_configmap,
)
from llmscaler.config.errors import ConfigError, sort_errors
from llmscaler.config.service_classes import (
    SERVICE_CLASSES_CONFIGMAP,
    ClassTarget,
    parse_service_classes,
)
from llmscaler.config.types import (
    Config,
    CoreSettings,
    ModelConfig,
    QueueingModelConfig,
    SaturationConfig,
    ScaleToZeroConfig,
)
from llmscaler.model import group_key

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

    from llmscaler.enforce.capacity_floors import CapacityFloor

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


@dataclass(frozen=True, slots=True)
class _Layers:
    """The accepted entries of one ConfigMap kind, split by layer."""

    global_default: tuple[Entry[Any], ...] = ()
    local_default: tuple[tuple[str, Entry[Any]], ...] = ()
    global_models: tuple[Entry[Any], ...] = ()
    local_models: tuple[tuple[str, Entry[Any]], ...] = ()

    def chain(self, model_id: str | None, namespace: str | None) -> list[Entry[Any]]:
        """The entries that apply to (model_id, namespace), least specific first."""
        chain = list(self.global_default)
        if namespace is not None:
            chain += [entry for ns, entry in self.local_default if ns == namespace]
        if model_id is None:
            return chain
        chain += [e for e in self.global_models if e.model_id == model_id and e.namespace is None]
        if namespace is None:
            return chain
        chain += [
            e for e in self.global_models if e.model_id == model_id and e.namespace == namespace
        ]
        chain += [e for ns, e in self.local_models if ns == namespace and e.model_id == model_id]
        return chain


def _split(
    entries: Sequence[Entry[_O]], source: ConfigMapSource, is_global: bool
) -> tuple[_Layers, list[ConfigError]]:
    errors: list[ConfigError] = []
    layers = _Layers()
    for entry in entries:
        if not is_global and getattr(entry.values, 'limiters', None) is not None:
            # GPU limits are the cluster's: a tenant's own ConfigMap must not lift its quota.
            message = 'limiters are read only from the global default entry; entry rejected'
            errors.append(
                ConfigError(source=source.source, key=entry.key, field='limiters', message=message)
            )
            continue
        if entry.model_id is None:
            if is_global:
                layers = replace(layers, global_default=(*layers.global_default, entry))
            else:
                pair = (source.namespace, entry)
                layers = replace(layers, local_default=(*layers.local_default, pair))
        elif is_global:
            layers = replace(layers, global_models=(*layers.global_models, entry))
        elif entry.namespace not in (None, source.namespace):
            message = f'a namespace-local ConfigMap applies only to namespace {source.namespace!r}'
            errors.append(
                ConfigError(
                    source=source.source,
                    key=entry.key,
                    field='namespace',
                    value=str(entry.namespace),
                    message=message,
                )
            )
        elif any(e.model_id == entry.model_id for _, e in layers.local_models):
            first = next(e.key for _, e in layers.local_models if e.model_id == entry.model_id)
            message = (
                f'duplicate entry for model {entry.model_id!r} in namespace '
                f'{source.namespace!r}; key {first!r} (first in sort order) is used'
            )
            errors.append(ConfigError(source=source.source, key=entry.key, message=message))
        else:
            local = replace(entry, namespace=source.namespace)
            pair = (source.namespace, local)
            layers = replace(layers, local_models=(*layers.local_models, pair))
    return layers, errors


def _merge(first: _Layers, second: _Layers) -> _Layers:
    return _Layers(
        global_default=first.global_default + second.global_default,
        local_default=first.local_default + second.local_default,
        global_models=first.global_models + second.global_models,
        local_models=first.local_models + second.local_models,
    )


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


@dataclass(frozen=True, slots=True)
class _AllLayers:
    saturation: _Layers
    scale_to_zero: _Layers
    queueing: _Layers
    queueing_global: bool
    queueing_namespaces: frozenset[str]
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
        saturation = _resolve_saturation(self.saturation.chain(model_id, namespace), errors)
        scale_to_zero = ScaleToZeroConfig()
        for stz in self.scale_to_zero.chain(model_id, namespace):
            scale_to_zero = apply_overrides(base=scale_to_zero, overrides=stz.values)
        queueing: QueueingModelConfig | None = None
        if self.queueing_global or namespace in self.queueing_namespaces:
            queueing = QueueingModelConfig()
            chain = self.queueing.chain(model_id, namespace)
            for qm in chain:
                queueing = apply_overrides(base=queueing, overrides=qm.values)
            # Targets: a per-model queueing entry > the model's service class > the queueing
            # `default` entries (a global SLO) > inferred by the analyzer.
            own = any(e.model_id is not None and e.values.target_ttft is not None for e in chain)
            target = self.class_target(model_id, namespace)
            if target is not None and not own:
                queueing = replace(
                    queueing,
                    target_ttft=target.ttft,
                    target_itl=target.itl,
                    service_class=target.service_class,
                )
        floors: tuple[CapacityFloor, ...] = ()
        for sat in self.saturation.chain(model_id, namespace):
            if sat.values.capacity_floors is not None:  # the most specific entry wins whole
                floors = sat.values.capacity_floors
        return ModelConfig(
            saturation=saturation,
            scale_to_zero=scale_to_zero,
            queueing=queueing,
            capacity_floors=floors,
        )


def _unique_sources(
    configmaps: Sequence[ConfigMapSource],
) -> tuple[list[ConfigMapSource], list[ConfigError]]:
    known = (
        SATURATION_CONFIGMAP,
        SCALE_TO_ZERO_CONFIGMAP,
        QUEUEING_CONFIGMAP,
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
    """The resolved `Config` of the three WVA ConfigMaps, and every problem found in them."""
    sources, errors = _unique_sources(configmaps)
    saturation, scale_to_zero, queueing = _Layers(), _Layers(), _Layers()
    local_namespaces: set[str] = set()
    queueing_namespaces: set[str] = set()
    queueing_global = False
    class_targets: list[tuple[str | None, ClassTarget]] = []
    for cm in sources:
        is_global = cm.namespace == controller_namespace
        if not is_global:
            local_namespaces.add(cm.namespace)
        layers: _Layers
        if cm.name == SERVICE_CLASSES_CONFIGMAP:
            targets, class_errors = parse_service_classes(source=cm)
            class_targets.extend((None if is_global else cm.namespace, t) for t in targets)
            errors.extend(class_errors)
            continue
        if cm.name == SATURATION_CONFIGMAP:
            sat_entries, parse_errors = parse_saturation_configmap(source=cm)
            layers, split_errors = _split(sat_entries, cm, is_global)
            saturation = _merge(saturation, layers)
        elif cm.name == SCALE_TO_ZERO_CONFIGMAP:
            stz_entries, parse_errors = parse_scale_to_zero_configmap(source=cm)
            layers, split_errors = _split(stz_entries, cm, is_global)
            scale_to_zero = _merge(scale_to_zero, layers)
        else:
            qm_entries, parse_errors = parse_queueing_configmap(source=cm)
            layers, split_errors = _split(qm_entries, cm, is_global)
            queueing = _merge(queueing, layers)
            queueing_global = queueing_global or is_global
            if not is_global:
                queueing_namespaces.add(cm.namespace)
        errors.extend(parse_errors)
        errors.extend(split_errors)
    every = _AllLayers(
        saturation=saturation,
        scale_to_zero=scale_to_zero,
        queueing=queueing,
        queueing_global=queueing_global,
        queueing_namespaces=frozenset(queueing_namespaces),
        class_targets=tuple(class_targets),
    )
    wildcard_models: set[str] = set()
    groups: set[tuple[str, str]] = set()
    for layers in (saturation, scale_to_zero, queueing):
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
