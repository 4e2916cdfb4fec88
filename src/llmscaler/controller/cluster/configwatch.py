"""Live reload of the scaling ConfigMaps, keeping the last good copy of each one.

Why: WVA watches its ConfigMaps and reloads them on every change (v0.9.0, the ConfigMap reconciler
in internal/controller/), and llmscaler's safety rules ask that a malformed ConfigMap never takes
the configuration down: a typo in an edit must leave the previous settings in force, say why, and
apply the next correct edit.

What it does: `ConfigWatch.update` takes the ConfigMap objects the informer holds. Only the five
scaling ConfigMaps (`wva-saturation-scaling-config`, `wva-model-scale-to-zero-config`,
`wva-queueing-model-config`, `llmscaler-predictive-config`, `service-classes-config`, any
namespace) matter; others are ignored. Each one is checked
alone (`build_config` with just it): one with any error (warnings do not count) is rejected and
its last good copy, same namespace and name, stays in force; without one it is left out. The
accepted copies, laid over the config file's ConfigMaps (`base`; a cluster ConfigMap with the
same namespace and name replaces the file's), are resolved by `build_config`, which also applies
namespace-local over global (the controller namespace holds the global ones). A ConfigMap that
is no longer listed is gone, its last good copy with it (a file copy beneath shows again).

The file's ConfigMaps apply as they are, valid entries only, as `llmscaler decide --config`
does; their problems were reported when the file was read (`controller.options.resolve`).

What fails: nothing raises, whatever the objects hold. A rejected ConfigMap is a `ConfigProblem`
(its errors on one line, at most `MAX_MESSAGE_CHARS` characters, so that it fits an Event note).
Any failure while reading one ConfigMap, an unexpected exception included, is that ConfigMap's
problem: its last good copy stays and every other ConfigMap still applies. Reading is bounded
(`llmscaler.config.yaml_loader`: size, depth and node caps, no aliases), and a ConfigMap whose
content has not changed since the last update is not read again. Should combining the accepted
copies fail unexpectedly, the configuration in force stays and the ConfigMaps that changed are
reported. Data values are never shown for keys that look secret.
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
from llmscaler.config.configmap_entries import ConfigMapSource
from llmscaler.config.configmaps import (
    QUEUEING_CONFIGMAP,
    SATURATION_CONFIGMAP,
    SCALE_TO_ZERO_CONFIGMAP,
)
from llmscaler.config.errors import ConfigError, show_setting, show_value, sort_errors
from llmscaler.config.predictive import PREDICTIVE_CONFIGMAP
from llmscaler.config.resolved import Config, CoreSettings
from llmscaler.config.service_classes import SERVICE_CLASSES_CONFIGMAP

SCALING_CONFIGMAPS = (
    SATURATION_CONFIGMAP,
    SCALE_TO_ZERO_CONFIGMAP,
    QUEUEING_CONFIGMAP,
    PREDICTIVE_CONFIGMAP,
    SERVICE_CLASSES_CONFIGMAP,
)
"""The ConfigMap names that feed `build_config`."""

MAX_MESSAGE_CHARS = 900
"""Longest `ConfigProblem.message` (an Event note holds at most 1 KiB)."""

_Key = tuple[str, str]
_Identity = tuple[str, str, list[tuple[str, str]]]


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
            ConfigError(
                source=where,
                key=show_value(key),
                value=show_setting(key, value),
                message=message,
            )
        )
    return ConfigMapSource(name=name, namespace=namespace, data=clean), tuple(errors)


def _named(obj: object, default_namespace: str) -> _Key | None:
    """(namespace, name) of a scaling ConfigMap object, as far as it can be told, or None."""
    try:
        metadata = obj.get('metadata') if isinstance(obj, Mapping) else None
        if not isinstance(metadata, Mapping):
            return None
        name, namespace = metadata.get('name'), metadata.get('namespace') or default_namespace
    except Exception:  # an object that cannot even be named cannot be reported
        return None
    if name in SCALING_CONFIGMAPS and isinstance(namespace, str):
        return namespace, str(name)
    return None


def _identity(configmap: ConfigMapSource) -> _Identity:
    return configmap.namespace, configmap.name, sorted(configmap.data.items())


def _first_by_key(configmaps: Iterable[ConfigMapSource]) -> dict[_Key, ConfigMapSource]:
    """One copy per (namespace, name): the first in `build_config`'s order, not the input's."""
    chosen: dict[_Key, ConfigMapSource] = {}
    for configmap in sorted(configmaps, key=_identity):
        if configmap.name in SCALING_CONFIGMAPS:
            chosen.setdefault((configmap.namespace, configmap.name), configmap)
    return chosen


def _one_line(*, key: _Key, errors: Sequence[ConfigError]) -> str:
    """The errors of one ConfigMap on one line, cut at `MAX_MESSAGE_CHARS` with a count."""
    prefix = f'{key[0]}/{key[1]}: '
    shown: list[str] = []
    size = 0
    for index, error in enumerate(errors):
        text = str(error).removeprefix(prefix)
        rest = len(errors) - index
        if shown and size + len(text) + 2 > MAX_MESSAGE_CHARS - 30:
            shown.append(f'... and {rest} more problem{"s" if rest > 1 else ""}')
            break
        if len(text) > MAX_MESSAGE_CHARS - 30:
            text = text[: MAX_MESSAGE_CHARS - 33] + '...'
        shown.append(text)
        size += len(text) + 2
    return '; '.join(shown)


def _unexpected(key: _Key, exc: Exception, *, what: str = 'read') -> ConfigError:
    # Only the exception's type: its text could quote a value of the ConfigMap.
    message = f'could not be {what} (unexpected {type(exc).__name__}); not applied'
    return ConfigError(source=f'{key[0]}/{key[1]}', message=message)


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
        self._verdicts: dict[_Key, tuple[_Identity, tuple[ConfigError, ...]]] = {}
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
        """The problems of one ConfigMap alone; unchanged content is not read again."""
        key = (configmap.namespace, configmap.name)
        identity = _identity(configmap)
        cached = self._verdicts.get(key)
        if cached is not None and cached[0] == identity:
            return cached[1]
        try:
            _, errors = self._build({key: configmap})
        except Exception as exc:  # that ConfigMap's problem, not the watch's
            errors = (_unexpected(key, exc),)
        self._verdicts[key] = (identity, errors)
        return errors

    def _read(
        self, configmaps: Sequence[Mapping[str, Any]]
    ) -> tuple[list[tuple[ConfigMapSource, tuple[ConfigError, ...]]], dict[_Key, ConfigError]]:
        """The scaling ConfigMaps listed, with their shape problems, and those that could not
        even be read into a `ConfigMapSource` (by namespace and name)."""
        listed: list[tuple[ConfigMapSource, tuple[ConfigError, ...]]] = []
        unreadable: dict[_Key, ConfigError] = {}
        for obj in configmaps:
            try:
                configmap, errors = configmap_from_object(
                    obj=obj, default_namespace=self._namespace
                )
            except Exception as exc:  # one odd object must not cost the others
                key = _named(obj, self._namespace)
                if key is not None:
                    unreadable.setdefault(key, _unexpected(key, exc))
                continue
            if configmap is not None and configmap.name in SCALING_CONFIGMAPS:
                listed.append((configmap, errors))
        listed.sort(key=lambda pair: (_identity(pair[0]), [str(e) for e in pair[1]]))
        return listed, unreadable

    def update(self, *, configmaps: Sequence[Mapping[str, Any]]) -> ConfigUpdate:
        """Apply the cluster's ConfigMaps; a rejected one keeps its last good copy in force."""
        listed, unreadable = self._read(configmaps)
        good: dict[_Key, ConfigMapSource] = {}
        rejected: dict[_Key, list[ConfigError]] = {}
        for configmap, shape_errors in listed:
            key = (configmap.namespace, configmap.name)
            if key in good or key in rejected:
                continue  # an informer holds one object per key; be deterministic anyway
            found = [e for e in (*shape_errors, *self._check(configmap)) if not e.warning]
            if found:
                rejected[key] = found
            else:
                good[key] = configmap
        for key, error in unreadable.items():
            if key not in good and key not in rejected:
                rejected[key] = [error]
        self._verdicts = {
            key: self._verdicts[key]
            for key in sorted(self._verdicts)
            if key in good or key in rejected
        }
        for key in rejected:
            if key in self._good:
                good[key] = self._good[key]
        try:
            config, combined = self._build({**self._base, **good})
        except Exception as exc:  # keep what is in force; blame what changed
            return self._unchanged(good=good, rejected=rejected, exc=exc)
        problems = [
            ConfigProblem(namespace=key[0], name=key[1], message=_one_line(key=key, errors=found))
            for key, found in sorted(rejected.items())
        ]
        kept = [f'{key[0]}/{key[1]}' for key in sorted(rejected) if key in self._good]
        self._good = good
        changed = config != self._config
        self._config = config
        return ConfigUpdate(
            config=config,
            changed=changed,
            problems=tuple(problems),
            kept=tuple(kept),
            warnings=self._warnings(combined, good),
        )

    def _unchanged(
        self,
        *,
        good: Mapping[_Key, ConfigMapSource],
        rejected: Mapping[_Key, list[ConfigError]],
        exc: Exception,
    ) -> ConfigUpdate:
        """The update when the accepted copies could not be combined: nothing changes, and
        every ConfigMap that differs from the copies in force is reported."""
        found = {key: list(errors) for key, errors in rejected.items()}
        for key in sorted(set(good) | set(self._good)):
            if good.get(key) != self._good.get(key):
                error = _unexpected(key, exc, what='combined with the other ConfigMaps')
                found.setdefault(key, []).append(error)
        problems = tuple(
            ConfigProblem(namespace=key[0], name=key[1], message=_one_line(key=key, errors=errors))
            for key, errors in sorted(found.items())
        )
        kept = tuple(f'{key[0]}/{key[1]}' for key in sorted(found) if key in self._good)
        return ConfigUpdate(config=self._config, changed=False, problems=problems, kept=kept)

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
