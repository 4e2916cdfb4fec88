"""Parsing and validation of WVA's three ConfigMaps into per-entry partial overrides.

Why: users keep their WVA ConfigMaps (seed 000, reference/wva.md §9.2) when they move to llmscaler,
so we read them with their exact names, keys, field spellings and defaults:

- `wva-saturation-scaling-config`: key `default` plus per-model entries. A per-model entry is
  recognised by its `model_id` (+ optional `namespace`) fields (seed 000 form) or by a key of the
  form `{modelID}#{namespace}` (WVA main form; an empty namespace part means every namespace).
- `wva-model-scale-to-zero-config`: `default` plus entries with `model_id`, `namespace`,
  `enable_scale_to_zero` (bool) and `retention_period` (Go duration, > 0; over 24 h warns).
- `wva-queueing-model-config`: `default{sloMultiplier > 1, tuningEnabled}` plus per-model
  `{model_id, namespace, targetTTFT, targetITL, sloMultiplier, tuningEnabled}`; the targets are
  milliseconds, both > 0 or both absent (also accepted in `default`, as a global SLO).

Each entry keeps only the fields that were explicitly present (None = absent), so that
`llmscaler.config.build` can merge layers field by field.

Deliberate deviation from WVA: an explicitly set field overrides even when it is 0 or false.
WVA merges an override only where the value is non-zero, so a per-model entry could never turn
`enableLimiter` or `scaleToZero.enabled` off, or set `queueLengthThreshold: 0`, once `default`
had set them; here `analyzers: []` also explicitly clears an inherited analyzer list.

Other choices: a duplicate per-model entry (same model_id and namespace) in one ConfigMap loses to
the first key in sort order, for all three maps (WVA does this for scale-to-zero); `limiters` is
accepted and ignored in `default` entries and an error elsewhere; YAML 1.2 exponent floats
(`1e-3`) are numbers, as in Go's YAML decoder.

What fails: nothing raises for bad data. An entry with a YAML error, a wrong type, an unknown
field, a value out of range (NaN and ±Inf are out of every range) or inconsistent fields is
rejected whole with a `ConfigError` naming the ConfigMap, key, field and value; every valid entry
still loads. Validation (wva.md §9.2): fractions in [0, 1]; queueLengthThreshold ≥ 0;
kvCacheThreshold ≥ kvSpareTrigger; priority ≥ 0; V2 thresholds in (0, 1] with up > down.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import yaml

from llmscaler.config.durations import parse_duration
from llmscaler.config.errors import ConfigError, show_value
from llmscaler.config.types import AnalyzerSpec, ScaleToZeroConfig

SATURATION_CONFIGMAP = 'wva-saturation-scaling-config'
QUEUEING_CONFIGMAP = 'wva-queueing-model-config'
SCALE_TO_ZERO_CONFIGMAP = 'wva-model-scale-to-zero-config'
DEFAULT_KEY = 'default'
RETENTION_WARNING_SECONDS = 24 * 3600.0

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

_O = TypeVar('_O', bound='DataclassInstance')


class _YamlLoader(yaml.SafeLoader):
    """SafeLoader that also reads YAML 1.2 exponent floats without a dot (`1e-3`)."""


_YamlLoader.add_implicit_resolver(
    'tag:yaml.org,2002:float',
    re.compile(r'^[-+]?[0-9][0-9_]*[eE][-+]?[0-9]+$'),
    list('-+0123456789'),
)


def load_yaml(*, text: str) -> object:
    """Parse one YAML document safely (raises yaml.YAMLError)."""
    return yaml.load(text, Loader=_YamlLoader)  # a SafeLoader subclass


def load_yaml_documents(*, text: str) -> list[object]:
    """Parse a YAML stream into its documents, empty documents dropped (raises yaml.YAMLError)."""
    docs = yaml.load_all(text, Loader=_YamlLoader)  # a SafeLoader subclass
    return [doc for doc in docs if doc is not None]


def yaml_error_text(*, error: yaml.YAMLError) -> tuple[str, str]:
    """(`line L, column C` or '', the problem) of a YAML error, for one-line messages."""
    mark = getattr(error, 'problem_mark', None)
    problem = getattr(error, 'problem', None) or str(error)
    where = f'line {mark.line + 1}, column {mark.column + 1}' if mark is not None else ''
    return where, ' '.join(str(problem).split())


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


@dataclass(frozen=True, slots=True)
class QueueingOverrides:
    """The fields one queueing-model entry set explicitly (None = not set)."""

    slo_multiplier: float | None = None
    tuning_enabled: bool | None = None
    target_ttft: float | None = None
    target_itl: float | None = None


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


class _Invalid(Exception):
    def __init__(self, message: str, *, path: str = '', value: object = None) -> None:
        super().__init__(message)
        self.message = message
        self.path = path
        self.value = value


def _number(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _Invalid(f'must be a number, not {_type_name(value)}')
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise _Invalid('must be a finite number')
    return number


def _type_name(value: object) -> str:
    names = {bool: 'a boolean', str: 'a string', list: 'a list', dict: 'a mapping'}
    if value is None:
        return 'null'
    return names.get(type(value), type(value).__name__)


def _fraction(value: object) -> float:
    number = _number(value)
    if not 0.0 <= number <= 1.0:
        raise _Invalid('must be in [0, 1]')
    return number


def _threshold(value: object) -> float:
    number = _number(value)
    if not 0.0 < number <= 1.0:
        raise _Invalid('must be in (0, 1]')
    return number


def _non_negative(value: object) -> float:
    number = _number(value)
    if number < 0:
        raise _Invalid('must be >= 0')
    return number


def _positive(value: object) -> float:
    number = _number(value)
    if number <= 0:
        raise _Invalid('must be > 0')
    return number


def _above_one(value: object) -> float:
    number = _number(value)
    if number <= 1:
        raise _Invalid('must be > 1')
    return number


def _boolean(value: object) -> bool:
    if not isinstance(value, bool):
        raise _Invalid(f'must be true or false, not {_type_name(value)}')
    return value


def _string(value: object) -> str:
    if not isinstance(value, str):
        raise _Invalid(f'must be a string, not {_type_name(value)}')
    return value


def _retention(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, str):
        if isinstance(value, int | float):
            raise _Invalid('a unit is required: write a Go duration string such as "10m"')
        raise _Invalid(f'must be a Go duration string such as "10m", not {_type_name(value)}')
    try:
        seconds = parse_duration(value)
    except ValueError as exc:
        raise _Invalid(str(exc)) from None
    if seconds <= 0:
        raise _Invalid('must be a positive duration')
    return seconds


def _scale_to_zero_block(value: object) -> bool | None:
    if not isinstance(value, dict):
        raise _Invalid(f'must be a mapping such as {{enabled: true}}, not {_type_name(value)}')
    for sub in sorted(value, key=str):
        if sub != 'enabled':
            raise _Invalid('unknown field', path=f'.{sub}', value=value[sub])
    if 'enabled' not in value:
        return None
    try:
        return _boolean(value['enabled'])
    except _Invalid as exc:
        raise _Invalid(exc.message, path='.enabled', value=value['enabled']) from None


_ANALYZER_FIELDS: dict[str, Callable[[object], object]] = {
    'name': _string,
    'type': _string,
    'enabled': _boolean,
    'score': _non_negative,
    'scaleUpThreshold': _threshold,
    'scaleDownBoundary': _threshold,
}


def _parameters(value: object) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, dict):
        raise _Invalid(f'must be a mapping, not {_type_name(value)}')
    pairs: list[tuple[str, str]] = []
    for name, item in value.items():
        if isinstance(item, bool):
            text = 'true' if item else 'false'
        elif isinstance(item, str | int | float):
            text = str(item)
        else:
            raise _Invalid('must be a string, number or boolean', path=f'.{name}', value=item)
        pairs.append((str(name), text))
    return tuple(sorted(pairs))


def _analyzer(index: int, raw: object) -> AnalyzerSpec:
    where = f'[{index}]'
    if not isinstance(raw, dict):
        raise _Invalid(f'must be a mapping, not {_type_name(raw)}', path=where, value=raw)
    got: dict[str, Any] = {}
    for name in sorted(raw, key=str):
        value = raw[name]
        if name == 'parameters':
            try:
                got['parameters'] = _parameters(value)
            except _Invalid as exc:
                path = f'{where}.parameters{exc.path}'
                raise _Invalid(exc.message, path=path, value=exc.value or value) from None
            continue
        convert = _ANALYZER_FIELDS.get(name) if isinstance(name, str) else None
        if convert is None:
            raise _Invalid('unknown field', path=f'{where}.{name}', value=value)
        try:
            got[name] = convert(value)
        except _Invalid as exc:
            raise _Invalid(exc.message, path=f'{where}.{name}', value=value) from None
    names = [str(got[k]) for k in ('name', 'type') if k in got]
    if not names or '' in names:
        raise _Invalid('needs a non-empty name (or type)', path=where, value=raw)
    if len(set(names)) > 1:
        raise _Invalid('name and type differ', path=where, value=raw)
    up, down = got.get('scaleUpThreshold'), got.get('scaleDownBoundary')
    if isinstance(up, float) and isinstance(down, float) and up <= down:
        msg = f'scaleUpThreshold {up} must be greater than scaleDownBoundary {down}'
        raise _Invalid(msg, path=where, value=raw)
    return replace(
        AnalyzerSpec(name=names[0]),
        **{
            _snake(k): v
            for k, v in got.items()
            if k in ('enabled', 'score', 'scaleUpThreshold', 'scaleDownBoundary', 'parameters')
        },
    )


def _snake(name: str) -> str:
    return re.sub(r'(?<!^)([A-Z])', r'_\1', name).lower()


def _analyzers(value: object) -> tuple[AnalyzerSpec, ...]:
    if not isinstance(value, list):
        raise _Invalid(f'must be a list, not {_type_name(value)}')
    specs = tuple(_analyzer(index, raw) for index, raw in enumerate(value))
    seen: set[str] = set()
    for index, spec in enumerate(specs):
        if spec.name in seen:
            raise _Invalid('duplicate analyzer name', path=f'[{index}]', value=spec.name)
        seen.add(spec.name)
    return specs


_Fields = dict[str, tuple[str, Callable[[object], object]]]

_SATURATION_FIELDS: _Fields = {
    'kvCacheThreshold': ('kv_cache_threshold', _fraction),
    'queueLengthThreshold': ('queue_length_threshold', _non_negative),
    'kvSpareTrigger': ('kv_spare_trigger', _fraction),
    'queueSpareTrigger': ('queue_spare_trigger', _non_negative),
    'scaleUpThreshold': ('scale_up_threshold', _threshold),
    'scaleDownBoundary': ('scale_down_boundary', _threshold),
    'priority': ('priority', _non_negative),
    'analyzerName': ('analyzer_name', _string),
    'analyzers': ('analyzers', _analyzers),
    'enableLimiter': ('enable_limiter', _boolean),
    'enableRescale': ('enable_rescale', _boolean),
    'scaleToZero': ('scale_to_zero_enabled', _scale_to_zero_block),
}
_SCALE_TO_ZERO_FIELDS: _Fields = {
    'enable_scale_to_zero': ('enabled', _boolean),
    'retention_period': ('retention_period', _retention),
}
_QUEUEING_FIELDS: _Fields = {
    'sloMultiplier': ('slo_multiplier', _above_one),
    'tuningEnabled': ('tuning_enabled', _boolean),
    'targetTTFT': ('target_ttft', _positive),
    'targetITL': ('target_itl', _positive),
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


def _check_queueing(got: dict[str, object]) -> list[tuple[str, str, object]]:
    has_ttft, has_itl = 'target_ttft' in got, 'target_itl' in got
    if has_ttft != has_itl:
        present = 'targetTTFT' if has_ttft else 'targetITL'
        value = got['target_ttft'] if has_ttft else got['target_itl']
        return [(present, 'targetTTFT and targetITL must be set together (or neither)', value)]
    return []


@dataclass(frozen=True, slots=True)
class _MapSpec(Generic[_O]):
    fields: _Fields
    empty: _O
    check: Callable[[dict[str, object]], list[tuple[str, str, object]]]
    default_only: frozenset[str] = frozenset()


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
            problems.append(('namespace', f'must be a string, not {_type_name(raw_ns)}', raw_ns))
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
    spec: _MapSpec[_O], source: ConfigMapSource, key: str, text: object
) -> tuple[Entry[_O] | None, list[ConfigError]]:
    def error(field: str, message: str, value: object = None, *, warning: bool = False) -> None:
        shown = '' if value is None else show_value(value)
        errors.append(
            ConfigError(
                source=source.source,
                key=key,
                field=field,
                value=shown,
                message=message,
                warning=warning,
            )
        )

    errors: list[ConfigError] = []
    if not isinstance(text, str):
        error('', f'data value must be a string, not {_type_name(text)}')
        return None, errors
    try:
        doc = load_yaml(text=text)
    except yaml.YAMLError as exc:
        where, problem = yaml_error_text(error=exc)
        error('', f'YAML does not parse ({where}): {problem}' if where else problem)
        return None, errors
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        error('', f'entry must be a YAML mapping, not {_type_name(doc)}', doc)
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
            elif not isinstance(value, list):
                problems.append((str(name), f'must be a list, not {_type_name(value)}', value))
            continue
        field = spec.fields.get(name) if isinstance(name, str) else None
        if field is None:
            problems.append((str(name), 'unknown field', value))
            continue
        attr, convert = field
        try:
            converted = convert(value)
        except _Invalid as exc:
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
        values=replace(spec.empty, **got),
    )
    return entry, errors


def _parse_map(
    spec: _MapSpec[_O], source: ConfigMapSource
) -> tuple[tuple[Entry[_O], ...], tuple[ConfigError, ...]]:
    entries: list[Entry[_O]] = []
    errors: list[ConfigError] = []
    first: dict[tuple[str | None, str | None], str] = {}
    for key in sorted(source.data):
        entry, entry_errors = _parse_entry(spec, source, key, source.data[key])
        errors.extend(entry_errors)
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


_SATURATION = _MapSpec(
    fields=_SATURATION_FIELDS,
    empty=SaturationOverrides(),
    check=_check_saturation,
    default_only=frozenset({'limiters'}),
)
_SCALE_TO_ZERO = _MapSpec(
    fields=_SCALE_TO_ZERO_FIELDS, empty=ScaleToZeroConfig(), check=lambda got: []
)
_QUEUEING = _MapSpec(fields=_QUEUEING_FIELDS, empty=QueueingOverrides(), check=_check_queueing)


def parse_saturation_configmap(
    *, source: ConfigMapSource
) -> tuple[tuple[Entry[SaturationOverrides], ...], tuple[ConfigError, ...]]:
    """Entries of a `wva-saturation-scaling-config`, sorted by key, and the rejected ones."""
    return _parse_map(_SATURATION, source)


def parse_scale_to_zero_configmap(
    *, source: ConfigMapSource
) -> tuple[tuple[Entry[ScaleToZeroConfig], ...], tuple[ConfigError, ...]]:
    """Entries of a `wva-model-scale-to-zero-config` (None = not set at this entry)."""
    return _parse_map(_SCALE_TO_ZERO, source)


def parse_queueing_configmap(
    *, source: ConfigMapSource
) -> tuple[tuple[Entry[QueueingOverrides], ...], tuple[ConfigError, ...]]:
    """Entries of a `wva-queueing-model-config`, sorted by key, and the rejected ones."""
    return _parse_map(_QUEUEING, source)
