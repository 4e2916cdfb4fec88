"""Live reload of the scaling ConfigMaps, keeping the last good copy of each one.

Why: WVA watches its ConfigMaps and reloads them on every change (seed 000 "Configuration"),
and design.md §5 asks that a malformed ConfigMap never takes the configuration down: a typo in
an edit must leave the previous settings in force, say why, and apply the next correct edit.

What it does: `ConfigWatch.update` takes the ConfigMap objects the informer holds. Only the three
scaling ConfigMaps (`wva-saturation-scaling-config`, `wva-model-scale-to-zero-config`,
`wva-queueing-model-config`, any namespace) matter; others are ignored. Each one is checked
alone (`build_config` with just it): one with any error (warnings do not count) is rejected and
its last good copy, same namespace and name, stays in force; without one it is left out. The
accepted copies, laid over the config file's ConfigMaps (`base`; a cluster ConfigMap with the
same namespace and name replaces the file's), are resolved by `build_config`, which also applies
namespace-local over global (the controller namespace holds the global ones). A ConfigMap that
is no longer listed is gone, its last good copy with it (a file copy beneath shows again).

The file's ConfigMaps apply as they are, valid entries only, as `llmscaler decide --config`
does; their problems were reported when the file was read (`controller.options`).

What fails: nothing raises. A rejected ConfigMap is a `ConfigProblem` (its errors on one line).
Problems that reject nothing (warnings, and conflicts that only show once the ConfigMaps are
combined, such as a namespace-local kvSpareTrigger above the global kvCacheThreshold) are
reported in `warnings`. Each update reports the state of every ConfigMap, not only what changed
since the last one. Pure apart from the object's state: no I/O, no clock. Results are sorted,
so they never depend on the order of the input.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from llmscaler.config.build import build_config
from llmscaler.config.configmaps import (
    QUEUEING_CONFIGMAP,
    SATURATION_CONFIGMAP,
    SCALE_TO_ZERO_CONFIGMAP,
    ConfigMapSource,
)
from llmscaler.config.errors import ConfigError, show_value, sort_errors
from llmscaler.config.types import Config, CoreSettings

SCALING_CONFIGMAPS = (SATURATION_CONFIGMAP, SCALE_TO_ZERO_CONFIGMAP, QUEUEING_CONFIGMAP)
"""The ConfigMap names that feed `build_config`."""

_Key = tuple[str, str]


@dataclass(frozen=True, slots=True)
class ConfigProblem:
    """The problems of one ConfigMap, joined on one line."""

    namespace: str
    name: str
    message: str


@dataclass(frozen=True, slots=True)
class ConfigUpdate:
    """The outcome of one `ConfigWatch.update`."""

    config: Config
    changed: bool
    """The config differs from the one in force before this update."""
    problems: tuple[ConfigProblem, ...]
    """ConfigMaps rejected this time, sorted by namespace and name."""
    kept: tuple[str, ...]
    """`namespace/name` of the rejected ConfigMaps whose last good copy is in force, sorted."""
    warnings: tuple[ConfigProblem, ...] = ()
    """Problems of ConfigMaps in force that rejected nothing, sorted."""


def configmap_from_object(
    *, obj: object, default_namespace: str
) -> tuple[ConfigMapSource | None, tuple[ConfigError, ...]]:
    """The `ConfigMapSource` of a ConfigMap object dict, and the problems of its `data`.

    None when `obj` is not a ConfigMap with a name (nothing to report: it cannot be named). A
    `data` value or key that is not a string is left out and reported; a `data` that is not a
    mapping counts as empty and is reported. A missing namespace is `default_namespace`.
    """
    if not isinstance(obj, Mapping) or obj.get('kind', 'ConfigMap') != 'ConfigMap':
        return None, ()
    metadata = obj.get('metadata')
    if not isinstance(metadata, Mapping):
        return None, ()
    name, namespace = metadata.get('name'), metadata.get('namespace') or default_namespace
    if not isinstance(name, str) or not name or not isinstance(namespace, str):
        return None, ()
    where = f'{namespace}/{name}'
    data = obj.get('data') or {}
    errors: list[ConfigError] = []
    clean: dict[str, str] = {}
    if not isinstance(data, Mapping):
        message = 'data must be a mapping of strings'
        errors.append(ConfigError(source=where, value=show_value(data), message=message))
        data = {}
    for key in sorted(data, key=str):
        value = data[key]
        if isinstance(key, str) and isinstance(value, str):
            clean[key] = value
            continue
        message = 'ConfigMap data keys and values must be strings (quote the value)'
        errors.append(
            ConfigError(source=where, key=str(key), value=show_value(value), message=message)
        )
    return ConfigMapSource(name=name, namespace=namespace, data=clean), tuple(errors)


def _identity(configmap: ConfigMapSource) -> tuple[str, str, list[tuple[str, str]]]:
    return configmap.namespace, configmap.name, sorted(configmap.data.items())


def _first_by_key(configmaps: Iterable[ConfigMapSource]) -> dict[_Key, ConfigMapSource]:
    """One copy per (namespace, name): the first in `build_config`'s order, not the input's."""
    chosen: dict[_Key, ConfigMapSource] = {}
    for configmap in sorted(configmaps, key=_identity):
        if configmap.name in SCALING_CONFIGMAPS:
            chosen.setdefault((configmap.namespace, configmap.name), configmap)
    return chosen


def _one_line(*, key: _Key, errors: Sequence[ConfigError]) -> str:
    prefix = f'{key[0]}/{key[1]}: '
    texts = [str(error).removeprefix(prefix) for error in errors]
    return '; '.join(texts)


class ConfigWatch:
    """The ConfigMap configuration in force (see the module docstring)."""

    def __init__(
        self,
        *,
        settings: CoreSettings,
        controller_namespace: str,
        base: Sequence[ConfigMapSource] = (),
    ) -> None:
        self._settings = settings
        self._namespace = controller_namespace
        self._base = _first_by_key(base)
        self._good: dict[_Key, ConfigMapSource] = {}
        self._config, _ = self._build(self._base)

    @property
    def config(self) -> Config:
        """The configuration in force."""
        return self._config

    def _build(
        self, configmaps: Mapping[_Key, ConfigMapSource]
    ) -> tuple[Config, tuple[ConfigError, ...]]:
        ordered = [configmaps[key] for key in sorted(configmaps)]
        return build_config(
            configmaps=ordered, settings=self._settings, controller_namespace=self._namespace
        )

    def _check(self, configmap: ConfigMapSource) -> tuple[ConfigError, ...]:
        _, errors = self._build({(configmap.namespace, configmap.name): configmap})
        return errors

    def update(self, *, configmaps: Sequence[Mapping[str, Any]]) -> ConfigUpdate:
        """Apply the cluster's ConfigMaps; a rejected one keeps its last good copy in force."""
        listed: list[tuple[ConfigMapSource, tuple[ConfigError, ...]]] = []
        for obj in configmaps:
            configmap, errors = configmap_from_object(obj=obj, default_namespace=self._namespace)
            if configmap is not None and configmap.name in SCALING_CONFIGMAPS:
                listed.append((configmap, errors))
        listed.sort(key=lambda pair: (_identity(pair[0]), [str(e) for e in pair[1]]))
        good: dict[_Key, ConfigMapSource] = {}
        problems: list[ConfigProblem] = []
        kept: list[str] = []
        seen: set[_Key] = set()
        for configmap, shape_errors in listed:
            key = (configmap.namespace, configmap.name)
            if key in seen:  # an informer holds one object per key; be deterministic anyway
                continue
            seen.add(key)
            found = [e for e in (*shape_errors, *self._check(configmap)) if not e.warning]
            if not found:
                good[key] = configmap
                continue
            message = _one_line(key=key, errors=found)
            problems.append(ConfigProblem(namespace=key[0], name=key[1], message=message))
            if key in self._good:
                good[key] = self._good[key]
                kept.append(f'{key[0]}/{key[1]}')
        self._good = good
        config, combined = self._build({**self._base, **good})
        changed = config != self._config
        self._config = config
        return ConfigUpdate(
            config=config,
            changed=changed,
            problems=tuple(sorted(problems, key=lambda p: (p.namespace, p.name))),
            kept=tuple(sorted(kept)),
            warnings=self._warnings(combined, good),
        )

    def _warnings(
        self, errors: Sequence[ConfigError], good: Mapping[_Key, ConfigMapSource]
    ) -> tuple[ConfigProblem, ...]:
        """Problems of the combined build, for the cluster ConfigMaps in force only.

        The file's ConfigMaps were reported when the file was read; repeating them on every
        update would bury the cluster's.
        """
        by_key: dict[_Key, list[ConfigError]] = {}
        for error in sort_errors(list(errors)):
            namespace, _, name = error.source.partition('/')
            if (namespace, name) in good:
                by_key.setdefault((namespace, name), []).append(error)
        return tuple(
            ConfigProblem(namespace=key[0], name=key[1], message=_one_line(key=key, errors=found))
            for key, found in sorted(by_key.items())
        )
