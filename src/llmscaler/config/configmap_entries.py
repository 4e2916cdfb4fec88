"""Reading one ConfigMap's entries: identity, bounded YAML, fields, size caps, errors.

Why: the three WVA ConfigMaps (`config.configmaps`) and `llmscaler-predictive-config`
(`config.predictive`) are read alike and differ only in their fields and their checks across
fields (a `MapSpec`, which those modules define). This module is the reading common to all four:
`parse_map` takes each entry's identity from its key or its fields, its YAML through the bounded
reader, each field through the map's converter, then the map's checks, and drops duplicates
across entries.

- Identity: `default` may not name a `model_id` or `namespace`; a per-model entry is recognised
  by its `model_id` (+ optional `namespace`) fields (the form of WVA's documented examples) or by
  a key of the form `{modelID}#{namespace}` (the key WVA v0.9.0 looks up; an empty namespace part
  means every namespace).
- Limits: entries are read by the bounded YAML reader (`llmscaler.config.yaml_loader`: no
  anchors or aliases, only plain data tags, 64 KiB / 32 levels / 10,000 nodes per entry); a
  whole ConfigMap may hold at most 1 MiB of data (`data_size`, as Kubernetes counts it) and
  20,000 YAML nodes in all.
- Duplicates: a second entry for one model_id and namespace loses to the first key in sort
  order. A `retention_period` over 24 h is accepted with a warning.

What fails: nothing raises for bad data. An entry with a YAML error, a refused YAML feature, a
wrong type, an unknown field, a field in the wrong kind of entry, a value its converter refuses
or fields the map's check refuses is rejected whole with a `ConfigError` naming the ConfigMap,
key, field and value (never the value of a field whose name looks secret); every valid entry
still loads. A ConfigMap over its size or node cap is rejected whole, with one error saying so.
An unexpected exception while reading one entry is that entry's error.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from llmscaler.config.errors import ConfigError, is_secret_key, show_value
from llmscaler.config.fields import Invalid, type_name
from llmscaler.config.quota import LimiterInvalid, parse_limiters
from llmscaler.config.yaml_loader import (
    CONFIGMAP_MAX_BYTES,
    CONFIGMAP_MAX_NODES,
    NodeBudget,
    YamlProblem,
    load_yaml,
)

DEFAULT_KEY = 'default'
RETENTION_WARNING_SECONDS = 24 * 3600.0

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

_O = TypeVar('_O', bound='DataclassInstance')


@dataclass(frozen=True, slots=True)
class ConfigMapSource:
    """A ConfigMap as read from the cluster or a file: its name, namespace and `data`."""

    name: str
    namespace: str
    data: Mapping[str, str]

    @property
    def source(self) -> str:
        return f'{self.namespace}/{self.name}'


@dataclass(frozen=True, slots=True)
class Entry(Generic[_O]):
    """One accepted ConfigMap entry: who it applies to and the fields it set.

    `model_id` is None for the `default` entry; `namespace` None means every namespace.
    """

    source: str
    key: str
    model_id: str | None
    namespace: str | None
    values: _O


Fields = dict[str, tuple[str, Callable[[object], object]]]
"""A map's fields: the key an entry spells, and the attribute and converter it fills."""


@dataclass(frozen=True, slots=True)
class MapSpec(Generic[_O]):
    """A map's fields (key: (attribute, converter)), the empty overrides its values fill,
    the checks across fields, and how an entry's converted fields become its values."""

    fields: Fields
    empty: _O
    check: Callable[[dict[str, object]], list[tuple[str, str, object]]]
    default_only: frozenset[str] = frozenset()
    model_only: frozenset[str] = frozenset()
    make: Callable[[dict[str, Any]], _O] | None = None
    """None: `empty` with the converted fields set, by attribute."""
    name_model: bool = False
    """A rejected per-model entry's errors end with its model (its key need not say it)."""


def _identity(
    key: str, doc: dict[object, object]
) -> tuple[str | None, str | None, list[tuple[str, str, object]]]:
    """(model_id, namespace, problems) of an entry from its key and its model_id/namespace."""
    problems: list[tuple[str, str, object]] = []
    if key == DEFAULT_KEY:
        for name in ('model_id', 'namespace'):
            if name in doc:
                problems.append((name, 'not allowed in the default entry', doc[name]))
        return None, None, problems
    namespace: str | None = None
    if 'namespace' in doc:
        raw_ns = doc['namespace']
        if raw_ns is not None and not isinstance(raw_ns, str):
            problems.append(('namespace', f'must be a string, not {type_name(raw_ns)}', raw_ns))
        namespace = (raw_ns or None) if isinstance(raw_ns, str) else None
    if 'model_id' in doc:
        raw = doc['model_id']
        if not isinstance(raw, str) or not raw:
            problems.append(('model_id', 'must be a non-empty string', raw))
            return None, None, problems
        return raw, namespace, problems
    if '#' in key and not problems:
        model_id, _, key_ns = key.rpartition('#')
        if 'namespace' in doc and (namespace or '') != key_ns:
            msg = f'differs from the namespace {key_ns!r} in the key'
            problems.append(('namespace', msg, doc['namespace']))
        if model_id:
            return model_id, key_ns or None, problems
    if not problems:
        msg = (
            "entry is neither 'default' nor a per-model override "
            "(needs a model_id field or a '{modelID}#{namespace}' key)"
        )
        problems.append(('', msg, None))
    return None, None, problems


