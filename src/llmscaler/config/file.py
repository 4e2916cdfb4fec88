"""The `--config FILE` of the CLI: settings and ConfigMaps from one YAML or JSON file.

Why: offline use (`llmscaler decide`, `simulate`) and tests need the cluster's configuration
without a cluster. The file is parsed as YAML, which also covers JSON, and may take two forms:

(a) a mapping `{settings: {KEY: value, ...}, configMaps: [<ConfigMap objects>]}` (both optional);
(b) ConfigMap objects as `kubectl get cm -o yaml` prints them: one or more YAML documents, each a
    ConfigMap or a `kind: List` of them (a bare top-level list, the JSON habit, is accepted too).
    Settings then come from the environment only (plus the manager ConfigMap, below).

A ConfigMap object has `metadata.name`, `metadata.namespace` (default: the controller namespace)
and `data`. Only the scaling ConfigMaps (WVA's, `service-classes-config` and
`llmscaler-predictive-config`) are used by `build_config`; `wva-manager-config` and
`llmscaler-config` in the controller namespace feed the ConfigMap layer of `load_settings` (keys of
`llmscaler-config` win over `wva-manager-config`), either as data keys or as a YAML file held
under a `*.yaml` key (WVA mounts its manager ConfigMap as `config.yaml`); every other ConfigMap
is ignored, so a whole `kubectl get cm -A -o yaml` dump can be given. An empty file is an empty
configuration. Precedence of settings: env > file `settings` >
manager ConfigMap > defaults (the CLI layer is applied by the caller).

`env=None` reads the process environment; pass a mapping to stay independent of it.

What fails: a file that does not exist, cannot be read, is larger than 16 MiB, is not UTF-8, is
not accepted by the bounded YAML reader (`llmscaler.config.yaml_loader`, `FILE_LIMITS`: syntax,
anchors/aliases, tags other than plain data, nesting over 64 levels, over 200,000 nodes, a
number over 64 characters), or whose top level has the wrong shape raises `ConfigFileError`
with one line `<path>: <where>: <why>`; so does any unexpected failure while reading it.
Problems inside it (a malformed ConfigMap object, a non-string data value, a bad entry or
setting) are returned as `ConfigError`s and the valid rest loads. The value of a setting or
data key that is unknown or looks secret is never part of a message.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from llmscaler.config.build import build_config
from llmscaler.config.configmap_entries import ConfigMapSource
from llmscaler.config.configmaps import (
    QUEUEING_CONFIGMAP,
    SATURATION_CONFIGMAP,
    SCALE_TO_ZERO_CONFIGMAP,
)
from llmscaler.config.errors import ConfigError, ConfigFileError, show_setting, show_value
from llmscaler.config.predictive import PREDICTIVE_CONFIGMAP
from llmscaler.config.resolved import Config
from llmscaler.config.service_classes import SERVICE_CLASSES_CONFIGMAP
from llmscaler.config.settings import load_settings
from llmscaler.config.yaml_loader import FILE_LIMITS, YamlProblem, load_yaml_documents

MANAGER_CONFIGMAPS = ('wva-manager-config', 'llmscaler-config')
"""Manager-settings ConfigMaps, lowest precedence first."""

_SCALING_CONFIGMAPS = (
    SATURATION_CONFIGMAP,
    SCALE_TO_ZERO_CONFIGMAP,
    QUEUEING_CONFIGMAP,
    PREDICTIVE_CONFIGMAP,
    SERVICE_CLASSES_CONFIGMAP,
)
_FORM_A_KEYS = frozenset({'settings', 'configMaps'})


def _read(path: str) -> str:
    cap = FILE_LIMITS.max_bytes
    try:
        with open(path, 'rb') as handle:
            raw = handle.read(cap + 1)  # never more than the cap in memory
    except FileNotFoundError:
        raise ConfigFileError(path=path, where='open', why='no such file') from None
    except IsADirectoryError:
        raise ConfigFileError(path=path, where='open', why='is a directory') from None
    except OSError as exc:
        why = exc.strerror or str(exc)
        raise ConfigFileError(path=path, where='open', why=why) from None
    if len(raw) > cap:
        raise ConfigFileError(path=path, where='size', why=f'larger than {cap} bytes')
    try:
        return raw.decode('utf-8-sig')
    except UnicodeDecodeError as exc:
        why = 'not UTF-8 text'
        raise ConfigFileError(path=path, where=f'byte offset {exc.start}', why=why) from None


def _documents(path: str, text: str) -> list[object]:
    try:
        return load_yaml_documents(text=text, limits=FILE_LIMITS)
    except YamlProblem as exc:
        why = f'does not parse as YAML: {exc.problem}'
        raise ConfigFileError(path=path, where=exc.where or 'YAML', why=why) from None


def _shape(
    path: str, docs: list[object]
) -> tuple[Mapping[object, object], list[tuple[str, object]]]:
    """(the `settings` mapping, [(where, ConfigMap object)]) or ConfigFileError."""
    if len(docs) == 1 and isinstance(docs[0], list):
        return {}, [(f'[{i}]', obj) for i, obj in enumerate(docs[0])]
    if len(docs) == 1 and isinstance(docs[0], dict) and 'kind' not in docs[0]:
        top = docs[0]
        unknown = sorted(str(key) for key in top if key not in _FORM_A_KEYS)
        if unknown:
            why = (
                f'unknown top-level key {unknown[0]!r}; expected settings and configMaps, '
                'or ConfigMap objects'
            )
            raise ConfigFileError(path=path, where='top level', why=why)
        settings = top.get('settings') or {}
        if not isinstance(settings, dict):
            raise ConfigFileError(path=path, where='settings', why='must be a mapping')
        objects = top.get('configMaps') or []
        if not isinstance(objects, list):
            raise ConfigFileError(path=path, where='configMaps', why='must be a list')
        return settings, [(f'configMaps[{i}]', obj) for i, obj in enumerate(objects)]
    found: list[tuple[str, object]] = []
    for number, doc in enumerate(docs, start=1):
        where = f'document {number}'
        kind = doc.get('kind') if isinstance(doc, dict) else None
        if not isinstance(doc, dict) or kind is None:
            why = 'expected a ConfigMap, a List of ConfigMaps, or {settings, configMaps}'
            raise ConfigFileError(path=path, where=where, why=why)
        if kind == 'List':
            items = doc.get('items') or []
            if not isinstance(items, list):
                raise ConfigFileError(path=path, where=f'{where}: items', why='must be a list')
            found.extend((f'{where}: items[{i}]', item) for i, item in enumerate(items))
        else:
            found.append((where, doc))
    return {}, found


def _configmap(
    path: str, where: str, obj: object, controller_namespace: str
) -> tuple[ConfigMapSource | None, list[ConfigError]]:
    def problem(message: str, value: object = None) -> tuple[None, list[ConfigError]]:
        shown = '' if value is None else show_value(value)
        return None, [ConfigError(source=path, key=where, value=shown, message=message)]

    if not isinstance(obj, dict):
        return problem('not a ConfigMap object (expected a mapping)', obj)
    kind = obj.get('kind', 'ConfigMap')
    if kind != 'ConfigMap':
        return problem(f"not a ConfigMap (kind '{show_value(kind)}'); ignored")
    metadata = obj.get('metadata')
    if not isinstance(metadata, dict):
        return problem('metadata is missing')
    name = metadata.get('name')
    if not isinstance(name, str) or not name:
        return problem('metadata.name is missing')
    namespace = metadata.get('namespace') or controller_namespace
    if not isinstance(namespace, str):
        return problem('metadata.namespace must be a string', namespace)
    if name not in _SCALING_CONFIGMAPS and name not in MANAGER_CONFIGMAPS:
        return None, []
    data = obj.get('data') or {}
    if not isinstance(data, dict):
        return problem(f'{namespace}/{name}: data must be a mapping', data)
    clean: dict[str, str] = {}
    errors: list[ConfigError] = []
    for key in sorted(data, key=str):
        value = data[key]
        if isinstance(key, str) and isinstance(value, str):
            clean[key] = value
            continue
        errors.append(
            ConfigError(
                source=f'{namespace}/{name}',
                key=show_value(key),
                value=show_setting(key, value),
                message='ConfigMap data keys and values must be strings (quote the value)',
            )
        )
    return ConfigMapSource(name=name, namespace=namespace, data=clean), errors


def _setting_text(value: object) -> str:
    if isinstance(value, bool):
        return 'true' if value else 'false'
    return str(value)


def _manager_settings(configmap: ConfigMapSource) -> tuple[dict[str, str], list[ConfigError]]:
    """Settings of a manager ConfigMap: its keys, or the YAML file held under a `*.yaml` key.

    WVA mounts `wva-manager-config` as `config.yaml`; env-style ConfigMaps hold the keys
    directly. Keys given directly win over the same key inside an embedded file.
    """
    embedded: dict[str, str] = {}
    direct: dict[str, str] = {}
    errors: list[ConfigError] = []
    for key in sorted(configmap.data):
        text = configmap.data[key]
        if not key.endswith(('.yaml', '.yml', '.json')):
            direct[key] = text
            continue
        try:
            docs = load_yaml_documents(text=text)
        except YamlProblem as exc:
            where = f' ({exc.where})' if exc.where else ''
            message = f'YAML not accepted{where}: {exc.problem}'
            errors.append(ConfigError(source=configmap.source, key=key, message=message))
            continue
        if len(docs) > 1 or (docs and not isinstance(docs[0], dict)):
            message = 'an embedded settings file must be one YAML mapping'
            errors.append(ConfigError(source=configmap.source, key=key, message=message))
            continue
        for doc in docs:
            if isinstance(doc, dict):
                embedded.update({str(k): _setting_text(v) for k, v in doc.items()})
    return {**embedded, **direct}, errors


@dataclass(frozen=True, slots=True)
class ConfigFile:
    """Everything a config file holds, resolved.

    `manager` maps every manager key found to (text, source): keys of the file's `settings`
    over those of the manager ConfigMaps (`MANAGER_CONFIGMAPS`, later ones over earlier ones), the
    precedence `load_settings` applies; the controller reads its own keys (Prometheus connection,
    scale-from-zero concurrency) from it. `scaling` holds the scaling ConfigMaps as read.
    """

    config: Config
    errors: tuple[ConfigError, ...]
    scaling: tuple[ConfigMapSource, ...]
    manager: Mapping[str, tuple[str, str]]


def read_config_file(
    *,
    path: str,
    controller_namespace: str = 'workload-variant-autoscaler-system',
    env: Mapping[str, str] | None = None,
) -> ConfigFile:
    """Read the file at `path`: its `Config`, every problem, and its parts (see `ConfigFile`).

    Raises ConfigFileError when the file cannot be read or is not a config file at all.
    """
    try:
        return _read_config_file(path=path, controller_namespace=controller_namespace, env=env)
    except ConfigFileError:
        raise
    except Exception as exc:  # the caller's contract: an unusable file is one ConfigFileError
        why = f'cannot be read (unexpected {type(exc).__name__})'
        raise ConfigFileError(path=path, where='content', why=why) from None


def _read_config_file(
    *, path: str, controller_namespace: str, env: Mapping[str, str] | None
) -> ConfigFile:
    docs = _documents(path, _read(path))
    file_settings, objects = _shape(path, docs)
    errors: list[ConfigError] = []
    scaling: list[ConfigMapSource] = []
    manager: dict[str, str] = {}
    managers: dict[str, ConfigMapSource] = {}
    for where, obj in objects:
        configmap, problems = _configmap(path, where, obj, controller_namespace)
        errors.extend(problems)
        if configmap is None:
            continue
        if configmap.name in _SCALING_CONFIGMAPS:
            scaling.append(configmap)
        elif configmap.namespace != controller_namespace:
            errors.append(
                ConfigError(
                    source=configmap.source,
                    message=f'manager settings are read only from namespace '
                    f'{controller_namespace!r}; ignored',
                )
            )
        elif configmap.name in managers:
            errors.append(ConfigError(source=configmap.source, message='given twice; first used'))
        else:
            managers[configmap.name] = configmap
    sourced: dict[str, tuple[str, str]] = {}
    for name in MANAGER_CONFIGMAPS:
        if name in managers:
            found, problems = _manager_settings(managers[name])
            manager.update(found)
            sourced.update({key: (text, managers[name].source) for key, text in found.items()})
            errors.extend(problems)
    file_source = f'{path}: settings'
    for key, value in file_settings.items():
        if value is not None:
            sourced[str(key)] = (_setting_text(value), file_source)
    settings, settings_errors = load_settings(
        cli={},
        env=dict(os.environ) if env is None else env,
        file={str(key): value for key, value in file_settings.items()},
        configmap=manager,
        file_source=file_source,
        configmap_source=f'{controller_namespace}/{"+".join(sorted(managers)) or "manager"}',
    )
    config, build_errors = build_config(
        configmaps=scaling, settings=settings, controller_namespace=controller_namespace
    )
    return ConfigFile(
        config=config,
        errors=(*errors, *settings_errors, *build_errors),
        scaling=tuple(scaling),
        manager=dict(sorted(sourced.items())),
    )


def load_config_file(
    *,
    path: str,
    controller_namespace: str = 'workload-variant-autoscaler-system',
    env: Mapping[str, str] | None = None,
) -> tuple[Config, tuple[ConfigError, ...]]:
    """The `Config` described by the file at `path`, and every entry-level problem in it."""
    read = read_config_file(path=path, controller_namespace=controller_namespace, env=env)
    return read.config, read.errors