def _parse_entry(
    spec: MapSpec[_O], source: ConfigMapSource, key: str, text: object, budget: NodeBudget
) -> tuple[Entry[_O] | None, list[ConfigError]]:
    def error(field: str, message: str, value: object = None, *, warning: bool = False) -> None:
        # A field name that looks secret keeps its value out of every message and log.
        shown = '' if value is None or is_secret_key(field) else show_value(value)
        errors.append(
            ConfigError(
                source=source.source,
                key=key,
                field=show_value(field),
                value=shown,
                message=message,
                warning=warning,
            )
        )

    errors: list[ConfigError] = []
    if not isinstance(text, str):
        error('', f'data value must be a string, not {type_name(text)}')
        return None, errors
    try:
        doc = load_yaml(text=text, budget=budget)
    except YamlProblem as exc:
        where = f' ({exc.where})' if exc.where else ''
        error('', f'YAML not accepted{where}: {exc.problem}')
        return None, errors
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        error('', f'entry must be a YAML mapping, not {type_name(doc)}', doc)
        return None, errors
    model_id, namespace, problems = _identity(key, doc)
    got: dict[str, Any] = {}
    for name in sorted(doc, key=str):
        value = doc[name]
        if name in ('model_id', 'namespace'):
            continue
        if name in spec.default_only:
            if key != DEFAULT_KEY:
                problems.append((str(name), 'allowed only in the default entry', value))
                continue
            try:
                got['limiters'] = parse_limiters(value)
            except LimiterInvalid as exc:
                problems.append((f'{name}{exc.path}', exc.message, exc.value))
            continue
        if name in spec.model_only and key == DEFAULT_KEY:
            problems.append((str(name), 'allowed only in per-model entries', value))
            continue
        field = spec.fields.get(name) if isinstance(name, str) else None
        if field is None:
            problems.append((str(name), 'unknown field', value))
            continue
        attr, convert = field
        try:
            converted = convert(value)
        except Invalid as exc:
            shown = exc.value if exc.path else value
            problems.append((f'{name}{exc.path}', exc.message, shown))
            continue
        if converted is not None:
            got[attr] = converted
    if not problems:
        problems.extend(spec.check(got))
    for field_name, message, value in problems:
        error(field_name, message, value)
    if problems:
        if spec.name_model and model_id is not None:
            where = f" (model '{show_value(model_id)}'"
            where += f" in namespace '{show_value(namespace)}')" if namespace else ')'
            errors = [replace(e, message=e.message + where) for e in errors]
        return None, errors
    retention = got.get('retention_period')
    if isinstance(retention, float) and retention > RETENTION_WARNING_SECONDS:
        text_value = doc.get('retention_period')
        error('retention_period', 'longer than 24h', text_value, warning=True)
    entry = Entry(
        source=source.source,
        key=key,
        model_id=model_id,
        namespace=namespace,
        values=replace(spec.empty, **got) if spec.make is None else spec.make(got),
    )
    return entry, errors


def data_size(*, data: Mapping[str, object]) -> int:
    """Bytes of a ConfigMap's `data`, keys and values, as Kubernetes counts them (UTF-8).

    A key or value that is not a string counts as empty (it is reported on its own)."""
    size = 0
    for key, value in data.items():
        for text in (key, value):
            if isinstance(text, str):
                size += len(text.encode('utf-8', 'surrogatepass'))
    return size


def parse_map(
    *, spec: MapSpec[_O], source: ConfigMapSource
) -> tuple[tuple[Entry[_O], ...], tuple[ConfigError, ...]]:
    """A map's accepted entries, sorted by key, and the rejected ones (module docstring)."""
    entries: list[Entry[_O]] = []
    errors: list[ConfigError] = []
    size = data_size(data=source.data)
    if size > CONFIGMAP_MAX_BYTES:
        message = f'data holds {size} bytes, over the limit of {CONFIGMAP_MAX_BYTES}; rejected'
        return (), (ConfigError(source=source.source, message=message),)
    budget = NodeBudget(total=CONFIGMAP_MAX_NODES, scope='the whole ConfigMap')
    first: dict[tuple[str | None, str | None], str] = {}
    for key in sorted(source.data):
        try:
            entry, entry_errors = _parse_entry(spec, source, key, source.data[key], budget)
        except Exception as exc:  # one entry's surprise must not cost the others
            message = f'entry could not be read ({type(exc).__name__})'
            entry, entry_errors = (
                None,
                [ConfigError(source=source.source, key=key, message=message)],
            )
        errors.extend(entry_errors)
        if budget.exhausted:
            message = f'more than {CONFIGMAP_MAX_NODES} YAML nodes in all entries; rejected'
            return (), (*errors, ConfigError(source=source.source, message=message))
        if entry is None:
            continue
        ident = (entry.model_id, entry.namespace)
        if ident in first:
            where = f'namespace {entry.namespace!r}' if entry.namespace else 'every namespace'
            message = (
                f'duplicate entry for model {entry.model_id!r} in {where}; '
                f'key {first[ident]!r} (first in sort order) is used'
            )
            errors.append(ConfigError(source=source.source, key=key, message=message))
            continue
        first[ident] = key
        entries.append(entry)
    return tuple(entries), tuple(errors)
